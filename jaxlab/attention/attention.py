"""Drop-in attention for jaxlab models: dense softmax attention or SALE block-sparse.

Layout [B, N, H, D] (the flax / LLaMA convention); GQA when the key heads divide the
query heads. ``impl="sale"`` runs the two SALE Pallas kernels (estimation + selection,
then block-sparse flash attention); on a CPU backend they run in the Pallas interpreter.
"""

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from pallas_kernels.sale import reference
from pallas_kernels.sale.estimate import sale_attention_pallas
from pallas_kernels.sale.reference import BlockSizes

IMPLS = ("dense", "sale")


def attention(q, k, v, *, impl: str = "dense", causal: bool = False, tau=None,
              sizes: BlockSizes = BlockSizes(), bits: int = 8, interpret: bool | None = None):
    """softmax(q k^T / sqrt(D)) v, dense or SALE-sparse.

    Args:
      q: [B, N, Hq, D]; k, v: [B, N, Hk, D].
      impl: "dense" or "sale".
      causal: causal masking.
      tau: SALE per-head thresholds (scalar or [Hq]); default ``reference.DEFAULT_TAU``.
      sizes, bits: SALE block sizes and quantization bits.
      interpret: run the Pallas kernels in the interpreter; default: on CPU backends.

    Returns:
      [B, N, Hq, D] in q's dtype.
    """
    if impl not in IMPLS:
        raise ValueError(f"`impl` must be one of {IMPLS}, got {impl!r}.")
    validation.check_ndim("q", q, 4)
    to_bhnd = lambda x: jnp.swapaxes(x, 1, 2)  # noqa: E731
    qh, kh, vh = to_bhnd(q), to_bhnd(k), to_bhnd(v)
    if impl == "dense":
        out = reference.dense_attention(qh, kh, vh, causal).astype(q.dtype)
    else:
        if interpret is None:
            interpret = jax.default_backend() == "cpu"
        tau = reference.DEFAULT_TAU if tau is None else tau
        out, _ = sale_attention_pallas(qh, kh, vh, tau, sizes, bits, causal, interpret)
    return to_bhnd(out)
