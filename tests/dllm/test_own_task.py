"""A user's task through the public registration call and the config's ``task_refs``; the
decoder subset of the study (``config.decoders``)."""

import numpy as np
import pytest

from experiments import dllm as exp
from experiments import dllm_models
from experiments.configs import dllm as dllm_configs
from jaxlab.dllm import config as config_lib
from jaxlab.dllm import tasks
from tests.dllm import user_task

REF = "tests.dllm.user_task:Reverse"


@pytest.fixture
def clean_registry():
    before = dict(tasks.TASKS)
    yield
    tasks.TASKS.clear()
    tasks.TASKS.update(before)


def _np_reverse_ok(prompt, answer):
    return np.all(np.asarray(answer) == np.asarray(prompt)[:, ::-1], axis=1)


def test_register_task_builds_with_kwargs_and_verifies(clean_registry):
    import jax

    tasks.register_task("rev", user_task.Reverse)
    t = tasks.make_task("rev", length=6)
    assert (t.prompt_len, t.answer_len, t.mask_id) == (6, 6, 4)
    prompt, answer = t.sample(jax.random.key(0), 8)
    assert np.all(np.asarray(t.verify(prompt, answer)))
    wrong = np.asarray(answer).copy()
    wrong[:, 0] = (wrong[:, 0] + 1) % 4
    np.testing.assert_array_equal(t.verify(prompt, wrong), _np_reverse_ok(prompt, wrong))
    assert "rev" in tasks.task_names()
    tasks.register_task("rev", user_task.Reverse)  # same factory again: a no-op
    with pytest.raises(ValueError, match="already registered"):
        tasks.register_task("rev", lambda: user_task.Reverse(2))
    tasks.register_task("rev", lambda: user_task.Reverse(2), overwrite=True)
    assert tasks.make_task("rev").length == 2
    tasks.unregister_task("rev")
    with pytest.raises(ValueError, match="unknown task 'rev'"):
        tasks.make_task("rev")


@pytest.mark.parametrize("name", ["", "a:b", "a.b", "a b", 3])
def test_bad_task_names_are_rejected(name, clean_registry):
    with pytest.raises(ValueError, match="`name` must be"):
        tasks.register_task(name, user_task.Reverse)


@pytest.mark.parametrize("name", ["sudoku", "countdown_hard"])
def test_shipped_tasks_cannot_be_replaced_or_removed(name, clean_registry):
    with pytest.raises(ValueError, match="shipped task"):
        tasks.register_task(name, user_task.Reverse, overwrite=True)
    with pytest.raises(ValueError, match="shipped task"):
        tasks.unregister_task(name)


def test_references_import_a_factory_or_a_task_object(clean_registry):
    tasks.register_task("rev", REF)
    assert tasks.make_task("rev", length=2).answer_len == 2
    tasks.register_task("ready", "tests.dllm.user_task:READY")
    assert tasks.make_task("ready") is user_task.READY
    tasks.register_task("ready", "tests.dllm.user_task:READY")  # same object: a no-op
    with pytest.raises(ValueError, match="takes no keyword arguments"):
        tasks.make_task("ready", length=2)
    for ref, msg in [("tests.dllm.no_such_module:X", "cannot import"),
                     ("tests.dllm.user_task:Nope", "no attribute 'Nope'"),
                     ("tests.dllm.user_task", "must be 'package.module:attr'"),
                     ("tests.dllm.user_task:NOT_A_TASK", "`factory` must be")]:
        with pytest.raises(ValueError, match=msg):
            tasks.register_task("bad", ref)


def test_a_factory_returning_a_non_task_is_named(clean_registry):
    tasks.register_task("broken", lambda: object())
    with pytest.raises(ValueError, match=r"`make_task\('broken'\)` must have the attributes"):
        tasks.make_task("broken")


@pytest.mark.parametrize("field,value,msg", [
    ("vocab_size", 0, "vocab_size"), ("answer_len", 2.5, "answer_len"),
    ("mask_id", 7, "mask_id"), ("sample", None, "sample")])
def test_check_task_names_the_bad_field(field, value, msg):
    class T:
        name, vocab_size, prompt_len, answer_len, mask_id = "t", 5, 2, 2, 4

        def sample(self, key, n):
            raise NotImplementedError

        def verify(self, prompt, answer):
            raise NotImplementedError

    t = T()
    setattr(t, field, value)
    with pytest.raises(ValueError, match=f"`task.{msg}`|misses|`task` must"):
        tasks.check_task(t)


def test_config_task_refs_register_the_users_task(clean_registry):
    c = dllm_configs.get_config("smoke")
    c.task_refs = {"reverse": REF}
    c.tasks = ("reverse",)
    c.task_kwargs.reverse = {"length": 5}
    config_lib.validate_config(c)
    assert dllm_models.make_task(c, "reverse") == user_task.Reverse(length=5)
    # the reference is part of the model key (two refs under one name are two models)
    key = dllm_models.model_key(c, "reverse")
    c.task_refs = {"reverse": "tests.dllm.user_task:READY"}
    assert dllm_models.model_key(c, "reverse") != key
    c.task_refs = {"reverse": "tests.dllm.user_task:Nope"}
    with pytest.raises(ValueError, match="`task_refs.reverse` is invalid"):
        config_lib.validate_config(c)


def test_unknown_task_points_at_registration():
    c = dllm_configs.get_config("smoke")
    c.tasks = ("my_task",)
    with pytest.raises(ValueError, match="`config.tasks`"):
        config_lib.validate_config(c)


def test_decoder_selection_keeps_the_study_order():
    every = config_lib.all_decoders((2, 4))
    assert config_lib.decoder_selection((), (2, 4)) == every
    assert config_lib.decoder_selection(("poke_smc_4", "confidence", "smc"), (2, 4)) == [
        "confidence", "smc_2", "smc_4", "poke_smc_4"]
    # "smc" is a family of its own: it does not pick sr_smc or poke_smc
    assert config_lib.decoder_selection(("sr_smc",), (2,)) == ["sr_smc_2"]
    with pytest.raises(ValueError, match="`config.decoders` entry 'poke_smc_8'"):
        config_lib.decoder_selection(("poke_smc_8",), (2, 4))
    c = dllm_configs.get_config("smoke")
    c.decoders = ("greedy",)
    with pytest.raises(ValueError, match="`config.decoders`"):
        config_lib.validate_config(c)


def test_empty_new_fields_keep_every_unit_key():
    """Adding ``decoders`` / ``task_refs`` to the config did not change the unit specs."""
    c = dllm_configs.get_config("full")  # every decoder (quick names its own)
    spec = exp._task_spec(c, "sudoku")
    assert "decoders" not in spec and "task_refs" not in spec
    c.decoders = ("confidence",)
    assert exp._task_spec(c, "sudoku")["decoders"] == ["confidence"]


def _row(family, n, acc, correct):
    return {"family": family, "particles": n, "accuracy": acc, "accuracy_ci": [0.0, 1.0],
            "nfe": 4.0 * n, "nfe_batched": 4.0, "path_ll": -1.0 - acc,
            "_correct": np.asarray(correct, bool), "_path_ll": -np.ones(len(correct)),
            "_min_ess": np.full(len(correct), n / 1.5)}


def test_summary_and_headline_of_a_decoder_subset():
    """With only confidence and POKE-SMC, the declared comparisons without their rival are
    left out (not a KeyError), POKE-SMC - greedy is kept, the post-hoc row compares with
    confidence."""
    c = dllm_configs.get_config("smoke")
    c.decoders = ("confidence", "poke_smc")
    ok = np.array([1, 0, 1, 1], bool)
    rows = {"confidence": _row("greedy", 1, 0.5, [1, 0, 1, 0]),
            "poke_smc_2": _row("poke_smc", 2, 0.75, ok)}
    pre = {"2": {"greedy": 0.5, "pass_at_n": 1.0, "best_of_n": 0.5, "headroom": 0.5,
                 "mixed_share": 0.5, "ess_below_half_share": None, "median_min_ess": None,
                 "ranking_on_mixed": {"0.5": {"random": 0.5, "path_ll": 0.5,
                                              "path_ll_plus_poke": 0.5}},
                 "headline": True}}
    out = {t: {"task": t, "preconditions": pre, "decoders": rows} for t in c.tasks}
    summary = exp._summarize(c, out)
    t = summary["tasks"][c.tasks[0]]
    assert set(t["decoders"]) == {"confidence", "poke_smc_2"}
    # Only the greedy rival (confidence) is among the decoders.
    assert {r: bool(v) for r, v in t["declared"].items()} == {
        r: r == "confidence" for r in exp.DECLARED_RIVALS}
    post = t["post_hoc_poke_vs_best_on_test"]["2"]
    assert post["best_baseline"] == "confidence"
    assert post["gain"] == pytest.approx(ok.mean() - 0.5)
    assert summary["declared_mean_over_headline_tasks"]["2"]["sr_smc"] is None
    assert exp.headline(summary)


@pytest.mark.slow
def test_study_runs_a_users_task_with_a_decoder_subset(tmp_path, clean_registry):
    """The study binary's experiment on a task named only in the config (``task_refs``),
    two decoders: it trains the denoiser and head, writes each decoder's row as it
    finishes, and summarizes."""
    import json

    from experiments.lib import registry

    c = dllm_configs.get_config("smoke")
    c.task_refs = {"reverse": REF}
    c.tasks = ("reverse",)
    c.task_kwargs.reverse = {"length": 3}
    c.decoders = ("confidence", "poke_smc")
    c.num_problems = c.eval_batch = 8
    c.train.update(steps=8, num_chunks=1)
    c.poke.update(rollouts=32, steps=4, num_chunks=1)
    c.throughput_particles = (1,)
    registry.train_and_evaluate("dllm", c, str(tmp_path))
    summary = json.loads((tmp_path / "summary.json").read_text())
    t = summary["tasks"]["reverse"]
    assert list(t["decoders"]) == ["confidence", "poke_smc_2"]
    assert t["decoders"]["poke_smc_2"]["nfe"] == 2 * 3
    partial = json.loads((tmp_path / "partial" / "dllm_reverse.json").read_text())
    assert list(partial) == ["confidence", "poke_smc_2"]
    assert 0 <= t["preconditions"]["2"]["best_of_n"] <= t["preconditions"]["2"]["pass_at_n"]


def test_goals_compare_with_greedy_and_the_best_rival():
    """The goals at N >= 4 only: each particle decoder minus greedy, POKE-SMC minus the best
    of greedy / best-of-N / SR-SMC (paired), headroom from the preconditions."""
    c = dllm_configs.get_config("smoke")
    c.particles = (2, 4)
    greedy = [1, 1, 0, 0, 1, 0, 1, 0]
    rows = {"confidence": _row("greedy", 1, 0.5, greedy),
            "best_of_4": _row("best_of_n", 4, 0.625, [1, 1, 1, 0, 1, 0, 1, 0]),
            "sr_smc_4": _row("sr_smc", 4, 0.375, [1, 0, 0, 0, 1, 0, 1, 0]),
            "poke_smc_2": _row("poke_smc", 2, 0.25, [1, 0, 0, 0, 1, 0, 0, 0]),
            "poke_smc_4": _row("poke_smc", 4, 0.875, [1, 1, 1, 1, 1, 0, 1, 1])}
    goals = exp._goals(c, rows, {"4": {"headroom": 0.2}})
    assert set(goals) == {"4"}  # N = 2 is below the goals' N
    g = goals["4"]
    assert g["particle_minus_greedy"] == pytest.approx(
        {"best_of_4": 0.125, "sr_smc_4": -0.125, "poke_smc_4": 0.375})
    assert not g["no_particle_decoder_below_greedy"]  # SR-SMC is below
    assert g["best_rival"] == "best_of_4"
    assert g["poke_minus_best_rival"] == pytest.approx(0.25)
    assert g["has_headroom"] and g["poke_minus_best_rival_ci"][0] <= 0.25
    rows["sr_smc_4"] = _row("sr_smc", 4, 0.5, greedy)
    assert exp._goals(c, rows, {"4": {"headroom": 0.0}})["4"]["no_particle_decoder_below_greedy"]
