"""The binaries' command line: required --workdir, --help with config fields, one-line
errors for unknown config fields, no backend-probe noise on a CPU machine."""

import os
import subprocess
import sys

import pytest

from experiments import common

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QL = "experiments/configs/qlearning.py:smoke"


def _run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "experiments.qlearning", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env=env or {**os.environ, "JAX_PLATFORMS": "cpu"})


def test_check_argv_cases():
    argv = ["experiments/qlearning.py"]
    msg = common.check_argv(argv + [f"--config={QL}"], QL)
    assert msg.startswith("error: --workdir is required")
    assert common.check_argv(argv + ["--workdir=w", f"--config={QL}", "--config.gamma=0.5"],
                             QL) is None
    assert common.check_argv(argv + ["--workdir", "w", "--config.gamma", "0.5"], QL) is None
    msg = common.check_argv(argv + ["--workdir=w", "--config.gama=0.5"], QL)
    assert msg.startswith("error: --config.gama") and "--config.gamma" in msg
    assert "\n" not in msg
    text = common.check_argv(argv + ["--help"], QL)
    fields = common.config_fields(common.load_config(QL))
    assert all(f"--{k}" in text for k in fields) and "--workdir" in text
    with pytest.raises(FileNotFoundError, match="`--config`"):
        common.load_config("experiments/configs/nope.py:smoke")


def test_binary_exits_with_one_line_errors_and_help():
    out = _run(f"--config={QL}")
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0
    assert "--workdir is required" in out.stderr
    out = _run(f"--config={QL}", "--workdir=/tmp/unused", "--config.num_record=3")
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0
    assert "did you mean --config.num_records" in out.stderr
    out = _run(f"--config={QL}", "--help")
    assert out.returncode == 0 and "--config.num_records" in out.stdout
    assert "default: 40" in out.stdout  # the smoke preset's value, not quick's

# JAX's missing-backend INFO line is checked in tests/test_kill_resume.py (its uninterrupted
# run leaves JAX_PLATFORMS unset).
