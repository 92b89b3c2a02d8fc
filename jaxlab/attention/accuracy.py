"""SALE's accuracy on (batch, head) slices of q, k, v against dense attention: the output
error, the attention recall and the density of the kept blocks, from the pure-jnp
reference (``pallas_kernels.sale.reference``); what ``jaxlab.attention.compare``'s
built-in contenders measure."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from pallas_kernels.sale import reference as R

__all__ = ["DEFAULT_SIZES", "check_tau", "slice_metrics"]

#: SALE's default tiles (64 / 32 / 128).
DEFAULT_SIZES = R.BlockSizes()


def check_tau(tau) -> np.ndarray:
    """``tau`` as float64 NumPy; ValueError unless its thresholds are >= 0, or inf
    everywhere (only the always-kept blocks)."""
    t = np.asarray(tau, np.float64)
    if np.isnan(t).any() or (t < 0).any() or (np.isinf(t).any() and not np.isinf(t).all()):
        raise ValueError(f"`tau` must be thresholds >= 0, or inf everywhere (only the "
                         f"always-kept blocks), got {t}.")
    return t


def slice_metrics(q, k, v, tau, *, causal: bool = False, sizes=DEFAULT_SIZES, bits=8,
                  dense=None) -> dict:
    """Per slice (head of ``q`` [1, n, N, D]) SALE's accuracy at ``tau`` (scalar or [n];
    ``inf`` keeps only the always-kept blocks).

    Returns:
      {"error": [n] mean |O - O_dense| / mean |O_dense|, "recall": [n] mean row recall,
      "density": [n] kept fraction of the valid blocks} as float64 NumPy.

    Raises:
      ValueError: ``tau`` NaN, negative, or mixing ``inf`` with finite thresholds;
        ``dense`` not of q's shape; and the reference's checks of q, k, v, ``sizes`` and
        ``bits``.
    """
    t = check_tau(tau)
    if dense is None:
        dense = R.dense_attention(q, k, v, causal)
    else:
        validation.check_shape("dense", dense, np.shape(q))
    tau = jnp.asarray(tau, jnp.float32)
    if np.isinf(t).any():  # the static pattern: always-kept blocks only
        always = R.always_kept_blocks(q.shape[2], sizes, causal)
        keep = jnp.broadcast_to(always[None, None], (1, q.shape[1]) + always.shape)
        out = _masked_attention(q, k, v, keep, sizes, causal)
    else:
        out, keep = R.sale_attention(q, k, v, tau, sizes, bits, causal)
    err = jnp.abs(out.astype(jnp.float32) - dense).mean((2, 3)) / jnp.abs(dense).mean((2, 3))
    return {"error": np.asarray(err[0], np.float64),
            "recall": np.asarray(R.attention_recall(q, k, keep, sizes, causal)[0], np.float64),
            "density": np.asarray(R.causal_density(keep, q.shape[2], sizes, causal)[0],
                                  np.float64)}


def _masked_attention(q, k, v, keep, sizes, causal):
    """Softmax attention over the blocks of ``keep`` [1, n, nq, nk] (exact scores)."""
    n = q.shape[2]
    s = jnp.einsum("bhnd,bhmd->bhnm", q, k).astype(jnp.float32) / jnp.sqrt(q.shape[-1])
    n_pad = R.padded_length(n, sizes)
    rows = jnp.arange(n_pad) // sizes.block_q
    cols = jnp.arange(n_pad) // sizes.block_k
    el = keep[:, :, rows][:, :, :, cols][:, :, :n, :n]
    if causal:
        el = el & jnp.tril(jnp.ones((n, n), bool))
    s = jnp.where(el, s, -jnp.inf)
    return jnp.einsum("bhnm,bhmd->bhnd", jax.nn.softmax(s, -1), v.astype(jnp.float32))
