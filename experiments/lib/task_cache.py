"""An on-disk cache of whole-graph task builds (``tasks.GraphTask``), keyed by content.

Building the whole ACM-DBLP task (``datasets.task``: two sparse LU factorisations and
2 x 6,325 RWR solves, the normalised adjacencies, a betweenness estimate) takes minutes on
a 2-core CPU; every active run, seed and strategy needs the same arrays. ``cached_task``
builds once and reads the ``.npz`` afterwards; ``full_task`` is ``datasets.full_task``
through it. The library (``jaxlab.avatar``) builds tasks and never writes them: this
cache is the experiments' part.

Key (ours): SHA-256 over the pair's arrays (both adjacencies' CSR data / indices / indptr
and shapes, both attribute matrices, the ground-truth pairs), the RWR ``restart`` and the
source text of every function the build runs (``BUILD_FUNCTIONS``). Another dataset, another
restart or an edited build function gives another key, so a stale build is never served.
The key is also stored inside the file and compared on reading; an unreadable or
mismatching file is rebuilt (with a warning), never used. Files are written to a temporary
name and renamed (``results.save_npz_atomic``), so an interrupted write leaves no half file under
the key.

Folder: ``$JAXLAB_CACHE_DIR/avatar`` if that variable is set, else
``~/.cache/jaxlab/avatar``; ``cache_dir=`` overrides both. ``results.save_npz_atomic`` is also the
writer of the whole-graph checkpoints (``experiments.lib.wholegraph_runs``).
"""

import hashlib
import inspect
import os
import warnings

import numpy as np
import scipy.sparse as sp
from jax.experimental import sparse as jsparse

from jaxlab.avatar import datasets, tasks

from . import results

__all__ = ["ENV_VAR", "default_dir", "digest", "path_for", "cached_task"]

ENV_VAR = "JAXLAB_CACHE_DIR"
FORMAT = 1  # bumped when the file layout changes
BUILD_FUNCTIONS = (tasks.graph_task, tasks.rwr_columns, tasks.sym_norm_adjacency,
                   tasks.to_bcoo, tasks._betweenness, tasks._check_features,
                   tasks._check_adjacency)


def default_dir() -> str:
    """``$JAXLAB_CACHE_DIR/avatar`` or ``~/.cache/jaxlab/avatar``."""
    root = os.environ.get(ENV_VAR) or os.path.join(os.path.expanduser("~"), ".cache", "jaxlab")
    return os.path.join(root, "avatar")


def _update(h, a) -> None:
    a = np.ascontiguousarray(a)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.tobytes())


def digest(pair, restart: float) -> str:
    """Hex SHA-256 of a ``datasets.NetworkPair``, the RWR ``restart`` and the build code."""
    h = hashlib.sha256()
    h.update(f"format={FORMAT};restart={float(restart)!r}".encode())
    for adj in (pair.adj1, pair.adj2):
        adj = sp.csr_matrix(adj)
        adj.sort_indices()
        for part in (adj.data, adj.indices, adj.indptr, np.asarray(adj.shape)):
            _update(h, part)
    for part in (pair.feat1, pair.feat2, pair.pairs):
        _update(h, np.asarray(part))
    for fn in BUILD_FUNCTIONS:
        h.update(inspect.getsource(fn).encode())
    return h.hexdigest()


def _save(path: str, key: str, t: tasks.GraphTask) -> None:
    arrays = {"key": np.asarray(key)}
    for name in ("feat1", "feat2", "pos1", "pos2", "src", "tgt", "degree", "betweenness"):
        arrays[name] = np.asarray(getattr(t, name))
    for name in ("adj1", "adj2"):
        m = getattr(t, name)
        arrays[f"{name}_data"] = np.asarray(m.data)
        arrays[f"{name}_indices"] = np.asarray(m.indices)
        arrays[f"{name}_shape"] = np.asarray(m.shape)
    results.save_npz_atomic(path, arrays)


def _load(path: str, key: str) -> tasks.GraphTask:
    with np.load(path, allow_pickle=False) as z:
        if str(z["key"]) != key:
            raise ValueError("key mismatch")

        def bcoo(name):
            return jsparse.BCOO((z[f"{name}_data"], z[f"{name}_indices"]),
                                shape=tuple(int(s) for s in z[f"{name}_shape"]),
                                indices_sorted=True, unique_indices=True)

        return tasks.GraphTask(feat1=z["feat1"], feat2=z["feat2"], pos1=z["pos1"],
                               pos2=z["pos2"], adj1=bcoo("adj1"), adj2=bcoo("adj2"),
                               src=z["src"], tgt=z["tgt"], degree=z["degree"],
                               betweenness=z["betweenness"])


def path_for(pair, restart: float, cache_dir: str | None = None) -> str:
    """The cache file of ``pair`` / ``restart`` (it may not exist yet)."""
    key = digest(pair, restart)
    return os.path.join(cache_dir or default_dir(), f"task-{key[:24]}.npz")


def cached_task(pair, restart: float = 0.2, cache_dir: str | None = None,
                log=None) -> tasks.GraphTask:
    """``datasets.task(pair, restart)``, read from the cache when this exact build is there.

    Args:
      pair: a ``datasets.NetworkPair``.
      restart: RWR restart probability of the position features.
      cache_dir: the cache folder (default ``default_dir()``).
      log: optional callable taking one message string (cache hit / build / write).

    Returns:
      tasks.GraphTask equal to a fresh build (the arrays round-trip exactly through npz).
    """
    key = digest(pair, restart)
    path = os.path.join(cache_dir or default_dir(), f"task-{key[:24]}.npz")
    say = log or (lambda _msg: None)
    if os.path.isfile(path):
        try:
            t = _load(path, key)
            say(f"task read from the cache {path}")
            return t
        except Exception as e:  # noqa: BLE001 - any unreadable file is rebuilt
            warnings.warn(f"task cache file {path} is unreadable or stale ({e}); rebuilding "
                          "it.", RuntimeWarning, stacklevel=2)
    say("building the task (RWR features, normalised adjacencies, betweenness) ...")
    t = datasets.task(pair, restart)
    _save(path, key, t)
    say(f"task written to the cache {path}")
    return t


def full_task(name: str, restart: float = 0.2, cache: bool = True,
              cache_dir: str | None = None, log=None) -> tasks.GraphTask:
    """``datasets.full_task(name, restart)`` through the cache (ACM-DBLP: minutes to build,
    about a second to read).

    Args:
      name: one of ``datasets.DATASETS``.
      restart: RWR restart probability of the position features.
      cache: read / write the build through the cache (False: build, write nothing).
      cache_dir: the cache folder (default ``default_dir()``).
      log: optional callable taking one message string.
    """
    if not isinstance(cache, bool):
        raise ValueError(f"`cache` must be a bool, got {cache!r}.")
    if not cache:
        return datasets.full_task(name, restart)
    return cached_task(datasets.load_pair(name), restart, cache_dir, log)
