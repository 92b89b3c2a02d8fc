"""experiments/lib/task_cache.py: whole-graph task builds cached on disk, keyed by content;
a stale or unreadable file is rebuilt, never served."""

import os
import warnings

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from experiments.lib import task_cache
from jaxlab.avatar import datasets


def test_task_cache_hits_and_never_serves_a_stale_build(tmp_path):
    pair = datasets.from_graphs(nx.karate_club_graph(), nx.karate_club_graph(),
                                np.stack([np.arange(34), np.arange(34)], 1))
    built = task_cache.cached_task(pair, 0.2, str(tmp_path))
    files = os.listdir(tmp_path)
    assert len(files) == 1
    msgs = []
    again = task_cache.cached_task(pair, 0.2, str(tmp_path), log=msgs.append)
    assert any("read from the cache" in m for m in msgs)
    for a, b in zip(built, again, strict=True):
        if isinstance(a, np.ndarray):
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(np.asarray(a.todense()), np.asarray(b.todense()))
    # another restart is another key (a second file), not the first build
    task_cache.cached_task(pair, 0.3, str(tmp_path))
    assert len(os.listdir(tmp_path)) == 2
    # a file whose stored key differs is rebuilt with a warning
    path = task_cache.path_for(pair, 0.2, str(tmp_path))
    other = task_cache.path_for(pair, 0.3, str(tmp_path))
    os.replace(other, path)
    with pytest.warns(RuntimeWarning, match="stale"):
        rebuilt = task_cache.cached_task(pair, 0.2, str(tmp_path))
    np.testing.assert_array_equal(rebuilt.pos1, built.pos1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        task_cache.cached_task(pair, 0.2, str(tmp_path))  # now a clean hit


def test_full_task_cache_argument_is_checked():
    with pytest.raises(ValueError, match="cache"):
        task_cache.full_task("foursquare_twitter", cache="yes")


def test_graph_task_of_a_sparse_pair_is_unchanged_by_the_cache(tmp_path):
    g = nx.les_miserables_graph()
    g = nx.convert_node_labels_to_integers(g)
    a = nx.to_scipy_sparse_array(g, format="csr")
    n = a.shape[0]
    pair = datasets.NetworkPair(sp.csr_matrix(a), sp.csr_matrix(a), np.zeros((n, 0)),
                                np.zeros((n, 0)), np.stack([np.arange(n), np.arange(n)], 1))
    fresh = datasets.task(pair)
    cached = task_cache.cached_task(pair, 0.2, str(tmp_path))
    np.testing.assert_array_equal(fresh.pos2, cached.pos2)
    np.testing.assert_array_equal(np.asarray(fresh.adj1.data), np.asarray(cached.adj1.data))


def test_default_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(task_cache.ENV_VAR, str(tmp_path))
    assert task_cache.default_dir() == os.path.join(str(tmp_path), "avatar")
    monkeypatch.delenv(task_cache.ENV_VAR)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert task_cache.default_dir() == os.path.join(str(tmp_path / "home"), ".cache",
                                                    "jaxlab", "avatar")
