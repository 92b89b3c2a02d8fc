"""The documentation (docs/, Sphinx autodoc + napoleon): one page per method.

``.ci/run`` builds it with warnings as errors after the tests (the gate); the build here is
``slow``. The runnable examples of ``docs/*.rst`` (``examples.rst`` and the quickstarts in
``docs/_quickstart/``) run as doctests in the default test run (``--doctest-glob=*.rst``
over ``docs/`` in pyproject.toml).
"""

import importlib
import os
import re
import subprocess
import sys

import pytest

from experiments.lib import registry

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs")


def _read(name):
    with open(os.path.join(DOCS, name)) as f:
        return f.read()


PAGES = (*registry.METHODS, "sale")
PARTS = ("The idea", "Use it on your own", "API", "Evidence", "Limits and known results")


def test_every_method_page_has_the_four_parts():
    """One page per method (and SALE): the idea, the own-problem example (the quickstart
    doctest), the API, the generated evidence and the limits; every page is in the index."""
    index = _read("index.rst")
    for name in PAGES:
        text = _read(f"{name}.rst")
        heads = [h for h in re.findall(r"^(.+)\n-{3,}$", text, re.M)]
        for part in PARTS:
            assert any(h.startswith(part) for h in heads), (name, part, heads)
        assert f".. include:: _quickstart/{name}.rst" in text, name
        assert f".. include:: evidence/{name}.rst" in text, name
        assert os.path.exists(os.path.join(DOCS, "evidence", f"{name}.rst")), name
        assert f"\n   {name}\n" in index, name
    for run in registry.LARGER_RUNS:  # the headline runs' pages, in their method's guide
        assert f".. include:: evidence/{run.folder}.rst" in _read(f"{run.method}.rst"), run
        assert os.path.exists(os.path.join(DOCS, "evidence", f"{run.folder}.rst")), run


def test_docs_stay_inside_the_repository():
    """No page links the design notes outside the repository or a tracker number."""
    for name in os.listdir(DOCS):
        if name.endswith((".rst", ".md")):
            text = _read(name)
            assert "../shared" not in text and "DESIGN.md" not in text, name
            assert not re.search(r"\bissues? \d+|\(#\d+\)", text, re.I), name


def test_api_covers_every_methods_one_shape():
    """Every registered method's page has the reference generated from its package's
    ``__all__`` (``.. apiref::``, docs/_ext/apiref.py), and that ``__all__`` holds the one
    shape: State, Info, init and step."""
    for name in registry.METHODS:
        assert f"\n.. apiref:: jaxlab.{name}\n" in _read(f"{name}.rst"), name
        module = importlib.import_module(f"jaxlab.{name}")
        assert {"State", "Info", "init", "step"} <= set(module.__all__), name


def test_core_page_covers_every_core_module():
    """The core page is the reference of ``jaxlab.core``, whose ``__all__`` names every
    core module."""
    assert "\n.. apiref:: jaxlab.core\n" in _read("core.rst")
    mods = {f[:-3] for f in os.listdir(os.path.join(os.path.dirname(DOCS), "jaxlab", "core"))
            if f.endswith(".py") and not f.startswith("_")}
    core = importlib.import_module("jaxlab.core")
    assert mods <= set(core.__all__), sorted(mods - set(core.__all__))


def test_examples_page_is_collected_as_doctests():
    """The examples are doctests of the default run, not prose: pyproject collects
    docs/*.rst and the page holds examples of several methods."""
    import tomllib

    with open(os.path.join(os.path.dirname(DOCS), "pyproject.toml"), "rb") as f:
        ini = tomllib.load(f)["tool"]["pytest"]["ini_options"]
    assert "docs" in ini["testpaths"] and "--doctest-glob=*.rst" in ini["addopts"]
    text = _read("examples.rst")
    for line in ("from jaxlab import qlearning", "from jaxlab import bco",
                 "from jaxlab.core import metrics", "from jaxlab.core import smc"):
        assert f">>> {line}" in text, line
    assert text.count(">>> ") >= 20


@pytest.mark.slow
def test_sphinx_build_has_no_warnings(tmp_path):
    res = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q",
                          "-b", "html", DOCS, str(tmp_path)], capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    for name in registry.METHODS:
        html = (tmp_path / f"{name}.html").read_text()
        assert f'id="jaxlab.{name}.State"' in html and f'id="jaxlab.{name}.step"' in html, name
    for page in tmp_path.glob("*.html"):  # NamedTuple fields: no collections boilerplate
        assert "Alias for field number" not in page.read_text(), page.name
