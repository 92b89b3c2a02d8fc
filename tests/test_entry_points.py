"""The package works from any folder: console scripts, default configs resolved against the
installed package, one-line errors for missing extras, a pretrained_dir that must exist."""

import os
import subprocess
import sys
import textwrap

import ml_collections
import pytest

from experiments import cli, common
from experiments.lib import artifacts
from jaxlab.core import extras

BIN = os.path.dirname(sys.executable)


def _run(args, cwd, **env):
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**clean, "JAX_PLATFORMS": "cpu", **env})


@pytest.mark.heavy
def test_console_scripts_and_module_help_from_another_folder(tmp_path):
    """``jaxlab --help``, ``jaxlab-suite --help`` and ``python -m jaxlab_experiments.qlearning
    --help`` (the installed name of the repository's ``experiments``) from a folder holding
    nothing of the checkout; the default config (a path inside the package) loads, so its
    fields are listed."""
    for script in ("jaxlab", "jaxlab-suite"):
        assert os.path.exists(os.path.join(BIN, script)), f"{script} not installed"
    out = _run([os.path.join(BIN, "jaxlab"), "--help"], tmp_path)
    assert out.returncode == 0 and all(b in out.stdout for b in cli.BINARIES), out.stderr
    out = _run([os.path.join(BIN, "jaxlab-suite"), "--help"], tmp_path)
    assert out.returncode == 0 and "--preset" in out.stdout, out.stderr[-2000:]
    for args in ([sys.executable, "-m", "jaxlab_experiments.qlearning", "--help"],
                 [os.path.join(BIN, "jaxlab"), "qlearning", "--help"]):
        out = _run(args, tmp_path)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "--config.num_states" in out.stdout and "could not be loaded" not in out.stdout
    out = _run([os.path.join(BIN, "jaxlab"), "qlearnin"], tmp_path)
    assert out.returncode == 2 and "unknown binary 'qlearnin'" in out.stderr


@pytest.mark.heavy
def test_console_scripts_beside_a_users_experiments_package(tmp_path):
    """A folder holding the user's own ``experiments`` package: ``jaxlab`` runs the installed
    binaries (``jaxlab_experiments``), and the user's package stays the one imported."""
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "__init__.py").write_text("MINE = True\n")
    (tmp_path / "experiments" / "qlearning.py").write_text("raise SystemExit('user module')\n")
    out = _run([os.path.join(BIN, "jaxlab"), "qlearning", "--help"], tmp_path)
    assert out.returncode == 0 and "--config.num_states" in out.stdout, out.stderr[-2000:]
    out = _run([os.path.join(BIN, "jaxlab-suite"), "--help"], tmp_path)
    assert out.returncode == 0 and "--preset" in out.stdout, out.stderr[-2000:]
    out = _run([sys.executable, "-c", "import experiments, jaxlab_experiments as j; "
                "print(experiments.MINE, j.__name__)"], tmp_path)
    assert out.returncode == 0 and out.stdout.split() == ["True", "jaxlab_experiments"]


def test_default_config_resolves_against_the_package(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = common.resolve_config_spec("experiments/configs/qlearning.py:smoke")
    assert os.path.isabs(spec.split(":")[0]) and spec.endswith(":smoke")
    assert os.path.isfile(spec.split(":")[0])
    assert common.load_config("experiments/configs/qlearning.py:smoke").num_states > 0
    (tmp_path / "experiments" / "configs").mkdir(parents=True)
    (tmp_path / "experiments" / "configs" / "qlearning.py").write_text("x")
    assert common.resolve_config_spec("experiments/configs/qlearning.py") == (
        "experiments/configs/qlearning.py")  # a file in the cwd wins


@pytest.mark.parametrize("module, extra", [
    ("jaxlab.avatar", "ot"), ("ott.solvers.linear", "ot"), ("brax.io.mjcf", "rl"),
    ("sklearn.mixture", "vision"), ("skimage.data", "vision"), ("mlxtend.data", "vision"),
])
@pytest.mark.heavy
def test_missing_extra_is_one_line_naming_it(module, extra, tmp_path):
    """A fresh interpreter where the optional package is hidden: importing what needs it
    (``jaxlab.avatar`` needs networkx at import; the others through ``extras.require``)
    raises MissingExtraError whose one-line message names ``pip install 'jaxlab[extra]'``."""
    hide = {"jaxlab.avatar": "networkx"}.get(module, module.split(".")[0])
    target = module if module.startswith("jaxlab") else None
    code = textwrap.dedent(f"""
        import sys
        sys.modules[{hide!r}] = None
        from jaxlab.core import extras
        try:
            {f"import {target}" if target else f"extras.require({module!r})"}
        except extras.MissingExtraError as e:
            print("MSG", e)
        """)
    out = _run([sys.executable, "-c", code], tmp_path)
    msg = [ln for ln in out.stdout.splitlines() if ln.startswith("MSG ")]
    assert len(msg) == 1, out.stderr[-2000:]
    assert f"pip install 'jaxlab[{extra}]'" in msg[0]


def test_require_passes_other_import_errors_through():
    with pytest.raises(ModuleNotFoundError) as e:
        extras.require("jaxlab.no_such_module")
    assert not isinstance(e.value, extras.MissingExtraError)
    assert extras.extra_of("brax.mjx") == "rl" and extras.extra_of("numpy") is None


def test_cli_reports_a_missing_extra_in_one_line(monkeypatch, capsys):
    def boom(*a, **k):
        raise extras.MissingExtraError(extras.message("ott"))

    monkeypatch.setattr(cli.runpy, "run_module", boom)
    assert cli.main(["avatar", "--workdir=w"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install 'jaxlab[ot]'" in err


def test_pretrained_dir_must_exist_or_be_empty(tmp_path):
    c = ml_collections.ConfigDict({"pretrained_dir": str(tmp_path / "typo")})
    with pytest.raises(FileNotFoundError, match=r"config.pretrained_dir.*typo.*=''"):
        artifacts.pretrained_root(c)
    c.pretrained_dir = ""
    assert artifacts.pretrained_root(c) == ""
    c.pretrained_dir = "experiments/pretrained/dllm"  # relative to the package
    assert os.path.isdir(artifacts.pretrained_root(c))


@pytest.mark.parametrize("method", ["dllm", "gepc"])
def test_binaries_reject_a_typo_in_pretrained_dir_before_any_unit(method, tmp_path):
    from experiments.lib import registry

    config = registry.get_config(method, "smoke")
    config.pretrained_dir = "experiments/pretrained/no_such_model"
    with pytest.raises(FileNotFoundError, match="no_such_model"):
        registry.experiment(method).validate(config)
    assert not os.listdir(tmp_path)
