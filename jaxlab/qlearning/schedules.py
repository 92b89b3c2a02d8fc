"""Target-update period schedules and inner-loop step sizes.

A *period schedule* is any pytree that is callable as ``schedule(n) -> K_n`` (int32,
>= 1): the number of inner SGD steps run against the n-th frozen target. Being a
pytree, a stack of schedules of one family vmaps (see ``stack``). Users add their own
by writing a NamedTuple with a ``__call__``.

Theory (arXiv 2602.03911, DESIGN.md): with a constant period the sample complexity has
an extra log(1/((1-gamma) eps)) factor; growing the period geometrically,
K_n proportional to gamma^(-2n/3), removes it. So the theory schedule's *period grows*
and the target-update *frequency* falls.

Checks (eager, in the constructor functions; nothing runs inside compiled code):
``geometric``: ``base`` >= 1 and finite, ``ratio`` > 0 and finite, ``max_period`` >= 1
(may be inf: capped at int32 max); ``constant``: ``period`` an integer >= 1; ``theory``:
``gamma`` in (0, 1); ``constant_step``: ``alpha`` in (0, 1]; ``stack``: non-empty.
Building the NamedTuples by hand skips these checks.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array, ArrayLike

_INT32_MAX = 2**31 - 1


class GeometricPeriod(NamedTuple):
    """K_n = clip(floor(base * ratio^n), 1, max_period).

    ``ratio == 1`` is a constant period, ``ratio > 1`` a growing period (the theory
    schedule), ``ratio < 1`` a shrinking one (floored at 1).
    """

    base: Array
    ratio: Array
    max_period: Array

    def __call__(self, n: ArrayLike) -> Array:
        n = jnp.asarray(n, jnp.float32)
        k = jnp.floor(self.base * jnp.power(self.ratio, n))
        return jnp.clip(k, 1.0, self.max_period).astype(jnp.int32)


def geometric(base: float, ratio: float, max_period: float = 1e9) -> GeometricPeriod:
    """K_n = floor(base * ratio^n), clipped to [1, max_period].

    Args:
      base: K_0 >= 1.
      ratio: growth factor per target update, > 0.
      max_period: cap on K_n, >= 1.
    """
    validation.check_in_range("base", base, 1.0)
    validation.check_finite("base", base)
    validation.check_in_range("ratio", ratio, 0.0, low_inclusive=False)
    validation.check_finite("ratio", ratio)
    validation.check_in_range("max_period", max_period, 1.0)
    f = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return GeometricPeriod(f(base), f(ratio), f(min(float(max_period), _INT32_MAX)))


def constant(period: int) -> GeometricPeriod:
    """K_n = period for every n (period >= 1)."""
    if isinstance(period, bool) or not isinstance(period, int) or period < 1:
        raise ValueError(f"`period` must be an integer >= 1, got {period!r}.")
    return geometric(period, 1.0)


def theory(gamma: float, base: float = 1.0, max_period: float = 1e9) -> GeometricPeriod:
    """The schedule the theory prescribes: K_n = floor(base * gamma^(-2n/3)).

    Args:
      gamma: discount in (0, 1).
      base: K_0 >= 1.
      max_period: cap on K_n.
    """
    validation.check_in_range("gamma", gamma, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    return geometric(base, float(gamma) ** (-2.0 / 3.0), max_period)


def stack(schedules) -> GeometricPeriod:
    """Stacks schedules of one family along a new leading axis (for vmap)."""
    schedules = list(schedules)
    if not schedules:
        raise ValueError("`schedules` must be non-empty.")
    return jax.tree.map(lambda *xs: jnp.stack(xs), *schedules)


class PolynomialStep(NamedTuple):
    """Inner-loop step size alpha(c) = min(1, scale * c^(-power)), c = visits of (s, a)
    since the last target update (c >= 1).

    ``power = 1, scale = 1`` makes the inner loop the running mean of the sampled
    Bellman targets (the empirical Bellman operator); ``power = 0`` is a constant step.
    """

    scale: Array
    power: Array

    def __call__(self, count: ArrayLike) -> Array:
        c = jnp.maximum(jnp.asarray(count, jnp.float32), 1.0)
        return jnp.minimum(1.0, self.scale * jnp.power(c, -self.power))


def inverse_count_step() -> PolynomialStep:
    """alpha = 1 / c: the inner loop averages the sampled targets."""
    return PolynomialStep(jnp.float32(1.0), jnp.float32(1.0))


def constant_step(alpha: float) -> PolynomialStep:
    """alpha = constant in (0, 1]."""
    validation.check_in_range("alpha", alpha, 0.0, 1.0, low_inclusive=False)
    return PolynomialStep(jnp.float32(alpha), jnp.float32(0.0))
