"""Plan utilities f(T) whose sensitivity to the cost drives active supervision.

Each utility is a pair (value, gradient w.r.t. T). T: [n, m] plan; C: [n, m] cost;
L1: [n, n] and L2: [m, m] graph Laplacians (``consistency`` only).

    entropy       f = sum T log T                      grad = log T + 1
    sq_l2         f = ||T||_F^2                        grad = 2 T
    kl            f = sum T log(T / C)                 grad = log(T / C) + 1
    consistency   f = tr(T^T L1 T) + tr(T L2 T^T)      grad = 2 (L1 T + T L2)

Checks (eager; shapes also under ``jit``): ``utility`` is a known name; ``plan`` is 2-D,
finite and non-negative; ``ctx.cost`` [n, m], ``ctx.lap1`` [n, n], ``ctx.lap2`` [m, m] and
finite when the utility needs them. Value checks skip traced arrays.
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array

__all__ = ["UtilityContext", "value", "gradient", "UTILITIES"]

_TINY = 1e-30


class UtilityContext(NamedTuple):
    """Extra inputs some utilities need. cost: [n, m]; lap1: [n, n]; lap2: [m, m]."""

    cost: Array | None = None
    lap1: Array | None = None
    lap2: Array | None = None


def _need(ctx, field, name, shape):
    v = getattr(ctx, field)
    if v is None:
        raise ValueError(f"utility {name!r} needs `ctx.{field}`.")
    validation.check_shape(f"ctx.{field}", v, shape)
    validation.check_finite(f"ctx.{field}", v)
    return v


def _check(name, plan):
    validation.check_one_of("utility", name, UTILITIES)
    validation.check_ndim("plan", plan, 2)
    validation.check_finite("plan", plan)
    validation.check_in_range("plan", plan, 0.0)
    n, m = np.shape(plan)
    return {"cost": (n, m), "lap1": (n, n), "lap2": (m, m)}


def value(name: str, plan: Array, ctx: UtilityContext | None = None) -> Array:
    """f(T) for the utility called ``name``."""
    shapes = _check(name, plan)
    t, ctx = plan, UtilityContext() if ctx is None else ctx
    if name == "entropy":
        return jnp.sum(t * jnp.log(jnp.maximum(t, _TINY)))
    if name == "sq_l2":
        return jnp.sum(t**2)
    if name == "kl":
        c = _need(ctx, "cost", name, shapes["cost"])
        return jnp.sum(t * jnp.log(jnp.maximum(t, _TINY) / jnp.maximum(c, _TINY)))
    if name == "consistency":
        l1, l2 = _need(ctx, "lap1", name, shapes["lap1"]), _need(ctx, "lap2", name, shapes["lap2"])
        return jnp.trace(t.T @ l1 @ t) + jnp.trace(t @ l2 @ t.T)
    raise ValueError(f"`utility` must be one of {UTILITIES}, got {name!r}.")


def gradient(name: str, plan: Array, ctx: UtilityContext | None = None) -> Array:
    """grad_T f(T) in closed form, [n, m]."""
    shapes = _check(name, plan)
    t, ctx = plan, UtilityContext() if ctx is None else ctx
    if name == "entropy":
        return jnp.log(jnp.maximum(t, _TINY)) + 1.0
    if name == "sq_l2":
        return 2.0 * t
    if name == "kl":
        c = _need(ctx, "cost", name, shapes["cost"])
        return jnp.log(jnp.maximum(t, _TINY) / jnp.maximum(c, _TINY)) + 1.0
    if name == "consistency":
        l1, l2 = _need(ctx, "lap1", name, shapes["lap1"]), _need(ctx, "lap2", name, shapes["lap2"])
        return 2.0 * (l1 @ t + t @ l2)
    raise ValueError(f"`utility` must be one of {UTILITIES}, got {name!r}.")


UTILITIES = ("entropy", "sq_l2", "kl", "consistency")
