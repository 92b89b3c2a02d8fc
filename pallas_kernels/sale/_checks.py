"""Private input checks of the SALE kernels (jax / numpy only: pallas_kernels never imports
jaxlab). Messages name the argument in backticks. Shape and dtype checks work on traced
arrays (they are static); value checks run only on concrete inputs, so none of them adds
work to compiled code.
"""

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np


def is_concrete(x) -> bool:
    """False for a value traced by jit / vmap / grad (it cannot be inspected)."""
    return not isinstance(x, jax.core.Tracer)


def check_positive_int(name: str, value) -> None:
    """ValueError unless ``value`` is a Python/NumPy integer >= 1."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")


def check_ndim(name: str, x, ndim: int) -> None:
    """ValueError unless ``x`` has ``ndim`` dimensions."""
    if np.ndim(x) != ndim:
        raise ValueError(f"`{name}` must be {ndim}-D, got shape {tuple(np.shape(x))}.")


def check_shape(name: str, x, expected: Sequence[int | None]) -> None:
    """ValueError unless ``x.shape`` matches ``expected`` (None = any size)."""
    shape = np.shape(x)
    ok = len(shape) == len(expected) and all(
        e is None or e == s for s, e in zip(shape, expected, strict=False))
    if not ok:
        pretty = "(" + ", ".join("*" if e is None else str(e) for e in expected) + ")"
        raise ValueError(f"`{name}` must have shape {pretty}, got {tuple(shape)}.")


def check_floating(name: str, x) -> None:
    """TypeError unless ``x`` has a floating dtype (bfloat16 included)."""
    dtype = getattr(x, "dtype", None)
    dtype = np.asarray(x).dtype if dtype is None else dtype
    if not jnp.issubdtype(dtype, jnp.floating):
        raise TypeError(f"`{name}` must have a floating dtype, got {dtype}.")


def check_in_range(name: str, value, low: float | None = None, high: float | None = None, *,
                   low_inclusive: bool = True, high_inclusive: bool = True) -> None:
    """ValueError unless every entry of a concrete ``value`` lies in the interval (no NaN)."""
    if not is_concrete(value):
        return
    v = np.asarray(value, np.float64)
    bad = np.isnan(v)
    if low is not None:
        bad |= (v < low) if low_inclusive else (v <= low)
    if high is not None:
        bad |= (v > high) if high_inclusive else (v >= high)
    if np.any(bad):
        lb, rb = "[" if low_inclusive else "(", "]" if high_inclusive else ")"
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        shown = v if v.size <= 8 else f"array with {int(bad.sum())} bad entries"
        raise ValueError(f"`{name}` must lie in {lb}{lo}, {hi}{rb}, got {shown}.")


def check_tau(tau, num_heads: int) -> None:
    """``tau``: a scalar or [num_heads] of thresholds in [0, inf) (0 keeps every block)."""
    shape = np.shape(tau)
    if shape not in ((), (1,), (num_heads,)):
        raise ValueError(f"`tau` must be a scalar or have shape ({num_heads},) (one threshold "
                         f"per query head), got shape {shape}.")
    check_in_range("tau", tau, 0.0)
