"""A user's loss family (``loss_sequence``) through ``run`` / ``regret`` /
``dynamic_regret`` / ``played_gradients``, checked against the shipped quadratic family;
learners built inside ``jit``; ``vmap`` over step sizes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import bco
from jaxlab.bco import losses, variation

T, D = 60, 3


def _quadratic_as_user_family(seq: losses.QuadraticSeq):
    """The isotropic quadratic written as a user would, comparators in numpy-free closed
    form (prefix mean projected; per-round centre projected)."""
    a = float(seq.curvature)

    def comparator(c, domain):
        t = jnp.arange(1, c.shape[0] + 1, dtype=jnp.float32)[:, None]
        best = jax.vmap(domain.project)(jnp.cumsum(c, 0) / t)
        # sum_{s<=t} f_s(best_t), by brute force over the lower-triangular mask
        sq = jnp.sum((best[:, None, :] - c[None, :, :]) ** 2, -1)
        return 0.5 * a * jnp.sum(jnp.tril(jnp.ones((c.shape[0],) * 2)) * sq, 1)

    return losses.loss_sequence(
        {"centre": seq.centers}, lambda p, x: 0.5 * a * jnp.sum((x - p["centre"]) ** 2),
        comparator=lambda p, dom: comparator(p["centre"], dom),
        minimiser=lambda p, dom: dom.project(p["centre"]), smoothness=a)


@pytest.fixture(scope="module")
def pair():
    seq = losses.drifting_quadratic(jax.random.key(0), T, D, drift=0.05, curvature=2.0)
    return seq, _quadratic_as_user_family(seq)


@pytest.mark.heavy
def test_user_family_matches_the_shipped_one(pair):
    shipped, own = pair
    dom = bco.ball(D)
    learner = bco.gradient_variation(dom, 0.05)
    x0 = jnp.full(D, 0.1)
    a = bco.run(jax.random.key(1), learner, shipped, x0)
    b = bco.run(jax.random.key(1), learner, own, x0)
    np.testing.assert_allclose(b.loss, a.loss, rtol=1e-6)
    np.testing.assert_allclose(b.x, a.x, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(bco.regret(b, own, dom), bco.regret(a, shipped, dom),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(bco.dynamic_regret(b, own, dom),
                               bco.dynamic_regret(a, shipped, dom), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(variation.played_gradients(b, own),
                               variation.played_gradients(a, shipped), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(losses.fixed_comparator_loss(own, dom, 200),
                               losses.fixed_comparator_loss(shipped, dom, 200), rtol=1e-5)


def test_user_family_under_jit_and_vmap_over_sequences(pair):
    _, own = pair
    dom = bco.ball(D)
    learner = bco.agarwal2010(dom, 0.05)
    shift = jnp.array([0.0, 0.1, -0.1])
    seqs = jax.vmap(lambda s: losses.FunctionSeq(
        jax.tree.map(lambda v: v + s, own.params), own.loss, own.comparator, own.minimiser,
        own.smoothness))(shift)

    @jax.jit
    @jax.vmap
    def final(seq):
        info = bco.run(jax.random.key(2), learner, seq, jnp.zeros(D))
        return bco.regret(info, seq, dom)[-1]

    got = final(seqs)
    for i, s in enumerate(np.asarray(shift)):
        one = losses.FunctionSeq(jax.tree.map(lambda v, s=s: v + s, own.params), own.loss,
                                 own.comparator, own.minimiser, own.smoothness)
        info = bco.run(jax.random.key(2), learner, one, jnp.zeros(D))
        np.testing.assert_allclose(got[i], bco.regret(info, one, dom)[-1], rtol=1e-4)


def test_missing_comparators_and_bad_params_are_named():
    seq = losses.loss_sequence(jnp.zeros((5, 2)), lambda c, x: jnp.sum((x - c) ** 2))
    info = bco.run(jax.random.key(0), bco.gradient_variation(bco.ball(2), 0.1), seq,
                   jnp.zeros(2))
    for fn, field in ((bco.regret, "comparator"), (bco.dynamic_regret, "minimiser")):
        with pytest.raises(ValueError, match=f"`seq.{field}` must be given"):
            fn(info, seq, bco.ball(2))
    with pytest.raises(ValueError, match="`seq.smoothness` must be given"):
        losses.fixed_comparator_loss(seq, bco.ball(2))
    with pytest.raises(ValueError, match="no closed-form V_T"):
        losses.gradient_variation(seq)
    with pytest.raises(ValueError, match="same leading size"):
        losses.loss_sequence({"a": jnp.zeros((5, 2)), "b": jnp.zeros(4)}, lambda p, x: 0.0)
    with pytest.raises(ValueError, match="`loss` must be callable"):
        losses.loss_sequence(jnp.zeros((5, 2)), "f")
    with pytest.raises(ValueError, match="`smoothness`"):
        losses.loss_sequence(jnp.zeros((5, 2)), lambda p, x: 0.0, smoothness=0.0)
    with pytest.raises(ValueError, match="your own FunctionSeq"):
        bco.run(jax.random.key(0), bco.gradient_variation(bco.ball(2), 0.1), object(),
                jnp.zeros(2))
    with pytest.raises(ValueError, match="`info` must hold one round per round"):
        bco.regret(info._replace(loss=info.loss[:3]), seq, bco.ball(2))


@pytest.mark.parametrize("make", [
    lambda delta, scale, r: bco.two_point(bco.ball(D, r), delta, bco.step_rule(scale)),
    lambda delta, scale, r: bco.gradient_variation(bco.ball(D, r), delta),
    lambda delta, scale, r: bco.ogd_sqrt_d_step(bco.ball(D, r), delta),
    lambda delta, scale, r: bco.one_point_box(bco.box(-r * jnp.ones(D), r * jnp.ones(D)),
                                              delta, bco.step_rule(scale)),
    lambda delta, scale, r: bco.ensembles.universal_ensemble(bco.ball(D, r), delta),
    lambda delta, scale, r: bco.ensembles.dynamic_ensemble(bco.ball(D, r), delta, T),
], ids=["two_point", "gradient_variation", "ogd_sqrt_d", "one_point_box", "universal",
        "dynamic"])
@pytest.mark.heavy
def test_learners_built_inside_jit_match_eager(make, pair):
    shipped, _ = pair

    def total(delta, scale, r):
        info = bco.run(jax.random.key(3), make(delta, scale, r), shipped, jnp.zeros(D))
        return jnp.sum(info.loss)

    np.testing.assert_allclose(jax.jit(total)(0.05, 0.7, 1.0), total(0.05, 0.7, 1.0),
                               rtol=1e-5)


def test_vmap_over_step_sizes_equals_a_loop(pair):
    shipped, _ = pair
    dom = bco.ball(D)
    scales = jnp.array([0.25, 1.0, 4.0])

    def final(scale):
        info = bco.run(jax.random.key(4), bco.two_point(dom, 0.05, bco.step_rule(scale)),
                       shipped, jnp.zeros(D))
        return bco.regret(info, shipped, dom)[-1]

    got = jax.jit(jax.vmap(final))(scales)
    want = [final(float(s)) for s in scales]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert len(set(np.round(np.asarray(got), 5))) == 3  # the step size matters here
