"""Real network-alignment benchmarks (ACM-DBLP, Foursquare-Twitter) and their subsamples.

The files are the unmodified ``.mat`` copies of the FINAL repository (Zhang & Tong, KDD
2016) in ``<repo root>/../shared/data/network_alignment/`` (see its README.md). They are
read with ``scipy.io.loadmat``; adjacencies stay ``scipy.sparse`` (CSR), the MATLAB
1-based ``gnd`` indices become 0-based ``pairs[:, 0]`` (graph 1) / ``pairs[:, 1]``
(graph 2). The prior ``H`` shipped with the files is not used (it is not ground truth).

``subsample`` (ours) makes a CPU-sized ``AlignmentTask``: a snowball (breadth-first
search over graph 1, from a seeded random ground-truth node, restarting from another
random unvisited ground-truth node when a component is exhausted) collects the first
``num_nodes`` nodes *that have a ground-truth partner*; the task is the pair of induced
subgraphs on those nodes in graph 1 and their partners in graph 2, the target order
shuffled with the same seed (so ``truth`` is a random permutation). Both sides then have
the same n nodes and every node is anchorable, as the AvAtar protocol assumes (it queries
only ground-truth nodes). Isolated nodes of the induced subgraphs are kept.

``full_task`` (ours) is the whole pair as a ``tasks.GraphTask``: all n1 / n2 nodes, the k
ground-truth pairs, sparse normalised adjacencies and RWR position features from the pair
nodes only (no n x n array is built on the host; the plans of the aligners are [n1, n2]).
PARROT / AvAtar align the whole graphs the same way (anchors and test pairs are
ground-truth pairs); the square ``subsample`` tasks are our CPU-sized stand-ins.

Checks: ``name`` is a known dataset; the data folder exists (``FileNotFoundError`` naming
it); ``num_nodes`` is an int in [4, number of ground-truth pairs]; ``seed`` an int >= 0;
the loaded ``gnd`` indices lie in range (``ValueError`` naming the file).
"""

import functools
import os
from collections import deque
from typing import NamedTuple

import numpy as np
import scipy.io
import scipy.sparse as sp

from jaxlab.core import validation

# name -> (file, graph 1 key, graph 2 key, feature keys or None)
DATASETS = {
    "acm_dblp": ("ACM-DBLP.mat", "ACM", "DBLP", ("ACM_node_feat", "DBLP_node_feat")),
    "foursquare_twitter": ("foursquare-twitter.mat", "foursquare", "twitter", None),
}
# name -> (n1, n2, ground-truth pairs, attribute columns): the data README's table (checked
# against the files by tests/avatar/test_datasets.py; read without loading by the configs).
SIZES = {"acm_dblp": (9872, 9916, 6325, 17), "foursquare_twitter": (5313, 5120, 1609, 0)}


def data_dir() -> str:
    """``<repo root>/../shared/data/network_alignment`` (resolved from this file, not cwd)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.normpath(os.path.join(root, "..", "shared", "data", "network_alignment"))


class NetworkPair(NamedTuple):
    """adj1: [n1, n1] CSR adjacency; adj2: [n2, n2]; feat1: [n1, p] / feat2: [n2, p] float
    node attributes (p = 0 when the dataset has none); pairs: [k, 2] int64 0-based ground
    truth (graph 1 node, graph 2 node)."""

    adj1: sp.csr_matrix
    adj2: sp.csr_matrix
    feat1: np.ndarray
    feat2: np.ndarray
    pairs: np.ndarray


@functools.cache
def load_pair(name: str) -> NetworkPair:
    """Loads dataset ``name`` (one of DATASETS) from ``data_dir()`` (cached)."""
    validation.check_one_of("name", name, tuple(DATASETS))
    folder = data_dir()
    fname, k1, k2, fk = DATASETS[name]
    path = os.path.join(folder, fname)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"network-alignment data not found: expected {fname} in "
                                f"{folder} (the shared data folder ../shared/data/"
                                "network_alignment relative to the repository root).")
    d = scipy.io.loadmat(path)
    adj1, adj2 = sp.csr_matrix(d[k1], dtype=np.float64), sp.csr_matrix(d[k2], dtype=np.float64)
    pairs = d["gnd"].astype(np.int64) - 1
    n1, n2 = adj1.shape[0], adj2.shape[0]
    if pairs.min() < 0 or pairs[:, 0].max() >= n1 or pairs[:, 1].max() >= n2:
        raise ValueError(f"{fname}: `gnd` indices out of range for graphs of {n1} / {n2} "
                         "nodes (expected 1-based, column 1 in graph 1).")
    if fk is None:
        f1, f2 = np.zeros((n1, 0)), np.zeros((n2, 0))
    else:
        f1, f2 = d[fk[0]].astype(np.float64), d[fk[1]].astype(np.float64)
    return NetworkPair(adj1, adj2, f1, f2, pairs)


def snowball(adj: sp.csr_matrix, allowed: np.ndarray, num_nodes: int,
             rng: np.random.Generator) -> np.ndarray:
    """[num_nodes] nodes with ``allowed`` True, in breadth-first order over ``adj`` from a
    random allowed start (restarting at a random unvisited allowed node when needed)."""
    n = adj.shape[0]
    seen = np.zeros(n, bool)
    out: list[int] = []
    pool = rng.permutation(np.flatnonzero(allowed))
    p = 0
    queue: deque[int] = deque()
    while len(out) < num_nodes:
        if not queue:
            while seen[pool[p]]:
                p += 1
            seen[pool[p]] = True
            queue.append(int(pool[p]))
        u = queue.popleft()
        if allowed[u]:
            out.append(u)
        nb = adj.indices[adj.indptr[u]:adj.indptr[u + 1]]
        for v in rng.permutation(nb):
            if not seen[v]:
                seen[v] = True
                queue.append(int(v))
    return np.asarray(out[:num_nodes])


def subsample(name: str, num_nodes: int, seed: int = 0):
    """A ``tasks.AlignmentTask`` on a snowball of ``num_nodes`` ground-truth nodes.

    Args:
      name: one of DATASETS.
      num_nodes: n, nodes per side (4 <= n <= number of ground-truth pairs).
      seed: randomness of the snowball start / order and of the target permutation.

    Returns:
      AlignmentTask with dense [n, n] arrays (features: the dataset's attributes, or none).
    """
    from jaxlab.avatar import tasks  # tasks imports nothing from here; avoid a cycle

    validation.check_positive_int("num_nodes", num_nodes)
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative integer, got {seed!r}.")
    data = load_pair(name)
    k = data.pairs.shape[0]
    validation.check_min_count("num_nodes", num_nodes, 4, "RWR / shortest paths need a graph")
    if num_nodes > k:
        raise ValueError(f"`num_nodes`={num_nodes} exceeds the {k} ground-truth pairs of "
                         f"{name!r}.")
    rng = np.random.default_rng(seed)
    partner = np.full(data.adj1.shape[0], -1)
    partner[data.pairs[:, 0]] = data.pairs[:, 1]
    src = snowball(data.adj1, partner >= 0, num_nodes, rng)
    perm = rng.permutation(num_nodes)  # source i -> target position perm[i]
    tgt = np.empty(num_nodes, np.int64)
    tgt[perm] = partner[src]
    a1 = data.adj1[src][:, src].toarray()
    a2 = data.adj2[tgt][:, tgt].toarray()
    return tasks.task_from_adjacency(a1, a2, data.feat1[src], data.feat2[tgt], perm)


def full_task(name: str, restart: float = 0.2):
    """The whole graph pair ``name`` as a ``tasks.GraphTask`` (nothing n x n built).

    Both graphs with all their nodes (n1 / n2, e.g. 9,872 / 9,916 for ACM-DBLP), the k
    ground-truth pairs in the file's order, sparse normalised adjacencies, RWR position
    features from the k pair nodes only (``tasks.rwr_columns``), the dataset's attributes.

    Args:
      name: one of DATASETS.
      restart: RWR restart probability of the position features.

    Returns:
      tasks.GraphTask (plans are [n1, n2]; the loop's masks are over the k pairs).
    """
    from jaxlab.avatar import tasks  # tasks imports nothing from here; avoid a cycle

    data = load_pair(name)
    return tasks.graph_task(data.adj1, data.adj2, data.feat1, data.feat2, data.pairs,
                            restart=restart)
