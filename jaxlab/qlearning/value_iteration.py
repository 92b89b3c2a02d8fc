"""Exact Bellman optimality operator and value iteration (the Q* reference).

Checks (eager, at the Python boundary, on concrete values only; traced values pass):
  * ``bellman_optimality``: ``q`` has shape [S, A] and is finite; the MDP is valid
    (``mdp.check_mdp``: P[s, a, :] non-negative and summing to 1, finite rewards,
    gamma in [0, 1]).
  * ``value_iteration``: the MDP as above with gamma in [0, 1) (VI needs a contraction);
    ``tol`` > 0 and finite; ``max_iters`` a positive integer. Non-convergence is
    reported: the jitted loop returns ``VIInfo(iterations, residual, converged)`` and the
    Python wrapper raises ``RuntimeError`` naming ``max_iters``, ``tol`` and the final
    residual when the cap is hit before the tolerance (or, with ``return_info=True``,
    warns and hands the flag to the caller). Under an outer ``jit``/``vmap`` the flag is
    traced: the caller must read ``info.converged`` (use ``return_info=True``).
"""

import functools
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array
from jaxlab.qlearning.mdp import TabularMDP, check_mdp


class VIInfo(NamedTuple):
    """Diagnostics of a value-iteration run.

    Attributes:
      iterations: int32 sweeps done.
      residual: final ||T Q - Q||_inf.
      converged: bool, residual <= tol (1 - gamma) / gamma (so ||Q - Q*||_inf <= tol).
    """

    iterations: Array
    residual: Array
    converged: Array


def bellman_optimality(mdp: TabularMDP, q: Array) -> Array:
    """(T Q)(s, a) = r(s, a) + gamma * sum_s' P(s'|s, a) max_a' Q(s', a').

    Args:
      mdp: the MDP.
      q: [S, A] action values.

    Returns:
      [S, A] T Q.

    Raises:
      ValueError: if ``q`` has the wrong shape or is not finite, or the MDP is invalid.
    """
    validation.check_shape("q", q, (mdp.num_states, mdp.num_actions))
    validation.check_finite("q", q)
    check_mdp(mdp)
    return _bellman(mdp, q)


def _bellman(mdp: TabularMDP, q: Array) -> Array:
    return mdp.rewards + mdp.gamma * jnp.einsum("sat,t->sa", mdp.transitions, q.max(-1))


@functools.partial(jax.jit, static_argnames="max_iters")
def _value_iteration(mdp: TabularMDP, tol, max_iters: int) -> tuple[Array, VIInfo]:
    stop = tol * (1.0 - mdp.gamma) / jnp.maximum(mdp.gamma, 1e-12)

    def cond(c):
        i, _, gap = c
        return (gap > stop) & (i < max_iters)

    def body(c):
        i, q, _ = c
        q_new = _bellman(mdp, q)
        return i + 1, q_new, jnp.max(jnp.abs(q_new - q))

    q0 = jnp.zeros_like(mdp.rewards)
    i, q, gap = jax.lax.while_loop(cond, body, (0, q0, jnp.asarray(jnp.inf, q0.dtype)))
    return q, VIInfo(jnp.asarray(i, jnp.int32), gap, gap <= stop)


def value_iteration(mdp: TabularMDP, tol: float = 1e-5, max_iters: int = 10_000, *,
                    return_info: bool = False):
    """Iterates Q <- T Q until ||T Q - Q||_inf <= tol (1 - gamma) / gamma.

    That stopping rule bounds ||Q - Q*||_inf by ``tol`` (T is a gamma-contraction).
    The loop itself is jitted; this wrapper validates the inputs and reports a run that
    hits ``max_iters`` first.

    Args:
      mdp: the MDP (gamma < 1).
      tol: target sup-norm error to Q*, > 0.
      max_iters: cap on the number of sweeps (float32 rounding can stall the gap
        just above a very small tol).
      return_info: also return ``VIInfo``; a run that hits the cap then warns instead of
        raising, and the caller decides from ``info.converged``.

    Returns:
      [S, A] Q* up to ``tol``, or (Q, VIInfo) with ``return_info``.

    Raises:
      ValueError: on an invalid MDP, ``tol`` or ``max_iters``.
      RuntimeError: if ``max_iters`` sweeps end before the tolerance is met (without
        ``return_info``).
    """
    check_mdp(mdp)
    validation.check_in_range("mdp.gamma", mdp.gamma, 0.0, 1.0, high_inclusive=False)
    validation.check_in_range("tol", tol, 0.0, low_inclusive=False)
    validation.check_finite("tol", tol)
    validation.check_positive_int("max_iters", max_iters)
    q, info = _value_iteration(mdp, tol, max_iters)
    if not isinstance(info.converged, jax.core.Tracer) and not bool(info.converged):
        g = float(mdp.gamma)
        msg = (f"value_iteration hit `max_iters`={max_iters} before reaching `tol`={tol:g}: "
               f"final residual ||TQ - Q||_inf = {float(info.residual):.3g} > "
               f"tol (1 - gamma) / gamma = {tol * (1 - g) / max(g, 1e-12):.3g}"
               f"; raise `max_iters` or `tol`.")
        if not return_info:
            raise RuntimeError(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=2)
    return (q, info) if return_info else q

