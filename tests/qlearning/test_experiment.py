import json
import os
import subprocess
import sys

import numpy as np

from experiments.configs import qlearning as qcfg
from experiments.lib import registry
from tests.notebooks import run_notebook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_smoke_experiment_writes_results_and_resumes(tmp_path):
    cfg = qcfg.get_config("smoke")
    s1, _ = run_notebook("qlearning", tmp_path)  # colab/qlearning.ipynb at smoke size
    assert os.path.exists(tmp_path / "summary.json")
    assert os.path.getsize(tmp_path / "error_vs_samples.png") > 1000
    with open(tmp_path / "summary.json") as f:
        on_disk = json.load(f)
    assert on_disk["schedules"] == s1["schedules"]
    # Every schedule learns: final error well below the initial ||Q*||_inf.
    lo, _ = s1["q_star_range"]
    assert all(v < 0.5 * lo for v in s1["final_target_error_mean"].values())
    # Rerunning in the same workdir restores the finished checkpoint: identical numbers.
    s2 = registry.train_and_evaluate("qlearning", cfg, str(tmp_path))
    e1, e2 = s1["final_target_error_mean"], s2["final_target_error_mean"]
    assert set(e1) == set(e2)
    np.testing.assert_allclose([e2[k] for k in e1], [e1[k] for k in e1])


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
    assert again.returncode == 0 and "summary exists" in again.stderr
    assert "skipping" in again.stderr
    assert (tmp_path / "REPORT.md").read_text() == report  # wall time kept from the first run
