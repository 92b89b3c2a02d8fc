"""Bad-input cases for ``jaxlab.attention`` and ``pallas_kernels.sale``."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.attention import accuracy, attention, attention_sizes
from pallas_kernels.sale import config as C
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.block_sparse_attention import block_sparse_attention
from pallas_kernels.sale.block_sparse_attention_tpu import block_sparse_attention_tpu
from pallas_kernels.sale.config import KernelConfig
from pallas_kernels.sale.estimate import (
    estimate_and_select,
    kept_block_mask,
    sale_attention_pallas,
)
from pallas_kernels.sale.synthetic import structured_qkv
from tests.bad_inputs.harness import Case

SIZES = R.BlockSizes(8, 8, 8)
B, H, N, D = 1, 2, 16, 4
KEY = jax.random.key(0)


def bhnd(h=H, n=N, d=D, dtype=jnp.float32, seed=0):
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.normal(size=(B, h, n, d)), dtype)


def bnhd(h=H, n=N, d=D, dtype=jnp.float32, seed=0):
    return jnp.swapaxes(bhnd(h, n, d, dtype, seed), 1, 2)


def ints(shape):
    return jnp.ones(shape, jnp.int32)


def att(q=None, k=None, v=None, **kw):
    q = bnhd() if q is None else q
    k = bnhd(seed=1) if k is None else k
    v = bnhd(seed=2) if v is None else v
    return attention(q, k, v, **kw)


def sale(q=None, k=None, v=None, tau=1e-3, sizes=SIZES, **kw):
    return att(q, k, v, impl="sale", tau=tau, sizes=sizes, **kw)


def ref(q=None, k=None, v=None, tau=1e-3, sizes=SIZES, bits=8):
    q = bhnd() if q is None else q
    k = bhnd(seed=1) if k is None else k
    v = bhnd(seed=2) if v is None else v
    return R.sale_attention(q, k, v, tau, sizes, bits)


def mask(keep_rows=True, dtype=bool):
    m = np.ones((B, H, N // 8, N // 8), bool)
    if not keep_rows:
        m[0, 1, 1] = False
    return jnp.asarray(m, dtype)


CASES = [
    # jaxlab.attention
    Case("attention: int32 q", lambda: att(q=ints((B, N, H, D))), "`q`"),
    Case("attention: int32 k", lambda: att(k=ints((B, N, H, D))), "`k`"),
    Case("attention: int32 v", lambda: att(v=ints((B, N, H, D))), "`v`"),
    Case("attention sale: int32 q", lambda: sale(q=ints((B, N, H, D))), "`q`"),
    Case("attention: 3-D q", lambda: att(q=jnp.zeros((N, H, D))), "`q`"),
    Case("attention: k head dim differs", lambda: att(k=bnhd(d=2)), "`k`"),
    Case("attention: v length differs", lambda: att(v=bnhd(n=8)), "`v`"),
    Case("attention: heads 2 vs 3", lambda: att(k=bnhd(h=3), v=bnhd(h=3)), "`k`"),
    Case("attention: unknown impl", lambda: att(impl="flash"), "`impl`"),
    Case("attention sale: tau -1", lambda: sale(tau=-1.0), "`tau`"),
    Case("attention sale: tau NaN", lambda: sale(tau=float("nan")), "`tau`"),
    Case("attention sale: tau wrong length", lambda: sale(tau=jnp.ones(3) * 1e-3), "`tau`"),
    Case("attention sale: empty sequence (N 0)", lambda: sale(
        q=bnhd(n=0), k=bnhd(n=0), v=bnhd(n=0)), "`q`"),
    Case("attention sale: bits 5", lambda: sale(bits=5), "`bits`"),
    # reference
    Case("reference.sale_attention: int q", lambda: ref(q=ints((B, H, N, D))), "`q`"),
    Case("reference.sale_attention: tau -1", lambda: ref(tau=-1.0), "`tau`"),
    Case("reference.sale_attention: k length", lambda: ref(k=bhnd(n=8)), "`k`"),
    Case("reference.sale_attention: bits 3", lambda: ref(bits=3), "`bits`"),
    Case("reference.dense_attention: int q", lambda: R.dense_attention(
        ints((B, H, N, D)), bhnd(), bhnd()), "`q`"),
    Case("reference.dense_attention: heads 2 vs 3", lambda: R.dense_attention(
        bhnd(), bhnd(h=3), bhnd(h=3)), "`k`"),
    Case("reference.estimate_scores: float16 k vs int q", lambda: R.estimate_scores(
        ints((B, H, N, D)), bhnd(), SIZES), "`q`"),
    Case("reference.quantize_blocks: N % block", lambda: R.quantize_blocks(
        jnp.ones((10, 4)), 4), "`block`"),
    Case("reference.quantize_blocks: int x", lambda: R.quantize_blocks(ints((8, 4)), 4), "`x`"),
    Case("reference.block_keep_mask: tau NaN", lambda: R.block_keep_mask(
        bhnd(), bhnd(seed=1), float("nan"), SIZES), "`tau`"),
    Case("reference.calibrate_tau: theta 0", lambda: R.calibrate_tau(
        bhnd(), bhnd(seed=1), bhnd(seed=2), 0.0, SIZES), "`theta`"),
    Case("reference.calibrate_tau: tau_min 0", lambda: R.calibrate_tau(
        bhnd(), bhnd(seed=1), bhnd(seed=2), 0.1, SIZES, tau_min=0.0), "`tau_min`"),
    Case("BlockSizes: block_q 0", lambda: R.BlockSizes(0, 8, 8), "`block_q`"),
    Case("BlockSizes: 12 vs 8", lambda: R.BlockSizes(12, 8, 8), "`block_q`"),
    # kernels
    Case("estimate_and_select: int k", lambda: estimate_and_select(
        bhnd(), ints((B, H, N, D)), 1e-3, SIZES, interpret=True), "`k`"),
    Case("estimate_and_select: tau NaN", lambda: estimate_and_select(
        bhnd(), bhnd(seed=1), float("nan"), SIZES, interpret=True), "`tau`"),
    Case("sale_attention_pallas: int v", lambda: sale_attention_pallas(
        bhnd(), bhnd(seed=1), ints((B, H, N, D)), 1e-3, SIZES, interpret=True), "`v`"),
    Case("block_sparse_attention: empty mask row", lambda: block_sparse_attention(
        bhnd(), bhnd(seed=1), bhnd(seed=2), mask(False), SIZES, interpret=True),
        "`block_mask`"),
    Case("block_sparse_attention: float mask", lambda: block_sparse_attention(
        bhnd(), bhnd(seed=1), bhnd(seed=2), mask(dtype=jnp.float32), SIZES, interpret=True),
        "`block_mask`"),
    Case("block_sparse_attention: int q", lambda: block_sparse_attention(
        ints((B, H, N, D)), bhnd(seed=1), bhnd(seed=2), mask(), SIZES, interpret=True), "`q`"),
    Case("block_sparse_attention: mask shape", lambda: block_sparse_attention(
        bhnd(), bhnd(seed=1), bhnd(seed=2), jnp.ones((1, 2, 2, 3), bool), SIZES,
        interpret=True), "`block_mask`"),
    Case("block_sparse_attention_tpu: empty mask row", lambda: block_sparse_attention_tpu(
        bhnd(), bhnd(seed=1), bhnd(seed=2), mask(False), SIZES, interpret=True),
        "`block_mask`"),
    Case("block_sparse_attention_tpu: int v", lambda: block_sparse_attention_tpu(
        bhnd(), bhnd(seed=1), ints((B, H, N, D)), mask(), SIZES, interpret=True), "`v`"),
    Case("estimate_and_select: v length differs", lambda: estimate_and_select(
        bhnd(), bhnd(seed=1), 1e-3, SIZES, interpret=True, v=bhnd(n=8)), "`v`"),
    Case("sale_attention_pallas: config a string", lambda: sale_attention_pallas(
        bhnd(), bhnd(seed=1), bhnd(seed=2), 1e-3, SIZES, interpret=True, config="triton"),
        "`config`"),
    Case("block_sparse_attention: 2 x 2 mask for N 24", lambda: block_sparse_attention(
        bhnd(n=24), bhnd(n=24, seed=1), bhnd(n=24, seed=2), mask(), SIZES, interpret=True),
        "`block_mask`"),
    Case("KernelConfig: backend cuda", lambda: KernelConfig(backend="cuda"), "`backend`"),
    Case("KernelConfig: block_keys 0", lambda: KernelConfig(block_keys=0), "`block_keys`"),
    Case("KernelConfig: num_warps 0", lambda: KernelConfig(num_warps=0), "`num_warps`"),
    Case("KernelConfig: max_bits 40", lambda: KernelConfig(max_bits=40), "`max_bits`"),
    Case("structured_qkv: q_heads 3 kv_heads 2", lambda: structured_qkv(
        n=64, d=17, q_heads=3, kv_heads=2), "`q_heads`"),
    Case("structured_qkv: kv_heads 0", lambda: structured_qkv(n=64, d=17, kv_heads=0),
         "`kv_heads`"),
    Case("structured_qkv: int dtype", lambda: structured_qkv(n=64, d=17, dtype=jnp.int32),
         "`dtype`"),
    # make_plan / program_resources / fits (heads 4 / 1: one GQA group of 4 query heads;
    # the default BlockSizes and 64-key tiles give r = 2 selection blocks per tile).
    Case("make_plan: heads_per_program 0", lambda: C.make_plan(
        (1, 4, 256, 32), (1, 1, 256, 32), R.BlockSizes(), KernelConfig("triton"),
        heads_per_program=0), "`heads_per_program`"),
    Case("make_plan: heads_per_program 2.0", lambda: C.make_plan(
        (1, 4, 256, 32), (1, 1, 256, 32), R.BlockSizes(), KernelConfig("triton"),
        heads_per_program=2.0), "`heads_per_program`"),
    Case("make_plan: heads_per_program 3 does not divide 4", lambda: C.make_plan(
        (1, 4, 256, 32), (1, 1, 256, 32), R.BlockSizes(), KernelConfig("triton"),
        heads_per_program=3), "`heads_per_program`"),
    Case("make_plan: heads_per_program 4 x r 2 > max_bits 4", lambda: C.make_plan(
        (1, 4, 256, 32), (1, 1, 256, 32), R.BlockSizes(), KernelConfig("triton", max_bits=4),
        heads_per_program=4), "`heads_per_program`"),
    Case("make_plan: config a string", lambda: C.make_plan(
        (1, 4, 256, 32), (1, 1, 256, 32), R.BlockSizes(), "triton"), "`config`"),
    Case("make_plan: 3 query heads on 2 key heads", lambda: C.make_plan(
        (1, 3, 256, 32), (1, 2, 256, 32), R.BlockSizes(), KernelConfig("triton")),
        "`k_shape`"),
    Case("program_resources: backend None", lambda: C.program_resources(
        None, 64, 64, 64, 2, KernelConfig("triton")), "`backend`"),
    Case("fits: backend cuda", lambda: C.fits("cuda", 64, 64, 64, 2, KernelConfig("triton")),
         "`backend`"),
]


# The accuracy comparison on the user's q, k, v (jaxlab.attention.compare and its parts), and
# the reference's measures. Every bad argument is refused before any attention is computed.
def problem(**over):
    from jaxlab.attention import AttentionProblem

    kw = dict(q=bhnd(), k=bhnd(seed=1), v=bhnd(seed=2), sizes=SIZES)
    kw.update(over)
    return AttentionProblem(**kw)


def acmp(fn, *args, **kw):
    from jaxlab.attention import comparison

    return getattr(comparison, fn)(*args, **kw)


def items(split, index, tuning_items):
    from jaxlab.core import protocol

    index = np.asarray(index)
    return protocol.Items(split, index, protocol.item_keys(KEY, split, index), tuning_items)


# quantize_blocks' outputs for [B, H, N, D] (int8 codes, a scale per block of ``block`` rows)
CODES = np.ones((B, H, N, D), np.int8)


def scales(block):
    return np.ones((B, H, N // block, 1, 1), np.float32)


def keep_mask(n=N, sizes=SIZES, dtype=bool):
    nq = -(-n // sizes.block_q)
    return jnp.ones((B, H, nq, nq * (sizes.block_q // sizes.block_k)), dtype)


CASES += [
    Case("attention.compare: problem a (q, k, v) tuple", lambda: acmp(
        "compare", KEY, (bhnd(), bhnd(seed=1), bhnd(seed=2)), seeds=2, progress=False),
         "`problem`"),
    Case("attention.compare: unknown contender", lambda: acmp(
        "compare", KEY, problem(), contenders=("sale", "flash"), seeds=2, progress=False),
         "`contenders['flash']`"),
    Case("attention.compare: more test slices than heads", lambda: acmp(
        "compare", KEY, problem(), seeds=3, progress=False), "`seeds`"),
    Case("attention_sizes: block_q 32 under block_k 64", lambda: attention_sizes(block_q=32),
         "`block_q`"),
    Case("attention_sizes: local 0", lambda: attention_sizes(local=0), "`local`"),
    Case("attention.compare: tolerance negative", lambda: acmp(
        "compare", KEY, problem(), contenders=("static", "dense"), tuning=0, seeds=2,
        settings={"tolerance": -0.05}, progress=False), "`settings.tolerance`"),
    Case("comparison.default_goals: unknown metric", lambda: acmp("default_goals", "accuracy"),
         "`metric`"),
    Case("comparison.item_slices: items past the heads", lambda: acmp(
        "item_slices", problem(), items("test", [0, 5], 0)), "`items`"),
    Case("comparison.item_slices: a split name, not items",
         lambda: acmp("item_slices", problem(), "validation"), "`items`"),
    Case("accuracy.slice_metrics: tau NaN", lambda: accuracy.slice_metrics(
        bhnd(), bhnd(seed=1), bhnd(seed=2), float("nan"), sizes=SIZES), "`tau`"),
    Case("accuracy.slice_metrics: dense of another shape", lambda: accuracy.slice_metrics(
        bhnd(), bhnd(seed=1), bhnd(seed=2), 1e-3, sizes=SIZES, dense=bhnd(n=8)), "`dense`"),
    Case("accuracy.check_tau: inf mixed with finite thresholds",
         lambda: accuracy.check_tau([1e-3, float("inf")]), "`tau`"),
    # reference measures
    Case("reference.attention_recall: keep of RAS scores (float)", lambda: R.attention_recall(
        bhnd(), bhnd(seed=1), keep_mask(dtype=jnp.float32), SIZES), "`keep`"),
    Case("reference.attention_row_recall: keep of other tiles", lambda: (
        R.attention_row_recall(bhnd(), bhnd(seed=1), keep_mask(sizes=R.BlockSizes(4, 4, 4)),
                               SIZES)), "`keep`"),
    Case("reference.causal_density: n of another sequence", lambda: R.causal_density(
        keep_mask(), 64, SIZES), "`n`"),
    Case("reference.causal_density: n 0", lambda: R.causal_density(keep_mask(), 0, SIZES),
         "`n`"),
    Case("reference.always_kept_blocks: n 0", lambda: R.always_kept_blocks(0, SIZES, False),
         "`n`"),
    Case("reference.always_kept_blocks: BlockSizes given as a tuple",
         lambda: R.always_kept_blocks(N, (8, 8, 8), False), "`sizes`"),
    Case("reference.block_log_margin: BlockSizes given as a tuple",
         lambda: R.block_log_margin(bhnd(), bhnd(seed=1), (8, 8, 8)), "`sizes`"),
    Case("reference.block_ras_max: int q",
         lambda: R.block_ras_max(ints((B, H, N, D)), bhnd(seed=1), SIZES), "`q`"),
    Case("reference.row_stats: 3-D q (no batch axis)",
         lambda: R.row_stats(bhnd()[0], bhnd(seed=1)[0], SIZES), "`q`"),
    Case("reference.dequantize_blocks: block 3 for N 16",
         lambda: R.dequantize_blocks(CODES, scales(8), 3), "`block`"),
    Case("reference.dequantize_blocks: scale of another block",
         lambda: R.dequantize_blocks(CODES, scales(4), 8), "`scale`"),
    Case("reference.smooth: empty sequence (N 0)", lambda: R.smooth(bhnd(n=0), bhnd(n=0)),
         "`q`"),
    # (the shapes are refused before the selection is read: a placeholder)
    Case("kept_block_mask: q given for q_shape", lambda: kept_block_mask(
        None, bhnd(), (B, H, N, D), SIZES), "`q_shape`"),
    Case("kept_block_mask: a reference block mask for selection", lambda: kept_block_mask(
        keep_mask(), (B, H, N, D), (B, H, N, D), SIZES), "`selection`"),
]

CASES = [c._replace(name=f"sale/{c.name}") for c in CASES]
