"""experiments/lib/wholegraph_study.py and its pages: the declared paired differences,
the warm-start rows, the evidence page and REPORT.md section from a summary.json; the
runs on disk (experiments/lib/wholegraph_runs.py): checkpoints, resumption, run keys."""

import json

import numpy as np
import pytest

from experiments import make_evidence
from experiments.lib import provenance
from experiments.lib import wholegraph_runs as wr
from experiments.lib import wholegraph_study as ws


def _record(rnd, mrr, cold=False, cg=0):
    r = {"round": rnd, "mrr": mrr, "mrr_st": mrr - 0.01, "mrr_ts": mrr + 0.01,
         "mrr_st_ties_against": mrr - 0.1, "hits@1": mrr - 0.05, "hits@10": mrr,
         "hits@30": mrr, "hits@50": mrr, "prod_steps": 3, "prod_change": 0.005,
         "column_error": 0.01, "solve_s": 50.0, "round_s": 55.0, "peak_rss_gb": 7.5,
         "load_avg_1min": 2.0, "cg_iterations": cg, "cg_converged": True,
         "picked_correct": 0.5, "heldout_mrr": mrr - 0.02, "removal_mrr": mrr - 0.04,
         "mrr_truth_first": mrr + 0.05}
    if cold:
        r.update(prod_steps_cold=5, cost_gap_cold=1e-3)
        if cg:  # the CG runs (and is compared) for AvAtar only
            r["cg_iterations_cold"] = cg + 100
    return r


def _runs(rounds=2, seeds=3):
    runs = {"acm_dblp": {}}
    for strat, lift in (("random", 0.0), ("entropy", 0.02), ("avatar", 0.03)):
        runs["acm_dblp"][strat] = {
            k: [_record(0, 0.9)] + [_record(r, 0.9 + lift * r / rounds + 0.001 * k,
                                            cold=(k == 0 and r <= 2),
                                            cg=50 if strat == "avatar" else 0)
                                    for r in range(1, rounds + 1)]
            for k in range(seeds)}
    return runs


def test_paired_differences_and_rows():
    s = ws.summarize(_runs(), 3, ["random", "entropy", "avatar"], rounds=2)
    d = s["acm_dblp"]["paired"]["avatar-random"]
    assert d["mean"] == pytest.approx(0.03) and d["ci95"][0] == pytest.approx(0.03)
    assert s["acm_dblp"]["paired"]["avatar-entropy"]["mean"] == pytest.approx(0.01)
    assert s["acm_dblp"]["warm_starts"]["prod_steps_cold"] == 5.0
    assert s["acm_dblp"]["warm_starts"]["cg_cold"] == 150.0  # round 2 only: round 1 had
    assert s["acm_dblp"]["warm_starts"]["rounds_compared"] == 6  # no previous CG solution
    assert s["acm_dblp"]["paired"]["avatar-random, never queried"]["mean"] == pytest.approx(0.03)
    assert s["acm_dblp"]["paired"]["avatar-entropy, removal only"]["mean"] == pytest.approx(0.01)
    rows = dict(ws.headline({"summary": s}))
    names = "(random / entropy / avatar)"
    paper = f"acm_dblp: test MRR after the last round, {ws.LINES['mrr']} {names}"
    ci = 4.303 * 0.001 / np.sqrt(3)  # seeds 0.001 apart: sd 0.001, t(2) = 4.303
    assert rows[paper].startswith(f"0.901 ± {ci:.3f} / 0.921 ± {ci:.3f} / 0.931 ± {ci:.3f} "
                                  "(3 seeds")
    held = f"acm_dblp: test MRR after the last round, {ws.LINES['heldout_mrr']} {names}"
    removal = f"acm_dblp: test MRR after the last round, {ws.LINES['removal_mrr']} {names}"
    assert rows[held].startswith("0.881 ± ") and rows[removal].startswith("0.861 ± ")
    assert rows[f"acm_dblp: the paper's metric with the truth first among ties {names}"] == \
        "0.951 / 0.971 / 0.981"
    md = ws.table_markdown(s)
    assert "| avatar | 0.931 ± " in md and "never queried" in md and "removal only" in md
    assert "0.829 / 0.926 / 0.936" in rows[
        "acm_dblp: the AvAtar paper, Table 3 (random / entropy / AvAtar, PARROT)"]
    assert "+0.0300" in rows["acm_dblp: avatar-random MRR (paired over seeds, 95% CI)"]
    assert any(k.startswith("acm_dblp: share of queries") and v == "0.50 / 0.50 / 0.50"
               for k, v in rows.items())


def test_ours_is_declared_against_every_baseline_and_judged_on_the_goal():
    runs = _runs()
    runs["acm_dblp"]["density"] = _runs()["acm_dblp"]["entropy"]
    lift = {0: 0.05, 1: 0.052, 2: 0.054}  # ours: 0.05 + 0.002 k over round 0
    runs["acm_dblp"]["ours"] = {
        k: [_record(0, 0.9)] + [dict(_record(r, 0.9 + lift[k] * r / 2), anchors=10 * (r + 1),
                                     picked_entropy=0.3, picked_uncertainty=0.6)
                                for r in (1, 2)] for k in range(3)}
    runs["acm_dblp"]["ours"] = {k: [dict(r[0], anchors=10)] + r[1:]
                                for k, r in runs["acm_dblp"]["ours"].items()}
    s = ws.summarize(runs, 3, ["random", "entropy", "density", "avatar", "ours"], rounds=2)
    d = s["acm_dblp"]
    assert {"ours-random", "ours-entropy", "ours-density", "ours-avatar"} <= set(d["paired"])
    goal = d["goal"]  # entropy and density tie: the first of them is the rival
    assert goal["rival"] == "entropy" and goal["mean"] == pytest.approx(0.052 - 0.02 - 0.001)
    assert goal["met"] and goal["ci95"][0] > 0
    gains = d["table"]["ours"]["heldout_gain_per_100_labels"]  # per 10 labels a round
    assert gains == pytest.approx([100 * 0.026 / 10] * 2)
    rows = dict(ws.headline({"summary": s}))
    assert any(k.startswith("acm_dblp: ours - entropy (the better baseline)") and
               v.endswith(": met") for k, v in rows.items())
    assert d["table"]["ours"]["picked_entropy"] == pytest.approx(0.3)
    assert d["table"]["ours"]["picked_uncertainty"] == pytest.approx(0.6)


def test_unfinished_runs_are_not_counted():
    runs = _runs()
    runs["acm_dblp"]["avatar"][2] = runs["acm_dblp"]["avatar"][2][:2]  # stopped in round 2
    s = ws.summarize(runs, 3, ["random", "entropy", "avatar"], rounds=2)
    assert s["acm_dblp"]["table"]["avatar"]["seeds"] == 2
    assert len(s["acm_dblp"]["paired"]["avatar-random"]["per_seed"]) == 2


def test_evidence_page_and_missing_page(tmp_path):
    res, out = tmp_path / "results", tmp_path / "evidence"
    s = ws.summarize(_runs(), 3, ["random", "entropy", "avatar"], rounds=2)
    rec = {"config": {"datasets": ["acm_dblp"], "seeds": 3,
                      "strategies": ["random", "entropy", "avatar"]},
           "summary": s, "wall_s": 7200.0, "machine": provenance.machine(),
           "git": provenance.git_state(), "packages": provenance.package_versions()}
    assert make_evidence.write_all(str(res), str(out)) == []
    assert "No results" in (out / "avatar_wholegraph.rst").read_text()
    (res / ws.FOLDER).mkdir(parents=True)
    (res / ws.FOLDER / "summary.json").write_text(json.dumps(rec))
    assert make_evidence.write_all(str(res), str(out)) == []
    page = (out / "avatar_wholegraph.rst").read_text()
    assert "0.829" in page and "+0.0300" in page and "h in all" in page
    assert np.isfinite(s["acm_dblp"]["solver"]["peak_rss_gb"])


class _Stop(Exception):
    pass


def _stop_after_round_1(msg):
    if "round 1/" in msg:
        raise _Stop


@pytest.mark.parametrize("strategy", ["avatar", "entropy"])
def test_resumed_run_equals_an_uninterrupted_one(tmp_path, strategy):
    from tests.avatar.test_wholegraph import P, _problem

    task, g, s = _problem()
    full = wr.run_resumable(task, g, s, P, strategy, 0, str(tmp_path / "a"), "k", log=print)
    assert [r["round"] for r in full] == [0, 1, 2, 3]
    assert full[-1]["anchors"] == 9 + 3 * 4 and full[-1]["test"] == 48 - 21
    assert len({r["mrr"] for r in full}) > 1  # the metrics move: a comparison that can fail
    assert all(np.isfinite(r["peak_rss_gb"]) and "load_avg_1min" in r for r in full)
    with pytest.raises(_Stop):  # stopped after round 1's checkpoint was written
        wr.run_resumable(task, g, s, P, strategy, 0, str(tmp_path / "b"), "k",
                         log=_stop_after_round_1)
    lines = []
    resumed = wr.run_resumable(task, g, s, P, strategy, 0, str(tmp_path / "b"), "k",
                               log=lines.append)
    assert any("resumed after round 1" in x for x in lines)
    assert sum("round" in x and "/3" in x for x in lines) == 2  # rounds 2 and 3 only
    for a, b in zip(full, resumed, strict=True):
        assert a["mrr"] == b["mrr"] and a["anchors"] == b["anchors"]


def test_stale_checkpoint_is_not_read(tmp_path):
    from tests.avatar.test_wholegraph import P, _problem

    task, g, s = _problem()
    wr.run_resumable(task, g, s, P._replace(rounds=1), "random", 0, str(tmp_path), "k",
                     log=print)
    path = str(tmp_path / "run-random-seed0.npz")
    assert wr.load_checkpoint(path, wr.run_key("k", s, P._replace(rounds=1), "random",
                                               0)) is not None
    other = wr.run_key("k", s._replace(alpha=0.4), P._replace(rounds=1), "random", 0)
    with pytest.warns(RuntimeWarning, match="another configuration"):
        assert wr.load_checkpoint(path, other) is None
    with open(path, "wb") as f:
        f.write(b"not a checkpoint")
    with pytest.warns(RuntimeWarning, match="unreadable"):
        assert wr.load_checkpoint(path, other) is None


def test_checkpoint_key_ignores_documentation_not_code():
    a = 'def f(x):\n    """Doc."""\n    return x + 1  # one\n'
    b = 'def f(x):\n    """Other words."""\n\n    return x + 1\n'
    c = 'def f(x):\n    """Doc."""\n    return x + 2\n'
    assert wr.code_text(a) == wr.code_text(b)
    assert wr.code_text(a) != wr.code_text(c)


def test_a_checkpoint_keeps_the_heldout_pairs_and_the_round0_values(tmp_path):
    from tests.avatar.test_wholegraph import P, _problem

    task, g, s = _problem()
    p = P._replace(rounds=1, heldout_frac=0.25)
    recs = wr.run_resumable(task, g, s, p, "entropy", 0, str(tmp_path), "k", log=print)
    got = wr.load_checkpoint(str(tmp_path / "run-entropy-seed0.npz"),
                             wr.run_key("k", s, p, "entropy", 0))
    assert got.heldout.sum() == 12 and not (got.heldout & got.anchors).any()
    assert set(got.round0_values) == {"mrr", "hits@1", "hits@10", "hits@30", "hits@50"}
    assert all(v.shape == (48,) for v in got.round0_values.values())
    assert {"heldout_mrr", "removal_mrr"} <= set(recs[-1])


@pytest.mark.heavy
def test_run_study_runs_and_resumes_on_a_small_pair(tmp_path, monkeypatch):
    """run_study's wiring (shared round 0, checkpoints, tie metrics, summary) on a 48-node
    pair standing in for a shipped one; a second call reads every run back."""
    import networkx as nx

    from jaxlab.avatar import datasets, parrot_official

    g1 = nx.connected_watts_strogatz_graph(48, 4, 0.5, seed=0)
    perm = np.random.default_rng(0).permutation(48)
    g2 = nx.relabel_nodes(g1, dict(enumerate(perm)))
    pair = datasets.load((g1, g2), np.stack([np.arange(48), perm], 1))
    monkeypatch.setitem(parrot_official.SETTINGS, "small", parrot_official.FOURSQUARE_TWITTER)
    monkeypatch.setattr(datasets, "load_pair", lambda name: pair)
    monkeypatch.setenv("JAXLAB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(ws, "plot", lambda *a, **k: None)  # the figure has its own tests
    lines = []
    kw = dict(datasets_=("small",), seeds=2, strategies=("random", "avatar"), rounds=2,
              compare_cold_rounds=1)
    out = ws.run_study(str(tmp_path / "wg"), log=lines.append, **kw)
    t = out["summary"]["small"]["table"]
    assert t["avatar"]["seeds"] == 2
    assert {"heldout_mrr", "removal_mrr", "mrr_truth_first"} <= set(t["random"])
    runs = out["runs"]["small"]
    # one shared round 0 per seed: the strategies start from the same anchors and plan
    assert runs["random"][0][0]["mrr"] == runs["avatar"][0][0]["mrr"]
    assert all("peak_rss_gb" in r and "load_avg_1min" in r for r in runs["avatar"][1])
    again = []
    out2 = ws.run_study(str(tmp_path / "wg"), log=again.append, **kw)
    assert sum("resumed after round 2" in x for x in again) == 4  # 2 seeds x 2 strategies
    assert not any("round 0 (initial anchors" in x for x in again)
    assert out2["summary"]["small"]["table"]["avatar"]["mrr"] == t["avatar"]["mrr"]


@pytest.mark.slow
def test_the_binary_runs_and_resumes(tmp_path):
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "experiments.avatar_wholegraph", f"--workdir={tmp_path}",
           "--datasets=foursquare_twitter", "--seeds=2", "--strategies=random,avatar",
           "--rounds=1", "--compare_cold_rounds=1"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-2000:]
    rec = json.loads((tmp_path / "summary.json").read_text())
    t = rec["summary"]["foursquare_twitter"]["table"]
    assert t["avatar"]["seeds"] == 2 and "heldout_mrr" in t["random"]
    assert (tmp_path / "mrr.png").exists() and (tmp_path / "table.md").exists()
    assert out.stdout.strip().splitlines()[-1].startswith(f"results: {tmp_path} (table.md, ")
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "resumed after round 1" in again.stdout


def test_a_summary_from_before_random_tie_order_everywhere_keeps_its_meaning():
    """An older summary.json: "mrr" ranked the truth first, "mrr_random_ties" at random."""
    old = {"table": {x: {"mrr": v + 0.05, "mrr_random_ties": v, "mrr_st": v,
                         "mrr_st_ties_against": v - 0.1, "hits@1": v, "seeds": 3,
                         "round0_mrr": 0.85, "round0_mrr_random_ties": 0.80,
                         "round_s_mean": 10.0, "round_s_max": 12.0}
                     for x, v in (("random", 0.80), ("avatar", 0.75))},
           "paired": {"avatar-random": {"mean": -0.05, "ci95": [-0.06, -0.04]},
                      "avatar-random, random tie order": {"mean": -0.05,
                                                          "ci95": [-0.07, -0.03]}},
           "paper": None, "warm_starts": {"rounds_compared": 0},
           "solver": {"round0_s": 1.0, "rounds_h": 0.1, "peak_rss_gb": 1.0,
                      "column_error_max": 0.01, "cg_not_converged": 0}}
    rows = dict(ws.headline({"summary": {"acm_dblp": old}}))
    names = "(random / avatar)"
    assert rows[f"acm_dblp: test MRR after the last round, {ws.LINES['mrr']} {names}"] \
        .startswith("0.800 / 0.750 (3 seeds")
    assert rows[f"acm_dblp: the paper's metric with the truth first among ties {names}"] == \
        "0.850 / 0.800"
    assert rows["acm_dblp: avatar-random MRR (paired over seeds, 95% CI)"].endswith(
        "[-0.0700, -0.0300]")
    assert "acm_dblp: avatar-random, truth first among ties MRR (paired over seeds, 95% CI)" \
        in rows
