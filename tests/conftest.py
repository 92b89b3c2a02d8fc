import os

import pytest

from experiments.lib import compile_cache
from tests import memory

# Tests run on the CPU (interpret-mode kernels included), whatever the machine has.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# Checked mode (jaxlab.core.checks) is on in the test run: a NaN or a bound violation inside
# jit / vmap / scan at an entry point raises there instead of passing silently. Tests of
# the unchecked behaviour (flags) switch it off with ``checks(False)``. JAXLAB_CHECKS=0 runs
# the tests as a user's default run.
os.environ.setdefault("JAXLAB_CHECKS", "1")

# JAX's persistent compilation cache in a folder of its own (beside the user cache), so a
# repeated test run loads its programs instead of compiling them; set through JAX's own
# variables, so the pytest workers and the binaries that tests start use it too, and jax
# is not imported here. JAXLAB_COMPILATION_CACHE=<dir> or =0 (off) overrides it.
_CACHE = compile_cache.resolve(os.path.join(os.path.dirname(compile_cache.default_dir()),
                                            "xla-tests"))
if _CACHE is not None:
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _CACHE)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                          str(compile_cache.MIN_COMPILE_SECS))

# The bad-input sweep (tests/bad_inputs) records each case's outcome; the tally is printed
# at the end of every run that includes it (also under pytest-xdist: the reports carry it).
_BAD_INPUT_OUTCOMES: list[str] = []


def pytest_runtest_logreport(report):
    if report.when == "call":
        _BAD_INPUT_OUTCOMES.extend(v for k, v in report.user_properties
                                   if k == "bad_input_outcome")


def pytest_terminal_summary(terminalreporter):
    _write_peak_rss(terminalreporter)
    if _BAD_INPUT_OUTCOMES:
        from tests.bad_inputs.harness import OUTCOMES

        counts = ", ".join(f"{_BAD_INPUT_OUTCOMES.count(o)} {o}" for o in OUTCOMES)
        terminalreporter.write_line(
            f"bad-input tally: {len(_BAD_INPUT_OUTCOMES)} bad calls: {counts}")


# Peak memory (resident set) of each test process, printed at the end of the run: every
# pytest-xdist worker sends its own peak to the controller when it finishes.
_PEAK_RSS: dict[str, float] = {}


def _peak_rss_gb() -> float:
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, B on macOS
    return peak / (2**30 if sys.platform == "darwin" else 2**20)


def pytest_sessionfinish(session):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: report to the controller
        workeroutput["peak_rss_gb"] = _peak_rss_gb()


def pytest_testnodedown(node, error):
    peak = getattr(node, "workeroutput", {}).get("peak_rss_gb")
    if peak is not None:
        _PEAK_RSS[node.gateway.id] = peak


def _write_peak_rss(terminalreporter):
    peaks = _PEAK_RSS or {"main": _peak_rss_gb()}  # no workers: this process ran the tests
    terminalreporter.write_line("peak memory per test process: " + ", ".join(
        f"{k} {v:.2f} GB" for k, v in sorted(peaks.items())))


# JAXLAB_TEST_MEMORY=<file>: each test process appends "<resident GB after> <growth GB>
# <test id>" per test to <file>.<worker>, to find the tests that make a worker grow.
_MEMORY_LOG = os.environ.get("JAXLAB_TEST_MEMORY")
_LAST_RSS = [0.0]


def pytest_runtest_teardown(item):
    if _MEMORY_LOG:
        now = memory.rss_gb()
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(f"{_MEMORY_LOG}.{worker}", "a") as f:
            f.write(f"{now:.3f} {now - _LAST_RSS[0]:+.3f} {item.nodeid}\n")
        _LAST_RSS[0] = now


# Memory per test process: after a test file that leaves the process above
# tests.memory.RELEASE_ABOVE_GB resident, JAX's in-memory program caches are dropped (a later
# file that needs a program loads it from the persistent cache above) and freed heap pages
# go back to the system, so a worker's memory follows the files it runs instead of growing
# with every program the run has compiled (6 GB per worker without this). tests/rfo, whose
# MJX programs are large, does the same after each test.
@pytest.fixture(scope="module", autouse=True)
def _release_memory_after_each_file():
    yield
    memory.release_if_above()
