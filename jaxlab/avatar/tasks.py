"""Alignment tasks with a known ground-truth matching (built on the host, then arrays).

Every task carries, for both domains, "positional" matrices ``pos[i, k]`` that relate node
i to a potential anchor k of the same domain: random-walk-with-restart scores for graphs,
distances for point clouds (invariant to rigid motions), cosine similarities for
embeddings (relative representations). Once anchor k is matched to truth[k], column k of
``pos1`` and column truth[k] of ``pos2`` become comparable coordinates.

Checks (eager, host-side builders): sizes are integers (``num_nodes`` >= 4 for the Holme-Kim
graph, ``num_points`` / ``num_items`` / ``num_clusters`` / ``latent_dim`` >= 1, ``feat_dim``
>= 0, ``dims`` >= 1), noise levels are finite and >= 0 (``edge_noise`` in [0, 1)), ``name``
is a known real graph; ``task_from_adjacency``: ``adj2`` [n, n] and ``truth`` [n];
``rwr_matrix`` / ``sym_norm_adjacency`` / ``sym_norm_laplacian``: ``adj`` square, finite,
non-negative (``rwr_matrix``: ``restart`` in (0, 1)); ``to_bcoo``: ``m`` 2-D and finite;
the task helpers (``is_graph_task``, ``num_pairs``, ...): ``task`` an ``AlignmentTask`` or
a ``GraphTask`` (TypeError), ``as_graph_task``: an ``AlignmentTask``.
Real benchmarks (ACM-DBLP, Foursquare-Twitter) are in ``datasets``.

Whole graphs (``GraphTask``, ours; built by ``graph_task`` / ``datasets.full_task``): the
tasks above are square (n nodes per side, ``truth`` a permutation) and hold dense [n, n]
arrays (``rwr_matrix`` is a dense linear solve, O(n^3)). A ``GraphTask`` holds two graphs
of n1 and n2 nodes and k one-to-one ground-truth pairs (src[p], tgt[p]) (not every node has
a partner), with nothing n x n in it: the symmetric-normalised adjacencies
D^-1/2 A D^-1/2 (= I - L, the ``lap`` of the square tasks) as ``jax.experimental.sparse``
BCOO float32, and the RWR position features only for the k potential anchors (columns in
pair order: ``pos1[:, p]`` from src[p], ``pos2[:, p]`` from tgt[p]), computed by
``rwr_columns`` (a sparse LU of the same linear system as ``rwr_matrix``, solved for those
columns only). The active loop's anchor and test masks are then over the k pairs; on a
square task the pairs are (i, truth[i]) in source order, so every mask over source nodes
is a mask over pairs (``num_pairs``, ``pair_nodes``, ``anchor_positions``,
``norm_adjacencies`` give the loop and the aligners one view of both kinds).
``as_graph_task`` turns a square task into a ``GraphTask`` (the sparse path on the same
numbers; the tests compare the two). Not held by a ``GraphTask``: ``struct1`` / ``struct2``
(all-pairs shortest paths, n x n), so FGW is not defined on it.
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import scipy.sparse
import scipy.sparse.csgraph
import scipy.sparse.linalg
from jax.experimental import sparse as jsparse

from jaxlab.core import extras, validation

__all__ = ["AlignmentTask", "GraphTask", "is_graph_task", "num_pairs", "plan_shape", "pair_nodes",
    "anchor_positions", "norm_adjacencies", "graph_task", "as_graph_task", "rwr_matrix",
    "rwr_columns", "sym_norm_adjacency", "to_bcoo", "sym_norm_laplacian", "task_from_adjacency",
    "graph_pair", "synthetic_graph_pair", "REAL_GRAPHS", "real_graph_pair", "point_cloud_pair",
    "embedding_pair"]

nx = extras.require("networkx")


class AlignmentTask(NamedTuple):
    """Arrays of one alignment problem (n nodes per side, node i <-> truth[i]).

    Attributes:
      feat1, feat2: [n, p] directly comparable node features (zeros if there are none).
      pos1, pos2: [n, n] positional matrices w.r.t. every potential anchor.
      struct1, struct2: [n, n] intra-domain costs (shortest paths or distances) for FGW.
      lap1, lap2: [n, n] symmetric-normalised graph Laplacians I - D^-1/2 A D^-1/2 (of kNN
        graphs for point sets), as AvAtar's consistency utility uses.
      truth: [n] int32, the match of source node i in the target.
      degree: [n] source degrees; betweenness: [n] source betweenness centrality.
    """

    feat1: np.ndarray
    feat2: np.ndarray
    pos1: np.ndarray
    pos2: np.ndarray
    struct1: np.ndarray
    struct2: np.ndarray
    lap1: np.ndarray
    lap2: np.ndarray
    truth: np.ndarray
    degree: np.ndarray
    betweenness: np.ndarray

    @property
    def num_nodes(self) -> int:
        return self.truth.shape[0]


class GraphTask(NamedTuple):
    """Arrays of an alignment problem on two whole graphs, nothing n x n (module docstring).

    n1 / n2 nodes, k ground-truth pairs src[p] <-> tgt[p]; the plan is [n1, n2].

    Attributes:
      feat1: [n1, p], feat2: [n2, p] node attributes (p = 0 when there are none).
      pos1: [n1, k] RWR scores from each pair's source node (column p: from src[p]).
      pos2: [n2, k] RWR scores from each pair's target node (column p: from tgt[p]).
      adj1: [n1, n1], adj2: [n2, n2] BCOO float32 symmetric-normalised adjacencies
        D^-1/2 A D^-1/2 (= I - L, L the ``lap`` of an AlignmentTask).
      src, tgt: [k] int32 ground-truth pairs (one-to-one).
      degree: [n1] source degrees; betweenness: [n1] source betweenness centrality
        (estimated from 300 seeded pivots above 300 nodes).
    """

    feat1: np.ndarray
    feat2: np.ndarray
    pos1: np.ndarray
    pos2: np.ndarray
    adj1: jsparse.BCOO
    adj2: jsparse.BCOO
    src: np.ndarray
    tgt: np.ndarray
    degree: np.ndarray
    betweenness: np.ndarray


def _check_task_type(task) -> None:
    """TypeError unless ``task`` is an ``AlignmentTask`` or a ``GraphTask``."""
    if not isinstance(task, AlignmentTask | GraphTask):
        hint = (" (datasets.task(pair) makes one from a NetworkPair)"
                if type(task).__name__ == "NetworkPair" else "")
        raise TypeError(f"`task` must be a tasks.AlignmentTask or tasks.GraphTask, got "
                        f"{type(task).__name__}{hint}.")


def is_graph_task(task) -> bool:
    """True for a ``GraphTask`` (sparse, pairs), False for a square ``AlignmentTask``.

    Raises:
      TypeError: ``task`` is neither (e.g. a ``datasets.NetworkPair``); so are the other
        task helpers below (``num_pairs``, ``plan_shape``, ``pair_nodes``,
        ``anchor_positions``, ``norm_adjacencies``).
    """
    _check_task_type(task)
    return isinstance(task, GraphTask)


def num_pairs(task) -> int:
    """k, the ground-truth pairs (the length of the loop's masks); n for a square task."""
    return np.shape(task.src if is_graph_task(task) else task.truth)[-1]


def plan_shape(task) -> tuple[int, int]:
    """(n1, n2), the shape of the task's plans."""
    if is_graph_task(task):
        return task.adj1.shape[0], task.adj2.shape[0]
    n = np.shape(task.truth)[-1]
    return n, n


def pair_nodes(task):
    """([k] source nodes, [k] target nodes) of the pairs: (arange(n), truth) on a square
    task, (src, tgt) on a ``GraphTask`` (jnp int arrays)."""
    if is_graph_task(task):
        return jnp.asarray(task.src), jnp.asarray(task.tgt)
    return jnp.arange(np.shape(task.truth)[-1]), jnp.asarray(task.truth)


def anchor_positions(task):
    """([n1, k], [n2, k]) float32 position features in pair order: column p relates every
    node to pair p's source / target node (square task: pos1 and pos2[:, truth])."""
    if is_graph_task(task):
        return jnp.asarray(task.pos1, jnp.float32), jnp.asarray(task.pos2, jnp.float32)
    return (jnp.asarray(task.pos1, jnp.float32),
            jnp.asarray(task.pos2, jnp.float32)[:, jnp.asarray(task.truth)])


def norm_adjacencies(task):
    """(W1, W2) symmetric-normalised adjacencies: dense float32 I - lap on a square task,
    the BCOO ``adj1`` / ``adj2`` of a ``GraphTask``."""
    if is_graph_task(task):
        return task.adj1, task.adj2

    def dense(lap):
        lap = jnp.asarray(lap, jnp.float32)
        return jnp.eye(lap.shape[0], dtype=lap.dtype) - lap

    return dense(task.lap1), dense(task.lap2)


def graph_task(adj1, adj2, feat1, feat2, pairs, restart: float = 0.2,
               dtype=np.float32) -> GraphTask:
    """A ``GraphTask`` from two sparse adjacencies and ground-truth pairs (host-side).

    Args:
      adj1: [n1, n1], adj2: [n2, n2] symmetric adjacencies (scipy.sparse or dense).
      feat1: [n1, p], feat2: [n2, p] node attributes (p may be 0).
      pairs: [k, 2] ints, (graph 1 node, graph 2 node), one-to-one.
      restart: RWR restart probability of the position features (as ``rwr_matrix``).
      dtype: dtype of the position features (float32: what the aligners read).

    Raises:
      ValueError: a non-square, non-symmetric, negative or non-finite adjacency, ``feat``
        not [n1, p] / [n2, p] or not finite, ``pairs`` not [k, 2] ints in range or not
        one-to-one.
    """
    adj1 = scipy.sparse.csr_matrix(adj1, dtype=np.float64)
    adj2 = scipy.sparse.csr_matrix(adj2, dtype=np.float64)
    n1, n2 = adj1.shape[0], adj2.shape[0]
    validation.check_shape("adj1", adj1, (n1, n1))
    validation.check_shape("adj2", adj2, (n2, n2))
    for name, a in (("adj1", adj1), ("adj2", adj2)):
        _check_adjacency(name, a)
    feat1, feat2 = _check_features(feat1, feat2, n1, n2)
    pairs = np.asarray(pairs)
    validation.check_shape("pairs", pairs, (None, 2))
    validation.check_int_range("pairs[:, 0]", pairs[:, 0], 0, n1)
    validation.check_int_range("pairs[:, 1]", pairs[:, 1], 0, n2)
    k = pairs.shape[0]
    if len(np.unique(pairs[:, 0])) != k or len(np.unique(pairs[:, 1])) != k:
        raise ValueError("`pairs` must be one-to-one (a node in at most one pair).")
    return GraphTask(
        feat1=feat1, feat2=feat2,
        pos1=rwr_columns(adj1, pairs[:, 0], restart, dtype=dtype),
        pos2=rwr_columns(adj2, pairs[:, 1], restart, dtype=dtype),
        adj1=to_bcoo(sym_norm_adjacency(adj1)), adj2=to_bcoo(sym_norm_adjacency(adj2)),
        src=pairs[:, 0].astype(np.int32), tgt=pairs[:, 1].astype(np.int32),
        degree=np.asarray(adj1.sum(1)).ravel(), betweenness=_betweenness(adj1))


def _check_adjacency(name: str, a) -> None:
    """ValueError unless the adjacency (scipy.sparse or dense, square) is finite,
    non-negative and symmetric."""
    a = scipy.sparse.csr_matrix(a, dtype=np.float64)
    if not np.all(np.isfinite(a.data)) or np.any(a.data < 0):
        raise ValueError(f"`{name}` must have finite, non-negative entries.")
    if a.nnz and abs(a - a.T).max() > 1e-12 * max(1.0, abs(a).max()):
        raise ValueError(f"`{name}` must be symmetric (an undirected graph).")


def _check_features(feat1, feat2, n1: int, n2: int) -> tuple[np.ndarray, np.ndarray]:
    """``feat1`` [n1, p] and ``feat2`` [n2, p], finite; returned as float64 arrays."""
    feat1, feat2 = np.asarray(feat1, np.float64), np.asarray(feat2, np.float64)
    validation.check_shape("feat1", feat1, (n1, None))
    validation.check_shape("feat2", feat2, (n2, feat1.shape[1]))
    validation.check_finite("feat1", feat1)
    validation.check_finite("feat2", feat2)
    return feat1, feat2


def as_graph_task(task: AlignmentTask) -> GraphTask:
    """The square ``task`` as a ``GraphTask`` with the same numbers: pairs (i, truth[i]),
    positions pos1 / pos2[:, truth], BCOO adjacencies I - lap (the sparse path of the
    aligners on a small task, e.g. to compare it with the dense one).

    Raises:
      TypeError: ``task`` is not an ``AlignmentTask`` (e.g. already a ``GraphTask``).
    """
    if not isinstance(task, AlignmentTask):
        raise TypeError(f"`task` must be a square tasks.AlignmentTask, got "
                        f"{type(task).__name__}.")
    n = task.num_nodes
    truth = np.asarray(task.truth, np.int32)

    def adj(lap):
        return to_bcoo(np.eye(n) - np.asarray(lap, np.float64))

    return GraphTask(feat1=task.feat1, feat2=task.feat2, pos1=task.pos1,
                     pos2=np.asarray(task.pos2)[:, truth], adj1=adj(task.lap1),
                     adj2=adj(task.lap2), src=np.arange(n, dtype=np.int32), tgt=truth,
                     degree=task.degree, betweenness=task.betweenness)


def _check_non_negative_int(name, value):
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 0:
        raise ValueError(f"`{name}` must be a non-negative integer, got {value!r}.")


def _check_weights(name: str, adj) -> None:
    """``adj`` (dense or scipy.sparse) square with finite, non-negative entries."""
    shape = np.shape(adj) if not scipy.sparse.issparse(adj) else adj.shape
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ValueError(f"`{name}` must be a square [n, n] adjacency, got shape "
                         f"{tuple(shape)}.")
    data = adj.data if scipy.sparse.issparse(adj) else np.asarray(adj)
    validation.check_real(name, data, allow_bool=True)
    if not np.all(np.isfinite(data)) or np.any(data < 0):
        raise ValueError(f"`{name}` must have finite, non-negative entries, got "
                         f"{int((~np.isfinite(data)).sum())} non-finite and "
                         f"{int((data < 0).sum())} negative.")


def rwr_matrix(adj: np.ndarray, restart: float = 0.2) -> np.ndarray:
    """R[:, k] = random walk with restart probability ``restart`` from node k (n * scores).

    Args:
      adj: [n, n] dense adjacency, finite and non-negative.
      restart: restart probability in (0, 1).

    Raises:
      ValueError: ``adj`` not square, not finite or negative; ``restart`` outside (0, 1).
    """
    _check_weights("adj", adj)
    validation.check_in_range("restart", restart, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    deg = adj.sum(0)
    w = adj / np.maximum(deg, 1e-12)[None, :]
    n = adj.shape[0]
    return n * restart * np.linalg.solve(np.eye(n) - (1.0 - restart) * w, np.eye(n))


def rwr_columns(adj, cols, restart: float = 0.2, block: int = 512,
                dtype=np.float64) -> np.ndarray:
    """[n, len(cols)] the columns ``cols`` of ``rwr_matrix(adj, restart)``, without n x n.

    The same system (I - (1 - restart) A D^-1) X = E as ``rwr_matrix`` (D: column sums of
    A, isolated nodes: zero columns), factorised once by a sparse LU
    (``scipy.sparse.linalg.splu``) and solved for the unit vectors of ``cols`` in blocks of
    ``block`` columns (memory O(n block) besides the factors and the output).

    Args:
      adj: [n, n] symmetric adjacency (scipy.sparse or dense).
      cols: [k] node indices (the potential anchors).
      restart: restart probability in (0, 1).
      block: right-hand sides per solve (positive int).
      dtype: dtype of the output (the solve is float64).

    Raises:
      ValueError: ``adj`` not square, ``cols`` not 1-D ints in [0, n), ``restart`` outside
        (0, 1), ``block`` not a positive int.
    """
    adj = scipy.sparse.csc_matrix(adj, dtype=np.float64)
    n = adj.shape[0]
    validation.check_shape("adj", adj, (n, n))
    cols = np.asarray(cols)
    validation.check_ndim("cols", cols, 1)
    validation.check_int_range("cols", cols, 0, n)
    validation.check_in_range("restart", restart, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    validation.check_positive_int("block", block)
    deg = np.asarray(adj.sum(0)).ravel()
    walk = adj @ scipy.sparse.diags(1.0 / np.maximum(deg, 1e-12))
    lu = scipy.sparse.linalg.splu((scipy.sparse.eye(n) - (1.0 - restart) * walk).tocsc())
    out = np.empty((n, len(cols)), dtype)
    for lo in range(0, len(cols), block):
        part = cols[lo:lo + block]
        rhs = np.zeros((n, len(part)))
        rhs[part, np.arange(len(part))] = 1.0
        out[:, lo:lo + len(part)] = n * restart * lu.solve(rhs)
    return out


def sym_norm_adjacency(adj) -> scipy.sparse.csr_matrix:
    """D^-1/2 A D^-1/2 as CSR float64 (= I - ``sym_norm_laplacian``; isolated nodes: 0).

    Raises:
      ValueError: ``adj`` not square, not finite or negative.
    """
    _check_weights("adj", adj)
    adj = scipy.sparse.csr_matrix(adj, dtype=np.float64)
    deg = np.asarray(adj.sum(1)).ravel()
    d = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-300)), 0.0)
    return scipy.sparse.csr_matrix(scipy.sparse.diags(d) @ adj @ scipy.sparse.diags(d))


def to_bcoo(m) -> jsparse.BCOO:
    """A scipy.sparse / dense [n, m] matrix as a float32 BCOO (row-major sorted, explicit
    zeros dropped).

    Raises:
      ValueError: ``m`` not 2-D or not finite. TypeError: ``m`` not real.
    """
    if not scipy.sparse.issparse(m):
        validation.check_ndim("m", m, 2)
    validation.check_real("m", m.data if scipy.sparse.issparse(m) else np.asarray(m),
                          allow_bool=True)
    m = scipy.sparse.csr_matrix(m, dtype=np.float64)
    if not np.all(np.isfinite(m.data)):
        raise ValueError(f"`m` must be finite, got {int((~np.isfinite(m.data)).sum())} "
                         "non-finite stored entries.")
    m.eliminate_zeros()
    m.sort_indices()
    coo = m.tocoo()
    idx = np.stack([coo.row, coo.col], 1).astype(np.int32)
    return jsparse.BCOO((jnp.asarray(coo.data, jnp.float32), jnp.asarray(idx)),
                        shape=m.shape, indices_sorted=True, unique_indices=True)


def sym_norm_laplacian(adj: np.ndarray) -> np.ndarray:
    """I - D^-1/2 A D^-1/2 (isolated nodes: their D^-1/2 is set to 0), as in AvAtar's code.

    Raises:
      ValueError: ``adj`` not a square [n, n] array, not finite or negative.
    """
    _check_weights("adj", adj)
    deg = adj.sum(1)
    d = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-300)), 0.0)
    return np.eye(adj.shape[0]) - d[:, None] * adj * d[None, :]


def _graph_arrays(adj: np.ndarray):
    """(normalised shortest-path lengths, unreachable = n, symmetric-normalised Laplacian)."""
    n = adj.shape[0]
    dist = scipy.sparse.csgraph.shortest_path(scipy.sparse.csr_matrix(adj), unweighted=True,
                                              directed=False)
    dist = np.where(np.isfinite(dist), dist, float(n))
    return dist / max(dist.max(), 1.0), sym_norm_laplacian(adj)


def _betweenness(adj) -> np.ndarray:
    """Betweenness centrality (exact up to 300 nodes, else estimated from 300 seeded pivots);
    ``adj`` dense or scipy.sparse."""
    g = nx.from_scipy_sparse_array(adj) if scipy.sparse.issparse(adj) else nx.from_numpy_array(adj)
    n = adj.shape[0]
    bc = nx.betweenness_centrality(g, k=None if n <= 300 else 300, seed=0)
    return np.array([bc[i] for i in range(n)])


def task_from_adjacency(adj1: np.ndarray, adj2: np.ndarray, feat1: np.ndarray,
                        feat2: np.ndarray, truth: np.ndarray) -> AlignmentTask:
    """An AlignmentTask from two dense [n, n] symmetric 0/1 adjacencies.

    Args:
      adj1, adj2: [n, n] adjacency of the source / target graph.
      feat1, feat2: [n, p] node features (p may be 0).
      truth: [n] permutation, source node i <-> target node truth[i].

    Raises:
      ValueError / TypeError: as ``graph_task``: a non-square, non-symmetric, negative or
        non-finite adjacency, ``feat`` not [n, p] or not finite, ``truth`` not an integer
        permutation of [0, n).
    """
    adj1, adj2 = np.asarray(adj1, np.float64), np.asarray(adj2, np.float64)
    validation.check_ndim("adj1", adj1, 2)
    n = adj1.shape[0]
    validation.check_shape("adj1", adj1, (n, n))
    validation.check_shape("adj2", adj2, (n, n))
    _check_adjacency("adj1", adj1)
    _check_adjacency("adj2", adj2)
    feat1, feat2 = _check_features(feat1, feat2, n, n)
    validation.check_shape("truth", truth, (n,))
    validation.check_int_range("truth", np.asarray(truth), 0, n)
    if len(np.unique(np.asarray(truth))) != n:
        raise ValueError("`truth` must be a permutation of [0, n) (one-to-one).")
    dist1, lap1 = _graph_arrays(adj1)
    dist2, lap2 = _graph_arrays(adj2)
    return AlignmentTask(
        feat1=feat1, feat2=feat2, pos1=rwr_matrix(adj1), pos2=rwr_matrix(adj2),
        struct1=dist1, struct2=dist2, lap1=lap1, lap2=lap2,
        truth=np.asarray(truth, np.int32), degree=adj1.sum(1), betweenness=_betweenness(adj1))


def _perturbed_copy(g: nx.Graph, perm: np.ndarray, edge_noise: float, rng) -> nx.Graph:
    """Relabel node i -> perm[i], then swap a fraction ``edge_noise`` of the edges."""
    h = nx.relabel_nodes(g, {i: int(perm[i]) for i in g.nodes})
    edges = list(h.edges)
    k = int(round(edge_noise * len(edges)))
    for idx in rng.choice(len(edges), size=k, replace=False):
        h.remove_edge(*edges[idx])
    n = h.number_of_nodes()
    added = 0
    while added < k:
        u, v = rng.integers(n, size=2)
        if u != v and not h.has_edge(u, v):
            h.add_edge(int(u), int(v))
            added += 1
    return h


def graph_pair(g: nx.Graph, *, seed: int = 0, edge_noise: float = 0.1, feat_dim: int = 8,
               feat_noise: float = 1.0) -> AlignmentTask:
    """A noisy permuted copy of graph ``g`` with noisy node features.

    Args:
      g: source graph with nodes 0..n-1 (made connected by the caller if needed).
      seed: randomness of the permutation, edge swaps and features.
      edge_noise: fraction of edges removed and the same number added at random, in [0, 1).
      feat_dim: node feature dimension (0 for none).
      feat_noise: std of the Gaussian noise added to the target features.
    """
    validation.check_in_range("edge_noise", edge_noise, 0.0, 1.0, high_inclusive=False)
    validation.check_in_range("feat_noise", feat_noise, 0.0, np.inf)
    _check_non_negative_int("feat_dim", feat_dim)
    g = nx.convert_node_labels_to_integers(g)
    n = g.number_of_nodes()
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    h = _perturbed_copy(g, perm, edge_noise, rng)
    f1 = rng.normal(size=(n, feat_dim))
    f2 = np.zeros_like(f1)
    f2[perm] = f1 + feat_noise * rng.normal(size=f1.shape)
    return task_from_adjacency(nx.to_numpy_array(g, nodelist=range(n)),
                               nx.to_numpy_array(h, nodelist=range(n)), f1, f2, perm)


def synthetic_graph_pair(num_nodes: int = 200, *, seed: int = 0, edge_noise: float = 0.1,
                         feat_dim: int = 8, feat_noise: float = 1.0) -> AlignmentTask:
    """Power-law cluster graph (Holme-Kim, m=3, p=0.3) aligned with its noisy permuted copy."""
    validation.check_min_count("num_nodes", num_nodes, 4,
                               "the Holme-Kim graph attaches 3 edges per new node")
    g = nx.powerlaw_cluster_graph(num_nodes, 3, 0.3, seed=seed)
    return graph_pair(g, seed=seed, edge_noise=edge_noise, feat_dim=feat_dim,
                      feat_noise=feat_noise)


REAL_GRAPHS = {
    "karate": nx.karate_club_graph,
    "les_miserables": nx.les_miserables_graph,
    "florentine": nx.florentine_families_graph,
}


def real_graph_pair(name: str = "les_miserables", *, seed: int = 0, edge_noise: float = 0.1,
                    feat_dim: int = 8, feat_noise: float = 1.0) -> AlignmentTask:
    """A real small graph shipped with networkx, aligned with its noisy permuted copy."""
    if name not in REAL_GRAPHS:
        raise ValueError(f"`name` must be one of {sorted(REAL_GRAPHS)}, got {name!r}.")
    return graph_pair(REAL_GRAPHS[name](), seed=seed, edge_noise=edge_noise, feat_dim=feat_dim,
                      feat_noise=feat_noise)


def _knn_arrays(x: np.ndarray, k: int = 6):
    d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    n = x.shape[0]
    nn = np.argsort(d, axis=1)[:, 1:k + 1]
    adj = np.zeros((n, n))
    adj[np.repeat(np.arange(n), k), nn.ravel()] = 1.0
    adj = np.maximum(adj, adj.T)
    return d, adj, sym_norm_laplacian(adj)


def _static_scores(adj):
    g = nx.from_numpy_array(adj)
    bc = nx.betweenness_centrality(g)
    return adj.sum(1), np.array([bc[i] for i in range(adj.shape[0])])


def point_cloud_pair(num_points: int = 150, *, seed: int = 0, noise: float = 0.02,
                     nonrigid: float = 0.0) -> AlignmentTask:
    """Registration of a noisy torus-knot point set under a random rigid motion.

    Args:
      num_points: n points.
      seed: randomness.
      noise: Gaussian jitter of the target points.
      nonrigid: amplitude of a smooth sinusoidal warp applied after the rigid motion.
    """
    validation.check_min_count("num_points", num_points, 8, "the kNN graphs use 6 neighbours")
    validation.check_in_range("noise", noise, 0.0, np.inf)
    validation.check_in_range("nonrigid", nonrigid, 0.0, np.inf)
    rng = np.random.default_rng(seed)
    s = rng.uniform(0, 2 * np.pi, num_points)
    x = np.stack([(2 + np.cos(3 * s)) * np.cos(2 * s), (2 + np.cos(3 * s)) * np.sin(2 * s),
                  np.sin(3 * s)], 1) / 3.0
    x += 0.03 * rng.normal(size=x.shape)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    y = x @ q.T + rng.normal(size=3) + noise * rng.normal(size=x.shape)
    y = y + nonrigid * np.sin(2.0 * y[:, [1, 2, 0]])
    perm = rng.permutation(num_points)
    y_perm = np.zeros_like(y)
    y_perm[perm] = y
    d1, adj1, lap1 = _knn_arrays(x)
    d2, adj2, lap2 = _knn_arrays(y_perm)
    deg, bc = _static_scores(adj1)
    z = np.zeros((num_points, 1))
    return AlignmentTask(z, z, d1, d2, d1 / d1.max(), d2 / d2.max(), lap1, lap2,
                         perm.astype(np.int32), deg, bc)


def embedding_pair(num_items: int = 200, *, seed: int = 0, latent_dim: int = 8,
                   dims=(32, 24), noise: float = 0.3, num_clusters: int = 10) -> AlignmentTask:
    """Two "modalities" of the same items: linear and tanh-warped views of a latent code.

    Cross-modal coordinates are not comparable; anchors give relative representations
    (cosine similarity to the anchors, Moschella et al. 2023).
    """
    validation.check_min_count("num_items", num_items, 8, "the kNN graphs use 6 neighbours")
    validation.check_positive_int("latent_dim", latent_dim)
    validation.check_positive_int("num_clusters", num_clusters)
    for d in dims:
        validation.check_positive_int("dims", d)
    validation.check_in_range("noise", noise, 0.0, np.inf)
    rng = np.random.default_rng(seed)
    centres = 2.0 * rng.normal(size=(num_clusters, latent_dim))
    z = centres[rng.integers(num_clusters, size=num_items)] + rng.normal(
        size=(num_items, latent_dim))
    x = z @ rng.normal(size=(latent_dim, dims[0])) + noise * rng.normal(size=(num_items, dims[0]))
    y = np.tanh(z @ rng.normal(size=(latent_dim, dims[1])) / 3.0)
    y += noise * 0.3 * rng.normal(size=y.shape)
    perm = rng.permutation(num_items)
    y_perm = np.zeros_like(y)
    y_perm[perm] = y

    def cos(a):
        a = a - a.mean(0)
        a = a / np.linalg.norm(a, axis=1, keepdims=True)
        return a @ a.T

    d1, adj1, lap1 = _knn_arrays(x)
    d2, adj2, lap2 = _knn_arrays(y_perm)
    deg, bc = _static_scores(adj1)
    zf = np.zeros((num_items, 1))
    return AlignmentTask(zf, zf, cos(x), cos(y_perm), d1 / d1.max(), d2 / d2.max(), lap1, lap2,
                         perm.astype(np.int32), deg, bc)
