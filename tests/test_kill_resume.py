"""kill -9 in the middle of a run, then rerun: the summary is byte-identical to an
uninterrupted run's (orbax checkpoints per chunk, provenance without timestamps)."""

import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cmd(workdir):
    return [sys.executable, "-m", "experiments.qlearning",
            "--config=experiments/configs/qlearning.py:smoke", "--config.num_records=64",
            "--config.num_chunks=8", f"--workdir={workdir}"]


def _first_committed_step(workdir):
    root = workdir / "checkpoints"
    if not root.exists():
        return None
    for key in os.listdir(root):
        for step in os.listdir(root / key):
            if step.isdigit() and (root / key / step / "commit_success.txt").exists():
                return step
    return None


# A subprocess run killed and rerun: 70 s at -n 2, so -m slow; every smoke study also checks
# that a rerun reuses finished units.
@pytest.mark.slow
def test_kill_9_mid_run_then_rerun_gives_identical_summary(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    full = tmp_path / "full"
    # Without JAX_PLATFORMS JAX probes for a TPU; the binary must not print that probe's
    # "Unable to initialize backend 'tpu' ... libtpu.so" INFO line.
    probe_env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    out = subprocess.run(_cmd(full), cwd=ROOT, env=probe_env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Unable to initialize backend" not in out.stderr and "libtpu" not in out.stderr

    killed = tmp_path / "killed"
    proc = subprocess.Popen(_cmd(killed), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while _first_committed_step(killed) is None and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert not (killed / "summary.json").exists()

    out = subprocess.run(_cmd(killed), cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (killed / "summary.json").read_bytes() == (full / "summary.json").read_bytes()
