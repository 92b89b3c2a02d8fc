"""The multi-host path, run for real: 2 local processes x 2 CPU devices joined by
``jax.distributed`` (``experiments.lib.cluster``), one mesh over all 4 devices.

Default: the core checks (global placement, all-gather, checkpoint/resume of global and
host-local trees, main-process writing, MJX model placement) and the suite, whose two-host
Q-learning summary must equal a single-device run's. ``-m slow``: every method's
binary at its smoke preset against its single-device run.
"""

import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from experiments.lib import cluster

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Summary entries that measure time on the machine or describe the run (provenance: device
# and process counts differ by design), not results of the method.
_TIMED = {"seconds", "wall_s", "scaling", "throughput", "env_steps_per_s",
          "speedup_vs_smallest_batch", "adjoint_scaling", "config", "provenance"}


def _run_cluster(args, timeout_s=600):
    out = cluster.run_local_cluster(args, num_processes=2, devices_per_process=2, cwd=ROOT,
                                    timeout_s=timeout_s)
    for r in out:
        assert r.returncode == 0, f"process {r.process_id}:\n{r.output[-5000:]}"
    return out


def _assert_same_results(a, b, path="summary", rtol=1e-5, atol=1e-6):
    """Recursively compares two JSON trees, skipping the timed entries."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys differ"
        for k in a:
            if k not in _TIMED:
                _assert_same_results(a[k], b[k], f"{path}.{k}", rtol, atol)
    elif isinstance(a, list) and a and not isinstance(a[0], int | float | None):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same_results(x, y, f"{path}[{i}]", rtol, atol)
    elif isinstance(a, int | float | list) and not isinstance(a, bool):
        np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                   rtol=rtol, atol=atol, err_msg=path)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def _single_device(method, preset, overrides, workdir):
    """The written summary of a run with everything on one device."""
    cfg_mod = importlib.import_module(f"experiments.configs.{method}")
    exp = importlib.import_module(f"jaxlab.{method}.experiment")
    cfg = cfg_mod.get_config(preset)
    cfg.update(overrides)
    cfg.mesh_shape = None
    exp.train_and_evaluate(cfg, str(workdir))
    return _load(workdir / "summary.json")


def _load(path):
    with open(path) as f:
        return json.load(f)


@pytest.mark.heavy
def test_library_imports_leave_the_backend_uninitialised():
    """``jax.distributed.initialize`` must run before any backend use, and the binaries call
    it after importing the library: importing must not touch a device."""
    code = ("import jax._src.xla_bridge as xb\n"
            "import experiments.suite, experiments.local_cluster, jaxlab.attention\n"
            "from experiments.lib import registry\n"
            "for name in registry.METHODS:\n"
            "    registry.experiment(name); registry.get_config(name, 'smoke')\n"
            "assert not xb._backends, list(xb._backends)\n"
            "print('CLEAN')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "CLEAN" in out.stdout


@pytest.mark.heavy
def test_two_hosts(tmp_path, monkeypatch):
    """Core checks on 2 processes x 2 devices (see tests/multihost_program.py), then the
    suite's Q-learning run over the 2-host mesh: exactly the single-device summary, with
    progress and the report from process 0 only."""
    monkeypatch.setenv("JAXLAB_PROGRESS_EVERY_S", "0")  # a progress line per update
    out = _run_cluster(["-m", "tests.multihost_program", f"--workdir={tmp_path}"])
    for r in out:
        for check in ("shard_batch/to_host", "resumable global run", "host-local checkpoint",
                      "write_json", "suite"):
            assert f"{check} OK" in r.output, r.output[-3000:]
    assert "updates/s" in out[0].output and "updates/s" not in out[1].output
    two = _load(tmp_path / "suite" / "qlearning" / "summary.json")
    _assert_same_results(two, _load(tmp_path / "single" / "summary.json"), rtol=0, atol=0)
    report = (tmp_path / "suite" / "REPORT.md").read_text()
    assert "4 device(s) of kind cpu, 2 processes" in report and "## qlearning" in report


# (method, preset overrides that make the batch axis divide over 4 devices)
_METHODS = [
    ("qlearning", {}),
    ("bco", {}),
    ("avatar", {"num_seeds": 4}),
    ("gepc", {}),
    ("dllm", {}),
    ("rfo", {"num_seeds": 4, "methods": ("rfo", "ppo")}),
]


@pytest.mark.slow
@pytest.mark.parametrize("method,overrides", _METHODS, ids=[m for m, _ in _METHODS])
def test_every_binary_on_two_hosts_equals_single_device(tmp_path, method, overrides):
    if method == "rfo":
        pytest.importorskip("brax")
    if method == "avatar":
        pytest.importorskip("ott")
    flags = [f"--config.{k}={v!r}" if isinstance(v, tuple) else f"--config.{k}={v}"
             for k, v in overrides.items()]
    hosts = tmp_path / "two_hosts"
    _run_cluster(["-m", f"experiments.{method}",
                  f"--config=experiments/configs/{method}.py:smoke", *flags,
                  f"--workdir={hosts}"], timeout_s=1200)
    single = _single_device(method, "smoke", overrides, tmp_path / "single")
    _assert_same_results(_load(hosts / "summary.json"), single, rtol=1e-4, atol=1e-4)
