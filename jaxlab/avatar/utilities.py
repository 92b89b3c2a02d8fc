"""Plan utilities f(T) whose sensitivity to the cost drives active supervision.

Each utility is a pair (value, gradient w.r.t. T). T: [n, m] plan; C: [n, m] cost;
L1: [n, n] and L2: [m, m] graph Laplacians (``consistency`` only).

    entropy       f = sum T log T                      grad = log T + 1
    sq_l2         f = ||T||_F^2                        grad = 2 T
    kl            f = sum T log(T / C)                 grad = log(T / C) + 1
    consistency   f = tr(T^T L1 T) + tr(T L2 T^T)      grad = 2 (L1 T + T L2)
"""

from typing import NamedTuple

import jax.numpy as jnp

from jaxlab.core.types import Array

_TINY = 1e-30


class UtilityContext(NamedTuple):
    """Extra inputs some utilities need. cost: [n, m]; lap1: [n, n]; lap2: [m, m]."""

    cost: Array | None = None
    lap1: Array | None = None
    lap2: Array | None = None


def _need(ctx, field, name):
    v = getattr(ctx, field)
    if v is None:
        raise ValueError(f"utility {name!r} needs `ctx.{field}`.")
    return v


def value(name: str, plan: Array, ctx: UtilityContext | None = None) -> Array:
    """f(T) for the utility called ``name``."""
    t, ctx = plan, UtilityContext() if ctx is None else ctx
    if name == "entropy":
        return jnp.sum(t * jnp.log(jnp.maximum(t, _TINY)))
    if name == "sq_l2":
        return jnp.sum(t**2)
    if name == "kl":
        c = _need(ctx, "cost", name)
        return jnp.sum(t * jnp.log(jnp.maximum(t, _TINY) / jnp.maximum(c, _TINY)))
    if name == "consistency":
        l1, l2 = _need(ctx, "lap1", name), _need(ctx, "lap2", name)
        return jnp.trace(t.T @ l1 @ t) + jnp.trace(t @ l2 @ t.T)
    raise ValueError(f"`utility` must be one of {UTILITIES}, got {name!r}.")


def gradient(name: str, plan: Array, ctx: UtilityContext | None = None) -> Array:
    """grad_T f(T) in closed form, [n, m]."""
    t, ctx = plan, UtilityContext() if ctx is None else ctx
    if name == "entropy":
        return jnp.log(jnp.maximum(t, _TINY)) + 1.0
    if name == "sq_l2":
        return 2.0 * t
    if name == "kl":
        c = _need(ctx, "cost", name)
        return jnp.log(jnp.maximum(t, _TINY) / jnp.maximum(c, _TINY)) + 1.0
    if name == "consistency":
        l1, l2 = _need(ctx, "lap1", name), _need(ctx, "lap2", name)
        return 2.0 * (l1 @ t + t @ l2)
    raise ValueError(f"`utility` must be one of {UTILITIES}, got {name!r}.")


UTILITIES = ("entropy", "sq_l2", "kl", "consistency")
