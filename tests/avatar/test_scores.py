"""Node scores: the official signed formula against a NumPy reference of the public code's
form, and the first-order ``gain`` against the brute-force cost change of a new anchor."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import avatar
from jaxlab.avatar import adjoint, alignment, scores, solvers, tasks, utilities

EPS = 0.1


@pytest.fixture(scope="module")
def problem():
    cost = jax.random.uniform(jax.random.key(0), (12, 12))
    res = solvers.entropic_solve(cost, EPS, threshold=1e-7, max_iterations=10_000)
    assert float(res.marginal_error) < 1e-6
    return cost, res.plan


def _numpy_official(plan, cost, grad_plan, eps):
    """(1/eps) sum_j P_ij^2 (ya_i + yb_j - grad_T f_ij) C_ij, [ya; yb] by float64 lstsq."""
    t = np.asarray(plan, np.float64)
    g = np.asarray(grad_plan, np.float64)
    n = t.shape[0]
    h = np.block([[np.diag(t.sum(1)), t], [t.T, np.diag(t.sum(0))]])
    rhs = np.concatenate([(t * g).sum(1), (t * g).sum(0)])
    y = np.linalg.lstsq(h, rhs, rcond=None)[0]
    p = t / t.sum(1, keepdims=True)
    return ((p**2) * (y[:n, None] + y[None, n:] - g) * np.asarray(cost)).sum(1) / eps


@pytest.mark.parametrize("name", ["sq_l2", "entropy"])
def test_official_score_matches_numpy_reference(problem, name):
    cost, plan = problem
    g = utilities.gradient(name, plan)
    gc = adjoint.cost_gradient(plan, g, EPS)
    ref = _numpy_official(plan, cost, g, EPS)
    got = scores.official_score(plan, cost, gc)
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-4 * np.abs(ref).max())
    p = np.asarray(alignment.row_normalise(plan))
    np.testing.assert_allclose(scores.abs_score(plan, cost, gc),
                               (p * np.abs(np.asarray(cost) * np.asarray(gc))).sum(1),
                               rtol=1e-5)


def test_combine_is_the_weighted_sum_of_l2_normalised_scores():
    a, b = jnp.array([3.0, 4.0]), jnp.array([0.0, -2.0])
    np.testing.assert_allclose(scores.combine([a, b], [0.5, 2.0]),
                               0.5 * np.array([0.6, 0.8]) + 2.0 * np.array([0.0, -1.0]),
                               rtol=1e-6)


def test_gain_matches_the_brute_force_cost_change_of_a_new_anchor():
    """<G, C(anchors + {i -> j}) - C(anchors)> computed by rebuilding the cost, vs the
    closed form of the position part (exact, re-normalisation included), on the entries
    the pinning leaves alone (elsewhere the rebuilt cost also moves with its maximum)."""
    task = tasks.synthetic_graph_pair(40, seed=1, feat_dim=0)
    n = task.num_nodes
    mask = np.zeros(n, bool)
    mask[np.random.default_rng(0).choice(n, 12, replace=False)] = True
    cost = alignment.anchor_cost(task, mask)
    g = jax.random.normal(jax.random.key(3), (n, n))
    truth = np.asarray(task.truth)
    got, ref = [], []
    free = np.flatnonzero(~mask)
    col_used = np.zeros(n, bool)
    col_used[truth[mask]] = True
    for i in free[:6]:
        for j in np.flatnonzero(~col_used)[:6]:
            t2 = truth.copy()
            t2[i] = j
            m2 = mask.copy()
            m2[i] = True
            c2 = alignment.anchor_cost(task._replace(truth=t2), m2)
            keep = np.ones((n, n), bool)  # entries that the pinning leaves alone
            keep[mask | m2, :] = False
            cols = np.zeros(n, bool)
            cols[t2[m2]] = True
            keep[:, cols] = False
            # the position term alone, both costs unpinned there: rescale by `top` ratio 1
            gm = np.where(keep, np.asarray(g), 0.0)
            ref.append((gm * (np.asarray(c2) - np.asarray(cost))).sum())
            got.append(_restricted(task, mask, truth, g, keep, i, j))
    np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-5 * np.abs(ref).max())


def _restricted(task, mask, truth, g, keep, i, j):
    """The closed-form position term with G masked to ``keep`` (same entries as the ref)."""
    n = task.num_nodes
    gk = jnp.where(keep, g, 0.0)
    return float(scores.gain_matrix(jnp.ones((n, n)) / n**2, jnp.zeros((n, n)), gk,
                                    task.pos1, task.pos2, jnp.asarray(mask),
                                    jnp.asarray(truth), pinning=False)[i, j])


def test_paper_protocol_tests_on_every_unanchored_node_and_reports_picks():
    task = tasks.real_graph_pair("karate", seed=0)
    res = avatar.run_active(jax.random.key(0), task, "avatar", rounds=2, budget_frac=0.2,
                            score="gain", utility="sq_l2", protocol="paper")
    n = task.num_nodes
    np.testing.assert_array_equal(np.asarray(res.test), ~np.asarray(res.anchors))
    q = np.asarray(res.queried).ravel()
    assert int(res.anchors.sum()) == round(0.2 * n) + q.size == round(0.2 * n) + 2 * 3
    assert res.picked_correct.shape == res.pool_correct.shape == (2,)
    # Round 0's share of correct picks, recomputed from the plan of the initial anchors.
    # Compiled (op by op, the initial plan's solve is ~90 small programs).
    init = jax.jit(functools.partial(avatar.init, protocol="paper"))
    state = init(jax.random.split(jax.random.key(0))[0], task)
    _, plan = jax.jit(avatar.align)(state, task)
    correct = np.asarray(jnp.argmax(plan.plan, 1)) == task.truth
    np.testing.assert_allclose(float(res.picked_correct[0]), correct[q[:3]].mean())
    np.testing.assert_allclose(float(res.pool_correct[0]),
                               correct[~np.asarray(state.anchors)].mean(), rtol=1e-6)
