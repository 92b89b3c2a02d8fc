"""Final regrets of two-point bandit OGD on a user's loss sequences for the paper's
comparison: the ``Problem`` (the sequence maker with the settings every run shares) and
every (hint, step multiplier, seed) run in one jitted program.

What is ours: the batching and the per-seed metric; the paper states the bounds (arXiv
2602.04761).
"""

import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.bco import domains, learners, losses
from jaxlab.bco.run import dynamic_regret, regret, run
from jaxlab.core import validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import PRNGKey

__all__ = ["REGRETS", "Problem", "check_problem", "final_regrets", "problem"]

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
      comparator_iters: None (static regret against the sequence's exact comparator), or
        the projected-gradient iterations of the numerical best fixed point
        (``losses.fixed_comparator_loss``) for sequences without a closed form.
    """

    make_seq: Callable[[Any], Any]
    domain: Any
    delta: float
    regret: str
    comparator_iters: int | None = None

    @property
    def metric_name(self) -> str:
        """The metric's name, ``"final static regret"`` or ``"final dynamic regret"``."""
        return f"final {self.regret} regret"


def _check(make_seq, domain, delta, regret, comparator_iters) -> None:
    if not callable(make_seq):
        raise TypeError(f"`make_seq` must be a callable key -> loss sequence, got "
                        f"{type(make_seq).__name__}.")
    domains.check_domain(domain)
    validation.check_in_range("delta", delta, 0.0, float(np.min(domain.inner_radius)),
                              low_inclusive=False, high_inclusive=False)
    validation.check_one_of("regret", regret, REGRETS)
    if comparator_iters is not None:
        validation.check_positive_int("comparator_iters", comparator_iters)
        if regret != "static":
            raise ValueError("`comparator_iters` is the numerical comparator of the static "
                             f"regret; leave it out with regret={regret!r}.")


def check_problem(problem: Problem) -> Problem:
    """``problem`` if it is a well-formed ``Problem`` (one built by hand or ``_replace``-d
    included).

    Raises:
      TypeError: ``problem`` is not a ``Problem`` (or its ``make_seq`` is not callable).
      ValueError: a field out of range, naming it.
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"`problem` must be a bco Problem (bco.problem(make_seq, domain, "
                        f"delta=..., regret=...)), got {type(problem).__name__}.")
    _check(*problem)
    return problem


def problem(make_seq: Callable[[Any], Any], domain, *, delta: float = 0.05,
            regret: str = "static", comparator_iters: int | None = None) -> Problem:
    """Builds (and checks) the ``Problem`` of a loss-sequence maker.

    Args:
      make_seq: ``make_seq(key) -> seq`` (jittable).
      domain: ``Ball`` or ``Box``.
      delta: exploration radius in (0, inner radius of ``domain``).
      regret: ``"static"`` (needs the sequence's ``comparator``, a shipped closed-form
        family, or ``comparator_iters``) or ``"dynamic"`` (needs its ``minimiser``).
      comparator_iters: iterations of the numerical best fixed point (static regret of
        families without a closed form, e.g. ``losses.stochastic_family``); None: exact.

    Returns:
      ``Problem``.
    """
    _check(make_seq, domain, delta, regret, comparator_iters)
    return Problem(make_seq, domain, float(delta), regret,
                   None if comparator_iters is None else int(comparator_iters))


@functools.lru_cache(maxsize=32)
def _program(make_seq, dynamic: bool, comparator_iters: int | None):
    """The jitted ``f(keys, domain, delta, optimistic [O], mults [M]) -> [O, M, n]``."""

    def one(o, m, k, domain, delta):
        rule = learners.StepRule(domain.diameter * m, jnp.float32(0.0), jnp.float32(jnp.inf))
        learner = learners.two_point(domain, delta, rule, o)
        k_seq, k_run = jax.random.split(k)
        seq = make_seq(k_seq)
        info = run(k_run, learner, seq, domain.center)
        if comparator_iters is not None:  # the comparator is subtracted once per key below
            return jnp.sum(info.loss)
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
        out = out.reshape(o.shape + (keys.shape[0],))
        if comparator_iters is None:
            return out
        best = jax.vmap(lambda k: losses.fixed_comparator_loss(
            make_seq(jax.random.split(k)[0]), domain, comparator_iters))(keys)
        return out - best

    return jax.jit(f)


def final_regrets(keys: PRNGKey, problem: Problem, multipliers: Sequence[float],
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
    if not isinstance(problem, Problem):
        raise TypeError(f"`problem` must be a bco Problem (bco.problem(make_seq, domain)), "
                        f"got {type(problem).__name__}.")
    keys = as_key(keys)
    if keys.ndim != 1:
        raise ValueError(f"`keys` must be [n] keys, got shape {keys.shape}.")
    mults = jnp.asarray(multipliers, jnp.float32)
    validation.check_ndim("multipliers", mults, 1)
    validation.check_in_range("multipliers", mults, 0.0, low_inclusive=False)
    validation.check_finite("multipliers", mults)
    opt = jnp.asarray(optimistic, bool)
    validation.check_ndim("optimistic", opt, 1)
    # The seed axis is padded to a multiple of _SEED_BLOCK (repeating the last key): XLA's
    # vectorisation over a ragged batch rounds float32 differently in the last bit, so a
    # seed's regret would depend on how many seeds share its call (the study's unit runs
    # tuning and test seeds together, ``compare`` runs them apart).
    n = keys.shape[0]
    pad = -n % _SEED_BLOCK
    padded = jnp.concatenate([keys, jnp.repeat(keys[-1:], pad)]) if pad else keys
    out = _program(problem.make_seq, problem.regret == "dynamic", problem.comparator_iters)(
        padded, problem.domain, jnp.float32(problem.delta), opt, mults)
    return out[..., :n]
