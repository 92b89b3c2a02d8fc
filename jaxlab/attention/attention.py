"""Drop-in attention for jaxlab models: dense softmax attention or SALE block-sparse.

Layout: ``layout="bnhd"`` (default) is [B, N, H, D], the flax / LLaMA convention;
``layout="bhnd"`` is [B, H, N, D], the layout of ``pallas_kernels.sale`` (``reference``,
``sale_attention_pallas``), so tensors move between the two without transposes. GQA when
the key heads divide the query heads. ``key_mask`` [B, N] bool (True = attend) masks
padded keys: their logits are -inf in both implementations (SALE: exactly, through an
extra value column carrying the mask, so the kernels see one more head-dim column); a
row whose every key is masked returns zeros. ``impl="sale"`` runs the two SALE Pallas
kernels (estimation + selection, then block-sparse flash attention); on a CPU backend they
run in the Pallas interpreter.

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

from jaxlab.core import checked, validation
from pallas_kernels.sale import reference
from pallas_kernels.sale.estimate import sale_attention_pallas
from pallas_kernels.sale.reference import BlockSizes

checked.declare("jaxlab.attention.attention")

IMPLS = ("dense", "sale")


LAYOUTS = ("bnhd", "bhnd")


def _check_key_mask(key_mask, b, n):
    if key_mask is None:
        return
    validation.check_shape("key_mask", key_mask, (b, n))
    if jnp.asarray(key_mask).dtype != jnp.bool_:
        raise TypeError(f"`key_mask` must be a bool array [B, N] (True = attend), got dtype "
                        f"{jnp.asarray(key_mask).dtype}.")


def _traced_qkv(q, k, v) -> None:
    """Checked-mode checks of traced queries, keys and values."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        checked.check(jnp.all(jnp.isfinite(x)), f"`{name}` must be finite.")


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
    checked.guard("jaxlab.attention.attention", _traced_qkv, q, k, v)
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


@checked.boundary
def attention(q, k, v, *, impl: str = "dense", causal: bool = False, tau=None,
              sizes: BlockSizes = BlockSizes(), bits: int = 8, interpret: bool | None = None,
              key_mask=None, layout: str = "bnhd"):
    """softmax(q k^T / sqrt(D)) v, dense or SALE-sparse.

    Args:
      q: [B, N, Hq, D]; k, v: [B, N, Hk, D]; any N >= 1 (``layout="bhnd"``: [B, H, N, D]).
      impl: "dense" or "sale".
      causal: causal masking.
      tau: SALE per-head thresholds (scalar or [Hq]); default ``reference.DEFAULT_TAU``.
      sizes, bits: SALE block sizes and quantization bits.
      interpret: run the Pallas kernels in the interpreter; default: on CPU backends.
      key_mask: optional [B, N] bool, False = a padded key no query attends to.
      layout: "bnhd" (default) or "bhnd", of the inputs and the output.

    Returns:
      [B, N, Hq, D] (``layout="bhnd"``: [B, Hq, N, D]) in q's dtype.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.attention import attention, attention_sizes
      >>> q = k = v = jax.random.normal(jax.random.key(0), (2, 16, 4, 8))  # [B, N, H, D]
      >>> lengths = jnp.array([16, 10])
      >>> mask = jnp.arange(16)[None, :] < lengths[:, None]            # [B, N]
      >>> attention(q, k, v, key_mask=mask).shape
      (2, 16, 4, 8)
      >>> out = attention(q, k, v, impl="sale", key_mask=mask, tau=0.0,
      ...                 sizes=attention_sizes(8, 8, 8))
      >>> bool(jnp.allclose(out, attention(q, k, v, key_mask=mask), atol=1e-5))
      True
    """
    if impl not in IMPLS:
        raise ValueError(f"`impl` must be one of {IMPLS}, got {impl!r}.")
    if layout not in LAYOUTS:
        raise ValueError(f"`layout` must be one of {LAYOUTS}, got {layout!r}.")
    to_bhnd = lambda x: jnp.swapaxes(x, 1, 2)  # noqa: E731
    if layout == "bhnd":  # checks and math below in [B, N, H, D]
        q, k, v = to_bhnd(q), to_bhnd(k), to_bhnd(v)
    _check_inputs(q, k, v, impl, tau, sizes, bits, interpret)
    _check_key_mask(key_mask, q.shape[0], q.shape[1])
    qh, kh, vh = to_bhnd(q), to_bhnd(k), to_bhnd(v)
    if impl == "dense":
        out = _dense(qh, kh, vh, causal, key_mask).astype(q.dtype)
    else:
        if interpret is None:
            interpret = jax.default_backend() == "cpu"
        tau = reference.DEFAULT_TAU if tau is None else tau
        if key_mask is None:
            out, _ = sale_attention_pallas(qh, kh, vh, tau, sizes, bits, causal, interpret)
        else:
            out = _sale_masked(qh, kh, vh, key_mask, tau, sizes, bits, causal, interpret)
            out = out.astype(q.dtype)
    return out if layout == "bhnd" else to_bhnd(out)


def attention_sizes(block_q: int = 64, block_k: int = 64, local: int = 64) -> BlockSizes:
    """SALE tile sizes for ``attention(impl="sale", sizes=...)`` (``BlockSizes``)."""
    return BlockSizes(block_q, block_k, local)


def _dense(qh, kh, vh, causal, key_mask):
    """[B, Hq, N, D] softmax attention, keys with ``key_mask`` False at -inf."""
    if key_mask is None:
        return reference.dense_attention(qh, kh, vh, causal)
    groups = qh.shape[1] // kh.shape[1]
    kh, vh = jnp.repeat(kh, groups, axis=1), jnp.repeat(vh, groups, axis=1)
    s = jnp.einsum("bhnd,bhmd->bhnm", qh, kh).astype(jnp.float32) / jnp.sqrt(qh.shape[-1])
    allowed = jnp.asarray(key_mask)[:, None, None, :]
    if causal:
        n = qh.shape[2]
        allowed = allowed & jnp.tril(jnp.ones((n, n), bool))
    s = jnp.where(allowed, s, -jnp.inf)
    any_key = jnp.any(allowed, -1, keepdims=True)
    p = jax.nn.softmax(jnp.where(any_key, s, 0.0), -1) * any_key
    return jnp.einsum("bhnm,bhmd->bhnd", p, vh.astype(jnp.float32))


def _sale_masked(qh, kh, vh, key_mask, tau, sizes, bits, causal, interpret):
    """SALE with masked keys, exactly: softmax weights p_j over the kept blocks give
    sum_j p_j m_j [v_j, 1] = [num, den]; num / den is the softmax over the unmasked keys
    (the normaliser cancels). One extra head-dim column carries m_j; q is rescaled by
    sqrt((D + 1) / D) so the kernels' 1 / sqrt(D + 1) logit scale stays 1 / sqrt(D)."""
    d = qh.shape[-1]
    m = jnp.asarray(key_mask, jnp.float32)[:, None, :, None]  # [B, 1, N, 1]
    zeros = lambda x: jnp.zeros(x.shape[:-1] + (1,), x.dtype)  # noqa: E731
    q1 = jnp.concatenate([qh * jnp.sqrt((d + 1) / d).astype(qh.dtype), zeros(qh)], -1)
    k1 = jnp.concatenate([kh, zeros(kh)], -1)
    v1 = jnp.concatenate([vh * m.astype(vh.dtype), jnp.broadcast_to(m, vh.shape[:-1] + (1,))
                          .astype(vh.dtype)], -1)
    out, _ = sale_attention_pallas(q1, k1, v1, tau, sizes, bits, causal, interpret)
    num, den = out[..., :d].astype(jnp.float32), out[..., d:].astype(jnp.float32)
    return jnp.where(den > 0, num / jnp.where(den > 0, den, 1.0), 0.0)
