"""Cosine VP noise schedule (Nichol & Dhariwal 2021) in continuous time t in [0, 1].

Checks: ``t`` in [0, 1] (``alpha_bar``, ``noise``) and ``sqrt_abar`` in (0, 1] on concrete
values; traced values (inside ``jit``) are not checked.
"""

import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation

__all__ = ["S", "alpha_bar", "t_from_sqrt_alpha_bar", "noise"]

S = 0.008


def alpha_bar(t):
    """abar(t) = cos^2(((t + s)/(1 + s)) pi/2) / cos^2((s/(1 + s)) pi/2), clipped."""
    validation.check_in_range("t", t, 0.0, 1.0)
    f = jnp.cos((t + S) / (1 + S) * jnp.pi / 2) ** 2
    f0 = np.cos(S / (1 + S) * np.pi / 2) ** 2
    return jnp.clip(f / f0, 1e-5, 1.0)


def t_from_sqrt_alpha_bar(sqrt_abar):
    """Inverse of sqrt(abar(t)) for values in (0, 1]."""
    validation.check_in_range("sqrt_abar", sqrt_abar, 0.0, 1.0, low_inclusive=False)
    f0 = np.cos(S / (1 + S) * np.pi / 2) ** 2
    c = np.sqrt(np.asarray(sqrt_abar, np.float64) ** 2 * f0)
    return np.clip(np.arccos(c) * 2 / np.pi * (1 + S) - S, 0.0, 1.0)


def noise(x0, eps, t):
    """x_t = sqrt(abar) x0 + sqrt(1 - abar) eps and sigma_t = sqrt(1 - abar)."""
    validation.check_shape("eps", eps, np.shape(x0))
    ab = alpha_bar(t)
    ab = jnp.reshape(ab, jnp.shape(ab) + (1,) * (x0.ndim - jnp.ndim(ab)))
    return jnp.sqrt(ab) * x0 + jnp.sqrt(1 - ab) * eps, jnp.sqrt(1 - ab)
