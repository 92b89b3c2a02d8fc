"""Sequential Monte Carlo utilities: resampling schemes and effective sample size.

Resampling functions follow the blackjax convention ``(key, weights, num_samples) -> idx``
with ``weights`` normalised, non-negative, shape [N]; the returned ancestor indices
have shape [num_samples] and dtype int32. All are jittable (``num_samples`` static).

Weights are used relative to their largest entry, so any scale works: float32 weights near
3e38, integer weights up to 2^31 - 1 (converted to floats, exact to the float's precision) and
subnormal weights (which XLA on CPU flushes to zero) resample as their NumPy float64
normalisation would. Concrete weights are normalised by their max on the host in float64,
then passed in their own floating dtype (float64 kept when ``jax_enable_x64`` is on; integer,
float16 and bfloat16 weights become float32); traced weights are divided by their max inside
the compiled body, in their floating dtype.

Checks (eager, at the Python boundary, before the jitted body): ``num_samples`` a positive
int; ``weights`` 1-D, non-empty, floating or integer; and, when concrete, finite,
non-negative with a positive sum (they need not be normalised).
``log_weights`` of ``normalize_log_weights`` / ``ess``: 1-D, non-empty and, when concrete,
free of NaN and +inf with at least one finite entry (-inf marks a zero weight). Traced
weights (inside a caller's ``jit`` / ``vmap`` / ``scan``) are checked in checked mode
(``jaxlab.core.checks(True)``: finite, non-negative, a positive largest entry after XLA's
flush of subnormals); otherwise callers that build weights in compiled loops flag
non-finite ones themselves (``jaxlab.dllm.path_smc`` returns
``path_smc.Info.nonfinite_weights`` and raises on it at its Python entry point).
"""


import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import checked, validation
from jaxlab.core.types import Array, ArrayLike, PRNGKey

__all__ = ["systematic", "stratified", "multinomial", "residual", "RESAMPLERS", "get_resampler",
    "normalize_log_weights", "ess"]

checked.declare(*(f"jaxlab.core.smc.{n}" for n in ("systematic", "stratified", "multinomial",
                                                     "residual", "normalize_log_weights", "ess")))


def _is_concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _float_dtype(dtype) -> np.dtype:
    """The floating dtype resampling computes in: the input's float32 / float64 (float64
    only when JAX keeps it), float32 for integers and half precision."""
    if dtype in (jnp.float64, jnp.float32):
        return jnp.dtype(jax.dtypes.canonicalize_dtype(dtype))
    return jnp.dtype(jnp.float32)


def _check_weights(weights, num_samples) -> Array:
    """Validates resampling inputs (see the module docstring); returns ``weights`` as an
    array (concrete weights divided by their max in float64 on the host)."""
    validation.check_positive_int("num_samples", num_samples)
    if _is_concrete(weights):
        w = np.asarray(weights)
    else:
        w = weights
    validation.check_ndim("weights", w, 1)
    if w.shape[0] == 0:
        raise ValueError("`weights` must hold at least one particle, got shape (0,).")
    if not (jnp.issubdtype(w.dtype, jnp.floating) or jnp.issubdtype(w.dtype, jnp.integer)) \
            or w.dtype == jnp.bool_:
        raise TypeError(f"`weights` must be a real (float or int) array, got {w.dtype}.")
    if not _is_concrete(weights):
        return weights
    validation.check_finite("weights", w)
    w64 = w.astype(np.float64)
    if np.any(w64 < 0):
        raise ValueError(f"`weights` must be non-negative, got {int((w64 < 0).sum())} "
                         f"negative entries (min {w64.min():g}).")
    top = w64.max()
    if not top > 0:
        raise ValueError("`weights` must have a positive sum (at least one particle with "
                         "non-zero weight), got all zeros.")
    return jnp.asarray(w64 / top, _float_dtype(w.dtype))


def _relative(weights: Array) -> Array:
    """Weights scaled so that their max lies in [0.5, 1), in their floating dtype (checked
    in checked mode)."""
    w = weights.astype(_float_dtype(weights.dtype))
    checked.check(jnp.all(jnp.isfinite(w)), "`weights` must be finite.")
    checked.check(jnp.all(w >= 0), "`weights` must be non-negative, got min {m}.", m=jnp.min(w))
    top = jnp.max(w)
    checked.check(top > 0, "`weights` must have a positive sum (at least one particle with "
                  "a non-zero weight; XLA flushes subnormal weights to zero), got max {m}.",
                  m=top)
    # Scaled by the power of two of the max (exact; the max lands in [0.5, 1)): XLA turns
    # w / max into w * (1 / max), and 1 / max is subnormal (flushed to zero) for a float32
    # max above ~8.5e37.
    _, exponent = jnp.frexp(jnp.where(top > 0, top, 1.0))
    return jnp.ldexp(w, -exponent)


def _traced_log_weights(log_weights) -> None:
    """Checked-mode checks of traced log weights (the eager checks' traced twin)."""
    checked.check(~jnp.any(jnp.isnan(log_weights) | (log_weights == jnp.inf)),
                  "`log_weights` must not contain NaN or +inf.")
    checked.check(jnp.any(log_weights > -jnp.inf),
                  "`log_weights` are all -inf (every weight is zero); at least one must be "
                  "finite.")


def _check_log_weights(log_weights, where: str = "jaxlab.core.smc.normalize_log_weights"
                       ) -> Array:
    """Validates log weights (see the module docstring); returns them as an array."""
    log_weights = jnp.asarray(log_weights)
    validation.check_real("log_weights", log_weights)
    validation.check_ndim("log_weights", log_weights, 1)
    checked.guard(where, _traced_log_weights, log_weights)
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
    """Inverse-CDF lookup of uniforms ``u`` in [0, 1) (sorted in, sorted out); ``weights``
    non-negative with max 1 (so the cumulative sum cannot overflow)."""
    cdf = jnp.cumsum(weights)
    cdf = cdf / cdf[-1]
    idx = jnp.searchsorted(cdf, u, side="right")
    return jnp.clip(idx, 0, weights.shape[0] - 1).astype(jnp.int32)


def _systematic(key: PRNGKey, weights: Array, *, num_samples: int) -> Array:
    u = (jnp.arange(num_samples) + jax.random.uniform(key)) / num_samples
    return _sorted_uniforms_to_idx(_relative(weights), u.astype(_float_dtype(weights.dtype)))


def _stratified(key: PRNGKey, weights: Array, *, num_samples: int) -> Array:
    u = (jnp.arange(num_samples) + jax.random.uniform(key, (num_samples,))) / num_samples
    return _sorted_uniforms_to_idx(_relative(weights), u.astype(_float_dtype(weights.dtype)))


def _multinomial(key: PRNGKey, weights: Array, *, num_samples: int) -> Array:
    u = jnp.sort(jax.random.uniform(key, (num_samples,)))
    return _sorted_uniforms_to_idx(_relative(weights), u.astype(_float_dtype(weights.dtype)))


def _residual(key: PRNGKey, weights: Array, *, num_samples: int) -> Array:
    weights = _relative(weights)
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
    rand_idx = _sorted_uniforms_to_idx(res / jnp.max(res), jax.random.uniform(key, (num_samples,)))
    idx = jnp.where(slots < n_det, det_idx, rand_idx)
    return jnp.clip(idx, 0, weights.shape[0] - 1).astype(jnp.int32)


_JITTED = {fn: jax.jit(fn, static_argnames="num_samples")
           for fn in (_systematic, _stratified, _multinomial, _residual)}


def _resample(name: str, body, key, weights, num_samples):
    weights = _check_weights(weights, num_samples)
    return checked.run(f"jaxlab.core.smc.{name}", body, key, weights, num_samples=num_samples,
                       fast=_JITTED[body])


@checked.boundary
def systematic(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Systematic resampling: one uniform, u_i = (i + U) / M."""
    return _resample("systematic", _systematic, key, weights, num_samples)


@checked.boundary
def stratified(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Stratified resampling: u_i = (i + U_i) / M with independent U_i."""
    return _resample("stratified", _stratified, key, weights, num_samples)


@checked.boundary
def multinomial(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Multinomial resampling: i.i.d. draws from Categorical(weights)."""
    return _resample("multinomial", _multinomial, key, weights, num_samples)


@checked.boundary
def residual(key: PRNGKey, weights: ArrayLike, num_samples: int) -> Array:
    """Residual resampling: floor(M w_i) deterministic copies, the rest multinomial.

    The deterministic part is written with static shapes: copy j (of M) goes to the
    particle whose cumulative floor count first exceeds j; the remaining slots are
    filled by multinomial draws from the residual weights M w_i - floor(M w_i).
    """
    return _resample("residual", _residual, key, weights, num_samples)


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


@checked.boundary
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


@checked.boundary
def ess(log_weights: ArrayLike) -> Array:
    """Effective sample size 1 / sum(w_i^2) of normalised weights, from log weights [N]."""
    log_weights = _check_log_weights(log_weights, "jaxlab.core.smc.ess")
    w = jax.nn.softmax(log_weights)
    return 1.0 / jnp.sum(w**2)
