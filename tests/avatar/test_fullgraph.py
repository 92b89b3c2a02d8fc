"""The sparse whole-graph path (tasks.GraphTask, datasets.full_task) against the dense one.

References: ``tasks.rwr_matrix`` (dense solve), dense I - L products, the square tasks' own
loop results (``tasks.as_graph_task`` holds the same numbers sparsely), brute-force ranks.
"""

import jax
import jax.numpy as jnp
import ml_collections
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from jaxlab import avatar
from jaxlab.avatar import alignment, baselines, datasets, loop, parrot, tasks


@pytest.fixture(scope="module")
def karate():
    return tasks.real_graph_pair("karate", seed=0)


# the isomorphic 60-node pair and the anchor masks of the dense PARROT tests
from tests.avatar.test_parrot import _mask, iso  # noqa: E402, F401


def _rect_task(seed=0):
    """A rectangular GraphTask: graph 1 = karate + a pendant path of 4 nodes + 1 isolated
    node (39 nodes), graph 2 = a noisy permuted karate (34 nodes); 30 ground-truth pairs."""
    g = nx.karate_club_graph()
    a1 = nx.to_numpy_array(g, nodelist=range(34), weight=None)
    base = tasks.real_graph_pair("karate", seed=seed)
    a2 = np.asarray((np.eye(34) - base.lap2) != 0, float)  # its edge pattern
    big = np.zeros((39, 39))
    big[:34, :34] = a1
    for u, v in ((33, 34), (34, 35), (35, 36), (36, 37)):
        big[u, v] = big[v, u] = 1.0
    pairs = np.stack([np.arange(30), base.truth[:30]], 1)
    rng = np.random.default_rng(seed)
    f1, f2 = rng.normal(size=(39, 3)), rng.normal(size=(34, 3))
    return tasks.graph_task(sp.csr_matrix(big), sp.csr_matrix(a2), f1, f2, pairs)


def test_rwr_columns_equal_the_dense_solve():
    g = nx.karate_club_graph()
    g.add_node(34)  # an isolated node: a zero column of the walk, as in rwr_matrix
    adj = nx.to_numpy_array(g, nodelist=range(35), weight=None)
    cols = np.array([0, 7, 33, 34, 2])
    ref = tasks.rwr_matrix(adj, 0.2)[:, cols]
    for block in (2, 512):
        got = tasks.rwr_columns(sp.csr_matrix(adj), cols, 0.2, block=block)
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="cols"):
        tasks.rwr_columns(adj, np.array([35]))
    with pytest.raises(ValueError, match="restart"):
        tasks.rwr_columns(adj, cols, 1.0)


def test_sym_norm_adjacency_is_identity_minus_the_laplacian():
    g = nx.les_miserables_graph()
    g.add_node("isolated")
    adj = nx.to_numpy_array(g)  # weighted, one isolated node
    w = tasks.sym_norm_adjacency(sp.csr_matrix(adj)).toarray()
    np.testing.assert_allclose(w, np.eye(len(adj)) - tasks.sym_norm_laplacian(adj),
                               atol=1e-15)
    b = tasks.to_bcoo(w)
    assert b.nse == int((w != 0).sum())
    np.testing.assert_allclose(np.asarray(b.todense()), w.astype(np.float32))


@pytest.mark.heavy
@pytest.mark.parametrize("block", [3, 7, 512])
def test_sparse_bilinear_and_product_rwr_equal_the_dense_ones(karate, block, monkeypatch):
    monkeypatch.setattr(parrot, "SPMM_BLOCK", block)  # read at call time: 34 columns in
    # blocks of 3 / 7 (padded remainders) or one block of 512
    g = tasks.as_graph_task(karate)
    w1, w2 = tasks.norm_adjacencies(karate)
    c = jax.random.uniform(jax.random.key(0), (34, 34))
    np.testing.assert_allclose(parrot.sparse_matmul(g.adj1, c[:, :20], block),
                               w1 @ c[:, :20], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(parrot.bilinear(g.adj1, c, g.adj2), w1 @ c @ w2.T,
                               rtol=1e-5, atol=1e-6)
    dense = parrot.product_rwr(c, w1, w2, 0.5, 8)
    np.testing.assert_allclose(parrot.product_rwr(c, g.adj1, g.adj2, 0.5, 8), dense,
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="w2"):
        parrot.product_rwr(c[:, :20], g.adj1, g.adj2, 0.5, 2)


@pytest.mark.heavy
@pytest.mark.parametrize("block", [4, 9, 512])
def test_sparse_bilinear_on_rectangular_nonsymmetric_matrices_equals_numpy(block, monkeypatch):
    """W1 [39, 39] and W2 [34, 34] not symmetric, C [39, 34]: a W2 / W2^T mix-up or a
    padding error in the blocked product would show (blocks of 4 / 9 leave remainders)."""
    monkeypatch.setattr(parrot, "SPMM_BLOCK", block)  # read at call time by bilinear
    rng = np.random.default_rng(3)
    w1 = rng.normal(size=(39, 39)) * (rng.random((39, 39)) < 0.2)
    w2 = rng.normal(size=(34, 34)) * (rng.random((34, 34)) < 0.2)
    c = rng.normal(size=(39, 34))
    want = w1 @ c @ w2.T
    got = parrot.bilinear(tasks.to_bcoo(w1), jnp.asarray(c, jnp.float32), tasks.to_bcoo(w2))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(parrot.sparse_matmul(tasks.to_bcoo(w2), jnp.asarray(
        c.T, jnp.float32)), w2 @ c.T, rtol=1e-4, atol=1e-4)
    for bad in (0, -3):
        with pytest.raises(ValueError, match="block"):
            parrot.sparse_matmul(tasks.to_bcoo(w1), jnp.asarray(c, jnp.float32), bad)
    with pytest.raises(ValueError, match="x"):
        parrot.sparse_matmul(tasks.to_bcoo(w1), jnp.ones((34, 5)))
    with pytest.raises(ValueError, match="x"):
        parrot.sparse_matmul(tasks.to_bcoo(w1), jnp.ones(39))


@pytest.mark.heavy
@pytest.mark.parametrize("fixture", ["iso", "karate"])
def test_parrot_sparse_path_equals_the_dense_path(fixture, request):
    task = request.getfixturevalue(fixture)
    g = tasks.as_graph_task(task)
    mask = jnp.asarray(_mask(task.num_nodes))
    c_d, r_d = parrot.parrot_solve(task, mask)
    c_s, r_s = parrot.parrot_solve(g, mask)
    np.testing.assert_allclose(c_s, c_d, rtol=1e-5, atol=1e-6)
    # float32 Sinkhorn at eps = 1e-2 turns the cost's rounding (~1e-7) into relative
    # differences of ~1% on entries 1e3 x below the plan's largest (jax 0.12: 5e-3 on
    # entries of 1e-5): compare the whole plan in L1 (mass 1; measured 9e-7 on both
    # fixtures) and each entry to 1e-6 absolute (3e-5 of the largest entry, ~1/34)
    np.testing.assert_array_less(np.abs(np.asarray(r_s.plan) - np.asarray(r_d.plan)).sum(),
                                 1e-5)
    np.testing.assert_allclose(r_s.plan, r_d.plan, rtol=1e-4, atol=1e-6)
    assert bool(r_s.converged) and abs(int(r_s.iterations) - int(r_d.iterations)) <= 10
    m_d = alignment.alignment_metrics(r_d.plan, task.truth, ~mask)
    m_s = alignment.pair_metrics(r_s.plan, *tasks.pair_nodes(g), ~mask)
    for k in m_d:
        np.testing.assert_allclose(m_s[k], m_d[k], atol=1e-6)


def test_pair_metrics_against_brute_force():
    rng = np.random.default_rng(0)
    plan = rng.random((7, 5))
    src, tgt = np.array([0, 3, 6]), np.array([4, 0, 2])
    mask = np.array([True, False, True])
    rr = []
    for p in np.flatnonzero(mask):
        v = plan[src[p], tgt[p]]
        rr.append(1.0 / (1 + (plan[src[p]] > v).sum()))
        rr.append(1.0 / (1 + (plan[:, tgt[p]] > v).sum()))
    got = alignment.pair_metrics(jnp.asarray(plan), src, tgt, mask)
    np.testing.assert_allclose(got["mrr"], np.mean(rr), rtol=1e-6)
    with pytest.raises(ValueError, match="tgt"):
        alignment.pair_metrics(jnp.asarray(plan), src, np.array([4, 0, 5]), mask)


# The (strategy, score) pairs of each aligner as one ``run_active_switch`` table: the pair
# is data (a traced index), so the cases of an aligner share one compiled program per task
# type instead of one each.
_SWITCH_TABLES = {"ot": (("avatar", "abs"), ("random", "abs"), ("density", "abs"),
                         ("topmatchings", "abs"), ("degree", "abs")),
                  "parrot": (("avatar", "official"), ("entropy", "abs"))}


@pytest.mark.parametrize("strategy,score,solver", [
    ("avatar", "official", "parrot"), ("avatar", "abs", "ot"), ("random", "abs", "ot"),
    ("entropy", "abs", "parrot"), ("density", "abs", "ot"), ("topmatchings", "abs", "ot"),
    ("degree", "abs", "ot")])
@pytest.mark.heavy
def test_graph_task_runs_the_loop_like_the_square_task(karate, strategy, score, solver):
    kw = dict(rounds=2, init_frac=0.2, budget_frac=0.2, utility="sq_l2", protocol="paper",
              solver=solver)
    table = _SWITCH_TABLES[solver]
    index = table.index((strategy, score))
    ref = avatar.run_active_switch(jax.random.key(1), karate, table, index, **kw)
    got = avatar.run_active_switch(jax.random.key(1), tasks.as_graph_task(karate), table,
                                   index, **kw)
    np.testing.assert_array_equal(got.queried, ref.queried)
    for k in ref.metrics:
        np.testing.assert_allclose(got.metrics[k], ref.metrics[k], atol=1e-6)


@pytest.mark.heavy
def test_rectangular_graph_task_plans_and_loop():
    task = _rect_task()
    assert tasks.plan_shape(task) == (39, 34) and tasks.num_pairs(task) == 30
    assert task.pos1.shape == (39, 30) and task.pos1.dtype == np.float32
    mask = jnp.asarray(_mask(30, 0.3))
    # Compiled (op by op, the proximal solve is ~100 small programs).
    cost, res = jax.jit(lambda t, m: parrot.parrot_solve(t, m))(task, mask)
    plan = np.asarray(res.plan, np.float64)
    assert plan.shape == (39, 34) and bool(res.converged)
    assert np.abs(plan.sum(1) - 1 / 39).sum() <= 1.01e-4
    assert np.abs(plan.sum(0) - 1 / 34).sum() <= 1.01e-4
    a = np.flatnonzero(np.asarray(mask))
    np.testing.assert_array_equal(np.asarray(cost)[task.src[a], task.tgt[a]], 0.0)
    c = np.asarray(jax.jit(alignment.anchor_cost)(task, mask))
    assert c.shape == (39, 34) and np.all(c[task.src[a], task.tgt[a]] == 0.0)
    res = avatar.run_active(jax.random.key(0), task, "avatar", score="official",
                            solver="parrot", rounds=2, init_frac=0.2, budget_frac=0.2,
                            utility="sq_l2", protocol="fixed", test_frac=0.3)
    q = np.asarray(res.queried).ravel()
    assert np.all(q < 30) and len(set(q.tolist())) == q.size
    assert not np.any(np.asarray(res.test)[q])  # fixed protocol: test pairs never queried
    assert bool(np.all(res.plan_converged)) and bool(np.all(res.cg_converged))


def test_topmatchings_on_a_rectangular_plan_leaves_extra_rows_unmatched():
    plan = jnp.asarray(np.random.default_rng(0).random((6, 4)) + 0.1, jnp.float32)
    m = np.asarray(baselines.sample_matchings(jax.random.key(0), plan, 5))
    assert np.all((m == 4).sum(1) == 2)  # 6 rows, 4 columns: 2 unmatched per sample
    assert all(sorted(r[r < 4].tolist()) == [0, 1, 2, 3] for r in m)
    s = np.asarray(baselines.topmatchings_score(jax.random.key(0), plan, 5))
    assert s.shape == (6,) and np.all((s >= 0) & (s <= 1))


def test_graph_task_limits_are_loud(karate):
    g = tasks.as_graph_task(karate)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="score"):
        avatar.run_active(key, g, "avatar", score="gain")
    with pytest.raises(ValueError, match="fgw"):
        avatar.run_active(key, g, "random", solver="fgw")
    with pytest.raises(ValueError, match="consistency"):
        avatar.run_active(key, g, "avatar", utility="consistency")
    with pytest.raises(ValueError, match="mask"):
        parrot.node_cost(g, jnp.zeros(33, bool))
    assert loop.graph_task_limit("random", "abs", "sq_l2", "ot") is None
    with pytest.raises(ValueError, match="pairs"):
        tasks.graph_task(np.eye(4), np.eye(4), np.zeros((4, 0)), np.zeros((4, 0)),
                         np.array([[0, 1], [1, 1]]))
    ok_pairs, f0 = np.array([[0, 1], [1, 0]]), np.zeros((4, 0))
    directed = np.triu(np.ones((4, 4)), 1)
    with pytest.raises(ValueError, match="adj1.*symmetric"):
        tasks.graph_task(directed, np.eye(4), f0, f0, ok_pairs)
    with pytest.raises(ValueError, match="adj2.*non-negative"):
        tasks.graph_task(np.eye(4), -np.eye(4), f0, f0, ok_pairs)
    with pytest.raises(ValueError, match="feat1"):
        tasks.graph_task(np.eye(4), np.eye(4), np.zeros(8), f0, ok_pairs)  # flat [n1 * 2]
    with pytest.raises(ValueError, match="feat2"):
        tasks.graph_task(np.eye(4), np.eye(4), np.ones((4, 2)), np.full((4, 2), np.nan),
                         ok_pairs)


def test_full_preset_points_at_the_full_graphs_without_building_them(monkeypatch, tmp_path):
    """The full preset validates, resolves the real tasks to the cached whole pairs
    (experiments.lib.task_cache.full_task, not the dense subsample) and builds its units
    lazily; nothing is loaded here."""
    from experiments import avatar as avatar_experiment
    from experiments.configs import avatar as cfg

    c = cfg.get_config("full")
    cfg.validate_config(c)
    assert c.real_full and "synthetic_hard" in c.tasks and c.hard_nodes == 300
    # PARROT-class on the real pairs, the simple aligner elsewhere
    assert avatar_experiment.aligner_for(c, "acm_dblp") == "parrot"
    assert avatar_experiment.aligner_for(c, "synthetic_hard") == "simple"
    bad = c.copy_and_resolve_references()
    bad.real_aligner = "joena"
    with pytest.raises(ValueError, match="real_aligner"):
        cfg.validate_config(bad)
    assert {"acm_dblp", "foursquare_twitter"} <= set(c.tasks)
    calls = []
    from experiments.lib import task_cache

    monkeypatch.setattr(task_cache, "full_task", lambda name: calls.append(name) or name)
    monkeypatch.setattr(datasets, "subsample", lambda *a, **k: pytest.fail("dense subsample"))
    assert avatar_experiment.build_task("acm_dblp", c) == "acm_dblp"
    assert avatar_experiment.build_task("foursquare_twitter", c) == "foursquare_twitter"
    assert calls == ["acm_dblp", "foursquare_twitter"]
    units = avatar_experiment.EXPERIMENT.units(c, str(tmp_path))
    assert [u.name for u in units] == [*c.tasks, "scaling", "scaling_hard"]
    # the masks are over the ground-truth pairs: the budget is checked against them
    assert datasets.SIZES["acm_dblp"][2] == 6325
    # avatar-gain is the one strategy skipped on the full graphs
    g = tasks.as_graph_task(tasks.real_graph_pair("karate", seed=0))
    assert list(avatar_experiment.skipped_strategies(c, g)) == ["avatar-gain"]
    c.strategies = ["avatar-gain"]
    with pytest.raises(ValueError, match="config.strategies"):
        cfg.validate_config(c)
    c = ml_collections.ConfigDict({**cfg.get_config("full").to_dict(), "real_full": "yes"})
    with pytest.raises(ValueError, match="config.real_full"):
        cfg.validate_config(c)
    c = ml_collections.ConfigDict({**cfg.get_config("full").to_dict(), "seed_chunk": -1})
    with pytest.raises(ValueError, match="config.seed_chunk"):
        cfg.validate_config(c)


@pytest.mark.heavy
def test_seed_chunks_give_the_same_results_as_one_vmap():
    """``config.seed_chunk``: the same keys run a few at a time (the full preset's memory
    bound) give the unit result of one vmap over all seeds."""
    from experiments import avatar as avatar_experiment
    from experiments.configs import avatar as cfg

    c = cfg.get_config("smoke")
    c.num_seeds, c.rounds = 3, 1
    c.protocols, c.strategies = ["paper"], ["random", "entropy"]
    whole = avatar_experiment.task_study(c, "karate")
    c.seed_chunk = 2
    chunked = avatar_experiment.task_study(c, "karate")
    for k in ("metrics", "picked", "pool"):
        np.testing.assert_allclose(chunked[k], whole[k], atol=1e-6)


@pytest.mark.slow
def test_full_task_of_foursquare_twitter_is_sparse_and_sized():
    """Builds the whole Foursquare-Twitter pair (~1 min CPU: sparse LU solves for 2 x 1,609
    RWR columns, betweenness from 300 pivots)."""
    n1, n2, k, _ = datasets.SIZES["foursquare_twitter"]
    task = datasets.full_task("foursquare_twitter")
    assert tasks.is_graph_task(task) and tasks.plan_shape(task) == (n1, n2)
    assert task.pos1.shape == (n1, k) and task.pos2.shape == (n2, k)
    assert task.adj1.nse == datasets.load_pair("foursquare_twitter").adj1.nnz
    loop._check_task(task)
