"""The last step of the comparison protocol: per-item test values in, statistics with paired
bootstrap CIs, differences (and ratios), wins / losses / ties and declared goals out.

``analyse`` is what ``protocol.compare`` calls once the contenders have run; a binary whose
units computed the per-item values calls it directly, so its table is ``compare``'s.

* **One bootstrap.** Every interval of one analysis uses the same index draws
  (``metrics.bootstrap_indices``, the draws of ``metrics.bootstrap_ci``), so the paired
  intervals are coherent: the CI of a difference of means is the percentile interval of the
  resampled mean per-item differences.
* **Ratios.** Where the paper states a ratio (``Metric.ratio``), each difference also
  carries ``statistic(a) / statistic(b)`` with its percentile interval over the same draws.
* **Censoring.** A censored item already counts as its metric's ``censor_at`` here; a goal
  met while any compared item is censored is marked (``GoalResult.censored``), and a goal
  that would not hold on the items where neither contender is censored is noted.

What is ours: the whole module (the papers report means; the paired bootstrap, the ratios'
intervals and the censoring marks are this library's protocol).
"""

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping
from typing import NamedTuple

import jax
import numpy as np

from jaxlab.core import metrics, validation
from jaxlab.core.keys import as_key

__all__ = ["Metric", "Goal", "Difference", "GoalResult", "ContenderResult", "Comparison",
           "analyse", "paired_difference", "mean_statistic"]


def mean_statistic(values: np.ndarray, index: np.ndarray) -> float:
    """The mean over items (the default statistic); ``index`` is unused.

    Raises:
      ValueError: ``values`` holds no items.
    """
    del index
    validation.check_nonempty("values", values)
    return float(np.mean(values))


class Metric(NamedTuple):
    """A declared per-item metric.

    Attributes:
      name: the metric's name (the table's and ``Comparison[name]``'s).
      higher_is_better: the direction; tuning keeps the best point by the first metric.
      bounds: (low, high), the range a finite per-item value must lie in (a value outside
        raises, naming the contender).
      statistic: ``statistic(values, index) -> float`` over items (default: the mean; e.g.
        an AUROC over image items whose labels follow from ``index``).
      censor_at: the value an item at the metric's *bad* infinity (``+inf`` when lower is
        better, ``-inf`` when higher is) counts as: a censored item, e.g. a run that never
        reached its target. None: no item may be censored. The other infinity is always
        an error, and so is a finite value worse than ``censor_at``.
      ratio: report ``statistic(a) / statistic(b)`` beside every difference (where the
        paper states its claim as a ratio).
    """

    name: str
    higher_is_better: bool = True
    bounds: tuple = (-math.inf, math.inf)
    statistic: Callable = mean_statistic
    censor_at: float | None = None
    ratio: bool = False


class Goal(NamedTuple):
    """A declared claim: ``a`` beats ``b`` by more than ``margin`` (in the statistic's
    units, better-is-positive) on ``metric`` (None: the first metric, the one tuned on),
    with the whole CI above ``margin``."""

    a: str
    b: str
    margin: float = 0.0
    metric: str | None = None


class Difference(NamedTuple):
    """``a - b`` on the paired test items (raw statistic difference, not oriented); with a
    ratio metric also ``a / b`` (NaN otherwise)."""

    a: str
    b: str
    value: float
    low: float
    high: float
    wins: int  # items where a is strictly better than b
    losses: int  # items where b is strictly better
    ties: int
    ratio: float = math.nan
    ratio_low: float = math.nan
    ratio_high: float = math.nan


class GoalResult(NamedTuple):
    """A goal's outcome; ``censored``: some compared item of ``a`` or ``b`` was censored,
    so the difference is a bound (``note`` says whether the goal holds without them)."""

    goal: Goal
    difference: float  # oriented: positive means ``a`` is better
    low: float
    high: float
    met: bool
    censored: bool = False
    note: str = ""


class ContenderResult(NamedTuple):
    """One contender's outcome on one metric.

    Attributes:
      params: the chosen grid point.
      tuning: ``((params, tuning statistic), ...)`` over the grid, every stage in order
        (empty when untuned).
      values: [n_test] per-item values on the test items (``censor_at`` where censored).
      censored: [n_test] bool, items that never reached the target.
      statistic: the statistic on the test items.
      low, high: its percentile-bootstrap CI.
      compile_s: XLA compilation seconds spent in this contender's calls (tuning + test):
        programs it compiled; a program an earlier contender compiled is not counted again.
      run_s: the rest of its wall seconds.
      stages: the number of tuning rows of each tuning stage (one stage: ``(len(tuning),)``).
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
    stages: tuple = ()


@dataclasses.dataclass(frozen=True)
class Comparison:
    """What ``compare`` found. ``table()`` prints it; ``to_dict()`` is JSON-ready;
    ``comparison["hits@10"]`` is the comparison of another metric of the same runs.

    Attributes:
      metric: the first metric's name (the one tuned on).
      higher_is_better: its direction.
      contenders: a dict, contender name to ``ContenderResult``, in the declared order.
      differences: one ``Difference`` per declared pair.
      goals: one ``GoalResult`` per declared goal.
      tuning_items, test_items: the item counts.
      level: the CI level.
      censor_at: the censoring value (None: nothing may be censored).
      others: a dict, metric name to the ``Comparison`` of each further metric of the same
        test runs (same pairs and goals; nothing tuned on them).
      records: a dict, contender name to its per-item records on the test items (a dict,
        field to an array with a leading axis over items), what a contender returned
        beside its metrics (answers, diagnostics).
      notes: warnings about this comparison (a goal that holds only through censored items,
        a tuning grid tied everywhere, ...), also issued as ``RuntimeWarning``.
      run_id: this run's id (``results_path`` lines carry it).
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
    others: dict = dataclasses.field(default_factory=dict)
    records: dict = dataclasses.field(default_factory=dict)
    notes: tuple = ()
    run_id: str = ""

    @property
    def metrics(self) -> tuple[str, ...]:
        """Every metric's name, the tuned one first."""
        return (self.metric, *self.others)

    def __getitem__(self, metric: str) -> "Comparison":
        if metric == self.metric:
            return self
        if metric not in self.others:
            raise KeyError(f"no metric {metric!r} in this comparison; it has {self.metrics}.")
        return self.others[metric]

    def table(self) -> str:
        """A plain-text table per metric: each contender (chosen setting, statistic with CI,
        censored count, compile / run seconds), each difference (CI, ratio where declared,
        wins / losses / ties), each goal, then the notes."""
        parts = [self._table()] + [c._table() for c in self.others.values()]
        if self.notes:
            parts.append("\n".join(f"  note: {n}" for n in self.notes))
        return "\n".join(parts)

    def _table(self) -> str:
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
                         f"{'  ' + params_text(r.params) if r.params else ''}")
        for d in self.differences:
            ratio = (f"  ratio {d.ratio:.4g} [{d.ratio_low:.4g}, {d.ratio_high:.4g}]"
                     if not math.isnan(d.ratio) else "")
            lines.append(f"  {d.a} - {d.b}: {d.value:+.4g} [{d.low:+.4g}, {d.high:+.4g}]"
                         f"{ratio}  wins {d.wins}, losses {d.losses}, ties {d.ties}")
        for g in self.goals:
            state = "met" if g.met else "not met"
            if g.met and g.censored:
                state = "met (a bound: censored items)"
            lines.append(f"  goal {g.goal.a} better than {g.goal.b} by > {g.goal.margin:g}: "
                         f"{state} ({g.difference:+.4g} [{g.low:+.4g}, {g.high:+.4g}])")
        return "\n".join(lines)

    def to_dict(self, seconds: bool = True) -> dict:
        """JSON-ready: every number a Python float / int / bool, arrays as lists;
        ``seconds=False`` leaves out what changes from run to run (compile / run seconds,
        the run id), for a summary that must be byte-identical across reruns."""
        out = self._dict(seconds)
        if self.others:
            out["others"] = {m: c._dict(seconds) for m, c in self.others.items()}
        if self.records:
            out["records"] = {n: {f: np.asarray(v).tolist() for f, v in r.items()}
                              for n, r in self.records.items()}
        if self.notes:
            out["notes"] = list(self.notes)
        if seconds and self.run_id:
            out["run_id"] = self.run_id
        return out

    def _dict(self, seconds: bool) -> dict:
        timing = (lambda r: {"compile_s": round(r.compile_s, 3), "run_s": round(r.run_s, 3)}) \
            if seconds else (lambda r: {})

        def difference(d):
            out = {"a": d.a, "b": d.b, "value": d.value, "ci": [d.low, d.high],
                   "wins": d.wins, "losses": d.losses, "ties": d.ties}
            if not math.isnan(d.ratio):
                out["ratio"], out["ratio_ci"] = d.ratio, [d.ratio_low, d.ratio_high]
            return out

        def goal(g):
            out = {"a": g.goal.a, "b": g.goal.b, "margin": g.goal.margin,
                   "difference": g.difference, "ci": [g.low, g.high], "met": g.met}
            if g.goal.metric is not None:
                out["metric"] = g.goal.metric
            if g.censored:
                out["censored"], out["note"] = True, g.note
            return out

        return {
            "metric": self.metric, "higher_is_better": self.higher_is_better,
            "tuning_items": self.tuning_items, "test_items": self.test_items,
            "level": self.level, "censor_at": self.censor_at,
            "contenders": {n: {"params": plain(r.params),
                               "tuning": [[plain(p), s] for p, s in r.tuning],
                               "values": [float(v) for v in r.values],
                               "censored": [bool(c) for c in r.censored],
                               "statistic": r.statistic, "ci": [r.low, r.high],
                               **timing(r)}
                           for n, r in self.contenders.items()},
            "differences": [difference(d) for d in self.differences],
            "goals": [goal(g) for g in self.goals]}

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


def params_text(params: Mapping) -> str:
    """``k=v, ...`` of a grid point."""
    return ", ".join(f"{k}={v}" for k, v in params.items())


def plain(x):
    """``x`` with NumPy scalars as Python scalars and tuples as lists (JSON-ready)."""
    if isinstance(x, Mapping):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, (np.generic, np.ndarray)) and np.ndim(x) == 0:
        return x.item()
    return x


def _better(a: np.ndarray, b: np.ndarray, higher_is_better: bool) -> tuple[int, int, int]:
    d = (a - b) if higher_is_better else (b - a)
    return int((d > 0).sum()), int((d < 0).sum()), int((d == 0).sum())


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
    if np.isnan(boots).all():
        return math.nan, math.nan
    lo, hi = np.nanpercentile(boots, [50 - 50 * level, 50 + 50 * level])
    return float(lo), float(hi)


def _checked_pairs(pairs, names) -> tuple:
    pairs = tuple((names[0], o) for o in names[1:]) if pairs is None else pairs
    if isinstance(pairs, str) or not hasattr(pairs, "__iter__"):
        raise TypeError(f"`pairs` must be a sequence of (a, b) name pairs, got {pairs!r}.")
    out = []
    for p in pairs:
        p = tuple(p) if isinstance(p, (tuple, list)) else (p,)
        if len(p) != 2 or any(x not in names for x in p):
            raise ValueError(f"`pairs` entries must be (a, b) with a, b among {list(names)}, "
                             f"got {p!r}.")
        if p[0] == p[1]:
            raise ValueError(f"`pairs` entry {p!r} compares a contender with itself.")
        if p in out:
            raise ValueError(f"`pairs` holds {p!r} twice.")
        out.append(p)
    return tuple(out)


def _checked_goals(goals, names, metrics) -> tuple:
    if isinstance(goals, (str, Goal)) or not hasattr(goals, "__iter__"):
        raise TypeError(f"`goals` must be a sequence of Goal(a, b, margin), got {goals!r}.")
    goals = tuple(goals)
    for g in goals:
        if not isinstance(g, Goal):
            raise TypeError(f"`goals` must hold Goal(a, b, margin) objects, got {g!r}.")
        if g.a not in names or g.b not in names:
            raise ValueError(f"`goals` entry {g!r} names a contender not among "
                             f"{list(names)}.")
        if g.a == g.b:
            raise ValueError(f"`goals` entry {g!r} compares a contender with itself.")
        if isinstance(g.margin, bool) or not isinstance(g.margin, (int, float, np.number)) \
                or not math.isfinite(g.margin):
            raise ValueError(f"`goals` entry {g!r} needs a finite number as its margin.")
        if g.metric is not None and g.metric not in metrics:
            raise ValueError(f"`goals` entry {g!r} names the metric {g.metric!r}, which is not "
                             f"compared (the metrics are {list(metrics)}).")
    if len(set(goals)) != len(goals):
        raise ValueError(f"`goals` holds a goal twice: {list(goals)}.")
    return goals


def check_declarations(names, pairs, goals, level, resamples, metrics) -> tuple[tuple, tuple]:
    """The declared pairs and goals against the contenders' and metrics' names, and the CI
    settings: what ``analyse`` would refuse, checked before anything runs.

    Returns:
      (pairs, goals) as tuples (``pairs=None``: the first contender against each other).
    """
    names = list(names)
    validation.check_min_count("resamples", resamples, 2, "a percentile interval")
    if isinstance(level, bool):
        raise TypeError("`level` must be a number in (0, 1), got a bool.")
    validation.check_in_range("level", level, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    return _checked_pairs(pairs, names), _checked_goals(goals, names, list(metrics))


def analyse(key, values: Mapping[str, np.ndarray], *, censored=None, params=None,
            tuning=None, seconds=None, pairs=None, goals=(), metric: str = "value",
            higher_is_better: bool = True, statistic=mean_statistic, level: float = 0.95,
            resamples: int = 2000, tuning_items: int = 0,
            censor_at: float | None = None, ratio: bool = False, stages=None,
            warn: bool = True) -> Comparison:
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
      goals: declared ``Goal`` objects (on this metric: their ``metric`` None or
        ``metric``).
      metric: the statistic's name.
      higher_is_better: its direction.
      statistic: ``statistic(values, index) -> float``.
      level: CI level in (0, 1).
      resamples: bootstrap resamples (>= 2).
      tuning_items: the number of tuning items (for the table).
      censor_at: the value censored items count as (for the table).
      ratio: also report ``statistic(a) / statistic(b)`` for every pair.
      stages: a dict, contender name to its rows per tuning stage.
      warn: issue the notes as ``RuntimeWarning`` warnings too.

    Returns:
      ``Comparison``.

    Raises:
      ValueError naming the argument: no contenders, values of different shapes, fewer
        than 2 items, unknown or self-compared pairs or goals, ``level`` or ``resamples``
        out of range.

    Warns:
      RuntimeWarning: a contender's values are not all finite, or its statistic is not
        (its results are then NaN; ``compare`` refuses such values before this step).
    """
    names = list(values)
    if not names:
        raise ValueError("`values` must name at least one contender.")
    pairs, goals = check_declarations(names, pairs, goals, level, resamples, (metric,))
    vals = {n: np.asarray(values[n], np.float64) for n in names}
    n_items = vals[names[0]].shape[0] if vals[names[0]].ndim else 0
    for n, v in vals.items():
        if v.shape != (n_items,):
            raise ValueError(f"`values[{n!r}]` must have shape ({n_items},), got {v.shape}.")
        if not np.isfinite(v).all():  # a study's summary still completes (``compare`` raises)
            warnings.warn(f"`values[{n!r}]` holds {int((~np.isfinite(v)).sum())} non-finite "
                          "values (censor them at a finite `censor_at` first): its statistic, "
                          "interval and differences are not finite.", RuntimeWarning,
                          stacklevel=2)
    validation.check_min_count("test items", n_items, 2, "a paired bootstrap needs two items")
    key = as_key(key)
    idx = np.asarray(metrics.bootstrap_indices(key, n_items, resamples))
    everything = np.arange(n_items)
    point = {n: float(statistic(v, everything)) for n, v in vals.items()}
    for n, p in point.items():
        if not math.isfinite(p) and np.isfinite(vals[n]).all():
            warnings.warn(f"the statistic {metric!r} of contender {n!r} is {p} on the test "
                          "items.", RuntimeWarning, stacklevel=2)
    boots = {n: _boot_stats(v, idx, statistic) for n, v in vals.items()}
    censored = {n: np.asarray((censored or {}).get(n, np.zeros(n_items, bool)), bool)
                for n in names}
    results = {}
    for n in names:
        lo, hi = _interval(boots[n], level)
        cs, rs = (seconds or {}).get(n, (0.0, 0.0))
        rows = tuple((tuning or {}).get(n, ()))
        results[n] = ContenderResult(
            params=dict((params or {}).get(n, {})), tuning=rows, values=vals[n],
            censored=censored[n], statistic=point[n], low=lo, high=hi,
            compile_s=float(cs), run_s=float(rs),
            stages=tuple((stages or {}).get(n, (len(rows),) if rows else ())))

    def diff(a, b):
        if statistic is mean_statistic:  # the mean of per-item differences
            lo, hi = _interval((vals[a] - vals[b])[idx].mean(axis=1), level)
        else:
            lo, hi = _interval(boots[a] - boots[b], level)
        r = (math.nan,) * 3
        if ratio:
            with np.errstate(divide="ignore", invalid="ignore"):
                rb = boots[a] / boots[b]
            rb[~np.isfinite(rb)] = np.nan
            q = point[a] / point[b] if point[b] != 0 else math.nan
            r = (q, *_interval(rb, level))
        return Difference(a, b, point[a] - point[b], lo, hi,
                          *_better(vals[a], vals[b], higher_is_better), *r)

    notes = []
    sign = 1.0 if higher_is_better else -1.0
    goal_results = []
    for g in goals:
        d = diff(g.a, g.b)
        lo, hi = sorted((sign * d.low, sign * d.high))
        met = bool(lo > g.margin)
        any_censored = bool(censored[g.a].any() or censored[g.b].any())
        note = ""
        if met and any_censored:
            note = _censored_goal_note(key, g, vals, censored, statistic, sign, resamples,
                                       level)
            if note:
                notes.append(note)
        goal_results.append(GoalResult(g, sign * d.value, lo, hi, met, any_censored, note))
    if warn:
        for n in notes:
            warnings.warn(n, RuntimeWarning, stacklevel=2)
    return Comparison(metric=metric, higher_is_better=higher_is_better, contenders=results,
                      differences=tuple(diff(a, b) for a, b in pairs),
                      goals=tuple(goal_results), tuning_items=int(tuning_items),
                      test_items=int(n_items), level=level, censor_at=censor_at,
                      notes=tuple(notes))


def _censored_goal_note(key, g: Goal, vals, censored, statistic, sign, resamples,
                        level) -> str:
    """The note of a goal met while items are censored: whether it also holds on the items
    where neither contender is censored (empty when it does)."""
    keep = ~(censored[g.a] | censored[g.b])
    where = f"goal {g.a} better than {g.b} by > {g.margin:g}"
    if keep.sum() < 2:
        return (f"{where} holds only through censored items: {int(keep.sum())} test items "
                "have neither contender censored.")
    a, b = vals[g.a][keep], vals[g.b][keep]
    n = a.size
    sub = np.asarray(metrics.bootstrap_indices(jax.random.fold_in(key, 1), n, resamples))
    try:
        diffs = np.array([statistic(a[i], i) - statistic(b[i], i) for i in sub])
    except ValueError:
        diffs = np.array([np.nan])
    lo, hi = sorted(sign * np.asarray(_interval(diffs, level)))
    if not lo > g.margin:
        return (f"{where} holds only through censored items: on the {n} items with neither "
                f"censored its CI is [{lo:+.4g}, {hi:+.4g}].")
    return ""


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
