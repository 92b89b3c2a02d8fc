"""Convex domains with Euclidean projections: centred balls and boxes (hyper-rectangles).

Two-point methods play on the shrunk domain (1 - delta / r) X so that x +- delta u stays
in X for every unit u; r is the radius of the largest centred ball inside X.

Checks (eager): ``dim`` >= 1, ``radius`` > 0 and finite, ``low`` / ``high`` finite [d] with
``high > low``; a diameter up to ``MAX_DIAMETER`` (~4.6e18: its square, and the squared
gradients of a quadratic across it, stay finite in float32); ``shrunk`` needs a ``Ball`` /
``Box`` (``domain``) and 0 < ``delta`` < r with delta resolvable next to the domain's
coordinates in float32 (``delta`` >= ``DELTA_RESOLUTION`` times the largest |coordinate|,
else x +- delta u rounds to x); ``check_inside`` rejects a concrete start point outside X
(``x0``). A traced ``delta`` or domain is not checked (and never crashes a check).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array

__all__ = ["Ball", "Box", "ball", "box", "shrunk"]

F32_MAX = float(np.finfo(np.float32).max)
MAX_DIAMETER = float(np.sqrt(F32_MAX)) / 4.0
DELTA_RESOLUTION = 16.0 * float(np.finfo(np.float32).eps)


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
    validation.check_in_range("radius", radius, 0.0, MAX_DIAMETER / 2, low_inclusive=False)
    return Ball(jnp.zeros(dim, jnp.float32), jnp.float32(radius))


def box(low, high) -> Box:
    """The box [low, high] (arrays of shape [d], low < high)."""
    low, high = jnp.asarray(low, jnp.float32), jnp.asarray(high, jnp.float32)
    validation.check_ndim("low", low, 1)
    validation.check_nonempty("low", low)
    validation.check_shape("high", high, low.shape)
    validation.check_finite("low", low)
    validation.check_finite("high", high)
    if any(isinstance(v, jax.core.Tracer) for v in (low, high)):
        return Box(low, high)  # traced bounds (a box built inside jit) are not checked
    if not bool(jnp.all(high > low)):
        raise ValueError("`high` must exceed `low` in every coordinate.")
    span = np.linalg.norm(np.asarray(high, np.float64) - np.asarray(low, np.float64))
    if span > MAX_DIAMETER:
        raise ValueError(f"`low` / `high` span a box of diameter {span:.3g}, too large for "
                         f"float32 arithmetic (at most {MAX_DIAMETER:.3g}); rescale the domain.")
    return Box(low, high)


def shrunk(domain, delta) -> Ball | Box:
    """(1 - delta / r) X, where r is the domain's inner radius; needs 0 < delta < r.

    Jittable: inside ``jit`` (a learner built in a jitted function, ``delta`` or the domain
    traced) the range of ``delta`` is not checked.
    """
    check_domain(domain)
    validation.check_in_range("delta", delta, 0.0,
                              validation.concrete_float(domain.inner_radius),
                              low_inclusive=False, high_inclusive=False)
    scale = _coordinate_scale(domain)
    if scale is not None and validation.concrete_float(delta) is not None \
            and float(delta) < DELTA_RESOLUTION * max(scale, float(np.finfo(np.float32).tiny)):
        raise ValueError(f"`delta`={float(delta):g} is below float32 resolution at this "
                         f"domain's coordinates (|x| up to {scale:.3g}): x +- delta u would "
                         f"round to x; use delta >= {DELTA_RESOLUTION * scale:.3g}.")
    return domain.shrink(1.0 - delta / domain.inner_radius)


def _coordinate_scale(domain) -> float | None:
    """Largest |coordinate| of a concrete domain (None when traced)."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(domain)):
        return None
    if isinstance(domain, Ball):
        return float(np.max(np.abs(np.asarray(domain.center)), initial=0.0)
                     + float(domain.radius))
    return float(max(np.max(np.abs(np.asarray(domain.low))),
                     np.max(np.abs(np.asarray(domain.high)))))


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
