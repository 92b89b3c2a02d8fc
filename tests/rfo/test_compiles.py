"""The quick preset's RFO units build each XLA program once (at the smoke preset's sizes).

Programs are told apart by JAX's persistent-cache key, which ``jax._src.compiler`` logs for
every program it compiles or loads while the persistent compilation cache is on (as in the
test run); ``experiments.lib.compile_cache.tally`` records them per unit in timing.json.
"""

import json
import os

import jax
import pytest

pytest.importorskip("brax")

from experiments import rfo as experiment  # noqa: E402
from experiments.configs import rfo as rfo_cfg  # noqa: E402
from experiments.lib import study  # noqa: E402
from jaxlab.core import checks  # noqa: E402
from jaxlab.rfo import envs  # noqa: E402
from tests.notebooks import assert_each_program_built_once  # noqa: E402


# Two MJX training programs per method (a minute of compile each on a 2-core CPU when the
# test run's compilation cache is cold): -m heavy.
@pytest.mark.heavy
def test_the_quick_preset_builds_each_program_once_per_unit(tmp_path):
    """The quick preset's tasks and methods at the smoke preset's sizes, run as the suite
    runs them, the tasks built afresh as in a new process: the declared comparisons and
    ratio, the figure, and no unit builds any program twice (no floor: not even a
    millisecond one)."""
    if not jax.config.jax_compilation_cache_dir:
        pytest.skip("needs JAX's persistent compilation cache (it names each program)")
    quick, c = rfo_cfg.get_config("quick"), rfo_cfg.get_config("smoke")
    c.tasks, c.methods, c.task_methods = quick.tasks, quick.methods, quick.task_methods
    c.throughput = quick.throughput
    envs.make_task.cache_clear()
    with checks(False):  # as the study binaries run
        summary = study.train_and_evaluate(experiment.EXPERIMENT, c, str(tmp_path))
    rivals = [m for m in c.methods if m != "rfo"]
    for t in c.tasks:
        assert set(summary["final_eval_return"][t]) == set(c.methods)
        for metric in ("final_return", "auc"):
            diffs = summary["comparison"][t][metric]["differences"]
            assert [(d["a"], d["b"]) for d in diffs] == [("rfo", m) for m in rivals]
        assert set(summary["ratio_final_eval_return"][t]) == {
            f"{a} / {b}" for a, b in experiment.DECLARED_RATIOS}
    assert os.path.getsize(tmp_path / "return_vs_env_steps.png") > 1000
    with open(tmp_path / "timing.json") as f:
        units = json.load(f)["units"]
    names = {f"{t}_{m}" for t in c.tasks for m in c.methods}
    assert set(units) == {*names, "(summary and plots)"}
    assert all(units[u]["compiles"] + units[u]["cache_hits"] > 0 for u in names)
    assert_each_program_built_once(tmp_path, floor_s=None)
