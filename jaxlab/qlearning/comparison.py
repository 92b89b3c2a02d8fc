"""The paper's comparison on any MDP: samples to eps of the growing (theory) period
schedule against the best constant period, as a ``jaxlab.core.protocol.Spec``.

The claim under test (arXiv 2602.03911): with a constant period K the sample complexity of
periodic Q-learning carries a log((1 - gamma)^-1 eps^-1) factor that the growing period
K_n = K_0 gamma^(-2n/3) removes, so the ratio of sample complexities theory / constant
falls below 1 as eps shrinks. ``compare = protocol.bind(SPEC)``; its docstring says the
protocol.

What is ours: the packaging of the study's protocol (validation-picked grid points, paired
test seeds, censoring at the run length); the paper states the rates.
"""

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from jaxlab.core import protocol, validation
from jaxlab.qlearning import schedules
from jaxlab.qlearning.mdp import TabularMDP
from jaxlab.qlearning.runs import Problem, check_problem, problem, samples_to_eps

__all__ = ["DEFAULT_BASES", "DEFAULT_PERIODS", "SPEC", "compare", "constant_contender",
           "growth_contender"]

# The quick study's declared grids (experiments/configs/qlearning.py): constant periods 25 to
# 12800, one per doubling; bases K_0 1 to 64, one per factor 4.
DEFAULT_PERIODS = tuple(25 * 2**i for i in range(10))
DEFAULT_BASES = (1.0, 4.0, 16.0, 64.0)
THEORY_POWER = 2.0 / 3.0
GROWTH_PREFIX = "growth p="


def _by_metric(problem: Problem, need: np.ndarray) -> dict:
    return dict(zip(problem.metric_names, need, strict=True))


def _grid(name: str, values) -> tuple:
    """A declared grid as a tuple (TypeError naming ``name`` for one number or a string)."""
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise TypeError(f"`{name}` must be a sequence (the declared grid), got "
                        f"{type(values).__name__} {values!r}: write ({values!r},) for one "
                        "point.")
    values = tuple(values)
    if not values:
        raise ValueError(f"`{name}` must be non-empty.")
    return values


def _check_period(name: str, k) -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, float, np.number)) or \
            not np.isfinite(k) or int(k) != k or k < 1:
        raise ValueError(f"`{name}` must be an integer >= 1, got {k!r}.")
    return int(k)


def _check_base(name: str, b) -> float:
    if isinstance(b, (bool, np.bool_)) or not isinstance(b, (int, float, np.number)):
        raise ValueError(f"`{name}` must be a number >= 1, got {b!r}.")
    validation.check_finite(name, float(b))
    validation.check_in_range(name, float(b), 1.0)
    return float(b)


def constant_contender(periods: Sequence[int] = DEFAULT_PERIODS) -> protocol.Contender:
    """Periodic Q-learning with a constant period K, K tuned over ``periods``.

    Args:
      periods: the declared grid of integer periods >= 1.

    Returns:
      ``protocol.Contender`` with grid ``({"period": K}, ...)``; its ``run`` returns each
      of the problem's metrics.

    Raises:
      TypeError: ``periods`` is one number rather than a sequence.
      ValueError: ``periods`` is empty or holds an entry that is not an integer >= 1.
    """
    periods = [_check_period(f"periods[{i}]", k) for i, k in
               enumerate(_grid("periods", periods))]

    def run(items, problem, *, period):
        k = _check_period("period", period)
        return _by_metric(problem, samples_to_eps(items.keys, problem, schedules.constant(k)))

    return protocol.Contender(run, tuple({"period": k} for k in periods))


def growth_contender(power: float = THEORY_POWER,
                     bases: Sequence[float] = DEFAULT_BASES) -> protocol.Contender:
    """Periodic Q-learning with a growing period K_n = K_0 gamma^(-power n) (``power =
    2/3``: the theory schedule), K_0 tuned over ``bases``.

    Args:
      power: the growth exponent p > 0.
      bases: the declared grid of K_0 >= 1.

    Returns:
      ``protocol.Contender`` with grid ``({"base": K_0}, ...)``; gamma is the problem's.

    Raises:
      TypeError: ``bases`` is one number rather than a sequence.
      ValueError: ``power`` not > 0 and finite, ``bases`` empty or an entry < 1.
    """
    validation.check_in_range("power", power, 0.0, low_inclusive=False)
    validation.check_finite("power", power)
    bases = [_check_base(f"bases[{i}]", b) for i, b in enumerate(_grid("bases", bases))]

    def run(items, problem, *, base):
        gamma = float(problem.mdp.gamma)
        schedule = schedules.growth(gamma, power, _check_base("base", base))
        return _by_metric(problem, samples_to_eps(items.keys, problem, schedule))

    return protocol.Contender(run, tuple({"base": b} for b in bases))


class _Builtins(Mapping):
    """The built-in contenders by name: ``"theory"``, ``"constant"`` and ``"growth
    p=<power>"`` for any power > 0 (a factory per name, from the call's context)."""

    def __getitem__(self, name):
        if name == "theory":
            return lambda ctx: growth_contender(THEORY_POWER, DEFAULT_BASES)
        if name == "constant":
            return lambda ctx: constant_contender(DEFAULT_PERIODS)
        if isinstance(name, str) and name.startswith(GROWTH_PREFIX):
            try:
                power = float(name[len(GROWTH_PREFIX):])
            except ValueError:
                raise KeyError(name) from None
            if np.isfinite(power) and power > 0:
                return lambda ctx: growth_contender(power, DEFAULT_BASES)
        raise KeyError(name)

    def __iter__(self):
        return iter(("theory", "constant", GROWTH_PREFIX + "<power>"))

    def __len__(self):
        return 3


def _check_grid(name: str, points) -> None:
    """A ``protocol.Builtin`` grid's values, before anything runs."""
    for i, point in enumerate(points):
        if "period" in point:
            _check_period(f"contenders[{name!r}] grid[{i}]['period']", point["period"])
        if "base" in point:
            _check_base(f"contenders[{name!r}] grid[{i}]['base']", point["base"])


def _as_problem(given, settings) -> Problem:
    del settings
    if isinstance(given, TabularMDP):
        return problem(given)
    return check_problem(given)


def _metrics(problem: Problem, settings) -> tuple:
    del settings
    n = float(problem.num_samples)
    return tuple(protocol.Metric(name, higher_is_better=False, bounds=(0.0, n), censor_at=n,
                                 ratio=True) for name in problem.metric_names)


SPEC = protocol.Spec(
    name="qlearning",
    contenders=_Builtins(),
    defaults=("theory", "constant"),
    metrics=_metrics,
    goals=lambda names, metrics: tuple(protocol.Goal("theory", "constant", metric=m)
                                       for m in metrics),
    problem=_as_problem,
    check_grid=_check_grid,
    tuning=4,
    seeds=8,
    summary="The paper's comparison on any MDP: samples to eps of the theory period schedule "
            "against the best constant period, grids tuned on validation seeds, paired test "
            "seeds, censoring at the run length.",
    doc="""\
Claim (arXiv 2602.03911): the growing period K_n = K_0 gamma^(-2n/3) removes the
log((1 - gamma)^-1 eps^-1) factor a constant period K pays, so the ratio of sample
complexities theory / constant falls below 1.

* **Problem**: a ``qlearning.Problem`` (``qlearning.problem(mdp, eps_rel=..., num_records=...,
  record_every=..., sampling=..., inner_loop=...)``) or a ``TabularMDP`` (built with those
  defaults).
* **Items** are seeds: item ``i`` of a split starts the run ``init(item_keys(key, split,
  i), mdp)`` (start state and sample stream); every contender runs on the same keys.
* **Metrics**, one per ``problem.eps_rel`` from the same runs (``problem.metric_names``;
  default: the first, which is tuned on): samples after which ||Q_target - Q*||_inf stays
  <= eps_rel ||Q*||_inf, lower is better, with the ratio theory / constant beside each
  difference. A run still above eps at its last record is censored at the run length
  (``problem.num_samples``): the means are restricted means and the table counts the
  censored seeds; a goal that holds only through censored seeds is marked and noted.
* **Contenders**: ``"theory"`` (K_0 tuned over ``DEFAULT_BASES``), ``"constant"`` (K tuned
  over ``DEFAULT_PERIODS``), ``"growth p=<p>"`` (K_n = K_0 gamma^(-p n), K_0 over
  ``DEFAULT_BASES``). Other grids: ``protocol.Builtin("constant", grid=[{"period": 50},
  ...])`` / ``[{"base": 4.0}, ...]``, or ``constant_contender(periods)`` /
  ``growth_contender(power, bases)``, which check the grid when they are built. Your own
  ``protocol.Contender``'s ``run(items, problem, **params)`` reads the ``Problem``
  (``samples_to_eps(items.keys, problem, schedule)`` is the per-seed runner).
* **Settings**: none. **Goal**: ``Goal("theory", "constant")``, the theory schedule needs
  fewer samples (the whole CI of theory - constant below zero).""")

compare = protocol.bind(SPEC)
