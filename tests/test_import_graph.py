"""No import cycles: the modules of ``experiments/lib`` and of ``jaxlab`` (every subpackage)
form an acyclic graph, so each module knows only the modules below it.

The graph is read from the source (AST), with every import statement counted wherever it
stands (module level or inside a function):

- ``import P.x`` (``as`` or not) is an edge to ``P.x``;
- ``from P.x import name`` is an edge to ``P.x.name`` when that is a module (a submodule of
  the package ``P.x``), else to ``P.x``; so ``from P import x`` is an edge to the module
  ``P.x``, and ``from P import NAME`` (a name defined in ``P/__init__.py``) an edge to the
  package ``P``;
- relative imports resolve against the importing module; imports of modules outside the
  scanned package are not edges.
"""

import ast
import pathlib
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _modules(folder: pathlib.Path, package: str) -> dict[str, pathlib.Path]:
    """{dotted module name: file} of every ``.py`` file under ``folder`` (the package
    ``package``); a package's ``__init__.py`` is the package's own name."""
    out = {}
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(folder).with_suffix("")
        parts = [p for p in rel.parts if p != "__init__"]
        if "__pycache__" in rel.parts:
            continue
        out[".".join([package, *parts])] = path
    return out


def _imported(node: ast.AST, module: str, is_package: bool) -> list[str]:
    """The dotted names one import statement reaches (candidates, not yet resolved)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module
    return [f"{source}\0{a.name}" for a in node.names]


def module_graph(folder: pathlib.Path, package: str) -> dict[str, set[str]]:
    """{module: modules it imports} for the package ``package`` whose files are under
    ``folder``, by the rule in this file's docstring."""
    modules = _modules(folder, package)
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        edges = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _imported(node, module, is_package):
                if "\0" in name:  # from source import name
                    source, attr = name.split("\0")
                    target = f"{source}.{attr}" if f"{source}.{attr}" in modules else source
                else:
                    target = name
                if target in modules and target != module:
                    edges.add(target)
        graph[module] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as ``[a, b, ..., a]``, or None when it is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


@pytest.mark.parametrize("folder, package", [
    (ROOT / "experiments" / "lib", "experiments.lib"),
    (ROOT / "jaxlab", "jaxlab"),
], ids=["experiments.lib", "jaxlab"])
def test_package_has_no_import_cycle(folder, package):
    graph = module_graph(folder, package)
    assert len(graph) > 5, f"no modules found under {folder}"
    cycle = find_cycle(graph)
    assert cycle is None, f"import cycle in {package}: {' -> '.join(cycle)}"


def _write(root: pathlib.Path, files: dict[str, str]) -> pathlib.Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_the_graph_follows_the_rule(tmp_path):
    """Each import form becomes the edge the rule says (checked on a package written here)."""
    pkg = _write(tmp_path / "pkg", {
        "__init__.py": "VERSION = 1\n",
        "a.py": "import pkg.b\nimport os\n",
        "b.py": "from pkg import c, VERSION\n",
        "c.py": "def f():\n    from pkg.sub import d\n",
        "sub/__init__.py": "",
        "sub/d.py": "from . import e\nfrom ..c import f\nfrom .e import NAME\n",
        "sub/e.py": "NAME = 1\nfrom .. import VERSION\n",
    })
    assert module_graph(pkg, "pkg") == {
        "pkg": set(),
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.c", "pkg"},
        "pkg.c": {"pkg.sub.d"},
        "pkg.sub": set(),
        "pkg.sub.d": {"pkg.sub.e", "pkg.c"},
        "pkg.sub.e": {"pkg"},
    }


def test_a_cycle_is_found_and_named(tmp_path):
    """The check cannot pass silently: a three-module circle through a function-level import
    and a ``from package import module`` is reported with every module on it, and the same
    package without the closing import passes."""
    files = {
        "__init__.py": "",
        "a.py": "from pkg import b\n",
        "b.py": "from pkg.c import g\n",
        "c.py": "def g():\n    import pkg.a\n",
        "d.py": "import pkg.a\n",
    }
    cycle = find_cycle(module_graph(_write(tmp_path / "pkg", files), "pkg"))
    assert cycle is not None and cycle[0] == cycle[-1]
    assert sorted(set(cycle)) == ["pkg.a", "pkg.b", "pkg.c"]
    files["c.py"] = "def g():\n    import os\n"
    assert find_cycle(module_graph(_write(tmp_path / "ok", files), "pkg")) is None


def test_a_name_from_the_package_init_is_an_edge_to_the_package(tmp_path):
    """``from pkg import NAME`` inside ``pkg.a``, while ``pkg/__init__.py`` imports ``pkg.a``:
    a cycle between the package and its module."""
    pkg = _write(tmp_path / "pkg", {"__init__.py": "from pkg.a import f\nNAME = 1\n",
                                    "a.py": "def f():\n    from pkg import NAME\n"})
    assert find_cycle(module_graph(pkg, "pkg")) in (["pkg", "pkg.a", "pkg"],
                                                    ["pkg.a", "pkg", "pkg.a"])
