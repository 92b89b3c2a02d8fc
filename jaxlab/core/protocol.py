"""The comparison protocol, one function for every method: tune on validation items, test on
held-out paired items, report paired bootstrap CIs, censoring and declared goals.

``compare(key, problem, *, contenders, tuning, seeds, goals)`` is the protocol the papers'
claims need and every ``jaxlab.<method>.compare`` configures:

1. **Items.** An item is what a paired comparison pairs: a seed (Q-learning, BCO, RFO,
   AvAtar) or a problem (POKE-SMC tasks, GEPC images, SALE heads). ``tuning`` items and
   ``seeds`` (test) items are drawn from disjoint key streams, ``fold_in(key, 0)`` and
   ``fold_in(key, 1)``, then one key per item (``fold_in(stream, index)``); a contender
   that builds a problem from a key (a task's problems, an MDP's sample stream) therefore
   never sees a test problem while it is tuned.
2. **Tuning.** Every point of every contender's declared grid runs on the tuning items; the
   point with the best statistic is kept (the first in grid order on a tie). A contender
   with a one-point grid is not run on the tuning items.
3. **Test.** Each contender runs its chosen point on the same test items.
4. **Differences.** For every declared pair ``(a, b)`` (default: the first contender
   against each other one): the statistic of ``a`` minus that of ``b`` with a paired
   percentile-bootstrap CI (test items resampled jointly, ``metrics.bootstrap_ci``'s index
   draws), and per-item wins, losses and ties.
5. **Censoring.** A contender may return ``inf`` for an item that never reached its target
   (e.g. samples to an accuracy never reached). With ``censor_at`` set, such a value counts
   as ``censor_at`` (a restricted mean: the difference is then a bound, and the table says
   how many items were censored per contender); without it an ``inf`` is an error.
6. **Goals.** ``Goal(a, b, margin)`` passes when the CI of ``a - b`` (oriented so that
   better is positive) lies above ``margin``.

Progress goes to stderr (``progress=True``, one line at most every few seconds and at the end
of each phase; visible in scripts and notebooks) or to a callable
``progress(done, total, description)``. XLA compilation seconds (JAX's monitoring events)
are reported apart from the rest of each contender's wall time. With ``results_path``,
each chunk's per-item values are appended to a JSON-lines file as soon as they are
computed (``flush`` after every chunk), so a killed run keeps what it finished.

What is ours: the whole module (the papers each state their own protocol in prose; this is
the common part of them: declared grids, validation-only tuning, paired test items,
bootstrap CIs).
"""

import dataclasses
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxlab.core import validation
from jaxlab.core.keys import as_key

__all__ = ["Items", "Contender", "Tuning", "Goal", "Difference", "GoalResult",
           "ContenderResult", "Comparison", "as_tuning", "compare", "item_keys",
           "paired_difference", "analyse", "mean_statistic"]

SPLITS = ("tuning", "test")


class Items(NamedTuple):
    """The items one call of a contender runs on.

    Attributes:
      split: ``"tuning"`` or ``"test"``.
      index: [n] int, the items' indices within the split (0 .. count - 1).
      keys: [n] typed PRNG keys, ``keys[i] = fold_in(fold_in(key, split_id), index[i])``.
    """

    split: str
    index: np.ndarray
    keys: jax.Array


class Contender(NamedTuple):
    """A named way of solving the problem, with its declared grid.

    Attributes:
      run: ``run(items, problem, **params) -> values`` [len(items.index)], one float per
        item (higher or lower is better as the comparison declares; ``inf`` marks a
        censored item).
      grid: the declared settings tried on the tuning items (dicts of keyword arguments of
        ``run``); the default, one empty setting, means nothing is tuned.
    """

    run: Callable[..., Any]
    grid: tuple = ({},)


class Tuning(NamedTuple):
    """The validation items a grid is tuned on.

    Attributes:
      items: number of tuning items (seeds or problems), disjoint from the test items; 0
        only when every grid has one point.
    """

    items: int = 0


class Goal(NamedTuple):
    """A declared claim: ``a`` beats ``b`` by more than ``margin`` (in the statistic's
    units, better-is-positive), with the whole CI above ``margin``."""

    a: str
    b: str
    margin: float = 0.0


class Difference(NamedTuple):
    """``a - b`` on the paired test items (raw statistic difference, not oriented)."""

    a: str
    b: str
    value: float
    low: float
    high: float
    wins: int  # items where a is strictly better than b
    losses: int  # items where b is strictly better
    ties: int


class GoalResult(NamedTuple):
    goal: Goal
    difference: float  # oriented: positive means ``a`` is better
    low: float
    high: float
    met: bool


class ContenderResult(NamedTuple):
    """One contender's outcome.

    Attributes:
      params: the chosen grid point.
      tuning: ``((params, tuning statistic), ...)`` over the grid (empty when untuned).
      values: [n_test] per-item values on the test items (``censor_at`` where censored).
      censored: [n_test] bool, items that never reached the target.
      statistic: the statistic on the test items.
      low, high: its percentile-bootstrap CI.
      compile_s: XLA compilation seconds spent in this contender's calls (tuning + test).
      run_s: the rest of its wall seconds.
    """

    params: dict
    tuning: tuple
    values: np.ndarray
    censored: np.ndarray
    statistic: float
    low: float
    high: float
    compile_s: float
    run_s: float


def mean_statistic(values: np.ndarray, index: np.ndarray) -> float:
    """The mean over items (the default statistic); ``index`` is unused.

    Raises:
      ValueError: ``values`` holds no items.
    """
    del index
    validation.check_nonempty("values", values)
    return float(np.mean(values))


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What ``compare`` found. ``table()`` prints it; ``to_dict()`` is JSON-ready.

    Attributes:
      metric: the statistic's name (e.g. ``"accuracy"``).
      higher_is_better: the direction of the statistic.
      contenders: a dict, contender name to ``ContenderResult``, in the declared order.
      differences: one ``Difference`` per declared pair.
      goals: one ``GoalResult`` per declared goal.
      tuning_items, test_items: the item counts.
      level: the CI level.
      censor_at: the censoring value (None: nothing may be censored).
    """

    metric: str
    higher_is_better: bool
    contenders: dict
    differences: tuple
    goals: tuple
    tuning_items: int
    test_items: int
    level: float
    censor_at: float | None = None

    def table(self) -> str:
        """A plain-text table: each contender (chosen setting, statistic with CI, censored
        count, compile / run seconds), each difference (CI, wins / losses / ties) and each
        goal."""
        pct = round(100 * self.level)
        lines = [f"{self.metric} ({'higher' if self.higher_is_better else 'lower'} is "
                 f"better), {self.test_items} paired test items, tuned on "
                 f"{self.tuning_items}; {pct}% bootstrap CIs"]
        width = max(len(n) for n in self.contenders)
        for name, r in self.contenders.items():
            cens = f"  censored {int(r.censored.sum())}/{r.censored.size}" if r.censored.any() \
                else ""
            lines.append(f"  {name:<{width}}  {r.statistic:.4g} [{r.low:.4g}, {r.high:.4g}]"
                         f"{cens}  compile {r.compile_s:.1f} s, run {r.run_s:.1f} s"
                         f"{'  ' + _params_text(r.params) if r.params else ''}")
        for d in self.differences:
            lines.append(f"  {d.a} - {d.b}: {d.value:+.4g} [{d.low:+.4g}, {d.high:+.4g}]  "
                         f"wins {d.wins}, losses {d.losses}, ties {d.ties}")
        for g in self.goals:
            lines.append(f"  goal {g.goal.a} better than {g.goal.b} by > {g.goal.margin:g}: "
                         f"{'met' if g.met else 'not met'} ({g.difference:+.4g} "
                         f"[{g.low:+.4g}, {g.high:+.4g}])")
        return "\n".join(lines)

    def to_dict(self, seconds: bool = True) -> dict:
        """JSON-ready: every number a Python float / int / bool, arrays as lists;
        ``seconds=False`` leaves out the compile / run seconds (for a summary that must be
        byte-identical across reruns)."""
        timing = (lambda r: {"compile_s": round(r.compile_s, 3), "run_s": round(r.run_s, 3)}) \
            if seconds else (lambda r: {})
        return {
            "metric": self.metric, "higher_is_better": self.higher_is_better,
            "tuning_items": self.tuning_items, "test_items": self.test_items,
            "level": self.level, "censor_at": self.censor_at,
            "contenders": {n: {"params": _plain(r.params),
                               "tuning": [[_plain(p), s] for p, s in r.tuning],
                               "values": [float(v) for v in r.values],
                               "censored": [bool(c) for c in r.censored],
                               "statistic": r.statistic, "ci": [r.low, r.high],
                               **timing(r)}
                           for n, r in self.contenders.items()},
            "differences": [{"a": d.a, "b": d.b, "value": d.value, "ci": [d.low, d.high],
                             "wins": d.wins, "losses": d.losses, "ties": d.ties}
                            for d in self.differences],
            "goals": [{"a": g.goal.a, "b": g.goal.b, "margin": g.goal.margin,
                       "difference": g.difference, "ci": [g.low, g.high], "met": g.met}
                      for g in self.goals]}

    def figure(self):
        """A matplotlib figure: each contender's statistic with its CI (left) and each
        difference with its CI (right). Imports matplotlib when called (the library itself
        never does)."""
        import matplotlib.pyplot as plt

        fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(9, 0.5 + 0.45 * max(
            len(self.contenders), len(self.differences), 2)))
        names = list(self.contenders)
        for i, n in enumerate(names):
            r = self.contenders[n]
            ax0.errorbar(r.statistic, i, xerr=[[r.statistic - r.low], [r.high - r.statistic]],
                         fmt="o", capsize=3)
        ax0.set_yticks(range(len(names)), names)
        ax0.set_xlabel(self.metric)
        ax0.set_title(f"{self.test_items} test items")
        labels = [f"{d.a} - {d.b}" for d in self.differences]
        for i, d in enumerate(self.differences):
            ax1.errorbar(d.value, i, xerr=[[d.value - d.low], [d.high - d.value]], fmt="o",
                         capsize=3)
        ax1.axvline(0.0, color="grey", lw=0.8)
        ax1.set_yticks(range(len(labels)), labels)
        ax1.set_xlabel(f"paired difference ({round(100 * self.level)}% CI)")
        fig.tight_layout()
        return fig


def _params_text(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _plain(x):
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (np.generic, np.ndarray)) and np.ndim(x) == 0:
        return x.item()
    return x


def item_keys(key, split: str, index) -> jax.Array:
    """[n] keys of the items ``index`` of ``split``: ``fold_in(fold_in(key, s), i)`` with
    ``s`` = 0 for tuning, 1 for test. The one place item keys are made, so that a binary
    and ``compare`` give the same item the same key."""
    validation.check_one_of("split", split, SPLITS)
    stream = jax.random.fold_in(as_key(key), SPLITS.index(split))
    index = np.asarray(index, np.int64)
    return jax.vmap(lambda i: jax.random.fold_in(stream, i))(np.asarray(index, np.uint32))


# --- compile seconds from JAX's monitoring events ------------------------------------------

_COMPILE_EVENTS = ("/jax/core/compile/backend_compile_duration",
                   "/jax/core/compile/jaxpr_trace_duration",
                   "/jax/core/compile/jaxpr_to_mlir_module_duration")
_compile_s = [0.0]
_listening = [False]


def _on_duration(event: str, seconds: float, **kwargs) -> None:
    del kwargs
    if event in _COMPILE_EVENTS:
        _compile_s[0] += seconds


def _compile_seconds() -> float:
    if not _listening[0]:
        jax.monitoring.register_event_duration_secs_listener(_on_duration)
        _listening[0] = True
    return _compile_s[0]


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


# --- the protocol ------------------------------------------------------------------------------

def _check_values(name: str, values, n: int, censor_at) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(values, np.float64)
    if v.shape != (n,):
        raise ValueError(f"contender {name!r} must return one value per item, shape ({n},), "
                         f"got shape {v.shape}.")
    if np.isnan(v).any():
        raise ValueError(f"contender {name!r} returned NaN for {int(np.isnan(v).sum())} of "
                         f"{n} items.")
    censored = np.isinf(v)
    if censored.any():
        if censor_at is None:
            raise ValueError(f"contender {name!r} returned inf (censored) for "
                             f"{int(censored.sum())} items; pass `censor_at` (the value a "
                             "censored item counts as) to allow censoring.")
        v = np.where(censored, censor_at, v)
    return v, censored


def _better(a: np.ndarray, b: np.ndarray, higher_is_better: bool) -> tuple[int, int, int]:
    d = (a - b) if higher_is_better else (b - a)
    return int((d > 0).sum()), int((d < 0).sum()), int((d == 0).sum())


def _boot_index(key, n: int, resamples: int) -> np.ndarray:
    # The same draws as metrics.bootstrap_ci.
    return np.asarray(jax.random.randint(as_key(key), (resamples, n), 0, n))


def _boot_stats(values: np.ndarray, idx: np.ndarray, statistic) -> np.ndarray:
    if statistic is mean_statistic:
        return values[idx].mean(axis=1)
    out = np.empty(idx.shape[0])
    for r, i in enumerate(idx):
        try:
            out[r] = statistic(values[i], i)
        except ValueError:
            out[r] = np.nan
    return out


def _interval(boots: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.nanpercentile(boots, [50 - 50 * level, 50 + 50 * level])
    return float(lo), float(hi)


def paired_difference(key, a, b, *, names=("a", "b"), statistic=mean_statistic,
                      higher_is_better: bool = True, level: float = 0.95,
                      resamples: int = 2000) -> Difference:
    """``statistic(a) - statistic(b)`` over paired items with a percentile-bootstrap CI.

    Args:
      key: PRNG key of the resample draws.
      a, b: [n] per-item values (n >= 2), paired by position.
      names: the two names the result carries.
      statistic: ``statistic(values, index) -> float`` (default: the mean).
      higher_is_better: orients wins and losses.
      level: CI level in (0, 1).
      resamples: bootstrap resamples (>= 2).

    Returns:
      ``Difference``.
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"`a` and `b` must be [n] arrays of one shape, got {a.shape} and "
                         f"{b.shape}.")
    if len(names) != 2 or names[0] == names[1]:
        raise ValueError(f"`names` must be two different names, got {names!r}.")
    for name, v in (("a", a), ("b", b)):
        if not np.isfinite(v).all():
            raise ValueError(f"`{name}` must be finite, got {int((~np.isfinite(v)).sum())} "
                             "non-finite values (censor them first).")
    return analyse(key, {names[0]: a, names[1]: b}, statistic=statistic,
                   higher_is_better=higher_is_better, level=level,
                   resamples=resamples).differences[0]


def analyse(key, values: Mapping[str, np.ndarray], *, censored=None, params=None,
            tuning=None, seconds=None, pairs=None, goals=(), metric: str = "value",
            higher_is_better: bool = True, statistic=mean_statistic, level: float = 0.95,
            resamples: int = 2000, tuning_items: int = 0,
            censor_at: float | None = None) -> Comparison:
    """The comparison of per-item test values already computed (``compare``'s last step;
    a binary whose units computed the values calls it directly).

    Args:
      key: PRNG key of the bootstrap draws (every interval uses the same draws, so paired
        intervals are coherent).
      values: a dict, contender name to its [n] test values (censored items already at
        ``censor_at``).
      censored: a dict, contender name to [n] bool censoring flags (default: none).
      params: a dict, contender name to its chosen params (default: empty).
      tuning: a dict, contender name to its ``(params, score)`` rows (default: empty).
      seconds: a dict, contender name to ``(compile_s, run_s)`` (default: zero).
      pairs: the declared differences ``((a, b), ...)``; default: the first contender
        against each other one.
      goals: declared ``Goal`` objects.
      metric: as in ``compare``.
      higher_is_better: as in ``compare``.
      statistic: as in ``compare``.
      level: as in ``compare``.
      resamples: as in ``compare``.
      tuning_items: the number of tuning items (for the table).
      censor_at: as in ``compare``.

    Returns:
      ``Comparison``.

    Warns:
      RuntimeWarning: a contender's values are not all finite (its results are then NaN).
    """
    names = list(values)
    if not names:
        raise ValueError("`values` must name at least one contender.")
    validation.check_min_count("resamples", resamples, 2, "a percentile interval")
    validation.check_in_range("level", level, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    vals = {n: np.asarray(values[n], np.float64) for n in names}
    n_items = vals[names[0]].shape[0]
    for n, v in vals.items():
        if v.shape != (n_items,):
            raise ValueError(f"`values[{n!r}]` must have shape ({n_items},), got {v.shape}.")
        if not np.isfinite(v).all():
            warnings.warn(f"`values[{n!r}]` holds {int((~np.isfinite(v)).sum())} non-finite "
                          "values (censor them at a finite `censor_at` first): its statistic, "
                          "interval and differences are not finite.", RuntimeWarning,
                          stacklevel=2)
    validation.check_min_count("test items", n_items, 2, "a paired bootstrap needs two items")
    pairs = tuple((names[0], o) for o in names[1:]) if pairs is None else tuple(
        tuple(p) for p in pairs)
    for p in pairs:
        if len(p) != 2 or any(x not in vals for x in p):
            raise ValueError(f"`pairs` entries must be (a, b) with a, b among {names}, got "
                             f"{p!r}.")
    goals = tuple(goals)
    for g in goals:
        if not isinstance(g, Goal) or g.a not in vals or g.b not in vals:
            raise ValueError(f"`goals` must be Goal(a, b, margin) with a, b among {names}, "
                             f"got {g!r}.")
    idx = _boot_index(key, n_items, resamples)
    everything = np.arange(n_items)
    point = {n: float(statistic(v, everything)) for n, v in vals.items()}
    boots = {n: _boot_stats(v, idx, statistic) for n, v in vals.items()}
    censored = censored or {}
    results = {}
    for n in names:
        lo, hi = _interval(boots[n], level)
        cs, rs = (seconds or {}).get(n, (0.0, 0.0))
        results[n] = ContenderResult(
            params=dict((params or {}).get(n, {})), tuning=tuple((tuning or {}).get(n, ())),
            values=vals[n], censored=np.asarray(censored.get(n, np.zeros(n_items, bool))),
            statistic=point[n], low=lo, high=hi, compile_s=float(cs), run_s=float(rs))

    def diff(a, b):
        if statistic is mean_statistic:  # the mean of per-item differences
            lo, hi = _interval((vals[a] - vals[b])[idx].mean(axis=1), level)
        else:
            lo, hi = _interval(boots[a] - boots[b], level)
        return Difference(a, b, point[a] - point[b], lo, hi,
                          *_better(vals[a], vals[b], higher_is_better))

    differences = tuple(diff(a, b) for a, b in pairs)
    goal_results = []
    for g in goals:
        d = diff(g.a, g.b)
        sign = 1.0 if higher_is_better else -1.0
        lo, hi = sorted((sign * d.low, sign * d.high))
        goal_results.append(GoalResult(g, sign * d.value, lo, hi, bool(lo > g.margin)))
    return Comparison(metric=metric, higher_is_better=higher_is_better, contenders=results,
                      differences=differences, goals=tuple(goal_results),
                      tuning_items=int(tuning_items), test_items=int(n_items), level=level,
                      censor_at=censor_at)


class _Log:
    """Appends one JSON line per computed chunk to ``path`` (None: nothing)."""

    def __init__(self, path):
        self._path = None if path is None else os.fspath(path)
        if self._path is not None:
            folder = os.path.dirname(os.path.abspath(self._path))
            if not os.path.isdir(folder):
                raise ValueError(f"`results_path`'s folder {folder!r} does not exist.")

    def write(self, record: dict) -> None:
        if self._path is None:
            return
        with open(self._path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
            f.flush()


def as_tuning(tuning) -> Tuning:
    """``tuning`` (a ``Tuning`` or an int, the number of tuning items) as a ``Tuning``.

    Raises:
      TypeError: ``tuning`` is neither a ``Tuning`` nor an int.
      ValueError: its item count is negative or not an integer.
    """
    tuning = Tuning(tuning) if isinstance(tuning, (int, np.integer)) else tuning
    if not isinstance(tuning, Tuning):
        raise TypeError(f"`tuning` must be a protocol.Tuning or an int, got "
                        f"{type(tuning).__name__}.")
    if tuning.items < 0 or int(tuning.items) != tuning.items:
        raise ValueError(f"`tuning.items` must be a non-negative integer, got {tuning.items}.")
    return tuning


def _chunks(count: int, batch: int | None):
    step = count if not batch else batch
    for start in range(0, count, step):
        yield np.arange(start, min(start + step, count))


def compare(key, problem, *, contenders: Mapping[str, Contender], tuning: Tuning | int,
            seeds: int, goals: Sequence[Goal] = (), pairs=None, metric: str = "value",
            higher_is_better: bool = True, statistic=mean_statistic,
            censor_at: float | None = None, batch: int | None = None, level: float = 0.95,
            resamples: int = 2000, progress=True, results_path=None) -> Comparison:
    """Runs the protocol of this module's docstring.

    Args:
      key: PRNG key: item keys and the bootstrap draws derive from it.
      problem: passed unchanged to every contender's ``run``.
      contenders: a dict, name to ``Contender``, in the order the table shows them.
      tuning: ``Tuning(items)`` or the number of tuning items.
      seeds: the number of paired test items (seeds or problems), >= 2.
      goals: declared ``Goal`` objects.
      pairs: declared differences (default: the first contender against each other one).
      metric: the statistic's name, for the table.
      higher_is_better: the statistic's direction (tuning keeps the best point).
      statistic: ``statistic(values, index) -> float`` over items (default: the mean;
        e.g. an AUROC over image items with the labels of ``index``).
      censor_at: the value a censored (``inf``) item counts as; None forbids censoring.
      batch: items per ``run`` call (None: all items of a phase in one call). Results are
        written and progress reported per call.
      level: CI level in (0, 1).
      resamples: bootstrap resamples.
      progress: True (lines on stderr), False, or a callable
        ``progress(done, total, description)``.
      results_path: a JSON-lines file that each call's per-item values are appended to.

    Returns:
      ``Comparison``.

    Raises:
      ValueError / TypeError naming the argument: no contenders, a contender that is not a
        ``Contender``, an empty grid, a multi-point grid with no tuning items, fewer than 2
        test items, a run returning the wrong shape, NaN, or inf without ``censor_at``.
    """
    key = as_key(key)
    if not isinstance(contenders, Mapping) or not contenders:
        raise ValueError("`contenders` must be a non-empty {name: Contender} mapping.")
    for name, c in contenders.items():
        if not isinstance(c, Contender):
            raise TypeError(f"`contenders[{name!r}]` must be a protocol.Contender, got "
                            f"{type(c).__name__}.")
        if not callable(c.run):
            raise TypeError(f"`contenders[{name!r}].run` must be callable.")
        if len(c.grid) == 0 or not all(isinstance(p, Mapping) for p in c.grid):
            raise ValueError(f"`contenders[{name!r}].grid` must be a non-empty sequence of "
                             "dicts of `run`'s keyword arguments.")
    tuning = as_tuning(tuning)
    tuned = [n for n, c in contenders.items() if len(c.grid) > 1]
    if tuned and tuning.items < 1:
        raise ValueError(f"`tuning` must hold at least one item: contenders {tuned} declare "
                         "grids with several points.")
    validation.check_min_count("seeds", seeds, 2, "paired test items")
    if batch is not None:
        validation.check_positive_int("batch", batch)
    if censor_at is not None and not math.isfinite(censor_at):
        raise ValueError(f"`censor_at` must be finite, got {censor_at}.")
    report = _reporter(progress)
    log = _Log(results_path)
    seconds = {n: [0.0, 0.0] for n in contenders}

    def run(name, split, count, params):
        c = contenders[name]
        out, cens = [], []
        desc = f"{split} {name}{' ' + _params_text(params) if params else ''}"
        done = 0
        for index in _chunks(count, batch):
            items = Items(split, index, item_keys(key, split, index))
            c0, t0 = _compile_seconds(), time.perf_counter()
            values = c.run(items, problem, **params)
            values = np.asarray(jax.device_get(values))
            wall, comp = time.perf_counter() - t0, _compile_seconds() - c0
            seconds[name][0] += comp
            seconds[name][1] += max(wall - comp, 0.0)
            v, ce = _check_values(name, values, index.size, censor_at)
            log.write({"split": split, "contender": name, "params": _plain(params),
                       "index": index.tolist(), "values": values.astype(float).tolist()})
            out.append(v)
            cens.append(ce)
            done += index.size
            report(done, count, desc)
        return np.concatenate(out), np.concatenate(cens)

    chosen, tuning_rows = {}, {}
    for name, c in contenders.items():
        if len(c.grid) == 1:
            chosen[name], tuning_rows[name] = dict(c.grid[0]), ()
            continue
        rows = []
        for params in c.grid:
            v, _ = run(name, "tuning", tuning.items, dict(params))
            rows.append((dict(params), float(statistic(v, np.arange(v.size)))))
        pick = (max if higher_is_better else min)(range(len(rows)), key=lambda i: rows[i][1])
        chosen[name], tuning_rows[name] = rows[pick][0], tuple(rows)
    values, censored = {}, {}
    for name in contenders:
        values[name], censored[name] = run(name, "test", seeds, chosen[name])
    return analyse(jax.random.fold_in(key, 2), values, censored=censored, params=chosen,
                   tuning=tuning_rows, seconds={n: tuple(s) for n, s in seconds.items()},
                   pairs=pairs, goals=goals, metric=metric, higher_is_better=higher_is_better,
                   statistic=statistic, level=level, resamples=resamples,
                   tuning_items=tuning.items, censor_at=censor_at)
