"""Input checks that raise clear errors naming the argument.

These run at trace time on static information (shapes, Python numbers), so
they cost nothing inside ``jit``. Value checks on traced arrays are skipped
(a traced value cannot be inspected without a host callback).
"""

from collections.abc import Sequence

import jax
import numpy as np


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def check_shape(name: str, x, expected: Sequence[int | None]) -> None:
    """Raises ValueError unless ``x.shape`` matches ``expected`` (None = any size)."""
    shape = np.shape(x)
    ok = len(shape) == len(expected) and all(
        e is None or e == s for s, e in zip(shape, expected, strict=False)
    )
    if not ok:
        pretty = "(" + ", ".join("*" if e is None else str(e) for e in expected) + ")"
        raise ValueError(f"`{name}` must have shape {pretty}, got {tuple(shape)}.")


def check_ndim(name: str, x, ndim: int) -> None:
    """Raises ValueError unless ``x`` has ``ndim`` dimensions."""
    if np.ndim(x) != ndim:
        raise ValueError(f"`{name}` must be {ndim}-D, got shape {tuple(np.shape(x))}.")


def check_in_range(
    name: str,
    value,
    low: float | None = None,
    high: float | None = None,
    *,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> None:
    """Raises ValueError unless every entry of a concrete ``value`` lies in the interval.

    Traced values are not checked.
    """
    if not _is_concrete(value):
        return
    v = np.asarray(value)
    bad = np.zeros(v.shape, bool)
    if low is not None:
        bad |= (v < low) if low_inclusive else (v <= low)
    if high is not None:
        bad |= (v > high) if high_inclusive else (v >= high)
    if np.any(bad) or np.any(np.isnan(v)):
        lb = "[" if low_inclusive else "("
        rb = "]" if high_inclusive else ")"
        lo = "-inf" if low is None else f"{low:g}"
        hi = "inf" if high is None else f"{high:g}"
        shown = v if v.size <= 8 else f"array with {int(bad.sum())} bad entries"
        raise ValueError(f"`{name}` must lie in {lb}{lo}, {hi}{rb}, got {shown}.")


def check_positive_int(name: str, value) -> None:
    """Raises ValueError unless ``value`` is a Python/NumPy integer >= 1."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")
