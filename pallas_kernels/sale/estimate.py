"""SALE estimation + selection as a Pallas kernel, fused with the exact always-kept pass.

Outside the kernel (elementwise, cheap, XLA): per-head smoothing, symmetric per-block
int8/int4 codes (int4 codes are stored in int8: no int4 tensor cores on Hopper, and
Triton has no int4 type), and per-row / per-key terms with log2(e) / sqrt(D) folded in:
the row coefficient a_i = s_q(i) log2(e) / sqrt(D), the key scales s_k(j), the per
(head, key) smoothing term c_hj = mq_h . K_s,j and the row bias
b_i = log2(tau_h) - (Q_s,i . mk + mq . mk) log2(e) / sqrt(D) (+inf on padded rows).

The kernel, one program per (query block, batch, pack of h_p query heads sharing a key
head; query block fastest), holding h_p b_q query rows:

1. exact attention over the always-kept keys (the sink block and the contiguous local +
   diagonal range, causal-masked on the diagonal) with an online max / sum in base 2:
   row max m2_i, row sum l_i and, when ``v`` is given, the normalised partial output. The
   attention kernel starts from this state, so these blocks are never attended twice;
2. the keep test in log space on the row maximum, per element of the candidate blocks:
   RAS_ij = exp(S~_ij - m_i) / l_i > tau  <=>  S~2_ij > m2_i + log2(l_i) + log2(tau)
   with S~2_ij = a_i s_k(j) (C_q C_k^T)_ij + c_hj + ... (int8 product, int32 accumulation),
   i.e. one multiply-add and a compare per element, no exp, no divide;
3. candidate tiles only: blocks before the local window and, when not causal, after the
   diagonal; a causal row block stops at its local window (no work above the diagonal);
4. per kept tile an (h_p x r)-bit mask of kept (head, selection block) pairs, appended to a
   compact list (``kv_index``, ``kv_bits``, ``kv_count``): no RAS values are written.

This file holds the Triton form (also what ``interpret=True`` runs for ``backend="triton"``);
``mosaic_gpu.estimate`` (int8 WGMMA, TMA double buffering) and
``block_sparse_attention_tpu.estimate`` (scalar-prefetched candidate tiles) implement the
same contract; ``KernelConfig.backend`` picks one per call.

Checks (before the jitted body, via ``reference._check_qkv`` and ``_checks``): q, k (and v)
4-D floating arrays with matching batch / length / head dim, GQA heads; ``bits`` 8 or 4;
``tau`` a scalar or [Hq] in [0, inf), no NaN (values only when concrete); ``config`` a
``KernelConfig``. Nothing is checked inside the kernel.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from pallas_kernels.sale import _checks
from pallas_kernels.sale import config as C
from pallas_kernels.sale import reference as ref
from pallas_kernels.sale.block_sparse_attention import attend
from pallas_kernels.sale.common import (
    MASK_VALUE,
    PartialState,
    Selection,
    TileLists,
    base_range,
    candidate_tiles,
    dot_f32,
    kv_spec,
    list_specs,
    lists_to_block_mask,
    load_rows,
    row_layout,
    row_spec,
    store_rows,
)
from pallas_kernels.sale.reference import BlockSizes


class Prepared(NamedTuple):
    """Padded inputs of the estimation kernel (see the module docstring)."""

    q: jax.Array        # [B, Hq, Np, Dp] input dtype
    k: jax.Array        # [B, Hk, Np, Dp]
    v: jax.Array | None
    qc: jax.Array       # [B, Hq, Np, Dp] int8 codes
    kc: jax.Array       # [B, Hk, Np, Dp] int8 codes
    kscale: jax.Array   # [B, Hk, Np] per-key scale (its block's)
    c2: jax.Array       # [B, Hq, Np] mq_h . K_s,j  log2(e) / sqrt(D)
    rcoef: jax.Array    # [B, Hq, Np] s_q(i) log2(e) / sqrt(D)
    rbias: jax.Array    # [B, Hq, Np] log2(tau) - row offset (+inf on padded rows)


def prepare(q, k, v, tau, plan: C.Plan, bits: int) -> Prepared:
    b, hq, n, d = q.shape
    hk, groups = plan.kv_heads, plan.groups
    n_pad, d_pad = plan.n_pad, plan.d_pad
    qs, ks, mq, mk = ref.smooth(q, k)
    qc, qscale = ref.quantize_blocks(C.pad_to(qs, n_pad, d_pad), plan.block_q, bits)
    kc, kscale = ref.quantize_blocks(C.pad_to(ks, n_pad, d_pad), plan.block_k, bits)
    kscale = jnp.repeat(kscale[..., 0, 0], plan.block_k, axis=-1)
    rcoef = jnp.repeat(qscale[..., 0, 0], plan.block_q, axis=-1) * plan.scale2
    mq_g = mq[:, :, 0].reshape(b, hk, groups, d)
    c = jnp.einsum("bkgd,bknd->bkgn", mq_g, ks).reshape(b, hq, n)
    mk_rep = ref._repeat_kv(mk, groups)
    off = (qs * mk_rep).sum(-1) + (mq * mk_rep).sum(-1)  # [B, Hq, N]
    tau = jnp.broadcast_to(jnp.asarray(tau, jnp.float32), (hq,))
    rbias = jnp.log2(tau)[None, :, None] - off * plan.scale2
    pad = ((0, 0), (0, 0), (0, n_pad - n))
    return Prepared(
        C.pad_to(q, n_pad, d_pad), C.pad_to(k, n_pad, d_pad),
        None if v is None else C.pad_to(v, n_pad, d_pad), qc, kc, kscale,
        jnp.pad(c * plan.scale2, pad), rcoef, jnp.pad(rbias, pad, constant_values=jnp.inf))


def keep_bits(val, head, plan: C.Plan):
    """int32 (h_p x r)-bit mask: bit g r + s set if some row of head g has val > 0 in
    selection block s of the tile (val: [M, tile], -inf where not a candidate)."""
    col_blk = jnp.arange(plan.tile)[None, :] // plan.block_k
    bits = jnp.int32(0)
    for s in range(plan.sub):
        blk_val = val if plan.sub == 1 else jnp.where(col_blk == s, val, -jnp.inf)
        row_max = blk_val.max(axis=1)
        for g in range(plan.heads_per_program):
            if plan.heads_per_program == 1:
                hit = row_max.max() > 0
            else:
                hit = jnp.where(head[:, 0] == g, row_max, -jnp.inf).max() > 0
            bits = bits | (hit.astype(jnp.int32) << (g * plan.sub + s))
    return bits


def _estimate_kernel(q_ref, k_ref, *refs, plan: C.Plan, causal: bool, has_v: bool):
    if has_v:
        (v_ref, qc_ref, kc_ref, ks_ref, c2_ref, rcoef_ref, rbias_ref,
         idx_ref, bits_ref, cnt_ref, o_ref, m_ref, l_ref) = refs
    else:
        (qc_ref, kc_ref, ks_ref, c2_ref, rcoef_ref, rbias_ref,
         idx_ref, bits_ref, cnt_ref) = refs
    i = pl.program_id(0)
    head, pos = row_layout(plan, i)
    tile, r, hp = plan.tile, plan.sub, plan.heads_per_program
    col = jnp.arange(tile)[None, :]
    col_blk = col // plan.block_k
    lo, diag_end = base_range(plan, i)

    # 1. Exact pass over the always-kept blocks: sink + [lo, diag_end).
    q = load_rows(q_ref, plan)
    t_lo, t_hi = lo // r, (diag_end + r - 1) // r
    extra = (t_lo > 0).astype(jnp.int32)  # the sink tile, when outside [t_lo, t_hi)

    def base_body(u, carry):
        m, l_sum, acc = carry
        t = jnp.where(u < extra, 0, t_lo + u - extra)
        start = t * tile
        s2 = dot_f32(q, k_ref[pl.ds(start, tile), :], trans_b=True) * plan.scale2
        blk = t * r + col_blk
        keep = (blk == 0) | ((blk >= lo) & (blk < diag_end))
        key = start + col
        if causal:
            keep = keep & (key <= pos)
        if plan.padded:
            keep = keep & (key < plan.n)
        s2 = jnp.where(keep, s2, MASK_VALUE)
        m_new = jnp.maximum(m, s2.max(-1))
        p = jnp.exp2(s2 - m_new[:, None])
        alpha = jnp.exp2(m - m_new)
        if has_v:
            vb = v_ref[pl.ds(start, tile), :]
            acc = acc * alpha[:, None] + dot_f32(p.astype(vb.dtype), vb)
        return m_new, l_sum * alpha + p.sum(-1), acc

    init = (jnp.full((plan.rows,), MASK_VALUE, jnp.float32), jnp.zeros((plan.rows,), jnp.float32),
            jnp.zeros((plan.rows, plan.d_pad), jnp.float32) if has_v else jnp.float32(0))
    m2, l_sum, acc = jax.lax.fori_loop(0, t_hi - t_lo + extra, base_body, init)
    if has_v:
        store_rows(o_ref, acc / l_sum[:, None], plan)
        store_rows(m_ref, m2, plan)
        store_rows(l_ref, l_sum, plan)

    # 2. Keep test on the candidate tiles, in log2 space on the row maximum.
    thr = m2 + jnp.log2(l_sum) + load_rows(rbias_ref, plan)
    qc = load_rows(qc_ref, plan)
    rcoef = load_rows(rcoef_ref, plan)
    trip1, start2, trip = candidate_tiles(plan, lo, diag_end, causal)

    def cand_body(u, cnt):
        t = jnp.where(u < trip1, u, start2 + u - trip1)
        start = t * tile
        prod = jax.lax.dot_general(qc, kc_ref[pl.ds(start, tile), :], (((1,), (1,)), ((), ())),
                                   preferred_element_type=jnp.int32)
        if hp == 1:
            c_rows = c2_ref[pl.ds(start, tile)][None, :]
        else:
            c_rows = jnp.zeros((plan.rows, tile), jnp.float32)
            for g in range(hp):
                c_rows = jnp.where(head == g, c2_ref[g, pl.ds(start, tile)][None, :], c_rows)
        coef = rcoef[:, None] * ks_ref[pl.ds(start, tile)][None, :]
        val = prod.astype(jnp.float32) * coef + (c_rows - thr[:, None])
        blk = t * r + col_blk
        cand = (blk >= 1) & (blk < lo)
        if not causal:
            cand = cand | (blk >= diag_end)
        if plan.padded:
            cand = cand & (start + col < plan.n)
        bits = keep_bits(jnp.where(cand, val, -jnp.inf), head, plan)
        idx_ref[cnt] = t  # overwritten unless kept; entries past the count are unused
        bits_ref[cnt] = bits
        return cnt + (bits != 0).astype(jnp.int32)

    cnt_ref[0] = jax.lax.fori_loop(0, trip, cand_body, jnp.int32(0))


def estimate_triton(p: Prepared, plan: C.Plan, config: C.KernelConfig, causal: bool,
                    interpret: bool) -> Selection:
    b, hq = plan.batch, plan.q_heads
    nq, nt, np_ = plan.num_q_blocks, plan.num_tiles, plan.num_programs_h
    has_v = p.v is not None
    hp, ppk = plan.heads_per_program, plan.programs_per_kv_head
    kvec = pl.BlockSpec((None, None, plan.n_pad), lambda i, b_, c: (b_, c // ppk, 0))
    cvec = pl.BlockSpec((None, None if hp == 1 else hp, plan.n_pad), lambda i, b_, c: (b_, c, 0))
    in_specs = [row_spec(plan, plan.d_pad), kv_spec(plan)]
    args = [p.q, p.k]
    if has_v:
        in_specs.append(kv_spec(plan))
        args.append(p.v)
    in_specs += [row_spec(plan, plan.d_pad), kv_spec(plan), kvec, cvec, row_spec(plan),
                 row_spec(plan)]
    args += [p.qc, p.kc, p.kscale, p.c2, p.rcoef, p.rbias]
    out_specs = list_specs(plan)
    out_shape = [jax.ShapeDtypeStruct((b, np_, nq, nt), jnp.int32),
                 jax.ShapeDtypeStruct((b, np_, nq, nt), jnp.int32),
                 jax.ShapeDtypeStruct((b, np_, nq), jnp.int32)]
    if has_v:
        out_specs += [row_spec(plan, plan.d_pad), row_spec(plan), row_spec(plan)]
        out_shape += [jax.ShapeDtypeStruct((b, hq, plan.n_pad, plan.d_pad), jnp.float32),
                      jax.ShapeDtypeStruct((b, hq, plan.n_pad), jnp.float32),
                      jax.ShapeDtypeStruct((b, hq, plan.n_pad), jnp.float32)]
    kernel = functools.partial(_estimate_kernel, plan=plan, causal=causal, has_v=has_v)
    outs = pl.pallas_call(
        kernel, grid=(nq, b, np_), in_specs=in_specs, out_specs=out_specs,
        out_shape=out_shape,
        compiler_params=None if interpret else C.triton_params(plan, config),
        interpret=interpret, name="sale_estimate_select",
    )(*args)
    lists = TileLists(*outs[:3])
    return Selection(lists, PartialState(*outs[3:]) if has_v else None)


def estimate(p: Prepared, plan: C.Plan, config: C.KernelConfig, causal: bool,
             interpret: bool) -> Selection:
    """Dispatch to the backend's estimation kernel (inputs prepared and padded)."""
    if config.backend == "mosaic_gpu":
        from pallas_kernels.sale import mosaic_gpu

        return mosaic_gpu.estimate(p, plan, config, causal, interpret)
    if config.backend == "tpu":
        from pallas_kernels.sale import block_sparse_attention_tpu

        return block_sparse_attention_tpu.estimate(p, plan, causal, interpret)
    return estimate_triton(p, plan, config, causal, interpret)


# ----------------------------------------------------------------------------- public API


def _check_inputs(q, k, v, tau, sizes, bits, config):
    ref._check_qkv(q, k, k if v is None else v, sizes)
    ref._check_bits(bits)
    _checks.check_tau(tau, q.shape[1])
    return C.check_config(config)


def estimate_and_select(q, k, tau, sizes: BlockSizes = BlockSizes(), bits: int = 8,
                        causal: bool = False, interpret: bool = False, *, v=None,
                        config: C.KernelConfig = C.DEFAULT_CONFIG) -> Selection:
    """SALE's estimation kernel: kept tiles (and, with ``v``, the always-kept attention).

    Args:
      q: [B, Hq, N, D]; k: [B, Hk, N, D]; any N and D (padded inside).
      tau: scalar or [Hq] thresholds.
      sizes, bits, causal: as in ``reference.block_keep_mask``.
      interpret: run in the Pallas interpreter.
      v: [B, Hk, N, D] values; when given the exact attention over the always-kept blocks
        is returned too (``Selection.state``, padded shapes).
      config: KernelConfig (backend, tiles).

    Returns:
      ``Selection`` on the padded grid of ``config.make_plan``; ``kept_block_mask`` turns it
      into the [B, Hq, nq, nk] mask of ``reference.block_keep_mask``.
    """
    config = _check_inputs(q, k, v, tau, sizes, bits, config)
    return _estimate_and_select(q, k, v, tau, sizes, bits, causal, interpret, config)


@functools.partial(jax.jit, static_argnames=("sizes", "bits", "causal", "interpret", "config"))
def _estimate_and_select(q, k, v, tau, sizes, bits, causal, interpret, config):
    plan = C.make_plan(q.shape, k.shape, sizes, config, q.dtype)
    return estimate(prepare(q, k, v, tau, plan, bits), plan, config, causal, interpret)


def kept_block_mask(selection: Selection, q_shape, k_shape, sizes: BlockSizes = BlockSizes(),
                    causal: bool = False, config: C.KernelConfig = C.DEFAULT_CONFIG):
    """The block mask a kernel ``Selection`` stands for: always-kept blocks plus the
    selected ones, comparable with ``reference.block_keep_mask``.

    Args:
      selection: from ``estimate_and_select`` / ``sale_attention_pallas``.
      q_shape, k_shape: the [B, Hq, N, D] / [B, Hk, N, D] shapes of that call.
      sizes, causal, config: those of that call.

    Returns:
      [B, Hq, ceil(N / b_q), nk] bool, nk = ceil(N / b_q) * b_q / b_k key blocks.

    Raises:
      TypeError: ``selection`` not a ``Selection``, or a shape that is not a tuple.
      ValueError: a shape that is not four positive sizes, or query heads that the
        selection's programs do not divide (the shapes of another call), and
        ``make_plan``'s checks.

    Example:
      >>> import jax
      >>> from pallas_kernels.sale import BlockSizes, kept_block_mask, sale_attention_pallas
      >>> q = k = v = jax.random.normal(jax.random.key(0), (1, 2, 32, 8))  # [B, H, N, D]
      >>> _, sel = sale_attention_pallas(q, k, v, 0.05, BlockSizes(8, 8, 8), interpret=True)
      >>> kept_block_mask(sel, q.shape, k.shape, BlockSizes(8, 8, 8)).shape
      (1, 2, 4, 4)
    """
    for name, shape in (("q_shape", q_shape), ("k_shape", k_shape)):
        if not isinstance(shape, tuple | list):
            raise TypeError(f"`{name}` must be the [B, H, N, D] shape tuple of the call "
                            f"(e.g. q.shape), got {type(shape).__name__}.")
        if len(shape) != 4 or not all(isinstance(x, int | np.integer)
                                      and not isinstance(x, bool) and x >= 1 for x in shape):
            raise ValueError(f"`{name}` must be four positive sizes [B, H, N, D], got "
                             f"{tuple(shape)}.")
    if not isinstance(selection, Selection):
        raise TypeError(f"`selection` must be the Selection of estimate_and_select / "
                        f"sale_attention_pallas, got {type(selection).__name__}.")
    config = C.check_config(config)
    programs = selection.lists.index.shape[1]  # P = Hq / h_p of the plan that made it
    if q_shape[1] % programs:
        raise ValueError(f"`q_shape` {tuple(q_shape)} has {q_shape[1]} query heads, not a "
                         f"multiple of the selection's {programs} programs: the shapes of "
                         "another call (or of the [B, N, H, D] layout)?")
    plan = C.make_plan(q_shape, k_shape, sizes, config, heads_per_program=q_shape[1] // programs)
    nq = ref.padded_length(plan.n, sizes) // sizes.block_q
    nk = nq * (sizes.block_q // sizes.block_k)
    listed = lists_to_block_mask(selection.lists, plan)[:, :, :nq, :nk]
    return listed | ref.always_kept_blocks(plan.n, sizes, causal)[None, None]


def sale_attention_pallas(q, k, v, tau, sizes: BlockSizes = BlockSizes(), bits: int = 8,
                          causal: bool = False, interpret: bool = False,
                          config: C.KernelConfig = C.DEFAULT_CONFIG):
    """SALE end to end with the two kernels: (output [B, Hq, N, D], ``Selection``).

    The attention kernel starts from the estimation kernel's exact always-kept pass and
    visits only the selected tiles. Any N and D.
    """
    config = _check_inputs(q, k, v, tau, sizes, bits, config)
    return _sale_attention_pallas(q, k, v, tau, sizes, bits, causal, interpret, config)


@functools.partial(jax.jit, static_argnames=("sizes", "bits", "causal", "interpret", "config"))
def _sale_attention_pallas(q, k, v, tau, sizes, bits, causal, interpret, config):
    plan = C.make_plan(q.shape, k.shape, sizes, config, q.dtype)
    p = prepare(q, k, v, tau, plan, bits)
    sel = estimate(p, plan, config, causal, interpret)
    # Selected tiles of a causal row block lie strictly below its diagonal: no causal mask.
    out = attend(p.q, p.k, p.v, sel.lists, sel.state, plan, config, False, interpret)
    return out[:, :, :plan.n, :plan.d], sel
