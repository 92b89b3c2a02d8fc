"""The wheel's layout: the repository's ``experiments/`` ships as ``jaxlab_experiments`` (so a
user's own ``experiments`` package is never shadowed), every package folder ships, and the
installed binaries, configs and weights work from a folder holding the user's own
``experiments`` package."""

import glob
import json
import os
import subprocess
import sys
import tomllib

import pytest

import experiments
from experiments.lib import artifacts, provenance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = {"experiments": "jaxlab_experiments"}  # repository folder -> installed name


def _pyproject() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def test_every_package_folder_is_listed():
    """``[tool.setuptools] packages`` lists every folder holding an ``__init__.py`` (under
    its installed name), and nothing else."""
    setup = _pyproject()["tool"]["setuptools"]
    found = set()
    for top in ("jaxlab", "pallas_kernels", "experiments"):
        for init in glob.glob(os.path.join(ROOT, top, "**", "__init__.py"), recursive=True):
            parts = os.path.relpath(os.path.dirname(init), ROOT).split(os.sep)
            found.add(".".join([SHIPPED.get(parts[0], parts[0]), *parts[1:]]))
    assert set(setup["packages"]) == found
    assert setup["package-dir"] == {v: k for k, v in SHIPPED.items()}
    scripts = _pyproject()["project"]["scripts"]
    assert all(v.startswith("jaxlab_experiments.cli:") for v in scripts.values())


def test_package_paths_resolve_under_either_name():
    assert experiments.package_path("experiments/configs/qlearning.py") == os.path.join(
        experiments.PACKAGE_DIR, "configs", "qlearning.py")
    assert experiments.package_path("experiments") == experiments.PACKAGE_DIR
    assert experiments.package_path("jaxlab/avatar/data") == os.path.join(
        os.path.dirname(experiments.PACKAGE_DIR), "jaxlab/avatar/data")
    assert artifacts.resolve("experiments/pretrained/dllm") == os.path.join(
        experiments.PACKAGE_DIR, "pretrained", "dllm")


def _env(**extra):
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**clean, "JAX_PLATFORMS": "cpu", **extra}


@pytest.mark.slow
def test_installed_wheel_beside_a_users_experiments_package(tmp_path):
    """Builds the wheel, installs it (no dependencies: they come from this interpreter's
    environment) into a folder first on ``PYTHONPATH``, and from a folder holding the user's
    own ``experiments`` package runs ``jaxlab qlearning`` on the shipped smoke config."""
    dist, target, user = tmp_path / "dist", tmp_path / "site", tmp_path / "user"
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    out = subprocess.run([*pip, "wheel", "--no-deps", "-w", str(dist), ROOT],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    (wheel,) = glob.glob(str(dist / "jaxlab-*.whl"))
    out = subprocess.run([*pip, "install", "--no-deps", "--target", str(target), wheel],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert sorted(os.listdir(target / "jaxlab_experiments" / "pretrained"))
    assert not (target / "experiments").exists()

    (user / "experiments").mkdir(parents=True)
    (user / "experiments" / "__init__.py").write_text("MINE = True\n")
    (user / "experiments" / "qlearning.py").write_text("raise SystemExit('user module ran')\n")
    before = {p: open(p).read() for p in glob.glob(str(user / "experiments" / "*"))}
    env = _env(PYTHONPATH=str(target))
    for i, cmd in enumerate([[str(target / "bin" / "jaxlab"), "qlearning"],
                             [sys.executable, "-m", "jaxlab_experiments.qlearning"]]):
        work = tmp_path / f"q{i}"
        out = subprocess.run([*cmd, "--config=experiments/configs/qlearning.py:smoke",
                              f"--workdir={work}"], cwd=user, env=env, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, (cmd, out.stderr[-3000:])
        assert json.loads((work / "summary.json").read_text())["provenance"]
    code = """if True:
        import json, experiments, jaxlab
        from jaxlab_experiments.lib import artifacts, provenance, registry
        print(json.dumps({"mine": experiments.MINE, "jaxlab": jaxlab.__file__,
                          "registry": registry.__file__, "code": provenance.code_version(),
                          "dllm": artifacts.pretrained_root(registry.get_config("dllm", "quick")),
                          "module": registry.METHODS["qlearning"].experiment_module}))"""
    out = subprocess.run([sys.executable, "-c", code], cwd=user, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["mine"] is True and got["module"] == "jaxlab_experiments.qlearning"
    for key in ("jaxlab", "registry", "dllm"):
        assert got[key].startswith(str(target)), (key, got[key])
    assert os.listdir(got["dllm"])
    # The installed files hash as the checkout does: summaries are reusable across the two.
    assert got["code"] == provenance.code_version()
    assert {p: open(p).read() for p in before} == before
