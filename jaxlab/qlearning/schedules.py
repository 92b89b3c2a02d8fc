"""Target-update period schedules and inner-loop step sizes.

A *period schedule* is any pytree that is callable as ``schedule(n) -> K_n`` (int32,
>= 1): the number of inner SGD steps run against the n-th frozen target. Being a
pytree, a stack of schedules of one family vmaps (see ``stack``). Users add their own
by writing a NamedTuple with a ``__call__``.

Theory (arXiv 2602.03911): with a constant period the sample complexity has
an extra log(1/((1-gamma) eps)) factor; growing the period geometrically,
K_n proportional to gamma^(-2n/3), removes it. So the theory schedule's *period grows*
and the target-update *frequency* falls.

Checks (eager, in the constructor functions; nothing runs inside compiled code):
``geometric``: ``base`` >= 1 and finite, ``ratio`` > 0 and finite, ``max_period`` >= 1
(may be inf: capped at int32 max); ``constant``: ``period`` an integer >= 1; ``theory``:
``gamma`` in (0, 1); ``growth``: ``gamma`` in (0, 1), ``power`` > 0 and finite, ``base``
as in ``geometric``; ``constant_step``: ``alpha`` in (0, 1]; ``sgd_step``: ``xi`` in (0, 1],
``scale`` > 0 and finite, ``offset`` > 0 and finite (default 2 / xi); ``stack``: non-empty.
Building the NamedTuples by hand skips these checks.

Step sizes are pytrees callable as ``step_size(count, k) -> alpha``: ``count`` >= 1 is
the number of visits of the updated (s, a) since the last target update (this one
included) and ``k`` >= 0 the number of inner SGD steps already taken against the
current target. ``PolynomialStep`` reads ``count`` (the per-pair "local clock");
``SGDStep`` reads ``k`` (the inner loop's global clock, as SGD on the squared Bellman
error does).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array, ArrayLike

__all__ = ["GeometricPeriod", "geometric", "constant", "theory", "growth", "stack",
    "PolynomialStep", "inverse_count_step", "constant_step", "SGDStep", "sgd_step"]

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


def growth(gamma: float, power: float, base: float = 1.0,
           max_period: float = 1e9) -> GeometricPeriod:
    """K_n = floor(base * gamma^(-power * n)): the growth-exponent family.

    ``power = 2/3`` is ``theory``; the study sweeps power in {1/3, 2/3, 1, 2}.

    Args:
      gamma: discount in (0, 1).
      power: growth exponent p > 0.
      base: K_0 >= 1.
      max_period: cap on K_n.
    """
    validation.check_in_range("gamma", gamma, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    validation.check_in_range("power", power, 0.0, low_inclusive=False)
    validation.check_finite("power", power)
    return geometric(base, float(gamma) ** (-float(power)), max_period)


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

    def __call__(self, count: ArrayLike, k: ArrayLike | None = None) -> Array:
        del k  # local clock only
        c = jnp.maximum(jnp.asarray(count, jnp.float32), 1.0)
        return jnp.minimum(1.0, self.scale * jnp.power(c, -self.power))


def inverse_count_step() -> PolynomialStep:
    """alpha = 1 / c: the inner loop averages the sampled targets."""
    return PolynomialStep(jnp.float32(1.0), jnp.float32(1.0))


def constant_step(alpha: float) -> PolynomialStep:
    """alpha = constant in (0, 1]."""
    validation.check_in_range("alpha", alpha, 0.0, 1.0, low_inclusive=False)
    return PolynomialStep(jnp.float32(alpha), jnp.float32(0.0))


class SGDStep(NamedTuple):
    """Inner-loop SGD step on the squared Bellman error: alpha_k = min(1, scale / (xi (k +
    offset))), k = inner steps already taken against the current target (global clock).

    The inner objective L(Q) = 1/2 sum_{s,a} mu(s, a) (Q(s, a) - (T Q_target)(s, a))^2 is
    xi-strongly convex with xi = min mu(s, a) (the minimum sampling probability), and
    the standard step for xi-strongly convex SGD is alpha_k = 2 / (xi (k + k_0)) (e.g.
    Lacoste-Julien, Schmidt & Bach 2012; Gower et al. 2019). The offset k_0 = 2 / xi
    makes alpha_0 = 1; the cap at 1 keeps each update a convex combination of Q(s, a)
    and the sampled target.
    """

    xi: Array
    scale: Array
    offset: Array

    def __call__(self, count: ArrayLike, k: ArrayLike | None = None) -> Array:
        del count  # global clock only
        k = jnp.asarray(0 if k is None else k, jnp.float32)
        return jnp.minimum(1.0, self.scale / (self.xi * (k + self.offset)))


def sgd_step(xi: float, scale: float = 2.0, offset: float | None = None) -> SGDStep:
    """alpha_k = min(1, scale / (xi (k + offset))), default offset 2 / xi (alpha_0 = 1).

    Args:
      xi: minimum state-action sampling probability in (0, 1]
        (``mdp.min_sampling_probability``).
      scale: numerator of the step (2: the strongly-convex SGD step).
      offset: k_0 > 0 (default 2 / xi).
    """
    validation.check_in_range("xi", xi, 0.0, 1.0, low_inclusive=False)
    validation.check_finite("xi", xi)
    validation.check_in_range("scale", scale, 0.0, low_inclusive=False)
    validation.check_finite("scale", scale)
    offset = 2.0 / float(xi) if offset is None else offset
    validation.check_in_range("offset", offset, 0.0, low_inclusive=False)
    validation.check_finite("offset", offset)
    f = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    return SGDStep(f(xi), f(scale), f(offset))
