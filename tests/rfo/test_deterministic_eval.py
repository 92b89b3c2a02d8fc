"""Deterministic evaluation beside the stochastic one: the policy's mode (the Gaussian's
mean, the flow from zero base noise, PPO's mean) on the evaluation's resets, without
changing any stochastic number of the run."""

import jax
import numpy as np
import pytest
from flax import nnx

from jaxlab import rfo
from jaxlab.rfo import envs, train

SMALL = dict(num_envs=2, horizon=4, hidden=8, eval_horizon=8, episode_length=8)


def _cfg(method):
    if method == "ppo":
        return rfo.PPOConfig(num_envs=2, rollout_len=4, minibatches=2, episode_length=8,
                             hidden=8, eval_horizon=8, epochs=1)
    return rfo.TrainConfig(policy=method, critic=True, **SMALL)


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _gaussian_mean(params, obs):
    """tanh(mu(obs)) of ``train.GaussianPolicy`` in NumPy (float64)."""
    p = jax.tree.map(lambda x: np.asarray(x, np.float64), nnx.to_pure_dict(params))
    h = _silu(obs @ p["l1"]["kernel"] + p["l1"]["bias"])
    h = _silu(h @ p["l2"]["kernel"] + p["l2"]["bias"])
    return np.tanh(h @ p["mu"]["kernel"] + p["mu"]["bias"])


def _flow_mode(params, obs, ode_steps):
    """The flow's Euler ODE from a_0 = 0 in NumPy (float64), then tanh."""
    p = jax.tree.map(lambda x: np.asarray(x, np.float64), nnx.to_pure_dict(params))
    layers = [p["layers"][i] for i in sorted(p["layers"])]
    a = np.zeros((obs.shape[0], p["out"]["bias"].shape[0]))
    for k in range(ode_steps):
        h = np.concatenate([a, np.full((obs.shape[0], 1), k / ode_steps), obs], axis=1)
        for layer in layers:
            h = _silu(h @ layer["kernel"] + layer["bias"])
        a = a + (h @ p["out"]["kernel"] + p["out"]["bias"]) / ode_steps
    return np.tanh(a)


@pytest.mark.heavy
@pytest.mark.parametrize("method", ["gaussian", "flow", "ppo"])
def test_deterministic_eval_leaves_the_stochastic_run_unchanged(method):
    """Two updates with and without ``deterministic_eval``: every stochastic number
    (eval and train returns, grad norms, the weights) equal bit for bit; the mode's
    return NaN without the option, finite and different from the stochastic one with
    it."""
    task = envs.make_task("soft_quadruped")
    cfg = _cfg(method)
    key = jax.random.key(3)
    trainers = [rfo.make_trainer(task, cfg, deterministic_eval=d) for d in (False, True)]
    runs = [jax.jit(lambda k, t=t: rfo.run(k, t, 2))(key) for t in trainers]
    (s0, i0), (s1, i1) = jax.device_get(runs)
    for field in ("train_return", "eval_return", "grad_norm", "critic_loss"):
        np.testing.assert_array_equal(getattr(i0, field), getattr(i1, field), err_msg=field)
    for a, b in zip(jax.tree.leaves(s0.params), jax.tree.leaves(s1.params), strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.all(np.isnan(i0.eval_mode_return))
    assert np.all(np.isfinite(i1.eval_mode_return))
    assert not np.array_equal(i1.eval_mode_return, i1.eval_return)


def _reference_return(task, key, params, num_envs, horizon, act):
    """Mean return of ``act(params, obs [E, O]) -> [E, A]`` (NumPy) from the evaluation's
    resets (``train.rollout`` splits its key into the resets' key and the actions')."""
    k_reset, _ = jax.random.split(key)
    state = train.reset_envs(k_reset, task, num_envs)
    step = jax.jit(jax.vmap(lambda s, a: envs.step(task, s, a)))
    total = np.zeros(num_envs)
    for _ in range(horizon):
        a = act(params, np.asarray(state.obs, np.float64)).astype(np.float32)
        state, r = step(state, a)
        total += np.asarray(r)
    return total.mean()


@pytest.mark.heavy
@pytest.mark.parametrize("method", ["gaussian", "flow", "ppo"])
def test_deterministic_eval_is_a_rollout_of_the_mode(method):
    """``Info.eval_mode_return`` of an update equals the return of the updated policy's
    mode (computed in NumPy from its weights) rolled out step by step from the same
    resets."""
    task = envs.make_task("soft_quadruped")
    cfg = _cfg(method)
    trainer = rfo.make_trainer(task, cfg, deterministic_eval=True)
    key = jax.random.key(5)
    state = trainer.init(jax.random.key(0))
    state, info = jax.jit(trainer.step)(key, state)
    k_eval = jax.random.split(key, 4 if method == "ppo" else 3)[2 if method == "ppo" else 1]
    if method == "gaussian":
        act = _gaussian_mean
    elif method == "flow":
        def act(p, o):
            return _flow_mode(p, o, cfg.ode_steps)
    else:
        def act(p, o):
            d = jax.tree.map(lambda x: np.asarray(x, np.float64), nnx.to_pure_dict(p))
            h = np.tanh(o @ d["pi1"]["kernel"] + d["pi1"]["bias"])
            h = np.tanh(h @ d["pi2"]["kernel"] + d["pi2"]["bias"])
            return np.clip(h @ d["mu"]["kernel"] + d["mu"]["bias"], -1.0, 1.0)
    want = _reference_return(task, k_eval, state.params, cfg.num_envs, cfg.eval_horizon, act)
    np.testing.assert_allclose(float(info.eval_mode_return), want, rtol=1e-4, atol=1e-5)
