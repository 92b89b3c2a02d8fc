"""Input checks that raise clear errors naming the argument.

These run at trace time on static information (shapes, Python numbers), so
they cost nothing inside ``jit``. Value checks on traced arrays are skipped
(a traced value cannot be inspected without a host callback).
"""

from collections.abc import Sequence

import jax
import numpy as np

__all__ = ["check_shape", "check_ndim", "check_in_range", "concrete_float", "check_positive_int",
    "check_finite", "check_int_range", "check_floating", "check_min_count", "check_one_of", "Rule",
    "POSITIVE", "NON_NEGATIVE", "UNIT_CLOSED", "UNIT_OPEN_RIGHT", "UNIT_OPEN", "POSITIVE_INT",
    "check_fields", "failed_solves", "check_real", "check_bool", "check_nonempty",
    "check_representable", "memory_limit", "check_memory"]


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

    Traced values are not checked; a traced bound (``low`` / ``high``) is skipped.
    """
    if not _is_concrete(value):
        return
    low = low if _is_concrete(low) else None
    high = high if _is_concrete(high) else None
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


def concrete_float(x) -> float | None:
    """``float(x)`` for a concrete scalar, None for a traced one (for bounds of checks)."""
    return float(x) if _is_concrete(x) else None


def check_positive_int(name: str, value) -> None:
    """Raises ValueError unless ``value`` is a Python/NumPy integer >= 1."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")


def check_finite(name: str, x) -> None:
    """Raises ValueError if a concrete ``x`` holds NaN or +-inf (traced values pass).

    Use it on inputs at the Python boundary; for values produced inside a compiled
    loop return a flag in the method's Info tuple instead (see each module's docstring).
    """
    if not _is_concrete(x):
        return
    v = np.asarray(x)
    if v.dtype.kind not in "fc":
        return
    bad = ~np.isfinite(v)
    if np.any(bad):
        n_nan, n_inf = int(np.isnan(v).sum()), int(np.isinf(v).sum())
        raise ValueError(f"`{name}` must be finite, got {n_nan} NaN and {n_inf} inf "
                         f"entr{'y' if n_nan + n_inf == 1 else 'ies'} (shape {v.shape}).")


def check_int_range(name: str, x, low: int, high: int, *, exclude: int | None = None) -> None:
    """Raises ValueError unless a concrete integer array ``x`` lies in [low, high).

    Args:
      name: argument name used in the message.
      x: integer array (traced values are not checked; the dtype always is).
      low: smallest allowed value.
      high: one past the largest allowed value.
      exclude: a value inside the range that is still not allowed (e.g. a mask id).
    """
    dtype = np.asarray(x).dtype if _is_concrete(x) else x.dtype
    if not np.issubdtype(dtype, np.integer):
        raise TypeError(f"`{name}` must be an integer array, got dtype {dtype}.")
    if not _is_concrete(x):
        return
    v = np.asarray(x)
    bad = (v < low) | (v >= high)
    if np.any(bad):
        raise ValueError(f"`{name}` must lie in [{low}, {high}), got {int(bad.sum())} entries "
                         f"outside (min {v.min()}, max {v.max()}).")
    if exclude is not None and np.any(v == exclude):
        raise ValueError(f"`{name}` must not contain the reserved id {exclude} "
                         f"({int((v == exclude).sum())} entries do).")


def check_floating(name: str, x) -> None:
    """Raises TypeError unless ``x`` has a floating dtype (works on traced values)."""
    dtype = getattr(x, "dtype", None)
    dtype = np.asarray(x).dtype if dtype is None else dtype
    if not np.issubdtype(dtype, np.floating) and dtype != jax.numpy.bfloat16:
        raise TypeError(f"`{name}` must have a floating dtype, got {dtype}.")


def _dtype_of(x):
    dtype = getattr(x, "dtype", None)
    return np.asarray(x).dtype if dtype is None else np.dtype(dtype)


def check_real(name: str, x, *, allow_bool: bool = False) -> None:
    """Raises TypeError unless ``x`` holds real numbers: a float or integer dtype (not
    complex, string or object; bool only with ``allow_bool``; works on traced values)."""
    dtype = _dtype_of(x)
    if dtype == jax.numpy.bfloat16 or (allow_bool and dtype == np.bool_):
        return
    if dtype.kind not in "fiu":
        raise TypeError(f"`{name}` must hold real numbers (a float or integer dtype), got "
                        f"dtype {dtype}.")


def check_bool(name: str, x) -> None:
    """Raises TypeError unless ``x`` has a bool dtype, or an integer dtype whose concrete
    entries are all 0 / 1 (a float is never taken for a truth value)."""
    dtype = _dtype_of(x)
    if dtype == np.bool_:
        return
    if dtype.kind not in "iu":
        raise TypeError(f"`{name}` must be a bool array (or 0/1 integers), got dtype {dtype}.")
    if _is_concrete(x):
        v = np.asarray(x)
        if np.any((v != 0) & (v != 1)):
            raise ValueError(f"`{name}` must hold only 0 / 1 (truth values), got "
                             f"{int(((v != 0) & (v != 1)).sum())} other entries.")


def check_nonempty(name: str, x, axis: int | None = None) -> None:
    """Raises ValueError if ``x`` has no entries (or a zero-length ``axis``)."""
    shape = np.shape(x)
    if axis is None:
        if int(np.prod(shape)) == 0:
            raise ValueError(f"`{name}` must not be empty, got shape {tuple(shape)}.")
    elif shape[axis] == 0:
        raise ValueError(f"`{name}` must not be empty along axis {axis}, got shape "
                         f"{tuple(shape)}.")


def check_representable(name: str, value, dtype, what: str) -> None:
    """Raises ValueError if a concrete ``value`` (a bound computed in float64 on the host)
    exceeds the largest finite number of ``dtype``; ``what`` says which result it bounds."""
    if not _is_concrete(value):
        return
    v = float(np.max(np.abs(np.asarray(value, np.float64)), initial=0.0))
    top = float(np.finfo(dtype).max)
    if not v <= top:
        raise ValueError(f"`{name}` is too large for {np.dtype(dtype).name}: {what} reaches "
                         f"{v:.3g} > {top:.3g}; rescale it.")


def memory_limit() -> int:
    """Bytes one program may use: the default device's memory limit when JAX reports one
    (GPU / TPU), else the host's physical memory."""
    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:  # noqa: BLE001 - backends without memory statistics
        stats = {}
    if stats.get("bytes_limit"):
        return int(stats["bytes_limit"])
    import os

    return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))


def check_memory(name: str, value, nbytes: float, what: str) -> None:
    """Raises ValueError, before anything is allocated, when a request needs more memory
    than ``memory_limit()``.

    Args:
      name: the argument that sets the size (named in the message with its ``value``).
      value: its value.
      nbytes: the estimated bytes (a Python number: no overflow).
      what: what the estimate counts, e.g. "tokens and logits of B * N particles".
    """
    limit = memory_limit()
    if nbytes > limit:
        raise ValueError(f"`{name}`={value!r} needs about {nbytes / 2**30:,.3g} GiB for {what}, "
                         f"more than the {limit / 2**30:,.3g} GiB this device has; lower it.")


def check_min_count(name: str, value, minimum: int, why: str) -> None:
    """Raises ValueError unless the integer ``value`` >= ``minimum`` (``why``: what needs it)."""
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"`{name}` must be an integer >= {minimum} ({why}), got {value!r}.")


def check_one_of(name: str, value, choices) -> None:
    """Raises ValueError unless ``value`` is one of ``choices``."""
    if value not in tuple(choices):
        raise ValueError(f"`{name}` must be one of {sorted(map(str, choices))}, got {value!r}.")


# A rule for ``check_fields``: (low, high, low_inclusive, high_inclusive); None = unbounded.
Rule = tuple[float | None, float | None, bool, bool]
POSITIVE: Rule = (0.0, None, False, True)
NON_NEGATIVE: Rule = (0.0, None, True, True)
UNIT_CLOSED: Rule = (0.0, 1.0, True, True)
UNIT_OPEN_RIGHT: Rule = (0.0, 1.0, True, False)
UNIT_OPEN: Rule = (0.0, 1.0, False, False)
POSITIVE_INT = "positive_int"


def check_fields(obj, rules: dict, *, prefix: str = "config") -> None:
    """Checks named fields of a config / NamedTuple of settings against ``rules``.

    Args:
      obj: an ``ml_collections.ConfigDict``, NamedTuple or any object with attributes.
      rules: {dotted field name: Rule or ``POSITIVE_INT``}; a missing field is skipped
        (configs of one method differ between presets).
      prefix: how the message names ``obj`` (``config.lr``, ``PPOConfig.clip_eps`` ...).

    Raises:
      ValueError: naming ``prefix.field``, the allowed range and the value.
    """
    for field, rule in rules.items():
        value, found = obj, True
        for part in field.split("."):
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif not isinstance(value, dict) and hasattr(value, part):
                value = getattr(value, part)
            else:
                found = False
                break
        if not found or value is None:
            continue
        name = f"{prefix}.{field}"
        if rule == POSITIVE_INT:
            check_positive_int(name, value)
        else:
            low, high, low_inc, high_inc = rule
            check_in_range(name, value, low, high, low_inclusive=low_inc, high_inclusive=high_inc)


def failed_solves(converged, errors):
    """The failed solves of a (batch of) solver report(s), for a non-convergence message.

    Args:
      converged: bool flags, any shape.
      errors: the solves' final errors / residuals, same shape.

    Returns:
      None when the values are traced or every solve converged with a finite error; else
      (bad mask, largest finite error among the failed solves or NaN).
    """
    if not (_is_concrete(converged) and _is_concrete(errors)):
        return None
    err = np.asarray(errors, np.float64)
    bad = ~np.asarray(converged, bool) | ~np.isfinite(err)
    if not bad.any():
        return None
    worst = float(np.nanmax(err[bad])) if np.isfinite(err[bad]).any() else float("nan")
    return bad, worst
