"""One version: ``pyproject.toml``, ``jaxlab.__version__`` and the newest released section
of CHANGELOG.md agree, and released sections are dated and in order."""

import os
import re
import tomllib

import jaxlab

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_version_is_the_same_everywhere():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    assert jaxlab.__version__ == version
    with open(os.path.join(ROOT, "CHANGELOG.md"), encoding="utf-8") as f:
        headings = re.findall(r"^## (.+)$", f.read(), re.MULTILINE)
    assert headings[0] == "Unreleased"
    released = [re.fullmatch(r"(\d+)\.(\d+)\.(\d+) - (\d{4}-\d{2}-\d{2})", h) for h in
                headings[1:]]
    assert all(released), headings
    assert ".".join(released[0].groups()[:3]) == version
    numbers = [tuple(int(x) for x in m.groups()[:3]) for m in released]
    dates = [m.group(4) for m in released]
    assert numbers == sorted(numbers, reverse=True) and dates == sorted(dates, reverse=True)
