"""Which public functions the bad-input sweep reaches.

A function counts as reached when a case's name names it (``<module>.<function>: what is
bad``, the convention of every ``cases_*.py``): its name as a word, bare or qualified by
modules (``bco.compare``). A name that several public functions share (``compare``,
``default_contenders``) reached by a qualified word reaches only the functions whose module
path holds the qualifiers in order (``dllm.comparison.default_contenders`` reaches the
dllm one, not the gepc one); a bare word reaches all of them. ``unreached.txt`` lists,
exactly, the public functions of the documented packages that no case names yet: a new
public function needs a case (or an entry there, visible in review), and a function that
gains a case leaves the list. Checkers themselves (``validation``, ``checked``), type
aliases, classes and functions without parameters (they cannot be called badly) are out of
scope.
"""

import importlib
import inspect
import os
import re
import runpy
from collections import Counter

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


def _in_order(parts: list[str], path: list[str]) -> bool:
    """Whether ``parts`` occur in ``path`` in this order (not necessarily adjacent)."""
    rest = iter(path)
    return all(p in rest for p in parts)


def reaches(case_name: str, path: str, shared: bool) -> bool:
    """Whether ``case_name`` names the public function ``path`` (module docstring)."""
    *modules, name = path.split(".")
    for m in re.finditer(rf"(?<![\w.])((?:\w+\.)*){re.escape(name)}\b", case_name):
        qualifiers = m.group(1).split(".")[:-1]
        if not shared or not qualifiers or _in_order(qualifiers, modules):
            return True
    return False


def unreached() -> list[str]:
    functions = {n: f for n, f in public_functions().items()
                 if inspect.signature(f).parameters}
    counts = Counter(n.rsplit(".", 1)[1] for n in functions)
    names = [c.name for c in harness.all_cases()]
    return sorted(n for n in functions
                  if not any(reaches(c, n, counts[n.rsplit(".", 1)[1]] > 1) for c in names))


def test_unreached_list_is_exact():
    with open(UNREACHED_FILE) as f:
        listed = sorted(line.strip() for line in f if line.strip() and not line.startswith("#"))
    now = unreached()
    assert [n for n in now if n not in listed] == [], "public functions without a bad call"
    assert [n for n in listed if n not in now] == [], "reached now: remove from unreached.txt"


def test_reaches_qualified_and_bare_words():
    assert reaches("bco.compare: seeds 1", "jaxlab.bco.compare", shared=True)
    assert not reaches("bco.compare: seeds 1", "jaxlab.gepc.compare", shared=True)
    assert reaches("compare: seeds 1", "jaxlab.gepc.compare", shared=True)
    assert reaches("dllm/dllm.comparison.default_goals: x",
                   "jaxlab.dllm.comparison.default_goals", shared=True)
    assert not reaches("dllm/dllm.comparison.default_goals: x",
                       "jaxlab.attention.comparison.default_goals", shared=True)
    # the qualifiers in order, not necessarily adjacent
    assert reaches("dllm.best_particle: x", "jaxlab.dllm.sr_smc.best_particle", shared=True)
    assert not reaches("sr_smc.best_particle: x", "jaxlab.dllm.best_particle", shared=True)
    assert reaches("x.stats: y", "jaxlab.bco.variation.stats", shared=False)
    assert not reaches("bco/losses/family_unknown", "jaxlab.bco.losses.stochastic_family",
                       shared=False)
    assert not reaches("bco.restats: y", "jaxlab.bco.variation.stats", shared=False)
