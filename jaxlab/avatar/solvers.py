"""Alignment solvers on ott-jax: entropic OT on a cost and fused Gromov-Wasserstein.

Checks: ``cost`` (2-D, finite), ``struct1`` / ``struct2`` (shapes [n, n] / [m, m], finite),
``epsilon`` > 0, ``threshold`` > 0, ``max_iterations`` >= 1, ``fused_penalty`` >= 0 are
validated eagerly before the solve (value checks skip traced arrays). Convergence is a
property of the solve, not of the inputs: ``entropic_solve`` / ``fgw_solve`` return a
``PlanResult`` carrying ott's ``converged`` flag and the final marginal error (a flag, no
host sync, so they work under ``jit`` / ``vmap`` / ``scan``); ``check_plan`` turns that flag
into a ``RuntimeWarning`` with the numbers (marginal error, tolerance, iterations, naming
``max_iterations`` and ``epsilon``). ``entropic_plan`` / ``fgw_plan`` call ``check_plan``
themselves when their result is concrete (eager calls); inside compiled code the caller
checks the flags (``loop.run_active`` does).
"""

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import checked, extras, validation
from jaxlab.core.types import Array

__all__ = ["PlanResult", "marginal_error", "entropic_solve", "entropic_plan", "fgw_solve",
    "fgw_plan", "implicit_utility_grad"]

checked.declare("jaxlab.avatar.solvers.entropic_solve", "jaxlab.avatar.solvers.fgw_solve")


class PlanResult(NamedTuple):
    """plan: [n, m] transport plan; converged: [] bool, ott's convergence flag (for FGW the
    outer loop and every inner Sinkhorn); marginal_error: [] L1 distance of the worse of the
    two marginals to the uniform ones (NaN when the solve diverged); iterations: [] Sinkhorn
    iterations (outer iterations for FGW), or None where not tracked."""

    plan: Array
    converged: Array
    marginal_error: Array
    iterations: Array



def _ott():
    """(geometry, linear, quadratic) of ott-jax, imported on first use: ott's own import
    pulls in matplotlib, which ``import jaxlab.avatar`` must not (tests/test_imports.py)."""
    extras.require("ott")
    from ott.geometry import geometry
    from ott.solvers import linear, quadratic

    return geometry, linear, quadratic

def marginal_error(plan: Array) -> Array:
    """max(||T 1 - 1/n||_1, ||T^T 1 - 1/m||_1) for an [..., n, m] plan (or batch of plans)
    with uniform marginals.

    Raises:
      ValueError: ``plan`` with fewer than 2 dimensions, or (concrete) not finite.
    """
    if np.ndim(plan) < 2:
        raise ValueError(f"`plan` must be [..., n, m] (at least 2-D), got shape "
                         f"{tuple(np.shape(plan))}.")
    validation.check_finite("plan", plan)
    return _marginal_error(plan)


def _marginal_error(plan):
    """``marginal_error`` unchecked: the solvers' result flag (NaN for a diverged plan)."""
    n, m = plan.shape[-2:]
    return jnp.maximum(jnp.abs(plan.sum(-1) - 1.0 / n).sum(-1),
                       jnp.abs(plan.sum(-2) - 1.0 / m).sum(-1))


def _traced_cost(cost, epsilon) -> None:
    """Checked-mode checks of a traced cost / epsilon."""
    checked.check(jnp.all(jnp.isfinite(cost)), "`cost` must be finite.")
    checked.check(epsilon > 0, "`epsilon` must be > 0, got {e}.", e=epsilon)


def _check_cost(cost, epsilon, where="jaxlab.avatar.solvers.entropic_solve"):
    validation.check_real("cost", cost)
    validation.check_ndim("cost", cost, 2)
    validation.check_nonempty("cost", cost)
    validation.check_finite("cost", cost)
    validation.check_in_range("epsilon", epsilon, 0.0, low_inclusive=False)
    if where is not None:
        checked.guard(where, _traced_cost, cost, epsilon)


@checked.boundary
def entropic_solve(cost: Array, epsilon, threshold: float = 1e-5,
                   max_iterations: int = 3000) -> PlanResult:
    """Entropic OT with uniform marginals; the plan with its convergence report.

    Args:
      cost: [n, m] finite cost matrix.
      epsilon: regularisation > 0.
      threshold: Sinkhorn marginal-error tolerance > 0.
      max_iterations: Sinkhorn iteration cap >= 1.

    Returns:
      PlanResult (no check is made here: use ``check_plan`` or read ``converged``).
    """
    _check_cost(cost, epsilon)
    validation.check_in_range("threshold", threshold, 0.0, low_inclusive=False)
    validation.check_positive_int("max_iterations", max_iterations)
    geometry, linear, _ = _ott()
    geom = geometry.Geometry(cost_matrix=cost, epsilon=epsilon)
    out = linear.solve(geom, threshold=threshold, max_iterations=max_iterations)
    plan = out.matrix
    return PlanResult(plan, jnp.asarray(out.converged), _marginal_error(plan),
                      jnp.asarray(out.n_iters))


def entropic_plan(cost: Array, epsilon, threshold: float = 1e-5,
                  max_iterations: int = 3000) -> Array:
    """Entropic OT plan with uniform marginals, [n, m] (sums to one).

    Warns (``check_plan``) when called eagerly and Sinkhorn did not converge.

    Args:
      cost: [n, m] finite cost matrix.
      epsilon: regularisation > 0.
      threshold: Sinkhorn marginal-error tolerance > 0.
      max_iterations: Sinkhorn iteration cap >= 1.
    """
    res = entropic_solve(cost, epsilon, threshold, max_iterations)
    check_plan(res, threshold, max_iterations, epsilon)
    return res.plan


@checked.boundary
def fgw_solve(cost: Array, struct1: Array, struct2: Array, epsilon,
              fused_penalty=1.0) -> PlanResult:
    """Entropic fused Gromov-Wasserstein; the plan with its convergence report.

    Args:
      cost: [n, m] finite feature cost (the linear / Wasserstein term).
      struct1: [n, n] finite intra-domain cost of the source (e.g. shortest paths).
      struct2: [m, m] finite intra-domain cost of the target.
      epsilon: entropic regularisation > 0.
      fused_penalty: weight >= 0 of the linear term relative to the GW term.
    """
    _check_cost(cost, epsilon, "jaxlab.avatar.solvers.fgw_solve")
    n, m = cost.shape
    validation.check_shape("struct1", struct1, (n, n))
    validation.check_shape("struct2", struct2, (m, m))
    validation.check_finite("struct1", struct1)
    validation.check_finite("struct2", struct2)
    validation.check_in_range("fused_penalty", fused_penalty, 0.0)
    geometry, _, quadratic = _ott()
    out = quadratic.solve(geometry.Geometry(cost_matrix=struct1),
                          geometry.Geometry(cost_matrix=struct2),
                          geometry.Geometry(cost_matrix=cost), fused_penalty=fused_penalty,
                          epsilon=epsilon)
    lin = out.linear_convergence  # per outer iteration: 1 converged, 0 not, NaN unused
    inner_ok = jnp.all(jnp.isnan(lin) | (lin > 0))
    outer = jnp.sum(~jnp.isnan(lin))
    plan = out.matrix
    return PlanResult(plan, jnp.asarray(out.converged) & inner_ok, _marginal_error(plan), outer)


def fgw_plan(cost: Array, struct1: Array, struct2: Array, epsilon, fused_penalty=1.0) -> Array:
    """Entropic fused Gromov-Wasserstein plan, [n, m].

    Warns (``check_plan``) when called eagerly and the solver did not converge.

    Args:
      cost: [n, m] finite feature cost (the linear / Wasserstein term).
      struct1: [n, n] finite intra-domain cost of the source (e.g. shortest paths).
      struct2: [m, m] finite intra-domain cost of the target.
      epsilon: entropic regularisation > 0.
      fused_penalty: weight >= 0 of the linear term relative to the GW term.
    """
    res = fgw_solve(cost, struct1, struct2, epsilon, fused_penalty)
    check_plan(res, None, None, epsilon, solver="FGW")
    return res.plan


def _is_concrete(*xs) -> bool:
    return not any(isinstance(x, jax.core.Tracer) for x in xs)


def check_plan(res: PlanResult, threshold=None, max_iterations=None, epsilon=None,
               solver: str = "Sinkhorn", where: str = "") -> bool:
    """Warns (RuntimeWarning, with the numbers) if any solve in ``res`` did not converge.

    ``res`` may hold a batch of solves (e.g. one per round and seed). Traced results are
    not checked (returns True); run this on the concrete output of the compiled code.

    Returns:
      True when every solve converged with finite marginals.
    """
    failed = validation.failed_solves(res.converged, res.marginal_error)
    if failed is None:
        return True
    bad, worst = failed
    parts = [f"{solver} plan did not converge{where}: {int(bad.sum())} of {bad.size} "
             f"solve(s), marginal error (L1) up to {worst:.3g}"]
    if threshold is not None:
        parts.append(f"tolerance `threshold`={threshold:g}")
    if res.iterations is not None:
        its = np.broadcast_to(np.asarray(res.iterations), bad.shape)[bad]
        parts.append(f"after {int(np.max(its))} iteration(s)")
    if max_iterations is not None:
        parts.append(f"cap `max_iterations`={max_iterations}")
    if epsilon is not None and _is_concrete(epsilon) and np.ndim(epsilon) == 0:
        parts.append(f"`epsilon`={float(epsilon):g}")
    fix = "`max_iterations` or `epsilon`" if max_iterations is not None else "`epsilon`"
    warnings.warn(", ".join(parts) + f". Raise {fix} (or rescale the costs); the plan's "
                  "marginals are off.", RuntimeWarning, stacklevel=3)
    return False


def implicit_utility_grad(cost: Array, epsilon, weights: Array) -> Array:
    """grad_C <T(C), W> by ott's implicit differentiation (the independent reference)."""
    _check_cost(cost, epsilon, where=None)  # a test reference, not a checked entry point
    validation.check_shape("weights", weights, cost.shape)
    validation.check_finite("weights", weights)

    def f(c):
        geometry, linear, _ = _ott()
        geom = geometry.Geometry(cost_matrix=c, epsilon=epsilon)
        out = linear.solve(geom, threshold=1e-7, max_iterations=5000)
        return jnp.sum(out.matrix * weights)

    return jax.grad(f)(cost)
