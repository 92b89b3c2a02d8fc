"""Synthetic validation graph pairs for choosing AvAtar score variants (never the benchmarks).

A pair is a graph of a family, a noisy permuted copy of it, and node attributes; each side
then loses a random share of its nodes (``drop``), so, as in ACM-DBLP and
Foursquare-Twitter, only part of each graph has a partner (the ground truth is the nodes
kept on both sides). Nodes left without an edge are removed (the whole-graph aligner
refuses isolated nodes).
"""

import networkx as nx
import numpy as np
import scipy.sparse as sp

from jaxlab.avatar import tasks

FAMILIES = ("barabasi_albert", "holme_kim", "watts_strogatz", "block_model")


def family_graph(family: str, num_nodes: int, seed: int) -> nx.Graph:
    """One graph of ``family`` (FAMILIES) with ``num_nodes`` nodes.

    Raises:
      ValueError: an unknown ``family``.
    """
    if family == "barabasi_albert":
        return nx.barabasi_albert_graph(num_nodes, 3, seed=seed)
    if family == "holme_kim":
        return nx.powerlaw_cluster_graph(num_nodes, 3, 0.3, seed=seed)
    if family == "watts_strogatz":
        return nx.connected_watts_strogatz_graph(num_nodes, 8, 0.1, seed=seed)
    if family == "block_model":
        sizes = [num_nodes // 8] * 8
        p = np.full((8, 8), 0.004) + np.eye(8) * 0.076
        return nx.stochastic_block_model(sizes, p.tolist(), seed=seed)
    raise ValueError(f"`family` must be one of {FAMILIES}, got {family!r}.")


def _keep_connected_nodes(adj: sp.csr_matrix, keep: np.ndarray) -> np.ndarray:
    sub = adj[keep][:, keep]
    return keep[np.asarray(sub.sum(1)).ravel() > 0]


def validation_pair(family: str, num_nodes: int, seed: int, *, edge_noise: float = 0.15,
                    feat_dim: int = 8, feat_noise: float = 1.0, drop: float = 0.2):
    """(adj1, adj2 [scipy csr], feat1, feat2, pairs [k, 2]) of one validation pair.

    Args:
      family: one of FAMILIES; num_nodes: nodes of the family graph; seed: every draw.
      edge_noise: share of the copy's edges moved to random places.
      feat_dim / feat_noise: Gaussian attributes, the copy's with this noise std.
      drop: share of each side's nodes removed (independently).
    """
    rng = np.random.default_rng(seed)
    g = nx.convert_node_labels_to_integers(family_graph(family, num_nodes, seed))
    n = g.number_of_nodes()
    a1 = nx.to_scipy_sparse_array(g, nodelist=range(n), format="csr").astype(np.float64)
    perm = rng.permutation(n)  # node i of graph 1 is node perm[i] of graph 2
    edges = np.array(g.edges)
    moved = rng.random(len(edges)) < edge_noise
    kept = edges[~moved]
    new = set()
    while len(new) < moved.sum():
        u, v = rng.integers(n, size=2)
        if u != v:
            new.add((min(u, v), max(u, v)))
    e2 = np.concatenate([kept, np.array(sorted(new), dtype=edges.dtype).reshape(-1, 2)])
    e2 = perm[e2]
    a2 = sp.coo_matrix((np.ones(len(e2)), (e2[:, 0], e2[:, 1])), shape=(n, n)).tocsr()
    a2 = ((a2 + a2.T) > 0).astype(np.float64)
    f1 = rng.normal(size=(n, feat_dim))
    f2 = np.zeros_like(f1)
    f2[perm] = f1 + feat_noise * rng.normal(size=f1.shape)
    keep1 = _keep_connected_nodes(a1, np.sort(rng.permutation(n)[: int(round((1 - drop) * n))]))
    keep2 = _keep_connected_nodes(a2, np.sort(rng.permutation(n)[: int(round((1 - drop) * n))]))
    where2 = np.full(n, -1)
    where2[keep2] = np.arange(len(keep2))
    src = np.arange(len(keep1))
    tgt = where2[perm[keep1]]
    pairs = np.stack([src[tgt >= 0], tgt[tgt >= 0]], 1)
    sub1 = sp.csr_matrix(a1[keep1][:, keep1])
    sub2 = sp.csr_matrix(a2[keep2][:, keep2])
    return sub1, sub2, f1[keep1], f2[keep2], pairs


def validation_task(family: str, num_nodes: int, seed: int, restart: float, **kwargs):
    """(GraphTask, adj1, adj2) of ``validation_pair`` with RWR restart ``restart``."""
    a1, a2, f1, f2, pairs = validation_pair(family, num_nodes, seed, **kwargs)
    return tasks.graph_task(a1, a2, f1, f2, pairs, restart), a1, a2
