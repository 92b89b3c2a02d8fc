"""Each extra installs and runs alone: with every optional package of the [ot], [rl] and
[vision] extras unimportable, the suite's and the console scripts' ``--help`` work, the
suite runs the methods that need no extra, and selecting one that does fails with the
one-line message naming the extra.

Each check runs a fresh interpreter whose meta path starts with a finder that refuses the
optional packages (as in an install with ``[dev]`` only), from an empty folder with the
checkout on ``PYTHONPATH``.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from experiments import suite
from experiments.lib import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCKED = ("ott", "networkx", "brax", "mujoco", "skimage", "sklearn", "mlxtend")

PRELUDE = textwrap.dedent(f"""
    import importlib.abc, sys

    class _NoExtras(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {BLOCKED!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, _NoExtras())
    """)


def _run(code: str, cwd, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code), *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _main(module: str) -> str:
    """Code running ``module`` as ``__main__`` with the interpreter's arguments, then printing
    which blocked packages got imported (none may)."""
    return f"""
        import runpy
        sys.argv = ["{module}", *sys.argv[1:]]
        try:
            runpy.run_module("{module}", run_name="__main__", alter_sys=True)
        finally:
            print("IMPORTED", sorted(m for m in sys.modules
                                     if m.split(".")[0] in {BLOCKED!r} and sys.modules[m]))
        """


def test_the_finder_blocks_every_optional_package(tmp_path):
    """The check below means something: the blocked packages really fail to import (and
    ``extras.require`` turns that into the one-line message)."""
    out = _run(f"""
        from jaxlab.core import extras
        for name in {BLOCKED!r}:
            try:
                extras.require(name)
            except extras.MissingExtraError as e:
                print("MISSING", name, e)
        """, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    missing = [ln.split()[1] for ln in out.stdout.splitlines() if ln.startswith("MISSING ")]
    assert missing == list(BLOCKED)


@pytest.mark.parametrize("module, want", [
    ("experiments.suite", "--preset"),
    ("experiments.cli", "jaxlab-suite runs every method"),
])
def test_help_needs_no_extra(module, want, tmp_path):
    out = _run(_main(module), tmp_path, "--help")
    assert out.returncode == 0, out.stderr[-3000:]
    assert want in out.stdout and "IMPORTED []" in out.stdout, out.stdout[-2000:]


def test_suite_help_through_the_console_entry_point(tmp_path):
    out = _run("""
        from experiments import cli
        sys.exit(cli.suite(["--help"]))
        """, tmp_path)
    assert out.returncode == 0 and "--methods" in out.stdout, out.stderr[-3000:]


# Minutes on a loaded 2-core machine; .ci/run runs the same from a [dev]-only venv.
@pytest.mark.slow
def test_suite_runs_qlearning_and_bco_without_the_extras(tmp_path):
    work = tmp_path / "results"
    out = _run(_main("experiments.suite"), tmp_path, "--preset=smoke", f"--workdir={work}",
               "--methods=qlearning,bco")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "IMPORTED []" in out.stdout
    report = (work / "REPORT.md").read_text()
    assert "## qlearning" in report and "## bco" in report
    for method in ("qlearning", "bco"):
        summary = json.loads((work / method / "summary.json").read_text())
        assert summary["provenance"]["config_hash"]
    assert {f for f in os.listdir(work) if not f.startswith(".")} == {
        "REPORT.md", "report.html", "qlearning", "bco"}


@pytest.mark.parametrize("method", [m for m, spec in registry.METHODS.items()
                                    if spec.extras != "dev"])
@pytest.mark.heavy
def test_selecting_a_method_whose_extra_is_missing_is_one_line(method, tmp_path):
    """Fails before any method runs (qlearning, listed first, leaves no folder), exit 2,
    one line naming ``pip install 'jaxlab[<extra>]'``, from the module and the script."""
    extra = registry.METHODS[method].extras
    for code in (_main("experiments.suite"),
                 "from experiments import cli\nsys.exit(cli.suite(sys.argv[1:]))"):
        out = _run(code, tmp_path, "--preset=smoke", f"--workdir={tmp_path / 'w'}",
                   f"--methods=qlearning,{method}")
        assert out.returncode == 2, out.stderr[-3000:]
        errors = [ln for ln in out.stderr.splitlines() if ln.startswith("error: ")]
        assert len(errors) == 1 and f"pip install 'jaxlab[{extra}]'" in errors[0], out.stderr
        assert "Traceback" not in out.stderr
        assert not (tmp_path / "w" / "qlearning").exists()


def test_whole_graph_folder_name_matches_its_study():
    pytest.importorskip("networkx")
    from experiments.lib import wholegraph_study

    assert suite.WHOLEGRAPH_FOLDER == wholegraph_study.FOLDER


def test_suite_imports_no_method_package():
    """In this process too: importing the suite and the registry leaves method packages to
    the methods that run (checked in a fresh interpreter)."""
    out = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        import experiments.suite, experiments.cli
        from experiments.lib import registry
        for name in registry.METHODS:
            registry.get_config(name, "smoke")
        print(sorted(m for m in sys.modules if m.startswith("jaxlab.")
                     and m.split(".")[1] in registry.METHODS))
        """)], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_whole_graph_section_is_left_out_without_its_extra(tmp_path):
    """A results folder holding a whole-graph summary still gets its report without [ot]:
    that section is left out with a warning naming the extra."""
    out = _run("""
        from experiments import suite
        print("STUDY", suite._wholegraph_study())
        """, tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "STUDY None" in out.stdout
    assert "avatar_wholegraph: section left out" in out.stderr
    assert "pip install 'jaxlab[ot]'" in out.stderr
