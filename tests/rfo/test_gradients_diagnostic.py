"""``experiments.rfo_gradients``: per-environment gradients through the soft body equal
each environment's own reverse-mode gradient and a central finite difference, and the
statistics equal their NumPy definitions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import rfo_gradients as rg
from jaxlab.rfo import envs


def test_gradient_stats_against_numpy():
    rng = np.random.default_rng(0)
    g = rng.normal(size=(6, 5)) + 2.0
    r = rng.normal(size=6)
    g[3, 1] = np.nan  # a non-finite row is counted and left out
    s = rg.gradient_stats(r, g)
    keep = np.array([0, 1, 2, 4, 5])
    gk, mean = g[keep], g[keep].mean(0)
    assert s["environments"] == 5 and s["nonfinite_share"] == pytest.approx(1 / 6)
    assert s["mean_grad_norm"] == pytest.approx(np.mean([np.linalg.norm(x) for x in gk]))
    assert s["norm_of_mean"] == pytest.approx(np.linalg.norm(mean))
    dev = np.mean([np.sum((x - mean) ** 2) for x in gk])
    assert s["relative_variance"] == pytest.approx(dev / np.sum(mean ** 2))
    assert s["mean_return"] == pytest.approx(r[keep].mean())
    with pytest.raises(ValueError, match="grads"):
        rg.gradient_stats(r, g[:, 0])


@pytest.mark.parametrize("kw,name", [({"horizons": [4, 0]}, "horizons"), ({"batch": 0}, "batch"),
                                     ({"scale": 0.0}, "scale"),
                                     ({"action_noise": -0.1}, "action_noise")])
def test_measure_rejects_bad_input_before_any_work(kw, name, monkeypatch):
    def no_task(_):
        raise AssertionError("measure built a task before checking its arguments")

    monkeypatch.setattr(rg.envs, "make_task", no_task)
    args = {"task_name": "soft_quadruped", "horizons": [1, 2], "batch": 2, "scale": 1.0,
            "seed": 0, **kw}
    with pytest.raises(ValueError, match=name):
        rg.measure(**args)


@pytest.mark.heavy
def test_per_env_gradients_through_the_soft_body():
    """Two environments, two steps, held action noise: the vmapped gradient of each equals
    its own ``jax.grad``, and a central finite difference along a random direction
    (float32, so a loose but failing-when-wrong tolerance)."""
    task = envs.make_task("soft_quadruped")
    kp, ks, kd, kn = jax.random.split(jax.random.key(1), 4)
    params = rg.linear_policy(kp, task.obs_dim, task.act_dim, 1.0)
    states = jax.vmap(lambda k: envs.reset(k, task))(jax.random.split(ks, 2))
    noise = 0.6 * jax.random.normal(kn, (2, 2, task.act_dim))
    ret, g = rg.per_env_gradients(params, task, states, noise)
    assert g.shape == (2, task.obs_dim * task.act_dim + task.act_dim)
    one = jax.tree.map(lambda x: x[1], states)
    ref = jax.grad(rg.rollout_return)(params, task, one, noise[1])
    flat = jax.flatten_util.ravel_pytree(ref)[0]
    np.testing.assert_allclose(g[1], flat, rtol=1e-4, atol=1e-6)
    d = jax.tree.map(lambda x: jax.random.normal(kd, x.shape), params)
    eps = 1e-2
    f = jax.jit(lambda p: rg.rollout_return(p, task, one, noise[1]))
    fd = (f(jax.tree.map(lambda p, u: p + eps * u, params, d))
          - f(jax.tree.map(lambda p, u: p - eps * u, params, d))) / (2 * eps)
    dd = jax.flatten_util.ravel_pytree(d)[0]
    assert float(jnp.dot(flat, dd)) == pytest.approx(float(fd), rel=0.05)
    # the reward is a difference of centre-of-mass positions: float32 cancellation
    assert np.isclose(ret[1], f(params), rtol=1e-3)
