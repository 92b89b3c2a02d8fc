"""Flow policy: gradients through the Euler ODE, a bimodal fit, regularisers, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxlab.rfo import flow, regularizers


@pytest.mark.heavy
def test_gradient_through_ode_matches_finite_differences():
    """d/dtheta of a toy one-step cost ||x + tanh(a_K(theta))||^2 along a random direction."""
    with jax.enable_x64(True):
        cfg = flow.FlowConfig(obs_dim=3, act_dim=2, chunk=2, ode_steps=4, hidden=16)
        graphdef, params = flow.init(jax.random.key(0), cfg)
        params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64) * 20.0, params)
        obs = jax.random.normal(jax.random.key(1), (5, 3), jnp.float64)
        key = jax.random.key(2)

        def cost(p):
            a = flow.sample(key, graphdef, p, cfg, obs)  # same noise every call
            x = obs[:, :2, None] + a.transpose(0, 2, 1)
            return jnp.sum(x ** 2)

        direction = jax.tree.map(lambda x: jax.random.normal(jax.random.key(3), x.shape,
                                                             x.dtype), params)
        grad = jax.grad(cost)(params)
        analytic = sum(jnp.vdot(g, d) for g, d in zip(jax.tree.leaves(grad),
                                                       jax.tree.leaves(direction),
                                                       strict=True))
        h = 1e-6
        shift = lambda s: jax.tree.map(lambda p, d: p + s * d, params, direction)  # noqa: E731
        fd = (cost(shift(h)) - cost(shift(-h))) / (2 * h)
        np.testing.assert_allclose(float(analytic), float(fd), rtol=1e-6)


def _fit_cfm(targets, steps=600):
    cfg = flow.FlowConfig(obs_dim=1, act_dim=1, ode_steps=8, hidden=64)
    graphdef, params = flow.init(jax.random.key(0), cfg)
    opt = optax.adam(3e-3)
    obs = jnp.zeros((targets.shape[0], 1))

    @jax.jit
    def step(p, o, k):
        loss, g = jax.value_and_grad(lambda q: regularizers.cfm_loss(
            k, graphdef, q, obs, regularizers.pre_squash(targets)))(p)
        u, o = opt.update(g, o, p)
        return optax.apply_updates(p, u), o, loss

    o = opt.init(params)
    for i in range(steps):
        params, o, _ = step(params, o, jax.random.key(i))
    return cfg, graphdef, params


def test_flow_fits_a_bimodal_action_law_a_gaussian_cannot():
    modes = jnp.where(jax.random.bernoulli(jax.random.key(0), 0.5, (512, 1)), 0.8, -0.8)
    cfg, graphdef, params = _fit_cfm(modes)
    a = np.asarray(flow.sample(jax.random.key(1), graphdef, params, cfg,
                               jnp.zeros((4000, 1))))[:, 0, 0]
    near_modes = np.mean(np.abs(np.abs(a) - 0.8) < 0.15)
    # The best Gaussian in pre-squash space (MLE: mean 0, std atanh(0.8)) puts this mass
    # within 0.15 of the modes:
    z = np.random.default_rng(0).normal(0, np.arctanh(0.8), 200_000)
    gauss = np.mean(np.abs(np.abs(np.tanh(z)) - 0.8) < 0.15)
    assert near_modes > 0.8 > gauss
    assert 0.35 < np.mean(a > 0) < 0.65  # both modes kept


def test_regularisers_are_finite_and_exploration_spreads_actions():
    cfg = flow.FlowConfig(obs_dim=2, act_dim=1, chunk=3)
    graphdef, params = flow.init(jax.random.key(0), cfg)
    obs = jnp.ones((8, 2))
    acts = jnp.ones((8, 3, 1))  # saturated actions: atanh must stay finite
    s = regularizers.stability_loss(jax.random.key(0), graphdef, params, obs, acts)
    e = regularizers.exploration_loss(jax.random.key(1), graphdef, params, obs, (3, 1))
    assert np.isfinite(float(s)) and np.isfinite(float(e))
    g = jax.grad(lambda p: regularizers.stability_loss(jax.random.key(0), graphdef, p, obs,
                                                       acts))(params)
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree.leaves(g))


def test_bad_flow_arguments_raise():
    with pytest.raises(ValueError, match="ode_steps"):
        flow.init(jax.random.key(0), flow.FlowConfig(obs_dim=2, act_dim=1, ode_steps=0))
    cfg = flow.FlowConfig(obs_dim=2, act_dim=1)
    graphdef, params = flow.init(jax.random.key(0), cfg)
    with pytest.raises(ValueError, match="obs"):
        flow.sample(jax.random.key(0), graphdef, params, cfg, jnp.ones((4, 3)))
