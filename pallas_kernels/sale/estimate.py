"""SALE estimation + selection as a Pallas kernel (``interpret=`` on CPU).

Outside the kernel (elementwise, cheap): per-head smoothing, symmetric per-block int8/int4
codes and scales, and the smoothing terms r_i = Q_s,i . mk, c_j = mq . K_s,j,
const = mq . mk. The kernel, one program per (batch, head, query block):

1. exact pass over the always-kept key blocks (sink, local, diagonal) with an online
   max / sum, giving m_i and l_i;
2. for every key block j: S~ = [s_q s_k (C_q C_k^T) + r + c + const] / sqrt(D) with the
   integer product accumulated in int32, the Relative Attention Score
   exp(S~ - m_i) / l_i, its block max, and the keep decision (max > tau or always-kept),
   appended to a compact list of kept key blocks (the input of block_sparse_attention).

Checks (before the jitted body, via ``reference._check_qkv`` and ``_checks``): q, k (and v)
4-D floating arrays with matching batch / length / head dim, GQA heads, N divisible by
``block_q``; ``bits`` 8 or 4; ``tau`` a scalar or [Hq] in [0, inf), no NaN (values only
when concrete). Nothing is checked inside the kernel.
"""

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_kernels.sale import _checks
from pallas_kernels.sale import reference as ref
from pallas_kernels.sale.block_sparse_attention import MASK_VALUE, _attend, compact_block_lists
from pallas_kernels.sale.reference import BlockSizes


def _kernel(base_idx_ref, base_cnt_ref, base_row_ref, tau_ref, qscale_ref, const_ref,
            q_ref, k_ref, qc_ref, kc_ref, kscale_ref, r_ref, c_ref,
            ras_ref, idx_ref, cnt_ref, *, block_q, block_k, causal, inv_sqrt_d):
    i = pl.program_id(2)
    rows = i * block_q + jnp.arange(block_q)[:, None]
    q = q_ref[...].astype(jnp.float32) * inv_sqrt_d

    def exact(j, carry):
        m, l_sum = carry
        start = base_idx_ref[j] * block_k
        s = q @ k_ref[pl.ds(start, block_k), :].astype(jnp.float32).T
        if causal:
            s = jnp.where(start + jnp.arange(block_k)[None, :] <= rows, s, MASK_VALUE)
        m_new = jnp.maximum(m, s.max(-1))
        return m_new, l_sum * jnp.exp(m - m_new) + jnp.exp(s - m_new[:, None]).sum(-1)

    m, l_sum = jax.lax.fori_loop(
        0, base_cnt_ref[0], exact,
        (jnp.full((block_q,), MASK_VALUE, jnp.float32), jnp.zeros((block_q,), jnp.float32)))

    qc = qc_ref[...]
    r = r_ref[...]
    nk = ras_ref.shape[-1]
    diag_end = (i + 1) * (block_q // block_k)

    def select(j, cnt):
        start = j * block_k
        prod = jax.lax.dot_general(qc, kc_ref[pl.ds(start, block_k), :],
                                   (((1,), (1,)), ((), ())),
                                   preferred_element_type=jnp.int32)
        s = (qscale_ref[0] * kscale_ref[j] * prod.astype(jnp.float32) + r[:, None]
             + c_ref[pl.ds(start, block_k)][None, :] + const_ref[0]) * inv_sqrt_d
        ras = jnp.exp(s - m[:, None]) / l_sum[:, None]
        if causal:
            ras = jnp.where(start + jnp.arange(block_k)[None, :] <= rows, ras, 0.0)
        bmax = ras.max()
        ras_ref[j] = bmax
        keep = (bmax > tau_ref[0]) | (base_row_ref[j] > 0)
        if causal:
            keep = keep & (j < diag_end)
        idx_ref[cnt] = j  # overwritten unless kept; entries past the count are unused
        return cnt + keep.astype(jnp.int32)

    cnt_ref[0] = jax.lax.fori_loop(0, nk, select, jnp.int32(0))


def _prepare(q, k, sizes, bits):
    groups = q.shape[1] // k.shape[1]
    qf, kf = q.astype(jnp.float32), k.astype(jnp.float32)
    mq = qf.mean(-2, keepdims=True)
    mk = ref._repeat_kv(kf.mean(-2, keepdims=True), groups)
    qs = qf - mq
    ks = kf - kf.mean(-2, keepdims=True)
    qc, qscale = ref.quantize_blocks(qs, sizes.block_q, bits)
    kc, kscale = ref.quantize_blocks(ks, sizes.block_k, bits)
    r = (qs * mk).sum(-1)  # [B, Hq, N]
    c = jnp.einsum("bhd,bhnd->bhn", mq[:, :, 0], ref._repeat_kv(ks, groups))
    const = (mq * mk).sum(-1)[..., 0]  # [B, Hq]
    return qc, qscale[..., 0, 0], kc, kscale[..., 0, 0], r, c, const


def _check_inputs(q, k, tau, sizes, bits):
    ref._check_qkv(q, k, k, sizes)
    ref._check_bits(bits)
    _checks.check_tau(tau, q.shape[1])


def estimate_and_select(q, k, tau, sizes: BlockSizes = BlockSizes(), bits: int = 8,
                        causal: bool = False, interpret: bool = False):
    """(kv_index [B, Hq, nq, nk], kv_count [B, Hq, nq], ras_max [B, Hq, nq, nk]).

    Args:
      q: [B, Hq, N, D]; k: [B, Hk, N, D].
      tau: scalar or [Hq] thresholds.
      sizes, bits, causal: as in ``reference.block_keep_mask``.
      interpret: run in the Pallas interpreter.
    """
    _check_inputs(q, k, tau, sizes, bits)
    return _estimate_and_select(q, k, tau, sizes, bits, causal, interpret)


@functools.partial(jax.jit, static_argnames=("sizes", "bits", "causal", "interpret"))
def _estimate_and_select(q, k, tau, sizes: BlockSizes, bits: int, causal: bool,
                         interpret: bool):
    b, hq, n, d = q.shape
    nq, nk = n // sizes.block_q, n // sizes.block_k
    groups = hq // k.shape[1]
    tau = jnp.broadcast_to(jnp.asarray(tau, jnp.float32), (hq,))
    base = ref.always_kept_blocks(n, sizes, causal)
    base_idx, base_cnt = compact_block_lists(base)
    qc, qscale, kc, kscale, r, c, const = _prepare(q, k, sizes, bits)
    kernel = functools.partial(_kernel, block_q=sizes.block_q, block_k=sizes.block_k,
                               causal=causal, inv_sqrt_d=1.0 / float(d) ** 0.5)
    row = lambda bi, h, i: (i, 0)  # noqa: E731
    kv_full = lambda bi, h, i: (bi, h // groups, 0, 0)  # noqa: E731
    return pl.pallas_call(
        kernel,
        grid=(b, hq, nq),
        in_specs=[
            pl.BlockSpec((None, nk), row),
            pl.BlockSpec((1,), lambda bi, h, i: (i,)),
            pl.BlockSpec((None, nk), row),
            pl.BlockSpec((1,), lambda bi, h, i: (h,)),
            pl.BlockSpec((None, None, 1), lambda bi, h, i: (bi, h, i)),
            pl.BlockSpec((None, 1), lambda bi, h, i: (bi, h)),
            pl.BlockSpec((None, None, sizes.block_q, d), lambda bi, h, i: (bi, h, i, 0)),
            pl.BlockSpec((None, None, n, d), kv_full),
            pl.BlockSpec((None, None, sizes.block_q, d), lambda bi, h, i: (bi, h, i, 0)),
            pl.BlockSpec((None, None, n, d), kv_full),
            pl.BlockSpec((None, None, nk), lambda bi, h, i: (bi, h // groups, 0)),
            pl.BlockSpec((None, None, sizes.block_q), lambda bi, h, i: (bi, h, i)),
            pl.BlockSpec((None, None, n), lambda bi, h, i: (bi, h, 0)),
        ],
        out_specs=[
            pl.BlockSpec((None, None, None, nk), lambda bi, h, i: (bi, h, i, 0)),
            pl.BlockSpec((None, None, None, nk), lambda bi, h, i: (bi, h, i, 0)),
            pl.BlockSpec((None, None, 1), lambda bi, h, i: (bi, h, i)),
        ],
        out_shape=[jax.ShapeDtypeStruct((b, hq, nq, nk), jnp.float32),
                   jax.ShapeDtypeStruct((b, hq, nq, nk), jnp.int32),
                   jax.ShapeDtypeStruct((b, hq, nq), jnp.int32)],
        interpret=interpret,
    )(base_idx, base_cnt, base.astype(jnp.int32), tau, qscale, const, q, k, qc, kc, kscale,
      r, c)


def sale_attention_pallas(q, k, v, tau, sizes: BlockSizes = BlockSizes(), bits: int = 8,
                          causal: bool = False, interpret: bool = False):
    """SALE end to end with the two kernels: (output [B, Hq, N, D], kv_count)."""
    ref._check_qkv(q, k, v, sizes)
    ras, idx, cnt = estimate_and_select(q, k, tau, sizes, bits, causal, interpret)
    del ras
    return _attend(q, k, v, idx, cnt, sizes, causal, interpret), cnt
