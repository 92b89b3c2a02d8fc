"""Bandit gradient estimators.

Two-point (Agarwal et al., 2010; Shamir, 2017): for u uniform on the unit sphere,

    g = d / (2 delta) (f(x + delta u) - f(x - delta u)) u,            E[g] = grad f_delta(x),

with f_delta(x) = E_{v ~ Ball} f(x + delta v) the smoothed loss. With a hint m and the
identity E[d u u^T] = I, the control-variate form

    g = m + d ((f(x + delta u) - f(x - delta u)) / (2 delta) - <m, u>) u

has the same mean and second moment ~ d ||grad f - m||^2 instead of d ||grad f||^2.

One-point on a box: pick a coordinate i and a sign s uniformly, query y = x + s delta e_i;

    theta_hat = m + (d / delta) (f(y) - <m, y>) s e_i,                 E[theta_hat] = theta

for linear f(x) = <theta, x>, with variance ~ (d / delta)^2 <theta - m, y>^2.

Checks: ``dim`` >= 1 and ``delta`` > 0 (concrete values, e.g. the Python float a learner
closes over; traced values are not checked).
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey

__all__ = ["sphere", "two_point", "coordinate_query", "one_point_box"]


def sphere(key: PRNGKey, dim: int) -> Array:
    """A uniform point on the unit sphere S^{dim-1}: [dim]."""
    validation.check_positive_int("dim", dim)
    v = jax.random.normal(key, (dim,))
    return v / jnp.linalg.norm(v)


def two_point(f_plus: Array, f_minus: Array, u: Array, delta, hint: Array | None = None):
    """Two-point estimate from f(x + delta u), f(x - delta u); control variate if hint given."""
    validation.check_in_range("delta", delta, 0.0, low_inclusive=False)
    validation.check_shape("f_minus", f_minus, np.shape(f_plus))
    if np.shape(f_plus) != ():
        raise ValueError(f"`f_plus` / `f_minus` must be scalars (one direction `u` of shape "
                         f"{np.shape(u)}), got shape {np.shape(f_plus)}.")
    if hint is not None:
        validation.check_shape("hint", hint, np.shape(u)[-1:])
    d = u.shape[-1]
    slope = (f_plus - f_minus) / (2.0 * delta)
    if hint is None:
        return d * slope * u
    return hint + d * (slope - jnp.dot(hint, u)) * u


def coordinate_query(key: PRNGKey, dim: int) -> tuple[Array, Array]:
    """(i, s): a uniform coordinate and a uniform sign for the one-point box estimator."""
    validation.check_positive_int("dim", dim)
    k_i, k_s = jax.random.split(key)
    i = jax.random.randint(k_i, (), 0, dim)
    s = jnp.where(jax.random.bernoulli(k_s), 1.0, -1.0)
    return i, s


def one_point_box(f_y: Array, y: Array, i: Array, s: Array, delta, hint: Array) -> Array:
    """One-point estimate of a linear loss's gradient from f(y), y = x + s delta e_i."""
    validation.check_in_range("delta", delta, 0.0, low_inclusive=False)
    d = y.shape[-1]
    return hint + (d / delta) * (f_y - jnp.dot(hint, y)) * s * jax.nn.one_hot(i, d)
