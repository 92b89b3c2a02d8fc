"""The whole-graph protocol (wholegraph): sizes, resumption from checkpoints, stale
checkpoints refused, warm starts within the solver tolerance; the task cache."""

import os
import warnings

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from jaxlab.avatar import datasets, parrot_official, task_cache, tasks, wholegraph


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


def test_sizes_follow_the_official_budget():
    # 6,325 ACM-DBLP pairs: 1,265 initial anchors, (1,265 - 5) / 10 = 126 per round
    assert wholegraph.sizes(6325, wholegraph.Protocol()) == (1265, 126)
    assert wholegraph.initial_anchors(6325, 0, wholegraph.Protocol()).sum() == 1265
    with pytest.raises(ValueError, match="protocol.budget_frac"):
        wholegraph.sizes(20, wholegraph.Protocol(budget_frac=0.2, rounds=10))
    with pytest.raises(ValueError, match="seed"):
        wholegraph.initial_anchors(100, -1, P)
    with pytest.raises(ValueError, match="protocol.rounds"):
        wholegraph.check_protocol(P._replace(rounds=0))


class _Stop(Exception):
    pass


def _stop_after_round_1(msg):
    if "round 1/" in msg:
        raise _Stop


@pytest.mark.parametrize("strategy", ["avatar", "entropy"])
def test_resumed_run_equals_an_uninterrupted_one(tmp_path, strategy):
    task, g, s = _problem()
    full = wholegraph.run(task, g, s, P, strategy, 0, str(tmp_path / "a"), "k", log=print)
    assert [r["round"] for r in full] == [0, 1, 2, 3]
    assert full[-1]["anchors"] == 9 + 3 * 4 and full[-1]["test"] == 48 - 21
    assert len({r["mrr"] for r in full}) > 1  # the metrics move: a comparison that can fail
    with pytest.raises(_Stop):  # stopped after round 1's checkpoint was written
        wholegraph.run(task, g, s, P, strategy, 0, str(tmp_path / "b"), "k",
                       log=_stop_after_round_1)
    lines = []
    resumed = wholegraph.run(task, g, s, P, strategy, 0, str(tmp_path / "b"), "k",
                             log=lines.append)
    assert any("resumed after round 1" in x for x in lines)
    assert sum("round" in x and "/3" in x for x in lines) == 2  # rounds 2 and 3 only
    for a, b in zip(full, resumed, strict=True):
        assert a["mrr"] == b["mrr"] and a["anchors"] == b["anchors"]


def test_stale_checkpoint_is_not_read(tmp_path):
    task, g, s = _problem()
    wholegraph.run(task, g, s, P._replace(rounds=1), "random", 0, str(tmp_path), "k",
                   log=print)
    path = str(tmp_path / "run-random-seed0.npz")
    assert wholegraph.load_checkpoint(path, wholegraph.run_key("k", s, P._replace(rounds=1),
                                                               "random", 0)) is not None
    other = wholegraph.run_key("k", s._replace(alpha=0.4), P._replace(rounds=1), "random", 0)
    with pytest.warns(RuntimeWarning, match="another configuration"):
        assert wholegraph.load_checkpoint(path, other) is None
    with open(path, "wb") as f:
        f.write(b"not a checkpoint")
    with pytest.warns(RuntimeWarning, match="unreadable"):
        assert wholegraph.load_checkpoint(path, other) is None


def test_warm_and_cold_runs_agree_within_the_tolerance(tmp_path):
    task, g, s = _problem(seed=1)
    warm = wholegraph.run(task, g, s, P, "entropy", 0, str(tmp_path / "w"), "k",
                          compare_cold=True, log=print)
    cold = wholegraph.run(task, g, s, P._replace(warm=False), "entropy", 0,
                          str(tmp_path / "c"), "k", log=print)
    assert all(r["prod_steps"] <= r["prod_steps_cold"] for r in warm[1:])
    assert all(r["cost_gap_cold"] < 0.05 for r in warm[1:])
    assert abs(warm[-1]["mrr"] - cold[-1]["mrr"]) < 0.1


def test_unknown_strategy_is_named(tmp_path):
    task, g, s = _problem()
    with pytest.raises(ValueError, match="strategy"):
        wholegraph.run(task, g, s, P, "degree", 0, str(tmp_path), "k")


def test_task_cache_hits_and_never_serves_a_stale_build(tmp_path):
    pair = datasets.from_graphs(nx.karate_club_graph(), nx.karate_club_graph(),
                                np.stack([np.arange(34), np.arange(34)], 1))
    built = task_cache.cached_task(pair, 0.2, str(tmp_path))
    files = os.listdir(tmp_path)
    assert len(files) == 1
    msgs = []
    again = task_cache.cached_task(pair, 0.2, str(tmp_path), log=msgs.append)
    assert any("read from the cache" in m for m in msgs)
    for a, b in zip(built, again, strict=True):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(np.asarray(a.todense()), np.asarray(b.todense()))
    # another restart is another key (a second file), not the first build
    task_cache.cached_task(pair, 0.3, str(tmp_path))
    assert len(os.listdir(tmp_path)) == 2
    # a file whose stored key differs is rebuilt with a warning
    path = task_cache.path_for(pair, 0.2, str(tmp_path))
    other = task_cache.path_for(pair, 0.3, str(tmp_path))
    os.replace(other, path)
    with pytest.warns(RuntimeWarning, match="stale"):
        rebuilt = task_cache.cached_task(pair, 0.2, str(tmp_path))
    np.testing.assert_array_equal(rebuilt.pos1, built.pos1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        task_cache.cached_task(pair, 0.2, str(tmp_path))  # now a clean hit


def test_full_task_cache_argument_is_checked():
    with pytest.raises(ValueError, match="cache"):
        datasets.full_task("foursquare_twitter", cache="yes")


def test_graph_task_of_a_sparse_pair_is_unchanged_by_the_cache(tmp_path):
    g = nx.les_miserables_graph()
    g = nx.convert_node_labels_to_integers(g)
    a = nx.to_scipy_sparse_array(g, format="csr")
    n = a.shape[0]
    pair = datasets.NetworkPair(sp.csr_matrix(a), sp.csr_matrix(a), np.zeros((n, 0)),
                                np.zeros((n, 0)), np.stack([np.arange(n), np.arange(n)], 1))
    fresh = datasets.task(pair)
    cached = task_cache.cached_task(pair, 0.2, str(tmp_path))
    np.testing.assert_array_equal(fresh.pos2, cached.pos2)
    np.testing.assert_array_equal(np.asarray(fresh.adj1.data), np.asarray(cached.adj1.data))


def test_tie_aware_mrr_is_the_expectation_over_tie_orders():
    import itertools

    import jax.numpy as jnp

    plan = np.array([[0.5, 0.5, 0.5, 0.1], [0.2, 0.9, 0.9, 0.9], [0.3, 0.3, 0.8, 0.1]],
                    np.float32)
    src, tgt = np.array([0, 1, 2]), np.array([0, 2, 1])
    test = np.array([True, True, False])
    got = wholegraph.tie_aware_metrics(jnp.asarray(plan), src, tgt, test)

    def mean_rr(vals, t):  # brute force over every order of the tied entries
        others = [v for j, v in enumerate(vals) if j != t]
        better = sum(v > vals[t] for v in others)
        ties = sum(v == vals[t] for v in others)
        rrs = [1.0 / (better + 1 + perm.index(0))
               for perm in itertools.permutations(range(ties + 1))]
        return np.mean(rrs)

    st = [mean_rr(plan[s], t) for s, t in zip(src, tgt, strict=True)]
    ts = [mean_rr(plan[:, t], s) for s, t in zip(src, tgt, strict=True)]
    np.testing.assert_allclose(float(got["mrr_st_random_ties"]), np.mean(st[:2]), rtol=1e-5)
    np.testing.assert_allclose(float(got["mrr_random_ties"]),
                               0.5 * (np.mean(st[:2]) + np.mean(ts[:2])), rtol=1e-5)


def test_the_guides_own_graph_recipe_runs(tmp_path):
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
    task = task_cache.cached_task(pair, restart=s.restart, cache_dir=str(tmp_path / "cache"))
    g = parrot_official.prepare(task, pair.adj1, pair.adj2, s)
    records = wholegraph.run(task, g, s, wholegraph.Protocol(rounds=2), "avatar", seed=0,
                             folder=str(tmp_path / "ckpt"),
                             data_key=task_cache.digest(pair, s.restart),
                             host=parrot_official.host_products(g))
    assert [r["round"] for r in records] == [0, 1, 2]
    assert all(0.0 < r["mrr"] <= 1.0 for r in records)


def test_checkpoint_key_ignores_documentation_not_code():
    a = 'def f(x):\n    """Doc."""\n    return x + 1  # one\n'
    b = 'def f(x):\n    """Other words."""\n\n    return x + 1\n'
    c = 'def f(x):\n    """Doc."""\n    return x + 2\n'
    assert wholegraph.code_text(a) == wholegraph.code_text(b)
    assert wholegraph.code_text(a) != wholegraph.code_text(c)


def test_density_picks_equal_the_baselines_score():
    import jax
    import jax.numpy as jnp

    from jaxlab.avatar import baselines

    task, g, s = _problem()
    plan = jax.random.uniform(jax.random.key(0), tasks.plan_shape(task)) + 0.1
    anchors = jnp.zeros(tasks.num_pairs(task), bool).at[:9].set(True)
    pos1 = jnp.asarray(task.pos1, jnp.float32)
    rep = baselines.representativeness(pos1)
    idx, _, _ = wholegraph._select(jax.random.key(1), plan, plan, jnp.zeros(96), anchors,
                                   jnp.asarray(task.src), rep, strategy="density", num=5,
                                   cg_tol=1e-4, cg_maxiter=10, eps=0.1, warm_cg=False)
    ref = jnp.where(anchors, -jnp.inf, baselines.density_score(plan, pos1)[task.src])
    np.testing.assert_array_equal(np.sort(np.asarray(idx)),
                                  np.sort(np.asarray(jax.lax.top_k(ref, 5)[1])))
