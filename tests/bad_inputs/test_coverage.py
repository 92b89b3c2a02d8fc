"""Which public functions the bad-input sweep reaches.

A function counts as reached when a case's name names it (``<module>.<function>: what is
bad``, the convention of every ``cases_*.py``). ``UNREACHED`` lists, exactly, the public
functions of the documented packages that no case names yet: a new public function needs a
case (or an entry here, visible in review), and a function that gains a case leaves the
list. Checkers themselves (``validation``, ``checked``), type aliases and classes are out
of scope.
"""

import importlib
import inspect
import os
import re
import runpy

from tests.bad_inputs import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_OF_SCOPE = ("jaxlab.core.validation", "jaxlab.core.checked", "jaxlab.core.types")
UNREACHED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unreached.txt")


def public_functions() -> dict[str, object]:
    """{first public name: function} over the packages of the API reference."""
    packages = runpy.run_path(os.path.join(ROOT, "docs", "conf.py"))["apiref_packages"]
    seen, found = set(), {}

    def walk(modname):
        module = importlib.import_module(modname)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                if obj.__name__.startswith(("jaxlab", "pallas_kernels")) and \
                        obj.__name__ not in seen:
                    seen.add(obj.__name__)
                    walk(obj.__name__)
            elif inspect.isfunction(obj) and not modname.startswith(OUT_OF_SCOPE):
                found.setdefault(id(obj), (f"{modname}.{name}", obj))

    for p in packages:
        seen.add(p)
        walk(p)
    return dict(sorted(found.values()))


def unreached() -> list[str]:
    text = " ".join(c.name for c in harness.all_cases())
    return sorted(n for n in public_functions()
                  if not re.search(rf"\b{re.escape(n.rsplit('.', 1)[1])}\b", text))


def test_unreached_list_is_exact():
    with open(UNREACHED_FILE) as f:
        listed = sorted(line.strip() for line in f if line.strip() and not line.startswith("#"))
    now = unreached()
    assert [n for n in now if n not in listed] == [], "public functions without a bad call"
    assert [n for n in listed if n not in now] == [], "reached now: remove from unreached.txt"
