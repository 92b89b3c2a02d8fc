"""Weights records (experiments.lib.artifacts): a weights folder loads only with its
record, its files hashing to the record's sha256s, and trained for the config asked for."""

import json
import os
import shutil

import jax.numpy as jnp
import numpy as np
import pytest

from experiments import dllm_models
from experiments import gepc as gepc_exp
from experiments.configs import dllm as dllm_config
from experiments.configs import gepc as gepc_config
from experiments.lib import artifacts

PRETRAINED = os.path.join(artifacts.ROOT, "experiments", "pretrained")
DLLM = os.path.join(PRETRAINED, "dllm")


def _slot(tmp_path, source: str, slot: str = "addition") -> str:
    """A pretrained folder whose ``slot`` holds a copy of the shipped ``source``."""
    root = tmp_path / "pretrained"
    shutil.copytree(os.path.join(DLLM, source), root / slot)
    return str(root)


def _denoiser(root: str, tmp_path, name: str = "addition"):
    cfg = dllm_config.get_config("full")
    cfg.pretrained_dir = root
    return dllm_models.Models(cfg, str(tmp_path / "work")).denoiser(name)


def _shipped_folders():
    dllm = [os.path.join(DLLM, d) for d in sorted(os.listdir(DLLM))
            if os.path.isdir(os.path.join(DLLM, d))]
    return dllm + [os.path.join(PRETRAINED, d) for d in ("gepc_mnist16", "gepc_clutter16")]


@pytest.mark.parametrize("path", _shipped_folders(), ids=os.path.basename)
def test_every_shipped_folder_matches_its_record(path):
    gepc = os.path.basename(path).startswith("gepc")
    record = artifacts.verify(path, "shipped weights", "config.pretrained_dir",
                              record_name=gepc_exp.PROVENANCE if gepc else artifacts.RECORD,
                              config_field="spec" if gepc else "config")
    assert record["weight_files"] and len(record["weights_sha256"]) == 64


def test_shipped_denoiser_record_matches_the_lookup():
    cfg = dllm_config.get_config("quick")
    record = artifacts.read_record(os.path.join(DLLM, "addition"))
    assert record["config"] == json.loads(json.dumps(dllm_models.weights_record(cfg,
                                                                                "addition")))


def test_another_tasks_weights_without_their_record_are_refused(tmp_path):
    root = _slot(tmp_path, "addition_hard")
    os.remove(os.path.join(root, "addition", artifacts.RECORD))
    with pytest.raises(ValueError, match=r"`config.pretrained_dir`: .* has no record .*"
                                         r"trained_with.json"):
        _denoiser(root, tmp_path)


def test_another_tasks_weights_with_this_tasks_record_are_refused(tmp_path):
    root = _slot(tmp_path, "addition_hard")
    shutil.copy(os.path.join(DLLM, "addition", artifacts.RECORD),
                os.path.join(root, "addition", artifacts.RECORD))
    with pytest.raises(ValueError, match="do not match their record") as e:
        _denoiser(root, tmp_path)
    ours = artifacts.weight_files(os.path.join(root, "addition"))
    theirs = artifacts.read_record(os.path.join(DLLM, "addition"))["weight_files"]
    rel = min(r for r in set(ours) | set(theirs) if ours.get(r) != theirs.get(r))
    message = str(e.value)
    assert os.path.join(root, "addition", rel) in message
    assert f"sha256 {ours.get(rel, 'missing')}, recorded {theirs.get(rel, 'none')}" in message
    assert artifacts.weights_sha256(ours) in message


def test_record_edited_to_name_this_task_is_refused(tmp_path):
    root = _slot(tmp_path, "addition_hard")
    marker = os.path.join(root, "addition", artifacts.RECORD)
    with open(marker) as f:
        record = json.load(f)
    record["config"]["task"] = "addition"
    with open(marker, "w") as f:
        json.dump(record, f)
    with pytest.raises(ValueError, match="does not match its config_sha256"):
        _denoiser(root, tmp_path)


def test_weights_of_another_config_name_the_differing_fields(tmp_path):
    root = _slot(tmp_path, "addition_hard")
    with pytest.raises(ValueError, match=r"differs in \['task'\]: task: trained for "
                                         r"'addition_hard', this slot needs 'addition'"):
        _denoiser(root, tmp_path)


def test_clutter_weights_with_the_mnist_provenance_are_refused(tmp_path):
    path = tmp_path / "gepc"
    shutil.copytree(os.path.join(PRETRAINED, "gepc_clutter16"), path)
    shutil.copy(os.path.join(PRETRAINED, "gepc_mnist16", gepc_exp.PROVENANCE),
                path / gepc_exp.PROVENANCE)
    c = gepc_config.get_config("quick")
    with pytest.raises(ValueError, match=r"`config.pretrained_dir`: .* do not match their "
                                         r"record .*provenance.json"):
        gepc_exp._check_shipped(c, str(path), np.zeros((2, 16, 16, 1), np.float32))


def test_workdir_weights_tampered_or_without_record(tmp_path, caplog):
    path, template = str(tmp_path / "m"), {"w": jnp.zeros(3)}
    artifacts.export(path, 1, {"w": jnp.ones(3)}, "key", {"task": "t"})
    ok = artifacts.restore_first([(path, "key")], template, "m", expected={"task": "t"})
    np.testing.assert_array_equal(ok["w"], np.ones(3))
    with pytest.raises(ValueError, match=r"differs in \['task'\]"):
        artifacts.restore_first([(path, "key")], template, "m", expected={"task": "u"})
    data = sorted(artifacts.weight_files(path))[-1]
    with open(os.path.join(path, data), "ab") as f:
        f.write(b"\0")
    with pytest.raises(ValueError, match="do not match their record") as e:
        artifacts.restore_first([(path, "key")], template, "m")
    assert os.path.join(path, data) in str(e.value)
    os.remove(os.path.join(path, artifacts.RECORD))
    with caplog.at_level("WARNING"):
        assert artifacts.restore_first([(path, "key")], template, "m") is None
    assert "not using it" in caplog.text


def test_config_sha256_is_canonical():
    assert artifacts.config_sha256({"b": (1, 2), "a": 1}) == artifacts.config_sha256(
        {"a": 1, "b": [1, 2]})
    assert artifacts.config_sha256({"a": 1}) != artifacts.config_sha256({"a": 2})
