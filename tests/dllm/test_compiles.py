"""A task unit of the POKE-SMC study compiles no XLA program twice (the quick preset's too).

Programs are told apart by JAX's persistent-cache key (a hash of the lowered module, its
compile options and the backend), which ``jax._src.compiler`` logs for every program it
compiles or loads while the persistent compilation cache is on (as in the test run);
``experiments.lib.compile_cache.tally`` records them.
"""

import json
import os

import jax
import pytest

from experiments import dllm as exp
from experiments.configs import dllm as dllm_config
from experiments.lib import compile_cache, study
from jaxlab.core import checks
from tests.notebooks import assert_each_program_built_once


@pytest.mark.heavy
def test_a_task_unit_compiles_no_program_twice(tmp_path):
    """The addition unit (shipped models) with validation tuning of the output selection:
    the decoders built for tuning and for the test run share their programs when their
    settings agree, and the task's verifier (a ``lax.scan``) compiles once per shape."""
    if not jax.config.jax_compilation_cache_dir:
        pytest.skip("needs JAX's persistent compilation cache (it names each program)")
    c = dllm_config.get_config("quick")
    c.tasks, c.sale.task = ("addition",), ""
    c.decoders = ("confidence", "semi_ar", "poke_smc")
    c.num_problems = c.eval_batch = 8
    c.bootstrap = 20
    c.protocol.update(validation_problems=8, tune_particles=(4,),
                      selections=("path_ll", "weight"), rank_fractions=(0.5,))
    c.poke.rollouts = 32
    unit = next(u for u in exp._units(c, str(tmp_path)) if u.name == "addition")
    ctx = study.Context(unit.name, "k", str(tmp_path), str(tmp_path / "ck"))
    t0 = compile_cache.tally()
    # Unchecked, as the study binaries run (a checked body's host callback makes every
    # trace a new program).
    with checks(False):
        result = unit.run(ctx)
    assert set(result["decoders"]) == {"confidence", "semi_ar", "poke_smc_4"}
    done = compile_cache.tally() - t0
    # Every program the tally counted was seen with its key (the check cannot go blind).
    assert len(done.keys) == done.programs > 0
    assert not done.duplicates, f"programs compiled more than once: {done.duplicates}"


@pytest.mark.heavy
def test_the_quick_preset_builds_each_program_once_per_unit(tmp_path):
    """The quick preset's units (its task and decoders, the shipped models) at the smoke
    preset's problem counts, run as the suite runs them: every declared comparison, the
    figures, and no unit builds any program twice (no floor: not even a millisecond one)."""
    if not jax.config.jax_compilation_cache_dir:
        pytest.skip("needs JAX's persistent compilation cache (it names each program)")
    c, smoke = dllm_config.get_config("quick"), dllm_config.get_config("smoke")
    c.num_problems, c.eval_batch = smoke.num_problems, smoke.eval_batch
    c.bootstrap, c.poke.rollouts = smoke.bootstrap, smoke.poke.rollouts
    c.protocol.validation_problems = smoke.protocol.validation_problems
    with checks(False):  # as the study binaries run
        summary = study.train_and_evaluate(exp.EXPERIMENT, c, str(tmp_path))
    assert set(summary["tasks"]) == set(c.tasks)
    for t in summary["tasks"].values():
        for n in c.particles:
            assert set(t["declared"]) == set(exp.DECLARED_RIVALS)
            assert all(str(n) in t["declared"][r] for r in exp.DECLARED_RIVALS)
            assert str(n) in t["comparison"] and str(n) in t["preconditions"]
    for f in ("accuracy_vs_nfe.png", "path_ll_vs_accuracy.png", "smc_diagnostics.png"):
        assert os.path.getsize(tmp_path / f) > 1000, f
    with open(tmp_path / "timing.json") as f:
        units = json.load(f)["units"]
    assert set(units) == {*c.tasks, "(summary and plots)"}
    assert all(units[t]["compiles"] + units[t]["cache_hits"] > 0 for t in c.tasks)
    assert_each_program_built_once(tmp_path, floor_s=None)
