import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import bco
from jaxlab.bco import losses


@pytest.mark.parametrize("domain", [bco.ball(5, 1.5), bco.box(-np.ones(5), 2 * np.ones(5))])
def test_projection_is_the_nearest_point(domain):
    """Variational inequality <x - p, y - p> <= 0 for all y in the set, and p in the set."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = jnp.asarray(rng.normal(size=5) * 3)
        p = domain.project(x)
        np.testing.assert_allclose(domain.project(p), p, atol=1e-6)  # p is in the set
        ys = jax.vmap(domain.project)(jnp.asarray(rng.normal(size=(200, 5)) * 3))
        assert float(jnp.max((ys - p) @ (x - p))) <= 1e-5


def test_shrunk_domain_keeps_queries_inside():
    for domain in [bco.ball(4, 1.0), bco.box(-np.ones(4), np.array([1.0, 2.0, 3.0, 1.0]))]:
        small = bco.domains.shrunk(domain, 0.3)
        rng = np.random.default_rng(1)
        for _ in range(50):
            x = small.project(jnp.asarray(rng.normal(size=4) * 5))
            u = bco.estimators.sphere(jax.random.key(int(rng.integers(1e6))), 4)
            for y in (x + 0.3 * u, x - 0.3 * u):
                np.testing.assert_allclose(domain.project(y), y, atol=1e-5)


def test_domain_errors():
    with pytest.raises(ValueError, match="delta"):
        bco.domains.shrunk(bco.ball(3), 1.0)
    with pytest.raises(ValueError, match="delta"):
        bco.domains.shrunk(bco.ball(3), -0.1)
    with pytest.raises(ValueError, match="high"):
        bco.box(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="high"):
        bco.box(np.zeros(2), np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="radius"):
        bco.ball(3, 0.0)


def test_prefix_comparator_matches_brute_force_quadratic():
    dom = bco.ball(3, 0.4)
    seq = losses.stochastic_quadratic(jax.random.key(0), 50, 3, sigma=0.5, radius=0.6,
                                      curvature=2.0)
    best = np.asarray(losses.prefix_comparator_losses(seq, dom))
    c = np.asarray(seq.centers, np.float64)
    # Brute force: projected gradient descent on the prefix sum, for a few prefixes.
    for t in (1, 10, 50):
        x = np.zeros(3)
        for _ in range(2000):
            x = x - 0.01 * 2.0 * (t * x - c[:t].sum(0))
            n = np.linalg.norm(x)
            x = x if n <= 0.4 else x * 0.4 / n
        brute = 0.5 * 2.0 * np.sum((x - c[:t]) ** 2)
        np.testing.assert_allclose(best[t - 1], brute, rtol=1e-4)


def test_prefix_comparator_matches_enumeration_linear():
    dom = bco.box(-np.ones(3), np.array([1.0, 2.0, 0.5]))
    seq = losses.drifting_linear(jax.random.key(1), 30, 3, drift=0.2)
    best = np.asarray(losses.prefix_comparator_losses(seq, dom))
    th = np.asarray(seq.thetas, np.float64)
    corners = np.array(list(itertools.product(*zip(np.asarray(dom.low), np.asarray(dom.high),
                                                   strict=True))))
    for t in (1, 7, 30):
        np.testing.assert_allclose(best[t - 1], (corners @ th[:t].sum(0)).min(), rtol=1e-5,
                                   atol=1e-5)


def test_variation_and_path_length():
    seq = losses.switching_quadratic(jax.random.key(2), 100, 4, period=10, radius=0.3,
                                     curvature=2.0)
    # 9 switches, each moving the centre by 0.6: V_T = a^2 * 9 * 0.36.
    np.testing.assert_allclose(losses.gradient_variation(seq), 4.0 * 9 * 0.36, rtol=1e-5)
    u, _ = losses.per_round_minima(seq, bco.ball(4))
    np.testing.assert_allclose(losses.path_length(u), 9 * 0.6, rtol=1e-5)
    drift = losses.drifting_quadratic(jax.random.key(3), 200, 4, drift=0.05, radius=0.5)
    np.testing.assert_allclose(losses.gradient_variation(drift),
                               199 * (2 * 0.5 * np.sin(0.025)) ** 2, rtol=1e-3)


def test_loss_generator_errors():
    with pytest.raises(ValueError, match="num_rounds"):
        losses.stochastic_quadratic(jax.random.key(0), 0, 3, 0.1)
    with pytest.raises(ValueError, match="dim"):
        losses.drifting_linear(jax.random.key(0), 10, 0, 0.1)
    with pytest.raises(ValueError, match="period"):
        losses.switching_quadratic(jax.random.key(0), 10, 3, 0)
