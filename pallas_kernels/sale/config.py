"""Launch configuration of the SALE kernels: backend, tiles, padding (jax / numpy only).

A kernel never relies on ``jax_pallas_use_mosaic_gpu`` (the global default of jax 0.10.x is
Mosaic GPU): every ``pallas_call`` gets the compiler parameters of the backend chosen here.

- ``"triton"``: Pallas Triton (``pltriton.CompilerParams(num_warps, num_stages)``); runs on
  sm80+ GPUs (Ampere, Hopper); deprecated by jax from 0.11.
- ``"mosaic_gpu"``: Pallas Mosaic GPU (TMA copies, WGMMA; Hopper, sm90).
- ``"tpu"``: Pallas Mosaic TPU (scalar-prefetched kept-block lists).
- ``None`` (default): ``"tpu"`` on a TPU default backend, else ``"triton"``.

Tiles. SALE's selection blocks (``BlockSizes``: b_q query rows, b_k keys) stay the unit of
the keep decision; a kernel program covers ``rows`` = h_p x b_q query rows, the b_q-row
blocks of h_p query heads that share one key head (GQA packing, h_p the largest power of
two dividing the group with h_p b_q <= ``block_rows``), and walks the keys in tiles of
``block_keys`` keys (r = block_keys / b_k selection blocks). Kept tiles carry an
(h_p x r)-bit mask saying which (head, selection block) pairs are kept. Defaults 128 x 64.

Padding. The sequence is padded to a multiple of lcm(b_q, tile) and the head dim to the
backend's granule (Triton: a power of two >= 32; Mosaic GPU: a multiple of 64); padded
keys are masked, padded query rows never vote for a block, outputs are sliced back.
"""

import dataclasses
import math

import jax
import jax.numpy as jnp

from pallas_kernels.sale import _checks

BACKENDS = ("triton", "mosaic_gpu", "tpu")
LOG2E = math.log2(math.e)


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """Backend and launch parameters of the SALE kernels (hashable: a static argument).

    Attributes:
      backend: one of ``BACKENDS`` or None (``"tpu"`` on TPU, else ``"triton"``).
      block_rows: target query rows per program (GQA heads are packed up to it); None:
        128, or 64 for Mosaic GPU (one warpgroup per program).
      block_keys: keys per tile, a multiple of ``BlockSizes.block_k`` (rounded up to it).
      num_warps: Triton warps per program; None: 4 for <= 64 rows x 64 dims, else 8.
      num_stages: Triton software-pipelining stages.
      max_bits: at most this many (head, block) bits per kept tile (int32 masks).
    """

    backend: str | None = None
    block_rows: int | None = None
    block_keys: int = 64
    num_warps: int | None = None
    num_stages: int = 2
    max_bits: int = 31

    def __post_init__(self):
        if self.backend is not None and self.backend not in BACKENDS:
            raise ValueError(f"`backend` must be one of {BACKENDS} or None, got "
                             f"{self.backend!r}.")
        for name in ("block_keys", "num_stages"):
            _checks.check_positive_int(name, getattr(self, name))
        for name in ("block_rows", "num_warps"):
            if getattr(self, name) is not None:
                _checks.check_positive_int(name, getattr(self, name))
        if not 1 <= self.max_bits <= 31:
            raise ValueError(f"`max_bits` must lie in [1, 31], got {self.max_bits}.")

    def resolved(self) -> "KernelConfig":
        """This config with ``backend`` filled in from the default JAX backend."""
        if self.backend is not None:
            return self
        backend = "tpu" if jax.default_backend() == "tpu" else "triton"
        return dataclasses.replace(self, backend=backend)


DEFAULT_CONFIG = KernelConfig()


def check_config(config) -> KernelConfig:
    if not isinstance(config, KernelConfig):
        raise TypeError(f"`config` must be a KernelConfig, got {type(config).__name__}.")
    return config.resolved()


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


@dataclasses.dataclass(frozen=True)
class Plan:
    """Static shapes of one kernel launch (all ints; hashable)."""

    batch: int
    q_heads: int
    kv_heads: int
    n: int          # real sequence length
    d: int          # real head dim
    n_pad: int
    d_pad: int
    block_q: int
    block_k: int
    local: int
    tile: int       # keys per tile
    heads_per_program: int

    @property
    def groups(self) -> int:
        return self.q_heads // self.kv_heads

    @property
    def sub(self) -> int:
        """Selection blocks per key tile (r)."""
        return self.tile // self.block_k

    @property
    def rows(self) -> int:
        return self.heads_per_program * self.block_q

    @property
    def num_q_blocks(self) -> int:
        return self.n_pad // self.block_q

    @property
    def num_k_blocks(self) -> int:
        return self.n_pad // self.block_k

    @property
    def num_tiles(self) -> int:
        return self.n_pad // self.tile

    @property
    def num_programs_h(self) -> int:
        """Programs along the head axis (packs of heads_per_program query heads)."""
        return self.q_heads // self.heads_per_program

    @property
    def programs_per_kv_head(self) -> int:
        return self.groups // self.heads_per_program

    @property
    def padded(self) -> bool:
        return self.n_pad != self.n

    @property
    def scale2(self) -> float:
        """Softmax scale folded into base-2 exponentials: log2(e) / sqrt(D)."""
        return LOG2E / math.sqrt(self.d)


def make_plan(q_shape, k_shape, sizes, config: KernelConfig) -> Plan:
    """Tiles, GQA packing and padded sizes for q [B, Hq, N, D], k [B, Hk, N, D]."""
    b, hq, n, d = q_shape
    hk = k_shape[1]
    groups = hq // hk
    bq, bk = sizes.block_q, sizes.block_k
    tile = max(bk, -(-config.block_keys // bk) * bk)
    sub = tile // bk
    rows = config.block_rows
    if rows is None:
        rows = 64 if config.backend == "mosaic_gpu" else 128
    hp = 1
    while (groups % (2 * hp) == 0 and 2 * hp * bq <= rows
           and 2 * hp * sub <= config.max_bits):
        hp *= 2
    if hp * sub > config.max_bits:
        raise ValueError(f"a kept tile would need {hp * sub} bits > `max_bits`="
                         f"{config.max_bits}: lower `block_keys`.")
    step = math.lcm(bq, tile)
    n_pad = -(-n // step) * step
    if config.backend == "mosaic_gpu":
        d_pad = -(-d // 64) * 64
    elif config.backend == "triton":
        d_pad = max(32, _next_pow2(d))  # int8 dots want K >= 32
    else:
        d_pad = d
    return Plan(b, hq, hk, n, d, n_pad, d_pad, bq, bk, sizes.local, tile, hp)


def pad_to(x, n_pad: int, d_pad: int):
    """Zero-pad [B, H, N, D] to [B, H, n_pad, d_pad]."""
    n, d = x.shape[2], x.shape[3]
    if n == n_pad and d == d_pad:
        return x
    return jnp.pad(x, ((0, 0), (0, 0), (0, n_pad - n), (0, d_pad - d)))


def triton_params(plan: Plan, config: KernelConfig):
    from jax.experimental.pallas import triton as pltriton

    warps = config.num_warps
    if warps is None:
        warps = 4 if plan.rows * plan.d_pad <= 64 * 64 else 8
    return pltriton.CompilerParams(num_warps=warps, num_stages=config.num_stages)
