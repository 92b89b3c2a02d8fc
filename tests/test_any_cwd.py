"""The installed package and the notebooks' install cell work from outside the checkout.

Each check runs in a fresh interpreter whose working directory is a temporary folder, so
nothing is importable through the current directory: ``jaxlab``, ``jaxlab_experiments`` (the
repository's ``experiments`` under its installed name) and the shipped weights must come
from the installed package.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(code: str, cwd, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd,
                          env={**clean, **env}, capture_output=True, text=True, timeout=600)


def test_registry_and_weights_import_outside_the_checkout(tmp_path):
    """The registry up to ``train_and_evaluate`` as an installed user imports it (running it
    is what every method's notebook smoke test does, also from a temporary directory:
    tests/notebooks.py)."""
    proc = _run("""
        import json, os, sys
        from jaxlab_experiments.lib import artifacts, registry

        config = registry.get_config("qlearning", "smoke")
        assert callable(registry.experiment("qlearning").summarize)
        dirs = {m: artifacts.resolve(registry.get_config(m, "quick").pretrained_dir)
                for m in ("dllm", "gepc")}
        print(json.dumps({"cwd": os.getcwd(), "dirs": dirs, "path0": sys.path[0],
                          "registry": registry.__file__}))
        """, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["cwd"] == str(tmp_path) and not out["path0"].startswith(ROOT)
    for method, folder in out["dirs"].items():  # shipped weights found from anywhere
        assert os.path.isdir(folder) and os.listdir(folder), (method, folder)


@pytest.mark.parametrize("env", [{}, {"PYTHONPATH": ROOT}], ids=["editable", "on_path"])
def test_install_cell_is_a_no_op_where_the_checkout_is_installed_or_importable(env, tmp_path):
    """The cell must not clone or pip-install where jaxlab is an editable install of this
    checkout (it puts the checkout on ``sys.path``, for ``experiments``) or the checkout is
    importable (a clone from this bogus address would fail loudly)."""
    from colab import make_notebooks

    cell = make_notebooks.INSTALL.format(extras="dev")
    proc = _run(cell, cwd=tmp_path, JAXLAB_REPO=str(tmp_path / "no-such-repo"),
                JAXLAB_DIR=str(tmp_path / "clone"), **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (tmp_path / "clone").exists()
    assert f"jaxlab: {os.path.join(ROOT, 'jaxlab')}" in proc.stdout


def test_install_cell_finds_a_checkout_above_the_working_directory(tmp_path):
    """Jupyter started in ``colab/`` of an uninstalled checkout: the cell puts the checkout on
    ``sys.path`` instead of cloning. Simulated by hiding the installed package."""
    from colab import make_notebooks

    cell = make_notebooks.INSTALL.format(extras="dev")
    hide = ("import sys, importlib.abc\n"
            "class Hide(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'experiments' and not any(p == " + repr(ROOT) +
            " for p in sys.path):\n"
            "            raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, Hide())\n")
    proc = _run(hide + cell + "\nprint('ROOT', sys.path[0])", cwd=os.path.join(ROOT, "colab"),
                JAXLAB_REPO=str(tmp_path / "no-such-repo"), JAXLAB_DIR=str(tmp_path / "clone"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (tmp_path / "clone").exists()
    assert f"ROOT {ROOT}" in proc.stdout


def test_jaxlab_imports_from_the_folder_holding_a_clone_named_jaxlab(tmp_path):
    """The working directory holds the checkout as ``jaxlab/`` (a repository root, no
    ``__init__.py``): ``import jaxlab`` is the installed package, not that folder as a
    namespace package (the editable install puts a path entry on ``sys.path``, which beats
    a namespace portion; an import hook appended after the path finder would not)."""
    os.symlink(ROOT, tmp_path / "jaxlab")
    proc = _run("""
        import json, jaxlab, jaxlab_experiments
        print(json.dumps({"file": jaxlab.__file__, "version": jaxlab.__version__,
                          "experiments": jaxlab_experiments.__file__}))
        """, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["file"] and out["file"].endswith(os.path.join("jaxlab", "__init__.py"))
    assert out["version"] and out["experiments"]
