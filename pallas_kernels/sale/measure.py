"""Accuracy and latency measurements of the SALE kernels (jax / numpy only), shared by
``experiments/bench_sale.py`` and ``experiments/device_check_sale.py``.

Density is counted over the *valid* blocks (on or below the diagonal when causal, blocks
holding a real key): dense causal attention has density 1, not ~1/2 as over the full
square. Recall is the exact attention mass inside the kept blocks (mean over queries).

Latency (GPU only; every callable is jitted so the Python-side input checks never run in
the timed call): SALE end to end, its estimation kernel alone (``estimate``, no values),
the attention kernel with every valid block kept (``all_kept``: our dense), and dense
baselines: cuDNN flash attention (``jax.nn.dot_product_attention(implementation="cudnn")``),
jax's Pallas Triton flash attention (``pallas.ops.gpu.attention.mha``, K/V repeated to
the query heads: it has no GQA) and, on Hopper, jax's Mosaic GPU FlashAttention-3
(``attention_mgpu``). A baseline that fails to build is reported, not fatal.
"""

import functools
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

from pallas_kernels import _compat
from pallas_kernels.sale import config as C
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.block_sparse_attention import attend
from pallas_kernels.sale.common import lists_from_bits, tile_bits
from pallas_kernels.sale.estimate import estimate_and_select, kept_block_mask, sale_attention_pallas


def valid_block_mask(n: int, sizes: R.BlockSizes, causal: bool):
    """[nq, nk] bool: blocks holding a real (query, key) pair."""
    return R.always_kept_blocks(n, R.BlockSizes(sizes.block_q, sizes.block_k, n + 1), causal)


def accuracy(q, k, v, tau, sizes=R.BlockSizes(), bits: int = 8, causal: bool = True,
             interpret: bool = False, config: C.KernelConfig = C.DEFAULT_CONFIG,
             with_kernel: bool = True) -> dict:
    """Density / recall / error of SALE vs dense attention (reference), and the kernels'
    kept sets and outputs vs the reference (needs N^2 memory: short sequences only)."""
    keep = R.block_keep_mask(q, k, tau, sizes, bits, causal)
    n = q.shape[2]
    dense = R.dense_attention(q, k, v, causal)
    ref_out, _ = R.sale_attention(q, k, v, tau, sizes, bits, causal)
    res = {
        "density": float(R.causal_density(keep, n, sizes, causal).mean()),
        "density_full_square": float(keep.mean()),
        "recall": float(R.attention_recall(q, k, keep, sizes, causal).mean()),
        "ref_err_mean": float(jnp.abs(ref_out.astype(jnp.float32) - dense).mean()),
    }
    if with_kernel:
        out, sel = sale_attention_pallas(q, k, v, tau, sizes, bits, causal, interpret, config)
        got = kept_block_mask(sel, q.shape, k.shape, sizes, causal, config)
        diff = out.astype(jnp.float32) - ref_out.astype(jnp.float32)
        res.update({
            "kept_identical": bool(jnp.all(got == keep)),
            "kept_blocks_differing": int(jnp.sum(got != keep)),
            "kernel_vs_ref_max_abs": float(jnp.abs(diff).max()),
            "kernel_vs_ref_mean_abs": float(jnp.abs(diff).mean()),
            "kernel_vs_dense_mean_abs": float(jnp.abs(out.astype(jnp.float32) - dense).mean()),
        })
    return res


def best_time(fn, repeats: int = 3, warmup: bool = True) -> float:
    """Best-of-``repeats`` seconds of ``fn()`` (blocked on), after one warm-up call."""
    if warmup:
        jax.block_until_ready(fn())
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best


def _bnhd(x):
    return jnp.swapaxes(x, 1, 2)


def kernel_fns(q, k, v, tau, sizes=R.BlockSizes(), bits: int = 8, causal: bool = True,
               config: C.KernelConfig = C.DEFAULT_CONFIG, interpret: bool = False) -> dict:
    """Zero-argument callables of our kernels: ``sale`` (end to end: preparation,
    estimation, attention), ``estimate`` (preparation + estimation kernel) and ``all_kept``
    (the attention kernel alone over every valid tile; its lists are built beforehand)."""
    config = C.check_config(config)
    plan = C.make_plan(q.shape, k.shape, sizes, config, q.dtype)
    valid = valid_block_mask(plan.n_pad, sizes, causal)  # on the padded grid
    lists = jax.jit(lambda: lists_from_bits(tile_bits(jnp.broadcast_to(
        valid, (plan.batch, plan.q_heads, *valid.shape)), plan)))()
    sale = jax.jit(lambda q, k, v: sale_attention_pallas(q, k, v, tau, sizes, bits, causal,
                                                         interpret, config)[0])
    est = jax.jit(lambda q, k: estimate_and_select(q, k, tau, sizes, bits, causal, interpret,
                                                   config=config).lists.count)

    @jax.jit
    def full(q, k, v, lists):
        qp, kp, vp = (C.pad_to(x, plan.n_pad, plan.d_pad) for x in (q, k, v))
        return attend(qp, kp, vp, lists, None, plan, config, causal, interpret)

    return {"sale": lambda: sale(q, k, v), "estimate": lambda: est(q, k),
            "all_kept": lambda: full(q, k, v, lists)}


def baseline_fns(q, k, v, causal: bool = True) -> dict:
    """Zero-argument callables of dense GPU baselines (built lazily; may raise when run)."""
    groups = q.shape[1] // k.shape[1]
    qn, kn, vn = _bnhd(q), _bnhd(k), _bnhd(v)
    cudnn = jax.jit(functools.partial(jax.nn.dot_product_attention, is_causal=causal,
                                      implementation="cudnn"))
    fns = {"cudnn": lambda: cudnn(qn, kn, vn)}

    def pallas_flash():
        from jax.experimental.pallas.ops.gpu import attention as fa

        kr, vr = (jnp.repeat(x, groups, axis=2) for x in (kn, vn))
        f = jax.jit(functools.partial(fa.mha, segment_ids=None, causal=causal,
                                      sm_scale=1.0 / math.sqrt(q.shape[-1])))
        return lambda: f(qn, kr, vr)

    def mgpu_flash():
        from jax.experimental.pallas.ops.gpu import attention_mgpu as fa3

        cfg = fa3.TuningConfig(block_q=64, block_kv=64, max_concurrent_steps=2, causal=causal)
        f = jax.jit(functools.partial(fa3.attention, config=cfg))
        return lambda: f(qn, kn, vn)

    fns["pallas_triton_flash"] = _lazy(pallas_flash)
    fns["pallas_mosaic_fa3"] = _lazy(mgpu_flash)
    return fns


def _lazy(build):
    cache = []

    def run():
        if not cache:
            cache.append(build())
        return cache[0]()

    return run


def flops(n: int, q_heads: int, d: int, batch: int = 1, density: float = 1.0,
          causal: bool = True) -> float:
    """Attention FLOPs (2 matmuls, 2 flops per MAC) over the kept fraction of valid pairs."""
    pairs = n * (n + 1) / 2 if causal else n * n
    return 4.0 * batch * q_heads * d * pairs * density


def env_report() -> dict:
    """Versions, devices and backend defaults (for a device check's first line)."""
    import platform

    devs = jax.devices()
    rep = {
        "python": platform.python_version(), "jax": jax.__version__,
        "jaxlib": getattr(jax.lib, "__version__", None) or _jaxlib_version(),
        "numpy": np.__version__, "default_backend": jax.default_backend(),
        "devices": [str(d) for d in devs], "device_kind": devs[0].device_kind,
        "pallas_use_mosaic_gpu_default": _compat.pallas_use_mosaic_gpu_default(),
    }
    cc = getattr(devs[0], "compute_capability", None)
    if cc is not None:
        rep["compute_capability"] = str(cc)
    try:
        stats = devs[0].memory_stats() or {}
        rep["memory_bytes_limit"] = stats.get("bytes_limit")
    except Exception as e:  # noqa: BLE001 - CPU devices and old plugins
        rep["memory_stats_error"] = repr(e)[:200]
    return rep


def _jaxlib_version():
    try:
        import jaxlib

        return jaxlib.__version__
    except Exception:  # noqa: BLE001
        return None
