"""Pure-jnp reference of SALE (arXiv 2505.24179): estimate, select, attend sparsely.

Shapes: q [B, Hq, N, D], k and v [B, Hk, N, D] with Hq a multiple of Hk (GQA).

1. Smoothing: Q_s = Q - mean_N(Q), K_s = K - mean_N(K) per (batch, head).
2. Symmetric per-block quantization of Q_s (blocks of b_q rows) and K_s (b_k rows):
   scale = max|x| / qmax (qmax = 127 for int8, 7 for int4), x_q = round(x / scale).
3. Estimated scores with the smoothing corrections added back in full precision,
   S~ = [deq(Q_s) deq(K_s)^T + Q_s mk^T + mq K_s^T + mq mk^T] / sqrt(D)  (mq, mk: the means),
   so that without quantization S~ equals the exact scores Q K^T / sqrt(D).
4. Exact pass over the always-kept blocks (sink: the first b_k keys; local: the key
   blocks within ``local`` keys before the query block; the diagonal) gives the row max
   m_i and row sum l_i of exp(S_ij - m_i) over those keys.
5. Relative Attention Score P~_ij = exp(S~_ij - m_i) / l_i; a (query block, key block)
   is kept if any element exceeds the head's tau (or it is always-kept).
6. Attention restricted to kept blocks (softmax over kept keys only).

Checks (``pallas_kernels.sale._checks``, no jaxlab import; static shapes and dtypes, values
only when concrete, so nothing is added to compiled code): q, k, v 4-D with a floating dtype,
k and v of shape (B, Hk, N, D) matching q, Hq a multiple of Hk, N a multiple of
``block_q`` (and ``block`` in ``quantize_blocks``); ``BlockSizes`` positive ints with block_q a
multiple of block_k; ``bits`` in {8, 4} (or None where allowed); ``tau`` a scalar or [Hq]
in [0, inf) without NaN (checked before the jitted body of ``sale_attention``); ``theta`` > 0
and 0 < ``tau_min`` < ``tau0`` in ``calibrate_tau``.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from pallas_kernels.sale import _checks


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Tile sizes: b_q query rows and b_k key rows per block; local window in keys."""

    block_q: int = 64
    block_k: int = 32
    local: int = 128

    def __post_init__(self):
        for name in ("block_q", "block_k", "local"):
            _checks.check_positive_int(name, getattr(self, name))
        if self.block_q % self.block_k:
            raise ValueError(f"`block_q`={self.block_q} must be a multiple of "
                             f"`block_k`={self.block_k}.")


QMAX = {8: 127.0, 4: 7.0}
DEFAULT_TAU = 1e-3  # used when no per-head calibration is given


def _check_qkv(q, k, v, sizes: BlockSizes | None = None):
    """Layout [B, H, N, D] checks shared by the reference and the kernels."""
    _checks.check_ndim("q", q, 4)
    _checks.check_floating("q", q)
    b, hq, n, d = q.shape
    for name, x in (("k", k), ("v", v)):
        _checks.check_ndim(name, x, 4)
        _checks.check_floating(name, x)
        if x.shape[0] != b or x.shape[2:] != (n, d):
            raise ValueError(f"`{name}` must have shape ({b}, Hk, {n}, {d}) to match `q` "
                             f"{tuple(q.shape)}, got {tuple(x.shape)}.")
    _checks.check_shape("v", v, k.shape)
    if k.shape[1] == 0 or hq % k.shape[1]:
        raise ValueError(f"query heads {hq} of `q` must be a multiple of the key heads "
                         f"{k.shape[1]} of `k` (GQA).")
    if sizes is not None and n % sizes.block_q:
        raise ValueError(f"sequence length {n} must be divisible by `block_q`={sizes.block_q} "
                         "(pad the sequence or choose other `sizes`).")


def _check_bits(bits, allow_none: bool = False):
    if not (bits in QMAX or (allow_none and bits is None)):
        raise ValueError(f"`bits` must be 8 or 4{' or None' if allow_none else ''}, got "
                         f"{bits!r}.")


def _repeat_kv(x, groups):
    return jnp.repeat(x, groups, axis=1) if groups > 1 else x


def quantize_blocks(x, block: int, bits: int = 8):
    """Symmetric per-block quantization along the sequence axis.

    Args:
      x: [..., N, D] values.
      block: rows per block (N divisible by it).
      bits: 8 or 4.

    Returns:
      (integer codes [..., N, D] as int8, scales [..., N / block, 1, 1] float32).
    """
    _check_bits(bits)
    _checks.check_floating("x", x)
    if np.ndim(x) < 2:
        raise ValueError(f"`x` must have at least 2 axes [..., N, D], got shape {np.shape(x)}.")
    _checks.check_positive_int("block", block)
    *lead, n, d = x.shape
    if n % block:
        raise ValueError(f"the sequence length {n} of `x` must be divisible by `block`={block}.")
    xb = x.reshape(*lead, n // block, block, d)
    scale = jnp.max(jnp.abs(xb), axis=(-2, -1), keepdims=True) / QMAX[bits]
    scale = jnp.where(scale > 0, scale, 1.0)
    codes = jnp.clip(jnp.round(xb / scale), -QMAX[bits], QMAX[bits]).astype(jnp.int8)
    return codes.reshape(x.shape), scale.astype(jnp.float32)


def dequantize_blocks(codes, scale, block: int):
    *lead, n, d = codes.shape
    xb = codes.reshape(*lead, n // block, block, d).astype(jnp.float32) * scale
    return xb.reshape(codes.shape)


def estimate_scores(q, k, sizes: BlockSizes = BlockSizes(), bits: int | None = 8):
    """S~ [B, Hq, N, N] from smoothed, quantized Q and K (``bits=None``: no quantization)."""
    _check_qkv(q, k, k, sizes)
    _check_bits(bits, allow_none=True)
    groups = q.shape[1] // k.shape[1]
    q, k = q.astype(jnp.float32), _repeat_kv(k.astype(jnp.float32), groups)
    mq, mk = q.mean(-2, keepdims=True), k.mean(-2, keepdims=True)
    qs, ks = q - mq, k - mk
    if bits is not None:
        qs_hat = dequantize_blocks(*quantize_blocks(qs, sizes.block_q, bits), sizes.block_q)
        ks_hat = dequantize_blocks(*quantize_blocks(ks, sizes.block_k, bits), sizes.block_k)
    else:
        qs_hat, ks_hat = qs, ks
    s = jnp.einsum("bhnd,bhmd->bhnm", qs_hat, ks_hat)
    s = s + (qs @ jnp.swapaxes(mk, -1, -2)) + (mq @ jnp.swapaxes(ks, -1, -2)) + (
        mq @ jnp.swapaxes(mk, -1, -2))
    return s / jnp.sqrt(q.shape[-1])


def always_kept_blocks(n: int, sizes: BlockSizes, causal: bool):
    """[N / b_q, N / b_k] bool: sink, local window and diagonal key blocks of each row block."""
    nq, nk = n // sizes.block_q, n // sizes.block_k
    r = sizes.block_q // sizes.block_k
    qi = jnp.arange(nq)[:, None]
    kj = jnp.arange(nk)[None, :]
    diag = (kj >= qi * r) & (kj < (qi + 1) * r)
    local = (kj * sizes.block_k >= qi * sizes.block_q - sizes.local) & (kj < qi * r)
    sink = kj == 0
    keep = sink | local | diag
    return keep & (kj < (qi + 1) * r) if causal else keep


def _element_mask(block_mask, sizes, n, causal):
    m = jnp.repeat(jnp.repeat(block_mask, sizes.block_q, -2), sizes.block_k, -1)
    if causal:
        m = m & jnp.tril(jnp.ones((n, n), bool))
    return m


def row_stats(q, k, sizes: BlockSizes = BlockSizes(), causal: bool = False):
    """(m, l) [B, Hq, N, 1]: exact row max and sum of exp(S - m) over the always-kept blocks."""
    b, hq, n, d = q.shape
    groups = hq // k.shape[1]
    s_exact = jnp.einsum("bhnd,bhmd->bhnm", q.astype(jnp.float32),
                         _repeat_kv(k.astype(jnp.float32), groups)) / jnp.sqrt(d)
    base_el = _element_mask(always_kept_blocks(n, sizes, causal), sizes, n, causal)
    s_base = jnp.where(base_el, s_exact, -jnp.inf)
    m = s_base.max(-1, keepdims=True)
    return m, jnp.exp(s_base - m).sum(-1, keepdims=True)


def block_ras_max(q, k, sizes: BlockSizes = BlockSizes(), bits: int | None = 8,
                  causal: bool = False):
    """[B, Hq, N / b_q, N / b_k] max over each block of the Relative Attention Score."""
    _check_qkv(q, k, k, sizes)
    b, hq, n, _ = q.shape
    m, l_sum = row_stats(q, k, sizes, causal)
    ras = jnp.exp(estimate_scores(q, k, sizes, bits) - m) / l_sum
    if causal:
        ras = jnp.where(jnp.tril(jnp.ones((n, n), bool)), ras, 0.0)
    nq, nk = n // sizes.block_q, n // sizes.block_k
    return ras.reshape(b, hq, nq, sizes.block_q, nk, sizes.block_k).max((3, 5))


def block_keep_mask(q, k, tau, sizes: BlockSizes = BlockSizes(), bits: int | None = 8,
                    causal: bool = False):
    """[B, Hq, N / b_q, N / b_k] bool: the blocks SALE attends to.

    Args:
      q, k: see the module docstring.
      tau: scalar or [Hq] per-head thresholds on the Relative Attention Score.
      sizes: BlockSizes.
      bits: 8, 4 or None (no quantization).
      causal: drop key blocks above the diagonal.
    """
    _check_qkv(q, k, k, sizes)
    n, hq = q.shape[2], q.shape[1]
    _checks.check_tau(tau, hq)
    tau = jnp.broadcast_to(jnp.asarray(tau, jnp.float32), (hq,))
    keep = block_ras_max(q, k, sizes, bits, causal) > tau[None, :, None, None]
    keep = keep | always_kept_blocks(n, sizes, causal)[None, None]
    if causal:
        keep = keep & always_kept_blocks(n, BlockSizes(sizes.block_q, sizes.block_k, n),
                                         causal=True)[None, None]
    return keep


def dense_attention(q, k, v, causal: bool = False):
    """softmax(Q K^T / sqrt(D)) V with GQA, [B, Hq, N, D]."""
    _check_qkv(q, k, v)
    groups = q.shape[1] // k.shape[1]
    k, v = _repeat_kv(k, groups), _repeat_kv(v, groups)
    s = jnp.einsum("bhnd,bhmd->bhnm", q, k).astype(jnp.float32) / jnp.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
    return jnp.einsum("bhnm,bhmd->bhnd", jax.nn.softmax(s, -1), v.astype(jnp.float32))


def sale_attention(q, k, v, tau, sizes: BlockSizes = BlockSizes(), bits: int | None = 8,
                   causal: bool = False):
    """(output [B, Hq, N, D], block mask) of SALE's sparse attention (reference)."""
    _check_qkv(q, k, v, sizes)
    _check_bits(bits, allow_none=True)
    _checks.check_tau(tau, q.shape[1])
    return _sale_attention(q, k, v, tau, sizes, bits, causal)


@functools.partial(jax.jit, static_argnames=("sizes", "bits", "causal"))
def _sale_attention(q, k, v, tau, sizes: BlockSizes, bits: int | None, causal: bool):
    keep = block_keep_mask(q, k, tau, sizes, bits, causal)
    n = q.shape[2]
    groups = q.shape[1] // k.shape[1]
    kr, vr = _repeat_kv(k, groups), _repeat_kv(v, groups)
    s = jnp.einsum("bhnd,bhmd->bhnm", q, kr).astype(jnp.float32) / jnp.sqrt(q.shape[-1])
    s = jnp.where(_element_mask(keep, sizes, n, causal), s, -jnp.inf)
    out = jnp.einsum("bhnm,bhmd->bhnd", jax.nn.softmax(s, -1), vr.astype(jnp.float32))
    return out.astype(q.dtype), keep


def attention_recall(q, k, keep, sizes: BlockSizes = BlockSizes(), causal: bool = False):
    """[B, Hq] mean over queries of the exact attention mass inside the kept blocks."""
    groups = q.shape[1] // k.shape[1]
    n = q.shape[2]
    p = jax.nn.softmax(jnp.where(
        jnp.tril(jnp.ones((n, n), bool)) if causal else True,
        jnp.einsum("bhnd,bhmd->bhnm", q, _repeat_kv(k, groups)).astype(jnp.float32)
        / jnp.sqrt(q.shape[-1]), -jnp.inf), -1)
    return jnp.sum(jnp.where(_element_mask(keep, sizes, n, causal), p, 0.0), -1).mean(-1)


def calibrate_tau(q, k, v, theta: float, sizes: BlockSizes = BlockSizes(), bits: int | None = 8,
                  causal: bool = False, tau0: float = 0.008, tau_min: float = 1e-4):
    """Per-head tau: halve from ``tau0`` until mean |O - O~| < theta (SALE's calibration).

    Heads that still miss ``theta`` at ``tau_min`` become dense (tau = 0).

    Args:
      q, k, v: calibration inputs (see the module docstring).
      theta: per-head tolerance on the mean absolute output error, > 0.

    Returns:
      [Hq] float32 thresholds.
    """
    _checks.check_in_range("theta", theta, 0.0, low_inclusive=False)
    _checks.check_in_range("tau_min", tau_min, 0.0, low_inclusive=False)
    _checks.check_in_range("tau0", tau0, tau_min, low_inclusive=False)
    _check_qkv(q, k, v, sizes)
    hq = q.shape[1]
    dense = dense_attention(q, k, v, causal)
    tau = jnp.full((hq,), tau0, jnp.float32)
    done = jnp.zeros((hq,), bool)
    while True:
        out, _ = sale_attention(q, k, v, tau, sizes, bits, causal)
        err = jnp.abs(out.astype(jnp.float32) - dense).mean((0, 2, 3))
        done = done | (err < theta)
        if bool(done.all()) or float(tau.max()) <= tau_min:
            break
        tau = jnp.where(done, tau, tau / 2)
    return jnp.where(done & (tau > tau_min), tau, 0.0)
