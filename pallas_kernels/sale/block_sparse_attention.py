"""Block-sparse flash attention as a Pallas kernel (Triton backend; ``interpret=`` on CPU).

Grid (query block i, batch, head pack): the query block is the fastest axis, so programs
running together read the same key/value head (L2 reuse, as in FlashAttention-2 and the
official SALE kernel). A program holds the b_q-row blocks of h_p query heads sharing one
key head (GQA packing: ``rows`` = h_p b_q, see ``config``), and loops (``fori_loop`` with a
data-dependent trip count) over its kept key tiles, read from a compact list
``kv_index`` [B, P, nq, nt] with counts ``kv_count`` [B, P, nq] (P = Hq / h_p); each entry
carries ``kv_bits``, an (h_p x r)-bit mask of the (head, selection block) pairs kept in
that tile; the other columns are masked. Each kept tile's K / V rows are gathered from
global memory with ``pl.ds`` (an index table, as in jax's paged attention); nothing else
of the head is read. Dots take the input dtype (bf16) with float32 accumulation; the
softmax uses exp2 with log2(e) / sqrt(D) folded into the logits; online softmax as in
FlashAttention-2. The state can start from a partial result (``init``: output, row max,
row sum of an earlier pass): SALE's estimation kernel passes its exact sink / local /
diagonal attention in, so the always-kept blocks are not attended twice.

Masked logits use a large finite negative value, not -inf, so a tile whose keys are all
masked for a row contributes exp2(0) terms that the next visible block rescales away with
alpha = exp2(m_old - m_new) = 0; every row keeps the sink block, so no row stays masked.

Checks (before the jitted body): q, k, v as in ``reference._check_qkv`` (4-D, floating,
matching shapes, GQA heads); ``block_mask`` boolean of shape
[B, Hq, ceil(N / b_q), ceil(N / b_q) b_q / b_k] and, when concrete, keeping >= 1 block in
every row (an empty row would divide by a zero softmax sum). A traced mask is not inspected.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_kernels.sale import config as C
from pallas_kernels.sale.common import (
    MASK_VALUE,
    PartialState,
    TileLists,
    check_block_mask,
    dot_f32,
    kv_spec,
    list_specs,
    lists_from_bits,
    load_rows,
    online_softmax_step,
    row_layout,
    row_spec,
    store_rows,
    tile_bits,
    tile_keep_mask,
)
from pallas_kernels.sale.reference import BlockSizes, _check_qkv


def _attention_kernel(idx_ref, bits_ref, cnt_ref, q_ref, k_ref, v_ref, *rest, plan: C.Plan,
                      causal: bool, has_init: bool):
    if has_init:
        o0_ref, m0_ref, l0_ref, o_ref = rest
    else:
        (o_ref,) = rest
    i = pl.program_id(0)
    head, pos = row_layout(plan, i)
    q = load_rows(q_ref, plan)
    tile = plan.tile

    def body(t, carry):
        m, l_sum, acc = carry
        start = idx_ref[t] * tile
        kb = k_ref[pl.ds(start, tile), :]
        vb = v_ref[pl.ds(start, tile), :]
        s2 = dot_f32(q, kb, trans_b=True) * plan.scale2
        keep = tile_keep_mask(bits_ref[t], head, plan)
        key = start + jnp.arange(tile)[None, :]
        if causal:
            keep = keep & (key <= pos)
        if plan.padded:
            keep = keep & (key < plan.n)
        return online_softmax_step(m, l_sum, acc, jnp.where(keep, s2, MASK_VALUE), vb)

    if has_init:
        m0 = load_rows(m0_ref, plan)
        l0 = load_rows(l0_ref, plan)
        init = (m0, l0, load_rows(o0_ref, plan) * l0[:, None])
    else:
        init = (jnp.full((plan.rows,), MASK_VALUE, jnp.float32),
                jnp.zeros((plan.rows,), jnp.float32),
                jnp.zeros((plan.rows, plan.d_pad), jnp.float32))
    _, l_sum, acc = jax.lax.fori_loop(0, cnt_ref[0], body, init)
    # l_sum = 0 only on rows that are all padding (sliced away): write zeros, not NaN.
    store_rows(o_ref, acc / jnp.where(l_sum > 0, l_sum, 1.0)[:, None], plan)


def attend_triton(q, k, v, lists: TileLists, init: PartialState | None, plan: C.Plan,
                  config: C.KernelConfig, causal: bool, interpret: bool):
    """The Triton pallas_call on padded q [B, Hq, Np, Dp], k, v [B, Hk, Np, Dp]."""
    grid = (plan.num_q_blocks, plan.batch, plan.num_programs_h)
    in_specs = [*list_specs(plan), row_spec(plan, plan.d_pad), kv_spec(plan), kv_spec(plan)]
    args = [lists.index, lists.bits, lists.count, q, k, v]
    if init is not None:
        in_specs += [row_spec(plan, plan.d_pad), row_spec(plan), row_spec(plan)]
        args += [init.out, init.m2, init.l_sum]
    kernel = functools.partial(_attention_kernel, plan=plan, causal=causal,
                               has_init=init is not None)
    return pl.pallas_call(
        kernel, grid=grid, in_specs=in_specs, out_specs=row_spec(plan, plan.d_pad),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        compiler_params=None if interpret else C.triton_params(plan, config),
        interpret=interpret, name="sale_block_sparse_attention",
    )(*args)


def attend(q, k, v, lists: TileLists, init: PartialState | None, plan: C.Plan,
           config: C.KernelConfig, causal: bool, interpret: bool):
    """Dispatch to the backend's attention kernel (inputs already padded)."""
    if config.backend == "mosaic_gpu":
        from pallas_kernels.sale import mosaic_gpu

        return mosaic_gpu.attend(q, k, v, lists, init, plan, config, causal, interpret)
    if config.backend == "tpu":
        from pallas_kernels.sale import block_sparse_attention_tpu

        return block_sparse_attention_tpu.attend(q, k, v, lists, init, plan, causal, interpret)
    return attend_triton(q, k, v, lists, init, plan, config, causal, interpret)


# ----------------------------------------------------------------------------- public API


def block_sparse_attention(q, k, v, block_mask, sizes: BlockSizes = BlockSizes(),
                           causal: bool = False, interpret: bool = False,
                           config: C.KernelConfig = C.DEFAULT_CONFIG):
    """Attention of q over the kept key blocks of ``block_mask``.

    Args:
      q: [B, Hq, N, D]; k, v: [B, Hk, N, D] (Hq a multiple of Hk); any N and D.
      block_mask: [B, Hq, ceil(N / b_q), nk] bool; every row must keep >= 1 block
        (SALE always keeps the sink block).
      sizes: BlockSizes (b_q, b_k).
      causal: mask keys after each query inside the visited blocks.
      interpret: run the kernel in the Pallas interpreter (CPU).
      config: KernelConfig (backend, tiles, Triton warps / stages).

    Returns:
      [B, Hq, N, D] output in q's dtype.
    """
    _check_qkv(q, k, v, sizes)
    check_block_mask(block_mask, q, sizes)
    config = C.check_config(config)
    return _block_sparse_attention(q, k, v, block_mask, sizes, causal, interpret, config)


@functools.partial(jax.jit, static_argnames=("sizes", "causal", "interpret", "config"))
def _block_sparse_attention(q, k, v, block_mask, sizes, causal, interpret, config):
    plan = C.make_plan(q.shape, k.shape, sizes, config, q.dtype)
    nk_pad = plan.num_k_blocks
    mask = jnp.pad(block_mask, ((0, 0), (0, 0), (0, plan.num_q_blocks - block_mask.shape[2]),
                                (0, nk_pad - block_mask.shape[3])))
    lists = lists_from_bits(tile_bits(mask, plan))
    qp, kp, vp = (C.pad_to(x, plan.n_pad, plan.d_pad) for x in (q, k, v))
    out = attend(qp, kp, vp, lists, None, plan, config, causal, interpret)
    return out[:, :, :plan.n, :plan.d]
