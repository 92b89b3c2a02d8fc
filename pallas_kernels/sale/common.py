"""What the SALE kernels share: tile lists, partial softmax state, tile / row layouts and
block specs, the kernels' selection, and the block-mask checks.

``block_sparse_attention`` (Triton, and the backend dispatch), ``estimate`` (the estimation
kernel), ``block_sparse_attention_tpu`` and ``mosaic_gpu`` (the TPU and Hopper backends)
all import these from here and not from one another's modules, so the backends depend
only on this module, ``config`` and ``reference`` (no import cycle).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_kernels.sale import _checks
from pallas_kernels.sale import config as C
from pallas_kernels.sale.reference import BlockSizes, padded_length

MASK_VALUE = -0.7 * float(jnp.finfo(jnp.float32).max)


class TileLists(NamedTuple):
    """Kept key tiles per program: index [B, P, nq, nt] (first ``count`` valid, ascending),
    bits [B, P, nq, nt] (bit g r + s: head g of the pack keeps selection block s of the
    tile), count [B, P, nq]."""

    index: jax.Array
    bits: jax.Array
    count: jax.Array


class PartialState(NamedTuple):
    """Normalised output [B, Hq, Np, Dp] (float32), row max m2 (log2 units, scale folded)
    and row sum l [B, Hq, Np] of an attention pass over some of the keys."""

    out: jax.Array
    m2: jax.Array
    l_sum: jax.Array


def compact_block_lists(block_mask):
    """(kv_index, kv_count) from a bool block mask [..., nk]: kept blocks first, in order."""
    if block_mask.ndim < 1:
        raise ValueError("`block_mask` must have at least one axis (key blocks last).")
    order = jnp.argsort(~block_mask, axis=-1, stable=True).astype(jnp.int32)
    return order, block_mask.sum(-1).astype(jnp.int32)


def tile_bits(block_mask, plan: C.Plan):
    """[B, P, nq, nt] int32 (head, block) bits of each key tile from [B, Hq, nq, nk] bools."""
    b, hq, nq, nk = block_mask.shape
    hp, r = plan.heads_per_program, plan.sub
    m = block_mask.reshape(b, hq // hp, hp, nq, nk // r, r).astype(jnp.int32)
    shift = (jnp.arange(hp)[:, None] * r + jnp.arange(r)[None, :]).astype(jnp.int32)
    return jnp.sum(m << shift[None, None, :, None, None, :], axis=(2, 5)).astype(jnp.int32)


def lists_from_bits(bits) -> TileLists:
    index, count = compact_block_lists(bits != 0)
    return TileLists(index, jnp.take_along_axis(bits, index, -1), count)


def bits_to_block_mask(bits, plan: C.Plan):
    """Inverse of ``tile_bits``: [B, P, nq, nt] bits -> [B, Hq, nq, nk] bools."""
    b, p, nq, nt = bits.shape
    hp, r = plan.heads_per_program, plan.sub
    shift = (jnp.arange(hp)[:, None] * r + jnp.arange(r)[None, :]).astype(jnp.int32)
    m = (bits[:, :, None, :, :, None] >> shift[None, None, :, None, None, :]) & 1
    return m.astype(bool).reshape(b, p * hp, nq, nt * r)


def lists_to_block_mask(lists: TileLists, plan: C.Plan):
    """[B, Hq, nq, nk] bools of the (head, block) pairs a TileLists visits."""
    nt = lists.index.shape[-1]
    valid = jnp.arange(nt) < lists.count[..., None]
    dense = jnp.zeros(lists.index.shape, jnp.int32)
    dense = jnp.put_along_axis(dense, lists.index, jnp.where(valid, lists.bits, 0), -1,
                               inplace=False)
    return bits_to_block_mask(dense, plan)


# ----------------------------------------------------------------------------- kernel body


def row_layout(plan: C.Plan, i):
    """(head within the pack [M, 1], query position [M, 1]) of the program's rows."""
    r = jnp.arange(plan.rows)[:, None]
    return r // plan.block_q, i * plan.block_q + r % plan.block_q


def load_rows(ref, plan: C.Plan):
    """A [h_p, b_q, ...] block (or [b_q, ...] when h_p = 1) as [rows, ...]."""
    x = ref[...]
    return x if plan.heads_per_program == 1 else x.reshape(plan.rows, *x.shape[2:])


def store_rows(ref, x, plan: C.Plan):
    if plan.heads_per_program == 1:
        ref[...] = x.astype(ref.dtype)
    else:
        ref[...] = x.reshape(ref.shape).astype(ref.dtype)


def dot_f32(a, b, trans_b: bool = False):
    """a @ b (or a @ b.T) with a and b in their own dtype and float32 accumulation."""
    dims = (((1,), (1,)), ((), ())) if trans_b else (((1,), (0,)), ((), ()))
    return jax.lax.dot_general(a, b, dims, preferred_element_type=jnp.float32)


def online_softmax_step(m, l_sum, acc, s2, v_block):
    """One FlashAttention-2 update with base-2 logits s2 (scale folded in)."""
    m_new = jnp.maximum(m, s2.max(-1))
    p = jnp.exp2(s2 - m_new[:, None])
    alpha = jnp.exp2(m - m_new)
    acc = acc * alpha[:, None] + dot_f32(p.astype(v_block.dtype), v_block)
    return m_new, l_sum * alpha + p.sum(-1), acc


def tile_keep_mask(bits, head, plan: C.Plan):
    """[M, tile] bool: bit (head g, block s) of ``bits`` for every (row, column)."""
    col = jnp.arange(plan.tile)[None, :]
    shift = head * plan.sub + col // plan.block_k
    return ((bits >> shift) & 1) != 0


def row_spec(plan: C.Plan, *trailing):
    """BlockSpec of a [B, Hq, Np, *trailing] array: the program's (h_p, b_q) rows."""
    hp = plan.heads_per_program
    head = None if hp == 1 else hp
    zeros = (0,) * len(trailing)
    return pl.BlockSpec((None, head, plan.block_q, *trailing),
                        lambda i, b, c: (b, c, i, *zeros))


def kv_spec(plan: C.Plan):
    ppk = plan.programs_per_kv_head
    return pl.BlockSpec((None, None, plan.n_pad, plan.d_pad),
                        lambda i, b, c: (b, c // ppk, 0, 0))


def list_specs(plan: C.Plan):
    nt = plan.num_tiles
    lst = pl.BlockSpec((None, None, None, nt), lambda i, b, c: (b, c, i, 0))
    return [lst, lst, pl.BlockSpec((None, None, 1), lambda i, b, c: (b, c, i))]


def check_block_mask(block_mask, q, sizes: BlockSizes) -> None:
    """Dtype, shape and (concrete) non-empty rows of a block mask for ``q`` [B, Hq, N, D]."""
    b, hq, n, _ = q.shape
    nq = padded_length(n, sizes) // sizes.block_q
    _checks.check_shape("block_mask", block_mask,
                        (b, hq, nq, nq * (sizes.block_q // sizes.block_k)))
    dtype = getattr(block_mask, "dtype", None)
    dtype = jnp.asarray(block_mask).dtype if dtype is None else dtype
    if dtype != jnp.bool_:
        raise TypeError(f"`block_mask` must be boolean, got dtype {dtype}.")
    if _checks.is_concrete(block_mask):
        empty = ~jnp.asarray(block_mask).any(-1)
        if bool(empty.any()):
            raise ValueError(f"`block_mask` must keep at least one key block per query row "
                             f"block, got {int(empty.sum())} empty rows.")


class Selection(NamedTuple):
    """What the estimation kernel hands to the attention kernel.

    lists: kept candidate tiles per program (``TileLists``; always-kept blocks excluded).
    state: exact attention over the always-kept blocks (``PartialState``), None without v.
    """

    lists: TileLists
    state: PartialState | None


def base_range(plan: C.Plan, i):
    """(lo, diag_end): always-kept blocks of row block i are {0} U [lo, diag_end)."""
    lo = (jnp.maximum(i * plan.block_q - plan.local, 0) + plan.block_k - 1) // plan.block_k
    return lo, (i + 1) * (plan.block_q // plan.block_k)


def candidate_tiles(plan: C.Plan, lo, diag_end, causal: bool):
    """(trip1, start2, trip): candidate tiles are u < trip1 -> u, else start2 + u - trip1.

    Candidates: blocks [1, lo) and, when not causal, [diag_end, real blocks); tiles in
    increasing order, each once.
    """
    r = plan.sub
    trip1 = jnp.where(lo > 1, (lo - 1) // r + 1, 0)
    if causal:
        return trip1, trip1, trip1
    end = -(-plan.n // plan.tile)
    start2 = jnp.maximum(diag_end // r, trip1)
    return trip1, start2, trip1 + jnp.maximum(end - start2, 0)


def block_grid_masks(plan: C.Plan, causal: bool):
    """(always-kept, candidate) [nq, nk] bool masks on the plan's padded grid (static)."""
    i = jnp.arange(plan.num_q_blocks)[:, None]
    j = jnp.arange(plan.num_k_blocks)[None, :]
    lo, diag_end = base_range(plan, i)
    real = j * plan.block_k < plan.n
    base = ((j == 0) | ((j >= lo) & (j < diag_end))) & real
    cand = (j >= 1) & (j < lo)
    if not causal:
        cand = cand | (j >= diag_end)
    return base, cand & real
