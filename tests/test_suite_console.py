"""What the suite prints: one start line per method, the methods' result lines, no
per-grid-point progress, no echo of REPORT.md, the ``results:`` line last; a mistyped flag
is named with the closest one; ``jaxlab --help`` imports no jax."""

import logging
import os
import subprocess
import sys

import pytest

from experiments.lib import progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(*args, **env):
    return subprocess.run([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300,
                          env={**os.environ, "JAX_PLATFORMS": "cpu", **env})


def test_suite_console_is_start_result_and_done_lines_then_the_results_line(tmp_path):
    workdir = tmp_path / "r"
    out = _python("-m", "tests.console_program", str(workdir))
    assert out.returncode == 0, out.stdout[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    starts = [ln for ln in lines if ": running preset smoke" in ln]
    assert starts == ["[1/2] toy_a: running preset smoke (Toy a)",
                      "[2/2] toy_b: running preset smoke (Toy b)"], lines
    for name in ("toy_a", "toy_b"):
        assert sum(f"{name} result: mean 1.000" in ln for ln in lines) == 1, lines
        assert sum(ln.startswith(f"[{1 + (name == 'toy_b')}/2] {name}: done in ")
                   and ln.endswith("; mean: 1.000") for ln in lines) == 1, lines
    assert not any("grid point" in ln or "items/s" in ln or "updates/s" in ln
                   for ln in lines), lines
    report = (workdir / "REPORT.md").read_text()
    assert report.startswith("# jaxlab results")
    assert not any(ln.startswith(("# jaxlab results", "## toy", "| metric")) for ln in lines)
    assert lines[-1] == f"results: {workdir} (REPORT.md, report.html, toy_a/, toy_b/)"
    # a rerun reuses both summaries and says so, one line each
    out = _python("-m", "tests.console_program", str(workdir))
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    assert [ln for ln in lines if "skipping" in ln] == [
        f"[{i}/2] toy_{c}: summary exists for this config and code, skipping (--force "
        "reruns it)" for i, c in ((1, "a"), (2, "b"))], lines
    assert lines[-1].startswith("results: ")


def _info_lines(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]


def test_progress_off_a_terminal_is_silent_for_short_work_and_throttled(caplog):
    caplog.set_level("INFO")
    bar = progress.Progress(4, "short", unit="updates", log_every_s=60)
    for _ in range(4):
        bar.update(1)
    bar.close()
    report = progress.comparison_reporter(log_every_s=60)
    for g in range(5):
        for done in range(1, 3):
            report(done, 2, f"tuning point {g}")
    assert _info_lines(caplog) == []  # all done within a minute: nothing printed
    bar = progress.Progress(3, "every", unit="updates", log_every_s=0)
    for _ in range(3):
        bar.update(1)
    assert [m.split(" (")[0] for m in _info_lines(caplog)] == [
        "every: 1/3 updates", "every: 2/3 updates", "every: 3/3 updates"]


def test_a_mistyped_suite_flag_is_named_with_the_closest_one(tmp_path):
    out = _python("-m", "experiments.suite", "--workdr=x")
    assert out.returncode == 2
    assert out.stdout.strip() == "error: unknown flag --workdr (did you mean --workdir?)"
    assert not (tmp_path / "x").exists()


def test_a_mistyped_binary_flag_is_named_before_the_missing_workdir():
    from experiments import common

    argv = ["experiments/qlearning.py", "--workdr=w"]
    qlearning = "experiments/configs/qlearning.py:smoke"
    assert common.check_argv(argv, qlearning) == (
        "error: unknown flag --workdr (did you mean --workdir?)")
    assert common.check_argv(argv[:1] + ["--workdir=w", "--show_confg"], qlearning) == (
        "error: unknown flag --show_confg (did you mean --show_config?)")
    assert common.check_argv(argv[:1] + ["--workdir=w", "--noshow_config"], qlearning) is None
    assert common.check_argv(argv[:1] + ["--workdir=w", "--zzz=1"], qlearning) == (
        "error: unknown flag --zzz")


@pytest.mark.parametrize("argv", [["--help"], []], ids=["help", "no_args"])
def test_the_binary_listing_imports_no_jax(argv):
    code = (f"import sys; from experiments import cli; rc = cli.main({argv!r}); "
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'jax', 'jaxlib', "
            "'jaxlab', 'numpy', 'absl'}); print('RC', rc, 'HEAVY', heavy)")
    out = _python("-c", code)
    assert out.returncode == 0, out.stdout[-2000:]
    assert "qlearning" in out.stdout and "bench_sale" in out.stdout
    assert out.stdout.splitlines()[-1] == f"RC {0 if argv else 2} HEAVY []"


def test_other_libraries_info_lines_are_dropped_ours_and_warnings_kept():
    from experiments.lib import console

    def record(path, level):
        return logging.LogRecord("absl", level, path, 1, "m", (), None)

    import orbax.checkpoint

    import jaxlab

    ours = os.path.join(os.path.dirname(console.__file__), "..", "dllm.py")
    library = os.path.join(os.path.dirname(jaxlab.__file__), "dllm", "poke.py")
    other = os.path.join(os.path.dirname(orbax.checkpoint.__file__), "io.py")
    script = os.path.join(ROOT, "tests", "console_program.py")
    assert "site-packages" in other.split(os.sep)
    for path in (ours, library, script):
        assert console.ours_or_warning(record(path, logging.INFO)), path
    assert not console.ours_or_warning(record(other, logging.INFO))
    assert console.ours_or_warning(record(other, logging.WARNING))
