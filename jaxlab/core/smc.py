"""Sequential Monte Carlo utilities: resampling schemes and effective sample size.

Resampling functions follow the blackjax convention ``(key, weights, num_samples) -> idx``
with ``weights`` normalised, non-negative, shape [N]; the returned ancestor indices
have shape [num_samples] and dtype int32. All are jittable (``num_samples`` static).

Checks (eager, at the Python boundary, before the jitted body; nothing is added to compiled
code): ``num_samples`` a positive int; ``weights`` 1-D, non-empty, floating or integer; and,
when concrete, finite, non-negative with a positive sum (they need not be normalised).
``log_weights`` of ``normalize_log_weights`` / ``ess``: 1-D, non-empty and, when concrete,
free of NaN and +inf with at least one finite entry (-inf marks a zero weight). Traced
weights (inside a caller's ``jit`` / ``vmap`` / ``scan``) cannot be inspected: callers that
build weights in compiled loops flag non-finite ones themselves (``jaxlab.dllm.path_smc`` returns
``path_smc.Info.nonfinite_weights`` and raises on it at its Python entry point).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array, ArrayLike, PRNGKey


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _check_weights(weights, num_samples) -> Array:
    """Validates resampling inputs (see the module docstring); returns ``weights`` as an array."""
    validation.check_positive_int("num_samples", num_samples)
    weights = jnp.asarray(weights)
    validation.check_ndim("weights", weights, 1)
    if weights.shape[0] == 0:
        raise ValueError("`weights` must hold at least one particle, got shape (0,).")
    if not (jnp.issubdtype(weights.dtype, jnp.floating)
            or jnp.issubdtype(weights.dtype, jnp.integer)):
        raise TypeError(f"`weights` must be a real (float or int) array, got {weights.dtype}.")
    if _is_concrete(weights):
        validation.check_finite("weights", weights)
        w = np.asarray(weights)
        if np.any(w < 0):
            raise ValueError(f"`weights` must be non-negative, got {int((w < 0).sum())} "
                             f"negative entries (min {w.min():g}).")
        if not w.sum() > 0:
            raise ValueError("`weights` must have a positive sum (at least one particle with "
                             "non-zero weight), got all zeros.")
    return weights


def _check_log_weights(log_weights) -> Array:
    """Validates log weights (see the module docstring); returns them as an array."""
    log_weights = jnp.asarray(log_weights)
    validation.check_ndim("log_weights", log_weights, 1)
    if log_weights.shape[0] == 0:
        raise ValueError("`log_weights` must hold at least one particle, got shape (0,).")
    if _is_concrete(log_weights):
        lw = np.asarray(log_weights)
        n_nan, n_pinf = int(np.isnan(lw).sum()), int(np.isposinf(lw).sum())
        if n_nan or n_pinf:
            raise ValueError(f"`log_weights` must not contain NaN or +inf, got {n_nan} NaN and "
                             f"{n_pinf} +inf entries (shape {lw.shape}).")
        if np.all(np.isneginf(lw)):
            raise ValueError("`log_weights` are all -inf (every weight is zero); at least one "
                             "must be finite.")
    return log_weights


def _sorted_uniforms_to_idx(weights: Array, u: Array) -> Array:
    """Inverse-CDF lookup of uniforms ``u`` in [0, 1) (sorted in, sorted out)."""
    cdf = jnp.cumsum(weights)
    cdf = cdf / cdf[-1]
    idx = jnp.searchsorted(cdf, u, side="right")
    return jnp.clip(idx, 0, weights.shape[0] - 1).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames="num_samples")
def _systematic(key: PRNGKey, weights: Array, num_samples: int) -> Array:
    u = (jnp.arange(num_samples) + jax.random.uniform(key)) / num_samples
    return _sorted_uniforms_to_idx(weights, u)


def systematic(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Systematic resampling: one uniform, u_i = (i + U) / M."""
    return _systematic(key, _check_weights(weights, num_samples), num_samples)


@functools.partial(jax.jit, static_argnames="num_samples")
def _stratified(key: PRNGKey, weights: Array, num_samples: int) -> Array:
    u = (jnp.arange(num_samples) + jax.random.uniform(key, (num_samples,))) / num_samples
    return _sorted_uniforms_to_idx(weights, u)


def stratified(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Stratified resampling: u_i = (i + U_i) / M with independent U_i."""
    return _stratified(key, _check_weights(weights, num_samples), num_samples)


@functools.partial(jax.jit, static_argnames="num_samples")
def _multinomial(key: PRNGKey, weights: Array, num_samples: int) -> Array:
    u = jnp.sort(jax.random.uniform(key, (num_samples,)))
    return _sorted_uniforms_to_idx(weights, u)


def multinomial(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Multinomial resampling: i.i.d. draws from Categorical(weights)."""
    return _multinomial(key, _check_weights(weights, num_samples), num_samples)


@functools.partial(jax.jit, static_argnames="num_samples")
def _residual(key: PRNGKey, weights: Array, num_samples: int) -> Array:
    weights = weights / jnp.sum(weights)
    scaled = num_samples * weights
    counts = jnp.floor(scaled).astype(jnp.int32)
    n_det = jnp.sum(counts)
    slots = jnp.arange(num_samples)
    det_idx = jnp.searchsorted(jnp.cumsum(counts), slots, side="right")
    res = scaled - counts
    # All weight mass may be deterministic (n_det == M); guard the 0/0.
    res = jnp.where(jnp.sum(res) > 0, res, jnp.ones_like(res))
    # Unsorted i.i.d. draws: slots past n_det must not take the largest order statistics.
    rand_idx = _sorted_uniforms_to_idx(res, jax.random.uniform(key, (num_samples,)))
    idx = jnp.where(slots < n_det, det_idx, rand_idx)
    return jnp.clip(idx, 0, weights.shape[0] - 1).astype(jnp.int32)


def residual(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Residual resampling: floor(M w_i) deterministic copies, the rest multinomial.

    The deterministic part is written with static shapes: copy j (of M) goes to the
    particle whose cumulative floor count first exceeds j; the remaining slots are
    filled by multinomial draws from the residual weights M w_i - floor(M w_i).
    """
    return _residual(key, _check_weights(weights, num_samples), num_samples)


RESAMPLERS = {
    "systematic": systematic,
    "stratified": stratified,
    "multinomial": multinomial,
    "residual": residual,
}


def get_resampler(name: str):
    """Returns the resampling function called ``name`` (one of RESAMPLERS)."""
    if name not in RESAMPLERS:
        raise ValueError(f"`name` must be one of {sorted(RESAMPLERS)}, got {name!r}.")
    return RESAMPLERS[name]


def normalize_log_weights(log_weights: ArrayLike) -> tuple[Array, Array]:
    """Normalised weights and log of the mean unnormalised weight.

    Args:
      log_weights: [N] unnormalised log weights.

    Returns:
      (weights [N] summing to one, log(mean(exp(log_weights))) scalar), computed stably.
    """
    log_weights = _check_log_weights(log_weights)
    # softmax subtracts the max (exactly representable) rather than the rounded lse.
    lse = jax.nn.logsumexp(log_weights)
    return jax.nn.softmax(log_weights), lse - jnp.log(log_weights.shape[0])


def ess(log_weights: ArrayLike) -> Array:
    """Effective sample size 1 / sum(w_i^2) of normalised weights, from log weights [N]."""
    w, _ = normalize_log_weights(log_weights)
    return 1.0 / jnp.sum(w**2)
