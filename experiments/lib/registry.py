"""Methods by name: the one list (``experiments.lib.methods``), lookups and running one.

What the suite, the notebooks, the docs and the tests use: ``METHODS`` and ``LARGER_RUNS``
(the list, from ``methods``), ``suite_methods()`` (``METHODS`` and SALE: what the suite
runs), ``method(name)``, ``get_config(name, preset)``, ``experiment(name)`` and
``train_and_evaluate(name, config, workdir)`` (``study.train_and_evaluate`` of the
method's experiment). It sits above the study runner; the plumbing below it (provenance,
scalars, the TensorBoard export) reads the list from ``methods`` directly.
"""

from . import study
from .methods import LARGER_RUNS, METHODS, SUITE_EXTRAS, LargerRun, Method, suite_methods

__all__ = ["LARGER_RUNS", "METHODS", "SUITE_EXTRAS", "LargerRun", "Method", "experiment",
           "get_config", "method", "suite_methods", "train_and_evaluate"]


def method(name: str) -> Method:
    """The ``Method`` called ``name`` (``METHODS`` or the suite's ``SUITE_EXTRAS``)."""
    known = {**METHODS, **SUITE_EXTRAS}  # this module's names, read at call time
    if name not in known:
        raise ValueError(f"unknown method {name!r}; choose from {sorted(known)}.")
    return known[name]


_method = method


def get_config(name: str, preset: str = "quick"):
    """The ConfigDict of ``name`` at ``preset``."""
    return _method(name).get_config(preset)


def experiment(name: str):
    """The ``study.Experiment`` of ``name``."""
    return _method(name).experiment()


def train_and_evaluate(name: str, config, workdir: str, *, force: bool = False) -> dict:
    """Runs method ``name`` at ``config`` into ``workdir`` (what binaries, the suite, the
    notebooks and the tests call); ``force`` recomputes finished units."""
    return study.train_and_evaluate(experiment(name), config, workdir, force=force)
