"""The seven ``compare`` functions are one contract: ``protocol.bind`` of each method's spec,
with the arguments of ``protocol.ARGUMENTS`` in that order and with those defaults, and
``docs/core.rst`` lists each method's defaults as its spec declares them."""

import importlib
import inspect
import os
import re

import pytest

from jaxlab.core import protocol

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = ("qlearning", "bco", "avatar", "gepc", "dllm", "rfo", "attention")


def _module(name):
    try:
        return importlib.import_module(f"jaxlab.{name}")
    except ImportError as e:  # an extra not installed
        pytest.skip(f"jaxlab.{name} needs an extra: {e}")


@pytest.mark.parametrize("name", METHODS)
def test_every_compare_has_the_common_signature(name):
    compare = _module(name).compare
    params = inspect.signature(compare).parameters
    assert [(n, p.default) for n, p in params.items()] == list(protocol.ARGUMENTS), name
    assert [p.kind for p in params.values()][2:] == [inspect.Parameter.KEYWORD_ONLY] * (
        len(params) - 2)


@pytest.mark.parametrize("name", METHODS)
def test_every_compare_is_its_spec_bound(name):
    mod = _module(name)
    spec = mod.comparison.SPEC
    assert isinstance(spec, protocol.Spec)
    assert mod.compare.__doc__ == protocol.bind(spec).__doc__
    assert set(spec.defaults) <= set(spec.contenders)
    for goal in spec.goals(spec.defaults, ()):
        assert goal.a in spec.defaults and goal.b in spec.defaults


def defaults_line(name: str) -> str:
    """The docs line of a method's defaults, from its spec."""
    spec = importlib.import_module(f"jaxlab.{name}").comparison.SPEC
    metrics = spec.default_metrics
    if metrics is None:
        metrics = ((spec.metrics[0].name,) if not callable(spec.metrics)
                   else ("the problem's first",))
    elif callable(metrics):
        metrics = ("as the problem names them",)
    return (f"* ``{name}.compare``: contenders {', '.join(spec.defaults)}; tuning "
            f"{spec.tuning}, seeds {spec.seeds}; metrics {', '.join(metrics)}")


def test_docs_list_each_methods_defaults():
    with open(os.path.join(ROOT, "docs", "core.rst")) as f:
        text = f.read()
    block = re.search(r"\.\. compare-defaults-begin\n(.*?)\.\. compare-defaults-end", text,
                      re.S).group(1)
    want = "\n".join(defaults_line(m) for m in METHODS)
    assert block.strip() == want, want
