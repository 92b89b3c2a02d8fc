"""The examples a user copies use public names only: no code in the README, the guides and
quickstarts (``docs/``), the Colab notebooks or the library's docstring examples imports
(or reaches through a module for) a name that starts with ``_``."""

import ast
import json
import pathlib
import re
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PROMPT = re.compile(r"^\s*(?:>>>|\.\.\.)( ?)(.*)$")
FENCE = re.compile(r"^```(\w*)\s*$")


def _doctest_code(text: str) -> list[str]:
    """The statements of every ``>>>`` prompt in ``text`` (with their ``...`` lines)."""
    out = []
    for line in text.splitlines():
        m = PROMPT.match(line)
        if not m:
            continue
        if line.lstrip().startswith(">>>") or not out:
            out.append(m.group(2))
        else:
            out[-1] += "\n" + m.group(2)
    return out


def _rst_blocks(text: str) -> list[str]:
    """The bodies of ``.. code-block:: python`` / ``.. testcode::`` directives."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if re.match(r"^\s*\.\. (code-block|code|testcode|testsetup)::\s*(python|pycon)?\s*$",
                    lines[i]):
            body, i = [], i + 1
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                body.append(lines[i])
                i += 1
            out.append("\n".join(body))
        else:
            i += 1
    return out


def _markdown_blocks(text: str) -> list[str]:
    out, block, lang = [], None, ""
    for line in text.splitlines():
        m = FENCE.match(line.strip())
        if m and block is None:
            block, lang = [], m.group(1)
        elif m and block is not None:
            if lang in ("python", "py", "pycon", ""):
                out.append("\n".join(block))
            block = None
        elif block is not None:
            block.append(line)
    return out


def _sources() -> dict[str, list[str]]:
    """{file: [code lines]} of every place a user copies code from."""
    out = {}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    out["README.md"] = sum((_doctest_code(b) or [b] for b in _markdown_blocks(readme)), [])
    for path in sorted((ROOT / "docs").rglob("*.rst")) + sorted((ROOT / "docs").rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        lines = _doctest_code(text) + _rst_blocks(text)
        if path.suffix == ".md":
            lines += _markdown_blocks(text)
        out[str(path.relative_to(ROOT))] = lines
    for path in sorted((ROOT / "colab").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        out[str(path.relative_to(ROOT))] = ["".join(c["source"]) for c in cells
                                            if c["cell_type"] == "code"]
    for path in sorted((ROOT / "jaxlab").rglob("*.py")):
        out[str(path.relative_to(ROOT))] = _doctest_code(path.read_text(encoding="utf-8"))
    return out


def _private(name: str) -> bool:
    return any(part.startswith("_") and not (part.startswith("__") and part.endswith("__"))
               for part in name.split("."))


OUR_PACKAGES = ("jaxlab", "experiments", "pallas_kernels", "colab")


def _trees(chunks: list[str]) -> list[ast.AST]:
    """Each chunk parsed; a chunk that does not parse (a fragment) line by line."""
    trees = []
    for chunk in chunks:
        chunk = "\n".join(line for line in chunk.splitlines()
                          if not line.lstrip().startswith(("!", "%")))  # notebook shell
        try:
            trees.append(ast.parse(textwrap.dedent(chunk)))
        except SyntaxError:
            for line in chunk.splitlines():
                try:
                    trees.append(ast.parse(line.strip()))
                except SyntaxError:
                    pass
    return trees


def private_uses(*chunks: str) -> list[str]:
    """The private names the code ``chunks`` import from our packages, or reach through a
    module they imported from them (``module._name``)."""
    found, modules = [], set()
    trees = _trees(list(chunks))
    nodes = [node for tree in trees for node in ast.walk(tree)]
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in OUR_PACKAGES:
                    if _private(a.name):
                        found.append(a.name)
                    modules.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] in OUR_PACKAGES:
            if _private(node.module):
                found.append(node.module)
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    found.append(f"{node.module}.{a.name}")
                modules.add(a.asname or a.name)
    for node in nodes:
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                found.append(f"{base.id}...{node.attr}")
    return found


@pytest.mark.parametrize("code, expected", [
    ("from jaxlab.dllm import _tune", ["jaxlab.dllm._tune"]),
    ("from experiments.dllm import _goals as g", ["experiments.dllm._goals"]),
    ("import experiments.dllm as d\nd._versus(1)", ["d..._versus"]),
    ("from jaxlab.core import protocol\nprotocol._Log(None)", ["protocol..._Log"]),
    ("from jaxlab import qlearning\nqlearning.compare(k, m)", []),
    ("import numpy as np\nnp._private", []),
    ("x.__class__", []),
])
def test_the_checker_finds_private_names(code, expected):
    assert private_uses(code) == expected


def test_no_user_facing_code_uses_a_private_name():
    bad = {}
    for path, lines in _sources().items():
        found = private_uses(*lines)
        if found:
            bad[path] = found
    assert not bad, bad
