"""Every SALE kernel lowers for every target, on this CPU machine.

``jax.jit(f).trace(...).lower(lowering_platforms=(...))`` runs the Pallas backends'
lowering (Triton IR, Mosaic GPU with its shared-memory and WGMMA layout checks, Mosaic
TPU with its tiling rules) without a device, so a kernel that cannot compile for a GPU or a
TPU fails here. The backend is the ``KernelConfig``'s, never the global
``jax_pallas_use_mosaic_gpu`` default (checked by flipping it). Small shapes, bf16, GQA.
"""

import re

import jax
import jax.numpy as jnp
import pytest

from pallas_kernels._compat import gpu_lowering_target, pallas_use_mosaic_gpu_default
from pallas_kernels.sale import config as C
from pallas_kernels.sale.block_sparse_attention import block_sparse_attention
from pallas_kernels.sale.estimate import estimate_and_select, sale_attention_pallas
from pallas_kernels.sale.reference import BlockSizes

TARGETS = {  # backend: (platform, custom call target in the lowered module)
    "triton": ("cuda", "__gpu$xla.gpu.triton"),
    "mosaic_gpu": ("cuda", "mosaic_gpu_v2"),
    "tpu": ("tpu", "tpu_custom_call"),
}
KERNELS = ("estimate", "estimate_with_v", "block_sparse_attention", "sale_attention_pallas")


def _lower(kernel, backend, n=256, d=64, causal=True, dtype=jnp.bfloat16, **config):
    cfg = C.KernelConfig(backend=backend, **config)
    q = jax.ShapeDtypeStruct((1, 4, n, d), dtype)
    kv = jax.ShapeDtypeStruct((1, 2, n, d), dtype)
    nq = -(-n // 64)
    mask = jax.ShapeDtypeStruct((1, 4, nq, 2 * nq), jnp.bool_)
    fns = {
        "estimate": (lambda q, k, v, m: estimate_and_select(q, k, 1e-3, causal=causal,
                                                            config=cfg)),
        "estimate_with_v": (lambda q, k, v, m: estimate_and_select(
            q, k, 1e-3, causal=causal, v=v, config=cfg)),
        "block_sparse_attention": (lambda q, k, v, m: block_sparse_attention(
            q, k, v, m, causal=causal, config=cfg)),
        "sale_attention_pallas": (lambda q, k, v, m: sale_attention_pallas(
            q, k, v, 1e-3, causal=causal, config=cfg)),
    }
    platform, _ = TARGETS[backend]
    with gpu_lowering_target():  # jax 0.12 on a GPU-less host needs the target GPU named
        return jax.jit(fns[kernel]).trace(q, kv, kv, mask).lower(
            lowering_platforms=(platform,)).as_text()


def _calls(text):
    return set(re.findall(r"custom_call @([\w$.]+)", text))


@pytest.mark.parametrize("backend", list(TARGETS))
@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_lowers(kernel, backend):
    calls = _calls(_lower(kernel, backend))
    assert TARGETS[backend][1] in calls
    assert not calls & {t for b, (_, t) in TARGETS.items() if b != backend}


@pytest.mark.parametrize("backend", list(TARGETS))
def test_padded_non_causal_float32_lowers(backend):
    """N = 200 and D = 96 (both padded), full attention, float32 inputs."""
    text = _lower("sale_attention_pallas", backend, n=200, d=96, causal=False,
                  dtype=jnp.float32)
    assert TARGETS[backend][1] in _calls(text)


@pytest.mark.parametrize("backend", ["triton", "mosaic_gpu"])
def test_head_packing_128_rows_lowers(backend):
    """Two query heads of one key head per program (128 rows), D = 128."""
    text = _lower("sale_attention_pallas", backend, d=128, block_rows=128)
    assert TARGETS[backend][1] in _calls(text)


@pytest.fixture
def flipped_mosaic_default():
    old = pallas_use_mosaic_gpu_default()
    if old is None:  # jax >= 0.12 removed the flag; no global default to flip
        pytest.skip(f"jax {jax.__version__} has no jax_pallas_use_mosaic_gpu flag")
    jax.config.update("jax_pallas_use_mosaic_gpu", not old)
    yield
    jax.config.update("jax_pallas_use_mosaic_gpu", old)


@pytest.mark.usefixtures("flipped_mosaic_default")
@pytest.mark.parametrize("backend", ["triton", "mosaic_gpu"])
def test_backend_ignores_the_global_pallas_default(backend):
    assert TARGETS[backend][1] in _calls(_lower("sale_attention_pallas", backend))


def test_default_backend_is_explicit():
    assert C.KernelConfig().resolved().backend == "triton"  # CPU / GPU default backend
    plan = C.make_plan((1, 32, 1000, 128), (1, 8, 1000, 128), BlockSizes(),
                       C.KernelConfig("triton"))
    assert (plan.rows, plan.tile, plan.n_pad, plan.d_pad) == (128, 64, 1024, 128)
    assert plan.heads_per_program == 2 and plan.programs_per_kv_head == 2
    mosaic = C.make_plan((1, 32, 1000, 96), (1, 8, 1000, 96), BlockSizes(),
                         C.KernelConfig("mosaic_gpu"))
    assert (mosaic.rows, mosaic.d_pad) == (64, 128)
