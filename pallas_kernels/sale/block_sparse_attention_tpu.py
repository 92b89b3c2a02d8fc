"""Block-sparse flash attention for TPU (Mosaic): kept blocks through scalar prefetch.

As in splash attention, the compact lists ``kv_index`` / ``kv_count`` are scalar-prefetched
into SMEM and the key/value ``index_map`` returns the j-th *kept* block of the row, so
the pipeline only DMAs kept blocks. Grid (batch, head, query block, slot j) with j the
reduction axis; slots past the row's count re-map to its last kept block (no new DMA)
and skip compute with ``pl.when``. Running max / sum / accumulator live in VMEM scratch.
Tested on CPU with ``interpret=True`` against the reference.

Checks: as ``block_sparse_attention`` (q/k/v via ``reference._check_qkv``, ``block_mask`` via
``check_block_mask``), before the jitted body.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_kernels.sale.block_sparse_attention import (
    MASK_VALUE,
    check_block_mask,
    compact_block_lists,
    online_softmax_step,
)
from pallas_kernels.sale.reference import BlockSizes, _check_qkv


def _kernel(idx_ref, cnt_ref, q_ref, k_ref, v_ref, o_ref, m_sc, l_sc, acc_sc, *, block_q,
            block_k, causal, scale):
    b, h, i, j = (pl.program_id(a) for a in range(4))
    count = cnt_ref[b, h, i]

    @pl.when(j == 0)
    def _():
        m_sc[...] = jnp.full(m_sc.shape, MASK_VALUE, jnp.float32)
        l_sc[...] = jnp.zeros(l_sc.shape, jnp.float32)
        acc_sc[...] = jnp.zeros(acc_sc.shape, jnp.float32)

    @pl.when(j < count)
    def _():
        q = q_ref[...].astype(jnp.float32) * scale
        s = q @ k_ref[...].astype(jnp.float32).T
        if causal:
            start = idx_ref[b, h, i, j] * block_k
            rows = i * block_q + jnp.arange(block_q)[:, None]
            s = jnp.where(start + jnp.arange(block_k)[None, :] <= rows, s, MASK_VALUE)
        m, l_sum, acc = online_softmax_step(m_sc[...][:, 0], l_sc[...][:, 0], acc_sc[...], s,
                                            v_ref[...].astype(jnp.float32))
        m_sc[...], l_sc[...], acc_sc[...] = m[:, None], l_sum[:, None], acc

    @pl.when(j == pl.num_programs(3) - 1)
    def _():
        o_ref[...] = (acc_sc[...] / l_sc[...]).astype(o_ref.dtype)


def block_sparse_attention_tpu(q, k, v, block_mask, sizes: BlockSizes = BlockSizes(),
                               causal: bool = False, interpret: bool = False):
    """Same contract as ``block_sparse_attention``; TPU grid with scalar prefetch."""
    _check_qkv(q, k, v, sizes)
    check_block_mask(block_mask, q, sizes)
    return _block_sparse_attention_tpu(q, k, v, block_mask, sizes, causal, interpret)


@functools.partial(jax.jit, static_argnames=("sizes", "causal", "interpret"))
def _block_sparse_attention_tpu(q, k, v, block_mask, sizes, causal, interpret):
    b, hq, n, d = q.shape
    nq, nk = n // sizes.block_q, n // sizes.block_k
    groups = hq // k.shape[1]
    idx, cnt = compact_block_lists(block_mask)

    def kv_map(bi, h, i, j, idx_ref, cnt_ref):
        slot = jnp.minimum(j, jnp.maximum(cnt_ref[bi, h, i] - 1, 0))
        return bi, h // groups, idx_ref[bi, h, i, slot], 0

    def q_map(bi, h, i, j, idx_ref, cnt_ref):
        return bi, h, i, 0

    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2,
        grid=(b, hq, nq, nk),
        in_specs=[pl.BlockSpec((None, None, sizes.block_q, d), q_map),
                  pl.BlockSpec((None, None, sizes.block_k, d), kv_map),
                  pl.BlockSpec((None, None, sizes.block_k, d), kv_map)],
        out_specs=pl.BlockSpec((None, None, sizes.block_q, d), q_map),
        scratch_shapes=[pltpu.VMEM((sizes.block_q, 1), jnp.float32),
                        pltpu.VMEM((sizes.block_q, 1), jnp.float32),
                        pltpu.VMEM((sizes.block_q, d), jnp.float32)],
    )
    kernel = functools.partial(_kernel, block_q=sizes.block_q, block_k=sizes.block_k,
                               causal=causal, scale=1.0 / float(d) ** 0.5)
    return pl.pallas_call(
        kernel, grid_spec=grid_spec, out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        interpret=interpret,
    )(idx, cnt, q, k, v)
