"""SALE kernels for Pallas Mosaic GPU (Hopper: TMA copies, WGMMA), ``plgpu.kernel``.

Same contracts as the Triton kernels (``block_sparse_attention.attend_triton``,
``estimate.estimate_triton``), same grid (query block fastest, batch, pack of h_p query
heads of one key head), one warpgroup per program holding ``rows`` = h_p b_q query rows
(a multiple of 64: the WGMMA M granule). Operands are bf16 (float32 inputs are cast:
WGMMA transposes need 16-bit types) with float32 accumulation; key / value tiles of the
kept list are gathered by TMA (``copy_gmem_to_smem`` at the listed offsets) into a
double buffer: the copy of tile t+1 is in flight while tile t is computed. Estimation
multiplies int8 codes on the int8 tensor cores (int32 accumulation).

Selection lists. A Mosaic GPU program cannot append to a compact list in global memory
(no scalar stores to GMEM), so the estimation kernel writes its dense per-tile bit masks
[B, P, nq, nt] (one TMA store of the row per program) and ``lists_from_bits`` (XLA)
compacts them for the attention kernel.
"""


import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import mosaic_gpu as plgpu

from pallas_kernels import _compat
from pallas_kernels.sale import config as C
from pallas_kernels.sale.common import (
    MASK_VALUE,
    PartialState,
    Selection,
    TileLists,
    base_range,
    candidate_tiles,
)

_ROW = plgpu.Layout.WGMMA.reduce(1)
_COL = plgpu.Layout.WGMMA.reduce(0)


def check_plan(plan: C.Plan) -> None:
    if plan.rows % 64:
        raise ValueError(f"the Mosaic GPU kernels need h_p b_q = {plan.rows} rows per program "
                         "to be a multiple of 64 (WGMMA); use block_q >= 64 or pack heads.")
    if plan.tile % 64:
        raise ValueError(f"the Mosaic GPU kernels need key tiles of a multiple of 64 keys, "
                         f"got {plan.tile} (KernelConfig.block_keys).")


def _smem_transforms(dtype, minor: int):
    """Tiling + swizzle for a [rows, minor] SMEM tile of ``dtype`` (WGMMA operands)."""
    swizzle = plgpu.find_swizzle(minor * jnp.dtype(dtype).itemsize * 8)
    elems = swizzle // jnp.dtype(dtype).itemsize
    return (plgpu.TilingTransform((8, elems)), plgpu.SwizzleTransform(swizzle))


# The Mosaic GPU interpreter (CPU) has no layouts: these helpers drop them there.


def _iota(shape, dim, interpret):
    if interpret:
        return lax.broadcasted_iota(jnp.int32, shape, dim)
    return plgpu.broadcasted_iota(jnp.int32, shape, dim, layout=plgpu.Layout.WGMMA)


def _cast(x, layout, interpret):
    return x if interpret else plgpu.layout_cast(x, layout)


def _load(ref, layout, interpret):
    return ref[...] if interpret else _compat.mgpu_load(ref, layout)


def _rows_of(plan: C.Plan, i, interpret):
    rows = _iota((plan.rows, plan.tile), 0, interpret)
    return rows // plan.block_q, i * plan.block_q + rows % plan.block_q


def _row_copies(plan, gmem, smem, barrier, b, c, i):
    """Copy the program's (h_p, b_q) rows of gmem [B, Hq, Np, ...] into smem [M, ...]."""
    for g in range(plan.heads_per_program):
        plgpu.copy_gmem_to_smem(gmem.at[b, c * plan.heads_per_program + g,
                                        pl.ds(i * plan.block_q, plan.block_q)],
                                smem.at[pl.ds(g * plan.block_q, plan.block_q)],
                                barrier.at[g])
    for g in range(plan.heads_per_program):
        plgpu.barrier_wait(barrier.at[g])


def _row_stores(plan, smem, gmem, b, c, i):
    for g in range(plan.heads_per_program):
        plgpu.copy_smem_to_gmem(smem.at[pl.ds(g * plan.block_q, plan.block_q)],
                                gmem.at[b, c * plan.heads_per_program + g,
                                        pl.ds(i * plan.block_q, plan.block_q)])


def _qk(q_smem, k_tile, m, n, interpret, acc_dtype=jnp.float32):
    """q_smem @ k_tile.T (WGMMA; the interpreter, which cannot read transposed refs,
    multiplies the loaded tiles)."""
    if interpret:
        return lax.dot_general(q_smem[...], k_tile[...], (((1,), (1,)), ((), ())),
                               preferred_element_type=acc_dtype)

    def scope(acc_ref):
        plgpu.wgmma(acc_ref, q_smem, _compat.mgpu_transpose_ref(k_tile, (1, 0)))
        return acc_ref[...]

    return pl.run_scoped(scope, plgpu.ACC((m, n), acc_dtype))


def _mma_acc(acc, a, b_tile, interpret: bool):
    """acc + a @ b_tile on the tensor cores (accumulating in place on a GPU)."""
    if interpret:  # the Mosaic GPU interpreter has no run_state
        return acc + jnp.dot(a, b_tile[...], preferred_element_type=jnp.float32)

    def mma(acc_ref):
        plgpu.wgmma(acc_ref, a, b_tile)

    return pl.run_state(mma)(plgpu.ACC.init(acc))


def _softmax_step(m, l_sum, acc, s2, v_tile, dtype, interpret):
    m_new = jnp.maximum(m, s2.max(axis=1))
    p = jnp.exp2(s2 - lax.broadcast_in_dim(m_new, s2.shape, [0]))
    alpha = jnp.exp2(m - m_new)
    l_sum = l_sum * alpha + p.sum(axis=1)
    acc = acc * lax.broadcast_in_dim(alpha, acc.shape, [0])
    if v_tile is None:
        return m_new, l_sum, acc
    return m_new, l_sum, _mma_acc(acc, p.astype(dtype), v_tile, interpret)


def _kv_copy(k_gmem, v_gmem, k_smem, v_smem, k_bar, v_bar, b, kvh, start, tile, slot):
    src = (b, kvh, pl.ds(start, tile))
    plgpu.copy_gmem_to_smem(k_gmem.at[src], k_smem.at[slot], k_bar.at[slot])
    if v_gmem is not None:
        plgpu.copy_gmem_to_smem(v_gmem.at[src], v_smem.at[slot], v_bar.at[slot])


def attend(q, k, v, lists: TileLists, init: PartialState | None, plan: C.Plan,
           config: C.KernelConfig, causal: bool, interpret: bool):
    """Block-sparse attention over ``lists`` (inputs padded; see the module docstring)."""
    del config
    check_plan(plan)
    out_dtype = q.dtype
    dtype = jnp.bfloat16 if q.dtype == jnp.float32 else q.dtype
    q, k, v = (x.astype(dtype) for x in (q, k, v))
    m_rows, tile, d = plan.rows, plan.tile, plan.d_pad
    hp, ppk = plan.heads_per_program, plan.programs_per_kv_head
    has_init = init is not None
    tr = _smem_transforms(dtype, d)

    def body(idx_gmem, bits_gmem, cnt_gmem, q_gmem, k_gmem, v_gmem, *rest):
        if has_init:
            o0_gmem, m0_gmem, l0_gmem, o_gmem, *scratch = rest
        else:
            o_gmem, *scratch = rest
        q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, *init_scratch = scratch
        i, b, c = lax.axis_index("q"), lax.axis_index("b"), lax.axis_index("h")
        kvh = lax.div(c, jnp.int32(ppk))
        cnt = cnt_gmem[b, c, i]
        head, pos = _rows_of(plan, i, interpret)
        col = _iota((m_rows, tile), 1, interpret)

        @pl.when(cnt > 0)
        def _():
            start = idx_gmem[b, c, i, 0] * tile
            _kv_copy(k_gmem, v_gmem, k_smem, v_smem, k_bar, v_bar, b, kvh, start, tile, 0)

        _row_copies(plan, q_gmem, q_smem, q_bar, b, c, i)
        if has_init:
            o0_smem, m0_smem, l0_smem, i_bar = init_scratch
            _row_copies(plan, o0_gmem, o0_smem, i_bar, b, c, i)
            _row_copies(plan, m0_gmem, m0_smem, i_bar, b, c, i)
            _row_copies(plan, l0_gmem, l0_smem, i_bar, b, c, i)
            m = _load(m0_smem, _ROW, interpret)
            l_sum = _load(l0_smem, _ROW, interpret)
            acc = _load(o0_smem, plgpu.Layout.WGMMA, interpret)
            acc = acc * lax.broadcast_in_dim(l_sum, acc.shape, [0])
        else:
            m = _cast(jnp.full((m_rows,), MASK_VALUE, jnp.float32), _ROW, interpret)
            l_sum = _cast(jnp.zeros((m_rows,), jnp.float32), _ROW, interpret)
            acc = _cast(jnp.zeros((m_rows, d), jnp.float32), plgpu.Layout.WGMMA, interpret)

        def step(t, carry):
            m, l_sum, acc = carry
            slot = lax.rem(t, 2)

            @pl.when(t + 1 < cnt)
            def _():
                nxt = idx_gmem[b, c, i, t + 1] * tile
                _kv_copy(k_gmem, v_gmem, k_smem, v_smem, k_bar, v_bar, b, kvh, nxt, tile,
                         1 - slot)

            start = idx_gmem[b, c, i, t] * tile
            bits = bits_gmem[b, c, i, t]
            plgpu.barrier_wait(k_bar.at[slot])
            s2 = _qk(q_smem, k_smem.at[slot], m_rows, tile, interpret) * plan.scale2
            shift = head * plan.sub + col // plan.block_k
            keep = ((bits >> shift) & 1) != 0
            key = start + col
            if causal:
                keep = keep & (key <= pos)
            if plan.padded:
                keep = keep & (key < plan.n)
            s2 = jnp.where(keep, s2, MASK_VALUE)
            plgpu.barrier_wait(v_bar.at[slot])
            return _softmax_step(m, l_sum, acc, s2, v_smem.at[slot], dtype, interpret)

        m, l_sum, acc = lax.fori_loop(0, cnt, step, (m, l_sum, acc))
        l_safe = jnp.where(l_sum > 0, l_sum, 1.0)
        out = acc / lax.broadcast_in_dim(l_safe, acc.shape, [0])
        q_smem[...] = out.astype(dtype)
        plgpu.commit_smem()
        _row_stores(plan, q_smem, o_gmem, b, c, i)
        plgpu.wait_smem_to_gmem(0)

    scratch = [plgpu.SMEM((m_rows, d), dtype, transforms=tr),
               plgpu.SMEM((2, tile, d), dtype, transforms=tr),
               plgpu.SMEM((2, tile, d), dtype, transforms=tr),
               plgpu.Barrier(num_barriers=hp), plgpu.Barrier(num_barriers=2),
               plgpu.Barrier(num_barriers=2)]
    args = [lists.index, lists.bits, lists.count, q, k, v]
    if has_init:
        scratch += [plgpu.SMEM((m_rows, d), jnp.float32,
                               transforms=_smem_transforms(jnp.float32, d)),
                    plgpu.SMEM((m_rows,), jnp.float32),
                    plgpu.SMEM((m_rows,), jnp.float32), plgpu.Barrier(num_barriers=hp)]
        args += [init.out, init.m2, init.l_sum]
    out = plgpu.kernel(
        body, out_type=jax.ShapeDtypeStruct(q.shape, dtype), scratch_types=scratch,
        grid=(plan.num_q_blocks, plan.batch, plan.num_programs_h), grid_names=("q", "b", "h"),
        compiler_params=plgpu.CompilerParams(approx_math=True),
        interpret=_interpret_params() if interpret else None,
    )(*args)
    return out.astype(out_dtype)


def _interpret_params():
    from jax._src.pallas.mosaic_gpu.interpret.params import InterpretGPUParams

    return InterpretGPUParams()


def estimate(p, plan: C.Plan, config: C.KernelConfig, causal: bool, interpret: bool):
    """Estimation + selection (``estimate.estimate_triton``'s contract) on Mosaic GPU.

    The exact always-kept pass and the candidate pass run in two ``run_scoped`` regions,
    so their shared-memory buffers (bf16 Q / K / V tiles and the float32 output tile; int8
    codes and per-key vectors) reuse the same space.
    """
    del config
    check_plan(plan)
    dtype = jnp.bfloat16 if p.q.dtype == jnp.float32 else p.q.dtype
    has_v = p.v is not None
    q, k = p.q.astype(dtype), p.k.astype(dtype)
    v = p.v.astype(dtype) if has_v else None
    m_rows, tile, d, r = plan.rows, plan.tile, plan.d_pad, plan.sub
    hp, ppk = plan.heads_per_program, plan.programs_per_kv_head
    b_, np_, nq, nt = plan.batch, plan.num_programs_h, plan.num_q_blocks, plan.num_tiles
    tr, tr8 = _smem_transforms(dtype, d), _smem_transforms(jnp.int8, d)

    def body(*refs):
        if has_v:
            (q_gmem, k_gmem, v_gmem, qc_gmem, kc_gmem, ks_gmem, c2_gmem, rcoef_gmem,
             rbias_gmem, idx_gmem, bits_gmem, cnt_gmem, o_gmem, m_gmem, l_gmem) = refs
        else:
            (q_gmem, k_gmem, qc_gmem, kc_gmem, ks_gmem, c2_gmem, rcoef_gmem, rbias_gmem,
             idx_gmem, bits_gmem, cnt_gmem) = refs
            v_gmem = None
        i, b, c = lax.axis_index("q"), lax.axis_index("b"), lax.axis_index("h")
        kvh = lax.div(c, jnp.int32(ppk))
        head, pos = _rows_of(plan, i, interpret)
        col = _iota((m_rows, tile), 1, interpret)
        col_blk = col // plan.block_k
        lo, diag_end = base_range(plan, i)

        # 1. Exact pass over the always-kept blocks (sink tile + [t_lo, t_hi)).
        def base_phase(q_smem, k_smem, v_smem, q_bar, k_bar, v_bar, *out_smem):
            t_lo, t_hi = lo // r, (diag_end + r - 1) // r
            extra = (t_lo > 0).astype(jnp.int32)
            n_base = t_hi - t_lo + extra

            def base_tile(u):
                return jnp.where(u < extra, 0, t_lo + u - extra)

            _kv_copy(k_gmem, v_gmem, k_smem, v_smem, k_bar, v_bar, b, kvh,
                     base_tile(0) * tile, tile, 0)
            _row_copies(plan, q_gmem, q_smem, q_bar, b, c, i)

            def base_step(u, carry):
                m, l_sum, acc = carry
                slot = lax.rem(u, 2)

                @pl.when(u + 1 < n_base)
                def _():
                    _kv_copy(k_gmem, v_gmem, k_smem, v_smem, k_bar, v_bar, b, kvh,
                             base_tile(u + 1) * tile, tile, 1 - slot)

                t = base_tile(u)
                plgpu.barrier_wait(k_bar.at[slot])
                s2 = _qk(q_smem, k_smem.at[slot], m_rows, tile, interpret) * plan.scale2
                blk = t * r + col_blk
                keep = (blk == 0) | ((blk >= lo) & (blk < diag_end))
                key = t * tile + col
                if causal:
                    keep = keep & (key <= pos)
                if plan.padded:
                    keep = keep & (key < plan.n)
                s2 = jnp.where(keep, s2, MASK_VALUE)
                if not has_v:
                    return _softmax_step(m, l_sum, acc, s2, None, dtype, interpret)
                plgpu.barrier_wait(v_bar.at[slot])
                return _softmax_step(m, l_sum, acc, s2, v_smem.at[slot], dtype, interpret)

            m = _cast(jnp.full((m_rows,), MASK_VALUE, jnp.float32), _ROW, interpret)
            l_sum = _cast(jnp.zeros((m_rows,), jnp.float32), _ROW, interpret)
            acc = _cast(jnp.zeros((m_rows, d if has_v else 64), jnp.float32),
                        plgpu.Layout.WGMMA, interpret)
            m2, l_sum, acc = lax.fori_loop(0, n_base, base_step, (m, l_sum, acc))
            if has_v:
                o_smem, m_smem, l_smem = out_smem
                o_smem[...] = acc / lax.broadcast_in_dim(l_sum, acc.shape, [0])
                m_smem[...] = m2
                l_smem[...] = l_sum
                plgpu.commit_smem()
                _row_stores(plan, o_smem, o_gmem, b, c, i)
                _row_stores(plan, m_smem, m_gmem, b, c, i)
                _row_stores(plan, l_smem, l_gmem, b, c, i)
                plgpu.wait_smem_to_gmem(0)  # before the scope hands the buffers back
            return m2, l_sum

        base_scratch = [plgpu.SMEM((m_rows, d), dtype, transforms=tr),
                        plgpu.SMEM((2, tile, d), dtype, transforms=tr),
                        plgpu.SMEM((2, tile, d), dtype, transforms=tr) if has_v else None,
                        plgpu.Barrier(num_barriers=hp), plgpu.Barrier(num_barriers=2),
                        plgpu.Barrier(num_barriers=2) if has_v else None]
        if has_v:
            base_scratch += [plgpu.SMEM((m_rows, d), jnp.float32,
                                        transforms=_smem_transforms(jnp.float32, d)),
                             plgpu.SMEM((m_rows,), jnp.float32),
                             plgpu.SMEM((m_rows,), jnp.float32)]
        m2, l_sum = pl.run_scoped(base_phase, *base_scratch)

        # 2. Keep test on the candidate tiles (int8 WGMMA), log2 space on the row max.
        def cand_phase(qc_smem, kc_smem, ks_smem, c2_smem, rc_smem, rb_smem, qc_bar, kc_bar,
                       ks_bar, c2_bar, rc_bar, rb_bar):
            trip1, start2, trip = candidate_tiles(plan, lo, diag_end, causal)

            def cand_tile(u):
                return jnp.where(u < trip1, u, start2 + u - trip1)

            def cand_copy(u, slot):
                start = cand_tile(u) * tile
                plgpu.copy_gmem_to_smem(kc_gmem.at[b, kvh, pl.ds(start, tile)],
                                        kc_smem.at[slot], kc_bar.at[slot])
                plgpu.copy_gmem_to_smem(ks_gmem.at[b, kvh, pl.ds(start, tile)],
                                        ks_smem.at[slot], ks_bar.at[slot])
                for g in range(hp):
                    plgpu.copy_gmem_to_smem(c2_gmem.at[b, c * hp + g, pl.ds(start, tile)],
                                            c2_smem.at[slot, g], c2_bar.at[slot * hp + g])

            @pl.when(trip > 0)
            def _():
                cand_copy(0, 0)

            _row_copies(plan, qc_gmem, qc_smem, qc_bar, b, c, i)
            _row_copies(plan, rcoef_gmem, rc_smem, rc_bar, b, c, i)
            _row_copies(plan, rbias_gmem, rb_smem, rb_bar, b, c, i)
            rcoef = _load(rc_smem, _ROW, interpret)
            thr = m2 + jnp.log2(l_sum) + _load(rb_smem, _ROW, interpret)
            if interpret:
                head_row = lax.broadcasted_iota(jnp.int32, (m_rows,), 0) // plan.block_q
            else:
                head_row = plgpu.broadcasted_iota(jnp.int32, (m_rows,), 0,
                                                  layout=_ROW) // plan.block_q

            def cand_step(u, cnt):
                slot = lax.rem(u, 2)

                @pl.when(u + 1 < trip)
                def _():
                    cand_copy(u + 1, 1 - slot)

                t = cand_tile(u)
                plgpu.barrier_wait(kc_bar.at[slot])
                prod = _qk(qc_smem, kc_smem.at[slot], m_rows, tile, interpret, jnp.int32)
                plgpu.barrier_wait(ks_bar.at[slot])
                ks = _load(ks_smem.at[slot], _COL, interpret)
                coef = (lax.broadcast_in_dim(rcoef, (m_rows, tile), [0])
                        * lax.broadcast_in_dim(ks, (m_rows, tile), [1]))
                c_rows = None
                for g in range(hp):
                    plgpu.barrier_wait(c2_bar.at[slot * hp + g])
                    cg = lax.broadcast_in_dim(_load(c2_smem.at[slot, g], _COL, interpret),
                                              (m_rows, tile), [1])
                    c_rows = cg if c_rows is None else jnp.where(head == g, cg, c_rows)
                val = (prod.astype(jnp.float32) * coef + c_rows
                       - lax.broadcast_in_dim(thr, (m_rows, tile), [0]))
                blk = t * r + col_blk
                cand = (blk >= 1) & (blk < lo)
                if not causal:
                    cand = cand | (blk >= diag_end)
                if plan.padded:
                    cand = cand & (t * tile + col < plan.n)
                val = jnp.where(cand, val, -jnp.inf)
                bits = jnp.int32(0)
                for s_ in range(r):
                    row_max = jnp.where(col_blk == s_, val, -jnp.inf).max(axis=1)
                    for g in range(hp):
                        hit = jnp.where(head_row == g, row_max, -jnp.inf).max(axis=0) > 0
                        bits = bits | (hit.astype(jnp.int32) << (g * r + s_))
                idx_gmem[b, c, i, cnt] = t  # scalar stores: overwritten unless kept
                bits_gmem[b, c, i, cnt] = bits
                return cnt + (bits != 0).astype(jnp.int32)

            cnt_gmem[b, c, i] = lax.fori_loop(0, trip, cand_step, jnp.int32(0))

        pl.run_scoped(
            cand_phase, plgpu.SMEM((m_rows, d), jnp.int8, transforms=tr8),
            plgpu.SMEM((2, tile, d), jnp.int8, transforms=tr8),
            plgpu.SMEM((2, tile), jnp.float32), plgpu.SMEM((2, hp, tile), jnp.float32),
            plgpu.SMEM((m_rows,), jnp.float32), plgpu.SMEM((m_rows,), jnp.float32),
            plgpu.Barrier(num_barriers=hp), plgpu.Barrier(num_barriers=2),
            plgpu.Barrier(num_barriers=2), plgpu.Barrier(num_barriers=2 * hp),
            plgpu.Barrier(num_barriers=hp), plgpu.Barrier(num_barriers=hp))

    args = [q, k] + ([v] if has_v else []) + [p.qc, p.kc, p.kscale, p.c2, p.rcoef, p.rbias]
    out_type = [jax.ShapeDtypeStruct((b_, np_, nq, nt), jnp.int32),
                jax.ShapeDtypeStruct((b_, np_, nq, nt), jnp.int32),
                jax.ShapeDtypeStruct((b_, np_, nq), jnp.int32)]
    if has_v:
        n_pad, hq = plan.n_pad, plan.q_heads
        out_type += [jax.ShapeDtypeStruct((b_, hq, n_pad, d), jnp.float32),
                     jax.ShapeDtypeStruct((b_, hq, n_pad), jnp.float32),
                     jax.ShapeDtypeStruct((b_, hq, n_pad), jnp.float32)]
    outs = plgpu.kernel(
        body, out_type=out_type, grid=(nq, b_, np_), grid_names=("q", "b", "h"),
        compiler_params=plgpu.CompilerParams(approx_math=True),
        interpret=_interpret_params() if interpret else None,
    )(*args)
    lists = TileLists(*outs[:3])
    return Selection(lists, PartialState(*outs[3:]) if has_v else None)
