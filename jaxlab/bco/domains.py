"""Convex domains with Euclidean projections: centred balls and boxes (hyper-rectangles).

Two-point methods play on the shrunk domain (1 - delta / r) X so that x +- delta u stays
in X for every unit u; r is the radius of the largest centred ball inside X.
"""

from typing import NamedTuple

import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array


class Ball(NamedTuple):
    """{x : ||x - center|| <= radius}. center: [d]; radius: scalar."""

    center: Array
    radius: Array

    @property
    def dim(self) -> int:
        return self.center.shape[-1]

    @property
    def inner_radius(self) -> Array:
        return self.radius

    @property
    def diameter(self) -> Array:
        return 2.0 * self.radius

    def project(self, x: Array) -> Array:
        v = x - self.center
        n = jnp.linalg.norm(v)
        return self.center + v * jnp.minimum(1.0, self.radius / jnp.maximum(n, 1e-30))

    def shrink(self, factor) -> "Ball":
        """The set center + factor (X - center)."""
        return Ball(self.center, self.radius * factor)


class Box(NamedTuple):
    """{x : low <= x <= high} coordinate-wise. low, high: [d]."""

    low: Array
    high: Array

    @property
    def dim(self) -> int:
        return self.low.shape[-1]

    @property
    def center(self) -> Array:
        return 0.5 * (self.low + self.high)

    @property
    def inner_radius(self) -> Array:
        return 0.5 * jnp.min(self.high - self.low)

    @property
    def diameter(self) -> Array:
        return jnp.linalg.norm(self.high - self.low)

    def project(self, x: Array) -> Array:
        return jnp.clip(x, self.low, self.high)

    def shrink(self, factor) -> "Box":
        c, h = self.center, 0.5 * (self.high - self.low) * factor
        return Box(c - h, c + h)


def ball(dim: int, radius: float = 1.0) -> Ball:
    """The centred ball of ``radius`` in R^dim."""
    validation.check_positive_int("dim", dim)
    validation.check_in_range("radius", radius, 0.0, low_inclusive=False)
    return Ball(jnp.zeros(dim, jnp.float32), jnp.float32(radius))


def box(low, high) -> Box:
    """The box [low, high] (arrays of shape [d], low < high)."""
    low, high = jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32)
    validation.check_ndim("low", low, 1)
    validation.check_shape("high", high, low.shape)
    if not bool(jnp.all(high > low)):
        raise ValueError("`high` must exceed `low` in every coordinate.")
    return Box(low, high)


def shrunk(domain, delta) -> Ball | Box:
    """(1 - delta / r) X, where r is the domain's inner radius; needs 0 < delta < r."""
    validation.check_in_range("delta", delta, 0.0, float(domain.inner_radius),
                              low_inclusive=False, high_inclusive=False)
    return domain.shrink(1.0 - delta / domain.inner_radius)
