"""Sequential Monte Carlo utilities: resampling schemes and effective sample size.

Resampling functions follow the blackjax convention ``(key, weights, num_samples) -> idx``
with ``weights`` normalised, non-negative, shape [N]; the returned ancestor indices
have shape [num_samples] and dtype int32. All are jittable (``num_samples`` static).
"""

import functools

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array, ArrayLike, PRNGKey


def _check_weights(weights) -> None:
    validation.check_ndim("weights", weights, 1)


def _sorted_uniforms_to_idx(weights: Array, u: Array) -> Array:
    """Inverse-CDF lookup of uniforms ``u`` in [0, 1) (sorted in, sorted out)."""
    cdf = jnp.cumsum(weights)
    cdf = cdf / cdf[-1]
    idx = jnp.searchsorted(cdf, u, side="right")
    return jnp.clip(idx, 0, weights.shape[0] - 1).astype(jnp.int32)


@functools.partial(jax.jit, static_argnames="num_samples")
def systematic(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Systematic resampling: one uniform, u_i = (i + U) / M."""
    weights = jnp.asarray(weights)
    _check_weights(weights)
    u = (jnp.arange(num_samples) + jax.random.uniform(key)) / num_samples
    return _sorted_uniforms_to_idx(weights, u)


@functools.partial(jax.jit, static_argnames="num_samples")
def stratified(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Stratified resampling: u_i = (i + U_i) / M with independent U_i."""
    weights = jnp.asarray(weights)
    _check_weights(weights)
    u = (jnp.arange(num_samples) + jax.random.uniform(key, (num_samples,))) / num_samples
    return _sorted_uniforms_to_idx(weights, u)


@functools.partial(jax.jit, static_argnames="num_samples")
def multinomial(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Multinomial resampling: i.i.d. draws from Categorical(weights)."""
    weights = jnp.asarray(weights)
    _check_weights(weights)
    u = jnp.sort(jax.random.uniform(key, (num_samples,)))
    return _sorted_uniforms_to_idx(weights, u)


@functools.partial(jax.jit, static_argnames="num_samples")
def residual(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Residual resampling: floor(M w_i) deterministic copies, the rest multinomial.

    The deterministic part is written with static shapes: copy j (of M) goes to the
    particle whose cumulative floor count first exceeds j; the remaining slots are
    filled by multinomial draws from the residual weights M w_i - floor(M w_i).
    """
    weights = jnp.asarray(weights)
    _check_weights(weights)
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
    log_weights = jnp.asarray(log_weights)
    validation.check_ndim("log_weights", log_weights, 1)
    # softmax subtracts the max (exactly representable) rather than the rounded lse.
    lse = jax.nn.logsumexp(log_weights)
    return jax.nn.softmax(log_weights), lse - jnp.log(log_weights.shape[0])


def ess(log_weights: ArrayLike) -> Array:
    """Effective sample size 1 / sum(w_i^2) of normalised weights, from log weights [N]."""
    w, _ = normalize_log_weights(log_weights)
    return 1.0 / jnp.sum(w**2)
