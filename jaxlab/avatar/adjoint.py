"""Adjoint-state gradient of a plan utility w.r.t. the cost of entropic OT.

The entropic plan is T_ij = exp((f_i + g_j - C_ij) / eps) with marginals a = T 1,
b = T^T 1. Perturbing C and keeping the marginals fixed gives
dT_ij = T_ij (df_i + dg_j - dC_ij) / eps with

    H [df; dg] = [rowsum(T * dC); colsum(T * dC)],   H = [[diag(a), T], [T^T, diag(b)]].

For G = grad_T f, solve the adjoint system H [ya; yb] = [rowsum(T * G); colsum(T * G)]
(H is symmetric PSD, singular along (1, -1); the right side is in its range and the
gradient below is invariant to that null direction). Then

    grad_C f = (1 / eps) T * (ya 1^T + 1 yb^T - G).

``method="cg"`` solves with conjugate gradients on the matrix-free operator (memory
O(n m) for T itself, O(n + m) extra); ``method="dense"`` forms H and uses a least-squares
solve, the O((n + m)^3) reference.
"""

import functools

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array


def _operator(plan):
    a, b = plan.sum(1), plan.sum(0)
    n = a.shape[0]

    def matvec(y):
        ya, yb = y[:n], y[n:]
        return jnp.concatenate([a * ya + plan @ yb, plan.T @ ya + b * yb])

    return matvec, a, b


def cost_gradient(plan: Array, grad_plan: Array, epsilon, method: str = "cg",
                  tol: float = 1e-6, maxiter: int = 500) -> Array:
    """grad_C f for f(T(C)), given T and G = grad_T f at T.

    Args:
      plan: [n, m] entropic OT plan (positive).
      grad_plan: [n, m] gradient of the utility w.r.t. the plan.
      epsilon: entropic regularisation > 0 used to compute the plan.
      method: "cg" (matrix-free conjugate gradients) or "dense" (least squares on H).
      tol: CG relative tolerance.
      maxiter: CG iteration cap.

    Returns:
      [n, m] gradient of f with respect to the cost matrix.
    """
    validation.check_ndim("plan", plan, 2)
    validation.check_shape("grad_plan", grad_plan, plan.shape)
    validation.check_in_range("epsilon", epsilon, 0.0, low_inclusive=False)
    if method not in ("cg", "dense"):
        raise ValueError(f"`method` must be 'cg' or 'dense', got {method!r}.")
    return _cost_gradient(plan, grad_plan, epsilon, method, tol, maxiter)


@functools.partial(jax.jit, static_argnames=("method", "maxiter"))
def _cost_gradient(plan, grad_plan, epsilon, method, tol, maxiter):
    n = plan.shape[0]
    tg = plan * grad_plan
    rhs = jnp.concatenate([tg.sum(1), tg.sum(0)])
    matvec, a, b = _operator(plan)
    if method == "cg":
        # Jacobi preconditioner diag(H)^-1 = [1/a; 1/b].
        diag = jnp.concatenate([a, b])
        y, _ = jax.scipy.sparse.linalg.cg(matvec, rhs, tol=tol, maxiter=maxiter,
                                          M=lambda v: v / diag)
    else:
        h = jnp.block([[jnp.diag(a), plan], [plan.T, jnp.diag(b)]])
        y = jnp.linalg.lstsq(h, rhs)[0]
    ya, yb = y[:n], y[n:]
    return plan * (ya[:, None] + yb[None, :] - grad_plan) / epsilon
