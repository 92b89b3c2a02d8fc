"""``jaxlab.dllm.weights``: a denoiser and a POKE head saved and loaded in the repository's
weights folders; a missing or mismatched folder raises, and the study never retrains over
one."""

import json
import os
import shutil

import jax
import numpy as np
import pytest

from jaxlab import dllm
from jaxlab.dllm import model, poke, tasks, weights

TASK = tasks.Addition(n_digits=1)
CFG = model.LLaDAConfig(vocab_size=TASK.vocab_size, mask_token_id=TASK.mask_id, d_model=16,
                        n_layers=1, n_heads=2, n_kv_heads=2, mlp_hidden_size=32)
SHIPPED = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "pretrained",
                       "dllm")


def _leaves_equal(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_a_saved_denoiser_loads_back_bit_exact_and_computes_the_same(tmp_path):
    graphdef, params = model.init(CFG, seed=1)
    weights.save_denoiser(tmp_path / "d", CFG, params, step=7, record={"task": "addition"})
    for expected in (CFG, None):  # None: the saved architecture
        saved = dllm.load_denoiser(tmp_path / "d", expected)
        assert saved.config == CFG
        _leaves_equal(saved.params, params)
    tokens = TASK.sample(jax.random.key(0), 3)[0]
    np.testing.assert_array_equal(model.apply(saved.graphdef, saved.params, tokens)[0],
                                  model.apply(graphdef, params, tokens)[0])
    assert weights.read_record(tmp_path / "d")["task"] == "addition"


def test_a_mismatch_or_nothing_saved_raises_naming_the_path_and_fields(tmp_path):
    _, params = model.init(CFG, seed=1)
    weights.save_denoiser(tmp_path / "d", CFG, params)
    other = model.LLaDAConfig(**{**{f: getattr(CFG, f) for f in weights.ARCHITECTURE},
                                 "d_model": 32, "n_layers": 2})
    with pytest.raises(ValueError, match="d_model.*n_layers") as e:
        dllm.load_denoiser(tmp_path / "d", other)
    assert str(tmp_path / "d") in str(e.value) and "saved 16, expected 32" in str(e.value)
    with pytest.raises(FileNotFoundError, match="`path`.*no saved denoiser"):
        dllm.load_denoiser(tmp_path / "none", CFG)
    with pytest.raises(ValueError, match="poke_head"):  # a head is no denoiser
        weights.save_value_head(tmp_path / "h", _head_params(), d_model=16, hidden=8)
        dllm.load_denoiser(tmp_path / "h", CFG)
    with pytest.raises(TypeError, match="`model_config`"):
        weights.save_denoiser(tmp_path / "x", {"d_model": 16}, params)


def _head_params():
    from flax import nnx

    return nnx.split(poke.ValueHead(16, 8, rngs=nnx.Rngs(0)))[1]


def test_a_value_head_round_trips_and_checks_its_sizes(tmp_path):
    params = _head_params()
    weights.save_value_head(tmp_path / "h", params, d_model=16, hidden=8)
    _, loaded = dllm.load_value_head(tmp_path / "h")
    _leaves_equal(loaded, params)
    with pytest.raises(ValueError, match="hidden.*saved 8, expected 4"):
        dllm.load_value_head(tmp_path / "h", hidden=4)
    with pytest.raises(FileNotFoundError, match="no saved value head"):
        dllm.load_value_head(tmp_path / "none")


def test_shipped_weights_load_and_a_wrong_architecture_is_named():
    from experiments import dllm_models
    from experiments.configs import dllm as dllm_config

    cfg = dllm_config.get_config("quick")
    task = dllm_models.make_task(cfg, "addition")
    mcfg = dllm_models.model_config(cfg, task)
    saved = dllm.load_denoiser(os.path.join(SHIPPED, "addition"), mcfg)
    assert saved.config == mcfg
    with pytest.raises(ValueError, match="'d_model'"):
        dllm.load_denoiser(os.path.join(SHIPPED, "addition"),
                           model.LLaDAConfig(**{**{f: getattr(mcfg, f) for f in
                                                   weights.ARCHITECTURE}, "d_model": 64}))
    with pytest.raises(ValueError, match="`expected_config`"):  # widths only recorded
        dllm.load_denoiser(os.path.join(SHIPPED, "addition"))
    dllm.load_value_head(os.path.join(SHIPPED, "addition_poke"))


def test_the_study_raises_instead_of_retraining_over_a_mismatched_model(tmp_path,
                                                                        monkeypatch):
    """A workdir model trained under another key (training settings, seed or code) raises,
    naming the folder; the study trains only where nothing is saved."""
    from experiments import dllm_models
    from experiments.configs import dllm as dllm_config
    from experiments.lib import artifacts

    cfg = dllm_config.get_config("smoke")
    task = dllm_models.make_task(cfg, "addition")
    mcfg = dllm_models.model_config(cfg, task)
    _, params = model.init(mcfg, seed=0)
    folder = os.path.join(tmp_path, "models", "addition")
    weights.save_denoiser(folder, mcfg, params, record={
        "unit_key": "another", **dllm_models.weights_record(cfg, "addition")})
    monkeypatch.setattr(dllm_models, "train_denoiser",
                        lambda *a: pytest.fail("trained over a saved model"))
    with pytest.raises(ValueError, match="`workdir`.*another config") as e:
        dllm_models.Models(cfg, str(tmp_path)).denoiser("addition")
    assert folder in str(e.value)
    with pytest.raises(ValueError, match="already holds saved weights"):
        weights.save_denoiser(folder, mcfg, params)
    shutil.rmtree(folder)
    weights.save_denoiser(folder, mcfg, params, record={
        "unit_key": dllm_models.model_key(cfg, "addition")})
    with pytest.raises(ValueError, match="lacks .*weights_sha256"):  # no sha256 record
        dllm_models.Models(cfg, str(tmp_path)).denoiser("addition")
    record = weights.read_record(folder)
    with open(os.path.join(folder, weights.RECORD), "w") as f:
        json.dump({**record, **artifacts.stamp(folder, dllm_models.weights_record(
            cfg, "addition"))}, f)
    m = dllm_models.Models(cfg, str(tmp_path)).denoiser("addition")
    _leaves_equal(m.params, params)
