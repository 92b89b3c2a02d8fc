"""parrot_official against a dense float64 NumPy transcription of PARROT's published
algorithm (power-iteration RWR on D^-1 A, the zero-row cosine rule, the product RWR with
its tolerance, CPOT with its acceptance test and soft update), on small graph pairs."""

import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from jaxlab.avatar import parrot_official as po
from jaxlab.avatar import tasks


def _unit(v):
    v = np.asarray(v, np.float64)
    norm = np.sqrt((v * v).sum(1, keepdims=True))
    out = np.where(norm > 0, v / np.where(norm > 0, norm, 1.0), 0.0)
    out[norm[:, 0] == 0] = np.sqrt(1.0 / v.shape[1])
    return out


def _exp_cos(v1, v2):
    return np.exp(-_unit(v1) @ _unit(v2).T)


def reference(a1, a2, x1, x2, anchor_pairs, s: po.Settings):
    """(cross cost, plan) by the published algorithm, dense float64."""
    n1, n2 = a1.shape[0], a2.shape[0]
    h = np.zeros((n1, n2), bool)
    h[anchor_pairs[:, 0], anchor_pairs[:, 1]] = True

    def rwr(a, cols):
        t = a / a.sum(1, keepdims=True)
        e = np.zeros((a.shape[0], len(cols)))
        e[cols, np.arange(len(cols))] = 1.0
        r = np.zeros_like(e)
        for _ in range(2000):  # (1 - beta)^2000 is far below float64 rounding
            r = (1 - s.restart) * t @ r + s.restart * e
        return r

    r1, r2 = rwr(a1, anchor_pairs[:, 0]), rwr(a2, anchor_pairs[:, 1])
    rwr_cost = np.where(h, 0.0, _exp_cos(r1, r2))
    if x1.shape[1] == 0:
        x1, x2 = r1, r2
    intra1 = _exp_cos(x1, x1) * a1
    intra2 = _exp_cos(x2, x2) * a2
    node = np.where(h, 0.0, _exp_cos(x1, x2)) + s.alpha * rwr_cost
    l1 = a1 / a1.sum(1, keepdims=True)
    l2 = a2 / a2.sum(1, keepdims=True)
    c = np.zeros((n1, n2))
    for _ in range(s.prod_iters):
        new = (1 + s.gamma * s.restart) * node + (1 - s.restart) * s.gamma * l1 @ c @ l2.T
        new[h] = 0.0
        change = np.abs(new - c).max()
        c = new
        if change <= s.prod_tol:
            break
    cross = (1 - s.gamma) * c
    cross[h] = 0.0
    # CPOT
    lam = s.lambda_p + s.lambda_n + s.lambda_a
    le = s.lambda_e * n1 * n2
    hh = h + 1.0 / n2
    t = np.full((n1, n2), 1.0 / (n1 * n2))
    k = 0.5 * ((intra1 ** 2).sum(1)[:, None] / n1 + (intra2 ** 2).sum(1)[None, :] / n2)
    f, g = np.zeros(n1), np.zeros(n2)
    m_old = None
    for i in range(s.outer_iters):
        m = cross - s.lambda_n * np.log(l1 @ t @ l2.T) - s.lambda_a * np.log(hh) + le * (
            k - intra1 @ t @ intra2.T)
        if i == 0 or (t * m).sum() <= (t * m_old).sum():
            m_old = m
        else:
            m = m_old
        q = m - s.lambda_p * np.log(t)
        for _ in range(s.inner_iters):
            z = (f[:, None] - q) / lam
            g = -lam * np.log(np.exp(z - z.max(0)).sum(0) / n1) - lam * z.max(0)
            z = (g[None, :] - q) / lam
            f = -lam * np.log(np.exp(z - z.max(1, keepdims=True)).sum(1) / n2) - lam * z.max(1)
        t = s.mix * t + (1 - s.mix) * np.exp((f[:, None] + g[None, :] - q) / lam) / (n1 * n2)
    return cross, t


def _pair(n, seed, attributed):
    rng = np.random.default_rng(seed)
    g1 = nx.connected_watts_strogatz_graph(n, 4, 0.3, seed=seed)
    perm = rng.permutation(n)
    g2 = nx.relabel_nodes(g1, dict(enumerate(perm)))
    # noise: drop a few edges of graph 2 (keeping every node's degree >= 1)
    for u, v in list(g2.edges())[:: 7]:
        if g2.degree(u) > 1 and g2.degree(v) > 1:
            g2.remove_edge(u, v)
    a1 = nx.to_numpy_array(g1, nodelist=range(n))
    a2 = nx.to_numpy_array(g2, nodelist=range(n))
    p = 3 if attributed else 0
    x1 = rng.integers(0, 3, (n, p)).astype(float)
    x2 = x1[np.argsort(perm)] if p else np.zeros((n, 0))
    pairs = np.stack([np.arange(n), perm], 1)
    return a1, a2, x1, x2, pairs


def _ours(a1, a2, x1, x2, pairs, anchors, s):
    task = tasks.graph_task(sp.csr_matrix(a1), sp.csr_matrix(a2), x1, x2, pairs,
                            restart=s.restart)
    g = po.prepare(task, a1, a2, s)
    stats = po.add_anchors(po.empty_stats(task, g), g, np.flatnonzero(anchors))
    c = po.cost(task, g, stats, jnp.asarray(anchors), s)
    sol = po.cpot(task, g, c, jnp.asarray(anchors), s)
    return task, g, stats, c, sol


@pytest.mark.parametrize("attributed,settings", [(True, po.ACM_DBLP),
                                                 (False, po.FOURSQUARE_TWITTER)])
@pytest.mark.heavy
def test_matches_reference(attributed, settings):
    a1, a2, x1, x2, pairs = _pair(40, 0, attributed)
    anchors = np.zeros(40, bool)
    anchors[[1, 5, 9, 17, 30]] = True
    cross_ref, plan_ref = reference(a1, a2, x1, x2, pairs[anchors], settings)
    _, _, _, c, sol = _ours(a1, a2, x1, x2, pairs, anchors, settings)
    np.testing.assert_allclose(np.asarray(c.cross), cross_ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(np.asarray(sol.plan), plan_ref, rtol=2e-3,
                               atol=1e-3 * plan_ref.max())
    np.testing.assert_allclose(np.asarray(sol.plan).sum(1), 1 / 40, rtol=1e-4)


def test_zero_rows_follow_the_unit_vector_rule():
    # two components: anchors only in the first, so the second's RWR rows are zero
    g = nx.disjoint_union(nx.cycle_graph(8), nx.path_graph(5))
    a = nx.to_numpy_array(g)
    n = a.shape[0]
    pairs = np.stack([np.arange(n), np.arange(n)], 1)
    anchors = np.zeros(n, bool)
    anchors[[0, 3]] = True
    s = po.FOURSQUARE_TWITTER
    cross_ref, _ = reference(a, a, np.zeros((n, 0)), np.zeros((n, 0)), pairs[anchors], s)
    _, _, stats, c, _ = _ours(a, a, np.zeros((n, 0)), np.zeros((n, 0)), pairs, anchors, s)
    assert np.all(np.asarray(stats.sq1)[8:] == 0)  # the zero rows exist
    np.testing.assert_allclose(np.asarray(c.cross), cross_ref, rtol=2e-5, atol=2e-5)


def test_incremental_stats_equal_a_fresh_sum():
    a1, a2, x1, x2, pairs = _pair(30, 1, False)
    task = tasks.graph_task(sp.csr_matrix(a1), sp.csr_matrix(a2), x1, x2, pairs)
    g = po.prepare(task, a1, a2, po.FOURSQUARE_TWITTER)
    first, second = np.array([2, 4, 6]), np.array([10, 11])
    grown = po.add_anchors(po.add_anchors(po.empty_stats(task, g), g, first), g, second)
    fresh = po.add_anchors(po.empty_stats(task, g), g, np.r_[first, second])
    for a, b in zip(grown, fresh, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)
    assert float(grown.count) == 5


def test_warm_product_rwr_stays_within_the_tolerance():
    a1, a2, x1, x2, pairs = _pair(40, 2, True)
    s = po.ACM_DBLP
    anchors = np.zeros(40, bool)
    anchors[:6] = True
    task, g, stats, c, _ = _ours(a1, a2, x1, x2, pairs, anchors, s)
    anchors2 = anchors.copy()
    anchors2[[20, 21]] = True
    stats2 = po.add_anchors(stats, g, [20, 21])
    cold = po.cost(task, g, stats2, jnp.asarray(anchors2), s)
    warm = po.cost(task, g, stats2, jnp.asarray(anchors2), s, warm=c.raw)
    assert int(warm.prod_steps) < int(cold.prod_steps)
    # both stop at a step change <= prod_tol of a contraction with factor q = (1-beta)
    # gamma, so each is within q / (1 - q) prod_tol of the fixed point (times 1 - gamma)
    q = (1 - s.restart) * s.gamma
    bound = 2 * (1 - s.gamma) * q / (1 - q) * s.prod_tol
    assert float(jnp.max(jnp.abs(warm.cross - cold.cross))) <= bound


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="settings.gamma"):
        po.check_settings(po.ACM_DBLP._replace(gamma=1.5))
    with pytest.raises(ValueError, match="settings.outer_iters"):
        po.check_settings(po.ACM_DBLP._replace(outer_iters=0))
    a = nx.to_numpy_array(nx.path_graph(5))
    a_iso = a.copy()
    a_iso[4, 3] = a_iso[3, 4] = 0.0
    pairs = np.stack([np.arange(5), np.arange(5)], 1)
    task = tasks.graph_task(sp.csr_matrix(a), sp.csr_matrix(a), np.zeros((5, 0)),
                            np.zeros((5, 0)), pairs)
    with pytest.raises(ValueError, match="adj2.*isolated"):
        po.prepare(task, a, a_iso, po.ACM_DBLP)


def test_host_products_equal_bcoo_products():
    a1, a2, x1, x2, pairs = _pair(40, 3, False)
    s = po.FOURSQUARE_TWITTER
    anchors = np.zeros(40, bool)
    anchors[:8] = True
    task, g, stats, c, sol = _ours(a1, a2, x1, x2, pairs, anchors, s)
    host = po.HostProducts(g, threads=2)
    c_h = po.cost(task, g, stats, jnp.asarray(anchors), s, host=host)
    sol_h = po.cpot(task, g, c_h, jnp.asarray(anchors), s, host=host)
    np.testing.assert_allclose(np.asarray(c_h.cross), np.asarray(c.cross), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(sol_h.plan), np.asarray(sol.plan), rtol=1e-3,
                               atol=1e-6 * float(sol.plan.max()))
