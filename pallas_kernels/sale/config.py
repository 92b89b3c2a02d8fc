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
blocks of h_p query heads that share one key head (GQA packing), and walks the keys in
tiles of ``block_keys`` keys (r = block_keys / b_k selection blocks). Kept tiles carry an
(h_p x r)-bit mask saying which (head, selection block) pairs are kept. Default tile: 64
keys.

Head packing (ours; the issue asks for one program per GQA group, so that a kept K/V tile
is read once for the whole group). ``make_plan`` starts from the whole group (the largest
power of two dividing Hq / Hk, at most ``max_bits`` / r heads, and at most
``block_rows`` rows when that is set) and halves h_p until the program fits the
backend's budget (``program_resources``):

- on-chip memory: shared memory on GPUs (``SMEM_BYTES``: 227 KiB, the Hopper / H100 /
  H200 opt-in maximum per block) and VMEM on TPU (``VMEM_BYTES``: 16 MiB, the default
  scoped limit). On Mosaic GPU, whose lowering allocates shared memory itself (and whose
  figure the model is checked against), one head per program that does not fit raises a
  ValueError naming ``block_keys``; on Triton and TPU the allocation happens in the
  device compiler, so one head per program is always tried;
- live float32 values per GPU thread (accumulator + logits tile + the Q operand), a soft
  limit (``REG_FLOATS`` = 128 of the 255 registers: the load of a 128-row x 64-key tile
  at D = 128, bf16, on 8 warps, this kernel's launch before whole-group packing): a program over
  it would spill, so the chooser packs fewer heads; one head per program is always
  accepted.

Triton programs get 16 rows per warp (``num_warps`` = rows / 16, 4..16), as in
FlashAttention-2 (128 rows on 8 warps), so the whole 4-head group of a 32 / 8-head model at
b_q = 64 (256 rows) runs on 16 warps at D <= 128. A Mosaic GPU program is one warpgroup
(128 threads) whatever its rows, so there the register budget allows 128 rows at D = 64
and 64 rows (one head) at D = 128; more needs several compute warpgroups per program (not
done). These budgets are a model written from the hardware limits, not measured on a GPU
(none was lent); the Mosaic GPU shared-memory figure is checked against Mosaic GPU's own
allocator by ``tests/pallas_kernels/test_lowering.py``.

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
      block_rows: at most this many query rows per program (GQA heads are packed up to
        it); None: no cap, the whole GQA group when it fits the backend's budget (see the
        module docstring).
      block_keys: keys per tile, a multiple of ``BlockSizes.block_k`` (rounded up to it).
      num_warps: Triton warps per program; None: rows / 16, clipped to [4, 16].
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
    """``config`` resolved (``KernelConfig.resolved``); TypeError naming ``config`` unless it
    is a KernelConfig."""
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


SMEM_BYTES = 232448        # Hopper (sm90: H100 / H200) max dynamic shared memory per block
VMEM_BYTES = 16 * 2**20    # TPU default scoped VMEM limit (v4 / v5e / v5p)
REG_FLOATS = 128           # live float32 values per GPU thread before a program spills
BARRIER_BYTES = 8


def triton_warps(rows: int, config: KernelConfig) -> int:
    """Warps of a Triton program: ``config.num_warps`` or 16 rows per warp, in [4, 16]."""
    if config.num_warps is not None:
        return config.num_warps
    return int(min(16, max(4, rows // 16)))


def _check_backend(backend) -> None:
    if backend not in BACKENDS:
        raise ValueError(f"`backend` must be one of {BACKENDS}, got {backend!r} (resolve a "
                         "KernelConfig with backend None through `check_config`).")


def program_resources(backend: str, rows: int, tile: int, d_pad: int, itemsize: int,
                      config: KernelConfig) -> tuple[int, float]:
    """(on-chip bytes, live float32 values per thread) of one program (our model).

    The larger of the two kernels is counted (estimation with ``v`` holds the same tiles as
    attention with the always-kept state, plus the int8 codes of Q). Bytes: shared memory
    on GPUs, VMEM on TPU; the per-thread figure is 0 on TPU.

    Args:
      backend: one of ``BACKENDS``.
      rows: query rows per program (h_p b_q).
      tile: keys per tile.
      d_pad: padded head dim.
      itemsize: bytes per element of the dot operands (2 for bf16; Mosaic GPU always 2).
      config: KernelConfig (Triton stages and warps).

    Raises:
      ValueError: ``backend`` not one of ``BACKENDS``.
    """
    _check_backend(backend)
    f32 = 4
    if backend == "mosaic_gpu":
        itemsize = 2  # Mosaic GPU computes in bf16 (float32 inputs are cast)
        smem = (rows * d_pad * itemsize                  # Q
                + 2 * 2 * tile * d_pad * itemsize        # K, V double buffers
                + rows * d_pad * f32 + 2 * rows * f32    # always-kept state (o, m, l)
                + 8 * BARRIER_BYTES + 4096)              # barriers, alignment slack
        return smem, rows * (d_pad + tile) / 128.0       # one warpgroup per program
    if backend == "tpu":
        lanes = 128  # (rows, 1) float32 scratch is lane-padded
        blocks = (2 * rows * d_pad * itemsize            # Q and O blocks
                  + 2 * tile * d_pad * itemsize          # K and V tiles
                  + rows * d_pad * f32 + 2 * rows * lanes * f32)  # init state blocks
        vmem = 2 * blocks + rows * d_pad * f32 + 2 * rows * lanes * f32  # double buffer + scratch
        return vmem, 0.0
    stages = config.num_stages
    smem = (rows * d_pad * itemsize                      # Q (through shared memory)
            + rows * d_pad                               # int8 codes of Q (estimation)
            + stages * 2 * tile * d_pad * itemsize       # pipelined K, V tiles
            + rows * tile * itemsize)                    # P -> dot-operand layout change
    threads = 32 * triton_warps(rows, config)
    return smem, (rows * (d_pad + tile) + rows * d_pad * itemsize / f32) / threads


def fits(backend: str, rows: int, tile: int, d_pad: int, itemsize: int,
         config: KernelConfig) -> tuple[bool, bool]:
    """(on-chip memory fits, per-thread registers fit) for one program.

    Raises:
      ValueError: ``backend`` not one of ``BACKENDS``.
    """
    mem, regs = program_resources(backend, rows, tile, d_pad, itemsize, config)
    limit = VMEM_BYTES if backend == "tpu" else SMEM_BYTES
    return mem <= limit, regs <= REG_FLOATS


def make_plan(q_shape, k_shape, sizes, config: KernelConfig, dtype=jnp.bfloat16,
              heads_per_program: int | None = None) -> Plan:
    """Tiles, GQA packing and padded sizes for q [B, Hq, N, D], k [B, Hk, N, D].

    Args:
      q_shape, k_shape: shapes of q and k.
      sizes: BlockSizes.
      config: a KernelConfig (resolved here by ``check_config``: backend None becomes
        the default JAX backend's).
      dtype: dtype of the dot operands (q's); it sets the memory budget.
      heads_per_program: force h_p (e.g. to decode lists made with another dtype's plan):
        a positive int dividing Hq / Hk with h_p r <= ``config.max_bits`` (r: selection
        blocks per key tile), the bound the automatic choice keeps.

    Raises:
      TypeError: ``config`` not a KernelConfig.
      ValueError: Hq not a multiple of Hk (``k_shape``); a bad ``heads_per_program``; a
        kept tile would need more than ``max_bits`` bits, or one head per program does not
        fit the backend's on-chip memory (``block_keys`` too large).
    """
    config = check_config(config)
    b, hq, n, d = q_shape
    hk = k_shape[1]
    if hk < 1 or hq % hk:
        raise ValueError(f"`k_shape`: the query heads ({hq}) must be a multiple of the key "
                         f"heads ({hk}).")
    groups = hq // hk
    bq, bk = sizes.block_q, sizes.block_k
    tile = max(bk, -(-config.block_keys // bk) * bk)
    sub = tile // bk
    if sub > config.max_bits:
        raise ValueError(f"a kept tile would need {sub} bits > `max_bits`={config.max_bits}: "
                         "lower `block_keys`.")
    step = math.lcm(bq, tile)
    n_pad = -(-n // step) * step
    if config.backend == "mosaic_gpu":
        d_pad = -(-d // 64) * 64
    elif config.backend == "triton":
        d_pad = max(32, _next_pow2(d))  # int8 dots want K >= 32
    else:
        d_pad = d
    itemsize = jnp.dtype(dtype).itemsize
    if heads_per_program is not None:
        _checks.check_positive_int("heads_per_program", heads_per_program)
        if groups % heads_per_program:
            raise ValueError(f"`heads_per_program`={heads_per_program} must divide the query "
                             f"heads per key head ({hq} / {hk} = {groups}).")
        if heads_per_program * sub > config.max_bits:
            raise ValueError(
                f"`heads_per_program`={heads_per_program} x {sub} selection blocks per tile "
                f"needs {heads_per_program * sub} bits per kept tile > "
                f"`max_bits`={config.max_bits}.")
        hp = heads_per_program
    else:
        hp = 1
        while groups % (2 * hp) == 0 and 2 * hp * sub <= config.max_bits and (
                config.block_rows is None or 2 * hp * bq <= config.block_rows):
            hp *= 2
        while hp > 1 and not all(fits(config.backend, hp * bq, tile, d_pad, itemsize, config)):
            hp //= 2
        mem_ok, _ = fits(config.backend, bq, tile, d_pad, itemsize, config)
        if not mem_ok and config.backend == "mosaic_gpu":  # the model checked by lowering
            mem, _ = program_resources(config.backend, bq, tile, d_pad, itemsize, config)
            limit = VMEM_BYTES if config.backend == "tpu" else SMEM_BYTES
            raise ValueError(
                f"one query head per program needs ~{mem} bytes of on-chip memory > {limit} "
                f"on backend {config.backend!r} (b_q={bq}, tile={tile}, D={d_pad}): lower "
                "`block_keys` (or `block_q` of the BlockSizes).")
    return Plan(b, hq, hk, n, d, n_pad, d_pad, bq, bk, sizes.local, tile, hp)


def pad_to(x, n_pad: int, d_pad: int):
    """Zero-pad [B, H, N, D] to [B, H, n_pad, d_pad]."""
    n, d = x.shape[2], x.shape[3]
    if n == n_pad and d == d_pad:
        return x
    return jnp.pad(x, ((0, 0), (0, 0), (0, n_pad - n), (0, d_pad - d)))


def triton_params(plan: Plan, config: KernelConfig):
    from jax.experimental.pallas import triton as pltriton

    return pltriton.CompilerParams(num_warps=triton_warps(plan.rows, config),
                                   num_stages=config.num_stages)
