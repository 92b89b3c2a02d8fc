"""PARROT as its official code runs it: position-aware cost, product-graph RWR, CPOT.

PARROT (Zeng, Zhang, Xia, Tong, "PARROT: Position-Aware Regularized Optimal Transport for
Network Alignment", WWW 2023). ``parrot`` is our earlier PARROT-class simplification (it
solves each proximal subproblem to convergence); this module follows the official MATLAB
code (zhichenz98/PARROT-WWW23: ``parrot.m``, ``cpot.m``, ``utils/get_*.m``) step for step,
in JAX, float32, on whole graphs (``tasks.GraphTask`` + ``prepare``).

1. Position features: random walk with restart from each anchor on each graph with the
   row-normalised transition D^-1 A, r = (1 - beta) D^-1 A r + beta e_a (eq. 2 of the
   paper; ``beta`` = ``restart``), i.e. r = beta (I - (1 - beta) D^-1 A)^-1 e_a. The
   task's ``pos`` columns solve the column-stochastic system (I - (1 - beta) A D^-1)^-1;
   since (I - c D^-1 A)^-1 = D^-1 (I - c A D^-1)^-1 D, the official column is the task's
   column times d_a / (n d_i) (``prepare``, exact; the official code iterates 100 times
   from 0, which agrees to about (1 - beta)^100).
2. Cost of two feature rows: exp(-cos), a row of zeros replaced by the unit vector
   sqrt(1/d) (d the feature dimension), anchor pairs set to 0 (``get_cross_cost``).
3. Cross cost N = exp(-cos(x1, x2)) + alpha exp(-cos(r1, r2)) with attributes, or
   (1 + alpha) exp(-cos(r1, r2)) without (``get_cost``: the attributes are then the RWR
   features).
4. Product-graph RWR from C = 0: C <- (1 + gamma beta) N + (1 - beta) gamma L1 C L2^T,
   anchor pairs set to 0 each step, until the largest absolute change is at most
   ``prod_tol`` or after ``prod_iters`` steps; then C <- (1 - gamma) C, anchors 0
   (``get_prod_rwr``). L = D^-1 A.
5. Intra-graph costs Ci = exp(-cos(x_u, x_v)) on the edges of graph i (attributes, or the
   RWR features of a plain graph).
6. CPOT, ``outer_iters`` steps from T = 1 / (n1 n2), potentials f = 0, g = 1 / n2::

       CGW = K - C1 T C2^T,  K_ij = (sum_u C1_iu^2 / n1 + sum_v C2_jv^2 / n2) / 2
       M   = C - lambda_n log(L1 T L2^T) - lambda_a log H + lambda_e n1 n2 CGW

   with H = 1 + 1/n2 on anchor pairs, 1/n2 elsewhere; from the second step on M is kept
   only if <T, M> <= <T, M_prev> (else M_prev); Q = M - lambda_p log T; then
   ``inner_iters`` log-domain Sinkhorn sweeps at lambda = lambda_p + lambda_n + lambda_a
   (column potential first, potentials carried across steps)::

       g_j = -lambda log sum_i exp(-(Q_ij - f_i) / lambda) / n1
       f_i = -lambda log sum_j exp(-(Q_ij - g_j) / lambda) / n2

   and the soft update T <- ``mix`` T + (1 - ``mix``) exp((f_i + g_j - Q_ij) / lambda)
   / (n1 n2) (rows sum to 1 / n1 exactly; the columns are off by ``column_error``).

Settings (``SETTINGS``): the official scripts' values for ACM-DBLP (attributed,
``experiments/ACM_DBLP_A.m``) and Foursquare-Twitter (``foursquare_twitter.m``).

What is ours / differs: float32 instead of float64; the RWR features by a sparse LU
(exact) instead of 100 power steps; log(L1 T L2^T) floored at 1e-30 (never reached on
the shipped graphs, which have no isolated nodes); a graph with isolated nodes is refused
(ValueError: the official code rewires them to every node, a dense row we do not build);
the products L1 X L2^T and C1 X C2^T are blocked sparse x dense (``parrot.bilinear``).
PARROT has no convergence test: it runs its fixed schedule, so ``Solve`` reports the
column-marginal error, the last step's L1 change of T, the product-RWR steps and whether
the product RWR met ``prod_tol``; nothing is tuned here.

Warm starts (ours, ``warm``): the anchor set grows between AvAtar rounds, so step 4 may
start from the previous round's fixed point (anchors zeroed) instead of 0; it stops on the
same ``prod_tol``, so a warm start changes C by at most about the tolerance. CPOT itself
runs PARROT's fixed schedule from the uniform plan every time: started from the previous
plan it would return a different (further-iterated) plan, not the same plan sooner.

Checks (eager; shapes and types also under ``jit``): the settings (finite, ranges;
ValueError naming the field); ``prepare``: no isolated node; ``anchors`` [k] bool
(TypeError / ValueError); ``g`` the ``Graphs`` of the task, ``stats`` the sums of ``g``;
``add_anchors`` / ``add_block``: pair indices in [0, k).
"""

import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from jaxlab.avatar import parrot, tasks
from jaxlab.core import validation
from jaxlab.core.types import Array

__all__ = ["Settings", "ACM_DBLP", "FOURSQUARE_TWITTER", "SETTINGS", "epsilon", "Graphs",
    "prepare", "HostProducts", "host_products", "exp_cos_cost", "PositionStats", "empty_stats",
    "add_block", "add_anchors", "position_costs", "Cost", "anchor_mask", "cost", "Solve", "cpot"]

_TINY = 1e-30


class Settings(NamedTuple):
    """PARROT's hyper-parameters (names of the paper; the code's in brackets).

    Attributes:
      alpha: weight of the RWR position cost against the attribute cost [alpha].
      restart: RWR restart probability beta [beta].
      gamma: discount of the product-graph RWR [gamma].
      prod_tol: max-abs change that stops the product-graph RWR [1e-2 in get_prod_rwr].
      prod_iters: cap on the product-graph RWR steps [rwIter].
      lambda_p: proximal weight [l1]; lambda_n: neighbourhood weight [l2];
      lambda_a: anchor-prior weight [l3]; lambda_e: edge (GW) weight, times n1 n2 [l4].
      inner_iters: Sinkhorn sweeps per step [inIter]; outer_iters: CPOT steps [outIter].
      mix: weight of the previous plan in the soft update [0.05].
    """

    alpha: float = 0.1
    restart: float = 0.15
    gamma: float = 0.2
    prod_tol: float = 1e-2
    prod_iters: int = 50
    lambda_p: float = 1e-1
    lambda_n: float = 1e-2
    lambda_a: float = 1e-2
    lambda_e: float = 5e-5
    inner_iters: int = 5
    outer_iters: int = 10
    mix: float = 0.05


ACM_DBLP = Settings()  # experiments/ACM_DBLP_A.m
FOURSQUARE_TWITTER = Settings(alpha=0.5, restart=0.15, gamma=0.8, lambda_p=1e-3,
                              lambda_n=5e-3, lambda_a=5e-4, lambda_e=3e-6)  # foursquare_twitter.m
SETTINGS = {"acm_dblp": ACM_DBLP, "foursquare_twitter": FOURSQUARE_TWITTER}


def check_settings(s: Settings, name: str = "settings") -> None:
    """Raises ValueError naming the bad field of ``s`` (TypeError if ``s`` is no Settings);
    ``name``: how the message calls the argument (``cost`` / ``cpot`` call it ``s``)."""
    if not isinstance(s, Settings):
        raise TypeError(f"`{name}` must be a parrot_official.Settings, got "
                        f"{type(s).__name__}.")
    for field in ("alpha", "lambda_p", "lambda_n", "lambda_a", "lambda_e"):
        validation.check_in_range(f"{name}.{field}", getattr(s, field), 0.0, np.inf,
                                  high_inclusive=False)
    validation.check_in_range(f"{name}.lambda_p + lambda_n + lambda_a",
                              s.lambda_p + s.lambda_n + s.lambda_a, 0.0, np.inf,
                              low_inclusive=False, high_inclusive=False)
    for field in ("restart", "gamma"):
        validation.check_in_range(f"{name}.{field}", getattr(s, field), 0.0, 1.0,
                                  low_inclusive=False, high_inclusive=False)
    validation.check_in_range(f"{name}.mix", s.mix, 0.0, 1.0, high_inclusive=False)
    validation.check_in_range(f"{name}.prod_tol", s.prod_tol, 0.0, np.inf,
                              low_inclusive=False, high_inclusive=False)
    for field in ("prod_iters", "inner_iters", "outer_iters"):
        validation.check_positive_int(f"{name}.{field}", getattr(s, field))


def epsilon(s: Settings) -> float:
    """lambda = lambda_p + lambda_n + lambda_a, the entropic weight of CPOT's Sinkhorn (and
    the eps AvAtar's code passes to its score)."""
    return s.lambda_p + s.lambda_n + s.lambda_a


class Graphs(NamedTuple):
    """The arrays PARROT needs besides a ``tasks.GraphTask`` (``prepare``).

    Attributes:
      row1: [n1, n1], row2: [n2, n2] BCOO float32 row-normalised adjacencies D^-1 A.
      edges1: [e1, 2], edges2: [e2, 2] int32 (row, column) of each stored entry, in the
        order of ``row1`` / ``row2``'s data (the intra costs share that pattern).
      pos1: [n1, k], pos2: [n2, k] float32 official RWR features of the pair nodes.

    Whether the task is attributed (step 3's first form) is read from its static shape
    (``task.feat1`` has columns).
    """

    row1: object
    row2: object
    edges1: np.ndarray
    edges2: np.ndarray
    pos1: Array
    pos2: Array


def _check_graphs(task, g) -> None:
    """``g`` a ``Graphs`` of ``task``: position features [n1, k] / [n2, k] (static shapes)."""
    if not isinstance(g, Graphs):
        raise TypeError(f"`g` must be parrot_official.prepare(task, ...) (a Graphs), got "
                        f"{type(g).__name__}.")
    n1, n2 = tasks.plan_shape(task)
    k = tasks.num_pairs(task)
    if tuple(np.shape(g.pos1)) != (n1, k) or tuple(np.shape(g.pos2)) != (n2, k):
        raise ValueError(f"`g` must be the Graphs of this task (position features "
                         f"({n1}, {k}) / ({n2}, {k})), got {tuple(np.shape(g.pos1))} / "
                         f"{tuple(np.shape(g.pos2))}: prepare it from this task.")


def prepare(task: tasks.GraphTask, adj1, adj2, settings: Settings) -> Graphs:
    """PARROT's extra arrays for ``task`` (built with RWR restart ``settings.restart``).

    Args:
      task: the whole-graph task (``datasets.full_task(name, restart=settings.restart)``).
      adj1: [n1, n1], adj2: [n2, n2] the raw symmetric adjacencies (scipy.sparse).
      settings: Settings (their ``restart`` must be the task's RWR restart; not checkable
        from the arrays, so say it in the call).

    Raises:
      ValueError: a graph with an isolated node, or adjacency shapes that differ from the
        task's.
    """
    check_settings(settings)
    n1, n2 = tasks.plan_shape(task)
    out = {}
    for i, (adj, n, pos, nodes) in enumerate(((adj1, n1, task.pos1, task.src),
                                              (adj2, n2, task.pos2, task.tgt)), 1):
        a = sp.csr_matrix(adj, dtype=np.float64)
        validation.check_shape(f"adj{i}", a, (n, n))
        deg = np.asarray(a.sum(1)).ravel()
        if np.any(deg <= 0):
            raise ValueError(f"`adj{i}` has {int((deg <= 0).sum())} isolated node(s); PARROT's "
                             "code rewires them to every node (a dense row), which this "
                             "implementation does not build. Remove them first.")
        a.eliminate_zeros()
        a.sort_indices()
        row = sp.diags(1.0 / deg) @ a
        row = sp.csr_matrix(row)
        row.sort_indices()
        out[f"row{i}"] = tasks.to_bcoo(row)
        coo = a.tocoo()
        out[f"edges{i}"] = np.stack([coo.row, coo.col], 1).astype(np.int32)
        scale = deg[np.asarray(nodes)][None, :] / (n * deg[:, None])
        out[f"pos{i}"] = jnp.asarray(np.asarray(pos, np.float64) * scale, jnp.float32)
    return Graphs(**out)


class HostProducts:
    """L1 X L2^T and C1 X C2^T by scipy.sparse on the host (``jax.pure_callback``), for CPU.

    On XLA:CPU a BCOO product gathers one dense row per non-zero and scatters it back
    serially; scipy's CSR kernels (rows split over ``threads`` threads) were faster on the
    whole ACM-DBLP pair (2-core Intel Xeon: one L1 X L2^T 2.7 s as BCOO, 1.45 s through
    the callback, of which 0.57 s is the copy in and out). Identity-hashed, so it is a
    static argument of ``cost`` / ``cpot``; not for accelerators (the plan would cross to
    the host twice per product).
    """

    def __init__(self, g: "Graphs", threads: int | None = None):
        from concurrent.futures import ThreadPoolExecutor

        self._patterns = []
        for w in (g.row1, g.row2):
            m = sp.csr_matrix((np.asarray(w.data, np.float32),
                               (np.asarray(w.indices[:, 0]), np.asarray(w.indices[:, 1]))),
                              shape=w.shape)
            m.sort_indices()
            self._patterns.append(m)
        self._threads = max(1, threads or os.cpu_count() or 1)
        self._pool = ThreadPoolExecutor(self._threads)

    def _rows(self, n):
        cuts = np.linspace(0, n, self._threads + 1).astype(int)
        return list(zip(cuts[:-1], cuts[1:], strict=True))

    def _bilinear(self, w1, x, w2t):
        y = np.empty_like(x)
        z = np.empty_like(x)

        def left(r):
            y[r[0]:r[1]] = w1[r[0]:r[1]] @ x

        def right(r):
            z[r[0]:r[1]] = y[r[0]:r[1]] @ w2t

        list(self._pool.map(left, self._rows(x.shape[0])))
        list(self._pool.map(right, self._rows(x.shape[0])))
        return z

    def _with(self, i, data):
        m = self._patterns[i]
        if data is None:
            return m
        return sp.csr_matrix((np.asarray(data, np.float32), m.indices, m.indptr), shape=m.shape)

    def _host_row(self, x):
        x = np.asarray(x, np.float32)
        return self._bilinear(self._patterns[0], x, self._patterns[1].T.tocsr())

    def _host_both(self, x, d1, d2):
        x = np.asarray(x, np.float32)
        w2t = self._patterns[1].T.tocsr()
        c2t = self._with(1, d2).T.tocsr()
        return (self._bilinear(self._patterns[0], x, w2t),
                self._bilinear(self._with(0, d1), x, c2t))

    def row(self, x: Array) -> Array:
        """L1 X L2^T."""
        out = jax.ShapeDtypeStruct(x.shape, jnp.float32)
        return jax.pure_callback(self._host_row, out, x)

    def both(self, x: Array, intra1: Array, intra2: Array) -> tuple[Array, Array]:
        """(L1 X L2^T, C1 X C2^T) with C1 / C2 the patterns carrying ``intra1`` / ``intra2``."""
        out = jax.ShapeDtypeStruct(x.shape, jnp.float32)
        return jax.pure_callback(self._host_both, (out, out), x, intra1, intra2)


def host_products(g: "Graphs") -> HostProducts | None:
    """A ``HostProducts`` on the CPU backend, None elsewhere (BCOO products).

    Raises:
      TypeError: ``g`` is not a ``Graphs`` (``prepare``).
    """
    if not isinstance(g, Graphs):
        raise TypeError(f"`g` must be parrot_official.prepare(task, ...) (a Graphs), got "
                        f"{type(g).__name__}.")
    return HostProducts(g) if jax.default_backend() == "cpu" else None


def _unit_rows(x: Array) -> Array:
    """Rows scaled to unit norm; an all-zero row becomes sqrt(1/d) (``get_cross_cost``)."""
    d = x.shape[1]
    norm = jnp.sqrt(jnp.sum(x * x, axis=1, keepdims=True))
    return jnp.where(norm > 0, x / jnp.where(norm > 0, norm, 1.0), jnp.sqrt(1.0 / d))


def exp_cos_cost(x1: Array, x2: Array) -> Array:
    """[n1, n2] exp(-cos(x1_i, x2_j)) with PARROT's zero-row rule (step 2, anchors not
    zeroed), ``x1`` [n1, d] and ``x2`` [n2, d].

    Raises:
      ValueError: ``x1`` / ``x2`` not 2-D, or their row lengths differ.
    """
    validation.check_ndim("x1", x1, 2)
    validation.check_ndim("x2", x2, 2)
    validation.check_shape("x2", x2, (None, np.shape(x1)[1]))
    return jnp.exp(-_unit_rows(x1) @ _unit_rows(x2).T)


def _edge_cost(x: Array, edges: np.ndarray) -> Array:
    """[e] exp(-cos(x_u, x_v)) for each edge (u, v) (step 5), zero-row rule as above."""
    u = _unit_rows(x)
    e = jnp.asarray(edges)
    return jnp.exp(-jnp.sum(u[e[:, 0]] * u[e[:, 1]], axis=1))


class PositionStats(NamedTuple):
    """Sums over the anchor columns of the RWR features (``add_anchors`` grows them), from
    which every cosine of step 2 follows without the [n, anchors] matrices.

    Attributes:
      dot: [n1, n2] sum_a r1_ia r2_ja; edot1: [e1], edot2: [e2] the same on each graph's
        edges (u, v); sq1: [n1], sq2: [n2] sum_a r_ia^2; sum1: [n1], sum2: [n2] sum_a r_ia;
      count: [] number of anchor columns d.
    """

    dot: Array
    edot1: Array
    edot2: Array
    sq1: Array
    sq2: Array
    sum1: Array
    sum2: Array
    count: Array


COLUMN_BLOCK = 128  # anchor columns added per ``add_anchors`` call (one compiled shape)


def empty_stats(task, g: Graphs) -> PositionStats:
    """PositionStats of no anchor.

    Raises:
      TypeError / ValueError: ``g`` not the ``Graphs`` of ``task`` (``prepare``).
    """
    _check_graphs(task, g)
    n1, n2 = tasks.plan_shape(task)
    z1, z2 = jnp.zeros(n1, jnp.float32), jnp.zeros(n2, jnp.float32)
    return PositionStats(jnp.zeros((n1, n2), jnp.float32),
                         jnp.zeros(g.edges1.shape[0], jnp.float32),
                         jnp.zeros(g.edges2.shape[0], jnp.float32), z1, z2, z1, z2,
                         jnp.float32(0.0))


def add_block(stats: PositionStats, g: Graphs, cols: Array, valid: Array) -> PositionStats:
    """``stats`` with the pair columns ``cols`` [b] added where ``valid`` [b] (bool).

    Raises:
      TypeError: ``cols`` not integers, ``valid`` not bool. ValueError: ``cols`` (concrete)
        outside [0, k) (k the task's pairs), ``valid`` not the shape of ``cols``.
    """
    validation.check_ndim("cols", cols, 1)
    validation.check_int_range("cols", cols, 0, np.shape(g.pos1)[1])
    validation.check_shape("valid", valid, np.shape(cols))
    validation.check_bool("valid", valid)
    w = valid.astype(jnp.float32)
    r1 = g.pos1[:, cols] * w[None, :]
    r2 = g.pos2[:, cols] * w[None, :]
    e1, e2 = jnp.asarray(g.edges1), jnp.asarray(g.edges2)
    return PositionStats(
        stats.dot + r1 @ r2.T,
        stats.edot1 + jnp.sum(r1[e1[:, 0]] * r1[e1[:, 1]], axis=1),
        stats.edot2 + jnp.sum(r2[e2[:, 0]] * r2[e2[:, 1]], axis=1),
        stats.sq1 + jnp.sum(r1 * r1, axis=1), stats.sq2 + jnp.sum(r2 * r2, axis=1),
        stats.sum1 + jnp.sum(r1, axis=1), stats.sum2 + jnp.sum(r2, axis=1),
        stats.count + jnp.sum(w))


_add_block = jax.jit(add_block)


def add_anchors(stats: PositionStats, g: Graphs, pairs) -> PositionStats:
    """``stats`` with the pair columns ``pairs`` (host ints, not yet in ``stats``) added,
    ``COLUMN_BLOCK`` at a time (one compiled shape for any number of pairs).

    Raises:
      TypeError: ``pairs`` not integers. ValueError: ``pairs`` outside [0, k).
    """
    pairs = np.asarray(pairs)
    if pairs.size:
        validation.check_int_range("pairs", pairs, 0, np.shape(g.pos1)[1])
    pairs = pairs.astype(np.int32).ravel()
    for lo in range(0, len(pairs), COLUMN_BLOCK):
        part = pairs[lo:lo + COLUMN_BLOCK]
        cols = np.zeros(COLUMN_BLOCK, np.int32)
        cols[:len(part)] = part
        valid = np.arange(COLUMN_BLOCK) < len(part)
        stats = _add_block(stats, g, jnp.asarray(cols), jnp.asarray(valid))
    return stats


def _cosines(dot, sq_a, sq_b, sum_a, sum_b, count):
    """cos(u, v) from sum u v, |u|^2, |v|^2, sum u, sum v over d = count columns, with the
    zero-row rule (a zero row is the unit vector sqrt(1/d))."""
    za, zb = sq_a <= 0, sq_b <= 0
    na = jnp.sqrt(jnp.where(za, 1.0, sq_a))
    nb = jnp.sqrt(jnp.where(zb, 1.0, sq_b))
    rd = jnp.sqrt(jnp.maximum(count, 1.0))
    both = dot / (na * nb)
    only_b = sum_b / (rd * nb)  # a is zero
    only_a = sum_a / (rd * na)  # b is zero
    return jnp.where(za, jnp.where(zb, 1.0, only_b), jnp.where(zb, only_a, both))


def position_costs(stats: PositionStats, g: Graphs):
    """([n1, n2] exp(-cos(r1, r2)), [e1], [e2] exp(-cos) on each graph's edges) of the
    anchor columns in ``stats`` (steps 2 and 5 on the RWR features).

    Raises:
      TypeError: ``stats`` not a PositionStats, ``g`` not a Graphs. ValueError: ``stats``
        of other graphs than ``g`` (their node and edge counts differ).
    """
    if not isinstance(stats, PositionStats):
        raise TypeError(f"`stats` must be a PositionStats (empty_stats / add_anchors), got "
                        f"{type(stats).__name__}.")
    if not isinstance(g, Graphs):
        raise TypeError(f"`g` must be parrot_official.prepare(task, ...) (a Graphs), got "
                        f"{type(g).__name__}.")
    n1, n2 = np.shape(g.pos1)[0], np.shape(g.pos2)[0]
    for field, shape in (("dot", (n1, n2)), ("edot1", (len(g.edges1),)),
                         ("edot2", (len(g.edges2),)), ("sq1", (n1,)), ("sq2", (n2,))):
        if tuple(np.shape(getattr(stats, field))) != shape:
            raise ValueError(f"`stats` must be the sums of these graphs (`stats.{field}` "
                             f"{shape}), got {tuple(np.shape(getattr(stats, field)))}: "
                             "empty_stats(task, g) starts them.")
    cross = jnp.exp(-_cosines(stats.dot, stats.sq1[:, None], stats.sq2[None, :],
                              stats.sum1[:, None], stats.sum2[None, :], stats.count))
    edges = []
    for e, dots, sq, sm in ((g.edges1, stats.edot1, stats.sq1, stats.sum1),
                            (g.edges2, stats.edot2, stats.sq2, stats.sum2)):
        u, v = jnp.asarray(e[:, 0]), jnp.asarray(e[:, 1])
        edges.append(jnp.exp(-_cosines(dots, sq[u], sq[v], sm[u], sm[v], stats.count)))
    return cross, edges[0], edges[1]


def _with_data(pattern, data: Array):
    """The BCOO ``pattern`` with its values replaced by ``data`` (same order)."""
    return type(pattern)((data.astype(jnp.float32), pattern.indices), shape=pattern.shape,
                         indices_sorted=True, unique_indices=True)


class Cost(NamedTuple):
    """cross: [n1, n2] PARROT's cost C after the product RWR (steps 1-4); raw: [n1, n2] the
    product-RWR iterate before the (1 - gamma) scaling (a warm start for the next round);
    intra1, intra2: [e1], [e2] the intra-graph costs on the edges (step 5); prod_steps: []
    product-RWR steps; prod_change: [] the last step's largest absolute change (at most
    prod_tol when the RWR stopped on its tolerance)."""

    cross: Array
    raw: Array
    intra1: Array
    intra2: Array
    prod_steps: Array
    prod_change: Array


def anchor_mask(task, anchors: Array) -> Array:
    """[n1, n2] bool, True on the anchored pairs (src[p], tgt[p]) with anchors[p].

    Raises:
      ValueError: ``anchors`` not [k] (the task's pairs). TypeError: ``anchors`` not bool.
    """
    validation.check_shape("anchors", anchors, (tasks.num_pairs(task),))
    validation.check_bool("anchors", anchors)
    src, tgt = tasks.pair_nodes(task)
    return jnp.zeros(tasks.plan_shape(task), bool).at[src, tgt].set(anchors)


def cost(task, g: Graphs, stats: PositionStats, anchors: Array, s: Settings,
         warm: Array | None = None, host: HostProducts | None = None) -> Cost:
    """PARROT's cross and intra costs (steps 1-5) of the anchors ``anchors``.

    Args:
      task: the GraphTask; g: its ``prepare`` arrays.
      stats: PositionStats of exactly the anchored pairs (``add_anchors``).
      anchors: [k] bool anchored pairs; s: Settings.
      warm: optional [n1, n2] previous ``Cost.raw`` to start the product RWR from (anchors
        zeroed first); None starts from 0 as PARROT does.
      host: optional ``HostProducts`` (static) for the sparse products (CPU).

    Raises:
      TypeError / ValueError naming ``g``, ``stats``, ``anchors`` or ``s`` (a field).
    """
    check_settings(s, "s")
    _check_graphs(task, g)
    on_anchor = anchor_mask(task, anchors)
    pos_cross, pos_e1, pos_e2 = position_costs(stats, g)
    if np.shape(task.feat1)[1] > 0:  # attributed (a static shape)
        f1 = jnp.asarray(task.feat1, jnp.float32)
        f2 = jnp.asarray(task.feat2, jnp.float32)
        node = exp_cos_cost(f1, f2) + s.alpha * pos_cross
        intra1, intra2 = _edge_cost(f1, g.edges1), _edge_cost(f2, g.edges2)
    else:
        node = (1.0 + s.alpha) * pos_cross
        intra1, intra2 = pos_e1, pos_e2
    node = jnp.where(on_anchor, 0.0, node)
    c0 = jnp.zeros_like(node) if warm is None else jnp.where(on_anchor, 0.0, warm)
    a = (1.0 + s.gamma * s.restart)
    b = (1.0 - s.restart) * s.gamma

    def cond(v):
        _, k, change = v
        return (k < s.prod_iters) & (change > s.prod_tol)

    def body(v):
        c, k, _ = v
        spread = host.row(c) if host is not None else parrot.bilinear(g.row1, c, g.row2)
        new = jnp.where(on_anchor, 0.0, a * node + b * spread)
        return new, k + 1, jnp.max(jnp.abs(new - c))

    raw, steps, change = jax.lax.while_loop(cond, body,
                                            (c0, jnp.int32(0), jnp.float32(jnp.inf)))
    cross = jnp.where(on_anchor, 0.0, (1.0 - s.gamma) * raw)
    return Cost(cross, raw, intra1, intra2, steps, change)


class Solve(NamedTuple):
    """plan: [n1, n2] PARROT's plan T; f: [n1], g: [n2] the last Sinkhorn potentials;
    column_error: [] ||T^T 1 - 1/n2||_1 (the rows are exact); last_change: [] ||T - T_prev||_1
    of the last step; accepted: [] steps whose new cost passed the <T, M> check."""

    plan: Array
    f: Array
    g: Array
    column_error: Array
    last_change: Array
    accepted: Array


def cpot(task, g: Graphs, c: Cost, anchors: Array, s: Settings,
         host: HostProducts | None = None) -> Solve:
    """PARROT's constrained proximal point (step 6) on the cost ``c`` (``host``: optional
    ``HostProducts``, static).

    Raises:
      TypeError / ValueError naming ``s`` (a field), ``g``, ``c`` or ``anchors``.
    """
    check_settings(s, "s")
    _check_graphs(task, g)
    if not isinstance(c, Cost):
        raise TypeError(f"`c` must be a Cost (parrot_official.cost), got {type(c).__name__}.")
    n1, n2 = tasks.plan_shape(task)
    validation.check_shape("c.cross", c.cross, (n1, n2))
    lam = epsilon(s)
    c1 = _with_data(g.row1, c.intra1)
    c2 = _with_data(g.row2, c.intra2)
    sq1 = jax.ops.segment_sum(c.intra1 ** 2, jnp.asarray(g.edges1[:, 0]), n1) / n1
    sq2 = jax.ops.segment_sum(c.intra2 ** 2, jnp.asarray(g.edges2[:, 0]), n2) / n2
    k_const = 0.5 * (sq1[:, None] + sq2[None, :])
    log_h = jnp.where(anchor_mask(task, anchors), jnp.log1p(1.0 / n2), -jnp.log(float(n2)))
    lin = c.cross - s.lambda_a * log_h
    le = s.lambda_e * n1 * n2

    def modified_cost(t):
        if host is not None:
            nb, gw = host.both(t, c.intra1, c.intra2)
        else:
            nb, gw = parrot.bilinear(g.row1, t, g.row2), parrot.bilinear(c1, t, c2)
        cgw = k_const - gw
        return lin - s.lambda_n * jnp.log(jnp.maximum(nb, _TINY)) + le * cgw

    def outer(i, v):
        t, m_prev, f, gg, _, acc = v
        m = modified_cost(t)
        # <T, M> <= <T, M_prev> as one sum of T (M - M_prev): in float32 the difference of
        # two separate sums of n1 n2 terms is rounding noise when the costs are close
        keep = (i == 0) | (jnp.sum(t * (m - m_prev)) <= 0.0)
        m = jnp.where(keep, m, m_prev)
        q = m - s.lambda_p * jnp.log(jnp.maximum(t, _TINY))

        def sweep(_, fg):
            f, gg = fg
            gg = -lam * (jax.nn.logsumexp((f[:, None] - q) / lam, axis=0) - jnp.log(float(n1)))
            f = -lam * (jax.nn.logsumexp((gg[None, :] - q) / lam, axis=1) - jnp.log(float(n2)))
            return f, gg

        f, gg = jax.lax.fori_loop(0, s.inner_iters, sweep, (f, gg))
        new = s.mix * t + (1.0 - s.mix) * jnp.exp((f[:, None] + gg[None, :] - q) / lam) / (
            n1 * n2)
        return new, m, f, gg, jnp.sum(jnp.abs(new - t)), acc + keep.astype(jnp.int32)

    t0 = jnp.full((n1, n2), 1.0 / (n1 * n2), jnp.float32)
    f0 = jnp.zeros(n1, jnp.float32)
    g0 = jnp.full(n2, 1.0 / n2, jnp.float32)
    t, _, f, gg, change, acc = jax.lax.fori_loop(
        0, s.outer_iters, outer, (t0, jnp.zeros_like(t0), f0, g0, jnp.float32(0.0),
                                  jnp.int32(0)))
    col = jnp.sum(jnp.abs(t.sum(0) - 1.0 / n2))
    return Solve(t, f, gg, col, change, acc)
