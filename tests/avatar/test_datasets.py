"""Network-alignment data: the shipped files (sizes, index ranges, checksums), the
``JAXLAB_DATA`` override, your own .mat / edge-list / networkx pairs, the snowball subsample.
"""

import hashlib
import os
import re

import networkx as nx
import numpy as np
import pytest
import scipy.io
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


def test_shipped_files_are_inside_the_package_with_their_checksums():
    """The files ship in ``jaxlab/avatar/data`` and match the sha256 of its README."""
    folder = datasets.shipped_dir()
    assert folder.startswith(os.path.dirname(os.path.abspath(datasets.__file__)))
    with open(os.path.join(folder, "README.md")) as f:
        table = dict(re.findall(r"\| (\S+\.mat) \| `([0-9a-f]{64})`", f.read()))
    assert sorted(table) == sorted(v[0] for v in datasets.DATASETS.values())
    for fname, digest in table.items():
        with open(os.path.join(folder, fname), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == digest, fname


def test_missing_file_is_a_clear_error_naming_the_folders(monkeypatch, tmp_path):
    monkeypatch.setattr(datasets, "shipped_dir", lambda: str(tmp_path / "nowhere"))
    monkeypatch.setenv(datasets.ENV_VAR, str(tmp_path / "mine"))
    with pytest.raises(FileNotFoundError, match="nowhere.*JAXLAB_DATA|mine.*nowhere"):
        datasets.load_pair("acm_dblp")


def test_env_folder_is_searched_first_and_an_edited_file_is_reread(monkeypatch, tmp_path):
    """A copy under $JAXLAB_DATA/network_alignment wins over the shipped one; rewriting it
    (other contents) is seen on the next load (the cache is keyed by the file's stat)."""
    d = datasets.load_pair("foursquare_twitter")
    sub = tmp_path / "network_alignment"
    sub.mkdir()
    path = sub / "foursquare-twitter.mat"
    scipy.io.savemat(path, {"foursquare": d.adj1, "twitter": d.adj2, "gnd": d.pairs[:10] + 1})
    monkeypatch.setenv(datasets.ENV_VAR, str(tmp_path))
    assert datasets.data_path("foursquare-twitter.mat") == str(path)
    assert datasets.load_pair("foursquare_twitter").pairs.shape == (10, 2)
    scipy.io.savemat(path, {"foursquare": d.adj1, "twitter": d.adj2, "gnd": d.pairs[:7] + 1})
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
    assert datasets.load_pair("foursquare_twitter").pairs.shape == (7, 2)


def test_own_mat_file_with_other_variable_names(tmp_path):
    """A user's .mat: graph keys inferred (the two square matrices), attributes found by
    the ``<key>_node_feat`` convention, 1-based ground truth; the same arrays come back."""
    rng = np.random.default_rng(0)
    g1 = nx.gnp_random_graph(12, 0.3, seed=1)
    g2 = nx.gnp_random_graph(11, 0.3, seed=2)
    a1, a2 = nx.to_scipy_sparse_array(g1), nx.to_scipy_sparse_array(g2)
    f1, f2 = rng.normal(size=(12, 3)), rng.normal(size=(11, 3))
    gnd = np.array([[1, 3], [4, 1], [12, 11]])
    path = tmp_path / "mine.mat"
    scipy.io.savemat(path, {"left": a1, "right": a2, "gnd": gnd, "left_node_feat": f1,
                            "right_node_feat": f2})
    pair = datasets.load(str(path))
    np.testing.assert_array_equal(pair.adj1.toarray(), a1.toarray())
    np.testing.assert_array_equal(pair.adj2.toarray(), a2.toarray())
    np.testing.assert_allclose(pair.feat1, f1)
    np.testing.assert_array_equal(pair.pairs, gnd - 1)
    task = datasets.task(pair)
    assert task.pos1.shape == (12, 3) and task.pos2.shape == (11, 3)
    scipy.io.savemat(path, {"a": a1, "b": a2, "c": a1, "gnd": gnd})
    with pytest.raises(ValueError, match="graph_keys"):
        datasets.load(str(path))
    assert datasets.load(str(path), graph_keys=("a", "b")).adj2.shape == (11, 11)
    scipy.io.savemat(path, {"a": a1, "b": a2, "gnd": gnd + 20})
    with pytest.raises(ValueError, match="out of range"):
        datasets.load(str(path))


def test_edge_lists_and_networkx_graphs_give_the_same_pair(tmp_path):
    """The same labelled graphs as edge-list files (sorted labels) and as networkx graphs
    (their node order) give the same adjacency once both are put in one node order."""
    g1 = nx.les_miserables_graph()
    g1 = nx.convert_node_labels_to_integers(g1, first_label=100)
    perm = np.random.default_rng(0).permutation(g1.number_of_nodes())
    g2 = nx.relabel_nodes(g1, {v: int(perm[i]) for i, v in enumerate(sorted(g1))})
    truth = [(v, int(perm[i])) for i, v in enumerate(sorted(g1))]
    e1, e2, t = tmp_path / "g1.edges", tmp_path / "g2.edges", tmp_path / "truth.csv"
    nx.write_edgelist(g1, e1, data=False)
    nx.write_edgelist(g2, e2, data=False)
    t.write_text("# graph1,graph2\n" + "".join(f"{a},{b}\n" for a, b in truth))
    from_files = datasets.load((str(e1), str(e2)), truth=str(t))
    from_graphs = datasets.load((g1, g2), truth=truth)
    o1, o2 = sorted(g1), sorted(g2)
    ref1 = nx.to_numpy_array(g1, nodelist=o1, weight=None)
    ref2 = nx.to_numpy_array(g2, nodelist=o2, weight=None)
    np.testing.assert_array_equal(from_files.adj1.toarray(), ref1)
    np.testing.assert_array_equal(from_files.adj2.toarray(), ref2)
    # truth maps a node's row in graph 1 to its partner's row in graph 2: same edges.
    p = from_files.pairs
    np.testing.assert_array_equal(ref1[np.ix_(p[:, 0], p[:, 0])], ref2[np.ix_(p[:, 1], p[:, 1])])
    n1 = list(g1.nodes)
    q = from_graphs.pairs
    assert [n1[i] for i in q[:, 0]] == [a for a, _ in truth]


@pytest.mark.parametrize("call, match", [
    (lambda: datasets.load("douban"), "source"),
    (lambda: datasets.load((nx.path_graph(3),)), "two graphs"),
    (lambda: datasets.load((nx.path_graph(3), nx.path_graph(3))), "truth"),
    (lambda: datasets.load("acm_dblp", truth=[(0, 0)]), "graph pair only"),
    (lambda: datasets.load((nx.path_graph(3), nx.path_graph(3)), truth=[(0, 7)]), "graph2"),
    (lambda: datasets.load((nx.DiGraph([(0, 1)]), nx.path_graph(2)), truth=[(0, 0)]),
     "undirected"),
    (lambda: datasets.load(("no/such.edges", nx.path_graph(2)), truth=[(0, 0)]), "graph1"),
    (lambda: datasets.load("no/such.mat"), "path"),
    (lambda: datasets.task("acm_dblp"), "pair"),
])
def test_bad_sources_name_the_argument(call, match):
    with pytest.raises((ValueError, TypeError, FileNotFoundError), match=match):
        call()


def test_snowball_is_breadth_first_over_allowed_nodes():
    adj = sp.csr_matrix(nx.to_numpy_array(nx.path_graph(30)))
    rng = np.random.default_rng(0)
    out = datasets.snowball(rng, adj, np.ones(30, bool), 7)
    # BFS on a path from any start visits a contiguous interval, in order of distance.
    assert len(set(out.tolist())) == 7 and out.max() - out.min() == 6
    assert np.all(np.diff(np.abs(out - out[0])) >= 0)
    allowed = np.arange(30) % 3 == 0
    out = datasets.snowball(np.random.default_rng(1), adj, allowed, 5)
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
    src = datasets.snowball(rng, d.adj1, partner >= 0, n)
    np.testing.assert_array_equal(task.degree, d.adj1[src][:, src].toarray().sum(1))
    tgt = partner[src]  # the partner of src[i]; in the task it is target node truth[i]
    a2 = d.adj2[tgt][:, tgt].toarray()
    a2_task = (task.lap2 != 0) & ~np.eye(n, dtype=bool)  # off-diagonal pattern = edges
    np.testing.assert_array_equal(a2_task[np.ix_(task.truth, task.truth)], a2 > 0)
    for x in (task.pos1, task.pos2, task.struct1, task.struct2, task.lap1, task.lap2):
        assert x.shape == (n, n) and np.all(np.isfinite(x))
    assert task.struct1.max() <= 1.0
    assert not np.array_equal(datasets.subsample(name, n, seed=4).degree, task.degree)
