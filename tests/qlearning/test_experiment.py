import json
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from experiments import qlearning as qexp
from experiments.configs import qlearning as qcfg
from experiments.lib import registry
from tests.notebooks import run_notebook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.heavy
def test_smoke_experiment_writes_results_and_resumes(tmp_path):
    cfg = qcfg.get_config("smoke")
    s1, _ = run_notebook("qlearning", tmp_path)  # colab/qlearning.ipynb at smoke size
    assert os.path.exists(tmp_path / "summary.json")
    for png in ("samples_to_eps.png", "ratio_vs_eps.png"):
        assert os.path.getsize(tmp_path / png) > 1000
    with open(tmp_path / "summary.json") as f:
        on_disk = json.load(f)
    fams = s1["families"]
    assert [(f["family"], f["inner_loop"], f["headline"]) for f in fams] == [
        ("garnet", "sgd", True), ("bernoulli", "sgd", True), ("garnet", "running_mean", False)]
    assert [f["schedules"] for f in on_disk["families"]] == [f["schedules"] for f in fams]
    for f in fams:
        # Every schedule learns: final error well below the initial ||Q*||_inf.
        assert all(v < 0.5 * f["q_star_max"] for v in f["final_target_error_mean"].values())
        for r in f["rows"]:
            lo, hi = r["ratio"]["ci95"]
            assert lo <= r["ratio"]["value"] <= hi
            assert isinstance(r["best_constant_at_grid_edge"], bool)
            assert set(r["growth_sweep"]) == {"p=0.667", "p=2"}
    # The notebook's run wrote TensorBoard events (process 0), read back with tbparse.
    from tests.test_tensorboard import read

    tags = {t for _, t in read(tmp_path / "tb")}
    assert {"qlearning/q_error", "qlearning/target_error"} <= tags, tags
    # Rerunning in the same workdir restores the finished units: identical numbers.
    s2 = registry.train_and_evaluate("qlearning", cfg, str(tmp_path))
    assert s2["families"] == s1["families"]


def test_constant_grid_and_picks_use_validation_seeds_only():
    cfg = qcfg.get_config("smoke")
    assert qexp.constant_grid(cfg, "garnet") == [20, 40, 80, 160]
    cfg.scale.garnet = 2.0
    assert qexp.constant_grid(cfg, "garnet") == [40, 80, 160, 320]
    cfg = qcfg.get_config("smoke")
    names, kinds, _ = qexp.build_schedules(cfg, "garnet")
    n_val, n_test, r = cfg.num_val_seeds, cfg.num_seeds, 5
    samples = np.arange(1, r + 1) * 100
    err = np.full((len(names), n_val + n_test, r), 10.0, np.float32)
    err[:, :, -1] = 0.0  # every run reaches eps at the last record ...
    err[1, :n_val, 1:] = 0.0  # ... schedule 1 early on validation seeds only
    err[2, n_val:, 1:] = 0.0  # ... schedule 2 early on test seeds only
    err[4, :, 2:] = 0.0  # the theory (p=2/3, first base) on every seed
    trace = {"samples": np.broadcast_to(samples, err.shape).astype(np.int32),
             "target_error": err, "q_error": err,
             "outer_iter": np.broadcast_to(np.arange(r), err.shape).astype(np.int32)}
    res = {"trace": trace, "q_star": np.full((5, 2), 10.0), "xi": 0.1,
           "contraction_bias": 10.0 * 0.9 ** np.arange(r)}
    out = qexp._family_summary(cfg, "garnet", "sgd", res, jax.random.key(0))
    row = out["rows"][0]
    assert row["best_constant_val"] == names[1] and not row["best_constant_at_grid_edge"]
    assert row["best_constant_test_oracle"] == names[2]
    assert row["theory"] == names[4]
    # test seeds: constant reaches at 500, theory at 300 -> ratio 5/3 (no spread: CI = point)
    np.testing.assert_allclose(row["ratio"]["value"], 500 / 300, rtol=1e-6)
    np.testing.assert_allclose(row["ratio"]["ci95"], [500 / 300] * 2, rtol=1e-6)
    np.testing.assert_allclose(row["ratio_test_oracle_constant"]["value"], 200 / 300, rtol=1e-6)
    # bias share at the hitting outer iteration n = 2: ||T^2 Q0 - Q*|| / eps
    np.testing.assert_allclose(row["bias_share"]["theory"], 10 * 0.81 / row["eps"], rtol=1e-6)


@pytest.mark.heavy
def test_suite_binary_smoke(tmp_path):
    # One fast method exercises the binary (every method's smoke run has its own test, and
    # tests/test_multihost.py runs the suite on two hosts); the rerun skips it.
    cmd = [sys.executable, "-m", "experiments.suite", "--preset=smoke", f"--workdir={tmp_path}",
           "--methods=qlearning"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    report = (tmp_path / "REPORT.md").read_text()
    assert "## qlearning" in report and "samples to eps" in report
    assert (tmp_path / "qlearning" / "summary.json").exists()
    assert not (tmp_path / "bco").exists()
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0 and "summary exists" in again.stdout + again.stderr
    assert "skipping" in again.stdout  # the console line of a method it skips
    assert (tmp_path / "REPORT.md").read_text() == report  # wall time kept from the first run


def test_censored_eps_are_left_out_of_the_ratio_growth_and_the_regime_row():
    cfg = qcfg.get_config("smoke")  # eps_rel (0.3, 0.15), ||Q*|| = 10: eps 3 and 1.5
    names, kinds, _ = qexp.build_schedules(cfg, "garnet")
    n_val, n_test, r = cfg.num_val_seeds, cfg.num_seeds, 5
    err = np.full((len(names), n_val + n_test, r), 10.0, np.float32)
    err[:, :, -1] = 0.0
    consts = [j for j, k in enumerate(kinds) if k[0] == "constant"]
    err[np.ix_(consts, np.arange(n_val, n_val + n_test), [r - 1])] = 2.0  # never <= 1.5
    theory = names.index("growth p=0.667 K0=10")
    err[theory, :, 2:] = 0.0
    trace = {"samples": np.broadcast_to(np.arange(1, r + 1) * 100, err.shape).astype(np.int32),
             "target_error": err, "q_error": err,
             "outer_iter": np.broadcast_to(np.arange(r), err.shape).astype(np.int32)}
    res = {"trace": trace, "q_star": np.full((5, 2), 10.0), "xi": 0.1,
           "contraction_bias": 10.0 * 0.5 ** np.arange(r)}
    out = qexp._family_summary(cfg, "garnet", "sgd", res, jax.random.key(0))
    assert [row["constant_reached"] for row in out["rows"]] == [1.0, 0.0]
    assert out["ratio_growth"]["eps_rel_used"] == [0.3]
    assert out["ratio_growth"]["ratio_last_over_first"] == 1.0
    # Both powers pick K0 = 10, the lower end of base_grid (10, 40): flagged.
    assert out["base_grid_edge_flags"] == ["p=0.667", "p=2"]
    out["headline"] = True
    rows = dict(qexp.headline({"families": [out]}))
    regime = [v for k, v in rows.items() if "regime at eps=0.3" in k]
    # theory hits at outer iteration 2: share 10 * 0.25 / 3; the constant at 4: 10/16 / 3.
    assert regime == [f"bias-dominated ({2.5 / 3:.2f}); variance-dominated ({0.625 / 3:.2f})"]
    assert any("K_0 picked at an end of base_grid" in k for k in rows)


def test_regime_names_follow_the_bias_share():
    assert qexp._regime(0.05).startswith("variance-dominated")
    assert qexp._regime(0.5).startswith("mixed")
    assert qexp._regime(1.3).startswith("bias-dominated")
    assert qexp._regime(float("nan")) == "n/a" and qexp._regime(None) == "n/a"
