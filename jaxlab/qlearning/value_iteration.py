"""Exact Bellman optimality operator and value iteration (the Q* reference)."""

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array
from jaxlab.qlearning.mdp import TabularMDP


def bellman_optimality(mdp: TabularMDP, q: Array) -> Array:
    """(T Q)(s, a) = r(s, a) + gamma * sum_s' P(s'|s, a) max_a' Q(s', a').

    Args:
      mdp: the MDP.
      q: [S, A] action values.

    Returns:
      [S, A] T Q.
    """
    validation.check_shape("q", q, (mdp.num_states, mdp.num_actions))
    return mdp.rewards + mdp.gamma * jnp.einsum("sat,t->sa", mdp.transitions, q.max(-1))


@jax.jit
def value_iteration(mdp: TabularMDP, tol: float = 1e-5, max_iters: int = 10_000) -> Array:
    """Iterates Q <- T Q until ||T Q - Q||_inf <= tol (1 - gamma) / gamma.

    That stopping rule bounds ||Q - Q*||_inf by ``tol`` (T is a gamma-contraction).

    Args:
      mdp: the MDP.
      tol: target sup-norm error to Q*.
      max_iters: cap on the number of sweeps (float32 rounding can stall the gap
        just above a very small tol).

    Returns:
      [S, A] Q* up to ``tol``.
    """
    stop = tol * (1.0 - mdp.gamma) / jnp.maximum(mdp.gamma, 1e-12)

    def cond(c):
        i, _, gap = c
        return (gap > stop) & (i < max_iters)

    def body(c):
        i, q, _ = c
        q_new = bellman_optimality(mdp, q)
        return i + 1, q_new, jnp.max(jnp.abs(q_new - q))

    q0 = jnp.zeros_like(mdp.rewards)
    _, q, _ = jax.lax.while_loop(cond, body, (0, q0, jnp.asarray(jnp.inf, q0.dtype)))
    return q
