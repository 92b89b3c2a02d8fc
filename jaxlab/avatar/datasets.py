"""Network-alignment data: the shipped ACM-DBLP / Foursquare-Twitter pairs, your own graphs.

The two real benchmarks ship inside the package (``jaxlab/avatar/data/``: the unmodified
``.mat`` files of the FINAL repository, Zhang & Tong, KDD 2016; provenance and fields in
``jaxlab/avatar/data/README.md``). They are read with ``scipy.io.loadmat``; adjacencies
stay ``scipy.sparse`` (CSR), the MATLAB 1-based ``gnd`` indices become 0-based
``pairs[:, 0]`` (graph 1) / ``pairs[:, 1]`` (graph 2). The prior ``H`` shipped with the
files is not used (it is not ground truth). A folder named by the environment variable
``JAXLAB_DATA`` (holding the ``.mat`` files, directly or in ``network_alignment/``) is
searched before the shipped copies.

``load(source)`` (ours) returns a ``NetworkPair`` from a shipped name, a ``.mat`` file of
your own with the same layout (two adjacencies, ``gnd``, optional ``*_node_feat``), or two
graphs (networkx graphs or edge-list files) with a ground-truth file or array;
``task(pair)`` turns any ``NetworkPair`` into the whole-graph ``tasks.GraphTask`` that the
active loop runs on.

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

Checks: ``name`` is a known dataset; the data file exists (``FileNotFoundError`` naming
the folders searched); ``num_nodes`` is an int in [4, number of ground-truth pairs];
``seed`` an int >= 0; the loaded ``gnd`` indices lie in range (``ValueError`` naming the
file); ``read_mat``'s missing variables name the argument that asked for them
(``graph_keys``, ``truth_key``, ``feature_keys``); ``full_task`` / ``task``: ``restart`` in
(0, 1) before anything is read; ``snowball``: ``num_nodes`` at most the allowed nodes;
your own graphs and ground truth are checked as ``tasks.graph_task`` checks them.
"""

import functools
import os
from collections import deque
from typing import NamedTuple

import numpy as np
import scipy.io
import scipy.sparse as sp

from jaxlab.core import validation

__all__ = ["DATASETS", "SIZES", "ENV_VAR", "NetworkPair", "data_dir", "load", "load_pair",
    "read_mat", "from_graphs", "task", "snowball", "subsample", "full_task"]

# name -> (file, graph 1 key, graph 2 key, feature keys or None)
DATASETS = {
    "acm_dblp": ("ACM-DBLP.mat", "ACM", "DBLP", ("ACM_node_feat", "DBLP_node_feat")),
    "foursquare_twitter": ("foursquare-twitter.mat", "foursquare", "twitter", None),
}
# name -> (n1, n2, ground-truth pairs, attribute columns): the data README's table (checked
# against the files by tests/avatar/test_datasets.py; read without loading by the configs).
SIZES = {"acm_dblp": (9872, 9916, 6325, 17), "foursquare_twitter": (5313, 5120, 1609, 0)}


ENV_VAR = "JAXLAB_DATA"


def shipped_dir() -> str:
    """The folder of the copies shipped inside the package (``jaxlab/avatar/data``)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def data_dirs() -> list[str]:
    """The folders searched for a dataset file, in order: ``$JAXLAB_DATA``,
    ``$JAXLAB_DATA/network_alignment`` (when the variable is set), the shipped folder."""
    user = os.environ.get(ENV_VAR, "")
    extra = [user, os.path.join(user, "network_alignment")] if user else []
    return [*extra, shipped_dir()]


def data_dir() -> str:
    """The first folder of ``data_dirs()`` that exists."""
    return next((d for d in data_dirs() if os.path.isdir(d)), shipped_dir())


def data_path(fname: str) -> str:
    """The path of ``fname`` in the first of ``data_dirs()`` that holds it.

    Raises:
      FileNotFoundError: no searched folder holds ``fname`` (the message lists them).
    """
    for folder in data_dirs():
        path = os.path.join(folder, fname)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"network-alignment data not found: no {fname} in "
                            f"{', '.join(data_dirs())} (set {ENV_VAR} to a folder holding "
                            "it, or reinstall jaxlab: the package ships it).")


class NetworkPair(NamedTuple):
    """adj1: [n1, n1] CSR adjacency; adj2: [n2, n2]; feat1: [n1, p] / feat2: [n2, p] float
    node attributes (p = 0 when the dataset has none); pairs: [k, 2] int64 0-based ground
    truth (graph 1 node, graph 2 node)."""

    adj1: sp.csr_matrix
    adj2: sp.csr_matrix
    feat1: np.ndarray
    feat2: np.ndarray
    pairs: np.ndarray


def load_pair(name: str) -> NetworkPair:
    """Loads dataset ``name`` (one of DATASETS) from ``data_path`` (cached per file)."""
    validation.check_one_of("name", name, tuple(DATASETS))
    fname, k1, k2, fk = DATASETS[name]
    path = data_path(fname)
    st = os.stat(path)
    return _read_mat_cached(path, st.st_mtime_ns, st.st_size, (k1, k2), fk, "gnd")


@functools.lru_cache(maxsize=4)
def _read_mat_cached(path, mtime_ns, size, graph_keys, feature_keys, truth_key):
    del mtime_ns, size  # part of the cache key: an edited file is read again
    return read_mat(path, graph_keys, feature_keys, truth_key)


def _matrix_keys(d: dict) -> list[str]:
    return [k for k, v in d.items() if not k.startswith("__")
            and (sp.issparse(v) or (isinstance(v, np.ndarray) and v.ndim == 2))
            and v.shape[0] == v.shape[1] and v.shape[0] > 2]


def read_mat(path: str, graph_keys: tuple[str, str] | None = None,
             feature_keys: tuple[str, str] | None = None,
             truth_key: str = "gnd") -> NetworkPair:
    """A ``NetworkPair`` from a MATLAB ``.mat`` file laid out like the shipped ones.

    Args:
      path: the ``.mat`` file (``scipy.io.loadmat``).
      graph_keys: the two adjacency variables (graph 1, graph 2). None: the file's two
        square matrices other than ``truth_key`` and ``H`` (an error if not exactly two).
      feature_keys: the two [n, p] attribute variables. None: ``<graph key>_node_feat``
        when both exist, else no attributes (p = 0).
      truth_key: the [k, 2] ground truth, 1-based (MATLAB) indices, column 1 in graph 1.

    Raises:
      FileNotFoundError: no file at ``path``.
      ValueError: a missing variable, graph keys that cannot be inferred, ground-truth
        indices out of range, attribute rows that do not match the graph sizes.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"`path`: no .mat file at {path!r}.")
    d = scipy.io.loadmat(path)
    fname = os.path.basename(path)
    if graph_keys is None:
        keys = [k for k in _matrix_keys(d) if k not in (truth_key, "H")]
        if len(keys) != 2:
            raise ValueError(f"{fname}: cannot tell the two adjacency matrices apart among "
                             f"{keys}; pass `graph_keys=(graph1, graph2)`.")
        graph_keys = (keys[0], keys[1])
    for arg, keys in (("graph_keys", graph_keys), ("truth_key", (truth_key,)),
                      ("feature_keys", feature_keys or ())):
        for k in keys:
            if k not in d:
                raise ValueError(f"`{arg}`: {fname} has no variable {k!r}; it has "
                                 f"{sorted(x for x in d if not x.startswith('__'))}.")
    k1, k2 = graph_keys
    adj1, adj2 = sp.csr_matrix(d[k1], dtype=np.float64), sp.csr_matrix(d[k2], dtype=np.float64)
    pairs = np.asarray(d[truth_key]).astype(np.int64) - 1
    n1, n2 = adj1.shape[0], adj2.shape[0]
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise ValueError(f"{fname}: `{truth_key}` must be [k, 2], got {pairs.shape}.")
    if pairs.min() < 0 or pairs[:, 0].max() >= n1 or pairs[:, 1].max() >= n2:
        raise ValueError(f"{fname}: `{truth_key}` indices out of range for graphs of {n1} / "
                         f"{n2} nodes (expected 1-based, column 1 in graph 1).")
    if feature_keys is None and all(f"{k}_node_feat" in d for k in graph_keys):
        feature_keys = (f"{k1}_node_feat", f"{k2}_node_feat")
    if feature_keys is None:
        f1, f2 = np.zeros((n1, 0)), np.zeros((n2, 0))
    else:
        f1 = np.asarray(d[feature_keys[0]], np.float64)
        f2 = np.asarray(d[feature_keys[1]], np.float64)
        if f1.shape[0] != n1 or f2.shape[0] != n2 or f1.shape[1] != f2.shape[1]:
            raise ValueError(f"{fname}: attributes {f1.shape} / {f2.shape} do not match graphs "
                             f"of {n1} / {n2} nodes with one column count.")
    return NetworkPair(adj1, adj2, f1, f2, pairs)


def _as_graph(g, name: str):
    """(networkx graph, node order) from a graph or an edge-list file."""
    from jaxlab.avatar import tasks  # the networkx handle (the [ot] extra)

    nx = tasks.nx
    if isinstance(g, str | os.PathLike):
        if not os.path.isfile(g):
            raise FileNotFoundError(f"`{name}`: no edge-list file at {os.fspath(g)!r}.")
        try:
            graph = nx.read_edgelist(g, nodetype=int, data=False)
        except (TypeError, ValueError):
            graph = nx.read_edgelist(g, nodetype=str, data=False)
        return graph, sorted(graph.nodes)
    if not isinstance(g, nx.Graph):
        raise TypeError(f"`{name}` must be a networkx graph or an edge-list path, got "
                        f"{type(g).__name__}.")
    if g.is_directed():
        raise ValueError(f"`{name}` must be undirected (alignment reads symmetric "
                         "adjacencies); pass g.to_undirected().")
    return g, list(g.nodes)


def _read_truth(truth, labels1, labels2):
    """[k, 2] int64 positions from node labels (array-like or a two-column text file)."""
    if isinstance(truth, str | os.PathLike):
        if not os.path.isfile(truth):
            raise FileNotFoundError(f"`truth`: no file at {os.fspath(truth)!r}.")
        with open(truth) as f:
            rows = [ln.replace(",", " ").split() for ln in f
                    if ln.strip() and not ln.lstrip().startswith("#")]
        if any(len(r) != 2 for r in rows):
            raise ValueError(f"`truth`: {os.fspath(truth)} must hold two columns (graph 1 "
                             "node, graph 2 node) per line.")
        types1 = {type(x) for x in labels1} | {type(x) for x in labels2}
        cast = int if types1 <= {int} else str
        truth = [(cast(a), cast(b)) for a, b in rows]
    index1 = {v: i for i, v in enumerate(labels1)}
    index2 = {v: i for i, v in enumerate(labels2)}
    out = []
    for a, b in (tuple(r) for r in truth):
        a = a.item() if isinstance(a, np.generic) else a
        b = b.item() if isinstance(b, np.generic) else b
        if a not in index1 or b not in index2:
            raise ValueError(f"`truth` pair ({a!r}, {b!r}) names a node missing from "
                             f"{'graph1' if a not in index1 else 'graph2'}.")
        out.append((index1[a], index2[b]))
    if not out:
        raise ValueError("`truth` holds no pair.")
    return np.asarray(out, np.int64)


def from_graphs(graph1, graph2, truth, features=None) -> NetworkPair:
    """A ``NetworkPair`` from two graphs of your own and their ground-truth pairs.

    Args:
      graph1, graph2: undirected networkx graphs (node order: ``list(g.nodes)``), or paths
        of edge-list files (one ``u v`` edge per line, ``#`` comments; node order: sorted
        labels; integer labels when every label parses as one).
      truth: the ground-truth pairs as node labels: [k, 2] array-like (graph 1 node,
        graph 2 node) or the path of a two-column text file (space or comma separated).
      features: optional (feat1 [n1, p], feat2 [n2, p]) node attributes in node order.

    Returns:
      NetworkPair (unweighted adjacencies, pairs as 0-based positions in node order).

    Raises:
      ValueError / TypeError / FileNotFoundError naming the argument.
    """
    g1, order1 = _as_graph(graph1, "graph1")
    g2, order2 = _as_graph(graph2, "graph2")
    pairs = _read_truth(truth, order1, order2)
    from jaxlab.avatar import tasks

    nx = tasks.nx
    adj1 = sp.csr_matrix(nx.to_scipy_sparse_array(g1, nodelist=order1, weight=None), dtype=float)
    adj2 = sp.csr_matrix(nx.to_scipy_sparse_array(g2, nodelist=order2, weight=None), dtype=float)
    n1, n2 = adj1.shape[0], adj2.shape[0]
    if features is None:
        f1, f2 = np.zeros((n1, 0)), np.zeros((n2, 0))
    else:
        f1, f2 = (np.asarray(f, np.float64) for f in features)
        validation.check_shape("features[0]", f1, (n1, None))
        validation.check_shape("features[1]", f2, (n2, f1.shape[1]))
    return NetworkPair(adj1, adj2, f1, f2, pairs)


def load(source, truth=None, *, graph_keys=None, feature_keys=None, truth_key: str = "gnd",
         features=None) -> NetworkPair:
    """Loads a network pair: a shipped dataset, your own ``.mat`` file, or two graphs.

    Args:
      source: a name of ``DATASETS`` ("acm_dblp", "foursquare_twitter"); the path of a
        ``.mat`` file laid out like them (see ``read_mat``); or a pair ``(graph1, graph2)``
        of networkx graphs or edge-list paths (see ``from_graphs``).
      truth: the ground truth for a graph pair (array of node-label pairs or a file path);
        not used for names and ``.mat`` files (their ``truth_key`` variable holds it).
      graph_keys, feature_keys, truth_key: the ``.mat`` variables (``read_mat``).
      features: node attributes for a graph pair (``from_graphs``).

    Returns:
      NetworkPair; ``task(pair)`` makes the ``tasks.GraphTask`` the active loop runs on.

    Example:
        >>> import networkx as nx
        >>> from jaxlab.avatar import datasets
        >>> g1 = nx.karate_club_graph()
        >>> g2 = nx.relabel_nodes(g1, {v: f"u{v}" for v in g1})
        >>> pair = datasets.load((g1, g2), truth=[(v, f"u{v}") for v in g1])
        >>> pair.adj1.shape, pair.pairs.shape
        ((34, 34), (34, 2))
        >>> datasets.load("acm_dblp").pairs.shape
        (6325, 2)
    """
    if isinstance(source, tuple | list):
        if len(source) != 2:
            raise ValueError(f"`source` as a graph pair must have two graphs, got {len(source)}.")
        if truth is None:
            raise ValueError("`truth` is required for a graph pair (node-label pairs).")
        return from_graphs(source[0], source[1], truth, features)
    if truth is not None or features is not None:
        raise ValueError("`truth` / `features` apply to a graph pair only; a dataset name or "
                         ".mat file carries its own.")
    if isinstance(source, str) and source in DATASETS:
        return load_pair(source)
    if isinstance(source, str | os.PathLike) and os.fspath(source).endswith(".mat"):
        return read_mat(os.fspath(source), graph_keys, feature_keys, truth_key)
    raise ValueError(f"`source` must be one of {sorted(DATASETS)}, a .mat path or a pair of "
                     f"graphs, got {source!r}.")


def task(pair: NetworkPair, restart: float = 0.2):
    """The whole pair as a ``tasks.GraphTask`` (``graph_task`` on its arrays; checks there).

    Args:
      pair: a ``NetworkPair`` (``load``).
      restart: RWR restart probability of the position features.
    """
    from jaxlab.avatar import tasks  # tasks imports nothing from here; avoid a cycle

    if not isinstance(pair, NetworkPair):
        raise TypeError(f"`pair` must be a datasets.NetworkPair (datasets.load), got "
                        f"{type(pair).__name__}.")
    _check_restart(restart)
    return tasks.graph_task(pair.adj1, pair.adj2, pair.feat1, pair.feat2, pair.pairs,
                            restart=restart)


def _check_restart(restart) -> None:
    """The RWR restart probability in (0, 1), checked before any file is read."""
    validation.check_in_range("restart", restart, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)


def snowball(rng: np.random.Generator, adj: sp.csr_matrix, allowed: np.ndarray,
             num_nodes: int) -> np.ndarray:
    """[num_nodes] nodes with ``allowed`` True, in breadth-first order over ``adj`` from a
    random allowed start (restarting at a random unvisited allowed node when needed).

    Args:
      rng: a ``numpy.random.Generator``.
      adj: [n, n] CSR adjacency.
      allowed: [n] bool, the nodes that may be collected.
      num_nodes: how many to collect, 1 <= ``num_nodes`` <= the allowed nodes.

    Raises:
      TypeError: ``rng`` not a Generator, ``adj`` not CSR, ``allowed`` not bool.
      ValueError: ``adj`` not square, ``allowed`` not [n], ``num_nodes`` out of range.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"`rng` must be a numpy.random.Generator (np.random.default_rng), "
                        f"got {type(rng).__name__}.")
    if not (sp.issparse(adj) and adj.format == "csr"):
        raise TypeError(f"`adj` must be a scipy.sparse CSR matrix, got {type(adj).__name__}.")
    n = adj.shape[0]
    validation.check_shape("adj", adj, (n, n))
    validation.check_shape("allowed", allowed, (n,))
    validation.check_bool("allowed", allowed)
    allowed = np.asarray(allowed, bool)
    validation.check_positive_int("num_nodes", num_nodes)
    if num_nodes > int(allowed.sum()):
        raise ValueError(f"`num_nodes`={num_nodes} exceeds the {int(allowed.sum())} allowed "
                         "nodes.")
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


def subsample(name: str, num_nodes: int, *, seed: int = 0):
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
    src = snowball(rng, data.adj1, partner >= 0, num_nodes)
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
    Built afresh on every call (ACM-DBLP: minutes on a 2-core CPU); nothing is written.
    The experiments cache builds on disk (``experiments/lib/task_cache.py``).

    Args:
      name: one of DATASETS.
      restart: RWR restart probability of the position features.

    Returns:
      tasks.GraphTask (plans are [n1, n2]; the loop's masks are over the k pairs).

    Raises:
      ValueError: an unknown ``name``, ``restart`` outside (0, 1) (before any file is read).
    """
    validation.check_one_of("name", name, tuple(DATASETS))
    _check_restart(restart)
    return task(load_pair(name), restart)
