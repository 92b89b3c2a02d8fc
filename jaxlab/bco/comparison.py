"""The paper's comparison on any loss sequence: final regret of the optimistic two-point
learner against plain two-point OGD, step sizes tuned on validation seeds, through
``jaxlab.core.protocol``.

The claim under test (arXiv 2602.04761): with the previous gradient estimate as the
optimistic hint, two-point bandit OGD's regret scales with the gradient variation instead
of the gradients' size. The protocol (the study's ``vs_dim`` / ``families`` comparisons):

* **Items** are seeds: item key k gives the loss sequence ``make_seq(k_seq)`` and the
  exploration directions (``k_run``), ``k_seq, k_run = jax.random.split(k)``; every
  contender plays the same sequences with the same directions.
* **Metric**: the final regret after T rounds (lower is better), static (against the best
  fixed point in the domain; the sequence needs a comparator) or, with
  ``regret="dynamic"``, against the per-round minimisers (the sequence needs a
  ``minimiser``).
* **Contenders** (built-in names): ``"gradient_variation"`` (optimistic two-point OGD,
  step D m / sqrt(1 + S_t), the multiplier m tuned over ``multipliers``),
  ``"agarwal2010"`` (plain two-point OGD, same rule and grid), ``"ogd_sqrt_d_step"``
  (the optimistic learner at m = 1/sqrt(d), untuned control); or any
  ``protocol.Contender`` whose ``run(items, problem, **params)`` takes this module's
  ``Problem``.
* **Declared difference and goal**: gradient_variation - each other contender;
  ``Goal("gradient_variation", "agarwal2010")``: the optimistic learner's regret is lower,
  the whole CI below zero.

What is ours: the packaging of the study's protocol as one function; the paper states the
bounds.
"""

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.bco import domains, learners
from jaxlab.bco.run import dynamic_regret, regret, run
from jaxlab.core import protocol, validation
from jaxlab.core.keys import as_key

__all__ = ["DEFAULT_MULTIPLIERS", "Problem", "builtin_contenders", "compare", "final_regrets",
           "problem", "two_point_contender"]

# The quick study's declared step multipliers (experiments/configs/bco.py), times D.
DEFAULT_MULTIPLIERS = (1.0, 2**-0.5, 0.5, 2**-1.5, 0.25, 2**-2.5, 0.125, 2**-4, 2**-5, 2**-6)
REGRETS = ("static", "dynamic")
_SEED_BLOCK = 8


class Problem(NamedTuple):
    """The user's loss sequences with the settings every contender shares.

    Attributes:
      make_seq: ``make_seq(key) -> seq``, a loss sequence of T rounds in d dimensions (a
        shipped family of ``losses`` or ``losses.loss_sequence``); jittable.
      domain: the ``Ball`` or ``Box`` X (learners start at its centre).
      delta: the exploration radius, in (0, inner radius of X).
      regret: ``"static"`` (``regret``) or ``"dynamic"`` (``dynamic_regret``).
    """

    make_seq: Callable[[Any], Any]
    domain: Any
    delta: float
    regret: str


def problem(make_seq: Callable[[Any], Any], domain, *, delta: float = 0.05,
            regret: str = "static") -> Problem:
    """Builds (and checks) the ``Problem`` of a loss-sequence maker.

    Args:
      make_seq: ``make_seq(key) -> seq`` (jittable; called once here on a fixed key to
        check the sequence against ``domain``).
      domain: ``Ball`` or ``Box``.
      delta: exploration radius in (0, inner radius of ``domain``).
      regret: ``"static"`` or ``"dynamic"``.

    Returns:
      ``Problem``.
    """
    if not callable(make_seq):
        raise TypeError(f"`make_seq` must be a callable key -> loss sequence, got "
                        f"{type(make_seq).__name__}.")
    domains.check_domain(domain)
    validation.check_in_range("delta", delta, 0.0, float(np.min(domain.inner_radius)),
                              low_inclusive=False, high_inclusive=False)
    validation.check_one_of("regret", regret, REGRETS)
    return Problem(make_seq, domain, float(delta), regret)


@functools.lru_cache(maxsize=32)
def _program(make_seq, dynamic: bool):
    """The jitted ``f(keys, domain, delta, optimistic [O], mults [M]) -> [O, M, n]``."""

    def one(o, m, k, domain, delta):
        rule = learners.StepRule(domain.diameter * m, jnp.float32(0.0), jnp.float32(jnp.inf))
        learner = learners.two_point(domain, delta, rule, o)
        k_seq, k_run = jax.random.split(k)
        seq = make_seq(k_seq)
        info = run(k_run, learner, seq, domain.center)
        r = dynamic_regret(info, seq, domain) if dynamic else regret(info, seq, domain)
        return r[-1]

    def f(keys, domain, delta, optimistic, mults):
        # One (hint, multiplier) point at a time (lax.map), each vmapped over the keys: a
        # point's regrets are then the same program, bit for bit, whatever the grid's size
        # (vmapping over the grid changes the float rounding of small batches).
        o, m = jnp.meshgrid(optimistic, mults, indexing="ij")
        seeds = jax.vmap(one, (None, None, 0, None, None))
        out = jax.lax.map(lambda om: seeds(om[0], om[1], keys, domain, delta),
                          (o.reshape(-1), m.reshape(-1)))
        return out.reshape(o.shape + (keys.shape[0],))

    return jax.jit(f)


def final_regrets(keys, problem: Problem, multipliers: Sequence[float],
                  optimistic: Sequence[bool] = (True,)) -> jax.Array:
    """The per-item runner: final regret of two-point OGD on each key's sequence, for every
    (hint, step multiplier) pair, in one jitted program (the study's units call it too).

    Args:
      keys: [n] item keys (``protocol.item_keys``): ``k_seq, k_run = split(key)``.
      problem: the ``Problem``.
      multipliers: [M] step multipliers m (step D m / sqrt(1 + S_t), D the diameter).
      optimistic: [O] bools: previous estimate as the hint (the paper's learner) or none
        (plain two-point OGD, agarwal2010).

    Returns:
      [O, M, n] float32 final regrets.
    """
    keys = as_key(keys)
    if keys.ndim != 1:
        raise ValueError(f"`keys` must be [n] keys, got shape {keys.shape}.")
    mults = jnp.asarray(multipliers, jnp.float32)
    validation.check_ndim("multipliers", mults, 1)
    validation.check_in_range("multipliers", mults, 0.0, low_inclusive=False)
    opt = jnp.asarray(optimistic, bool)
    validation.check_ndim("optimistic", opt, 1)
    # The seed axis is padded to a multiple of _SEED_BLOCK (repeating the last key): XLA's
    # vectorisation over a ragged batch rounds float32 differently in the last bit, so a
    # seed's regret would depend on how many seeds share its call (the study's unit runs
    # tuning and test seeds together, ``compare`` runs them apart).
    n = keys.shape[0]
    pad = -n % _SEED_BLOCK
    padded = jnp.concatenate([keys, jnp.repeat(keys[-1:], pad)]) if pad else keys
    out = _program(problem.make_seq, problem.regret == "dynamic")(
        padded, problem.domain, jnp.float32(problem.delta), opt, mults)
    return out[..., :n]


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
    mults = tuple(float(m) for m in multipliers)
    if not mults:
        raise ValueError("`multipliers` must be non-empty.")
    for i, m in enumerate(mults):
        validation.check_in_range(f"multipliers[{i}]", m, 0.0, low_inclusive=False)
        validation.check_finite(f"multipliers[{i}]", m)

    def run_items(items, problem, *, multiplier):
        return final_regrets(items.keys, problem, [multiplier], [optimistic])[0, 0]

    return protocol.Contender(run_items, tuple({"multiplier": m} for m in mults))


def _sqrt_d_contender() -> protocol.Contender:
    def run_items(items, problem):
        m = 1.0 / float(np.sqrt(problem.domain.dim))
        return final_regrets(items.keys, problem, [m], [True])[0, 0]

    return protocol.Contender(run_items)


def _builtin(name: str, multipliers) -> protocol.Contender:
    if name == "gradient_variation":
        return two_point_contender(True, multipliers)
    if name == "agarwal2010":
        return two_point_contender(False, multipliers)
    if name == "ogd_sqrt_d_step":
        return _sqrt_d_contender()
    raise ValueError(f"`contenders` names built-in contenders 'gradient_variation', "
                     f"'agarwal2010' or 'ogd_sqrt_d_step', got {name!r}.")


def builtin_contenders(names: Sequence[str] = ("gradient_variation", "agarwal2010"), *,
                       multipliers: Sequence[float] = DEFAULT_MULTIPLIERS) -> dict:
    """The built-in contenders with their declared grids.

    Args:
      names: ``"gradient_variation"``, ``"agarwal2010"``, ``"ogd_sqrt_d_step"``.
      multipliers: the tuned contenders' step-multiplier grid.

    Returns:
      A dict, name to ``protocol.Contender``, in the order of ``names``.
    """
    if isinstance(names, str):
        raise TypeError("`names` must be a sequence of names, got one string.")
    return {n: _builtin(n, multipliers) for n in names}


def compare(key, problem: Problem | Callable, *,
            contenders: Sequence[str] | Mapping = ("gradient_variation", "agarwal2010"),
            tuning: protocol.Tuning | int = 4, seeds: int = 8,
            goals: Sequence[protocol.Goal] | None = None,
            multipliers: Sequence[float] = DEFAULT_MULTIPLIERS, domain=None,
            delta: float | None = None, regret: str | None = None, pairs=None,
            batch: int | None = None, level: float = 0.95, resamples: int = 2000,
            progress=True, results_path=None) -> protocol.Comparison:
    """The paper's comparison on ``problem``: final regret, step multipliers tuned on
    validation seeds, paired test seeds (module docstring).

    Args:
      key: PRNG key; item (seed) keys and the bootstrap draws derive from it.
      problem: ``make_seq(key) -> loss sequence`` (then ``domain`` is required and
        ``delta``, ``regret`` default to 0.05, ``"static"``) or a ``Problem`` (then
        ``domain``, ``delta``, ``regret`` must be left unset).
      contenders: built-in names (``"gradient_variation"``, ``"agarwal2010"``,
        ``"ogd_sqrt_d_step"``) or a mapping, name to ``protocol.Contender``
        (``run(items, problem, **params)`` with this module's ``Problem``) or to a
        built-in name.
      tuning: the validation seeds (``protocol.Tuning`` or a count).
      seeds: the paired test seeds, >= 2.
      goals: declared ``protocol.Goal``s (default: ``Goal("gradient_variation",
        "agarwal2010")`` when both are contenders).
      multipliers: the tuned contenders' declared step-multiplier grid.
      domain, delta, regret: see ``problem``.
      pairs: declared differences (default: the first contender against each other one).
      batch: seeds per run call (None: all seeds of a phase in one call).
      level: CI level.
      resamples: bootstrap resamples.
      progress: True (stderr lines), False, or ``progress(done, total, description)``.
      results_path: JSON-lines file each call's per-seed values are appended to.

    Returns:
      ``protocol.Comparison`` (``table()``, ``to_dict()``, ``figure()``) of the final
      regret, lower is better.
    """
    if isinstance(problem, Problem):
        given = [k for k, v in (("domain", domain), ("delta", delta), ("regret", regret))
                 if v is not None]
        if given:
            raise ValueError(f"{', '.join(f'`{k}`' for k in given)} must be left unset when "
                             "`problem` is a Problem (they are its fields).")
        prob = problem
    elif callable(problem):
        if domain is None:
            raise ValueError("`domain` is required when `problem` is a loss-sequence maker.")
        prob = _build_problem(problem, domain, delta=0.05 if delta is None else delta,
                              regret="static" if regret is None else regret)
    else:
        raise TypeError(f"`problem` must be a bco Problem or a callable key -> loss "
                        f"sequence, got {type(problem).__name__}.")
    if isinstance(contenders, str):
        raise TypeError("`contenders` must be a sequence of names or a {name: Contender or "
                        "built-in name} mapping, got one string.")
    if isinstance(contenders, Mapping):
        named = {n: (_builtin(c, multipliers) if isinstance(c, str) else c)
                 for n, c in contenders.items()}
    else:
        named = builtin_contenders(tuple(contenders), multipliers=multipliers)
    if goals is None:
        goals = ((protocol.Goal("gradient_variation", "agarwal2010"),)
                 if {"gradient_variation", "agarwal2010"} <= set(named) else ())
    return protocol.compare(
        key, prob, contenders=named, tuning=tuning, seeds=seeds, goals=goals, pairs=pairs,
        metric=f"final {prob.regret} regret", higher_is_better=False, batch=batch,
        level=level, resamples=resamples, progress=progress, results_path=results_path)


_build_problem = problem  # `compare`'s argument of the same name shadows it
