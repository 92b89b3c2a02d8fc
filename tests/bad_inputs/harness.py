"""Bad-input sweep: each case calls a public function with one bad argument.

A case is *clear* when the call raises an input error (ValueError, TypeError,
FloatingPointError, FileNotFoundError unless the case says otherwise) or warns
(UserWarning / RuntimeWarning), with a message that names the bad argument. Anything else
is a defect, tallied as:

  unclear         raised, but not an input error or without naming the argument
  silent_nonfinite returned NaN/inf with no error
  silent_finite   returned a finite (so wrong-looking-right) value with no error
  hang            still running after ``TIMEOUT_S`` seconds

Per-method cases live in ``cases_<method>.py`` as a ``CASES`` list; ``test_bad_inputs``
runs each as a test and ``python -m tests.bad_inputs.tally`` prints the tally.
"""

import importlib
import pkgutil
import threading
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np


class Case(NamedTuple):
    """One bad call. ``arg`` must appear in the error (or warning) message, and the error
    must be one of ``errors`` (the input errors a caller can catch, by default)."""

    name: str
    call: Callable[[], Any]
    arg: str
    errors: tuple = (ValueError, TypeError, FloatingPointError, FileNotFoundError)
    group: str = ""  # the ``cases_<group>.py`` file it comes from (set by ``all_cases``)


OUTCOMES = ("clear", "unclear", "silent_nonfinite", "silent_finite", "hang")
TIMEOUT_S = 300.0  # a call still running after this long is tallied as a hang

# Whether the traced cases run in checked mode (``checks_on``); the tally's ``--unchecked``
# run switches it off to show what the same calls do without it.
CHECKED = {"on": True}


def checks_on():
    """``jaxlab.core.checks(True)`` (the traced cases' mode; off in an unchecked tally)."""
    from jaxlab.core import checked

    return checked.checks(CHECKED["on"])


def _all_finite(out) -> bool:
    for leaf in jax.tree.leaves(out):
        try:
            arr = np.asarray(leaf)
        except Exception:  # noqa: BLE001 - non-array leaves (strings, objects) are skipped
            continue
        if arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
            return False
    return True


def _run(call):
    """(output, exception) of ``call()``, or None when it runs past ``TIMEOUT_S``."""
    result = []

    def target():
        try:
            out = call()
            jax.block_until_ready(out)
            result.append((out, None))
        except Exception as e:  # noqa: BLE001 - every error type is classified
            result.append((None, e))

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(TIMEOUT_S)
    return result[0] if result else None


def classify(case: Case) -> tuple[str, str]:
    """Runs ``case`` and returns (outcome, detail)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ran = _run(case.call)
        if ran is None:
            return "hang", f"still running after {TIMEOUT_S:g} s"
        out, e = ran
        if e is not None:
            msg = f"{type(e).__name__}: {e}"
            clear = case.arg in str(e) and isinstance(e, case.errors)
            return ("clear" if clear else "unclear"), msg[:300]
    for w in caught:
        if issubclass(w.category, UserWarning | RuntimeWarning) and case.arg in str(w.message):
            return "clear", f"warning: {w.message}"[:300]
    if _all_finite(out):
        return "silent_finite", "returned a finite value without an error"
    return "silent_nonfinite", "returned NaN/inf without an error"


TRACED_MARKS = ("traced", "under jit", "under vmap", "in a scan", "plain jit")


def is_traced(case: Case) -> bool:
    """Whether ``case`` passes its bad value inside ``jit`` / ``vmap`` / ``scan`` (its name
    says so: every traced case names the transformation)."""
    return any(m in case.name for m in TRACED_MARKS)


def all_cases() -> list[Case]:
    """Every ``CASES`` list of the ``cases_*`` modules next to this file."""
    import tests.bad_inputs as pkg

    cases = []
    for mod in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
        if mod.startswith("cases_"):
            group = mod.removeprefix("cases_")
            cases += [c._replace(group=group)
                      for c in importlib.import_module(f"tests.bad_inputs.{mod}").CASES]
    return cases


def tally(cases: list[Case]) -> tuple[dict[str, int], list[tuple[Case, str, str]]]:
    """({outcome: count}, [(case, outcome, detail) for every case])."""
    rows = [(c, *classify(c)) for c in cases]
    counts = {o: sum(r[1] == o for r in rows) for o in OUTCOMES}
    return counts, rows


def train_smoke(method: str, **changes):
    """Method ``method``'s experiment on its smoke config with ``changes`` applied, in a
    fresh temporary workdir (the config validator must stop it before any work)."""
    import tempfile

    from experiments.lib import registry

    config = registry.get_config(method, "smoke")
    for key, value in changes.items():
        setattr(config, key, value)
    return registry.train_and_evaluate(method, config, tempfile.mkdtemp())
