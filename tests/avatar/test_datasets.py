"""Real network-alignment data: loaders (sizes, index ranges) and the snowball subsample.

The files are read from ``../shared/data/network_alignment`` relative to the repo root.
"""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from jaxlab.avatar import datasets

# name -> (n1, n2, ground-truth pairs, attribute columns): the data README's table.
SIZES = {"acm_dblp": (9872, 9916, 6325, 17), "foursquare_twitter": (5313, 5120, 1609, 0)}


def test_module_size_table_is_the_readme_table():
    """``datasets.SIZES`` (read by the configs instead of loading the files) is this table,
    which ``test_loader_sizes_and_index_ranges`` checks against the files."""
    assert datasets.SIZES == SIZES


@pytest.mark.parametrize("name", sorted(SIZES))
def test_loader_sizes_and_index_ranges(name):
    d = datasets.load_pair(name)
    n1, n2, k, p = SIZES[name]
    assert sp.issparse(d.adj1) and sp.issparse(d.adj2)
    assert d.adj1.shape == (n1, n1) and d.adj2.shape == (n2, n2)
    assert d.feat1.shape == (n1, p) and d.feat2.shape == (n2, p)
    assert d.pairs.shape == (k, 2)
    # 0-based after conversion, in range, one-to-one.
    assert d.pairs.min() >= 0
    assert d.pairs[:, 0].max() < n1 and d.pairs[:, 1].max() < n2
    assert len(np.unique(d.pairs[:, 0])) == k and len(np.unique(d.pairs[:, 1])) == k
    for a in (d.adj1, d.adj2):  # undirected, unweighted, no self-loops
        assert (a != a.T).nnz == 0
        assert np.all(a.data == 1.0) and a.diagonal().sum() == 0


def test_missing_folder_is_a_clear_error(monkeypatch, tmp_path):
    datasets.load_pair.cache_clear()
    monkeypatch.setattr(datasets, "data_dir", lambda: str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="nowhere"):
        datasets.load_pair("acm_dblp")
    datasets.load_pair.cache_clear()


def test_snowball_is_breadth_first_over_allowed_nodes():
    adj = sp.csr_matrix(nx.to_numpy_array(nx.path_graph(30)))
    rng = np.random.default_rng(0)
    out = datasets.snowball(adj, np.ones(30, bool), 7, rng)
    # BFS on a path from any start visits a contiguous interval, in order of distance.
    assert len(set(out.tolist())) == 7 and out.max() - out.min() == 6
    assert np.all(np.diff(np.abs(out - out[0])) >= 0)
    allowed = np.arange(30) % 3 == 0
    out = datasets.snowball(adj, allowed, 5, np.random.default_rng(1))
    assert np.all(allowed[out]) and len(set(out.tolist())) == 5


@pytest.mark.parametrize("name", sorted(SIZES))
def test_subsample_is_the_induced_pair_of_ground_truth_nodes(name):
    n = 60
    task = datasets.subsample(name, n, seed=3)
    assert sorted(task.truth.tolist()) == list(range(n))
    d = datasets.load_pair(name)
    # Rebuild the sample independently: same rng draws as the loader documents.
    rng = np.random.default_rng(3)
    partner = np.full(d.adj1.shape[0], -1)
    partner[d.pairs[:, 0]] = d.pairs[:, 1]
    src = datasets.snowball(d.adj1, partner >= 0, n, rng)
    np.testing.assert_array_equal(task.degree, d.adj1[src][:, src].toarray().sum(1))
    tgt = partner[src]  # the partner of src[i]; in the task it is target node truth[i]
    a2 = d.adj2[tgt][:, tgt].toarray()
    a2_task = (task.lap2 != 0) & ~np.eye(n, dtype=bool)  # off-diagonal pattern = edges
    np.testing.assert_array_equal(a2_task[np.ix_(task.truth, task.truth)], a2 > 0)
    for x in (task.pos1, task.pos2, task.struct1, task.struct2, task.lap1, task.lap2):
        assert x.shape == (n, n) and np.all(np.isfinite(x))
    assert task.struct1.max() <= 1.0
    assert not np.array_equal(datasets.subsample(name, n, seed=4).degree, task.degree)
