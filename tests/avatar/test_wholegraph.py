"""The whole-graph protocol (wholegraph): sizes and the smallest task, keys, a run resumed
from a state equal to an uninterrupted one, warm starts within the solver tolerance.
Checkpoint files and the task cache are the experiments' (tests/test_wholegraph_study.py,
tests/test_task_cache.py)."""

import jax
import networkx as nx
import numpy as np
import pytest

from jaxlab.avatar import datasets, parrot_official, tasks, wholegraph


def _problem(n=48, seed=0):
    rng = np.random.default_rng(seed)
    g1 = nx.connected_watts_strogatz_graph(n, 4, 0.5, seed=seed)
    perm = rng.permutation(n)
    g2 = nx.relabel_nodes(g1, dict(enumerate(perm)))
    for u, v in list(g2.edges())[::3]:  # noise: a third of the edges rewired
        if g2.degree(u) > 1 and g2.degree(v) > 1:
            g2.remove_edge(u, v)
            g2.add_edge(u, int(rng.integers(n)))
    g2.remove_edges_from(nx.selfloop_edges(g2))
    a1 = nx.to_scipy_sparse_array(g1, nodelist=range(n), format="csr")
    a2 = nx.to_scipy_sparse_array(g2, nodelist=range(n), format="csr")
    pairs = np.stack([np.arange(n), perm], 1)
    s = parrot_official.FOURSQUARE_TWITTER
    task = tasks.graph_task(a1, a2, np.zeros((n, 0)), np.zeros((n, 0)), pairs,
                            restart=s.restart)
    g = parrot_official.prepare(task, a1, a2, s)
    return task, g, s


P = wholegraph.Protocol(rounds=3, init_frac=0.2, budget_frac=0.3)
KEY = jax.random.key(0)


def test_sizes_follow_the_official_budget():
    # 6,325 ACM-DBLP pairs: 1,265 initial anchors, (1,265 - 5) / 10 = 126 per round
    with pytest.warns(UserWarning, match="1265 queries.*spend 1260"):
        assert wholegraph.sizes(6325, wholegraph.Protocol()) == (1265, 126)
    with pytest.warns(UserWarning, match="spend 1260"):
        assert wholegraph.initial_anchors(KEY, 6325, wholegraph.Protocol()).sum() == 1265
    with pytest.raises(ValueError, match="protocol.budget_frac"):
        wholegraph.sizes(20, wholegraph.Protocol(budget_frac=0.2, rounds=10))
    with pytest.raises(TypeError, match="`key`"):
        wholegraph.initial_anchors(-1, 100, P)
    with pytest.raises(ValueError, match="protocol.rounds"):
        wholegraph.check_protocol(P._replace(rounds=0))


def test_the_smallest_task_is_named_and_a_floored_budget_warns():
    p = wholegraph.Protocol()  # 20% anchors, 20% budget, 10 rounds
    assert wholegraph.smallest_task(p) == 50
    with pytest.raises(ValueError, match=r"`task` has 34 ground-truth pairs.*has 50 "):
        wholegraph.sizes(34, p)
    with pytest.raises(ValueError, match="`task` has 49"):
        wholegraph.sizes(49, p)
    assert wholegraph.sizes(50, p) == (10, 1)  # 10 queries: one per round, nothing floored
    with pytest.warns(UserWarning, match="asks for 15 queries.*10 rounds of 1.*spend 10"):
        assert wholegraph.sizes(77, p) == (15, 1)
    # a karate-club pair (34 nodes) through the run's own checks
    pair = datasets.load((nx.karate_club_graph(), nx.karate_club_graph()),
                         [(v, v) for v in range(34)])
    s = parrot_official.FOURSQUARE_TWITTER
    task = datasets.task(pair, restart=s.restart)
    g = parrot_official.prepare(task, pair.adj1, pair.adj2, s)
    with pytest.raises(ValueError, match="smallest task for this protocol has 50"):
        wholegraph.run(KEY, task, g, s, p, "random")


def test_initial_anchors_take_typed_and_legacy_keys_alike():
    typed = wholegraph.initial_anchors(jax.random.key(3), 100, P)
    legacy = wholegraph.initial_anchors(jax.random.PRNGKey(3), 100, P)
    np.testing.assert_array_equal(typed, legacy)
    # the key's bits seed NumPy's permutation: key(seed) is default_rng(seed)
    order = np.random.default_rng(3).permutation(100)
    assert set(np.flatnonzero(typed)) == set(order[:20].tolist())
    assert not np.array_equal(typed, wholegraph.initial_anchors(jax.random.key(4), 100, P))
    with pytest.raises(ValueError, match="`key`"):
        wholegraph.initial_anchors(jax.random.split(KEY, 2), 100, P)


class _Stop(Exception):
    pass


@pytest.mark.heavy
@pytest.mark.parametrize("strategy", ["avatar", "entropy"])
def test_resumed_run_equals_an_uninterrupted_one(strategy):
    task, g, s = _problem()
    full = wholegraph.run(KEY, task, g, s, P, strategy).records
    assert [r["round"] for r in full] == [0, 1, 2, 3]
    assert full[-1]["anchors"] == 9 + 3 * 4 and full[-1]["test"] == 48 - 21
    assert len({r["mrr"] for r in full}) > 1  # the metrics move: a comparison that can fail
    kept = []

    def stop_after_round_1(state):
        kept.append(state)
        if state.step == 1:
            raise _Stop

    with pytest.raises(_Stop):  # stopped after round 1's state was handed out
        wholegraph.run(KEY, task, g, s, P, strategy, callback=stop_after_round_1)
    assert [st.step for st in kept] == [1]
    steps = []
    resumed = wholegraph.run(KEY, task, g, s, P, strategy, state=kept[-1],
                             callback=lambda st: steps.append(st.step)).records
    assert steps == [2, 3]  # rounds 2 and 3 only
    for a, b in zip(full, resumed, strict=True):
        assert a["mrr"] == b["mrr"] and a["anchors"] == b["anchors"]
    assert len(kept[-1].records) == 2  # the state resumed from is not changed


def test_measure_readings_join_every_record_and_legacy_keys_give_the_same_run():
    task, g, s = _problem()
    p = P._replace(rounds=2)
    calls = []

    def measure():
        calls.append(1)
        return {"reading": len(calls)}

    typed = wholegraph.run(KEY, task, g, s, p, "random", measure=measure).records
    assert [r["reading"] for r in typed] == [1, 2, 3]
    legacy = wholegraph.run(jax.random.PRNGKey(0), task, g, s, p, "random").records
    assert [r["mrr"] for r in typed] == [r["mrr"] for r in legacy]
    other = wholegraph.run(jax.random.key(1), task, g, s, p, "random").records
    assert [r["mrr"] for r in typed] != [r["mrr"] for r in other]
    with pytest.raises(TypeError, match="`key`"):
        wholegraph.run(0, task, g, s, p, "random")
    with pytest.raises(TypeError, match="`measure`"):
        wholegraph.run(KEY, task, g, s, p, "random", measure=lambda: 1.0)


def test_a_state_of_another_task_is_refused():
    task, g, s = _problem()
    small, g_small, _ = _problem(n=40)
    state = wholegraph.solve_round0(KEY, small, g_small, s, P)
    with pytest.raises(ValueError, match="state.anchors"):
        wholegraph.run(KEY, task, g, s, P, "entropy", state=state)
    with pytest.raises(ValueError, match="state.step"):
        wholegraph.run(KEY, small, g_small, s, P, "entropy", state=state._replace(step=9))
    with pytest.raises(TypeError, match="`state`"):
        wholegraph.run(KEY, small, g_small, s, P, "entropy", state=(0, None))


def test_warm_and_cold_runs_agree_within_the_tolerance():
    task, g, s = _problem(seed=1)
    warm = wholegraph.run(KEY, task, g, s, P, "entropy", compare_cold=True).records
    cold = wholegraph.run(KEY, task, g, s, P._replace(warm=False), "entropy").records
    assert all(r["prod_steps"] <= r["prod_steps_cold"] for r in warm[1:])
    assert all(r["cost_gap_cold"] < 0.05 for r in warm[1:])
    assert abs(warm[-1]["mrr"] - cold[-1]["mrr"]) < 0.1


def test_unknown_strategy_is_named():
    task, g, s = _problem()
    with pytest.raises(ValueError, match="strategy"):
        wholegraph.run(KEY, task, g, s, P, "degree")


def test_round_metrics_order_ties_at_random_and_keep_the_earlier_rankings():
    import itertools

    import jax.numpy as jnp

    plan = np.array([[0.5, 0.5, 0.5, 0.1], [0.2, 0.9, 0.9, 0.9], [0.3, 0.3, 0.8, 0.1]],
                    np.float32)
    src, tgt = np.array([0, 1, 2]), np.array([0, 2, 1])
    test = np.array([True, True, False])
    held = np.array([False, False, True])
    got, _ = wholegraph._metrics(jnp.asarray(plan), src, tgt, test, held, None)

    def rr(vals, t):  # (every order of the tied entries, truth first, truth last)
        others = [v for j, v in enumerate(vals) if j != t]
        better = sum(v > vals[t] for v in others)
        ties = sum(v == vals[t] for v in others)
        orders = [1.0 / (better + 1 + perm.index(0))
                  for perm in itertools.permutations(range(ties + 1))]
        return np.mean(orders), 1.0 / (better + 1), 1.0 / (better + ties + 1)

    st = np.array([rr(plan[s], t) for s, t in zip(src, tgt, strict=True)])
    ts = np.array([rr(plan[:, t], s) for s, t in zip(src, tgt, strict=True)])
    np.testing.assert_allclose(float(got["mrr_st"]), st[:2, 0].mean(), rtol=1e-5)
    np.testing.assert_allclose(float(got["mrr"]), 0.5 * (st[:2, 0] + ts[:2, 0]).mean(),
                               rtol=1e-5)
    np.testing.assert_allclose(float(got["heldout_mrr"]), 0.5 * (st[2, 0] + ts[2, 0]),
                               rtol=1e-5)
    np.testing.assert_allclose(float(got["mrr_truth_first"]),
                               0.5 * (st[:2, 1] + ts[:2, 1]).mean(), rtol=1e-5)
    np.testing.assert_allclose(float(got["mrr_st_ties_against"]), st[:2, 2].mean(),
                               rtol=1e-5)


def test_heldout_pairs_are_never_queried_and_the_removal_line_scores_round_0():
    from jaxlab.avatar import alignment

    task, g, s = _problem()
    p = P._replace(heldout_frac=0.25)
    r0 = wholegraph.solve_round0(KEY, task, g, s, p)
    # the initial anchors do not depend on the held-out share
    np.testing.assert_array_equal(r0.anchors, wholegraph.initial_anchors(KEY, 48, P))
    assert r0.heldout.sum() == 12 and not (r0.heldout & r0.anchors).any()
    out = wholegraph.run(KEY, task, g, s, p, "entropy", state=r0)
    assert not (out.anchors & out.heldout).any()
    src, tgt = np.asarray(task.src), np.asarray(task.tgt)
    for rec in out.records[1:]:
        assert {"heldout_mrr", "removal_mrr", "mrr"} <= set(rec)
    # removal only after the last round: the round-0 plan on the final test set
    ref = alignment.pair_metrics(r0.solve.plan, src, tgt, ~out.anchors)
    np.testing.assert_allclose(out.records[-1]["removal_mrr"], float(ref["mrr"]), rtol=1e-6)
    ref_held = alignment.pair_metrics(out.solve.plan, src, tgt, out.heldout)
    np.testing.assert_allclose(out.records[-1]["heldout_mrr"], float(ref_held["mrr"]),
                               rtol=1e-6)
    plain = wholegraph.solve_round0(KEY, task, g, s, P)
    assert "heldout_mrr" not in plain.records[0] and not plain.heldout.any()


@pytest.mark.heavy
def test_the_guides_own_graph_recipe_runs():
    """docs/avatar.rst's recipe for a graph pair of your own, on a relabelled karate club."""
    g1 = nx.karate_club_graph()
    perm = np.random.default_rng(0).permutation(34)
    g2 = nx.relabel_nodes(g1, dict(enumerate(perm)))
    for u, v in list(g2.edges())[::5]:  # a noisy copy, every node kept connected
        if g2.degree(u) > 1 and g2.degree(v) > 1:
            g2.remove_edge(u, v)
    truth = np.stack([np.arange(34), perm], 1)
    pair = datasets.load((g1, g2), truth)
    s = parrot_official.FOURSQUARE_TWITTER
    task = datasets.task(pair, restart=s.restart)
    g = parrot_official.prepare(task, pair.adj1, pair.adj2, s)
    # 34 pairs: the default budget (10 rounds) needs 50; 2 rounds of 3 queries fit
    protocol = wholegraph.Protocol(rounds=2)
    out = wholegraph.run(jax.random.key(0), task, g, s, protocol, "avatar",
                         host=parrot_official.host_products(g))
    records = out.records
    assert [r["round"] for r in records] == [0, 1, 2]
    assert all(0.0 < r["mrr"] <= 1.0 for r in records)


def test_density_picks_equal_the_baselines_score():
    import jax
    import jax.numpy as jnp

    from jaxlab.avatar import baselines

    task, g, s = _problem()
    plan = jax.random.uniform(jax.random.key(0), tasks.plan_shape(task)) + 0.1
    anchors = jnp.zeros(tasks.num_pairs(task), bool).at[:9].set(True)
    pos1 = jnp.asarray(task.pos1, jnp.float32)
    rep = baselines.representativeness(pos1)
    idx, *_ = wholegraph._select(jax.random.key(1), plan, plan, jnp.zeros(96), anchors,
                                 jnp.asarray(task.src), rep, pos1, strategy="density", num=5,
                                 cg_tol=1e-4, cg_maxiter=10, eps=0.1, warm_cg=False)
    ref = jnp.where(anchors, -jnp.inf, baselines.density_score(plan, pos1)[task.src])
    np.testing.assert_array_equal(np.sort(np.asarray(idx)),
                                  np.sort(np.asarray(jax.lax.top_k(ref, 5)[1])))
