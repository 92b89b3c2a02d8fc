"""PARROT-class aligner (jaxlab.avatar.parrot) and the density / topmatchings baselines,
against independent references (numpy linear solves, networkx PageRank, brute force)."""

import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from jaxlab import avatar
from jaxlab.avatar import alignment, baselines, parrot, tasks


def test_product_rwr_is_the_kronecker_fixed_point():
    rng = np.random.default_rng(0)
    n, m, beta = 6, 5, 0.6
    w1 = rng.random((n, n))
    w1 /= w1.sum(1, keepdims=True)
    w2 = rng.random((m, m))
    w2 /= w2.sum(1, keepdims=True)
    c0 = rng.random((n, m))
    got = np.asarray(parrot.product_rwr(jnp.asarray(c0, jnp.float32), jnp.asarray(w1, jnp.float32),
                                        jnp.asarray(w2, jnp.float32), beta, 200))
    # vec(W1 C W2^T) = (W2 kron W1) vec(C) with column-major vec.
    lhs = np.eye(n * m) - beta * np.kron(w2, w1)
    ref = np.linalg.solve(lhs, (1 - beta) * c0.reshape(-1, order="F")).reshape(n, m, order="F")
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_product_rwr_frobenius_error_bound_on_a_non_regular_graph():
    """The docstring's bound ||C_K - C||_F <= 2 beta^(K+1) ||C0||_F with the normalised
    adjacencies I - L of karate (non-regular: row sums differ, some exceed 1)."""
    task = tasks.real_graph_pair("karate", seed=0)
    w1 = np.eye(34) - np.asarray(task.lap1, np.float64)
    w2 = np.eye(34) - np.asarray(task.lap2, np.float64)
    assert np.abs(w1).sum(1).max() > 1.0  # no max-norm contraction to lean on
    c0 = np.random.default_rng(0).random((34, 34))
    beta = 0.5
    lhs = np.eye(34 * 34) - beta * np.kron(w2, w1)
    ref = np.linalg.solve(lhs, (1 - beta) * c0.reshape(-1, order="F")).reshape(34, 34,
                                                                               order="F")
    for k in (1, 2, 4, 8):
        got = np.asarray(parrot.product_rwr(jnp.asarray(c0, jnp.float32),
                                            jnp.asarray(w1, jnp.float32),
                                            jnp.asarray(w2, jnp.float32), beta, k), np.float64)
        err = np.linalg.norm(got - ref)
        assert err <= beta**k * np.linalg.norm(c0 - ref) * (1 + 1e-4) + 1e-5
        assert err <= 2 * beta ** (k + 1) * np.linalg.norm(c0) * (1 + 1e-4) + 1e-5


def test_parrot_mask_must_be_bool_and_settings_finite(iso):
    n = iso.num_nodes
    with pytest.raises(TypeError, match="mask"):
        parrot.node_cost(iso, jnp.ones(n, jnp.float32))
    with pytest.raises(TypeError, match="mask"):
        parrot.parrot_solve(iso, np.zeros(n, np.int32))
    with pytest.raises(ValueError, match="lambda_a"):
        parrot.check_settings(parrot.PARROT_DEFAULTS._replace(lambda_a=np.inf))
    with pytest.raises(ValueError, match="restart"):
        parrot.product_rwr(jnp.ones((3, 3)), jnp.eye(3), jnp.eye(3), 1.0, 2)
    with pytest.raises(ValueError, match="iters"):
        parrot.product_rwr(jnp.ones((3, 3)), jnp.eye(3), jnp.eye(3), 0.5, 0)
    # the anchor reset uses the pair mask: exactly the anchor pairs are 0 after normalising
    mask = _mask(n)
    c = np.asarray(parrot.parrot_cost(iso, jnp.asarray(mask)))
    pairs = np.zeros((n, n), bool)
    pairs[np.flatnonzero(mask), iso.truth[mask]] = True
    np.testing.assert_array_equal(c[pairs], 0.0)


def test_rwr_positions_match_personalised_pagerank():
    g = nx.karate_club_graph()
    adj = nx.to_numpy_array(g, nodelist=range(g.number_of_nodes()), weight=None)
    n, restart = adj.shape[0], 0.2
    r = tasks.rwr_matrix(adj, restart)
    for k in (0, 7, 33):
        pr = nx.pagerank(g, alpha=1 - restart, personalization={k: 1.0}, weight=None,
                         tol=1e-12, max_iter=10000)
        np.testing.assert_allclose(r[:, k] / n, [pr[i] for i in range(n)], atol=1e-8)


@pytest.fixture(scope="module")
def iso():
    return tasks.synthetic_graph_pair(60, seed=3, edge_noise=0.0, feat_dim=4, feat_noise=0.0)


def _mask(n, frac=0.2, seed=0):
    m = np.zeros(n, bool)
    m[np.random.default_rng(seed).choice(n, int(frac * n), replace=False)] = True
    return m


def test_node_cost_zero_on_anchor_pairs_and_cosine_elsewhere(iso):
    n = iso.num_nodes
    mask = _mask(n)
    c = np.asarray(parrot.node_cost(iso, jnp.asarray(mask), attr_weight=0.5))
    a = np.flatnonzero(mask)
    np.testing.assert_array_equal(c[a, iso.truth[a]], 0.0)
    r1, r2 = iso.pos1[:, a], iso.pos2[:, iso.truth[a]]
    i, j = int(np.flatnonzero(~mask)[0]), 5

    def cos(x, y):
        return x @ y / np.linalg.norm(x) / np.linalg.norm(y)

    ref = np.exp(-cos(r1[i], r2[j])) + 0.5 * np.exp(-cos(iso.feat1[i], iso.feat2[j]))
    np.testing.assert_allclose(c[i, j], ref, rtol=1e-5)


def test_parrot_plan_marginals_and_anchors_on_isomorphic_pair(iso):
    n = iso.num_nodes
    mask = _mask(n)
    cost, res = parrot.parrot_solve(iso, jnp.asarray(mask))
    plan = np.asarray(res.plan, np.float64)
    assert bool(res.converged)
    assert np.abs(plan.sum(1) - 1 / n).sum() <= 1.01e-4
    assert np.abs(plan.sum(0) - 1 / n).sum() <= 1.01e-4
    c = np.asarray(cost)
    assert c.min() == 0.0 and abs(c.max() - 1.0) < 1e-6
    a = np.flatnonzero(mask)
    np.testing.assert_array_equal(plan[a].argmax(1), iso.truth[a])  # anchors recovered
    # soft preference, not pinned rows (unlike alignment.anchor_cost): the rest of an anchor
    # row keeps its position cost instead of the maximum
    for k in a:
        assert np.delete(c[k], iso.truth[k]).min() < 0.9
    # anchors matter: the unanchored nodes align better than with no anchors at all
    _, res0 = parrot.parrot_solve(iso, jnp.zeros(n, bool))
    free = jnp.asarray(~mask)
    mrr = alignment.alignment_metrics(res.plan, iso.truth, free)["mrr"]
    mrr0 = alignment.alignment_metrics(res0.plan, iso.truth, free)["mrr"]
    assert mrr > mrr0 + 0.1


def test_parrot_settings_and_gain_score_rejected():
    for field, bad in (("lambda_p", 0.0), ("restart", 1.0), ("lambda_e", -1.0),
                       ("prox_iters", 0)):
        with pytest.raises(ValueError, match=field):
            parrot.check_settings(parrot.PARROT_DEFAULTS._replace(**{field: bad}))
    task = tasks.real_graph_pair("karate", seed=0)
    with pytest.raises(ValueError, match="score"):
        avatar.run_active(jax.random.key(0), task, "avatar", score="gain", solver="parrot")
    with pytest.raises(ValueError, match="solver"):
        avatar.run_active(jax.random.key(0), task, "random", solver="parot")


def test_parrot_active_loop_runs_and_converges():
    task = tasks.real_graph_pair("karate", seed=0)
    res = avatar.run_active(jax.random.key(1), task, "avatar", score="official",
                            solver="parrot", rounds=2, init_frac=0.2, budget_frac=0.3,
                            utility="sq_l2", protocol="paper")
    assert bool(np.all(res.plan_converged)) and bool(np.all(res.cg_converged))
    assert np.all(np.isfinite(np.asarray(res.metrics["mrr"])))


def test_density_against_numpy():
    rng = np.random.default_rng(1)
    plan = rng.random((7, 7))
    x = rng.normal(size=(7, 4))
    p = plan / plan.sum(1, keepdims=True)
    ent = -(p * np.log(p)).sum(1)
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    ref = ent * (xn @ xn.T).mean(1)
    np.testing.assert_allclose(baselines.density_score(jnp.asarray(plan), jnp.asarray(x)), ref,
                               rtol=1e-5)


def test_topmatchings_samples_are_matchings_and_score_disagreement():
    n = 8
    perm = np.random.default_rng(2).permutation(n)
    plan = np.full((n, n), 1e-9)
    plan[np.arange(n), perm] = 1.0
    # nodes 0 and 1 are ambiguous between their two partners
    plan[0, perm[1]] = plan[1, perm[0]] = 1.0
    m = np.asarray(baselines.sample_matchings(jax.random.key(0), jnp.asarray(plan), 32))
    assert all(sorted(row) == list(range(n)) for row in m)
    s = np.asarray(baselines.topmatchings_score(jax.random.key(0), jnp.asarray(plan), 32))
    np.testing.assert_allclose(s[2:], 0.0)
    assert np.all((s[:2] > 0.2) & (s[:2] <= 0.5))
    with pytest.raises(ValueError, match="num_samples"):
        baselines.sample_matchings(jax.random.key(0), jnp.asarray(plan), 0)


def test_topmatchings_equals_brute_force_perturb_and_map():
    """n = 5: each sample's matching is the argmax over all 120 permutations of the summed
    Gumbel-perturbed log row-normalised plan (the same Gumbel draws), and the score is
    1 - the top partner's share, counted by hand."""
    import itertools

    n, k = 5, 12
    plan = np.random.default_rng(4).random((n, n)) + 0.05
    key = jax.random.key(9)
    logp = np.log(plan / plan.sum(1, keepdims=True))
    w = logp[None] + np.asarray(jax.random.gumbel(key, (k, n, n), jnp.float32), np.float64)
    perms = np.array(list(itertools.permutations(range(n))))  # [120, n]
    want = perms[np.argmax(w[:, np.arange(n), perms].sum(-1), axis=1)]  # [k, n]
    got = np.asarray(baselines.sample_matchings(key, jnp.asarray(plan, jnp.float32), k))
    np.testing.assert_array_equal(got, want)
    share = np.array([np.bincount(want[:, i], minlength=n).max() / k for i in range(n)])
    np.testing.assert_allclose(
        baselines.topmatchings_score(key, jnp.asarray(plan, jnp.float32), k), 1 - share,
        rtol=1e-6)


def test_config_aligner_is_checked():
    from experiments.configs import avatar as cfg

    c = cfg.get_config("parrot")
    cfg.validate_config(c)
    c.aligner = "joena"
    with pytest.raises(ValueError, match="config.aligner"):
        cfg.validate_config(c)
    c = cfg.get_config("parrot")
    c.strategies = ["avatar-gain", "random"]
    with pytest.raises(ValueError, match="config.strategies"):
        cfg.validate_config(c)
