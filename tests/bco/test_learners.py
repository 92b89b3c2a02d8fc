import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import bco
from jaxlab.bco import ensembles, losses
from jaxlab.bco.reference import two_point_ogd_numpy


@pytest.mark.parametrize("optimistic", [True, False])
def test_matches_numpy_reference(optimistic):
    d, t, delta = 3, 300, 0.1
    dom = bco.ball(d, 1.0)
    seq = losses.stochastic_quadratic(jax.random.key(0), t, d, sigma=0.3, curvature=1.5)
    learner = bco.two_point(dom, delta, bco.step_rule(2.0), optimistic=optimistic)
    info = jax.jit(lambda k: bco.run(k, learner, seq, jnp.zeros(d)))(jax.random.key(1))
    us = jax.vmap(lambda k: bco.estimators.sphere(k, d))(jax.random.split(jax.random.key(1), t))
    ref_loss, ref_x = two_point_ogd_numpy(seq.centers, 1.5, 1.0, delta, 2.0, np.asarray(us),
                                          optimistic)
    np.testing.assert_allclose(info.x, ref_x, atol=2e-4)
    np.testing.assert_allclose(info.loss, ref_loss, rtol=1e-3, atol=1e-4)


@pytest.mark.heavy
def test_traced_optimistic_flag_is_one_program_for_both_learners():
    """optimistic as a vmapped bool array: one program whose rows are the optimistic and
    the plain learner, against the NumPy reference of each."""
    d, t, delta = 3, 200, 0.1
    dom = bco.ball(d, 1.0)
    seq = losses.stochastic_quadratic(jax.random.key(0), t, d, sigma=0.3, curvature=1.5)

    def xs(opt):
        learner = bco.two_point(dom, delta, bco.step_rule(2.0), optimistic=opt)
        return bco.run(jax.random.key(1), learner, seq, jnp.zeros(d)).x

    both = jax.jit(jax.vmap(xs))(jnp.array([True, False]))
    us = jax.vmap(lambda k: bco.estimators.sphere(k, d))(jax.random.split(jax.random.key(1), t))
    for row, opt in zip(both, (True, False), strict=True):
        _, ref_x = two_point_ogd_numpy(seq.centers, 1.5, 1.0, delta, 2.0, np.asarray(us), opt)
        np.testing.assert_allclose(row, ref_x, atol=2e-4)
    with pytest.raises(ValueError, match="optimistic"):
        bco.two_point(dom, delta, bco.step_rule(2.0), optimistic=jnp.array([True, False]))


def _mean_final_regret(learner, make_seq, domain, seeds=8, dynamic=False):
    def one(k):
        ks, kr = jax.random.split(k)
        seq = make_seq(ks)
        info = bco.run(kr, learner, seq, domain.center)
        return (bco.dynamic_regret if dynamic else bco.regret)(info, seq, domain)

    return np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(7), seeds))).mean(0)


@pytest.mark.heavy
def test_regret_is_sublinear_on_easy_sequences():
    dom = bco.ball(4)
    r = _mean_final_regret(bco.gradient_variation(dom, 0.05),
                           lambda k: losses.stochastic_quadratic(k, 8000, 4, sigma=0.0), dom)
    # Average regret falls by > 4x from T=500 to T=8000 (linear regret would keep it flat).
    assert r[-1] / 8000 < 0.25 * r[499] / 500
    assert r[-1] > 0


@pytest.mark.heavy
def test_strongly_convex_variant_beats_convex_on_strongly_convex_losses():
    dom = bco.ball(8)
    mk = lambda k: losses.stochastic_quadratic(k, 3000, 8, sigma=0.3, curvature=1.0)  # noqa: E731
    convex = _mean_final_regret(bco.gradient_variation(dom, 0.05), mk, dom)[-1]
    strong = _mean_final_regret(bco.gradient_variation(dom, 0.05, bco.step_rule(lam=1.0)), mk,
                                dom)[-1]
    assert strong < 0.6 * convex


@pytest.mark.heavy
def test_one_point_hint_beats_no_hint_on_slowly_drifting_linear_losses():
    dom = bco.box(-np.ones(3), np.ones(3))
    rule = bco.step_rule(float(dom.diameter))
    mk = lambda k: losses.drifting_linear(k, 6000, 3, drift=0.001)  # noqa: E731
    ema = _mean_final_regret(bco.one_point_box(dom, 0.1, rule), mk, dom)[-1]
    none = _mean_final_regret(bco.one_point_box(dom, 0.1, rule, hint="none"), mk, dom)[-1]
    assert ema < none


def test_one_base_ensemble_equals_its_base():
    """With N = 1 the mixture is the base learner: identical plays and losses."""
    dom = bco.ball(3)
    rule = bco.step_rule(2.0)
    single = bco.gradient_variation(dom, 0.05, rule)
    ens = ensembles.ensemble(dom, 0.05, jax.tree.map(lambda x: x[None], rule))
    seq = losses.switching_quadratic(jax.random.key(0), 200, 3, period=20)
    a = bco.run(jax.random.key(1), single, seq, jnp.zeros(3))
    b = bco.run(jax.random.key(1), ens, seq, jnp.zeros(3))
    # fp32 tier: p @ xs with p = [1.0] rounds differently from xs[0] at the 1e-7 level.
    np.testing.assert_allclose(a.x, b.x, atol=1e-5)
    np.testing.assert_allclose(a.loss, b.loss, atol=1e-5)


@pytest.mark.heavy
def test_dynamic_ensemble_beats_single_learner_on_slow_switching():
    dom = bco.ball(8)
    mk = lambda k: losses.switching_quadratic(k, 2000, 8, period=1000)  # noqa: E731
    single = _mean_final_regret(bco.gradient_variation(dom, 0.05), mk, dom, dynamic=True)[-1]
    ens = _mean_final_regret(ensembles.dynamic_ensemble(dom, 0.05, 2000), mk, dom,
                             dynamic=True)[-1]
    assert ens < single


@pytest.mark.heavy
def test_universal_adapts_to_strong_convexity():
    dom = bco.ball(8)
    mk = lambda k: losses.stochastic_quadratic(k, 2000, 8, sigma=0.3, curvature=1.0)  # noqa: E731
    convex = _mean_final_regret(bco.gradient_variation(dom, 0.05), mk, dom)[-1]
    universal = _mean_final_regret(ensembles.universal_ensemble(dom, 0.05), mk, dom)[-1]
    assert universal < convex


@pytest.mark.heavy
def test_plays_stay_in_the_shrunk_domain_and_vmap_matches_loop():
    dom = bco.box(-np.ones(4), np.ones(4))
    learner = bco.gradient_variation(dom, 0.2)
    keys = jax.random.split(jax.random.key(3), 3)
    seq = losses.drifting_quadratic(jax.random.key(4), 100, 4, drift=0.1, radius=2.0)
    batched = jax.vmap(lambda k: bco.run(k, learner, seq, jnp.zeros(4)))(keys)
    assert float(jnp.max(jnp.abs(batched.x))) <= 0.8 + 1e-6
    for i, k in enumerate(keys):
        np.testing.assert_allclose(batched.loss[i], bco.run(k, learner, seq, jnp.zeros(4)).loss,
                                   rtol=1e-5, atol=1e-6)


def test_no_retracing_across_keys_and_sequences():
    dom = bco.ball(3)
    learner = bco.gradient_variation(dom, 0.05)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def go(key, centers):
        return bco.run(key, learner, losses.QuadraticSeq(centers, jnp.float32(1.0)),
                       jnp.zeros(3)).loss

    for i in range(3):
        go(jax.random.key(i), jax.random.normal(jax.random.key(10 + i), (50, 3)))


def test_bad_input():
    dom = bco.ball(3)
    with pytest.raises(ValueError, match="delta"):
        bco.gradient_variation(dom, 0.0)
    with pytest.raises(ValueError, match="delta"):
        bco.gradient_variation(dom, 1.5)
    with pytest.raises(ValueError, match="scale"):
        bco.step_rule(scale=0.0)
    with pytest.raises(ValueError, match="scale"):
        bco.step_rule(scale=-1.0)
    with pytest.raises(ValueError, match="lam"):
        bco.step_rule(lam=-1.0)
    with pytest.raises(ValueError, match="x0"):
        bco.run(jax.random.key(0), bco.gradient_variation(dom, 0.1),
                losses.stochastic_quadratic(jax.random.key(0), 10, 3, 0.1), jnp.zeros(4))
    with pytest.raises(ValueError, match="domain"):
        bco.one_point_box(dom, 0.1, bco.step_rule())
    with pytest.raises(ValueError, match="hint"):
        bco.one_point_box(bco.box(-np.ones(2), np.ones(2)), 0.1, bco.step_rule(), hint="x")
    with pytest.raises(ValueError, match="lams"):
        ensembles.universal_ensemble(dom, 0.1, lams=(1.0, 0.0))
