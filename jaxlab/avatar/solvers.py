"""Alignment solvers on ott-jax: entropic OT on a cost and fused Gromov-Wasserstein."""

import jax
import jax.numpy as jnp
from ott.geometry import geometry
from ott.solvers import linear, quadratic

from jaxlab.core import validation
from jaxlab.core.types import Array


def entropic_plan(cost: Array, epsilon, threshold: float = 1e-5,
                  max_iterations: int = 3000) -> Array:
    """Entropic OT plan with uniform marginals, [n, m] (sums to one).

    Args:
      cost: [n, m] cost matrix.
      epsilon: regularisation > 0.
      threshold: Sinkhorn marginal-error tolerance.
      max_iterations: Sinkhorn iteration cap.
    """
    validation.check_ndim("cost", cost, 2)
    validation.check_in_range("epsilon", epsilon, 0.0, low_inclusive=False)
    geom = geometry.Geometry(cost_matrix=cost, epsilon=epsilon)
    out = linear.solve(geom, threshold=threshold, max_iterations=max_iterations)
    return out.matrix


def fgw_plan(cost: Array, struct1: Array, struct2: Array, epsilon, fused_penalty=1.0) -> Array:
    """Entropic fused Gromov-Wasserstein plan, [n, m].

    Args:
      cost: [n, m] feature cost (the linear / Wasserstein term).
      struct1: [n, n] intra-domain cost of the source (e.g. shortest-path distances).
      struct2: [m, m] intra-domain cost of the target.
      epsilon: entropic regularisation > 0.
      fused_penalty: weight of the linear term relative to the GW term.
    """
    validation.check_ndim("cost", cost, 2)
    n, m = cost.shape
    validation.check_shape("struct1", struct1, (n, n))
    validation.check_shape("struct2", struct2, (m, m))
    validation.check_in_range("epsilon", epsilon, 0.0, low_inclusive=False)
    out = quadratic.solve(geometry.Geometry(cost_matrix=struct1),
                          geometry.Geometry(cost_matrix=struct2),
                          geometry.Geometry(cost_matrix=cost), fused_penalty=fused_penalty,
                          epsilon=epsilon)
    return out.matrix


def implicit_utility_grad(cost: Array, epsilon, weights: Array) -> Array:
    """grad_C <T(C), W> by ott's implicit differentiation (the independent reference)."""
    def f(c):
        geom = geometry.Geometry(cost_matrix=c, epsilon=epsilon)
        out = linear.solve(geom, threshold=1e-7, max_iterations=5000)
        return jnp.sum(out.matrix * weights)

    return jax.grad(f)(cost)
