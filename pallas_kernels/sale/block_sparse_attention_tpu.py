"""SALE kernels for TPU (Mosaic TPU): kept tiles through scalar prefetch, as in splash attention.

Attention: the compact lists (``kv_index``, ``kv_bits``, ``kv_count``) are
scalar-prefetched into SMEM and the key / value ``index_map`` returns the j-th *kept*
tile of the program, so the pipeline only DMAs kept tiles. Grid (batch, head pack,
query block, slot j) with j the reduction axis (the innermost, sequential axis on TPU);
slots past the count re-map to the last kept tile (no new DMA) and skip compute with
``pl.when``. Running max / sum / accumulator live in VMEM scratch; the state can start
from a partial result and the row statistics can be returned (the base pass).

Estimation runs as two calls: the exact always-kept pass is this attention kernel over
the (static) always-kept tiles, returning the row max / sum; then a candidate kernel with
the static candidate-tile list scalar-prefetched (the int8 code tiles DMA'd through its
index map) applies the log2-space keep test and appends kept tiles to a compact list
held in a VMEM row (vector selects, no scalar stores to VMEM).

Index arithmetic uses ``lax.div`` / ``lax.rem`` on non-negative ints (jnp's floor division
lowers through ``sign``, whose TPU rule needs a TPU device to be present).

Checks: as ``block_sparse_attention`` (q/k/v via ``reference._check_qkv``, ``block_mask`` via
``check_block_mask``), before the jitted body.
"""

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from pallas_kernels.sale import config as C
from pallas_kernels.sale.common import (
    MASK_VALUE,
    PartialState,
    Selection,
    TileLists,
    block_grid_masks,
    check_block_mask,
    compact_block_lists,
    dot_f32,
    lists_from_bits,
    tile_bits,
)
from pallas_kernels.sale.reference import BlockSizes, _check_qkv


def _rows(plan: C.Plan, i):
    r = lax.broadcasted_iota(jnp.int32, (plan.rows, 1), 0)
    return lax.div(r, plan.block_q), i * plan.block_q + lax.rem(r, plan.block_q)


def _col_blocks(plan: C.Plan):
    return lax.div(lax.broadcasted_iota(jnp.int32, (1, plan.tile), 1), plan.block_k)


def _load_rows(ref, plan: C.Plan):
    x = ref[...]
    return x if plan.heads_per_program == 1 else x.reshape(plan.rows, *x.shape[2:])


def _store_rows(ref, x, plan: C.Plan):
    ref[...] = (x if plan.heads_per_program == 1 else x.reshape(ref.shape)).astype(ref.dtype)


def _row_block(plan: C.Plan, *trailing):
    hp = plan.heads_per_program
    zeros = (0,) * len(trailing)
    return pl.BlockSpec((None, None if hp == 1 else hp, plan.block_q, *trailing),
                        lambda b, c, i, j, *_: (b, c, i, *zeros))


def _attention_kernel(idx_ref, bits_ref, cnt_ref, q_ref, k_ref, v_ref, *rest, plan: C.Plan,
                      causal: bool, has_init: bool, with_stats: bool):
    rest = list(rest)
    if has_init:
        o0_ref, m0_ref, l0_ref = rest[:3]
        rest = rest[3:]
    o_ref = rest.pop(0)
    if with_stats:
        mo_ref, lo_ref = rest[:2]
        rest = rest[2:]
    m_sc, l_sc, acc_sc = rest
    b, c, i, j = (pl.program_id(a) for a in range(4))
    count = cnt_ref[b, c, i]

    @pl.when(j == 0)
    def _():
        if has_init:
            m_sc[...] = _load_rows(m0_ref, plan)
            l_sc[...] = _load_rows(l0_ref, plan)
            acc_sc[...] = _load_rows(o0_ref, plan) * l_sc[...]
        else:
            m_sc[...] = jnp.full(m_sc.shape, MASK_VALUE, jnp.float32)
            l_sc[...] = jnp.zeros(l_sc.shape, jnp.float32)
            acc_sc[...] = jnp.zeros(acc_sc.shape, jnp.float32)

    @pl.when(j < count)
    def _():
        start = idx_ref[b, c, i, j] * plan.tile
        bits = bits_ref[b, c, i, j]
        head, pos = _rows(plan, i)
        s2 = dot_f32(_load_rows(q_ref, plan), k_ref[...], trans_b=True) * plan.scale2
        keep = ((bits >> (head * plan.sub + _col_blocks(plan))) & 1) != 0
        key = start + lax.broadcasted_iota(jnp.int32, (1, plan.tile), 1)
        if causal:
            keep = keep & (key <= pos)
        if plan.padded:
            keep = keep & (key < plan.n)
        s2 = jnp.where(keep, s2, MASK_VALUE)
        m = m_sc[...]
        m_new = jnp.maximum(m, s2.max(-1, keepdims=True))
        p = jnp.exp2(s2 - m_new)
        alpha = jnp.exp2(m - m_new)
        vb = v_ref[...]
        acc_sc[...] = acc_sc[...] * alpha + dot_f32(p.astype(vb.dtype), vb)
        l_sc[...] = l_sc[...] * alpha + p.sum(-1, keepdims=True)
        m_sc[...] = m_new

    @pl.when(j == pl.num_programs(3) - 1)
    def _():
        l_sum = l_sc[...]
        _store_rows(o_ref, acc_sc[...] / jnp.where(l_sum > 0, l_sum, 1.0), plan)
        if with_stats:
            _store_rows(mo_ref, m_sc[...], plan)
            _store_rows(lo_ref, l_sum, plan)


def attend(q, k, v, lists: TileLists, init: PartialState | None, plan: C.Plan, causal: bool,
           interpret: bool, with_stats: bool = False):
    """Attention over ``lists`` (padded inputs); with ``with_stats`` also (m2, l) [B, Hq, Np]."""
    b, hq, n_pad, d = q.shape
    ppk = plan.programs_per_kv_head

    def kv_map(bi, c, i, j, idx_ref, bits_ref, cnt_ref):
        slot = jnp.minimum(j, jnp.maximum(cnt_ref[bi, c, i] - 1, 0))
        return bi, lax.div(c, ppk), idx_ref[bi, c, i, slot], 0

    in_specs = [_row_block(plan, d), pl.BlockSpec((None, None, plan.tile, d), kv_map),
                pl.BlockSpec((None, None, plan.tile, d), kv_map)]
    args = [q, k, v]
    if init is not None:
        in_specs += [_row_block(plan, d), _row_block(plan, 1), _row_block(plan, 1)]
        args += [init.out, init.m2[..., None], init.l_sum[..., None]]
    out_specs = [_row_block(plan, d)]
    out_shape = [jax.ShapeDtypeStruct(q.shape, jnp.float32 if with_stats else q.dtype)]
    if with_stats:
        out_specs += [_row_block(plan, 1), _row_block(plan, 1)]
        out_shape += [jax.ShapeDtypeStruct((b, hq, n_pad, 1), jnp.float32)] * 2
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=3,
        grid=(b, plan.num_programs_h, plan.num_q_blocks, plan.num_tiles),
        in_specs=in_specs, out_specs=out_specs,
        scratch_shapes=[pltpu.VMEM((plan.rows, 1), jnp.float32),
                        pltpu.VMEM((plan.rows, 1), jnp.float32),
                        pltpu.VMEM((plan.rows, d), jnp.float32)])
    kernel = functools.partial(_attention_kernel, plan=plan, causal=causal,
                               has_init=init is not None, with_stats=with_stats)
    outs = pl.pallas_call(
        kernel, grid_spec=grid_spec, out_shape=out_shape,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
        interpret=interpret, name="sale_block_sparse_attention_tpu",
    )(lists.index, lists.bits, lists.count, *args)
    if with_stats:
        return outs[0], outs[1][..., 0], outs[2][..., 0]
    return outs[0]


def _candidate_kernel(cidx_ref, ccnt_ref, qc_ref, kc_ref, ks_ref, c2_ref, rcoef_ref, thr_ref,
                      idx_ref, bits_ref, cnt_ref, cnt_sc, *, plan: C.Plan, causal: bool):
    b, c, i, j = (pl.program_id(a) for a in range(4))
    lane = lax.broadcasted_iota(jnp.int32, (1, plan.num_tiles), 1)

    @pl.when(j == 0)
    def _():
        cnt_sc[0] = 0
        idx_ref[...] = jnp.zeros(idx_ref.shape, jnp.int32)
        bits_ref[...] = jnp.zeros(bits_ref.shape, jnp.int32)

    @pl.when(j < ccnt_ref[i])
    def _():
        t = cidx_ref[i, j]
        head, _ = _rows(plan, i)
        prod = lax.dot_general(_load_rows(qc_ref, plan), kc_ref[...], (((1,), (1,)), ((), ())),
                               preferred_element_type=jnp.int32)
        c2 = c2_ref[...]  # [h_p, 1, tile] or [1, tile]
        if plan.heads_per_program == 1:
            c_rows = c2
        else:
            c_rows = jnp.zeros((plan.rows, plan.tile), jnp.float32)
            for g in range(plan.heads_per_program):
                c_rows = jnp.where(head == g, c2[g], c_rows)
        val = (prod.astype(jnp.float32) * (_load_rows(rcoef_ref, plan) * ks_ref[...])
               + (c_rows - _load_rows(thr_ref, plan)))
        # (no causal mask: candidate blocks lie below the local window)
        col_blk = _col_blocks(plan)
        blk = t * plan.sub + col_blk
        lo = lax.div(jnp.maximum(i * plan.block_q - plan.local, 0) + plan.block_k - 1,
                     plan.block_k)
        cand = (blk >= 1) & (blk < lo)
        if not causal:
            cand = cand | (blk >= (i + 1) * (plan.block_q // plan.block_k))
        if plan.padded:
            cand = cand & (t * plan.tile + lax.broadcasted_iota(jnp.int32, (1, plan.tile), 1)
                           < plan.n)
        val = jnp.where(cand, val, -jnp.inf)
        bits = jnp.int32(0)
        for s in range(plan.sub):
            blk_val = val if plan.sub == 1 else jnp.where(col_blk == s, val, -jnp.inf)
            for g in range(plan.heads_per_program):
                sel = blk_val if plan.heads_per_program == 1 else jnp.where(
                    head == g, blk_val, -jnp.inf)
                bits = bits | ((jnp.max(sel) > 0).astype(jnp.int32) << (g * plan.sub + s))
        cnt = cnt_sc[0]

        @pl.when(bits != 0)
        def _():
            idx_ref[...] = jnp.where(lane == cnt, t, idx_ref[...])
            bits_ref[...] = jnp.where(lane == cnt, bits, bits_ref[...])
            cnt_sc[0] = cnt + 1

    @pl.when(j == pl.num_programs(3) - 1)
    def _():
        cnt_ref[...] = jnp.full(cnt_ref.shape, cnt_sc[0], jnp.int32)


def static_tile_lists(plan: C.Plan, mask_nq_nk):
    """(index [nq, nt], count [nq]) of the tiles touching a static [nq, nk] block mask."""
    per_tile = mask_nq_nk.reshape(plan.num_q_blocks, plan.num_tiles, plan.sub).any(-1)
    return compact_block_lists(per_tile)


def estimate(p, plan: C.Plan, causal: bool, interpret: bool):
    """Estimation + selection (``estimate.estimate_triton``'s contract) on TPU."""
    b, hq, n_pad, d = p.q.shape
    base, cand = block_grid_masks(plan, causal)
    base_bits = tile_bits(jnp.broadcast_to(base, (b, hq, *base.shape)), plan)
    v = p.v if p.v is not None else p.k
    out, m2, l_sum = attend(p.q, p.k, v, lists_from_bits(base_bits), None, plan, causal,
                            interpret, with_stats=True)
    thr = m2 + jnp.log2(l_sum) + p.rbias
    cidx, ccnt = static_tile_lists(plan, cand)
    ppk, nt, tile = plan.programs_per_kv_head, plan.num_tiles, plan.tile

    def kc_map(bi, c, i, j, cidx_ref, ccnt_ref):
        slot = jnp.minimum(j, jnp.maximum(ccnt_ref[i] - 1, 0))
        return bi, lax.div(c, ppk), cidx_ref[i, slot], 0

    def ks_map(bi, c, i, j, cidx_ref, ccnt_ref):
        return kc_map(bi, c, i, j, cidx_ref, ccnt_ref) + (0,)

    def c2_map(bi, c, i, j, cidx_ref, ccnt_ref):
        slot = jnp.minimum(j, jnp.maximum(ccnt_ref[i] - 1, 0))
        return bi, c, cidx_ref[i, slot], 0, 0

    hp = plan.heads_per_program
    row = functools.partial(_row_block, plan)
    lst = pl.BlockSpec((None, None, None, 1, nt), lambda bi, c, i, j, *_: (bi, c, i, 0, 0))
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=2,
        grid=(b, plan.num_programs_h, plan.num_q_blocks, nt),
        in_specs=[row(d), pl.BlockSpec((None, None, tile, d), kc_map),
                  pl.BlockSpec((None, None, None, 1, tile), ks_map),
                  pl.BlockSpec((None, None if hp == 1 else hp, None, 1, tile), c2_map),
                  row(1), row(1)],
        out_specs=[lst, lst, lst],
        scratch_shapes=[pltpu.SMEM((1,), jnp.int32)])
    np_, nq = plan.num_programs_h, plan.num_q_blocks
    lst_shape = jax.ShapeDtypeStruct((b, np_, nq, 1, nt), jnp.int32)
    kernel = functools.partial(_candidate_kernel, plan=plan, causal=causal)
    idx, bits, cnt = pl.pallas_call(
        kernel, grid_spec=grid_spec, out_shape=[lst_shape] * 3,
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "parallel", "parallel", "arbitrary")),
        interpret=interpret, name="sale_estimate_select_tpu",
    )(cidx, ccnt, p.qc, p.kc, p.kscale.reshape(b, -1, nt, 1, tile),
      p.c2.reshape(b, hq, nt, 1, tile), p.rcoef[..., None], thr[..., None])
    lists = TileLists(idx[:, :, :, 0], bits[:, :, :, 0], cnt[:, :, :, 0, 0])
    state = PartialState(out, m2, l_sum) if p.v is not None else None
    return Selection(lists, state)


def block_sparse_attention_tpu(q, k, v, block_mask, sizes: BlockSizes = BlockSizes(),
                               causal: bool = False, interpret: bool = False):
    """Same contract as ``block_sparse_attention``; TPU grid with scalar prefetch."""
    _check_qkv(q, k, v, sizes)
    check_block_mask(block_mask, q, sizes)
    return _block_sparse_attention_tpu(q, k, v, block_mask, sizes, causal, interpret)


@functools.partial(jax.jit, static_argnames=("sizes", "causal", "interpret"))
def _block_sparse_attention_tpu(q, k, v, block_mask, sizes, causal, interpret):
    """``block_sparse_attention._block_sparse_attention`` with the TPU backend's ``attend``
    (the same padding, tile lists and slicing)."""
    plan = C.make_plan(q.shape, k.shape, sizes, C.KernelConfig(backend="tpu"), q.dtype)
    mask = jnp.pad(block_mask, ((0, 0), (0, 0), (0, plan.num_q_blocks - block_mask.shape[2]),
                                (0, plan.num_k_blocks - block_mask.shape[3])))
    lists = lists_from_bits(tile_bits(mask, plan))
    qp, kp, vp = (C.pad_to(x, plan.n_pad, plan.d_pad) for x in (q, k, v))
    out = attend(qp, kp, vp, lists, None, plan, causal, interpret)
    return out[:, :, :plan.n, :plan.d]
