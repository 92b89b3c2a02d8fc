"""A failed check inside ``jit`` / ``vmap`` reaches the caller as ``CheckError`` (a
``ValueError``) naming the function and the argument, chained to JAX's runtime error; the
alignment metrics never score a bad traced input as a rank."""

import importlib
import re

import jax
import numpy as np
import pytest

from jaxlab.avatar import alignment
from jaxlab.core import checked
from tests.bad_inputs import cases_checked as cte
from tests.bad_inputs.test_guarded import declared

FIRST = {}
for _where, _arg, _fn, _args in cte.SPECS:
    FIRST.setdefault(_where, (_where, _arg, _fn, _args))


@pytest.mark.parametrize("spec", list(FIRST.values()), ids=list(FIRST))
@pytest.mark.parametrize("how", ["checked.jit", "eager vmap"])
def test_traced_failure_is_a_named_value_error(spec, how):
    where, arg, fn, args = spec
    with pytest.raises(ValueError, match=re.escape(f"{where}: `{arg}`")) as info:
        cte._way(where, how)(fn, *args)
    assert isinstance(info.value, checked.CheckError)
    assert isinstance(info.value.__cause__, jax.errors.JaxRuntimeError)


def test_plain_jit_still_raises_jax_error_carrying_the_check():
    """A bare ``jax.jit`` cannot be reached by any boundary of ours (documented)."""
    where, arg, fn, args = cte.SPECS[0]
    with checked.checks(True), pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.jit(lambda w: fn(w))(*args)
    assert f"{where}: `{arg}`" in str(info.value)
    assert str(checked.as_check_error(info.value)).startswith(f"{where}: `{arg}`")


def _resolve(name):
    parts = name.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p)
        return obj
    raise AssertionError(name)


def test_every_guarded_entry_point_has_the_boundary():
    missing = [n for n in declared()
               if getattr(_resolve(n), "__code__", None) is not
               checked.boundary(lambda: None).__code__]
    assert missing == []


N = 5
MASK = np.ones(N, bool)


def test_duplicated_truth_is_refused_eagerly():
    with pytest.raises(ValueError, match="`truth`"):
        alignment.alignment_metrics(np.eye(N), np.array([0, 0, 2, 3, 4]), MASK)


@pytest.mark.parametrize("plan, truth", [
    (np.where(np.eye(N) > 0, np.nan, 0.0), np.arange(N)),
    (np.eye(N), np.array([0, 1, 2, 3, 7])),
    (np.eye(N), np.array([0, 1, 2, 3, -1])),
    (np.eye(N), np.array([0, 0, 2, 3, 4])),
], ids=["nan plan", "truth 7", "truth -1", "repeated truth"])
def test_traced_bad_input_scores_nan_without_checked_mode(plan, truth):
    """Without checked mode the metrics of a bad traced input are NaN (each would be MRR 1
    or close to it if the bad entries were ranked), with checked mode a CheckError."""
    f = jax.jit(lambda p, t: alignment.alignment_metrics(p, t, MASK))
    with checked.checks(False):
        out = f(plan.astype(np.float32), truth)
    assert all(np.isnan(float(v)) for v in out.values())
    with pytest.raises(ValueError, match="alignment_metrics: `(plan|truth)`"):
        with checked.checks(True):
            checked.jit(lambda p, t: alignment.alignment_metrics(p, t, MASK))(
                plan.astype(np.float32), truth)


def test_good_traced_input_scores_as_eagerly():
    plan = np.eye(N, dtype=np.float32) + 0.01 * np.arange(N * N, dtype=np.float32).reshape(N, N)
    truth = np.array([1, 0, 2, 4, 3])
    eager = alignment.alignment_metrics(plan, truth, MASK)
    traced = jax.jit(lambda p, t: alignment.alignment_metrics(p, t, MASK))(plan, truth)
    for k in eager:
        np.testing.assert_allclose(float(traced[k]), float(eager[k]), rtol=1e-6)
