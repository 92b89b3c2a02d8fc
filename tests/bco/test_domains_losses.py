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


def _fd_grad(f, x, h=1e-5):
    x = np.asarray(x, np.float64)
    return np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(x.size)])


@pytest.mark.heavy
def test_new_families_gradients_match_finite_differences():
    """jax.grad of each new family's round loss against central differences in float64."""
    import functools

    d = 5
    x = np.asarray(jax.random.normal(jax.random.key(7), (d,)), np.float64) * 0.4
    for family, param in (("lse", 3.0), ("huber", 0.3), ("huber", 5.0),
                          ("softplus_quadratic", 0.5)):
        seq = losses.stochastic_family(jax.random.key(1), family, 3, d, 0.5, param=param)
        params, f = losses.round_params(seq)
        p0 = np.asarray(params[0], np.float64)
        with jax.enable_x64(True):
            fx = functools.partial(f, jnp.asarray(p0))
            fd = _fd_grad(lambda y, fx=fx: float(fx(jnp.asarray(y))), x)
            g = np.asarray(jax.grad(fx)(jnp.asarray(x)))
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7, err_msg=family)


def test_new_families_values_against_numpy():
    d = 4
    c = np.array([0.1, -0.2, 0.3, 0.0])
    x = np.array([0.5, 0.1, -0.2, 0.4])
    r = np.linalg.norm(x - c)
    s, w, lam = 2.0, 0.3, 0.7
    z = s * (x - c)
    want = {
        losses.LogSumExpSeq: (np.log(np.sum(np.exp(z)) + np.sum(np.exp(-z))) - np.log(2 * d)) / s,
        losses.HuberSeq: w * (r - w / 2),
        losses.SoftplusQuadraticSeq: np.log1p(np.exp(c @ x)) + lam / 2 * x @ x,
    }
    for cls, p in ((losses.LogSumExpSeq, s), (losses.HuberSeq, w),
                   (losses.SoftplusQuadraticSeq, lam)):
        _, f = losses.round_params(cls(jnp.asarray(c)[None], jnp.float32(p)))
        np.testing.assert_allclose(float(f(jnp.asarray(c), jnp.asarray(x))), want[cls],
                                   rtol=1e-5, err_msg=cls.__name__)


def test_fixed_comparator_matches_the_quadratic_closed_form_and_brute_force():
    d, t = 3, 50
    dom = bco.ball(d)
    quad = losses.stochastic_quadratic(jax.random.key(0), t, d, 0.5, radius=0.9)
    np.testing.assert_allclose(losses.fixed_comparator_loss(quad, dom, 300),
                               losses.prefix_comparator_losses(quad, dom)[-1], rtol=1e-4)
    # A smooth family: no random point of the ball does better than the comparator.
    seq = losses.stochastic_family(jax.random.key(2), "huber", t, d, 0.5, param=0.2)
    params, f = losses.round_params(seq)
    best = float(losses.fixed_comparator_loss(seq, dom, 2000))
    pts = jax.vmap(dom.project)(jax.random.normal(jax.random.key(3), (4000, d)) * 0.6)
    totals = jax.vmap(lambda x: jnp.sum(jax.vmap(f, (0, None))(params, x)))(pts)
    assert best <= float(totals.min()) + 1e-4
    assert float(totals.min()) - best < 0.05 * best  # the brute force gets close


def test_circle_sequences_vmap_at_large_d_without_qr():
    """drifting_quadratic jitted and vmapped at d = 64 (QR used to hang XLA:CPU here):
    the centres stay on the circle of the requested radius and V_T matches its formula."""
    t, d, r, w = 50, 64, 0.5, 0.2
    seqs = jax.jit(jax.vmap(lambda k: losses.drifting_quadratic(k, t, d, w, radius=r)))(
        jax.random.split(jax.random.key(0), 4))
    np.testing.assert_allclose(jnp.linalg.norm(seqs.centers, axis=-1), r, rtol=1e-5)
    v = jax.vmap(losses.gradient_variation)(seqs)
    np.testing.assert_allclose(v, (t - 1) * (2 * r * np.sin(w / 2)) ** 2, rtol=1e-4)
