"""The checked entry points: declared in the code (``jaxlab.core.checked.GUARDED``), listed
exactly on the docs' reliability page, named by the README's guarantee, and each reached by a
traced bad call of this folder."""

import glob
import importlib
import os
import re

from jaxlab.core import checked
from tests.bad_inputs import harness

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("jaxlab.core", "jaxlab.qlearning", "jaxlab.bco", "jaxlab.avatar", "jaxlab.gepc",
            "jaxlab.dllm", "jaxlab.rfo", "jaxlab.attention")
# What each item of the README's list ("at the entry points of ...") stands for.
README_ITEMS = {
    "SMC resampling": ("jaxlab.core.smc.",),
    "`dllm.decode`": ("jaxlab.dllm.decode",),
    "Path LL": ("jaxlab.dllm.path_log_likelihood",),
    "the SMC decoders": ("jaxlab.dllm.path_smc.", "jaxlab.dllm.sr_smc."),
    "Q-learning": ("jaxlab.qlearning.",),
    "`bco.run`": ("jaxlab.bco.run",),
    "AUROC": ("jaxlab.core.metrics.auroc",),
    "TD(lambda) targets": ("jaxlab.rfo.critic.td_lambda_targets", "jaxlab.rfo.ppo.gae"),
    "entropic OT": ("jaxlab.avatar.solvers.",),
    "the alignment metrics": ("jaxlab.avatar.alignment.alignment_metrics",
                              "jaxlab.avatar.alignment.pair_metrics"),
    "GEPC residuals": ("jaxlab.gepc.residual.",),
    "attention": ("jaxlab.attention.attention",),
}


def declared() -> set[str]:
    for p in PACKAGES:
        importlib.import_module(p)
    return set(checked.GUARDED)


def docs_list() -> list[str]:
    with open(os.path.join(ROOT, "docs", "core.rst")) as f:
        text = f.read()
    block = text.split(".. checked-entry-points-begin")[1].split(".. checked-entry-points-end")[0]
    return re.findall(r"^\* ``([\w.]+)``", block, re.M)


def readme_items() -> list[str]:
    with open(os.path.join(ROOT, "README.md")) as f:
        text = " ".join(f.read().split())
    found = re.search(r"at the entry points of (.*?) raise `jaxlab\.core\.CheckError`", text)
    assert found, "README.md no longer states the checked entry points in the expected words"
    return [s.strip() for s in re.split(r", | and ", found.group(1)) if s.strip()]


def test_docs_list_is_exactly_the_declared_entry_points():
    listed = docs_list()
    assert len(listed) == len(set(listed)), "a name is listed twice"
    assert sorted(listed) == sorted(declared())


def test_every_name_a_check_carries_is_declared():
    """Every ``"jaxlab.<...>"`` literal in the library is a guarded name (the names checks
    put in front of their messages), and is declared."""
    literals = set()
    for path in glob.glob(os.path.join(ROOT, "jaxlab", "**", "*.py"), recursive=True):
        with open(path) as f:
            literals |= set(re.findall(r"\"(jaxlab\.[\w.]+)\"", f.read()))
    literals |= {f"jaxlab.core.smc.{n}" for n in ("systematic", "stratified", "multinomial",
                                                  "residual")}  # an f-string in smc._resample
    assert literals - declared() == set()


def test_readme_items_are_guarded():
    names = declared()
    for item in readme_items():
        assert item in README_ITEMS, f"README names an entry point this test does not know: {item}"
        assert any(n.startswith(README_ITEMS[item]) for n in names), item


def test_every_guarded_entry_point_is_named_by_the_readme():
    """The README's list is exactly the guarded set: each guarded name falls under one of
    its items (and each item is guarded, above)."""
    prefixes = tuple(p for item in readme_items() for p in README_ITEMS.get(item, ()))
    assert {n for n in declared() if not n.startswith(prefixes)} == set()


def test_each_entry_point_has_a_traced_bad_call():
    traced = " ".join(c.name for c in harness.all_cases()
                      if c.name.startswith(("traced/", "edges/traced")))
    def tail(name):  # what a case name says: the function (with its module when shared)
        parts = name.split(".")
        return ".".join(parts[-2:]) if parts[-1] == "run_particles" else parts[-1]

    missing = [n for n in declared() if not re.search(rf"\b{re.escape(tail(n))}\b", traced)]
    assert missing == []
