"""The plumbing knows no method: nothing under experiments/lib imports a method binary,
and each study declares its own TensorBoard series."""

import ast
import pathlib

import pytest

from experiments.lib import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]
BINARIES = {f"experiments.{n}" for n in registry.METHODS} | {"experiments.dllm_models"}


def _imports(path, text=None):
    """Every module ``path`` (or ``text`` as if it were ``path``) imports, relative imports
    (``from .. import x``) made absolute."""
    tree = ast.parse(path.read_text() if text is None else text)
    package = list(path.resolve().relative_to(ROOT).parent.parts)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield module
            yield from (f"{module}.{a.name}" for a in node.names)


@pytest.mark.parametrize("path", sorted((ROOT / "experiments" / "lib").glob("*.py")),
                         ids=lambda p: p.name)
def test_plumbing_imports_no_method_binary(path):
    assert not set(_imports(path)) & BINARIES, path.name


def test_relative_imports_are_resolved():
    text = "from .. import qlearning\nfrom ..configs import bco\nfrom . import study\n"
    names = set(_imports(ROOT / "experiments" / "lib" / "probe.py", text))
    assert {"experiments.qlearning", "experiments.configs.bco", "experiments.lib.study"} <= names
    assert "experiments.qlearning" in BINARIES


@pytest.mark.parametrize("name", sorted(registry.METHODS))
def test_each_study_declares_its_scalars(name):
    assert callable(registry.experiment(name).scalars)


SALE = ROOT / "pallas_kernels" / "sale"
SHARED = {"pallas_kernels._compat", "pallas_kernels.sale._checks", "pallas_kernels.sale.common",
          "pallas_kernels.sale.config", "pallas_kernels.sale.reference"}


@pytest.mark.parametrize("backend", ["block_sparse_attention_tpu", "mosaic_gpu"])
def test_sale_backends_import_only_the_common_modules(backend):
    """No import cycle among the kernels: the backends read what they share from
    ``common`` (and config / reference), never from the front ends that dispatch to them."""
    bad = {m for m in _imports(SALE / f"{backend}.py") if m.startswith("pallas_kernels.sale.")
           and ".".join(m.split(".")[:3]) not in SHARED}
    assert not bad


CODE_RUNNING_MODULES = {"pickle", "cPickle", "_pickle", "cloudpickle", "dill", "marshal",
                        "shelve", "joblib"}
CODE_RUNNING_CALLS = {"eval", "exec", "torch.load", "yaml.load", "yaml.unsafe_load",
                      "yaml.full_load", "pd.read_pickle", "pandas.read_pickle"}


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _code_running_loads(path, text=None) -> list[str]:
    """What in ``path`` (or ``text``) could run code hidden in loaded data: an import of a
    pickle-like module, ``eval`` / ``exec`` / ``torch.load`` / ``yaml.load`` calls, and
    ``allow_pickle=True``."""
    tree = ast.parse(path.read_text() if text is None else text)
    found = [m for m in _imports(path, text) if m.split(".")[0] in CODE_RUNNING_MODULES]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if _dotted(node.func) in CODE_RUNNING_CALLS:
                found.append(f"{_dotted(node.func)}()")
            found += [f"{k.arg}=True" for k in node.keywords if k.arg == "allow_pickle"
                      and not (isinstance(k.value, ast.Constant) and k.value.value is False)]
    return found


PACKAGES = ("jaxlab", "experiments", "pallas_kernels")


@pytest.mark.parametrize("package", PACKAGES)
def test_nothing_loaded_can_run_code(package):
    """Caches, workdirs and weights folders hold data only: no pickle, eval or exec."""
    bad = {str(p.relative_to(ROOT)): found for p in sorted((ROOT / package).rglob("*.py"))
           if (found := _code_running_loads(p))}
    assert not bad, bad


def test_code_running_loads_are_found():
    text = ("import pickle\nfrom dill import loads\nimport numpy as np\n"
            "np.load('a', allow_pickle=True)\neval('1')\nyaml.load(f)\n"
            "np.load('b', allow_pickle=False)\nloader.exec_module(m)\n")
    found = _code_running_loads(ROOT / "experiments" / "lib" / "probe.py", text)
    assert sorted(found) == sorted(["pickle", "dill", "dill.loads", "allow_pickle=True",
                                    "eval()", "yaml.load()"])
