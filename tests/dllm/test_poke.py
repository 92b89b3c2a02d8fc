"""POKE value head: rollout targets and a held-out fit better than a constant."""

import functools

import jax
import numpy as np
import pytest

from jaxlab.dllm import decoding, path_smc, poke, tasks
from jaxlab.dllm import model as model_lib


@pytest.fixture(scope="module")
def setup():
    task = tasks.Addition(n_digits=3)
    cfg = model_lib.LLaDAConfig(vocab_size=task.vocab_size, d_model=32, n_layers=2, n_heads=2,
                                n_kv_heads=2, mlp_hidden_size=48, mask_token_id=task.mask_id)
    graphdef, params = model_lib.init(cfg, seed=0)
    params = jax.tree.map(lambda x: 4 * x, params)  # a less uniform predictive law
    return task, jax.jit(functools.partial(model_lib.apply, graphdef, params))


def test_rollout_targets_are_remaining_path_ll(setup):
    task, den = setup
    prompt, _ = task.sample(jax.random.key(0), 16)
    a = task.answer_len
    ro = poke.collect_rollouts(den, prompt, a, jax.random.key(1), mask_id=task.mask_id)
    assert ro.hidden.shape == (16 * a, a, 32)
    dec = decoding.decode(den, prompt, a, key=jax.random.key(1), mask_id=task.mask_id,
                          vocab_size=task.vocab_size, temperature=1.0)
    rem = np.asarray(ro.remaining).reshape(16, a)
    np.testing.assert_allclose(rem[:, 0], np.asarray(dec.path_ll), rtol=1e-5)
    assert np.all(np.diff(rem, axis=1) >= -1e-6)  # remaining LL only shrinks in magnitude
    masked = np.asarray(ro.masked).reshape(16, a, a).sum(-1)
    np.testing.assert_array_equal(masked, np.tile(np.arange(a, 0, -1), (16, 1)))


def test_head_fits_held_out_rollouts_and_drives_smc(setup):
    task, den = setup
    a = task.answer_len
    tr = poke.collect_rollouts(den, task.sample(jax.random.key(2), 512)[0], a,
                               jax.random.key(3), mask_id=task.mask_id)
    te = poke.collect_rollouts(den, task.sample(jax.random.key(4), 128)[0], a,
                               jax.random.key(5), mask_id=task.mask_id)
    graphdef, params, losses, val = poke.fit(tr, hidden=16, steps=200, num_chunks=4,
                                             batch_size=128, lr=3e-3)
    assert losses[-1] < losses[0] and val.shape == (4,)
    fit = poke.evaluate(graphdef, params, te)
    # Explains a real share of the variance of single-rollout targets (a constant: 0).
    assert fit["r2"] > 0.1 and fit["mse"] < fit["baseline_mse_mean_only"]
    value_fn = poke.make_value_fn(graphdef, params, task.prompt_len, task.mask_id)
    prompt = task.sample(jax.random.key(6), 4)[0]
    res, info = path_smc.smc_decode(den, prompt, a, key=jax.random.key(7), mask_id=task.mask_id,
                               vocab_size=task.vocab_size, num_particles=3, value_fn=value_fn)
    assert np.all(np.asarray(res.answer) != task.mask_id)
    assert np.all(np.isfinite(np.asarray(info.ess)))


def test_fit_rejects_bad_arguments(setup):
    task, den = setup
    ro = poke.collect_rollouts(den, task.sample(jax.random.key(0), 8)[0], task.answer_len,
                               jax.random.key(1), mask_id=task.mask_id)
    with pytest.raises(ValueError, match="num_chunks"):
        poke.fit(ro, steps=10, num_chunks=3)
    with pytest.raises(ValueError, match="val_fraction"):
        poke.fit(ro, steps=10, num_chunks=2, val_fraction=1.0)
