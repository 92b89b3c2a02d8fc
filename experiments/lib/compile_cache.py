"""JAX's persistent compilation cache, on by default for jaxlab's entry points.

A compiled XLA program is written to a folder keyed by everything that determines it
(the program, the compile options, the JAX / jaxlib version and the device), so a second
run of the same experiment, test or notebook loads it instead of compiling again.

``enable()`` is called by the experiment binaries (``experiments.common.launch``), the
suite and ``experiments.lib.study.train_and_evaluate`` (so the notebooks too); the test
run (``tests/conftest.py``) uses its own folder, ``~/.cache/jaxlab/xla-tests``. Where the
folder is:

* ``JAXLAB_COMPILATION_CACHE=<dir>``: that folder;
* ``JAXLAB_COMPILATION_CACHE=0`` (or ``off``, ``false``, ``no``, empty): no cache;
* otherwise the ``path`` given to ``enable`` (default
  ``$XDG_CACHE_HOME/jaxlab/xla``, i.e. ``~/.cache/jaxlab/xla``).

A folder already set through JAX's own ``jax_compilation_cache_dir`` option (or the
``JAX_COMPILATION_CACHE_DIR`` variable) is kept as it is. The folder is trusted: whoever
can write to it can make this process run arbitrary code, so it must not be shared with
untrusted users. Its size is not bounded (delete it at any time to reclaim the space).

``tally()`` counts the compile work of this process (tracing, lowering and XLA compile
seconds, programs, cache hits, programs built twice) from JAX's monitoring events and its
compiler log; the study runner writes it per unit to ``timing.json``.
"""

import logging
import os
from typing import NamedTuple

ENV = "JAXLAB_COMPILATION_CACHE"
# Programs that compile faster than this are not written (JAX's default is 1 s). 0: every
# program is kept. A warm run then compiles nothing: the GEPC study's 111 programs load in
# 2.8 s where 77 of them (those under 0.5 s) compiled again each run, and its cache folder
# holds 11.2 MB instead of 10.9 MB (a fast-compiling program's entry is a few kB); measured
# on the shared 2-core CPU.
MIN_COMPILE_SECS = 0.0
_OFF = ("", "0", "off", "false", "no")


def default_dir() -> str:
    """``$XDG_CACHE_HOME/jaxlab/xla`` (``~/.cache/jaxlab/xla`` when the variable is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxlab", "xla")


def resolve(path: str | os.PathLike | None = None) -> str | None:
    """The cache folder ``enable(path)`` would use (absolute), or ``None`` when
    ``JAXLAB_COMPILATION_CACHE`` turns the cache off; imports nothing heavy."""
    env = os.environ.get(ENV)
    if env is not None and env.strip().lower() in _OFF:
        return None
    return os.path.abspath(os.path.expanduser(
        env.strip() if env is not None else os.fspath(path or default_dir())))


def enable(path: str | os.PathLike | None = None,
           min_compile_secs: float = MIN_COMPILE_SECS) -> str | None:
    """Turns JAX's persistent compilation cache on (idempotent).

    Args:
      path: the folder used when ``JAXLAB_COMPILATION_CACHE`` is unset (``None``:
        ``default_dir()``).
      min_compile_secs: programs compiling faster than this are not cached (kept if
        ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` is set).

    Returns:
      The cache folder in use, or ``None`` when the cache is off.

    Raises:
      ValueError: if ``min_compile_secs`` is negative.
    """
    import jax

    if not min_compile_secs >= 0:
        raise ValueError(f"`min_compile_secs` must be >= 0, got {min_compile_secs!r}.")
    current = jax.config.jax_compilation_cache_dir
    if current:
        return current
    folder = resolve(path)
    if folder is None:
        return None
    os.makedirs(folder, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", folder)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs",
                          float(min_compile_secs))
    return folder


# ---------------------------------------------------------------- compile accounting

_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
_LOWER_EVENT = "/jax/core/compile/jaxpr_to_mlir_module_duration"
_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_HIT_EVENT = "/jax/compilation_cache/cache_hits"
# JAX logs every program it compiles or loads through the persistent cache with the
# program's cache key (a digest of the HLO, the compile options, the versions and the
# device), at DEBUG level unless asked otherwise; the same key twice in one process means
# the same program was built twice (an in-memory jit cache miss).
_COMPILER_LOGGER = "jax._src.compiler"
_KEY_MESSAGES = ("PERSISTENT COMPILATION CACHE MISS for ", "Persistent compilation cache hit for ")
_totals = {"compile_s": 0.0, "trace_s": 0.0, "lower_s": 0.0, "programs": 0, "cache_hits": 0}
# (program name, cache key, seconds to compile or load it), in build order; the key is logged
# just before the build whose duration event follows it
_program_keys: list[tuple[str, str, float]] = []
_pending_key: list[tuple[str, str]] = []
_listening = False


class CompileTally(NamedTuple):
    """Compile work done in this process since the first ``tally()`` call (JAX's
    ``jax.monitoring`` events and its compiler log).

    Attributes:
      compile_s: seconds in XLA compiles (a program loaded from the persistent cache
        counts its load time).
      trace_s: seconds tracing Python functions to jaxprs.
      lower_s: seconds lowering jaxprs to MLIR (StableHLO) modules.
      programs: XLA programs compiled or loaded from the persistent cache.
      cache_hits: of ``programs``, those loaded from the persistent cache.
      keys: ``(program name, persistent-cache key, seconds)`` of every program compiled
        or loaded, in order (empty when the persistent cache is off: JAX computes no key
        then).
    """

    compile_s: float
    trace_s: float
    lower_s: float
    programs: int
    cache_hits: int
    keys: tuple[tuple[str, str, float], ...] = ()

    @property
    def compiles(self) -> int:
        """Programs XLA actually compiled (``programs - cache_hits``)."""
        return self.programs - self.cache_hits

    @property
    def duplicates(self) -> dict[str, int]:
        """``{program name: times built}`` for every program (same cache key) built more
        than once in this stretch of work."""
        return self.duplicates_over(0.0)

    def duplicates_over(self, seconds: float) -> dict[str, int]:
        """``duplicates`` restricted to programs whose builds took more than ``seconds`` in
        all (e.g. to leave out the millisecond eager ops that third-party code builds
        twice, once per weak type of the same operands)."""
        counts: dict[tuple[str, str], list] = {}
        for name, key, secs in self.keys:
            c = counts.setdefault((name, key), [0, 0.0])
            c[0] += 1
            c[1] += secs
        out: dict[str, int] = {}
        for (name, _), (n, secs) in counts.items():
            if n > 1 and secs > seconds:
                out[name] = out.get(name, 0) + n
        return out

    @property
    def duplicate_s(self) -> float:
        """Seconds spent building programs again (every build of a key after its first)."""
        seen, total = set(), 0.0
        for name, key, secs in self.keys:
            if (name, key) in seen:
                total += secs
            seen.add((name, key))
        return total

    def __sub__(self, other: "CompileTally") -> "CompileTally":
        numbers = (a - b for a, b in zip(self[:-1], other[:-1], strict=True))
        return CompileTally(*numbers, keys=self.keys[len(other.keys):])


def _on_duration(event: str, seconds: float, **kwargs) -> None:
    del kwargs
    if event == _COMPILE_EVENT:
        _totals["compile_s"] += seconds
        _totals["programs"] += 1
        if _pending_key:
            _program_keys.append((*_pending_key.pop(), float(seconds)))
    elif event == _TRACE_EVENT:
        _totals["trace_s"] += seconds
    elif event == _LOWER_EVENT:
        _totals["lower_s"] += seconds


def _on_event(event: str, **kwargs) -> None:
    del kwargs
    if event == _HIT_EVENT:
        _totals["cache_hits"] += 1


class _ProgramKeys(logging.Filter):
    """Records the cache key of every program JAX's compiler logs, and passes on only the
    records the logger would have passed before its level was lowered to DEBUG (so no
    debug output appears that did not before)."""

    def __init__(self, logger: logging.Logger):
        super().__init__()
        self._logger = logger
        self._own_level = logger.level  # NOTSET: the parent's effective level applies

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.msg if isinstance(record.msg, str) else ""
        if msg.startswith(_KEY_MESSAGES) and len(record.args or ()) == 2:
            _pending_key[:] = [(str(record.args[0]), str(record.args[1]))]
        parent = self._logger.parent
        threshold = self._own_level or (parent.getEffectiveLevel() if parent else 0)
        return record.levelno >= threshold


def tally() -> CompileTally:
    """The running totals (listeners are installed on the first call: work before it is
    not counted). Subtract two tallies for the work between them."""
    global _listening
    if not _listening:
        import jax

        jax.monitoring.register_event_duration_secs_listener(_on_duration)
        jax.monitoring.register_event_listener(_on_event)
        logger = logging.getLogger(_COMPILER_LOGGER)
        logger.addFilter(_ProgramKeys(logger))
        logger.setLevel(logging.DEBUG)
        _listening = True
    return CompileTally(**_totals, keys=tuple(_program_keys))


def timing_row(wall_s: float, work: CompileTally) -> dict:
    """``{"wall_s", "trace_s", "lower_s", "compile_s", "run_s", "compiles", "cache_hits",
    "duplicate_programs", "duplicate_s"}`` of a stage that took ``wall_s`` seconds and did
    ``work`` (run_s: the rest of the wall time, execution and Python; duplicate_programs:
    ``{name: times built}`` of programs built more than once in the stage, ``CompileTally.
    duplicates``; duplicate_s: the seconds those extra builds took)."""
    spent = work.compile_s + work.trace_s + work.lower_s
    return {"wall_s": round(wall_s, 3), "trace_s": round(work.trace_s, 3),
            "lower_s": round(work.lower_s, 3), "compile_s": round(work.compile_s, 3),
            "run_s": round(max(wall_s - spent, 0.0), 3),
            "compiles": work.compiles, "cache_hits": work.cache_hits,
            "duplicate_programs": work.duplicates,
            "duplicate_s": round(work.duplicate_s, 3)}
