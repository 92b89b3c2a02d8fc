"""The paper's comparison on any MDP: samples to eps of the growing (theory) period
schedule against the best constant period, through ``jaxlab.core.protocol``.

The claim under test (arXiv 2602.03911): with a constant period K the sample complexity of
periodic Q-learning carries a log((1 - gamma)^-1 eps^-1) factor that the growing period
K_n = K_0 gamma^(-2n/3) removes. The protocol:

* **Items** are seeds: item ``i`` of a split starts the run ``init(protocol.item_keys(key,
  split, i), mdp)`` (start state and sample stream); every contender runs on the same keys.
* **Metric**: samples after which ||Q_target - Q*||_inf stays <= eps for the rest of the
  run (``samples_to_accuracy``; lower is better), eps = ``eps_rel`` ||Q*||_inf. A run that
  is still above eps at its last record is censored at the run length (``censor_at``):
  the means are restricted means and the table counts the censored seeds.
* **Contenders** (built-in names): ``"theory"`` (K_n = K_0 gamma^(-2n/3), K_0 tuned over
  ``bases``), ``"constant"`` (K tuned over ``periods``) and ``"growth p=<p>"`` (K_n = K_0
  gamma^(-p n), K_0 tuned over ``bases``); or any ``protocol.Contender`` whose ``run(items,
  problem, **params)`` takes this module's ``Problem``.
* **Declared difference and goal**: theory - constant (default pairs: the first contender
  against each other one); ``Goal("theory", "constant")``: the theory schedule needs fewer
  samples, the whole CI below zero.

What is ours: the packaging of the study's protocol (validation-picked grid points, paired
test seeds, censoring at the run length) as one function; the paper states the rates.
"""

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import jax
import numpy as np

from jaxlab.core import protocol, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Array
from jaxlab.qlearning import periodic_q, schedules
from jaxlab.qlearning.mdp import TabularMDP, check_mdp
from jaxlab.qlearning.value_iteration import value_iteration

__all__ = ["DEFAULT_BASES", "DEFAULT_PERIODS", "INNER_LOOPS", "Problem", "builtin_contenders",
           "compare", "constant_contender", "growth_contender", "problem", "samples_to_eps",
           "simulate_runs"]

INNER_LOOPS = ("sgd", "running_mean")
# The quick study's declared grids (experiments/configs/qlearning.py): constant periods 25 to
# 12800, one per doubling; bases K_0 1 to 64, one per factor 4.
DEFAULT_PERIODS = tuple(25 * 2**i for i in range(10))
DEFAULT_BASES = (1.0, 4.0, 16.0, 64.0)
THEORY_POWER = 2.0 / 3.0


class Problem(NamedTuple):
    """The user's MDP with the run settings every contender shares.

    Attributes:
      mdp: the ``TabularMDP`` (S states, A actions).
      q_star: [S, A] Q* (``value_iteration``).
      eps: the accuracy, ``eps_rel * ||Q*||_inf`` (> 0).
      num_records: records per run (R).
      record_every: samples between records; a run is ``num_records * record_every``
        samples.
      sampling: one of ``periodic_q.SAMPLING_MODES``.
      step_size: the inner loop's step (``paper_sgd_step`` for ``"sgd"``,
        ``schedules.inverse_count_step()`` for ``"running_mean"``).
    """

    mdp: TabularMDP
    q_star: Array
    eps: float
    num_records: int
    record_every: int
    sampling: str
    step_size: schedules.SGDStep | schedules.PolynomialStep

    @property
    def num_samples(self) -> int:
        """Samples per run (the censoring value)."""
        return self.num_records * self.record_every


def problem(mdp: TabularMDP, *, eps_rel: float = 0.1, num_records: int = 150,
            record_every: int = 1000, sampling: str = "trajectory", inner_loop: str = "sgd",
            q_star: Array | None = None) -> Problem:
    """Builds the ``Problem`` of an MDP.

    Args:
      mdp: any ``TabularMDP`` (``make_mdp`` or a built-in family).
      eps_rel: eps as a fraction of ||Q*||_inf, > 0.
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
    validation.check_in_range("eps_rel", eps_rel, 0.0, low_inclusive=False)
    validation.check_finite("eps_rel", eps_rel)
    validation.check_positive_int("num_records", num_records)
    validation.check_positive_int("record_every", record_every)
    validation.check_one_of("sampling", sampling, periodic_q.SAMPLING_MODES)
    validation.check_one_of("inner_loop", inner_loop, INNER_LOOPS)
    q_star = value_iteration(mdp) if q_star is None else q_star
    validation.check_shape("q_star", q_star, (mdp.num_states, mdp.num_actions))
    validation.check_finite("q_star", q_star)
    scale = float(np.abs(np.asarray(q_star)).max())
    if scale <= 0.0:
        raise ValueError("`mdp` has Q* = 0 everywhere: eps = eps_rel ||Q*||_inf would be 0.")
    step = (periodic_q.paper_sgd_step(mdp, sampling) if inner_loop == "sgd"
            else schedules.inverse_count_step())
    return Problem(mdp=mdp, q_star=q_star, eps=float(eps_rel) * scale,
                   num_records=int(num_records), record_every=int(record_every),
                   sampling=sampling, step_size=step)


_build_problem = problem  # `compare`'s argument of the same name shadows it


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


def samples_to_eps(keys: Array, problem: Problem, schedule) -> np.ndarray:
    """The per-item runner: one run per key under ``schedule``; samples to eps.

    Args:
      keys: [n] PRNG keys (``protocol.item_keys``), one run each.
      problem: the ``Problem``.
      schedule: a period schedule ``n -> K_n`` (e.g. ``schedules.constant(50)``).

    Returns:
      [n] float64 samples after which ||Q_target - Q*||_inf stays <= ``problem.eps``
      (``inf`` for a run still above eps at its last record).

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
    need = periodic_q.samples_to_accuracy(trace.samples[0], trace.target_error, problem.eps)
    return np.asarray(need, np.float64)


def _grid(name: str, values) -> tuple:
    """A declared grid as a tuple (TypeError naming ``name`` for one number or a string)."""
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise TypeError(f"`{name}` must be a sequence (the declared grid), got "
                        f"{type(values).__name__} {values!r}: write ({values!r},) for one "
                        "point.")
    return tuple(values)


def constant_contender(periods: Sequence[int] = DEFAULT_PERIODS) -> protocol.Contender:
    """Periodic Q-learning with a constant period K, K tuned over ``periods``.

    Args:
      periods: the declared grid of integer periods >= 1.

    Returns:
      ``protocol.Contender`` with grid ``({"period": K}, ...)``.

    Raises:
      TypeError: ``periods`` is one number rather than a sequence.
      ValueError: ``periods`` is empty or holds an entry that is not an integer >= 1.
    """
    periods = _grid("periods", periods)
    if not periods:
        raise ValueError("`periods` must be non-empty.")
    for i, k in enumerate(periods):
        if isinstance(k, bool) or int(k) != k or k < 1:
            raise ValueError(f"`periods[{i}]` must be an integer >= 1, got {k!r}.")

    def run(items, problem, *, period):
        return samples_to_eps(items.keys, problem, schedules.constant(int(period)))

    return protocol.Contender(run, tuple({"period": int(k)} for k in periods))


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
    bases = tuple(float(b) for b in _grid("bases", bases))
    if not bases:
        raise ValueError("`bases` must be non-empty.")
    for i, b in enumerate(bases):
        validation.check_in_range(f"bases[{i}]", b, 1.0)
        validation.check_finite(f"bases[{i}]", b)

    def run(items, problem, *, base):
        gamma = float(problem.mdp.gamma)
        return samples_to_eps(items.keys, problem, schedules.growth(gamma, power, base))

    return protocol.Contender(run, tuple({"base": b} for b in bases))


def _builtin(name: str, periods, bases, arg: str = "contenders") -> protocol.Contender:
    if name == "theory":
        return growth_contender(THEORY_POWER, bases)
    if name == "constant":
        return constant_contender(periods)
    if name.startswith("growth p="):
        try:
            power = float(name[len("growth p="):])
        except ValueError:
            power = None
        if power is not None:
            return growth_contender(power, bases)
    raise ValueError(f"`{arg}` must name built-in contenders 'theory', 'constant' or "
                     f"'growth p=<power>', got {name!r}.")


def builtin_contenders(names: Sequence[str] = ("theory", "constant"), *,
                       periods: Sequence[int] = DEFAULT_PERIODS,
                       bases: Sequence[float] = DEFAULT_BASES) -> dict:
    """The built-in contenders with their declared grids.

    Args:
      names: ``"theory"``, ``"constant"``, ``"growth p=<power>"``.
      periods: the constant contender's grid.
      bases: the growth contenders' K_0 grid.

    Returns:
      A dict, name to ``protocol.Contender``, in the order of ``names``.

    Raises:
      TypeError: ``names`` is one string.
      ValueError: an unknown name (or a ``growth p=`` without a number), or a bad grid
        (``constant_contender``, ``growth_contender``).
    """
    if isinstance(names, str):
        raise TypeError("`names` must be a sequence of names, got one string.")
    return {n: _builtin(n, periods, bases, "names") for n in names}


def _contenders(contenders, periods, bases) -> dict:
    if isinstance(contenders, str):
        raise TypeError("`contenders` must be a sequence of names or a {name: Contender or "
                        "built-in name} mapping, got one string.")
    if isinstance(contenders, Mapping):
        return {n: (_builtin(c, periods, bases) if isinstance(c, str) else c)
                for n, c in contenders.items()}
    return {n: _builtin(n, periods, bases) for n in contenders}


def compare(key, problem: TabularMDP | Problem, *,
            contenders: Sequence[str] | Mapping = ("theory", "constant"),
            tuning: protocol.Tuning | int = 4, seeds: int = 8,
            goals: Sequence[protocol.Goal] | None = None,
            periods: Sequence[int] = DEFAULT_PERIODS,
            bases: Sequence[float] = DEFAULT_BASES, eps_rel: float | None = None,
            num_records: int | None = None, record_every: int | None = None,
            sampling: str | None = None, inner_loop: str | None = None,
            censor_at: float | None = None, pairs=None, batch: int | None = None,
            level: float = 0.95, resamples: int = 2000, progress=True,
            results_path=None) -> protocol.Comparison:
    """The paper's comparison on ``problem``: samples to eps, grids tuned on validation
    seeds, paired test seeds, censoring at the run length (module docstring).

    Args:
      key: PRNG key; item (seed) keys and the bootstrap draws derive from it.
      problem: a ``TabularMDP`` (built into a ``Problem`` with ``eps_rel``,
        ``num_records``, ``record_every``, ``sampling``, ``inner_loop``; defaults as in
        ``problem``) or a ``Problem`` (then those five must be left unset).
      contenders: built-in names (``"theory"``, ``"constant"``, ``"growth p=<power>"``)
        or a mapping, name to ``protocol.Contender`` (``run(items, problem, **params)``
        with this module's ``Problem``) or to a built-in name.
      tuning: the validation seeds (``protocol.Tuning`` or a count).
      seeds: the paired test seeds, >= 2.
      goals: declared ``protocol.Goal``s (default: ``Goal("theory", "constant")`` when
        both are contenders).
      periods: the constant contender's declared grid.
      bases: the growth contenders' declared K_0 grid.
      eps_rel, num_records, record_every, sampling, inner_loop: see ``problem``.
      censor_at: what a run that never reaches eps counts as (default: the run length,
        ``num_records * record_every`` samples).
      pairs: declared differences (default: the first contender against each other one).
      batch: seeds per run call (None: all seeds of a phase in one call).
      level: CI level.
      resamples: bootstrap resamples.
      progress: True (stderr lines), False, or ``progress(done, total, description)``.
      results_path: JSON-lines file each call's per-seed values are appended to.

    Returns:
      ``protocol.Comparison`` (``table()``, ``to_dict()``, ``figure()``) of samples to
      eps, lower is better.
    """
    options = {"eps_rel": eps_rel, "num_records": num_records, "record_every": record_every,
               "sampling": sampling, "inner_loop": inner_loop}
    if isinstance(problem, Problem):
        given = [k for k, v in options.items() if v is not None]
        if given:
            raise ValueError(f"{', '.join(f'`{k}`' for k in given)} must be left unset when "
                             "`problem` is a Problem (they are its fields).")
        prob = problem
    elif isinstance(problem, TabularMDP):
        prob = _build_problem(problem, **{k: v for k, v in options.items() if v is not None})
    else:
        raise TypeError(f"`problem` must be a TabularMDP or a qlearning Problem, got "
                        f"{type(problem).__name__}.")
    named = _contenders(contenders, periods, bases)
    if goals is None:
        goals = ((protocol.Goal("theory", "constant"),)
                 if {"theory", "constant"} <= set(named) else ())
    return protocol.compare(
        key, prob, contenders=named, tuning=tuning, seeds=seeds, goals=goals, pairs=pairs,
        metric=f"samples to ||Q_target - Q*||_inf <= {prob.eps:.3g}", higher_is_better=False,
        censor_at=float(prob.num_samples) if censor_at is None else censor_at, batch=batch,
        level=level, resamples=resamples, progress=progress, results_path=results_path)
