"""Running a bandit learner over a loss sequence in one ``lax.scan``, and its regret.

Checks (eager; traced values skipped): ``seq`` is a known loss family with finite
parameters (``losses.check_seq``), ``x0`` has shape [d], is finite and inside the learner's
domain (checked by ``learner.init``); ``predraw`` a bool (TypeError); ``regret`` /
``dynamic_regret`` need ``info`` with as many rounds as ``seq``. After the scan, a run whose
losses, played points or estimates are non-finite raises a ValueError naming ``seq`` (when
concrete; in checked mode, ``jaxlab.core.checks(True)``, also when traced).
"""

import functools

import jax
import jax.numpy as jnp

from jaxlab.bco import losses
from jaxlab.bco.learners import PredrawnStep, RoundInfo
from jaxlab.core import checked, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Algorithm, Array, PRNGKey

checked.declare("jaxlab.bco.run")


@checked.boundary
def run(key: PRNGKey, learner: Algorithm, seq, x0: Array, *,
        predraw: bool = True) -> RoundInfo:
    """Plays every round of ``seq``; jittable and vmappable over keys / sequences.

    Args:
      key: PRNG key for the exploration directions (typed, or a legacy ``uint32`` key);
        round t uses the t-th key of ``jax.random.split(key, T)`` (``learner.init`` gets
        ``key`` and ignores it). For a ``PredrawnStep`` learner and ``predraw=True`` the T
        directions are drawn in one call before the scan (the same values).
      learner: a bandit learner (``learners`` / ``ensembles`` constructors).
      predraw: draw all directions up front (``PredrawnStep`` learners only; ignored
        otherwise). Measured on the 2-core CPU at load average ~2.5
        (experiments/bench_bco.py, d = 16, T = 2e4): 1.6-1.8x faster for one run and
        1.3-1.5x under ``vmap`` over 64 seeds; at load average ~14 the vmapped run was
        slower (0.4x, the [seeds, T, d] buffer competing for memory), hence the switch.
      seq: a loss sequence with T rounds: a shipped family (``losses``) or your own
        ``losses.loss_sequence(params, loss)``.
      x0: [d] starting point.

    Returns:
      RoundInfo with [T] losses, [T, d] played points and estimates.

    Raises:
      TypeError: ``predraw`` is not a bool, or ``key`` is not a PRNG key.
      ValueError: a bad ``seq`` or ``x0`` (naming it).
    """
    key = as_key(key)
    if not isinstance(predraw, bool):
        raise TypeError(f"`predraw` must be a bool, got {type(predraw).__name__}.")
    params, f = losses.round_params(seq)
    if isinstance(seq, losses.FunctionSeq):
        validation.check_ndim("x0", x0, 1)
    else:
        validation.check_shape("x0", x0, (params.shape[-1],))
    validation.check_finite("x0", x0)
    keys = jax.random.split(key, losses.num_rounds(seq))
    step = learner.step
    if predraw and isinstance(step, PredrawnStep):
        # Every round's direction in one vectorised call (the same values as drawing
        # them in the scan), then the scan applies them.
        keys, step = jax.vmap(step.draw)(keys), step.apply

    def body(state, inp):
        p, k = inp
        return step(k, state, functools.partial(f, p))

    def scan(state, params, keys):
        checked.check(_all_finite(params), "`seq` parameters must be finite.")
        _, info = jax.lax.scan(body, state, (params, keys))
        checked.check(_all_finite(info), "the rounds of `seq` gave non-finite losses, points "
                      "or gradient estimates (rescale the losses or the domain).")
        return info

    info = checked.run("jaxlab.bco.run", scan, learner.init(key, x0), params, keys)
    if not isinstance(info.loss, jax.core.Tracer) and not bool(_all_finite(info)):
        raise ValueError("jaxlab.bco.run: the rounds of `seq` gave non-finite losses, points or "
                         "gradient estimates (rescale the losses or the domain).")
    return info


def _all_finite(tree) -> Array:
    """True when every leaf of ``tree`` (round infos, or a user family's params) is finite."""
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)]))


def regret(info: RoundInfo, seq, domain) -> Array:
    """[T] static regret of every prefix against its best fixed point in X.

    Args:
      info: ``run``'s RoundInfo ([T] losses).
      seq: the loss sequence (a ``FunctionSeq`` needs its ``comparator``).
      domain: the learner's domain X.

    Returns:
      [T]: sum_{s<=t} loss_s - min_X sum_{s<=t} f_s.
    """
    _check_rounds(info, seq)
    return jnp.cumsum(info.loss) - losses.prefix_comparator_losses(seq, domain)


def dynamic_regret(info: RoundInfo, seq, domain) -> Array:
    """[T] regret against the per-round minimisers u_t = argmin_X f_t."""
    _check_rounds(info, seq)
    _, best = losses.per_round_minima(seq, domain)
    return jnp.cumsum(info.loss - best)


def _check_rounds(info, seq):
    t = losses.num_rounds(seq)
    if info.loss.shape[-1:] != (t,):
        raise ValueError(f"`info` must hold one round per round of `seq` ({t}), "
                         f"got losses of shape {info.loss.shape}.")
