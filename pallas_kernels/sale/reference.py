"""Pure-jnp reference of SALE (arXiv 2505.24179): estimate, select, attend sparsely.

Shapes: q [B, Hq, N, D], k and v [B, Hk, N, D] with Hq a multiple of Hk (GQA). Any N:
blocks live on the grid padded to a multiple of b_q (padded keys are never attended to,
padded query rows never vote for a block); block masks have shape
[B, Hq, ceil(N / b_q), ceil(N / b_q) b_q / b_k].

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
   is kept if any element exceeds the head's tau (or it is always-kept). The test is
   made in log space, as in the official kernel: S~_ij - m_i - log(l_i) > log(tau)
   (no exp, no divide; tau = 0 keeps every block).
6. Attention restricted to kept blocks (softmax over kept keys only).

Theta convention: ``calibrate_tau``'s theta bounds the *mean* |O - O~| per element of a
head's [N, D] output; the official code bounds the sum over the head's N x D output by
theta_official N, so theta_official = D x ours (official 0.4 at D = 128 is ours 0.003125).
Calibration (``calibrate_tau``): per head, tau starts at 0.008 and is halved until the mean
|O - O~| over the calibration batch (all its samples, rows and dims together) is below
theta; a head that misses theta at tau_min = 1e-4 becomes dense (tau = 0). The paper and
the official code follow the same halving, but take calibration prompts one at a time and
only ever lower tau, i.e. the official tau is the one of the worst prompt; ours bounds the
batch mean (call it per sample and take the minimum to get the official rule).
Provenance: steps 1-6 and the halving calibration follow the paper (arXiv 2505.24179); the
log-space keep test, the per-element theta conversion and the 128-key segment layout were
read from the official code (BirdChristopher/SALE); per-block quantization scales (the
official kernel keeps per-warp scales) and any-N padding are ours.

Checks (``pallas_kernels.sale._checks``, no jaxlab import; static shapes and dtypes, values
only when concrete, so nothing is added to compiled code): q, k, v 4-D with a floating dtype,
k and v of shape (B, Hk, N, D) matching q, Hq a multiple of Hk, N >= 1 (``quantize_blocks``:
N a multiple of ``block``); ``BlockSizes`` positive ints with block_q a multiple of block_k;
``bits`` in {8, 4} (or None where allowed); ``tau`` a scalar or [Hq] in [0, inf) without NaN
(checked before the jitted body of ``sale_attention``); ``theta`` > 0 and
0 < ``tau_min`` < ``tau0`` in ``calibrate_tau``; ``sizes`` a ``BlockSizes`` and ``n`` a
positive integer wherever they are taken; block masks ``keep`` bool (or 0 / 1 integers) of
shape [..., nq, nk] for the sequence's blocks (the recall functions: leading axes
broadcasting to [B, Hq]); ``dequantize_blocks``: ``codes`` [..., N, D] with N a multiple of
``block`` and ``scale`` [..., N / block, 1, 1]; ``smooth``: floating q, k with N >= 1.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from pallas_kernels.sale import _checks

__all__ = ["BlockSizes", "QMAX", "DEFAULT_TAU", "padded_length", "quantize_blocks",
    "dequantize_blocks", "smooth", "estimate_scores", "always_kept_blocks", "row_stats",
    "block_log_margin", "block_ras_max", "block_keep_mask", "dense_attention", "sale_attention",
    "attention_row_recall", "attention_recall", "causal_density", "calibrate_tau"]


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


def _check_sizes(sizes) -> None:
    if not isinstance(sizes, BlockSizes):
        raise TypeError(f"`sizes` must be a BlockSizes(block_q, block_k, local), got "
                        f"{type(sizes).__name__} {sizes!r}.")


def _check_qkv(q, k, v, sizes: BlockSizes | None = None):
    """Layout [B, H, N, D] checks shared by the reference and the kernels (and ``sizes`` a
    ``BlockSizes`` when given; any N: blocks live on the padded grid)."""
    if sizes is not None:
        _check_sizes(sizes)
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
    if n == 0 or d == 0:
        raise ValueError(f"`q` must have N >= 1 and D >= 1, got shape {tuple(q.shape)}.")


def padded_length(n: int, sizes: BlockSizes) -> int:
    """N rounded up to a multiple of b_q: the grid the blocks live on."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"`n` must be a positive integer (the sequence length), got {n!r}.")
    _check_sizes(sizes)
    return -(-n // sizes.block_q) * sizes.block_q


def _check_keep(keep, n: int, sizes: BlockSizes, lead: tuple | None = None) -> None:
    """``keep``: a bool (or 0 / 1 integer) block mask [..., nq, nk] of a length-``n``
    sequence; with ``lead`` (B, Hq), its leading axes broadcast to them."""
    nq = padded_length(n, sizes) // sizes.block_q
    nk = nq * (sizes.block_q // sizes.block_k)
    dtype = getattr(keep, "dtype", None)
    dtype = np.asarray(keep).dtype if dtype is None else np.dtype(dtype)
    if dtype.kind not in "biu":
        raise TypeError(f"`keep` must be a bool block mask (e.g. block_keep_mask's), got dtype "
                        f"{dtype}; threshold scores into a mask first.")
    shape = tuple(np.shape(keep))
    ok = len(shape) >= 2 and shape[-2:] == (nq, nk)
    if ok and lead is not None:
        ok = len(shape) <= 2 + len(lead) and all(
            a in (1, b) for a, b in zip(shape[:-2][::-1], lead[::-1], strict=False))
    if not ok:
        want = "[..., " if lead is None else f"[{', '.join(map(str, lead))}, "
        raise ValueError(f"`keep` must have shape {want}{nq}, {nk}] (the blocks of `n`={n} "
                         f"at block_q {sizes.block_q}, block_k {sizes.block_k}), got "
                         f"{shape}.")


def _pad_seq(x, n_pad: int):
    n = x.shape[-2]
    if n == n_pad:
        return x
    pad = [(0, 0)] * x.ndim
    pad[-2] = (0, n_pad - n)
    return jnp.pad(x, pad)


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
    """Float32 [..., N, D] values of ``quantize_blocks``' (codes [..., N, D], scales
    [..., N / block, 1, 1]) at the same ``block``."""
    if np.ndim(codes) < 2:
        raise ValueError(f"`codes` must have at least 2 axes [..., N, D], got shape "
                         f"{np.shape(codes)}.")
    _checks.check_positive_int("block", block)
    *lead, n, d = codes.shape
    if n % block:
        raise ValueError(f"the sequence length {n} of `codes` must be divisible by "
                         f"`block`={block} (the block it was quantized with).")
    want = (*lead, n // block, 1, 1)
    try:
        ok = np.broadcast_shapes(np.shape(scale), want) == want
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"`scale` must have shape {want} (one per block of `block`={block} "
                         f"rows), got {tuple(np.shape(scale))}.")
    xb = codes.reshape(*lead, n // block, block, d).astype(jnp.float32) * scale
    return xb.reshape(codes.shape)


def smooth(q, k):
    """(Q_s, K_s, mq, mk) in float32: q, k minus their per-head means over the sequence."""
    for name, x in (("q", q), ("k", k)):
        _checks.check_floating(name, x)
        if np.ndim(x) < 2 or np.shape(x)[-2] == 0:
            raise ValueError(f"`{name}` must be [..., N, D] with N >= 1, got shape "
                             f"{tuple(np.shape(x))}.")
    q, k = q.astype(jnp.float32), k.astype(jnp.float32)
    mq, mk = q.mean(-2, keepdims=True), k.mean(-2, keepdims=True)
    return q - mq, k - mk, mq, mk


def estimate_scores(q, k, sizes: BlockSizes = BlockSizes(), bits: int | None = 8):
    """S~ [B, Hq, N, N] from smoothed, quantized Q and K (``bits=None``: no quantization)."""
    _check_qkv(q, k, k, sizes)
    _check_bits(bits, allow_none=True)
    n = q.shape[2]
    n_pad = padded_length(n, sizes)
    groups = q.shape[1] // k.shape[1]
    qs, ks, mq, mk = smooth(q, k)
    if bits is not None:
        qs_hat = dequantize_blocks(*quantize_blocks(_pad_seq(qs, n_pad), sizes.block_q, bits),
                                   sizes.block_q)[..., :n, :]
        ks_hat = dequantize_blocks(*quantize_blocks(_pad_seq(ks, n_pad), sizes.block_k, bits),
                                   sizes.block_k)[..., :n, :]
    else:
        qs_hat, ks_hat = qs, ks
    ks, ks_hat, mk = (_repeat_kv(x, groups) for x in (ks, ks_hat, mk))
    s = jnp.einsum("bhnd,bhmd->bhnm", qs_hat, ks_hat)
    s = s + (qs @ jnp.swapaxes(mk, -1, -2)) + (mq @ jnp.swapaxes(ks, -1, -2)) + (
        mq @ jnp.swapaxes(mk, -1, -2))
    return s / jnp.sqrt(q.shape[-1])


def always_kept_blocks(n: int, sizes: BlockSizes, causal: bool):
    """[ceil(N / b_q), nk] bool: sink, local window and diagonal key blocks of each row block.

    Key blocks holding no real key (all past N) are never kept.
    """
    padded_length(n, sizes)  # checks n and sizes
    r = sizes.block_q // sizes.block_k
    nq = -(-n // sizes.block_q)
    nk = nq * r
    qi = jnp.arange(nq)[:, None]
    kj = jnp.arange(nk)[None, :]
    diag = (kj >= qi * r) & (kj < (qi + 1) * r)
    local = (kj * sizes.block_k >= qi * sizes.block_q - sizes.local) & (kj < qi * r)
    sink = kj == 0
    keep = (sink | local | diag) & (kj * sizes.block_k < n)
    return keep & (kj < (qi + 1) * r) if causal else keep


def _element_mask(block_mask, sizes, n, causal):
    m = jnp.repeat(jnp.repeat(block_mask, sizes.block_q, -2), sizes.block_k, -1)[..., :n, :n]
    if causal:
        m = m & jnp.tril(jnp.ones((n, n), bool))
    return m


def _exact_scores(q, k):
    groups = q.shape[1] // k.shape[1]
    return jnp.einsum("bhnd,bhmd->bhnm", q.astype(jnp.float32),
                      _repeat_kv(k.astype(jnp.float32), groups)) / jnp.sqrt(q.shape[-1])


def row_stats(q, k, sizes: BlockSizes = BlockSizes(), causal: bool = False):
    """(m, l) [B, Hq, N, 1]: exact row max and sum of exp(S - m) over the always-kept blocks."""
    _check_qkv(q, k, k, sizes)
    n = q.shape[2]
    base_el = _element_mask(always_kept_blocks(n, sizes, causal), sizes, n, causal)
    s_base = jnp.where(base_el, _exact_scores(q, k), -jnp.inf)
    m = s_base.max(-1, keepdims=True)
    return m, jnp.exp(s_base - m).sum(-1, keepdims=True)


def block_log_margin(q, k, sizes: BlockSizes = BlockSizes(), bits: int | None = 8,
                     causal: bool = False):
    """[B, Hq, nq, nk] max over each block of log RAS = S~ - m - log(l) (-inf: no element)."""
    _check_qkv(q, k, k, sizes)
    b, hq, n, _ = q.shape
    m, l_sum = row_stats(q, k, sizes, causal)
    margin = estimate_scores(q, k, sizes, bits) - m - jnp.log(l_sum)
    if causal:
        margin = jnp.where(jnp.tril(jnp.ones((n, n), bool)), margin, -jnp.inf)
    n_pad = padded_length(n, sizes)
    margin = jnp.pad(margin, ((0, 0), (0, 0), (0, n_pad - n), (0, n_pad - n)),
                     constant_values=-jnp.inf)
    nq, nk = n_pad // sizes.block_q, n_pad // sizes.block_k
    return margin.reshape(b, hq, nq, sizes.block_q, nk, sizes.block_k).max((3, 5))


def block_ras_max(q, k, sizes: BlockSizes = BlockSizes(), bits: int | None = 8,
                  causal: bool = False):
    """[B, Hq, nq, nk] max over each block of the Relative Attention Score exp(S~ - m) / l."""
    return jnp.exp(block_log_margin(q, k, sizes, bits, causal))


def block_keep_mask(q, k, tau, sizes: BlockSizes = BlockSizes(), bits: int | None = 8,
                    causal: bool = False):
    """[B, Hq, nq, nk] bool: the blocks SALE attends to.

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
    keep = block_log_margin(q, k, sizes, bits, causal) > jnp.log(tau)[None, :, None, None]
    return keep | always_kept_blocks(n, sizes, causal)[None, None]


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
    s = jnp.einsum("bhnd,bhmd->bhnm", q, _repeat_kv(k, groups)).astype(jnp.float32)
    s = jnp.where(_element_mask(keep, sizes, n, causal), s / jnp.sqrt(q.shape[-1]), -jnp.inf)
    out = jnp.einsum("bhnm,bhmd->bhnd", jax.nn.softmax(s, -1),
                     _repeat_kv(v, groups).astype(jnp.float32))
    return out.astype(q.dtype), keep


def attention_row_recall(q, k, keep, sizes: BlockSizes = BlockSizes(), causal: bool = False):
    """[B, Hq, N] exact attention mass of each query row inside its kept blocks (``keep``
    [B, Hq, nq, nk] bool, leading axes broadcast)."""
    _check_qkv(q, k, k, sizes)
    n = q.shape[2]
    _check_keep(keep, n, sizes, q.shape[:2])
    s = _exact_scores(q, k)
    if causal:
        s = jnp.where(jnp.tril(jnp.ones((n, n), bool)), s, -jnp.inf)
    p = jax.nn.softmax(s, -1)
    return jnp.sum(jnp.where(_element_mask(keep, sizes, n, causal), p, 0.0), -1)


def attention_recall(q, k, keep, sizes: BlockSizes = BlockSizes(), causal: bool = False):
    """[B, Hq] mean over queries of the exact attention mass inside the kept blocks."""
    return attention_row_recall(q, k, keep, sizes, causal).mean(-1)


def causal_density(keep, n: int, sizes: BlockSizes = BlockSizes(), causal: bool = True):
    """[B, Hq] fraction of the *valid* blocks that are kept.

    Valid: holding a real (query, key) pair, i.e. on or below the diagonal when causal; so
    dense causal attention has density 1 (the full square would count it as ~1/2).
    ``keep``: [..., nq, nk] bool block mask of a length-``n`` sequence.
    """
    _check_keep(keep, n, sizes)
    valid = always_kept_blocks(n, BlockSizes(sizes.block_q, sizes.block_k, local=n + 1),
                               causal)
    keep = keep & valid
    return keep.sum((-2, -1)) / valid.sum()


def calibrate_tau(q, k, v, theta: float, sizes: BlockSizes = BlockSizes(), bits: int | None = 8,
                  causal: bool = False, tau0: float = 0.008, tau_min: float = 1e-4):
    """Per-head tau: halve from ``tau0`` until mean |O - O~| < theta (SALE's calibration).

    Heads that still miss ``theta`` at ``tau_min`` become dense (tau = 0).

    Args:
      q, k, v: calibration inputs (see the module docstring).
      theta: per-head tolerance on the mean absolute output error per element, > 0
        (per element: the official code's theta is D times this one, see the module doc).

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
