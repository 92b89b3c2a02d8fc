"""Finished work is reused only under the same config AND code version (the dLLM study's
task units and workdir-trained models; RFO's (task, method) units and the suite have their
own tests in tests/rfo and tests/test_suite_report.py; the study runner in
tests/test_study.py; orbax checkpoints in tests/core/test_checkpoint.py)."""

import jax.numpy as jnp
import pytest

from experiments import dllm, dllm_models
from experiments.configs import dllm as dllm_cfg
from experiments.lib import artifacts, provenance, study


class WouldEvaluate(Exception):
    pass


def test_dllm_finished_task_units_are_keyed_by_config_and_code(tmp_path, monkeypatch):
    cfg = dllm_cfg.get_config("smoke")
    cfg.tasks = cfg.tasks[:1]

    def would_evaluate(*a, **k):
        raise WouldEvaluate

    monkeypatch.setattr(dllm, "_evaluate_task", would_evaluate)

    def task_unit(config):
        unit = dllm.EXPERIMENT.units(config, str(tmp_path))[0]
        assert unit.name == cfg.tasks[0]
        return unit

    finished = {"task": cfg.tasks[0], "decoders": {}}
    study.save_result(study.unit_path(str(tmp_path), task_unit(cfg), cfg)[1], finished)
    # Same config, same code: the finished task is read back, nothing is evaluated.
    assert study.run_units([task_unit(cfg)], cfg, str(tmp_path)) == {cfg.tasks[0]: finished}
    # Fields the task does not read (other tasks, the throughput and SALE units) keep it.
    other = cfg.copy_and_resolve_references()
    other.tasks = (*cfg.tasks, "sudoku")
    other.throughput_particles = (1, 8)
    assert study.run_units([task_unit(other)], other, str(tmp_path)) == {cfg.tasks[0]: finished}
    changed = cfg.copy_and_resolve_references()
    changed.num_problems = cfg.num_problems + 1
    with pytest.raises(WouldEvaluate):
        study.run_units([task_unit(changed)], changed, str(tmp_path))
    monkeypatch.setattr(provenance, "code_version", lambda: "0.0.0+src.changed")
    with pytest.raises(WouldEvaluate):
        study.run_units([task_unit(cfg)], cfg, str(tmp_path))


def test_dllm_workdir_model_from_another_config_or_code_is_not_used(tmp_path, monkeypatch):
    """A denoiser trained in the workdir under other settings or code is never served."""
    cfg = dllm_cfg.get_config("smoke")
    name = cfg.tasks[0]
    path = str(tmp_path / "models" / name)
    template = {"w": jnp.zeros(3)}
    artifacts.export(path, 1, {"w": jnp.ones(3)}, dllm_models.model_key(cfg, name),
                     dllm_models.weights_record(cfg, name))
    ok = artifacts.restore_first([(path, dllm_models.model_key(cfg, name))], template, "m")
    assert float(ok["w"].sum()) == 3.0
    other = cfg.copy_and_resolve_references()
    other.seed = cfg.seed + 1
    assert artifacts.restore_first([(path, dllm_models.model_key(other, name))], template,
                                   "m") is None
    assert dllm_models.model_key(cfg, name) != dllm_models.model_key(cfg, name, head=True)
    # The decoding settings do not touch the model key; the code version does.
    other = cfg.copy_and_resolve_references()
    other.num_problems = cfg.num_problems + 1
    assert dllm_models.model_key(other, name) == dllm_models.model_key(cfg, name)
    monkeypatch.setattr(provenance, "code_version", lambda: "0.0.0+src.changed")
    assert artifacts.restore_first([(path, dllm_models.model_key(cfg, name))], template,
                                   "m") is None
