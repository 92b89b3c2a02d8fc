"""The non-consecutive variation S_T against NumPy and against its expectation identities."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import bco
from jaxlab.bco import estimators, losses, variation


def _numpy_stats(g, a):
    g, a = np.asarray(g, np.float64), np.asarray(a, np.float64)
    t, d = g.shape
    s = sum(np.sum((g[i] - g[i - 1]) ** 2) for i in range(1, t))
    comp = sum(d * a[i] @ a[i] - 2 * a[i] @ g[i - 1] + g[i - 1] @ g[i - 1] for i in range(1, t))
    pair = sum(a[i] @ a[i] + a[i - 1] @ a[i - 1] for i in range(1, t))
    played = sum(np.sum((a[i] - a[i - 1]) ** 2) for i in range(1, t))
    return s, comp, (d - 1) * pair + played, np.sum(a * a), played, 2 * d * d * pair


def test_stats_match_a_numpy_loop():
    kg, ka = jax.random.split(jax.random.key(0))
    g, a = jax.random.normal(kg, (30, 5)), jax.random.normal(ka, (30, 5))
    got = variation.stats(g, a)
    np.testing.assert_allclose(np.array(got, np.float64), _numpy_stats(g, a), rtol=2e-5)
    np.testing.assert_allclose(variation.estimated_variation(g), got.estimated, rtol=1e-6)


def _fixed_path_estimates(key, a):
    """Two-point estimates of linear losses <a_t, x> (exact: g = d <a_t, u_t> u_t)."""
    t, d = a.shape
    u = jax.vmap(lambda k: estimators.sphere(k, d))(jax.random.split(key, t))
    return jax.vmap(lambda ai, ui: estimators.two_point(ai @ ui, -(ai @ ui), ui, 1.0))(a, u)


def test_expectation_on_a_fixed_path_is_linear_in_d_eq3():
    """Monte Carlo mean of S_T equals eq. (3) for independent directions (z-test), and
    every sample stays below the per-round worst-case bound."""
    for d in (2, 16):
        a = jax.random.normal(jax.random.key(d), (12, d))
        keys = jax.random.split(jax.random.key(100 + d), 10_000)
        g = jax.jit(jax.vmap(_fixed_path_estimates, (0, None)))(keys, a)
        s = np.asarray(jax.vmap(variation.estimated_variation)(g), np.float64)
        ref = variation.stats(g[0], a)
        z = (s.mean() - float(ref.decoupled)) / (s.std(ddof=1) / np.sqrt(s.size))
        assert abs(z) < 4.5, (d, s.mean(), float(ref.decoupled), z)
        assert np.all(s <= float(ref.worst_case) * (1 + 1e-5))


def test_compensator_is_unbiased_along_a_learner_path():
    """E[S_T - C_T] = 0 when x_t depends on past directions (the learner's own path)."""
    d, t = 8, 60
    dom = bco.ball(d)
    seq = losses.switching_quadratic(jax.random.key(0), t, d, 1, radius=0.3, offset=0.3)
    learner = bco.gradient_variation(dom, 0.05)

    def one(k):
        info = bco.run(k, learner, seq, jnp.zeros(d))
        st = variation.stats(info.g, variation.played_gradients(info, seq))
        return st.estimated - st.compensator, st.estimated

    diff, s = jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(1), 1500))
    diff = np.asarray(diff, np.float64)
    z = diff.mean() / (diff.std(ddof=1) / np.sqrt(diff.size))
    assert abs(z) < 4.5, z
    assert float(np.mean(s)) > 10 * abs(diff.mean())  # the test has power: S_T is large


def test_played_gradients_of_a_quadratic():
    d, t = 3, 7
    seq = losses.drifting_quadratic(jax.random.key(0), t, d, 0.3, curvature=2.0)
    x = jax.random.normal(jax.random.key(1), (t, d)) * 0.1
    info = bco.Info(x, jnp.zeros(t), jnp.zeros((t, d)))
    np.testing.assert_allclose(variation.played_gradients(info, seq),
                               2.0 * (x - seq.centers), rtol=1e-5, atol=1e-6)
