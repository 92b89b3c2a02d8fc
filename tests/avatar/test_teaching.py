"""The teaching variants of AvAtar's score (ours): NumPy references, the adjoint utility's
gradient against autodiff, greedy diverse picks against a brute-force loop, and the
variants inside the whole-graph protocol (picks, diagnostics, refused parameters)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.avatar import adjoint, alignment, baselines, scores, tasks, teaching, wholegraph
from tests.avatar.test_wholegraph import KEY, P, _problem


def _plan(n=7, m=9, seed=0):
    rng = np.random.default_rng(seed)
    t = rng.random((n, m)) ** 4
    t[0] = 0.0
    t[0, 3] = 1.0  # a certain row
    return jnp.asarray(t / t.sum(), jnp.float32)


def test_uncertainty_is_one_minus_the_row_maximum():
    t = np.asarray(_plan())
    ref = 1.0 - (t / t.sum(1, keepdims=True)).max(1)
    np.testing.assert_allclose(teaching.uncertainty(jnp.asarray(t)), ref, rtol=1e-6)
    assert float(teaching.uncertainty(jnp.asarray(t))[0]) == 0.0


def test_uncertain_utility_gradient_matches_autodiff_with_u_held_constant():
    t = _plan()
    u = jax.lax.stop_gradient(teaching.uncertainty(t))
    grad = jax.grad(lambda x: jnp.sum(u[:, None] ** 3.0 * x**2))(t)
    np.testing.assert_allclose(teaching.uncertain_utility_gradient(t, 3.0), grad, rtol=1e-6)
    # the certain row has no say in the utility
    assert float(jnp.abs(teaching.uncertain_utility_gradient(t, 1.0)[0]).max()) == 0.0


def test_discounted_shifts_over_candidates_then_weights_by_uncertainty():
    t = _plan()
    s = jnp.asarray(np.random.default_rng(1).normal(size=7), jnp.float32)
    cand = jnp.asarray([True, True, False, True, True, False, True])
    got = np.asarray(teaching.discounted(s, t, cand, power=2.0))
    sn, c = np.asarray(s), np.asarray(cand)
    u = 1.0 - (np.asarray(t) / np.asarray(t).sum(1, keepdims=True)).max(1)
    ref = np.where(c, (sn - sn[c].min()) * u**2, 0.0)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-7)
    assert got[0] == 0.0  # a certain candidate is worth nothing, whatever its impact


def test_with_density_adds_unit_scores_over_the_candidates():
    rng = np.random.default_rng(2)
    s, d = rng.random(6), rng.random(6)
    cand = np.array([1, 1, 0, 1, 1, 1], bool)
    got = teaching.with_density(jnp.asarray(s), jnp.asarray(d), jnp.asarray(cand), weight=0.7)
    sc, dc = np.where(cand, s, 0), np.where(cand, d, 0)
    ref = np.where(cand, sc / np.linalg.norm(sc) + 0.7 * dc / np.linalg.norm(dc), 0)
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def _diverse_reference(s, x, num, diversity):
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    base = np.where(np.isfinite(s), s / s[np.isfinite(s)].max(), -np.inf)
    picked = []
    for _ in range(num):
        sim = np.array([max([x[i] @ x[p] for p in picked], default=0.0) for i in range(len(s))])
        eff = base - diversity * sim
        eff[picked] = -np.inf
        picked.append(int(np.argmax(eff)))
    return picked


@pytest.mark.parametrize("diversity", [0.0, 0.3, 2.0])
def test_diverse_top_k_matches_a_greedy_loop(diversity):
    rng = np.random.default_rng(3)
    s = rng.random(12)
    s[[2, 5]] = -np.inf
    x = rng.random((12, 4))
    x[1] = x[0] * 2.0  # two rows with the same direction
    got = teaching.diverse_top_k(jnp.asarray(s), jnp.asarray(x), 5, diversity)
    assert list(np.asarray(got)) == _diverse_reference(s, x, 5, diversity)
    if diversity == 0.0:
        assert list(np.asarray(got)) == list(np.argsort(-s)[:5])


def test_diverse_top_k_spreads_picks_that_top_k_would_cluster():
    s = np.array([1.0, 0.99, 0.98, 0.5])
    x = np.array([[1.0, 0.0], [1.0, 0.01], [1.0, 0.02], [0.0, 1.0]])
    assert sorted(np.asarray(teaching.diverse_top_k(jnp.asarray(s), jnp.asarray(x), 2, 0.0))) \
        == [0, 1]
    assert sorted(np.asarray(teaching.diverse_top_k(jnp.asarray(s), jnp.asarray(x), 2, 1.0))) \
        == [0, 3]


@pytest.mark.parametrize("call", [
    lambda t, c: teaching.discounted(jnp.zeros(7), t, c, power=-1.0),
    lambda t, c: teaching.discounted(jnp.zeros(7), t, c, power=float("nan")),
    lambda t, c: teaching.uncertain_utility_gradient(t, True),
    lambda t, c: teaching.with_density(jnp.zeros(7), jnp.zeros(6), c),
    lambda t, c: teaching.shift_nonnegative(jnp.zeros(7), jnp.zeros(7, bool)),
    lambda t, c: teaching.diverse_top_k(jnp.zeros(7), jnp.zeros((7, 2)), 8, 0.1),
    lambda t, c: teaching.diverse_top_k(jnp.zeros(7), jnp.zeros((6, 2)), 2, 0.1),
])
def test_bad_arguments_are_named(call):
    with pytest.raises((ValueError, TypeError), match="`"):
        call(_plan(), jnp.ones(7, bool))


def _select(strategy, teach, plan, task, anchors):
    pos1 = jnp.asarray(task.pos1, jnp.float32)
    return wholegraph._select(jax.random.key(1), plan, plan * 0.5 + 0.1, jnp.zeros(96),
                              anchors, jnp.asarray(task.src), baselines.representativeness(pos1),
                              pos1, strategy=strategy, num=5, cg_tol=1e-5, cg_maxiter=500,
                              eps=0.1, warm_cg=False, teach=teach)


def test_the_variants_pick_what_their_formulas_rank_first():
    task, _, _ = _problem()
    plan = jax.random.uniform(jax.random.key(0), tasks.plan_shape(task)) ** 6 + 1e-3
    spikes = np.asarray(task.src)[9:24]  # rows the plan is sure of (not anchored)
    plan = plan.at[spikes, np.arange(15)].add(5.0)
    plan = plan / plan.sum()
    anchors = jnp.zeros(tasks.num_pairs(task), bool).at[:9].set(True)
    src = jnp.asarray(task.src)
    cross = plan * 0.5 + 0.1
    grad = 2.0 * plan
    y, _ = adjoint.solve_adjoint(plan, grad, 1e-5, 500)
    official = scores.official_score(plan, cross, adjoint.gradient_from_adjoint(
        plan, grad, y, 0.1))[src]
    u = teaching.uncertainty(plan)[src]
    free = ~anchors
    teach = wholegraph.Teaching(power=3.0, weight=0.5)
    disc = np.where(free, (official - official[free].min()) * u**3, -np.inf)
    idx, _, _, h, unc = _select("avatar_discounted", teach, plan, task, anchors)
    assert set(np.asarray(idx)) == set(np.argsort(-disc)[:5])
    ent = alignment.row_entropy(plan)[src]
    np.testing.assert_allclose(h, ent[idx] / np.log(plan.shape[1]), rtol=1e-5)
    np.testing.assert_allclose(unc, u[idx], rtol=1e-5)
    dens = baselines.density_score(plan, jnp.asarray(task.pos1))[src]
    mixed = np.asarray(teaching.with_density(jnp.asarray(np.where(free, disc, 0.0)), dens,
                                             free, 0.5))
    idx, *_ = _select("avatar_density", teach, plan, task, anchors)
    assert set(np.asarray(idx)) == set(np.argsort(-np.where(free, mixed, -np.inf))[:5])
    # the released score's picks are other ones: the variant changes the picks
    idx_released, *_ = _select("avatar", wholegraph.Teaching(), plan, task, anchors)
    assert set(np.asarray(idx_released)) != set(np.argsort(-disc)[:5])


def test_ours_is_the_frozen_variant_and_refuses_other_parameters():
    strategy, teach = wholegraph.resolve("ours")
    assert (strategy, teach) == wholegraph.OURS and strategy in wholegraph.VARIANTS
    with pytest.raises(ValueError, match="`teach`"):
        wholegraph.resolve("ours", wholegraph.Teaching(power=123.0))
    with pytest.raises(ValueError, match="`teach`"):
        wholegraph.resolve("entropy", wholegraph.Teaching())
    with pytest.raises(ValueError, match="`teach.power`"):
        wholegraph.resolve("avatar_discounted", wholegraph.Teaching(power=-1.0))
    given = wholegraph.Teaching(power=2, weight=3, diversity=0.5)
    assert wholegraph.resolve("avatar_density", given) == ("avatar_density", given)


@pytest.mark.heavy
def test_a_variant_run_records_its_pick_diagnostics():
    task, g, s = _problem()
    recs = wholegraph.run(KEY, task, g, s, P, "ours").records
    for r in recs[1:]:
        assert 0.0 <= r["picked_correct"] <= 1.0
        assert 0.0 <= r["picked_entropy"] <= 1.0 and 0.0 <= r["picked_uncertainty"] <= 1.0
    diverse = wholegraph.run(KEY, task, g, s, P, "avatar_discounted",
                             teach=wholegraph.Teaching(4.0, 1.0, 2.0)).records
    plain = wholegraph.run(KEY, task, g, s, P, "avatar_discounted",
                           teach=wholegraph.Teaching(4.0, 1.0, 0.0)).records
    assert [r["anchors"] for r in diverse] == [r["anchors"] for r in plain]
    assert [r["mrr"] for r in diverse] != [r["mrr"] for r in plain] or \
        [r["picked_entropy"] for r in diverse] != [r["picked_entropy"] for r in plain]
