"""The README: short, the two set-up commands verbatim, one tested quickstart per method.

The quickstarts are ``docs/_quickstart/<method>.rst``, which the default test run collects as
doctests (``--doctest-glob=*.rst`` over ``docs/``); the README's ``pycon`` blocks must be
identical to them, so every README quickstart is run without running it twice. RFO's
training line is ``+SKIP`` there (it compiles the MJX gradient for about a minute); the
``slow`` test runs that quickstart whole.
"""

import doctest
import os
import re

import pytest

from experiments.lib import registry

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICKSTART = os.path.join(ROOT, "docs", "_quickstart")
MAIN = ("python3 -m venv .venv && .venv/bin/pip install -e '.[dev,ot,vision,rl]' && "
        ".venv/bin/python -m experiments.suite --preset=quick --workdir=results")
TEST = ("python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev,ot,vision,rl]' && "
        ".venv/bin/python -m pytest -q")


def _read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


def test_readme_is_short_and_has_the_two_commands():
    readme = _read("README.md")
    assert len(readme.splitlines()) <= 300
    blocks = re.findall(r"```bash\n(.*?)```", readme, re.S)
    assert MAIN in [b.strip() for b in blocks] and TEST in [b.strip() for b in blocks]
    assert TEST in _read(".ci", "run")  # CI runs the README's test command
    assert "../shared" not in readme


def test_every_readme_quickstart_is_a_tested_doctest():
    blocks = [b.strip() for b in re.findall(r"```pycon\n(.*?)```", _read("README.md"), re.S)]
    files = {f[:-4]: _read("docs", "_quickstart", f).strip()
             for f in sorted(os.listdir(QUICKSTART)) if f.endswith(".rst")}
    assert set(files) == {*registry.METHODS, "sale"}, sorted(files)
    assert sorted(blocks) == sorted(files.values())  # one per method, identical text
    for name, text in files.items():
        lines = text.splitlines()
        assert len(lines) <= 15 and max(map(len, lines)) <= 100, name
        assert doctest.DocTestParser().get_examples(text), name


@pytest.mark.slow
def test_rfo_quickstart_trains_when_not_skipped():
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # mujoco.mjx's optional-backend notice
        pytest.importorskip("mujoco.mjx.warp", exc_type=ImportError)
    text = _read("docs", "_quickstart", "rfo.rst").replace("  # doctest: +SKIP", "")
    text += "\n>>> info.eval_return.shape\n(3,)\n"
    test = doctest.DocTestParser().get_doctest(text, {}, "rfo quickstart", "rfo.rst", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_readme_lines_are_short_but_the_two_commands():
    long = [line for line in _read("README.md").splitlines()
            if len(line) > 120 and line not in (MAIN, TEST)]
    assert long == []


GUIDES = {"ql": "qlearning.rst", "bco": "bco.rst", "avatar": "avatar.rst", "gepc": "gepc.rst",
          "dllm": "dllm.rst", "rfo": os.path.join("_protocol", "rfo.rst"),
          "attention": "sale.rst"}


def test_every_readme_protocol_row_is_a_guide_doctest():
    """Each row of the README's protocol table names a problem builder that its guide's
    doctest calls, with that module's ``compare``."""
    table = _read("README.md").split("## The paper's protocol on your problem")[1]
    table = table.split("\n## ")[0]
    rows = re.findall(r"^\| [^|]+ \| `([\w.]+)\(", table, re.M)
    assert len(rows) == len(GUIDES), rows
    for builder in rows:
        alias = builder.split(".")[0]
        text = _read("docs", GUIDES[alias])
        code = "\n".join(e.source for e in doctest.DocTestParser().get_examples(text))
        assert f"{builder}(" in code and f"{alias}.compare(" in code, builder
