"""Tie-aware alignment metrics (alignment): ties in a plan are ordered uniformly at random,
never truth first. References: brute-force enumeration of every order of the tied
entries, scipy's average ranks, float64 harmonic sums."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxlab.avatar import alignment


def _orders(vals, t, ks):
    """(E[1 / rank], {k: P(rank <= k)}) of entry ``t`` of ``vals`` over every order of its
    ties (1-based rank), by enumeration."""
    others = [v for j, v in enumerate(vals) if j != t]
    better = sum(v > vals[t] for v in others)
    tied = sum(v == vals[t] for v in others)
    ranks = [better + perm.index(0) + 1 for perm in itertools.permutations(range(tied + 1))]
    return np.mean([1.0 / r for r in ranks]), {k: np.mean([r <= k for r in ranks]) for k in ks}


def _brute(plan, src, tgt, mask, ks):
    rr, hits = [], {k: [] for k in ks}
    for p in np.flatnonzero(mask):
        for vals, t in ((plan[src[p]], tgt[p]), (plan[:, tgt[p]], src[p])):
            r, h = _orders(list(vals), t, ks)
            rr.append(r)
            for k in ks:
                hits[k].append(h[k])
    return np.mean(rr), {k: np.mean(v) for k, v in hits.items()}


def test_an_all_tied_plan_gets_the_random_order_expectation_for_any_truth():
    n, ks = 5, (1, 2, 3)
    plan = np.full((n, n), 0.04, np.float32)
    rng = np.random.default_rng(0)
    for truth in (np.arange(n), rng.permutation(n)):
        got = alignment.alignment_metrics(jnp.asarray(plan), truth, np.ones(n, bool), ks=ks)
        mrr, hits = _brute(plan, np.arange(n), truth, np.ones(n, bool), ks)
        np.testing.assert_allclose(float(got["mrr"]), mrr, rtol=1e-6)
        assert mrr == pytest.approx(sum(1.0 / (i + 1) for i in range(n)) / n)  # H_n / n
        for k in ks:
            np.testing.assert_allclose(float(got[f"hits@{k}"]), hits[k], rtol=1e-6)
            assert hits[k] == pytest.approx(k / n)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pair_metrics_with_ties_match_enumeration(seed):
    rng = np.random.default_rng(seed)
    plan = rng.integers(0, 3, size=(6, 7)).astype(np.float32)  # many ties
    src, tgt = np.array([0, 2, 3, 5]), np.array([6, 1, 0, 3])
    mask = np.array([True, True, False, True])
    ks = (1, 2, 4)
    got = alignment.pair_metrics(jnp.asarray(plan), src, tgt, mask, ks=ks)
    mrr, hits = _brute(plan, src, tgt, mask, ks)
    np.testing.assert_allclose(float(got["mrr"]), mrr, rtol=1e-6)
    for k in ks:
        np.testing.assert_allclose(float(got[f"hits@{k}"]), hits[k], rtol=1e-6)
    # each direction alone
    one = alignment.pair_values(jnp.asarray(plan), src, tgt, ks=ks, per_direction=True)
    for p in range(len(src)):
        st, _ = _orders(list(plan[src[p]]), tgt[p], ks)
        ts, _ = _orders(list(plan[:, tgt[p]]), src[p], ks)
        np.testing.assert_allclose([float(one["mrr_st"][p]), float(one["mrr_ts"][p])],
                                   [st, ts], rtol=1e-6)


def test_ranks_are_midranks():
    rng = np.random.default_rng(3)
    plan = rng.integers(0, 4, size=(8, 8)).astype(np.float32)
    truth = rng.permutation(8)
    r_st, r_ts = alignment.ranks_of_truth(jnp.asarray(plan), truth)
    for i in range(8):  # scipy's average rank of the truth among its row / column, 0-based
        assert float(r_st[i]) == stats.rankdata(-plan[i], "average")[truth[i]] - 1
        assert float(r_ts[i]) == stats.rankdata(-plan[:, truth[i]], "average")[i] - 1


def test_a_key_draws_one_order_whose_average_is_the_expectation():
    plan = jnp.asarray(np.array([[1.0, 1.0, 1.0, 0.0], [0.0, 2.0, 2.0, 1.0],
                                 [1.0, 1.0, 3.0, 1.0], [0.5, 0.5, 0.5, 0.5]], np.float32))
    truth = np.array([0, 2, 1, 3])
    mask = np.ones(4, bool)
    keys = jax.random.split(jax.random.key(0), 4000)
    draws = jax.vmap(lambda k: alignment.alignment_metrics(plan, truth, mask, ks=(1,),
                                                           key=k))(keys)
    exact = alignment.alignment_metrics(plan, truth, mask, ks=(1,))
    for m in ("mrr", "hits@1"):
        d = np.asarray(draws[m])
        assert abs(d.mean() - float(exact[m])) < 4 * d.std() / np.sqrt(len(d)) + 1e-6
    r_st, r_ts = alignment.ranks_of_truth(plan, truth, key=jax.random.key(1))
    lo = np.array([(np.asarray(plan)[i] > np.asarray(plan)[i, truth[i]]).sum()
                   for i in range(4)])
    tied = np.array([(np.asarray(plan)[i] == np.asarray(plan)[i, truth[i]]).sum() - 1
                     for i in range(4)])
    assert np.all((np.asarray(r_st) >= lo) & (np.asarray(r_st) <= lo + tied))


def test_top1_probability_is_the_share_of_orders_that_rank_the_truth_first():
    plan = np.array([[0.5, 0.5, 0.5, 0.1], [0.2, 0.9, 0.9, 0.9], [0.3, 0.3, 0.8, 0.1]],
                    np.float32)
    src, tgt = np.array([0, 1, 2, 2]), np.array([0, 3, 2, 0])
    got = alignment.top1_probability(jnp.asarray(plan), src, tgt)
    ref = [_orders(list(plan[s]), t, (1,))[1][1] for s, t in zip(src, tgt, strict=True)]
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-6)  # 1/3, 1/3, 1, 0


def test_expected_reciprocal_rank_is_accurate_far_down_the_ranking():
    better = np.array([0, 3, 10_000, 10_000, 0, 9_000, 40], np.int32)
    tied = np.array([0, 100, 3, 50, 5_000, 900, 15], np.int32)
    plan_free = alignment._expected_rr(jnp.asarray(better), jnp.asarray(tied))
    ref = [np.mean(1.0 / (g + np.arange(t + 1, dtype=np.float64) + 1.0))
           for g, t in zip(better, tied, strict=True)]
    np.testing.assert_allclose(np.asarray(plan_free), ref, rtol=2e-6)
