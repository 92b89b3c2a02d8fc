"""The binaries' command line: required --workdir, --help with config fields, one-line
errors for a mistyped preset, config field or value, the config in ``config.json`` (on the
console only with --show_config), a last line naming the results folder, no backend-probe
noise on a CPU machine."""

import json
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


@pytest.mark.heavy
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


def test_check_argv_answers_a_mistyped_preset_or_value_in_one_line():
    argv = ["experiments/qlearning.py", "--workdir=w"]
    cases = {
        "--config=experiments/configs/qlearning.py:smok": ["'smok'", "smoke, quick"],
        "--config.eps_rel=abc": ["--config.eps_rel=abc", "tuple of numbers", "(0.3, 0.15)"],
        "--config.num_seeds=1.5": ["--config.num_seeds=1.5", "an integer", "is 4"],
        "--config.families=3": ["--config.families=3", "tuple of names"],
        "--config.sampling=1": None,  # a string field takes any text
        "--config.eps_rel=(0.2, 0.1)": None,
        "--config.gamma=1e-1": None,
        "--preset=smok": ["--preset=smok", "--config=experiments/configs/qlearning.py:smok"],
    }
    for arg, expected in cases.items():
        msg = common.check_argv(argv + [f"--config={QL}", arg], QL)
        if expected is None:
            assert msg is None, (arg, msg)
        else:
            assert msg.startswith("error: ") and "\n" not in msg, (arg, msg)
            assert all(e in msg for e in expected), (arg, msg)
    msg = common.check_argv(argv + ["--config=experiments/configs/nope.py"], QL)
    assert msg.startswith("error: --config=experiments/configs/nope.py: no config file"), msg


def _lines(out) -> list[str]:
    return [ln for ln in out.stdout.splitlines() if ln.strip()]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """The qlearning smoke binary run into ``<tmp>/qlearning`` (stdout and stderr merged in
    the order written)."""
    workdir = tmp_path_factory.mktemp("console") / "qlearning"
    out = subprocess.run([sys.executable, "-m", "experiments.qlearning", f"--config={QL}",
                          f"--workdir={workdir}"], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=600,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    return workdir, out


@pytest.mark.heavy
def test_smoke_binary_ends_naming_its_results_and_keeps_the_config_in_a_file(smoke_run):
    workdir, out = smoke_run
    assert out.returncode == 0, out.stdout[-3000:]
    last = _lines(out)[-1]
    with open(workdir / "summary.json") as f:
        summary = json.load(f)
    figures = summary["provenance"]["figures"]
    assert figures
    assert last == (f"results: {workdir} (config.json, summary.json, figures: "
                    f"{', '.join(figures)})")
    assert "!!python/tuple" not in out.stdout and '"eps_rel"' not in out.stdout
    with open(workdir / "config.json") as f:
        assert json.load(f) == summary["provenance"]["config"]


@pytest.mark.heavy
def test_show_config_prints_it_as_json(smoke_run):
    workdir, _ = smoke_run  # finished units: this rerun only summarizes and plots
    out = subprocess.run([sys.executable, "-m", "experiments.qlearning", f"--config={QL}",
                          f"--workdir={workdir}", "--show_config"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout.split("config:\n", 1)[1].rsplit("\nresults: ", 1)[0]
    assert json.loads(text) == json.loads((workdir / "config.json").read_text())
    assert "!!python/tuple" not in out.stdout + out.stderr
    assert _lines(out)[-1].startswith(f"results: {workdir} (config.json, summary.json")


def test_suite_ends_naming_its_results(smoke_run):
    """The suite at the smoke preset over the binary's folder: the qlearning summary is
    current, so the suite only writes its report, then names the folder."""
    workdir, _ = smoke_run
    out = subprocess.run([sys.executable, "-m", "experiments.suite", "--preset=smoke",
                          "--methods=qlearning", f"--workdir={workdir.parent}"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert "skipping" in out.stdout  # the binary's summary was reused
    assert _lines(out)[-1] == (f"results: {workdir.parent} (REPORT.md, report.html, "
                               "qlearning/)")


@pytest.mark.parametrize("args, expected", [
    ([f"--config={QL[:-1]}"], ["'smok'", "smoke, quick, cpu_long or full"]),
    (["--config.eps_rel=abc"], ["--config.eps_rel=abc", "tuple of numbers"]),
    (["--config.nosuchfield=1"], ["--config.nosuchfield", "did you mean"]),
    (["--config.num_seeds=abc"], ["--config.num_seeds=abc", "an integer"]),
    (["--config.inner_loop=foo"], ["'foo'", "running_mean", "sgd"]),  # the study's validate
    (["--nosuchflag=1"], ["nosuchflag"]),  # absl's own check
], ids=["preset", "tuple_value", "field", "int_value", "validate", "flag"])
@pytest.mark.heavy
def test_a_mistyped_preset_field_or_value_is_one_clear_line(args, expected, tmp_path):
    out = _run(f"--config={QL}", *args, f"--workdir={tmp_path / 'w'}")
    text = out.stdout + out.stderr
    assert out.returncode == 2, text[-3000:]
    assert out.stderr.strip().count("\n") == 0 and out.stderr.startswith("error: "), text
    assert "Traceback" not in text and "FATAL" not in text
    assert all(e in out.stderr for e in expected), out.stderr
    assert not (tmp_path / "w").exists()  # answered before any work


def test_the_suite_answers_a_mistyped_preset_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "experiments.suite", "--preset=smok",
                          f"--workdir={tmp_path}"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 2 and "Traceback" not in out.stderr and "FATAL" not in out.stderr
    assert out.stderr.strip() == ("error: flag --preset=smok: value should be one of "
                                  "<smoke|quick|full>")


@pytest.mark.parametrize("args,says", [
    (["--seeds=x"], "--seeds"),          # a bad flag value
    (["--workdr=w"], "workdr"),          # a mistyped flag
    ([], "--workdir is required"),       # no workdir
])
@pytest.mark.heavy
def test_wholegraph_binary_flag_errors_are_one_line(args, says):
    out = subprocess.run([sys.executable, "-m", "experiments.avatar_wholegraph", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], lines
    assert "Traceback" not in out.stderr and "FATAL" not in out.stderr
