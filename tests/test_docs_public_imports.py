"""No code in the README or the docs imports a private name: a module path component or an
imported name that starts with ``_`` (``__future__`` aside). What a guide shows a user must
be public API."""

import glob
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FROM = re.compile(r"^from\s+([\w.]+)\s+import\s+\(?([\w\s,]+)\)?")
_IMPORT = re.compile(r"^import\s+([\w.\s,]+?)(\s+as\s+\w+)?$")


def private_imports(text: str) -> list[str]:
    """The import lines of ``text`` (doctest prompts stripped) that name a private module
    or name."""
    bad = []
    for raw in text.splitlines():
        line = re.sub(r"^\s*(>>>|\.\.\.)\s?", "", raw).strip()
        m = _FROM.match(line)
        if m:
            parts = m.group(1).split(".") + [n.split(" as ")[0].strip()
                                             for n in m.group(2).split(",") if n.strip()]
        else:
            m = _IMPORT.match(line)
            if not m:
                continue
            parts = [p for name in m.group(1).split(",") for p in name.strip().split(".")]
        if any(p.startswith("_") and p != "__future__" for p in parts if p):
            bad.append(raw.strip())
    return bad


def _pages():
    yield os.path.join(ROOT, "README.md")
    for pattern in ("docs/*.rst", "docs/_quickstart/*.rst", "docs/*.md"):
        yield from sorted(glob.glob(os.path.join(ROOT, pattern)))


def test_docs_and_readme_import_no_private_name():
    found = {}
    for path in _pages():
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                bad = private_imports(f.read())
            if bad:
                found[os.path.relpath(path, ROOT)] = bad
    assert not found, found


def test_the_check_sees_private_imports():
    text = """
>>> from jaxlab.gepc.comparison import _Features
>>> from jaxlab.core import protocol, _helper as h
import jaxlab._compat
>>> from jaxlab import gepc
from __future__ import annotations
"""
    assert private_imports(text) == [">>> from jaxlab.gepc.comparison import _Features",
                                     ">>> from jaxlab.core import protocol, _helper as h",
                                     "import jaxlab._compat"]
