"""The plumbing knows no method: nothing under experiments/lib imports a method binary,
and each study declares its own TensorBoard series."""

import ast
import pathlib

import pytest

from experiments.lib import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]
BINARIES = {f"experiments.{n}" for n in registry.METHODS} | {"experiments.dllm_models"}


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


@pytest.mark.parametrize("path", sorted((ROOT / "experiments" / "lib").glob("*.py")),
                         ids=lambda p: p.name)
def test_plumbing_imports_no_method_binary(path):
    assert not set(_imports(path)) & BINARIES, path.name


@pytest.mark.parametrize("name", sorted(registry.METHODS))
def test_each_study_declares_its_scalars(name):
    assert callable(registry.experiment(name).scalars)
