"""Alignment tasks with a known ground-truth matching (built on the host, then arrays).

Every task carries, for both domains, "positional" matrices ``pos[i, k]`` that relate node
i to a potential anchor k of the same domain: random-walk-with-restart scores for graphs,
distances for point clouds (invariant to rigid motions), cosine similarities for
embeddings (relative representations). Once anchor k is matched to truth[k], column k of
``pos1`` and column truth[k] of ``pos2`` become comparable coordinates.

Checks (eager, host-side builders): sizes are integers (``num_nodes`` >= 4 for the Holme-Kim
graph, ``num_points`` / ``num_items`` / ``num_clusters`` / ``latent_dim`` >= 1, ``feat_dim``
>= 0, ``dims`` >= 1), noise levels are finite and >= 0 (``edge_noise`` in [0, 1)), ``name``
is a known real graph; ``task_from_adjacency``: ``adj2`` [n, n] and ``truth`` [n].
Real benchmarks (ACM-DBLP, Foursquare-Twitter) are in ``datasets``.
"""

from typing import NamedTuple

import networkx as nx
import numpy as np
import scipy.sparse
import scipy.sparse.csgraph

from jaxlab.core import validation


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


def _check_non_negative_int(name, value):
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 0:
        raise ValueError(f"`{name}` must be a non-negative integer, got {value!r}.")


def rwr_matrix(adj: np.ndarray, restart: float = 0.2) -> np.ndarray:
    """R[:, k] = random walk with restart probability ``restart`` from node k (n * scores)."""
    deg = adj.sum(0)
    w = adj / np.maximum(deg, 1e-12)[None, :]
    n = adj.shape[0]
    return n * restart * np.linalg.solve(np.eye(n) - (1.0 - restart) * w, np.eye(n))


def sym_norm_laplacian(adj: np.ndarray) -> np.ndarray:
    """I - D^-1/2 A D^-1/2 (isolated nodes: their D^-1/2 is set to 0), as in AvAtar's code."""
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


def _betweenness(adj: np.ndarray) -> np.ndarray:
    """Betweenness centrality (exact up to 300 nodes, else estimated from 300 seeded pivots)."""
    g = nx.from_numpy_array(adj)
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
    """
    n = adj1.shape[0]
    validation.check_shape("adj2", adj2, (n, n))
    validation.check_shape("truth", truth, (n,))
    feat1 = np.asarray(feat1, np.float64).reshape(n, -1)
    feat2 = np.asarray(feat2, np.float64).reshape(n, -1)
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


def graph_pair(g: nx.Graph, seed: int = 0, edge_noise: float = 0.1, feat_dim: int = 8,
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


def synthetic_graph_pair(num_nodes: int = 200, seed: int = 0, edge_noise: float = 0.1,
                         feat_dim: int = 8, feat_noise: float = 1.0) -> AlignmentTask:
    """Power-law cluster graph (Holme-Kim, m=3, p=0.3) aligned with its noisy permuted copy."""
    validation.check_min_count("num_nodes", num_nodes, 4,
                               "the Holme-Kim graph attaches 3 edges per new node")
    g = nx.powerlaw_cluster_graph(num_nodes, 3, 0.3, seed=seed)
    return graph_pair(g, seed, edge_noise, feat_dim, feat_noise)


REAL_GRAPHS = {
    "karate": nx.karate_club_graph,
    "les_miserables": nx.les_miserables_graph,
    "florentine": nx.florentine_families_graph,
}


def real_graph_pair(name: str = "les_miserables", seed: int = 0, edge_noise: float = 0.1,
                    feat_dim: int = 8, feat_noise: float = 1.0) -> AlignmentTask:
    """A real small graph shipped with networkx, aligned with its noisy permuted copy."""
    if name not in REAL_GRAPHS:
        raise ValueError(f"`name` must be one of {sorted(REAL_GRAPHS)}, got {name!r}.")
    return graph_pair(REAL_GRAPHS[name](), seed, edge_noise, feat_dim, feat_noise)


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


def point_cloud_pair(num_points: int = 150, seed: int = 0, noise: float = 0.02,
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


def embedding_pair(num_items: int = 200, seed: int = 0, latent_dim: int = 8,
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
