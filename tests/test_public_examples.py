"""The runnable examples in the docstrings of the public own-problem API run as doctests."""

import doctest
import importlib

import pytest

EXAMPLES = [
    ("jaxlab.dllm.tasks", "check_task"), ("jaxlab.dllm.tasks", "register_task"),
    ("jaxlab.dllm.tasks", "make_task"), ("jaxlab.dllm.config", "decoder_selection"),
    ("jaxlab.dllm.evaluation", "particle_correctness"), ("jaxlab.dllm.evaluation", "pass_at_n"),
    ("jaxlab.dllm.evaluation", "pass_at_k"), ("jaxlab.dllm.evaluation", "best_of_n_correct"),
    ("jaxlab.bco.losses", "loss_sequence"), ("jaxlab.bco.learners", "step_rule"),
    ("jaxlab.gepc.baselines", "fit"), ("jaxlab.gepc.baselines", "score"),
    ("jaxlab.gepc.ood", "auroc_with_ci"),
    ("jaxlab.rfo.envs", "fused_bodies"), ("jaxlab.rfo.envs", "new_task"),
    ("jaxlab.rfo.train", "check_nonfinite_grad_share"),
    ("jaxlab.attention.attention", "attention"),
    ("pallas_kernels.sale.estimate", "kept_block_mask"),
    ("experiments.lib.events", "tag_name"),
    ("jaxlab.core.checked", "raise_check_errors"),
]


@pytest.mark.heavy
@pytest.mark.parametrize("module,name", EXAMPLES, ids=[f"{m}.{n}" for m, n in EXAMPLES])
def test_docstring_example_runs(module, name):
    obj = getattr(importlib.import_module(module), name)
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    assert tests and tests[0].examples, f"{module}.{name} has no example"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t)
    assert runner.summarize(verbose=False).failed == 0
