"""The non-consecutive variation of two-point estimates, the key object of arXiv 2602.04761.

The optimistic two-point learner's step is eta_t = D / sqrt(1 + S_t) with

    S_T = sum_{t=2}^T ||g~_t - g~_{t-1}||^2,                                        (1)

g~_t = d <a_t, u_t> u_t the estimate built at x_t from the direction u_t (exact for
quadratics: a_t = grad f_t(x_t); otherwise a_t is the gradient of the delta-smoothed loss),
and u_1, u_2, ... independent and uniform on the sphere. The paper's abstract calls (1)
"non-consecutive" (g~_t and g~_{t-1} are taken at different points with independent
directions) and says its refined analysis of (1) improves the dimension dependence of
Chiang et al. (2013). The paper's lemma is not in our corpora; the identities below are
ours (derived here, checked by Monte Carlo in tests/bco/test_variation.py).

Since E[d^2 <a, u>^2] = d ||a||^2 and E[g~_t | past] = a_t,

    E[||g~_t - g~_{t-1}||^2 | F_{t-1}] = d ||a_t||^2 - 2 <a_t, g~_{t-1}> + ||g~_{t-1}||^2, (2)

so the compensator C_T (the sum of (2)) has E[S_T] = E[C_T] exactly, and when the points
x_t do not depend on the directions (a fixed path)

    E[S_T] = sum_{t>=2} (d - 1) (||a_t||^2 + ||a_{t-1}||^2) + ||a_t - a_{t-1}||^2.   (3)

(3) is the "refined" prediction: S_T ~ 2 (d - 1) G_T + (played variation), with
G_T = sum ||a_t||^2 -- linear in d, and driven by the gradient *norms* at the played
points, not only by V_T. The per-round worst case ||g~_t|| <= d ||a_t|| gives the
"old" bound S_T <= 2 d^2 sum_{t>=2} (||a_t||^2 + ||a_{t-1}||^2), quadratic in d.

Checks: ``estimates`` and ``grads`` are [T, d] with T >= 2 and equal shapes (concrete
arrays; traced values are not checked); ``played_gradients`` needs a known loss family
(``losses.check_seq``) and ``info.x`` with one row per round.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxlab.bco import losses
from jaxlab.core import validation
from jaxlab.core.types import Array

__all__ = ["VariationStats", "estimated_variation", "played_gradients", "stats"]


class VariationStats(NamedTuple):
    """Scalars of one run (leading batch axes when vmapped).

    estimated: S_T, eq. (1). compensator: C_T, sum of eq. (2) (E[S_T] = E[C_T]).
    decoupled: eq. (3) evaluated on the played gradients. grad_sq: G_T = sum ||a_t||^2.
    played_variation: sum ||a_t - a_{t-1}||^2. worst_case: 2 d^2 sum (||a_t||^2 +
    ||a_{t-1}||^2), the per-round worst-case bound on S_T.
    """

    estimated: Array
    compensator: Array
    decoupled: Array
    grad_sq: Array
    played_variation: Array
    worst_case: Array


def _check_pair(estimates, grads):
    for name, v in (("estimates", estimates), ("grads", grads)):
        if isinstance(v, jax.core.Tracer):
            continue
        validation.check_ndim(name, v, 2)
        if v.shape[0] < 2:
            raise ValueError(f"`{name}` must hold at least 2 rounds, got shape {v.shape}.")
    if not isinstance(grads, jax.core.Tracer) and not isinstance(estimates, jax.core.Tracer):
        validation.check_shape("grads", grads, tuple(estimates.shape))
    validation.check_finite("estimates", estimates)
    validation.check_finite("grads", grads)


def estimated_variation(estimates: Array) -> Array:
    """S_T of eq. (1). estimates: [T, d] two-point estimates g~_t; returns a scalar."""
    _check_pair(estimates, estimates)
    return jnp.sum(jnp.diff(estimates, axis=0) ** 2)


def played_gradients(info, seq) -> Array:
    """a_t = grad f_t(x_t) at the played points: [T, d] (``info.x`` [T, d], ``seq`` T rounds)."""
    params, f = losses.round_params(seq)
    if not isinstance(info.x, jax.core.Tracer):
        d = None if isinstance(seq, losses.FunctionSeq) else params.shape[-1]
        validation.check_shape("info.x", info.x, (losses.num_rounds(seq), d))
    return jax.vmap(jax.grad(lambda x, p: f(p, x)))(info.x, params)


def stats(estimates: Array, grads: Array) -> VariationStats:
    """The quantities of eqs. (1)-(3) from estimates g~_t [T, d] and gradients a_t [T, d]."""
    _check_pair(estimates, grads)
    d = estimates.shape[-1]
    sq = jnp.sum(grads**2, -1)
    g_prev, a_now = estimates[:-1], grads[1:]
    comp = d * sq[1:] - 2.0 * jnp.sum(a_now * g_prev, -1) + jnp.sum(g_prev**2, -1)
    played = jnp.sum(jnp.diff(grads, axis=0) ** 2)
    pair = jnp.sum(sq[1:] + sq[:-1])
    return VariationStats(
        estimated=jnp.sum(jnp.diff(estimates, axis=0) ** 2),
        compensator=jnp.sum(comp),
        decoupled=(d - 1) * pair + played,
        grad_sq=jnp.sum(sq),
        played_variation=played,
        worst_case=2.0 * d**2 * pair,
    )
