"""Block-sparse flash attention as a Pallas kernel (GPU/Triton-style grid; ``interpret=``).

Grid (batch, query head, query block). Each program holds one [b_q, D] query tile and
loops (``fori_loop`` with a data-dependent trip count) over only the kept key blocks of
its row, listed compactly in ``kv_index`` [B, Hq, N/b_q, N/b_k] (kept blocks first, in
increasing order) with ``kv_count`` [B, Hq, N/b_q]; online softmax (running max m, sum l
and accumulator) as in FlashAttention-2. GQA maps query head h to key head h // groups.

Masked logits use a large finite negative value, not -inf, so a tile whose keys are all
in the future (the second diagonal block of a causal row) contributes exp(0) terms that
the next visible block rescales away with alpha = exp(m_old - m_new) = 0; every row keeps
the sink block, so no row stays fully masked.

Checks (before the jitted body): q, k, v as in ``reference._check_qkv`` (4-D, floating,
matching shapes, GQA heads, N divisible by ``block_q``); ``block_mask`` boolean of shape
[B, Hq, N / b_q, N / b_k] and, when concrete, keeping >= 1 block in every row (an empty row
would divide by a zero softmax sum). A traced mask is not inspected.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_kernels.sale import _checks
from pallas_kernels.sale.reference import BlockSizes, _check_qkv

MASK_VALUE = -0.7 * float(jnp.finfo(jnp.float32).max)


def compact_block_lists(block_mask):
    """(kv_index, kv_count) from a bool block mask [..., nk]: kept blocks first, in order."""
    if block_mask.ndim < 1:
        raise ValueError("`block_mask` must have at least one axis (key blocks last).")
    order = jnp.argsort(~block_mask, axis=-1, stable=True).astype(jnp.int32)
    return order, block_mask.sum(-1).astype(jnp.int32)


def online_softmax_step(m, l_sum, acc, s, v_block):
    """One FlashAttention-2 update of (row max m, row sum l, accumulator acc) with logits s."""
    m_new = jnp.maximum(m, s.max(-1))
    p = jnp.exp(s - m_new[:, None])
    alpha = jnp.exp(m - m_new)
    return m_new, l_sum * alpha + p.sum(-1), acc * alpha[:, None] + p @ v_block


def _kernel(idx_ref, cnt_ref, q_ref, k_ref, v_ref, o_ref, *, block_q, block_k, causal, scale):
    i = pl.program_id(2)
    q = q_ref[...].astype(jnp.float32) * scale
    rows = i * block_q + jnp.arange(block_q)[:, None]

    def body(j, carry):
        m, l_sum, acc = carry
        start = idx_ref[j] * block_k
        kb = k_ref[pl.ds(start, block_k), :].astype(jnp.float32)
        vb = v_ref[pl.ds(start, block_k), :].astype(jnp.float32)
        s = q @ kb.T
        if causal:
            s = jnp.where(start + jnp.arange(block_k)[None, :] <= rows, s, MASK_VALUE)
        return online_softmax_step(m, l_sum, acc, s, vb)

    d = q.shape[-1]
    init = (jnp.full((block_q,), MASK_VALUE, jnp.float32), jnp.zeros((block_q,), jnp.float32),
            jnp.zeros((block_q, d), jnp.float32))
    _, l_sum, acc = jax.lax.fori_loop(0, cnt_ref[0], body, init)
    o_ref[...] = (acc / l_sum[:, None]).astype(o_ref.dtype)


def check_block_mask(block_mask, q, sizes: BlockSizes) -> None:
    """Dtype, shape and (concrete) non-empty rows of a block mask for ``q`` [B, Hq, N, D]."""
    b, hq, n, _ = q.shape
    _checks.check_shape("block_mask", block_mask, (b, hq, n // sizes.block_q,
                                                   n // sizes.block_k))
    dtype = getattr(block_mask, "dtype", None)
    dtype = jnp.asarray(block_mask).dtype if dtype is None else dtype
    if dtype != jnp.bool_:
        raise TypeError(f"`block_mask` must be boolean, got dtype {dtype}.")
    if _checks.is_concrete(block_mask):
        empty = ~jnp.asarray(block_mask).any(-1)
        if bool(empty.any()):
            raise ValueError(f"`block_mask` must keep at least one key block per query row "
                             f"block, got {int(empty.sum())} empty rows.")


def block_sparse_attention(q, k, v, block_mask, sizes: BlockSizes = BlockSizes(),
                           causal: bool = False, interpret: bool = False):
    """Attention of q over the kept key blocks of ``block_mask``.

    Args:
      q: [B, Hq, N, D]; k, v: [B, Hk, N, D] (Hq a multiple of Hk).
      block_mask: [B, Hq, N / b_q, N / b_k] bool; every row must keep >= 1 block
        (SALE always keeps the sink block).
      sizes: BlockSizes (b_q, b_k).
      causal: mask keys after each query inside the visited blocks.
      interpret: run the kernel in the Pallas interpreter (CPU).

    Returns:
      [B, Hq, N, D] output in q's dtype.
    """
    _check_qkv(q, k, v, sizes)
    check_block_mask(block_mask, q, sizes)
    return _block_sparse_attention(q, k, v, block_mask, sizes, causal, interpret)


@functools.partial(jax.jit, static_argnames=("sizes", "causal", "interpret"))
def _block_sparse_attention(q, k, v, block_mask, sizes, causal, interpret):
    idx, cnt = compact_block_lists(block_mask)
    return _attend(q, k, v, idx, cnt, sizes, causal, interpret)


def _attend(q, k, v, idx, cnt, sizes, causal, interpret):
    """The pallas_call over compact lists idx [B, Hq, nq, nk] and counts cnt [B, Hq, nq]."""
    b, hq, n, d = q.shape
    nq, nk = n // sizes.block_q, n // sizes.block_k
    groups = hq // k.shape[1]
    kernel = functools.partial(_kernel, block_q=sizes.block_q, block_k=sizes.block_k,
                               causal=causal, scale=1.0 / float(d) ** 0.5)
    return pl.pallas_call(
        kernel,
        grid=(b, hq, nq),
        in_specs=[
            pl.BlockSpec((None, None, None, nk), lambda bi, h, i: (bi, h, i, 0)),
            pl.BlockSpec((None, None, 1), lambda bi, h, i: (bi, h, i)),
            pl.BlockSpec((None, None, sizes.block_q, d), lambda bi, h, i: (bi, h, i, 0)),
            pl.BlockSpec((None, None, n, d), lambda bi, h, i: (bi, h // groups, 0, 0)),
            pl.BlockSpec((None, None, n, d), lambda bi, h, i: (bi, h // groups, 0, 0)),
        ],
        out_specs=pl.BlockSpec((None, None, sizes.block_q, d), lambda bi, h, i: (bi, h, i, 0)),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        interpret=interpret,
    )(idx, cnt, q, k, v)
