"""Drop-in attention for jaxlab models: dense softmax attention or SALE block-sparse.

Layout [B, N, H, D] (the flax / LLaMA convention); GQA when the key heads divide the
query heads. ``impl="sale"`` runs the two SALE Pallas kernels (estimation + selection,
then block-sparse flash attention); on a CPU backend they run in the Pallas interpreter.

Any sequence length N >= 1 works for both implementations: with ``impl="sale"`` the
kernels pad N up to their tile grid, mask the padded keys out of every softmax and of the
keep test, keep padded query rows from voting for a block and drop them from the output.

Checks (static shapes / dtypes, so they also hold under ``jit``; values only when concrete):
``impl`` one of ``IMPLS``; q, k, v 4-D with a floating dtype (TypeError naming the argument);
k and v of shape (B, N, Hk, D) matching q's batch, length and head dim; N >= 1 and D >= 1;
Hq a multiple of Hk; q, k, v finite when concrete (ValueError naming the argument; traced
values are not inspected); for ``impl="sale"``: ``sizes`` a ``BlockSizes`` (TypeError), ``tau`` a
scalar or [Hq] in [0, inf) without NaN, ``bits`` 8 or 4, ``interpret`` None or a bool.
"""

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from pallas_kernels.sale import reference
from pallas_kernels.sale.estimate import sale_attention_pallas
from pallas_kernels.sale.reference import BlockSizes

IMPLS = ("dense", "sale")


def _check_inputs(q, k, v, impl, tau, sizes, bits, interpret):
    for name, x in (("q", q), ("k", k), ("v", v)):
        validation.check_ndim(name, x, 4)
        validation.check_floating(name, x)
    b, n, hq, d = q.shape
    for name, x in (("k", k), ("v", v)):
        if x.shape[0] != b or x.shape[1] != n or x.shape[3] != d:
            raise ValueError(f"`{name}` must have shape ({b}, {n}, Hk, {d}) to match `q` "
                             f"{tuple(q.shape)} ([B, N, H, D]), got {tuple(x.shape)}.")
    validation.check_shape("v", v, k.shape)
    for name, x in (("q", q), ("k", k), ("v", v)):
        validation.check_finite(name, x)
    if n == 0 or d == 0:
        raise ValueError(f"`q` must have N >= 1 and D >= 1 ([B, N, H, D]), got shape "
                         f"{tuple(q.shape)}.")
    if k.shape[2] == 0 or hq % k.shape[2]:
        raise ValueError(f"the {hq} query heads of `q` must be a multiple of the {k.shape[2]} "
                         "key heads of `k` (GQA).")
    if impl == "sale":
        if not isinstance(sizes, BlockSizes):
            raise TypeError(f"`sizes` must be a pallas_kernels.sale.BlockSizes, got "
                            f"{type(sizes).__name__}.")
        if isinstance(bits, bool) or bits not in (8, 4):
            raise ValueError(f"`bits` must be 8 or 4, got {bits!r}.")
        if interpret is not None and not isinstance(interpret, bool):
            raise ValueError(f"`interpret` must be None or a bool, got {interpret!r}.")
        if tau is not None:
            if jnp.shape(tau) not in ((), (1,), (hq,)):
                raise ValueError(f"`tau` must be a scalar or have shape ({hq},), got shape "
                                 f"{jnp.shape(tau)}.")
            validation.check_in_range("tau", tau, 0.0)


def attention(q, k, v, *, impl: str = "dense", causal: bool = False, tau=None,
              sizes: BlockSizes = BlockSizes(), bits: int = 8, interpret: bool | None = None):
    """softmax(q k^T / sqrt(D)) v, dense or SALE-sparse.

    Args:
      q: [B, N, Hq, D]; k, v: [B, N, Hk, D]; any N >= 1.
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
    _check_inputs(q, k, v, impl, tau, sizes, bits, interpret)
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
