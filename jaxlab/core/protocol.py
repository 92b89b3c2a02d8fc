"""The comparison protocol, one runner for every method: tune on validation items, test on
held-out paired items, report paired bootstrap CIs, censoring and declared goals.

``compare(key, problem, *, contenders, tuning, seeds, goals, pairs, metrics, settings, ...)``
is the protocol the papers' claims need. Each method declares a ``Spec`` (its problem,
its built-in contenders with their grids, its metrics, its default goals) and
``jaxlab.<method>.compare = protocol.bind(SPEC)``: one signature, one set of checks, one
meaning of every argument across the library (the table in ``docs/core.rst``).

1. **Items.** An item is what a paired comparison pairs: a seed (Q-learning, BCO, RFO,
   AvAtar) or a problem (POKE-SMC tasks, GEPC images, SALE heads). ``tuning`` items and
   ``seeds`` (test) items are drawn from disjoint key streams, ``fold_in(key, 0)`` and
   ``fold_in(key, 1)``, then one key per item (``fold_in(stream, index)``); a contender
   that builds a problem from a key therefore never sees a test problem while it is tuned.
   A contender whose items are slices of one data set places them with
   ``Items.positions`` (tuning items first, then the test items).
2. **Tuning.** Every point of every contender's declared grid runs on the tuning items; the
   point with the best statistic of the first metric is kept (the first in grid order on a
   tie; a point whose statistic is NaN never wins). A grid may be ``Stages``: each stage's
   pick is frozen before the next stage's points (which update it) are tried. A
   contender with a one-point grid is not run on the tuning items.
3. **Test.** Each contender runs its chosen point on the same test items. It returns one
   value per item, or a dict: each metric's values, plus any per-item records (answers,
   diagnostics) that ``Comparison.records`` keeps.
4. **Differences.** For every declared pair ``(a, b)`` (default: the first contender
   against each other one) and every metric: the statistic of ``a`` minus that of ``b``
   with a paired percentile-bootstrap CI, the ratio where the metric declares one, and
   per-item wins, losses and ties (``analysis.analyse``).
5. **Censoring.** A metric may declare ``censor_at``, the value an item at its bad
   infinity counts as (a run that never reached its target); the table counts them, and a
   goal that holds only through censored items is marked and noted.
6. **Goals.** ``Goal(a, b, margin)`` passes when the CI of ``a - b`` (oriented so that
   better is positive) lies above ``margin``.

Everything that can be checked is checked before the first contender runs: contender
names, grids and their parameters, goals, pairs, metrics, ``level``, ``resamples``,
``tuning`` (an int, not a bool), ``seeds``, ``batch``, the method's problem and settings,
and ``results_path`` (created and opened). While running: a value of the wrong shape or
type, NaN on a test item, an infinity the metric does not censor, or a value outside the
metric's bounds raises, naming the contender.

Progress goes to stderr (``progress=True``: one line at most every few seconds and at the
end of each phase) or to a callable ``progress(done, total, description)``. XLA compile
seconds (JAX's monitoring events, listened to only during the call) are reported apart
from the rest of each contender's wall time. With ``results_path``, each chunk's per-item
values are appended to a JSON-lines file as soon as they are computed, every line carrying
the run's id, so a killed run keeps what it finished.

What is ours: the whole module (the papers each state their own protocol in prose; this is
the common part of them: declared grids, validation-only tuning, paired test items,
bootstrap CIs).
"""

import dataclasses
import inspect
import json
import math
import os
import sys
import textwrap
import time
import uuid
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxlab.core import validation
from jaxlab.core.analysis import (
    Comparison,
    ContenderResult,
    Difference,
    Goal,
    GoalResult,
    Metric,
    analyse,
    check_declarations,
    mean_statistic,
    paired_difference,
    params_text,
    plain,
)
from jaxlab.core.keys import as_key
from jaxlab.core.types import PRNGKey

__all__ = ["Items", "Contender", "Stages", "Tuning", "Builtin", "Context", "Spec", "Metric",
           "Goal", "Difference", "GoalResult", "ContenderResult", "Comparison", "ARGUMENTS",
           "Tuned", "as_tuning", "bind", "compare", "tune", "item_keys", "paired_difference",
           "analyse", "mean_statistic"]

SPLITS = ("tuning", "test")


class Items(NamedTuple):
    """The items one call of a contender runs on.

    Attributes:
      split: ``"tuning"`` or ``"test"``.
      index: [n] int, the items' indices within the split (0 .. count - 1).
      keys: [n] typed PRNG keys, ``keys[i] = fold_in(fold_in(key, split_id), index[i])``.
      tuning_items: the run's number of tuning items.
    """

    split: str
    index: np.ndarray
    keys: jax.Array
    tuning_items: int = 0

    @property
    def positions(self) -> np.ndarray:
        """[n] the items' places in one sequence, the tuning items first: ``index`` for
        tuning items, ``tuning_items + index`` for test items (for a contender whose items
        are slices of one data set)."""
        return self.index + (self.tuning_items if self.split == "test" else 0)


class Stages(NamedTuple):
    """A grid tuned in stages: each stage's points (dicts of ``run``'s keyword arguments)
    update the settings frozen by the stages before it, and the best is frozen in turn."""

    stages: tuple


class Contender(NamedTuple):
    """A named way of solving the problem, with its declared grid.

    Attributes:
      run: ``run(items, problem, **params) -> values``: [len(items.index)] numbers, one per
        item (for the first metric), or a dict of each metric's [n] values plus per-item
        records (arrays with a leading axis n) that ``Comparison.records`` keeps.
      grid: the declared settings tried on the tuning items: dicts of keyword arguments of
        ``run``, or ``Stages``; the default, one empty setting, means nothing is tuned.
    """

    run: Callable[..., Any]
    grid: Any = ({},)


class Tuning(NamedTuple):
    """The validation items a grid is tuned on.

    Attributes:
      items: number of tuning items (seeds or problems), disjoint from the test items; 0
        only when every grid has one point.
    """

    items: int = 0


class Builtin(NamedTuple):
    """A method's built-in contender by name, in a ``contenders`` mapping, optionally with
    another declared grid (dicts of its ``run``'s keyword arguments, or ``Stages``)."""

    name: str
    grid: Any = None


class Context(NamedTuple):
    """What a spec's contender factory is built from (the checked call)."""

    problem: Any
    settings: Any
    tuning: int
    seeds: int
    batch: int | None
    metrics: tuple


def _no_goals(names, metrics):
    del names, metrics
    return ()


class Spec(NamedTuple):
    """A method's declaration of its comparison; ``bind(spec)`` is its ``compare``.

    Attributes:
      name: the method (``"qlearning"``), for messages.
      contenders: a dict, built-in name to ``factory(context) -> Contender``.
      defaults: the contenders compared when ``contenders`` is left out.
      metrics: the metrics every built-in contender reports (``Metric`` objects, or
        ``metrics(problem, settings) -> metrics`` when a metric depends on the problem,
        e.g. a censoring value); the first is tuned on.
      default_metrics: the metric names compared when ``metrics`` is left out (or
        ``default_metrics(problem, settings) -> names``; None: the first only).
      goals: ``goals(names, metrics) -> goals`` (``Goal`` objects), the paper's claims
        about the contenders and metrics named (those whose contenders and metric are
        compared are kept).
      pairs: ``pairs(names) -> ((a, b), ...)``; None: the first against each other one.
      problem: ``problem(problem, settings) -> problem``: checks (and builds) the problem.
      settings: the method's settings class (a NamedTuple with defaults), or None.
      check_settings: ``check_settings(settings)`` raising on a bad field.
      check_items: ``check_items(problem, settings, tuning, seeds)`` raising when the
        problem cannot provide that many items.
      check_grid: ``check_grid(name, points)`` raising on a bad value in the grid points
        (dicts) of the built-in ``name``, when a ``Builtin`` gives it another grid.
      tuning, seeds: the default tuning and test item counts.
      batch: ``batch(context) -> int | None``, the default items per call (None: all).
      summary: the first line of ``compare``'s docstring.
      doc: the method's part of ``compare``'s docstring (its problem, contenders, metrics,
        settings and goals).
    """

    name: str
    contenders: Mapping
    defaults: tuple
    metrics: Any
    default_metrics: Any = None
    goals: Callable = _no_goals
    pairs: Callable | None = None
    problem: Callable = lambda problem, settings: problem
    settings: type | None = None
    check_settings: Callable | None = None
    check_items: Callable | None = None
    check_grid: Callable | None = None
    tuning: int = 0
    seeds: int = 8
    batch: Callable | None = None
    summary: str = ""
    doc: str = ""


GENERIC = Spec("protocol", {}, (), (Metric("value"),))

# The arguments every ``compare`` takes, in this order, with these defaults (docs/core.rst).
ARGUMENTS = (("key", inspect.Parameter.empty), ("problem", inspect.Parameter.empty),
             ("contenders", None), ("tuning", None), ("seeds", None), ("goals", None),
             ("pairs", None), ("metrics", None), ("settings", None), ("batch", None),
             ("level", 0.95), ("resamples", 2000), ("progress", True),
             ("results_path", None))


def item_keys(key: PRNGKey, split: str, index) -> jax.Array:
    """[n] keys of the items ``index`` of ``split``: ``fold_in(fold_in(key, s), i)`` with
    ``s`` = 0 for tuning, 1 for test. The one place item keys are made, so that a binary
    and ``compare`` give the same item the same key."""
    validation.check_one_of("split", split, SPLITS)
    stream = jax.random.fold_in(as_key(key), SPLITS.index(split))
    index = np.asarray(index, np.int64)
    return jax.vmap(lambda i: jax.random.fold_in(stream, i))(np.asarray(index, np.uint32))


def as_tuning(tuning) -> Tuning:
    """``tuning`` (a ``Tuning`` or an int, the number of tuning items) as a ``Tuning``.

    Raises:
      TypeError: ``tuning`` is neither a ``Tuning`` nor an int (a bool is not a count).
      ValueError: its item count is negative.
    """
    if isinstance(tuning, (bool, np.bool_)):
        raise TypeError(f"`tuning` must be a count of tuning items (an int) or a "
                        f"protocol.Tuning, got the bool {tuning}.")
    tuning = Tuning(tuning) if isinstance(tuning, (int, np.integer)) else tuning
    if not isinstance(tuning, Tuning):
        raise TypeError(f"`tuning` must be a protocol.Tuning or an int, got "
                        f"{type(tuning).__name__}.")
    items = tuning.items
    if isinstance(items, (bool, np.bool_)) or not isinstance(items, (int, np.integer)):
        raise TypeError(f"`tuning.items` must be an int, got {type(items).__name__}.")
    if items < 0:
        raise ValueError(f"`tuning.items` must be a non-negative integer, got {items}.")
    return Tuning(int(items))


def _count(name: str, value, minimum: int, why: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"`{name}` must be an int, got {type(value).__name__} {value!r}.")
    validation.check_min_count(name, int(value), minimum, why)
    return int(value)


# --- compile seconds from JAX's monitoring events, listened to during one call ----------------

_COMPILE_EVENTS = ("/jax/core/compile/backend_compile_duration",
                   "/jax/core/compile/jaxpr_trace_duration",
                   "/jax/core/compile/jaxpr_to_mlir_module_duration")


class _CompileClock:
    """Sums JAX's compile-duration events while registered (a context manager)."""

    def __init__(self):
        self.seconds = 0.0

    def _on(self, event: str, seconds: float, **kwargs) -> None:
        del kwargs
        if event in _COMPILE_EVENTS:
            self.seconds += seconds

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self._on)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self._on)
        return False


# --- progress --------------------------------------------------------------------------------

class _Reporter:
    """Lines on stderr: at most every ``every_s`` seconds, and when a phase ends."""

    def __init__(self, every_s: float = 5.0):
        self._every_s, self._last = every_s, -math.inf

    def __call__(self, done: int, total: int, desc: str) -> None:
        now = time.perf_counter()
        if done >= total or now - self._last >= self._every_s:
            self._last = now
            print(f"compare: {desc} {done}/{total}", file=sys.stderr, flush=True)


def _reporter(progress) -> Callable[[int, int, str], None]:
    if progress is True:
        return _Reporter()
    if progress is False or progress is None:
        return lambda done, total, desc: None
    if not callable(progress):
        raise TypeError(f"`progress` must be True, False or a callable (done, total, "
                        f"description), got {type(progress).__name__}.")
    return progress


class _Log:
    """Appends one JSON line per computed chunk to ``path`` (None: nothing), each carrying
    the run id; the folder is created and the file opened before anything runs."""

    def __init__(self, path, run_id: str, header: dict):
        self._path, self._run = None, run_id
        if path is None:
            return
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"`results_path` must be a path, got {type(path).__name__}.")
        self._path = os.fspath(path)
        if os.path.isdir(self._path):
            raise ValueError(f"`results_path` {self._path!r} is a folder; name a file.")
        try:
            os.makedirs(os.path.dirname(os.path.abspath(self._path)), exist_ok=True)
            self.write({"start": header})
        except OSError as e:
            raise ValueError(f"`results_path` {self._path!r} cannot be written: {e}") from e

    def write(self, record: dict) -> None:
        if self._path is None:
            return
        with open(self._path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"run": self._run, **record}, sort_keys=True) + "\n")
            f.flush()


# --- checks made before anything runs ---------------------------------------------------------

def _grid_points(name: str, grid) -> tuple:
    """The grid's stages as tuples of dicts (one stage for a plain grid)."""
    stages = grid.stages if isinstance(grid, Stages) else (grid,)
    if isinstance(stages, (str, Mapping)) or not isinstance(stages, Sequence) or not stages:
        raise ValueError(f"`contenders[{name!r}]` grid must be a non-empty sequence of "
                         "dicts of `run`'s keyword arguments, or Stages of them.")
    out = []
    for s, stage in enumerate(stages):
        if isinstance(stage, (str, Mapping)) or not isinstance(stage, Sequence) or \
                not stage or not all(isinstance(p, Mapping) for p in stage):
            where = f" Stages[{s}]" if isinstance(grid, Stages) else ""
            raise ValueError(f"`contenders[{name!r}]` grid{where} must be a non-empty sequence "
                             f"of dicts of `run`'s keyword arguments, got {stage!r}.")
        points = tuple(dict(p) for p in stage)
        if len({json.dumps(plain(p), sort_keys=True, default=repr) for p in points}) < \
                len(points):
            raise ValueError(f"`contenders[{name!r}]` grid repeats a point: {points}.")
        out.append(points)
    return tuple(out)


def _check_params(name: str, run, stages: tuple) -> None:
    """Every grid key is a keyword of ``run``; every keyword ``run`` needs is set."""
    try:
        sig = inspect.signature(run)
    except (TypeError, ValueError):
        return
    params = list(sig.parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    names = {p.name for p in params[2:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    keys = {k for stage in stages for point in stage for k in point}
    unknown = sorted(keys - names)
    if unknown:
        raise ValueError(f"`contenders[{name!r}]` grid sets {unknown}, which its `run` does "
                         f"not take (it takes {sorted(names)}).")
    required = {p.name for p in params[2:] if p.default is p.empty
                and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    missing = sorted(required - {k for stage in stages for point in stage for k in point})
    if missing:
        raise ValueError(f"`contenders[{name!r}]`'s `run` needs {missing}, which its grid "
                         "never sets.")


def _resolve_contenders(spec: Spec, contenders, context: Context) -> tuple[dict, list]:
    """(the call's contenders, name to ``Contender``, built-ins made from ``context``;
    the names of the built-in ones)."""
    if contenders is None:
        contenders = spec.defaults
        if not contenders:
            raise ValueError("`contenders` must be given: a {name: Contender} mapping.")
    if isinstance(contenders, (str, Contender, Builtin)):
        raise TypeError(f"`contenders` must be a sequence of built-in names or a mapping, "
                        f"name to contender, got one {type(contenders).__name__} "
                        f"({contenders!r}); write ({contenders!r},) for a sequence of one.")
    if isinstance(contenders, Mapping):
        entries = list(contenders.items())
    elif isinstance(contenders, Sequence) or hasattr(contenders, "__iter__"):
        entries = []
        for c in contenders:
            if not isinstance(c, str):
                raise TypeError(f"`contenders` entries must be built-in names (str), got "
                                f"{type(c).__name__}; pass a mapping to add your own.")
            entries.append((c, c))
    else:
        raise TypeError(f"`contenders` must be a sequence of names or a mapping, got "
                        f"{type(contenders).__name__}.")
    if not entries:
        raise ValueError("`contenders` must not be empty.")
    shown = [n for n, _ in entries]
    for n in shown:
        if not isinstance(n, str) or not n:
            raise TypeError(f"`contenders` names must be non-empty strings, got {n!r}.")
    repeated = sorted({n for n in shown if shown.count(n) > 1})
    if repeated:
        raise ValueError(f"`contenders` names must be unique, got {repeated} more than once.")
    known = tuple(spec.contenders)
    out, builtins = {}, []
    for name, c in entries:
        if isinstance(c, str):
            c = Builtin(c)
        if c is None:
            raise TypeError(f"`contenders[{name!r}]` is None: name the built-in contender "
                            f"(one of {known}) or pass a protocol.Contender.")
        if isinstance(c, Builtin):
            builtins.append(name)
            if c.name not in spec.contenders:
                raise ValueError(f"`contenders[{name!r}]` names {c.name!r}, which is not a "
                                 f"built-in contender of {spec.name}: one of {known}.")
            made = spec.contenders[c.name](context)
            if c.grid is not None:
                if spec.check_grid is not None:
                    points = [p for stage in _grid_points(name, c.grid) for p in stage]
                    spec.check_grid(c.name, points)
                made = made._replace(grid=c.grid)
            c = made
        elif not isinstance(c, Contender):
            raise TypeError(f"`contenders[{name!r}]` must be a built-in name, a "
                            f"protocol.Builtin or a protocol.Contender, got "
                            f"{type(c).__name__} (a method's own factory, such as "
                            "rfo.contender(config), makes a Contender of a config).")
        if not callable(c.run):
            raise TypeError(f"`contenders[{name!r}].run` must be callable.")
        stages = _grid_points(name, c.grid)
        _check_params(name, c.run, stages)
        out[name] = c._replace(grid=Stages(stages) if isinstance(c.grid, Stages)
                               else stages[0])
    return out, builtins


def _all_metrics(spec: Spec, problem, settings) -> tuple:
    ms = spec.metrics(problem, settings) if callable(spec.metrics) else spec.metrics
    return tuple(ms)


def _resolve_metrics(spec: Spec, metrics, problem, settings, declared: dict) -> tuple:
    """The call's metrics (``declared``: the spec's, name to ``Metric``)."""
    if metrics is None:
        names = spec.default_metrics
        if callable(names):
            names = names(problem, settings)
        return tuple(declared[n] for n in (names or tuple(declared)[:1]))
    if isinstance(metrics, (str, Metric)) or not hasattr(metrics, "__iter__"):
        raise TypeError(f"`metrics` must be a sequence of metric names (or Metric objects), "
                        f"got {metrics!r}; write ({metrics!r},) for one.")
    out = []
    for m in metrics:
        if isinstance(m, str):
            if m not in declared:
                raise ValueError(f"`metrics` names {m!r}, which {spec.name} does not declare: "
                                 f"one of {tuple(declared)}.")
            m = declared[m]
        elif not isinstance(m, Metric):
            raise TypeError(f"`metrics` entries must be names or Metric objects, got {m!r}.")
        _check_metric(m)
        out.append(m)
    if not out:
        raise ValueError("`metrics` must name at least one metric.")
    names = [m.name for m in out]
    if len(set(names)) != len(names):
        raise ValueError(f"`metrics` names a metric twice: {names}.")
    return tuple(out)


def _check_metric(m: Metric) -> None:
    if not isinstance(m.name, str) or not m.name:
        raise TypeError(f"a Metric's name must be a non-empty string, got {m.name!r}.")
    lo, hi = m.bounds
    if not lo < hi:
        raise ValueError(f"Metric {m.name!r}: `bounds` must be (low, high) with low < high, "
                         f"got {m.bounds}.")
    if not callable(m.statistic):
        raise TypeError(f"Metric {m.name!r}: `statistic` must be callable.")
    if m.censor_at is not None:
        c = m.censor_at
        if isinstance(c, bool) or not isinstance(c, (int, float, np.number)) or \
                not math.isfinite(c):
            raise ValueError(f"Metric {m.name!r}: `censor_at` must be a finite number, got "
                             f"{c!r}.")


# --- values returned by a contender ------------------------------------------------------------

def _as_numbers(name: str, what: str, values, n: int) -> np.ndarray:
    v = np.asarray(values)
    if v.dtype.kind not in "biuf":
        raise TypeError(f"contender {name!r} returned {what} of dtype {v.dtype}: it must be "
                        "real numbers, one per item.")
    v = v.astype(np.float64)
    if v.shape != (n,):
        raise ValueError(f"contender {name!r} must return one value per item for {what}, "
                         f"shape ({n},), got shape {v.shape}.")
    return v


def _split_outcome(name: str, out, n: int, metrics: tuple, split: str,
                   declared: frozenset = frozenset()) -> tuple[dict, dict]:
    """(metric name to [n] values, record field to [n, ...] array) of one call's output;
    the values of ``declared`` metrics not compared are dropped, not kept as records."""
    names = [m.name for m in metrics]
    if isinstance(out, Mapping):
        missing = [m for m in names if m not in out]
        if missing:
            raise ValueError(f"contender {name!r} returned no values for metrics {missing} "
                             f"(it returned {sorted(map(str, out))}).")
        values = {m: _as_numbers(name, f"metric {m!r}", jax.device_get(out[m]), n)
                  for m in names}
        records = {}
        for f, r in out.items():
            if f in values or f in declared:
                continue
            r = np.asarray(jax.device_get(r))
            if r.ndim == 0 or r.shape[0] != n:
                raise ValueError(f"contender {name!r} returned the record {f!r} with shape "
                                 f"{r.shape}: a record needs a leading axis of {n} items.")
            records[f] = r
        return values, records
    if len(metrics) > 1:
        raise ValueError(f"contender {name!r} returned one array, but the comparison has the "
                         f"metrics {names}: return a dict {{metric: [n] values}}.")
    return {names[0]: _as_numbers(name, f"metric {names[0]!r}", jax.device_get(out), n)}, {}


def _censor(name: str, m: Metric, v: np.ndarray, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(values with censored items at ``censor_at``, censored flags); raises on what the
    metric does not allow (NaN is left to the caller)."""
    bad_inf = -np.inf if m.higher_is_better else np.inf
    good = v == -bad_inf
    if good.any():
        raise ValueError(f"contender {name!r} returned {-bad_inf} for {int(good.sum())} "
                         f"{split} items of {m.name!r}: only a censored item may be infinite, "
                         f"at {bad_inf}.")
    censored = v == bad_inf
    if censored.any() and m.censor_at is None:
        raise ValueError(f"contender {name!r} returned {bad_inf} for {int(censored.sum())} "
                         f"{split} items of {m.name!r}, which declares no censoring (no "
                         "`censor_at`).")
    finite = np.isfinite(v)
    lo, hi = m.bounds
    outside = finite & ((v < lo) | (v > hi))
    if outside.any():
        raise ValueError(f"contender {name!r} returned values outside {m.name!r}'s range "
                         f"[{lo}, {hi}] for {int(outside.sum())} {split} items (e.g. "
                         f"{v[outside][0]!r}).")
    if m.censor_at is not None:
        worse = (v < m.censor_at) if m.higher_is_better else (v > m.censor_at)
        worse &= finite
        if worse.any():
            raise ValueError(f"contender {name!r} returned {v[worse][0]!r} for a {split} item "
                             f"of {m.name!r}, worse than `censor_at` = {m.censor_at}: a "
                             "censored item would then count as better than a real one.")
        v = np.where(censored, m.censor_at, v)
    return v, censored


# --- the runner --------------------------------------------------------------------------------

def _chunks(count: int, batch: int | None):
    step = count if not batch else batch
    for start in range(0, count, step):
        yield np.arange(start, min(start + step, count))


def _pick(rows: list, higher_is_better: bool) -> int:
    stats = np.array([s for _, s in rows], np.float64)
    ok = ~np.isnan(stats)
    best = np.max(stats[ok]) if higher_is_better else np.min(stats[ok])
    return int(np.flatnonzero(ok & (stats == best))[0])


def compare(key: PRNGKey, problem, *, contenders=None, tuning=None, seeds=None, goals=None,
            pairs=None, metrics=None, settings=None, batch=None, level: float = 0.95,
            resamples: int = 2000, progress=True, results_path=None,
            spec: Spec = GENERIC) -> Comparison:
    """Runs the protocol of this module's docstring (``jaxlab.<method>.compare`` is this
    with the method's ``spec``).

    Args:
      key: PRNG key: item keys and the bootstrap draws derive from it.
      problem: passed (after ``spec.problem``) to every contender's ``run``.
      contenders: a mapping, name to ``Contender`` (or to a built-in name or ``Builtin``
        of ``spec``), in the order the table shows them; or a sequence of built-in names;
        None: ``spec.defaults``.
      tuning: ``Tuning(items)`` or the number of tuning items (None: ``spec.tuning``).
      seeds: the number of paired test items (seeds or problems), >= 2 (None:
        ``spec.seeds``).
      goals: declared ``Goal`` objects; None: ``spec.goals`` of the contenders; ``()``:
        none.
      pairs: declared differences; None: ``spec.pairs`` (default: the first contender
        against each other one).
      metrics: metric names of ``spec`` or ``Metric`` objects, the first tuned on; None:
        ``spec.default_metrics`` (with no spec: one metric, ``"value"``, higher better).
      settings: the method's settings (``spec.settings`` or a dict of its fields; None:
        its defaults).
      batch: items per ``run`` call (None: ``spec.batch``, else all items of a phase in
        one call). Results are written and progress reported per call.
      level: CI level in (0, 1).
      resamples: bootstrap resamples, >= 2.
      progress: True (lines on stderr), False, or a callable
        ``progress(done, total, description)``.
      results_path: a JSON-lines file that each call's per-item values are appended to.
      spec: the method's declaration (default: none, every contender yours).

    Returns:
      ``Comparison``.

    Raises:
      ValueError / TypeError naming the argument, before any contender runs where the
        input allows it (module docstring); naming the contender when what it returns is
        not allowed.
    """
    p = _prepare(spec, key, problem, contenders, tuning, seeds, metrics, settings, batch)
    names = tuple(p.contenders)
    if goals is None:
        goals = tuple(g for g in spec.goals(names, tuple(p.metric_names)) if g.a in p.contenders
                      and g.b in p.contenders and (g.metric is None or g.metric in p.metric_names))
    if pairs is None and spec.pairs is not None:
        pairs = spec.pairs(names)
    pairs, goals = check_declarations(names, pairs, goals, level, resamples, p.metric_names)
    with _CompileClock() as clock:
        runner = _runner(spec, p, progress, results_path, clock)
        chosen, rows, stage_rows = {}, {}, {}
        for name in names:
            chosen[name], rows[name], stage_rows[name] = runner.tune(name)
        outcomes = {name: runner.run(name, "test", p.seeds, chosen[name]) for name in names}
    return _analysis(p.key, p.contenders, p.metrics, outcomes, chosen, rows, stage_rows,
                     runner, pairs, goals, level, resamples, p.tuning, runner.run_id)


class Tuned(NamedTuple):
    """What ``tune`` chose: per contender, its chosen params, its tuning rows
    ``((params, statistic), ...)`` and the rows of each stage; and the notes."""

    params: dict
    rows: dict
    stages: dict
    notes: tuple


def tune(key: PRNGKey, problem, *, contenders=None, tuning=None, metrics=None, settings=None,
         batch=None, progress=True, results_path=None, spec: Spec = GENERIC) -> Tuned:
    """``compare``'s tuning alone: every contender's grid (or ``Stages``) on the tuning items,
    the same checks and picks, no test items (a binary that tunes, then tests at other
    sizes, calls this; ``compare`` is this followed by the test runs). The arguments are
    ``compare``'s.

    Returns:
      ``Tuned``.
    """
    p = _prepare(spec, key, problem, contenders, tuning, None, metrics, settings, batch)
    with _CompileClock() as clock:
        runner = _runner(spec, p, progress, results_path, clock)
        picks = {name: runner.tune(name) for name in p.contenders}
    return Tuned({n: v[0] for n, v in picks.items()}, {n: v[1] for n, v in picks.items()},
                 {n: v[2] for n, v in picks.items()}, tuple(runner.notes))


class _Prepared(NamedTuple):
    key: Any
    problem: Any
    settings: Any
    contenders: dict
    metrics: tuple
    metric_names: list
    declared: frozenset
    tuning: int
    seeds: int
    batch: int | None


def _prepare(spec, key, problem, contenders, tuning, seeds, metrics, settings,
             batch) -> _Prepared:
    """Every check of the call's arguments that needs no run; the contenders built."""
    key = as_key(key)
    settings = _resolve_settings(spec, settings)
    problem = spec.problem(problem, settings)
    tuning = as_tuning(spec.tuning if tuning is None else tuning).items
    seeds = _count("seeds", spec.seeds if seeds is None else seeds, 2, "paired test items")
    if batch is not None:
        batch = _count("batch", batch, 1, "items per call")
    declared = {m.name: m for m in _all_metrics(spec, problem, settings)}
    chosen_metrics = _resolve_metrics(spec, metrics, problem, settings, declared)
    context = Context(problem, settings, tuning, seeds, batch, chosen_metrics)
    if batch is None and spec.batch is not None:
        batch = spec.batch(context)
        context = context._replace(batch=batch)
    cs, builtins = _resolve_contenders(spec, contenders, context)
    tuned = [n for n, c in cs.items()
             if isinstance(c.grid, Stages) and any(len(s) > 1 for s in c.grid.stages)
             or not isinstance(c.grid, Stages) and len(c.grid) > 1]
    if tuned and tuning < 1:
        raise ValueError(f"`tuning` must hold at least one item: contenders {tuned} declare "
                         "grids with several points.")
    metric_names = [m.name for m in chosen_metrics]
    foreign = [m for m in metric_names if m not in declared]
    if foreign and builtins:
        raise ValueError(f"`metrics` {foreign} are not metrics of {spec.name}, so its built-in "
                         f"contenders {builtins} cannot report them.")
    if spec.check_items is not None:
        spec.check_items(problem, settings, tuning, seeds)
    return _Prepared(key, problem, settings, cs, chosen_metrics, metric_names,
                     frozenset(declared), tuning, seeds, batch)


def _runner(spec: Spec, p: _Prepared, progress, results_path,
            clock: _CompileClock) -> "_Runner":
    run_id = uuid.uuid4().hex[:12]
    log = _Log(results_path, run_id, {
        "method": spec.name, "contenders": list(p.contenders), "tuning": p.tuning,
        "seeds": p.seeds, "metrics": p.metric_names})
    return _Runner(p, _reporter(progress), log, run_id, clock)


def _resolve_settings(spec: Spec, settings):
    if spec.settings is None:
        if settings is not None:
            raise TypeError(f"`settings` must be left out: {spec.name}'s comparison has no "
                            "settings.")
        return None
    cls = spec.settings
    if settings is None:
        settings = cls()
    elif isinstance(settings, Mapping):
        unknown = sorted(set(settings) - set(cls._fields))
        if unknown:
            raise ValueError(f"`settings` has no fields {unknown}; {cls.__name__}'s fields are "
                             f"{cls._fields}.")
        settings = cls(**settings)
    elif not isinstance(settings, cls):
        raise TypeError(f"`settings` must be a {spec.name} {cls.__name__} or a dict of its "
                        f"fields, got {type(settings).__name__}.")
    if spec.check_settings is not None:
        spec.check_settings(settings)
    return settings


class _Runner:
    """Runs contenders on items: chunks, timing, value checks, the results log."""

    def __init__(self, p: _Prepared, report, log: _Log, run_id: str, clock: _CompileClock):
        self.key, self.problem, self.contenders = p.key, p.problem, p.contenders
        self.metrics, self.tuning, self.batch = p.metrics, p.tuning, p.batch
        self.declared = p.declared
        self.report, self.log, self.run_id, self.clock = report, log, run_id, clock
        self.seconds = {n: [0.0, 0.0] for n in p.contenders}
        self.notes = []

    def run(self, name: str, split: str, count: int, params: dict):
        """(metric to [count] values, metric to censored flags, records) of one phase."""
        c = self.contenders[name]
        parts = {m.name: [] for m in self.metrics}
        flags = {m.name: [] for m in self.metrics}
        records: dict = {}
        desc = f"{split} {name}{' ' + params_text(params) if params else ''}"
        done = 0
        for index in _chunks(count, self.batch):
            items = Items(split, index, item_keys(self.key, split, index), self.tuning)
            c0, t0 = self.clock.seconds, time.perf_counter()
            out = c.run(items, self.problem, **params)
            values, recs = _split_outcome(name, out, index.size, self.metrics, split,
                                          self.declared)
            wall, comp = time.perf_counter() - t0, self.clock.seconds - c0
            self.seconds[name][0] += comp
            self.seconds[name][1] += max(wall - comp, 0.0)
            for m in self.metrics:
                v = values[m.name]
                nan = np.isnan(v)
                if nan.any() and split == "test":
                    raise ValueError(f"contender {name!r} returned NaN for {int(nan.sum())} of "
                                     f"{index.size} test items of {m.name!r}.")
                v, cens = _censor(name, m, v, split)
                parts[m.name].append(v)
                flags[m.name].append(cens)
            for f, r in recs.items():
                records.setdefault(f, []).append(r)
            self.log.write({"split": split, "contender": name, "params": plain(params),
                            "index": index.tolist(),
                            "values": {m: values[m].tolist() for m in values}})
            done += index.size
            self.report(done, count, desc)
        return ({m: np.concatenate(p) for m, p in parts.items()},
                {m: np.concatenate(f) for m, f in flags.items()},
                {f: np.concatenate(r) for f, r in records.items()})

    def tune(self, name: str):
        """(chosen params, tuning rows, rows per stage) of one contender."""
        c = self.contenders[name]
        stages = c.grid.stages if isinstance(c.grid, Stages) else (c.grid,)
        m = self.metrics[0]
        base, rows, per_stage = {}, [], []
        for s, stage in enumerate(stages):
            points = [{**base, **p} for p in stage]
            if len(points) == 1:
                base = points[0]
                continue
            stage_rows = []
            for params in points:
                values, _, _ = self.run(name, "tuning", self.tuning, params)
                v = values[m.name]
                stat = math.nan if np.isnan(v).any() else float(m.statistic(v, np.arange(v.size)))
                stage_rows.append((params, stat))
            where = f"Stages[{s}] of " if len(stages) > 1 else ""
            stats = [st for _, st in stage_rows]
            if all(math.isnan(st) for st in stats):
                raise ValueError(f"contender {name!r}: every point of {where}its grid has a NaN "
                                 f"tuning statistic of {m.name!r}; nothing can be chosen.")
            bad = [p for p, st in stage_rows if math.isnan(st)]
            if bad:
                self._note(f"contender {name!r}: {len(bad)} grid points of {where}its grid have "
                           f"a NaN tuning statistic and were not chosen: {bad}.")
            if len(set(stats)) == 1:
                self._note(f"contender {name!r}: tuning tied across {where}its whole grid "
                           f"({stats[0]:.4g}); the first point was kept.")
            base = stage_rows[_pick(stage_rows, m.higher_is_better)][0]
            rows += stage_rows
            per_stage.append(len(stage_rows))
        return base, tuple(rows), tuple(per_stage)

    def _note(self, text: str) -> None:
        self.notes.append(text)
        warnings.warn(text, RuntimeWarning, stacklevel=4)


def _analysis(key, cs, metrics, outcomes, chosen, rows, stage_rows, runner, pairs, goals,
              level, resamples, tuning, run_id) -> Comparison:
    results = []
    for i, m in enumerate(metrics):
        results.append(analyse(
            jax.random.fold_in(key, 2), {n: outcomes[n][0][m.name] for n in cs},
            censored={n: outcomes[n][1][m.name] for n in cs}, params=chosen,
            tuning=rows if i == 0 else None, stages=stage_rows if i == 0 else None,
            seconds={n: tuple(s) for n, s in runner.seconds.items()}, pairs=pairs,
            goals=tuple(g for g in goals if (g.metric or metrics[0].name) == m.name),
            metric=m.name, higher_is_better=m.higher_is_better,
            statistic=m.statistic, level=level, resamples=resamples, tuning_items=tuning,
            censor_at=m.censor_at, ratio=m.ratio))
    notes = tuple(runner.notes) + tuple(n for r in results for n in r.notes)
    records = {n: outcomes[n][2] for n in cs if outcomes[n][2]}
    head = results[0]
    return dataclasses.replace(head, others={r.metric: r for r in results[1:]},
                               records=records, notes=notes, run_id=run_id)


def bind(spec: Spec) -> Callable[..., Comparison]:
    """``jaxlab.<method>.compare``: ``compare`` with ``spec``, its docstring the spec's.

    Every bound ``compare`` has the arguments of ``ARGUMENTS`` in that order with those
    defaults (None: the spec's default).

    Raises:
      TypeError: ``spec`` is not a ``Spec``.
    """
    if not isinstance(spec, Spec):
        raise TypeError(f"`spec` must be a protocol.Spec, got {type(spec).__name__}.")

    def bound(key: PRNGKey, problem, *, contenders=None, tuning=None, seeds=None, goals=None,
              pairs=None, metrics=None, settings=None, batch=None, level: float = 0.95,
              resamples: int = 2000, progress=True, results_path=None) -> Comparison:
        return compare(key, problem, contenders=contenders, tuning=tuning, seeds=seeds,
                       goals=goals, pairs=pairs, metrics=metrics, settings=settings,
                       batch=batch, level=level, resamples=resamples, progress=progress,
                       results_path=results_path, spec=spec)

    bound.__name__ = bound.__qualname__ = "compare"
    bound.__doc__ = _docstring(spec)
    return bound


def _wrapped(text: str, indent: str = "    ") -> str:
    """``text`` wrapped at 88 characters, later lines indented (a docstring's Args entry)."""
    return textwrap.fill(text, 88, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False).lstrip()


def _docstring(spec: Spec) -> str:
    metric_names = [m.name for m in spec.metrics] if not callable(spec.metrics) else None
    metrics_line = (f"names among {tuple(metric_names)}" if metric_names
                    else "names of the method's metrics")
    contenders_doc = _wrapped(
        f"contenders: built-in names among {tuple(spec.contenders)} (default "
        f"{spec.defaults}), or a mapping, name to a built-in name, "
        "``protocol.Builtin(name, grid)`` or your own ``protocol.Contender``; the table "
        "keeps this order.")
    metrics_doc = _wrapped(
        f"metrics: {metrics_line}, or ``protocol.Metric`` objects for contenders of your "
        "own; the first is tuned on. None: the method's default.")
    return f"""{spec.summary or f"The {spec.name} comparison (``jaxlab.core.protocol``)."}

{spec.doc}

Args:
  key: PRNG key: the items' keys and the bootstrap draws derive from it.
  problem: the problem every contender runs on (above).
  {contenders_doc}
  tuning: tuning items (an int or ``protocol.Tuning``; default {spec.tuning}), disjoint
    from the test items.
  seeds: paired test items, >= 2 (default {spec.seeds}).
  goals: declared ``protocol.Goal`` objects; None: the method's claims about the contenders
    compared; ``()``: none.
  pairs: declared differences ``((a, b), ...)``; None: the method's.
  {metrics_doc}
  settings: the method's settings (above), or a dict of their fields; None: defaults.
  batch: items per contender call (None: the method's default).
  level: CI level in (0, 1).
  resamples: bootstrap resamples, >= 2.
  progress: True (lines on stderr), False, or ``progress(done, total, description)``.
  results_path: a JSON-lines file each call's per-item values are appended to.

Returns:
  ``protocol.Comparison``: ``table()``, ``to_dict()``, ``figure()``,
  ``comparison[metric]`` for each further metric, ``records`` per contender.

Raises:
  ValueError / TypeError naming the argument before any contender runs; naming the
  contender when what it returns is not allowed.
"""
