"""Convex domains with Euclidean projections: centred balls and boxes (hyper-rectangles).

Two-point methods play on the shrunk domain (1 - delta / r) X so that x +- delta u stays
in X for every unit u; r is the radius of the largest centred ball inside X.

Checks (eager): ``dim`` >= 1, ``radius`` > 0 and finite, ``low`` / ``high`` finite [d] with
``high > low``; ``shrunk`` needs a ``Ball`` / ``Box`` (``domain``) and 0 < ``delta`` < r;
``check_inside`` rejects a concrete start point outside X (``x0``).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

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
    validation.check_in_range("radius", radius, 0.0, np.inf, low_inclusive=False,
                              high_inclusive=False)
    return Ball(jnp.zeros(dim, jnp.float32), jnp.float32(radius))


def box(low, high) -> Box:
    """The box [low, high] (arrays of shape [d], low < high)."""
    low, high = jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32)
    validation.check_ndim("low", low, 1)
    validation.check_shape("high", high, low.shape)
    validation.check_finite("low", low)
    validation.check_finite("high", high)
    if not any(isinstance(v, jax.core.Tracer) for v in (low, high)) and not bool(
            jnp.all(high > low)):  # traced bounds (a box built inside jit) are not checked
        raise ValueError("`high` must exceed `low` in every coordinate.")
    return Box(low, high)


def shrunk(domain, delta) -> Ball | Box:
    """(1 - delta / r) X, where r is the domain's inner radius; needs 0 < delta < r.

    Jittable: inside ``jit`` (a learner built in a jitted function, ``delta`` or the domain
    traced) the range of ``delta`` is not checked.
    """
    check_domain(domain)
    r = domain.inner_radius
    if isinstance(r, jax.core.Tracer):
        validation.check_in_range("delta", delta, 0.0, low_inclusive=False)
    else:
        validation.check_in_range("delta", delta, 0.0, float(r), low_inclusive=False,
                                  high_inclusive=False)
    return domain.shrink(1.0 - delta / domain.inner_radius)


def check_domain(domain, name: str = "domain") -> None:
    """Raises ValueError unless ``domain`` is a ``Ball`` or ``Box``."""
    if not isinstance(domain, Ball | Box):
        raise ValueError(f"`{name}` must be a Ball or Box (see domains.ball / domains.box), "
                         f"got {type(domain).__name__}.")


def check_inside(name: str, x, domain, rtol: float = 1e-5) -> None:
    """Raises ValueError if a concrete point ``x`` is NaN/inf or outside ``domain``.

    Traced points are not checked. ``rtol`` (relative to the domain's size) absorbs
    round-off on the boundary.
    """
    if isinstance(x, jax.core.Tracer) or any(
            isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(domain)):
        return
    validation.check_finite(name, x)
    v = np.asarray(x, np.float64)
    if isinstance(domain, Ball):
        c, r = np.asarray(domain.center, np.float64), float(domain.radius)
        dist = float(np.linalg.norm(v - c))
        if dist > r * (1 + rtol):
            raise ValueError(f"`{name}` must lie in the ball of radius {r:g} (distance "
                             f"{dist:.4g} from its centre).")
    else:
        lo, hi = np.asarray(domain.low, np.float64), np.asarray(domain.high, np.float64)
        slack = rtol * (hi - lo)
        out = (v < lo - slack) | (v > hi + slack)
        if np.any(out):
            raise ValueError(f"`{name}` must lie in the box [low, high]; {int(out.sum())} "
                             "coordinate(s) are outside.")
