"""The API reference (docs/, Sphinx autodoc + napoleon; issue 24).

``.ci/run`` builds it with warnings as errors after the tests (the gate); the build here is
``slow``. The runnable examples of ``docs/examples.rst`` run as doctests in the default
test run (``--doctest-glob=*.rst`` over ``docs/`` in pyproject.toml).
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


def test_api_page_covers_every_methods_one_shape():
    """Every registered method has an automodule block listing its constructor, State,
    Info, init and step, and those names exist in the package."""
    blocks = dict(re.findall(r"\.\. automodule:: jaxlab\.(\w+)\n\s+:members: ([^\n]+)",
                             _read("api.rst")))
    assert set(registry.METHODS) <= set(blocks), sorted(set(registry.METHODS) - set(blocks))
    for name in registry.METHODS:
        members = [m.strip() for m in blocks[name].split(",")]
        assert {"State", "Info", "init", "step"} <= set(members), (name, members)
        module = importlib.import_module(f"jaxlab.{name}")
        missing = [m for m in members if not hasattr(module, m)]
        assert not missing, (name, missing)


def test_core_page_covers_every_core_module():
    core = _read("core.rst")
    mods = {f[:-3] for f in os.listdir(os.path.join(os.path.dirname(DOCS), "jaxlab", "core"))
            if f.endswith(".py") and not f.startswith("_")}
    documented = set(re.findall(r"\.\. automodule:: jaxlab\.core\.(\w+)", core))
    assert mods == documented, (mods, documented)


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
    html = (tmp_path / "api.html").read_text()
    for name in registry.METHODS:
        assert f'id="jaxlab.{name}.State"' in html and f'id="jaxlab.{name}.step"' in html, name
