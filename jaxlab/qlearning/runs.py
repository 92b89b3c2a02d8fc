"""Runs of periodic Q-learning on a user's MDP for the paper's comparison: the ``Problem``
(the MDP with the settings every run shares), every (schedule, seed) run in one jitted
program, and the samples each run needs to reach each accuracy eps.

What is ours: the batching (one program for every grid point) and the per-seed metric; the
paper states the rates (arXiv 2602.03911).
"""

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import numpy as np

from jaxlab.core import validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Array, PRNGKey
from jaxlab.qlearning import periodic_q, schedules
from jaxlab.qlearning.mdp import TabularMDP, check_mdp
from jaxlab.qlearning.value_iteration import value_iteration

__all__ = ["INNER_LOOPS", "Problem", "check_problem", "metric_name", "problem",
           "samples_to_eps", "simulate_runs"]

INNER_LOOPS = ("sgd", "running_mean")


def metric_name(eps_rel: float) -> str:
    """The name of the metric "samples to ``eps_rel`` ||Q*||_inf".

    Raises:
      TypeError: ``eps_rel`` is not a number.
    """
    if isinstance(eps_rel, (bool, np.bool_)) or not isinstance(eps_rel, (int, float, np.number)):
        raise TypeError(f"`eps_rel` must be a number, got {type(eps_rel).__name__} "
                        f"{eps_rel!r}.")
    return f"samples to ||Q_target - Q*||_inf <= {eps_rel:g} ||Q*||_inf"


class Problem(NamedTuple):
    """The user's MDP with the run settings every contender shares.

    Attributes:
      mdp: the ``TabularMDP`` (S states, A actions).
      q_star: [S, A] Q* (``value_iteration``).
      eps_rel: [E] accuracies as fractions of ||Q*||_inf, distinct and > 0; each is a
        metric of one run (the first is tuned on).
      num_records: records per run (R).
      record_every: samples between records; a run is ``num_records * record_every``
        samples.
      sampling: one of ``periodic_q.SAMPLING_MODES``.
      step_size: the inner loop's step (``paper_sgd_step`` for ``"sgd"``,
        ``schedules.inverse_count_step()`` for ``"running_mean"``).
    """

    mdp: TabularMDP
    q_star: Array
    eps_rel: tuple
    num_records: int
    record_every: int
    sampling: str
    step_size: schedules.SGDStep | schedules.PolynomialStep

    @property
    def eps(self) -> tuple[float, ...]:
        """[E] the absolute accuracies ``eps_rel * ||Q*||_inf``."""
        scale = float(np.abs(np.asarray(self.q_star)).max())
        return tuple(float(e) * scale for e in self.eps_rel)

    @property
    def num_samples(self) -> int:
        """Samples per run (the censoring value)."""
        return self.num_records * self.record_every

    @property
    def metric_names(self) -> tuple[str, ...]:
        """[E] the metrics' names, one per ``eps_rel`` (``compare``'s ``metrics=``)."""
        return tuple(metric_name(e) for e in self.eps_rel)


def _check_eps_rel(eps_rel) -> tuple[float, ...]:
    values = (eps_rel,) if np.ndim(eps_rel) == 0 else tuple(eps_rel)
    if not values:
        raise ValueError("`eps_rel` must hold at least one accuracy.")
    for i, e in enumerate(values):
        if isinstance(e, (bool, np.bool_)) or not isinstance(e, (int, float, np.number)):
            raise TypeError(f"`eps_rel[{i}]` must be a number, got {type(e).__name__} {e!r}.")
        validation.check_finite(f"eps_rel[{i}]", float(e))
        validation.check_in_range(f"eps_rel[{i}]", float(e), 0.0, low_inclusive=False)
    names = [metric_name(float(e)) for e in values]
    if len(set(names)) != len(names):
        raise ValueError(f"`eps_rel` must hold distinct accuracies, got {values}.")
    return tuple(float(e) for e in values)


def problem(mdp: TabularMDP, *, eps_rel: float | Sequence[float] = 0.1,
            num_records: int = 150, record_every: int = 1000, sampling: str = "trajectory",
            inner_loop: str = "sgd", q_star: Array | None = None) -> Problem:
    """Builds the ``Problem`` of an MDP.

    Args:
      mdp: any ``TabularMDP`` (``make_mdp`` or a built-in family).
      eps_rel: eps as a fraction of ||Q*||_inf, > 0, or several (one metric each, the
        first tuned on).
      num_records: records per run, >= 1.
      record_every: samples between records, >= 1 (a hitting time is known up to this).
      sampling: ``"trajectory"`` (one behaviour trajectory, the study's) or
        ``"generative"``.
      inner_loop: ``"sgd"`` (the paper's SGD step, ``paper_sgd_step``) or
        ``"running_mean"`` (alpha = 1 / visits).
      q_star: [S, A] Q* (default: ``value_iteration(mdp)``).

    Returns:
      ``Problem``.
    """
    check_mdp(mdp)
    eps_rel = _check_eps_rel(eps_rel)
    validation.check_positive_int("num_records", num_records)
    validation.check_positive_int("record_every", record_every)
    validation.check_one_of("sampling", sampling, periodic_q.SAMPLING_MODES)
    validation.check_one_of("inner_loop", inner_loop, INNER_LOOPS)
    q_star = value_iteration(mdp) if q_star is None else q_star
    validation.check_shape("q_star", q_star, (mdp.num_states, mdp.num_actions))
    validation.check_finite("q_star", q_star)
    if float(np.abs(np.asarray(q_star)).max()) <= 0.0:
        raise ValueError("`mdp` has Q* = 0 everywhere: eps = eps_rel ||Q*||_inf would be 0.")
    step = (periodic_q.paper_sgd_step(mdp, sampling) if inner_loop == "sgd"
            else schedules.inverse_count_step())
    return Problem(mdp=mdp, q_star=q_star, eps_rel=eps_rel, num_records=int(num_records),
                   record_every=int(record_every), sampling=sampling, step_size=step)


def check_problem(problem: Problem) -> Problem:
    """``problem`` if it is a well-formed ``Problem`` (one built by hand or ``_replace``-d
    included).

    Raises:
      TypeError: ``problem`` is not a ``Problem``.
      ValueError: a field out of range, naming ``problem.<field>``.
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"`problem` must be a qlearning Problem (qlearning.problem(mdp, "
                        f"eps_rel=..., ...)), got {type(problem).__name__}.")
    check_mdp(problem.mdp)
    _check_eps_rel(problem.eps_rel)
    validation.check_positive_int("problem.num_records", problem.num_records)
    validation.check_positive_int("problem.record_every", problem.record_every)
    validation.check_one_of("problem.sampling", problem.sampling, periodic_q.SAMPLING_MODES)
    validation.check_shape("problem.q_star", problem.q_star,
                           (problem.mdp.num_states, problem.mdp.num_actions))
    return problem


@functools.partial(jax.jit, static_argnames=("num_records", "record_every", "sampling"))
def simulate_runs(states: periodic_q.PeriodicQState, mdp: TabularMDP, period_schedules,
                  q_star: Array, step_size, *, num_records: int, record_every: int,
                  sampling: str) -> tuple[periodic_q.PeriodicQState, periodic_q.Trace]:
    """``periodic_q.simulate`` vmapped over runs, in one jitted program (the MDP, Q*, the
    schedules and the step are arguments, so one program serves every grid point).

    Args:
      states: [n] stacked ``PeriodicQState`` (``init`` vmapped over keys).
      mdp: the MDP.
      period_schedules: [n] stacked period schedules (``schedules.stack``), one per run.
      q_star: [S, A] Q*.
      step_size: the inner-loop step.
      num_records: records R.
      record_every: samples between records.
      sampling: one of ``periodic_q.SAMPLING_MODES``.

    Returns:
      ([n] final states, ``Trace`` with [n, R] fields).
    """
    sim = jax.vmap(lambda st, sc: periodic_q.simulate(
        st, mdp, sc, q_star, num_records, record_every, sampling, step_size))
    return sim(states, period_schedules)


@jax.jit
def _init_runs(keys, mdp):
    return jax.vmap(lambda k: periodic_q.init(k, mdp))(keys)


def samples_to_eps(keys: PRNGKey, problem: Problem, schedule) -> np.ndarray:
    """The per-item runner: one run per key under ``schedule``; samples to each eps.

    Args:
      keys: [n] PRNG keys (``protocol.item_keys``), one run each.
      problem: the ``Problem``.
      schedule: a period schedule ``n -> K_n`` (e.g. ``schedules.constant(50)``).

    Returns:
      [E, n] float64: per ``problem.eps`` (E of them), the samples after which
      ||Q_target - Q*||_inf stays <= eps (``inf`` for a run still above eps at its last
      record).

    Raises:
      TypeError: ``problem`` is not a ``Problem`` or ``schedule`` is not callable.
      ValueError: ``keys`` is not a 1-D batch of keys.
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"`problem` must be a qlearning Problem (qlearning.problem(mdp)), "
                        f"got {type(problem).__name__}.")
    if not callable(schedule):
        raise TypeError(f"`schedule` must be a period schedule n -> K_n (e.g. "
                        f"schedules.constant(50)), got {type(schedule).__name__} "
                        f"{schedule!r}.")
    keys = as_key(keys)
    if keys.ndim != 1:
        raise ValueError(f"`keys` must be [n] keys, got shape {keys.shape}.")
    n = keys.shape[0]
    states = _init_runs(keys, problem.mdp)
    scheds = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (n,) + np.shape(x)),
                          schedule)
    _, trace = simulate_runs(states, problem.mdp, scheds, problem.q_star, problem.step_size,
                             num_records=problem.num_records,
                             record_every=problem.record_every, sampling=problem.sampling)
    return np.stack([np.asarray(periodic_q.samples_to_accuracy(
        trace.samples[0], trace.target_error, eps), np.float64) for eps in problem.eps])

