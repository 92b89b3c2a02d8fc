"""Loss sequences for bandit convex optimization, with exact comparators.

Isotropic quadratics f_t(x) = a/2 ||x - c_t||^2 (convex and a-strongly convex) and linear
losses f_t(x) = <theta_t, x>. For the isotropic quadratic, sum_{s<=t} f_s is again an
isotropic quadratic centred at the running mean of c_s, so the best fixed point in
hindsight over any convex X is Proj_X(mean c), exactly; this gives the regret of every
prefix T in one pass. All generators are jittable (static T, d).

Checks (eager; traced parameters such as a vmapped ``drift`` are skipped): ``num_rounds``,
``dim``, ``period`` >= 1; ``curvature`` > 0; ``radius``, ``offset``, ``sigma``, ``scale``
>= 0 and finite; ``drift`` finite. ``check_seq`` (used by ``run``) rejects an unknown loss
family (``seq``), non-finite ``seq.centers`` / ``seq.thetas`` and ``seq.curvature`` <= 0;
the linear comparators need a ``Box`` (``domain``). New families: ``family``
known, ``param`` > 0 and finite (``stochastic_family``); ``seq.<param>`` > 0 (``check_seq``);
``num_iters`` >= 1 (``fixed_comparator_loss``); the closed-form comparators and V_T reject
the smooth families (``seq``).

Smooth families without closed-form comparators (``SMOOTH_FAMILIES``): ``LogSumExpSeq``
(log-sum-exp of 2d linear functions), ``HuberSeq`` (isotropic Huber), and
``SoftplusQuadraticSeq`` (softplus + quadratic: strongly convex, not quadratic);
``stochastic_family`` draws them, ``fixed_comparator_loss`` gives their best fixed point
numerically (projected gradient descent).

Your own family: ``loss_sequence(params, loss, comparator=..., minimiser=...,
smoothness=...)`` gives a ``FunctionSeq`` that every function here and ``run`` / ``regret``
/ ``dynamic_regret`` / ``variation.played_gradients`` accept; each comparator is optional
(the function that needs a missing one raises, naming it).
"""

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey

__all__ = ["QuadraticSeq", "LinearSeq", "LogSumExpSeq", "HuberSeq", "SoftplusQuadraticSeq",
    "FunctionSeq", "loss_sequence", "num_rounds", "SMOOTH_FAMILIES", "LossSeq", "round_params",
    "stochastic_family", "fixed_comparator_loss", "drifting_quadratic", "stochastic_quadratic",
    "switching_quadratic", "drifting_linear", "prefix_comparator_losses", "per_round_minima",
    "gradient_variation", "path_length"]


class QuadraticSeq(NamedTuple):
    """f_t(x) = curvature / 2 ||x - centers[t]||^2. centers: [T, d]; curvature: scalar."""

    centers: Array
    curvature: Array


class LinearSeq(NamedTuple):
    """f_t(x) = <thetas[t], x>. thetas: [T, d]."""

    thetas: Array


class LogSumExpSeq(NamedTuple):
    """f_t(x) = (1/s) log sum_{i, +-} exp(+-s (x_i - centers[t, i])) - log(2d)/s: the
    log-sum-exp of the 2d linear functions +-s (x_i - c_i) (convex, smooth, ||grad|| <= 1,
    minimised at c_t). centers: [T, d]; sharpness s: scalar."""

    centers: Array
    sharpness: Array


class HuberSeq(NamedTuple):
    """Isotropic Huber f_t(x) = h_w(||x - centers[t]||), h_w(r) = r^2/2 (r <= w) else
    w (r - w/2) (convex, not strongly convex, ||grad|| <= w). centers: [T, d]; width w."""

    centers: Array
    width: Array


class SoftplusQuadraticSeq(NamedTuple):
    """f_t(x) = softplus(<thetas[t], x>) + curvature/2 ||x||^2: curvature-strongly convex
    and not quadratic. thetas: [T, d]; curvature: scalar."""

    thetas: Array
    curvature: Array


@functools.partial(jax.tree_util.register_dataclass, data_fields=["params"],
                   meta_fields=["loss", "comparator", "minimiser", "smoothness"])
@dataclasses.dataclass(frozen=True)
class FunctionSeq:
    """Your own loss family: f_t(x) = loss(params[t], x), with optional exact comparators.

    A pytree (``params`` are its leaves, the functions static), so ``run``, ``regret``,
    ``dynamic_regret``, ``variation.played_gradients`` and ``fixed_comparator_loss`` take
    it like a shipped family, under ``jit`` and ``vmap`` too. Build it with
    ``loss_sequence`` (which checks it).

    Attributes:
      params: a pytree whose every leaf has the leading axis T (round t's parameters are
        ``jax.tree.map(lambda v: v[t], params)``).
      loss: ``loss(params_t, x [d]) -> []``, convex in x and differentiable
        (``played_gradients`` differentiates it).
      comparator: ``comparator(params, domain) -> [T]``, min over X of sum_{s<=t} f_s for
        every prefix t (what ``regret`` subtracts); None: ``regret`` raises.
      minimiser: ``minimiser(params_t, domain) -> [d]``, argmin over X of f_t (vmapped
        over rounds by ``dynamic_regret``); None: ``dynamic_regret`` raises.
      smoothness: L, the gradient's Lipschitz constant of one f_t (the step 1 / (T L) of
        ``fixed_comparator_loss``); None: it raises.
    """

    params: Any
    loss: Callable = None
    comparator: Callable | None = None
    minimiser: Callable | None = None
    smoothness: float | None = None


def loss_sequence(params, loss: Callable, *, comparator: Callable | None = None,
                  minimiser: Callable | None = None,
                  smoothness: float | None = None) -> FunctionSeq:
    """A user-defined loss sequence (``FunctionSeq``) for ``run`` / ``regret``.

    Args:
      params: pytree of per-round parameters, every leaf [T, ...] with the same T >= 1.
      loss: ``loss(params_t, x) -> []`` convex in x [d].
      comparator: optional ``comparator(params, domain) -> [T]`` prefix comparator losses
        (static regret); e.g. ``lambda p, X: jnp.cumsum(...)`` in closed form.
      minimiser: optional ``minimiser(params_t, domain) -> [d]`` per-round minimiser
        (dynamic regret).
      smoothness: optional L > 0 (numerical comparator ``fixed_comparator_loss``).

    Returns:
      ``FunctionSeq``.

    Raises:
      ValueError: ``loss`` / ``comparator`` / ``minimiser`` not callable, ``params``
        without leaves or with leaves of different leading sizes, ``smoothness`` <= 0.

    Example:
      Absolute-value losses f_t(x) = sum_i |x_i - c_t,i| on the box [-1, 1]^2, whose
      per-round minimiser is c_t (inside the box):

      >>> import jax, jax.numpy as jnp
      >>> from jaxlab import bco
      >>> centers = 0.5 * jnp.sin(jnp.arange(200.0)[:, None] / 30 + jnp.arange(2.0))
      >>> seq = bco.losses.loss_sequence(
      ...     centers, lambda c, x: jnp.sum(jnp.abs(x - c)),
      ...     minimiser=lambda c, domain: domain.project(c))
      >>> box = bco.box(-jnp.ones(2), jnp.ones(2))
      >>> learner = bco.gradient_variation(box, delta=0.05)
      >>> info = bco.run(jax.random.key(0), learner, seq, jnp.zeros(2))
      >>> info.loss.shape, bco.dynamic_regret(info, seq, box).shape
      ((200,), (200,))
    """
    for name, fn in (("loss", loss), ("comparator", comparator), ("minimiser", minimiser)):
        if fn is not None and not callable(fn):
            raise ValueError(f"`{name}` must be callable, got {fn!r}.")
    if loss is None:
        raise ValueError("`loss` must be callable, got None.")
    if smoothness is not None:
        validation.check_in_range("smoothness", smoothness, 0.0, np.inf, low_inclusive=False,
                                  high_inclusive=False)
        smoothness = float(smoothness)
    seq = FunctionSeq(params, loss, comparator, minimiser, smoothness)
    check_seq(seq)
    return seq


def num_rounds(seq) -> int:
    """T, the rounds of any loss sequence (shipped family or ``FunctionSeq``)."""
    params, _ = round_params(seq)
    return jax.tree.leaves(params)[0].shape[0]


SMOOTH_FAMILIES = (LogSumExpSeq, HuberSeq, SoftplusQuadraticSeq)
LossSeq = (QuadraticSeq | LinearSeq | LogSumExpSeq | HuberSeq | SoftplusQuadraticSeq
           | FunctionSeq)


def _lse(c, x, s):
    z = s * (x - c)
    return (jax.nn.logsumexp(jnp.concatenate([z, -z])) - jnp.log(2.0 * x.shape[-1])) / s


def _huber(c, x, w):
    # sqrt(r^2 + eps) keeps the gradient finite at r = 0 (it is 0 there anyway).
    r = jnp.sqrt(jnp.sum((x - c) ** 2) + 1e-30)
    return jnp.where(r <= w, 0.5 * r**2, w * (r - 0.5 * w))


def _softplus_quadratic(th, x, lam):
    return jax.nn.softplus(jnp.dot(th, x)) + 0.5 * lam * jnp.sum(x**2)


def check_seq(seq) -> None:
    """Raises ValueError for an unknown loss family or bad concrete parameters of ``seq``."""
    if isinstance(seq, FunctionSeq):
        if not callable(seq.loss):
            raise ValueError(f"`seq.loss` must be callable, got {seq.loss!r}.")
        leaves = jax.tree.leaves(seq.params)
        if not leaves:
            raise ValueError("`seq.params` must hold at least one array (leading axis T).")
        sizes = {np.shape(v)[0] if np.ndim(v) else None for v in leaves}
        if None in sizes or len(sizes) != 1 or 0 in sizes:
            raise ValueError("every leaf of `seq.params` must have the same leading size T "
                             f">= 1, got shapes {[np.shape(v) for v in leaves]}.")
        return
    if not isinstance(seq, QuadraticSeq | LinearSeq | LogSumExpSeq | HuberSeq
                      | SoftplusQuadraticSeq):
        raise ValueError(f"`seq` must be a QuadraticSeq, LinearSeq, LogSumExpSeq, HuberSeq, "
                         f"SoftplusQuadraticSeq or your own FunctionSeq (losses.loss_sequence),"
                         f" got {type(seq).__name__}.")
    if isinstance(seq, SMOOTH_FAMILIES):
        rows, param = seq[0], seq[1]
        validation.check_ndim(f"seq.{seq._fields[0]}", rows, 2)
        validation.check_finite(f"seq.{seq._fields[0]}", rows)
        if not isinstance(param, jax.core.Tracer):
            validation.check_in_range(f"seq.{seq._fields[1]}", param, 0.0, np.inf,
                                      low_inclusive=False, high_inclusive=False)
        return
    if isinstance(seq, QuadraticSeq):
        validation.check_ndim("seq.centers", seq.centers, 2)
        validation.check_finite("seq.centers", seq.centers)
        validation.check_in_range("seq.curvature", seq.curvature, 0.0, np.inf,
                                  low_inclusive=False, high_inclusive=False)
    else:
        validation.check_ndim("seq.thetas", seq.thetas, 2)
        validation.check_finite("seq.thetas", seq.thetas)


def _check_linear_domain(seq, domain):
    if isinstance(seq, LinearSeq) and not hasattr(domain, "low"):
        raise ValueError(f"`domain` must be a Box for linear losses, got "
                         f"{type(domain).__name__}.")


def round_params(seq):
    """The per-round leaves (scanned over), and a function f(params_t, x)."""
    check_seq(seq)
    if isinstance(seq, FunctionSeq):
        return seq.params, seq.loss
    if isinstance(seq, QuadraticSeq):
        return seq.centers, lambda c, x: 0.5 * seq.curvature * jnp.sum((x - c) ** 2)
    if isinstance(seq, LogSumExpSeq):
        return seq.centers, lambda c, x: _lse(c, x, seq.sharpness)
    if isinstance(seq, HuberSeq):
        return seq.centers, lambda c, x: _huber(c, x, seq.width)
    if isinstance(seq, SoftplusQuadraticSeq):
        return seq.thetas, lambda th, x: _softplus_quadratic(th, x, seq.curvature)
    return seq.thetas, lambda th, x: jnp.dot(th, x)


def stochastic_family(key: PRNGKey, family: str, num_rounds: int, dim: int, sigma: float,
                      radius: float = 0.5, param: float = 1.0) -> LossSeq:
    """A fixed point c (||c|| = radius) plus noise sigma xi_t / sqrt(d), xi_t ~ N(0, I), as
    the centres ("lse", "huber") or the thetas ("softplus_quadratic") of a new family.

    Args:
      key: PRNG key.
      family: "lse" (sharpness = param), "huber" (width = param) or "softplus_quadratic"
        (curvature = param).
      num_rounds, dim: T and d.
      sigma: noise level (>= 0): the gradient-variance regime; sigma = 0 is the
        small-loss regime (a fixed loss).
      radius: ||c||.
      param: the family's scalar (> 0).

    Returns:
      LogSumExpSeq, HuberSeq or SoftplusQuadraticSeq with T rounds.
    """
    makers = {"lse": LogSumExpSeq, "huber": HuberSeq, "softplus_quadratic": SoftplusQuadraticSeq}
    if family not in makers:
        raise ValueError(f"`family` must be one of {sorted(makers)}, got {family!r}.")
    _check(num_rounds, dim, radius=radius, sigma=sigma)
    validation.check_in_range("param", param, 0.0, np.inf, low_inclusive=False,
                              high_inclusive=False)
    k_c, k_xi = jax.random.split(key)
    c = radius * _unit(k_c, dim)
    xi = jax.random.normal(k_xi, (num_rounds, dim)) / jnp.sqrt(dim)
    return makers[family](c + sigma * xi, jnp.float32(param))


def fixed_comparator_loss(seq, domain, num_iters: int = 500) -> Array:
    """min_{x in X} sum_t f_t(x) for the whole horizon, by projected gradient descent.

    Used for families without a closed-form comparator (``SMOOTH_FAMILIES``); the step is
    1 / (T L) with L the smoothness constant of the family (quadratic: curvature, LSE:
    sharpness, Huber: 1, softplus + quadratic: ||theta||^2 / 4 + curvature), so the
    iterates decrease the objective monotonically.

    Args:
      seq: any loss sequence with T rounds.
      domain: a Ball or Box.
      num_iters: projected-gradient iterations (>= 1), started at the domain's centre.

    Returns:
      scalar: the comparator's cumulative loss (an upper bound on the exact minimum that
      converges to it at rate O(1 / num_iters)).
    """
    validation.check_positive_int("num_iters", num_iters)
    _check_linear_domain(seq, domain)
    params, f = round_params(seq)
    total = lambda x: jnp.sum(jax.vmap(f, (0, None))(params, x))  # noqa: E731
    if isinstance(seq, FunctionSeq):
        if seq.smoothness is None:
            raise ValueError("`seq.smoothness` must be given (loss_sequence(..., smoothness=L))"
                             " for the numerical comparator.")
        smooth = jnp.float32(seq.smoothness)
    elif isinstance(seq, QuadraticSeq):
        smooth = seq.curvature
    elif isinstance(seq, LogSumExpSeq):
        smooth = seq.sharpness
    elif isinstance(seq, HuberSeq):
        smooth = jnp.float32(1.0)
    elif isinstance(seq, SoftplusQuadraticSeq):
        smooth = 0.25 * jnp.max(jnp.sum(seq.thetas**2, -1)) + seq.curvature
    else:
        raise ValueError("`seq` must be a smooth family (linear losses have the exact "
                         "`prefix_comparator_losses`).")
    step = 1.0 / (num_rounds(seq) * smooth)
    x = jax.lax.fori_loop(0, num_iters,
                          lambda _, x: domain.project(x - step * jax.grad(total)(x)),
                          domain.center)
    return total(x)


def _circle(key, num_rounds, dim, radius, omega):
    """Points radius (cos(omega t) e1 + sin(omega t) e2) in a random 2-plane.

    (e1, e2) is a uniformly random orthonormal pair by Gram-Schmidt on two Gaussian
    vectors (no QR: XLA:CPU was seen to hang on jitted, vmapped ``jnp.linalg.qr`` at
    d >= 32); e2 = 0 when dim = 1.
    """
    k1, k2 = jax.random.split(key)
    e1 = _unit(k1, dim)
    if dim > 1:
        w = jax.random.normal(k2, (dim,))
        w = w - jnp.dot(w, e1) * e1
        e2 = w / jnp.maximum(jnp.linalg.norm(w), 1e-30)
    else:
        e2 = jnp.zeros(dim)
    t = jnp.arange(num_rounds, dtype=jnp.float32)[:, None]
    return radius * (jnp.cos(omega * t) * e1 + jnp.sin(omega * t) * e2)


def drifting_quadratic(key: PRNGKey, num_rounds: int, dim: int, drift: float,
                       radius: float = 0.5, curvature: float = 1.0,
                       offset: float = 0.0) -> QuadraticSeq:
    """Centres moving on a circle of ``radius`` at angular speed ``drift`` per round,
    around a random point at distance ``offset`` from the origin.

    V_T = curvature^2 * sum ||c_t - c_{t-1}||^2 = curvature^2 (T-1) (2 radius sin(drift/2))^2.
    """
    _check(num_rounds, dim, curvature=curvature, radius=radius, offset=offset)
    _finite("drift", drift)
    k_c, k_o = jax.random.split(key)
    centers = offset * _unit(k_o, dim) + _circle(k_c, num_rounds, dim, radius, drift)
    return QuadraticSeq(centers, jnp.float32(curvature))


def stochastic_quadratic(key: PRNGKey, num_rounds: int, dim: int, sigma: float,
                         radius: float = 0.5, curvature: float = 1.0) -> QuadraticSeq:
    """c_t = c + sigma xi_t / sqrt(d), xi_t ~ N(0, I): gradient variance curvature^2 sigma^2."""
    _check(num_rounds, dim, curvature=curvature, radius=radius, sigma=sigma)
    k_c, k_xi = jax.random.split(key)
    c = radius * _unit(k_c, dim)
    xi = jax.random.normal(k_xi, (num_rounds, dim)) / jnp.sqrt(dim)
    return QuadraticSeq(c + sigma * xi, jnp.float32(curvature))


def switching_quadratic(key: PRNGKey, num_rounds: int, dim: int, period: int,
                        radius: float = 0.5, curvature: float = 1.0,
                        offset: float = 0.0) -> QuadraticSeq:
    """Adversarial switching: the centre jumps between o + c and o - c every ``period``
    rounds (||c|| = radius, ||o|| = offset, random directions).

    V_T = curvature^2 (2 radius)^2 * (number of switches). With period 1 and a growing
    radius this is the sequence of controlled gradient variation.
    """
    _check(num_rounds, dim, curvature=curvature, radius=radius, offset=offset)
    if not isinstance(period, jax.core.Tracer):  # traced periods (vmapped studies) pass
        validation.check_positive_int("period", period)
    k_c, k_o = jax.random.split(key)
    c = radius * _unit(k_c, dim)
    sign = jnp.where((jnp.arange(num_rounds) // period) % 2 == 0, 1.0, -1.0)
    return QuadraticSeq(offset * _unit(k_o, dim) + sign[:, None] * c, jnp.float32(curvature))


def drifting_linear(key: PRNGKey, num_rounds: int, dim: int, drift: float,
                    scale: float = 1.0) -> LinearSeq:
    """theta_t rotating at angular speed ``drift`` with norm ``scale`` (plus a fixed offset)."""
    _check(num_rounds, dim, scale=scale)
    _finite("drift", drift)
    k_c, k_o = jax.random.split(key)
    offset = 0.5 * scale * _unit(k_o, dim)
    return LinearSeq(offset + _circle(k_c, num_rounds, dim, 0.5 * scale, drift))


def _unit(key, dim):
    v = jax.random.normal(key, (dim,))
    return v / jnp.linalg.norm(v)


def _finite(name, value):
    validation.check_in_range(name, value, -np.inf, np.inf, low_inclusive=False,
                              high_inclusive=False)


def _check(num_rounds, dim, curvature=None, **non_negative):
    validation.check_positive_int("num_rounds", num_rounds)
    validation.check_positive_int("dim", dim)
    if curvature is not None:
        validation.check_in_range("curvature", curvature, 0.0, np.inf, low_inclusive=False,
                                  high_inclusive=False)
    for name, value in non_negative.items():
        validation.check_in_range(name, value, 0.0, np.inf, high_inclusive=False)


def _closed_form_only(seq, what):
    if isinstance(seq, FunctionSeq):
        raise ValueError(f"`seq` (FunctionSeq) has no closed-form {what}.")
    if isinstance(seq, SMOOTH_FAMILIES):
        raise ValueError(f"`seq` ({type(seq).__name__}) has no closed-form {what}; use "
                         "`fixed_comparator_loss` (final horizon, numerical).")


def prefix_comparator_losses(seq, domain) -> Array:
    """min_{x in X} sum_{s<=T} f_s(x) for every prefix T (quadratic and linear families).

    Returns:
      [T] the cumulative loss of the best fixed point in hindsight for each horizon.
    """
    if isinstance(seq, FunctionSeq):
        if seq.comparator is None:
            raise ValueError("`seq.comparator` must be given (loss_sequence(..., comparator=fn)"
                             ") for the prefix regret; without one, `fixed_comparator_loss` "
                             "gives the final horizon's comparator numerically.")
        return seq.comparator(seq.params, domain)
    _closed_form_only(seq, "prefix comparator")
    _check_linear_domain(seq, domain)
    if isinstance(seq, QuadraticSeq):
        t = jnp.arange(1, seq.centers.shape[0] + 1, dtype=jnp.float32)[:, None]
        mean = jnp.cumsum(seq.centers, 0) / t
        best = jax.vmap(domain.project)(mean)
        # sum_s ||x - c_s||^2 = T ||x - mean||^2 + sum ||c_s||^2 - T ||mean||^2.
        sq = jnp.cumsum(jnp.sum(seq.centers**2, -1))
        total = t[:, 0] * jnp.sum((best - mean) ** 2, -1) + sq - t[:, 0] * jnp.sum(mean**2, -1)
        return 0.5 * seq.curvature * total
    # Linear over a box: coordinate-wise the endpoint opposite the cumulative gradient.
    cum = jnp.cumsum(seq.thetas, 0)
    best = jnp.where(cum > 0, domain.low, domain.high)
    return jnp.sum(cum * best, -1)


def per_round_minima(seq, domain) -> tuple[Array, Array]:
    """(u_t = argmin_X f_t [T, d], f_t(u_t) [T]): the moving comparator of dynamic regret."""
    if isinstance(seq, FunctionSeq):
        if seq.minimiser is None:
            raise ValueError("`seq.minimiser` must be given (loss_sequence(..., minimiser=fn)) "
                             "for the dynamic regret.")
        u = jax.vmap(lambda p: seq.minimiser(p, domain))(seq.params)
        return u, jax.vmap(seq.loss)(seq.params, u)
    _closed_form_only(seq, "per-round minimiser")
    _check_linear_domain(seq, domain)
    if isinstance(seq, QuadraticSeq):
        u = jax.vmap(domain.project)(seq.centers)
        return u, 0.5 * seq.curvature * jnp.sum((u - seq.centers) ** 2, -1)
    u = jnp.where(seq.thetas > 0, domain.low, domain.high)
    return u, jnp.sum(seq.thetas * u, -1)


def gradient_variation(seq) -> Array:
    """V_T = sum_t sup_x ||grad f_t(x) - grad f_{t-1}(x)||^2 (exact for the quadratic and
    linear families; the smooth families raise)."""
    _closed_form_only(seq, "V_T")
    if isinstance(seq, QuadraticSeq):
        d = jnp.diff(seq.centers, axis=0)
        return seq.curvature**2 * jnp.sum(d**2)
    return jnp.sum(jnp.diff(seq.thetas, axis=0) ** 2)


def path_length(points: Array) -> Array:
    """P_T = sum_t ||u_t - u_{t-1}|| for comparators [T, d]."""
    validation.check_ndim("points", points, 2)
    validation.check_finite("points", points)
    return jnp.sum(jnp.linalg.norm(jnp.diff(points, axis=0), axis=-1))
