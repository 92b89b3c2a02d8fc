"""MsMwC: multi-scale multiplicative weights with correction (Chen, Luo, Wei, COLT 2021).

The meta-learner that gradient-variation universal / dynamic ensembles build on (Yan, Zhao,
Zhou 2023 use it inside "MsMwC-Master"; arXiv 2602.04761 cites that line of work). Optimistic
online mirror descent on the simplex with the weighted negative entropy

    psi(p) = sum_i (1 / eta_i) (p_i ln p_i - p_i)

(a learning rate per expert: the "multi-scale" part) and a second-order correction
a_{t,i} = 32 eta_i (l_{t,i} - m_{t,i})^2 added to the loss (Alg. 1 of the paper):

    p_t      = argmin_{p in simplex} <p, m_t>         + D_psi(p, p'_t)   (play)
    p'_{t+1} = argmin_{p in simplex} <p, l_t + a_t>   + D_psi(p, p'_t)   (update)

What follows the paper: the two OMD steps, the regulariser, the correction and its constant
32, the condition 32 eta_i |l_{t,i} - m_{t,i}| <= 1, and the guarantee checked in
``tests/bco/test_msmwc.py``: for every expert i (from the optimistic-OMD lemma with the
local-norm bound exp(-z) - 1 + z <= z^2 for z >= -1)

    sum_t <p_t - e_i, l_t> <= D_psi(e_i, p'_1) + 32 eta_i sum_t (l_{t,i} - m_{t,i})^2
                              - 28 sum_t sum_j eta_j p_{t,j} (l_{t,j} - m_{t,j})^2,

    D_psi(e_i, q) = (ln(1 / q_i) - 1) / eta_i + sum_j q_j / eta_j.

What is ours (the paper's text for the BCO setting is not readable here): each OMD step is
solved exactly by a bisection on its Lagrange multiplier (``weighted_entropy_step``: with
unequal rates there is no closed form). The paper fixes the rates from known loss ranges,
which the bandit surrogates do not have, so the ensemble's rates are adaptive per expert
(``adaptive_rates``): eta_{t,i} = min(1 / (32 B_{t,i}), meta_scale sqrt(ln N / (1 +
sum_{s<t} (l_{s,i} - m_{s,i})^2))) with B_{t,i} = max_{s<t} |l_{s,i} - m_{s,i}|, and
the update step uses min(eta_{t,i}, 1 / (32 |l_{t,i} - m_{t,i}|)) (``capped_rates``) so
the rate condition holds on every round, the first included. Without that cap the first
round (B = 0, rate sqrt(ln N)) made the correction 32 eta (l - m)^2 ~ 44 and put all
weight on one base for the rest of the run (seen on switching quadratics, d = 16).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array

__all__ = ["MsMwCState", "init", "play", "update", "run", "adaptive_rates", "capped_rates",
    "weighted_entropy_step"]

CORRECTION = 32.0  # a_{t,i} = CORRECTION eta_i (l_{t,i} - m_{t,i})^2 (Alg. 1)
BISECTION_STEPS = 60


def weighted_entropy_step(log_prev: Array, x: Array, eta: Array) -> Array:
    """log p for p = argmin_{p in simplex} <p, x> + D_psi(p, prev), psi = sum_i p_i ln p_i / eta_i.

    The minimiser is p_i = prev_i exp(-eta_i (x_i + mu)) with mu the multiplier that makes
    sum_i p_i = 1; sum_i p_i(mu) decreases in mu and equals >= 1 at mu = -max x and <= 1 at
    mu = -min x, so ``BISECTION_STEPS`` bisection steps on that bracket find it (then p is
    renormalised). Equal rates give the closed form softmax(log prev - eta x).

    Args:
      log_prev: [N] log of the previous point (a distribution).
      x: [N] linear term.
      eta: [N] positive rates.

    Returns:
      [N] log p.

    Raises:
      ValueError: ``log_prev`` not 1-D, ``x`` not of its shape, ``eta`` neither a scalar
        nor of its shape (shapes only: a jitted caller pays nothing).
    """
    validation.check_ndim("log_prev", log_prev, 1)
    _check_per_expert(np.shape(log_prev)[0], x=x, eta=eta)
    x = x - jnp.min(x)  # shift-invariant on the simplex; now mu in [-max x, 0]

    def log_mass(mu):
        return jax.nn.logsumexp(log_prev - eta * (x + mu))

    def bisect(_, lo_hi):
        lo, hi = lo_hi
        mid = 0.5 * (lo + hi)
        above = log_mass(mid) > 0.0  # mass > 1: mu must grow
        return jnp.where(above, mid, lo), jnp.where(above, hi, mid)

    lo, hi = jax.lax.fori_loop(0, BISECTION_STEPS, bisect, (-jnp.max(x), jnp.zeros_like(x[0])))
    logp = log_prev - eta * (x + 0.5 * (lo + hi))
    return logp - jax.nn.logsumexp(logp)


class MsMwCState(NamedTuple):
    """log_pp: [N] log p'_t; sum_dev2: [N] sum_{s<t} (l_{s,i} - m_{s,i})^2; max_dev: [N]
    max_{s<t} |l_{s,i} - m_{s,i}| (B_{t,i})."""

    log_pp: Array
    sum_dev2: Array
    max_dev: Array


def init(prior) -> MsMwCState:
    """State with p'_1 = ``prior`` ([N] positive, summing to 1)."""
    prior = np.asarray(prior, np.float64)
    if prior.ndim != 1 or prior.size < 1 or not np.all(np.isfinite(prior)) \
            or np.any(prior <= 0) or abs(prior.sum() - 1.0) > 1e-6:
        raise ValueError("`prior` must be a 1-D array of positive weights summing to 1, "
                         f"got {prior!r}.")
    n = prior.size
    return MsMwCState(jnp.log(jnp.asarray(prior, jnp.float32)), jnp.zeros(n, jnp.float32),
                      jnp.zeros(n, jnp.float32))


def _check_per_expert(n: int, **arrays) -> None:
    """ValueError naming the array that is not [n] (``eta`` may also be a scalar)."""
    for name, v in arrays.items():
        if name == "eta" and np.ndim(v) == 0:
            continue
        validation.check_shape(name, v, (n,))


def _cap(eta: Array, dev: Array) -> Array:
    return jnp.minimum(eta, jnp.where(dev > 0, 1.0 / (CORRECTION * dev), jnp.inf))


def adaptive_rates(state: MsMwCState, meta_scale: float = 1.0) -> Array:
    """[N] eta_{t,i} = min(1 / (32 B_{t,i}), meta_scale sqrt(ln N / (1 + S_{t,i}))) (ours).

    Raises:
      ValueError: a concrete ``meta_scale`` that is not finite and > 0.
    """
    validation.check_in_range("meta_scale", meta_scale, 0.0, low_inclusive=False)
    validation.check_finite("meta_scale", meta_scale)
    n = state.log_pp.shape[0]
    return _cap(meta_scale * jnp.sqrt(np.log(max(n, 2)) / (1.0 + state.sum_dev2)),
                state.max_dev)


def capped_rates(eta: Array, loss: Array, hint: Array) -> Array:
    """[N] min(eta_i, 1 / (32 |l_i - m_i|)): the rates of an update that keep the paper's
    condition 32 eta_i |l_i - m_i| <= 1 on this round (ours; see the module docstring)."""
    validation.check_finite("loss", loss)
    validation.check_finite("hint", hint)
    return _cap(eta, jnp.abs(loss - hint))


def play(state: MsMwCState, hint: Array, eta: Array) -> Array:
    """[N] p_t = argmin <p, m_t> + D_psi(p, p'_t) (``hint`` [N], ``eta`` [N])."""
    _check_per_expert(state.log_pp.shape[0], hint=hint, eta=eta)
    return jnp.exp(weighted_entropy_step(state.log_pp, hint, eta))


def update(state: MsMwCState, loss: Array, hint: Array, eta: Array) -> MsMwCState:
    """p'_{t+1} = argmin <p, l_t + a_t> + D_psi(p, p'_t), a_t = 32 eta (l_t - m_t)^2
    (``loss``, ``hint``, ``eta`` [N])."""
    _check_per_expert(state.log_pp.shape[0], loss=loss, hint=hint, eta=eta)
    dev = loss - hint
    correction = CORRECTION * eta * dev**2
    return MsMwCState(weighted_entropy_step(state.log_pp, loss + correction, eta),
                      state.sum_dev2 + dev**2, jnp.maximum(state.max_dev, jnp.abs(dev)))


# The update's sum of squared deviations over T rounds and its correction 32 eta (l - m)^2
# must stay below this (a quarter of float32's max).
MAX_ACCUMULATED = float(np.finfo(np.float32).max) / 4.0


def _check_scale(losses, hints, eta) -> None:
    """ValueError naming ``losses`` when concrete losses / hints are non-finite or so large
    that (l - m)^2 summed over the rounds (or 32 eta (l - m)^2) overflows float32."""
    if isinstance(losses, jax.core.Tracer) or isinstance(hints, jax.core.Tracer):
        return
    validation.check_finite("losses", losses)
    validation.check_finite("hints", hints)
    dev = np.abs(np.asarray(losses, np.float64) - np.asarray(hints, np.float64))
    if dev.size == 0:
        return
    worst = float(dev.max()) ** 2 * max(dev.shape[0], CORRECTION * float(np.max(eta)), 1.0)
    if worst > MAX_ACCUMULATED:
        raise ValueError(f"`losses` are too large for float32: max |l - m| = {dev.max():.3g} "
                         f"over {dev.shape[0]} rounds makes the accumulated (l - m)^2 "
                         f"overflow; rescale `losses` and `hints` (e.g. to [0, 1]).")


def run(prior, eta, losses, hints) -> Array:
    """MsMwC with fixed rates over a whole loss sequence (one ``lax.scan``; jittable).

    Args:
      prior: [N] p'_1 (positive, sums to 1).
      eta: [N] fixed positive rates (Alg. 1 needs 32 eta_i |l_{t,i} - m_{t,i}| <= 1).
      losses: [T, N] loss vectors l_t.
      hints: [T, N] hints m_t (zeros: no optimism).

    Returns:
      [T, N] the played distributions p_t.

    Raises:
      ValueError: a bad ``prior`` / ``eta``, or (concrete) non-finite ``losses`` / ``hints``
        or ones so large that the accumulated (l - m)^2 overflows float32.
    """
    eta = np.asarray(eta, np.float64)
    if eta.ndim != 1 or eta.size < 1 or not np.all(np.isfinite(eta)) or np.any(eta <= 0):
        raise ValueError(f"`eta` must be a 1-D array of finite positive rates, got {eta!r}.")
    state = init(prior)
    n = eta.size
    if state.log_pp.shape[0] != n:
        raise ValueError(f"`prior` has {state.log_pp.shape[0]} experts but `eta` has {n}.")
    validation.check_shape("losses", losses, (None, n))
    validation.check_shape("hints", hints, np.shape(losses))
    _check_scale(losses, hints, eta)
    eta = jnp.asarray(eta, jnp.float32)

    def round_(st, lm):
        loss, hint = lm
        return update(st, loss, hint, eta), play(st, hint, eta)

    return jax.lax.scan(round_, state, (jnp.asarray(losses, jnp.float32),
                                        jnp.asarray(hints, jnp.float32)))[1]
