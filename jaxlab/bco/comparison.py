"""The paper's comparison on any loss sequence: final regret of the optimistic two-point
learner against plain two-point OGD, step sizes tuned on validation seeds, as a
``jaxlab.core.protocol.Spec``.

The claim under test (arXiv 2602.04761): with the previous gradient estimate as the
optimistic hint, two-point bandit OGD's regret scales with the gradient variation instead
of the gradients' size. ``compare = protocol.bind(SPEC)``; its docstring says the protocol.

What is ours: the packaging of the study's protocol as one function; the paper states the
bounds.
"""

from collections.abc import Sequence

import numpy as np

from jaxlab.bco.regrets import Problem, check_problem, final_regrets
from jaxlab.core import protocol, validation

__all__ = ["DEFAULT_MULTIPLIERS", "SPEC", "compare", "two_point_contender"]

# The quick study's declared step multipliers (experiments/configs/bco.py), times D.
DEFAULT_MULTIPLIERS = (1.0, 2**-0.5, 0.5, 2**-1.5, 0.25, 2**-2.5, 0.125, 2**-4, 2**-5, 2**-6)


def _metric(problem: Problem, values) -> dict:
    return {problem.metric_name: values}


def two_point_contender(optimistic: bool = True,
                        multipliers: Sequence[float] = DEFAULT_MULTIPLIERS
                        ) -> protocol.Contender:
    """Two-point OGD (optimistic: the paper's gradient-variation learner; else agarwal2010),
    the step multiplier tuned over ``multipliers``.

    Args:
      optimistic: the hint g_{t-1} (True) or none (False).
      multipliers: the declared grid of step multipliers m > 0 (step D m / sqrt(1 + S_t)).

    Returns:
      ``protocol.Contender`` with grid ``({"multiplier": m}, ...)``.
    """
    if not isinstance(optimistic, bool):
        raise TypeError(f"`optimistic` must be a bool, got {type(optimistic).__name__}.")
    if isinstance(multipliers, str) or not hasattr(multipliers, "__iter__"):
        raise TypeError(f"`multipliers` must be a sequence (the declared grid), got "
                        f"{type(multipliers).__name__} {multipliers!r}.")
    mults = tuple(float(m) for m in multipliers)
    if not mults:
        raise ValueError("`multipliers` must be non-empty.")
    for i, m in enumerate(mults):
        validation.check_in_range(f"multipliers[{i}]", m, 0.0, low_inclusive=False)
        validation.check_finite(f"multipliers[{i}]", m)

    def run_items(items, problem, *, multiplier):
        return _metric(problem, final_regrets(items.keys, problem, [multiplier],
                                              [optimistic])[0, 0])

    return protocol.Contender(run_items, tuple({"multiplier": m} for m in mults))


def _sqrt_d_contender() -> protocol.Contender:
    def run_items(items, problem):
        m = 1.0 / float(np.sqrt(problem.domain.dim))
        return _metric(problem, final_regrets(items.keys, problem, [m], [True])[0, 0])

    return protocol.Contender(run_items)


def _check_grid(name: str, points) -> None:
    """A ``protocol.Builtin`` grid's step multipliers (finite, > 0), before anything runs."""
    for i, point in enumerate(points):
        if "multiplier" in point:
            where = f"contenders[{name!r}] grid[{i}]['multiplier']"
            m = point["multiplier"]
            if isinstance(m, bool) or not isinstance(m, (int, float, np.number)):
                raise TypeError(f"`{where}` must be a number, got {type(m).__name__}.")
            validation.check_in_range(where, float(m), 0.0, low_inclusive=False)
            validation.check_finite(where, float(m))


SPEC = protocol.Spec(
    name="bco",
    contenders={"gradient_variation": lambda ctx: two_point_contender(True),
                "agarwal2010": lambda ctx: two_point_contender(False),
                "ogd_sqrt_d_step": lambda ctx: _sqrt_d_contender()},
    defaults=("gradient_variation", "agarwal2010"),
    metrics=lambda problem, settings: (
        protocol.Metric(problem.metric_name, higher_is_better=False),),
    goals=lambda names, metrics: (protocol.Goal("gradient_variation", "agarwal2010"),),
    problem=lambda problem, settings: check_problem(problem),
    check_grid=_check_grid,
    tuning=4,
    seeds=8,
    summary="The paper's comparison on any loss sequence: final regret of the optimistic "
            "two-point learner against plain two-point OGD, step multipliers tuned on "
            "validation seeds, paired test seeds.",
    doc="""\
Claim (arXiv 2602.04761): with the previous gradient estimate as the optimistic hint,
two-point bandit OGD's regret scales with the gradient variation instead of the gradients'
size.

* **Problem**: a ``bco.Problem``, ``bco.problem(make_seq, domain, delta=0.05,
  regret="static", comparator_iters=None)``; ``make_seq(key)`` builds one loss sequence.
* **Items** are seeds: item key k gives the sequence ``make_seq(k_seq)`` and the
  exploration directions (``k_run``), ``k_seq, k_run = jax.random.split(k)``; every
  contender plays the same sequences with the same directions.
* **Metric** (``problem.metric_name``): the final regret after T rounds, lower is better:
  static (against the best fixed point in the domain: the sequence's comparator, or the
  numerical one with ``comparator_iters``) or dynamic (against the per-round minimisers).
* **Contenders**: ``"gradient_variation"`` (optimistic two-point OGD, step
  D m / sqrt(1 + S_t), m tuned over ``DEFAULT_MULTIPLIERS``), ``"agarwal2010"`` (plain
  two-point OGD, same rule and grid), ``"ogd_sqrt_d_step"`` (the optimistic learner at
  m = 1/sqrt(d), untuned). Other grids: ``protocol.Builtin("agarwal2010",
  grid=[{"multiplier": 0.5}, ...])`` or ``two_point_contender(optimistic, multipliers)``,
  which checks the grid when it is built. Your own ``protocol.Contender``'s ``run(items,
  problem, **params)`` reads the ``Problem`` (``final_regrets(items.keys, problem,
  multipliers, optimistic)`` is the per-seed runner).
* **Settings**: none. **Goal**: ``Goal("gradient_variation", "agarwal2010")``, the
  optimistic learner's regret is lower (the whole CI of the difference below zero).""")

compare = protocol.bind(SPEC)
