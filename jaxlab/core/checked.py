"""Checked mode: value checks inside compiled code (``jit`` / ``vmap`` / ``scan``).

Eager checks (``jaxlab.core.validation``) look at concrete inputs at the Python boundary;
a value that is traced (built inside a caller's ``jit``, ``vmap`` or ``scan``) cannot be
inspected there. Checked mode adds the same checks to the compiled code with
``jax.experimental.checkify``: every entry point in ``GUARDED`` (SMC resampling and log
weights, AUROC, the dLLM decoders, Q-learning runs and ``make_mdp``, ``bco.run``, TD(lambda)
targets and GAE, entropic OT / FGW, GEPC residuals, attention) then traces its body, or
its argument checks, through ``checkify.checkify`` and each ``check(pred, msg)`` becomes a
checkify check naming the argument; the error is raised naming the function.

Switch it on with ``jaxlab.core.checks(True)`` (a setter, and a context manager that
restores the previous setting on exit: ``with jaxlab.core.checks(True): ...``) or with the
environment variable ``JAXLAB_CHECKS=1`` (read once, at import). Off by default: a checked
body carries an error value through every loop and costs compile time.

Where the error surfaces: always as ``CheckError`` (a ``ValueError``) naming the function
and the argument, e.g. "jaxlab.core.smc.systematic: `weights` must be finite. [checked
mode]", however the entry point is called:

* eagerly (its arguments concrete): right away;
* under a plain eager ``vmap`` of the entry point, or from a public function that jits its
  own loop around one: the check's host callback fails, JAX re-raises that as its own
  ``jax.errors.JaxRuntimeError`` (a RuntimeError whose message ends with the check's
  text), and the entry point's boundary (``boundary``, on every ``GUARDED`` function)
  turns it back into the ``CheckError``, chained to JAX's error (``__cause__``);
* inside ``jaxlab.core.checked.checkify(f)`` (a caller's ``jit`` / ``vmap`` wrapped once
  at the top): the error is handed to that outer checkify, which raises ``CheckError``
  when ``f`` returns;
* inside a caller's own ``jax.jit(f)``: the host callback fails while the caller's
  compiled code runs, after every jaxlab function has returned, so no boundary of ours
  sees it. Use ``jaxlab.core.checked.jit`` (``jax.jit`` whose calls convert the error)
  instead of ``jax.jit``, or call inside ``raise_check_errors()`` (a context manager and
  decorator): ``with jaxlab.core.raise_check_errors(): y = jax.jit(f)(x)``. Python's
  ``except`` matches the raised type's real bases, so no subclassing trick lets a bare
  ``jax.jit`` raise ``CheckError`` itself.

Public functions that are no loop of their own (metrics, targets, solvers, attention)
add their value checks with ``guard(where, checks_fn, *args)``: a checked body that only
checks, run when checked mode is on and an argument is traced (concrete arguments were
already checked eagerly). ``GUARDED`` lists every public function that carries checked-mode
checks.

Only the checks written into the bodies run (``checkify.user_checks``); checkify's
automatic NaN checks are not enabled, since several bodies produce a NaN on purpose in an
unused ``jnp.where`` branch. The mode is part of JAX's jit cache key
(``jax.make_user_context``): a function the caller jitted is traced again when the mode
changes (on / off, inside ``checkify`` or not, ``suspended``), never reused across modes.
"""

import contextlib
import functools
import os
import re
import threading
from collections.abc import Callable

import jax
import numpy as np
from jax.experimental import checkify as _checkify
from jax.experimental import io_callback as _io_callback

__all__ = ["CheckError", "ENV_VAR", "GUARDED", "checks", "enabled", "check", "run", "guard",
           "suspended", "declare", "checkify", "raise_check_errors", "as_check_error", "boundary",
           "jit"]

ENV_VAR = "JAXLAB_CHECKS"
ERRORS = _checkify.user_checks

_state = threading.local()
_enabled = os.environ.get(ENV_VAR, "").strip().lower() in ("1", "true", "yes", "on")

# What the mode changes in a trace (checks on; inside an outer ``checkify``; suspended;
# inside a checked body) is part of JAX's jit cache key: a public function jitted by the
# caller under one mode is traced again under another, never reused. Without it a trace
# made inside ``checkify`` (its checks left for that checkify to functionalize) would be
# reused by a plain ``jit`` of the same function, which cannot run it.
_trace_key = jax.make_user_context(default_value=None)


def _mode() -> tuple[bool, bool, bool, bool]:
    return (_enabled, getattr(_state, "outer", 0) > 0, _suspended(),
            bool(getattr(_state, "where", ())))


@contextlib.contextmanager
def _keyed():
    """Within it, JAX's jit caches are keyed by the current (thread-local) mode."""
    with _trace_key(_mode()):
        yield


class CheckError(ValueError):
    """A check failed in checked mode (the message names the function and the argument)."""


# Every public function with checked-mode checks, by the name its messages carry (the name
# given to ``run`` / ``guard``), declared by its module at import (``declare``); tests keep
# the docs' list, the README's items and the traced bad calls equal to it.
GUARDED: set[str] = set()


def enabled() -> bool:
    """Whether checked mode is on."""
    return _enabled


class checks:  # noqa: N801 - used like a function: ``jaxlab.core.checks(True)``
    """Switches checked mode on or off; also a context manager restoring the old setting.

    Args:
      enabled: True to check values inside compiled code (see the module docstring).

    Raises:
      TypeError: ``enabled`` is not a bool.
    """

    def __init__(self, enabled: bool = True):
        global _enabled
        if not isinstance(enabled, bool):
            raise TypeError(f"`enabled` must be a bool, got {type(enabled).__name__}.")
        self.previous = _enabled
        _enabled = enabled
        _trace_key.set_global(_mode())

    def __enter__(self) -> "checks":
        return self

    def __exit__(self, *exc) -> None:
        global _enabled
        _enabled = self.previous
        _trace_key.set_global(_mode())

    def __bool__(self) -> bool:
        return _enabled


def _tracing_checked() -> bool:
    return bool(getattr(_state, "where", ())) and not _suspended()


def _suspended() -> bool:
    return bool(getattr(_state, "off", 0))


@contextlib.contextmanager
def suspended():
    """Inside it, checked mode is off: ``check`` and ``run`` trace no checks (a region of a
    checked body, e.g. a ``lax.while_loop`` body that calls a checked function).

    Under ``vmap`` a while loop's predicate is batched, and JAX supports neither a checked
    body there ("foreach() argument 2 is longer than argument 1" from ``checkify``) nor the
    host callback an unchecked caller's check needs ("Unordered IO effects not supported in
    while_loop with batched predicate"). The loop's own result flags (non-finite logits)
    are checked after the loop instead.
    """
    _state.off = getattr(_state, "off", 0) + 1
    try:
        with _keyed():
            yield
    finally:
        _state.off -= 1


def _is_traced(tree) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(tree))


def check(pred, msg: str, **fmt) -> None:
    """A named value check inside a checked body (a no-op outside checked tracing).

    Args:
      pred: bool scalar (traced or concrete); the check fails when it is False.
      msg: the error message, naming the argument; ``{name}`` fields are filled from
        ``fmt`` (arrays, formatted at run time). The innermost entry point's name is
        put in front of it.
      **fmt: values for the message's fields.
    """
    if _tracing_checked():
        fmt = {k: jax.numpy.asarray(v) for k, v in fmt.items()}
        _checkify.check(pred, f"{_state.where[-1]}: {msg}", **fmt)


def _raise(err) -> None:
    try:
        err.throw()
    except _checkify.JaxRuntimeError as e:
        text = str(e).replace(" (`check` failed)", "")
        raise CheckError(f"{text} [checked mode]") from None


def _surface(err) -> None:
    """Raises (concrete ``err``), forwards to an outer ``checkify`` or adds a host callback."""
    if not _is_traced(err):
        _raise(err)
    elif getattr(_state, "outer", 0) > 0:
        _checkify.check_error(err)
    else:
        # io_callback, not jax.debug.callback: under vmap the debug callback is unrolled
        # once per batch element at trace time (1500 seeds: minutes of compiling and GBs),
        # while io_callback's batching rule maps over the batch in one loop.
        try:
            _io_callback(_raise, None, err)
        except Exception as exc:  # under an eager vmap the callback runs (and fails) here
            error = as_check_error(exc)
            if error is None:
                raise
            raise error from exc


def _body(where: str, fn: Callable, kwargs: dict) -> Callable:
    def traced(*args):
        _state.where = (*getattr(_state, "where", ()), where)
        try:
            with _keyed():
                return fn(*args, **kwargs)
        finally:
            _state.where = _state.where[:-1]

    return traced


@functools.lru_cache(maxsize=256)
def _compiled(where: str, fn: Callable, items: tuple) -> Callable:
    return jax.jit(_checkify.checkify(_body(where, fn, dict(items)), errors=ERRORS))


def run(where: str, fn: Callable, *args, fast: Callable | None = None, **kwargs):
    """``fn(*args, **kwargs)``, with ``fn``'s ``check`` calls live when checked mode is on.

    Args:
      where: the public function's name for the message (e.g. "jaxlab.core.smc.systematic").
      fn: the (un-jitted) body; its array arguments positional, its static (non-array)
        arguments as keywords.
      *args: its positional (array) arguments.
      **kwargs: its keyword (static) arguments.
      fast: what runs outside checked mode (default ``fn``), e.g. ``jax.jit(fn)``. Never
        pass a jitted ``fn``: its cached trace would keep (or lack) the checks.

    Returns:
      ``fn``'s output. Outside checked mode this is ``(fast or fn)(*args, **kwargs)``; inside
      another checked body the checks join that body's.
    """
    if not _enabled or _suspended():
        return (fn if fast is None else fast)(*args, **kwargs)
    if _tracing_checked():
        return _body(where, fn, kwargs)(*args)
    items = tuple(sorted(kwargs.items()))
    try:
        hash(items)
        checked_fn = _compiled(where, fn, items)
    except TypeError:  # unhashable static arguments: trace without the cache
        checked_fn = _checkify.checkify(_body(where, fn, kwargs), errors=ERRORS)
    err, out = checked_fn(*args)
    _surface(err)
    return out


def guard(where: str, checks_fn: Callable, *args, **kwargs) -> None:
    """Value checks of a public function's (possibly traced) arguments in checked mode.

    ``checks_fn(*args, **kwargs)`` is a body of ``check`` calls returning nothing; it runs
    through ``run`` (so its errors surface as that function's) when checked mode is on and
    some argument in ``args`` is traced. Concrete arguments are skipped: the eager checks
    (``jaxlab.core.validation``) already saw them.

    Args:
      where: the public function's name for the message.
      checks_fn: a module-level function (its identity keys the compile cache).
      *args: the array arguments to check.
      **kwargs: static (hashable) arguments of ``checks_fn``.
    """
    if _enabled and _is_traced(args):
        run(where, checks_fn, *args, **kwargs)


def declare(*where: str) -> None:
    """Records public functions as guarded (``GUARDED``), at their module's import."""
    GUARDED.update(where)


_CHECK_TEXT = re.compile(r"CheckError: (.*?\[checked mode\])", re.S)


class raise_check_errors(contextlib.ContextDecorator):  # noqa: N801 - used like a function
    """Re-raises a checked-mode failure that JAX wrapped in its own runtime error as the
    ``CheckError`` itself (chained to JAX's error); every other exception passes unchanged.

    A check that fails inside a caller's plain ``jax.jit`` raises from a host callback,
    which JAX reports as ``jax.errors.JaxRuntimeError``; inside this context (or a function
    decorated with it) the caller can write ``except jaxlab.core.CheckError``.

    Example:
      >>> import jax, numpy as np
      >>> import jaxlab
      >>> from jaxlab.core import smc
      >>> f = jax.jit(lambda w: smc.systematic(jax.random.key(0), w, 2))
      >>> with jaxlab.core.checks(True):
      ...     try:
      ...         with jaxlab.core.raise_check_errors():
      ...             jax.block_until_ready(f(np.array([0.5, np.nan], np.float32)))
      ...     except jaxlab.core.CheckError as e:
      ...         print("`weights`" in str(e))
      True
    """

    def __enter__(self) -> "raise_check_errors":
        return self

    def __exit__(self, typ, exc, tb) -> bool:
        error = as_check_error(exc)
        if error is None:
            return False
        raise error from exc


def as_check_error(exc: BaseException | None) -> CheckError | None:
    """The ``CheckError`` whose text JAX's runtime error ``exc`` carries (a check that failed
    in a host callback), or None (``exc`` is no such error, or already a ``CheckError``)."""
    if exc is None or isinstance(exc, CheckError) or not isinstance(exc, Exception):
        return None
    found = _CHECK_TEXT.findall(str(exc))
    return CheckError(found[-1]) if found else None


def boundary(fn: Callable) -> Callable:
    """Decorates a public entry point: a checked-mode failure raised while it runs (JAX's
    runtime error carrying a ``CheckError``'s text) leaves it as that ``CheckError``, chained
    to JAX's error; everything else passes unchanged. Every ``GUARDED`` function has it."""

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            error = as_check_error(exc)
            if error is None:
                raise
            raise error from exc

    return wrapped


def jit(fn: Callable, **jit_kwargs) -> Callable:
    """``jax.jit(fn, **jit_kwargs)`` whose calls raise a checked-mode failure inside ``fn`` as
    ``CheckError`` (a plain ``jax.jit`` raises JAX's ``JaxRuntimeError`` instead).

    Example:
      >>> import jax, numpy as np
      >>> import jaxlab
      >>> from jaxlab.core import checked, smc
      >>> f = checked.jit(lambda w: smc.systematic(jax.random.key(0), w, 2))
      >>> with jaxlab.core.checks(True):
      ...     try:
      ...         f(np.array([0.5, np.nan], np.float32))
      ...     except ValueError as e:
      ...         print(type(e).__name__, "`weights`" in str(e))
      CheckError True
    """
    return boundary(jax.jit(fn, **jit_kwargs))


def _as_jax(leaf):
    return jax.numpy.asarray(leaf) if isinstance(leaf, np.ndarray) else leaf


def checkify(fn: Callable) -> Callable:
    """Wraps a caller's (jitted / vmapped) function so checked-mode errors raised inside
    it become one ``CheckError`` when it returns.

    Use it once around the outermost transformation, e.g.
    ``checked.checkify(jax.jit(jax.vmap(f)))(xs)``. Outside checked mode it returns
    ``fn``'s output unchanged (the wrapper still works, it just finds nothing to check).
    """

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        # NumPy arguments as JAX arrays: under ``vmap`` jax 0.12's checkify leaves a NumPy
        # argument as a non-canonical constant inside ``custom_jvp`` rules (softmax), which
        # fails an assertion.
        args, kwargs = jax.tree.map(_as_jax, (args, kwargs))
        _state.outer = getattr(_state, "outer", 0) + 1
        try:
            with _keyed():
                err, out = _checkify.checkify(fn, errors=ERRORS)(*args, **kwargs)
        finally:
            _state.outer -= 1
        _raise(err)
        return out

    return wrapped


_trace_key.set_global(_mode())
