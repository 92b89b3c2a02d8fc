"""Finished work is reused only under the same config AND code version (dLLM per-task
results; RFO's runs/ and the suite have their own tests in tests/rfo and
tests/test_suite_report.py; orbax checkpoints in tests/core/test_checkpoint.py)."""

import json
import os

import pytest

from experiments.configs import dllm as dllm_cfg
from experiments.lib import checkpoint, provenance
from jaxlab.dllm import experiment


class WouldEvaluate(Exception):
    pass


class Reused(Exception):
    pass


def test_dllm_finished_tasks_are_keyed_by_config_and_code(tmp_path, monkeypatch):
    cfg = dllm_cfg.get_config("smoke")
    cfg.tasks = cfg.tasks[:1]
    done = checkpoint.checkpoint_dir_for(tmp_path, cfg)
    os.makedirs(done)
    with open(os.path.join(done, f"{cfg.tasks[0]}.json"), "w") as f:
        json.dump({"decoders": {}}, f)

    def would_evaluate(*a, **k):
        raise WouldEvaluate

    def reused(*a, **k):
        raise Reused

    monkeypatch.setattr(experiment, "evaluate_task", would_evaluate)
    monkeypatch.setattr(experiment, "_path_ll_correlation", reused)
    with pytest.raises(Reused):  # same config, same code: the finished task is read back
        experiment.train_and_evaluate(cfg, str(tmp_path))
    changed = cfg.copy_and_resolve_references()
    changed.num_problems = cfg.num_problems + 1
    with pytest.raises(WouldEvaluate):
        experiment.train_and_evaluate(changed, str(tmp_path))
    monkeypatch.setattr(provenance, "code_version", lambda: "0.0.0+src.changed")
    with pytest.raises(WouldEvaluate):
        experiment.train_and_evaluate(cfg, str(tmp_path))


def test_dllm_workdir_model_from_another_config_is_not_used(tmp_path):
    """A denoiser trained in the workdir under other settings is never served as this one."""
    import jax.numpy as jnp

    cfg = dllm_cfg.get_config("smoke")
    name = cfg.tasks[0]
    path = tmp_path / "models" / name
    template = {"w": jnp.zeros(3)}
    experiment._export(str(path), 1, {"w": jnp.ones(3)}, experiment._model_key(cfg, name))
    ok = experiment._restore_first([(str(path), experiment._model_key(cfg, name))], template,
                                   "denoiser")
    assert float(ok["w"].sum()) == 3.0
    other = cfg.copy_and_resolve_references()
    other.seed = cfg.seed + 1
    assert experiment._restore_first([(str(path), experiment._model_key(other, name))],
                                     template, "denoiser") is None
    assert experiment._model_key(cfg, name) != experiment._model_key(cfg, name, head=True)
