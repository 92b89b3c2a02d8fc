"""The RFO study at smoke size: results on disk, equal env-step budgets, resume."""

import json
import os

import pytest

pytest.importorskip("brax")

from experiments.configs import rfo as rfo_cfg  # noqa: E402
from jaxlab.rfo import experiment  # noqa: E402
from tests.notebooks import run_notebook  # noqa: E402


def test_smoke_study_writes_results_and_skips_finished_runs(tmp_path, monkeypatch):
    cfg = rfo_cfg.get_config("smoke")
    cfg.methods = ("rfo_chunked", "ppo")
    s1, _ = run_notebook("rfo", tmp_path, {"methods": cfg.methods})  # colab/rfo.ipynb
    assert os.path.getsize(tmp_path / "return_vs_env_steps.png") > 1000
    with open(tmp_path / "summary.json") as f:
        on_disk = json.load(f)
    final = on_disk["final_eval_return"]["pendulum"]
    assert set(final) == {"rfo_chunked", "ppo"}
    assert final["rfo_chunked"]["env_steps"] == final["ppo"]["env_steps"] == cfg.env_steps
    assert all(v["ci95"] >= 0 for v in final.values())
    tp = on_disk["throughput"]["env_steps_per_s"]
    assert set(tp) == {"1", "8"} and all(v > 0 for v in tp.values())
    names = dict(experiment.headline(s1))
    assert any("pendulum" in k for k in names)

    # A rerun reads the finished runs from runs/ and trains nothing.
    def fail(*a, **k):
        raise AssertionError("finished work was redone")

    monkeypatch.setattr(experiment.checkpoint, "run_resumable", fail)
    cfg.throughput.task = ""
    s2 = experiment.train_and_evaluate(cfg, str(tmp_path))
    assert s2["final_eval_return"] == s1["final_eval_return"]

    # A changed setting (the audit's case: more seeds) or changed code never reuses runs/.
    class WouldTrain(Exception):
        pass

    def would_train(*a, **k):
        raise WouldTrain

    monkeypatch.setattr(experiment.checkpoint, "run_resumable", would_train)
    with pytest.raises(WouldTrain):
        experiment.run_method(_with(cfg, num_seeds=cfg.num_seeds + 1), "pendulum", "ppo",
                              str(tmp_path))
    experiment.run_method(cfg, "pendulum", "ppo", str(tmp_path))  # same key: reused
    monkeypatch.setattr(experiment.provenance, "code_version", lambda: "0.0.0+src.changed")
    with pytest.raises(WouldTrain):
        experiment.run_method(cfg, "pendulum", "ppo", str(tmp_path))


def _with(cfg, **overrides):
    out = cfg.copy_and_resolve_references()
    out.update(overrides)
    return out


def test_unknown_method_raises(tmp_path):
    cfg = rfo_cfg.get_config("smoke")
    cfg.methods = ("sac",)
    with pytest.raises(ValueError, match="unknown method"):
        experiment.train_and_evaluate(cfg, str(tmp_path))
