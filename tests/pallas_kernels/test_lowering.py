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


WHOLE_GROUP = {"triton": 4, "mosaic_gpu": 1, "tpu": 4}  # h_p at 4 query heads per key head


@pytest.mark.parametrize("backend", list(TARGETS))
def test_whole_gqa_group_per_program_lowers(backend):
    """Default config, 4 query heads per key head (as 32 / 8), b_q = 64, D = 128: Triton
    and TPU pack the whole group (256 rows) into one program; Mosaic GPU (one warpgroup)
    falls back to one head per program; each lowers."""
    plan = C.make_plan((1, 4, 256, 128), (1, 1, 256, 128), BlockSizes(),
                       C.KernelConfig(backend), jnp.bfloat16)
    assert plan.heads_per_program == WHOLE_GROUP[backend]
    cfg = C.KernelConfig(backend=backend)
    q = jax.ShapeDtypeStruct((1, 4, 256, 128), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((1, 1, 256, 128), jnp.bfloat16)
    platform, target = TARGETS[backend]
    with gpu_lowering_target():
        text = jax.jit(lambda q, k, v: sale_attention_pallas(
            q, k, v, 1e-3, causal=True, config=cfg)).trace(q, kv, kv).lower(
                lowering_platforms=(platform,)).as_text()
    assert target in _calls(text)
    if backend == "triton":  # 16 rows per warp
        assert C.triton_params(plan, cfg).num_warps == 16


# (rows, tile keys, D) -> whether Mosaic GPU's own allocator accepts the program (measured
# by lowering with jax 0.10.2: the failing ones need 233544, 364616, 331888, 233584 and
# 462960 bytes > 232448).
MOSAIC_SMEM = {
    (64, 64, 64): True, (64, 64, 128): True, (64, 64, 256): False,
    (64, 128, 64): True, (64, 128, 128): True, (64, 128, 256): False,
    (128, 64, 64): True, (128, 64, 128): True, (128, 64, 256): False,
    (128, 128, 64): True, (128, 128, 128): False, (128, 128, 256): False,
}
QUICK = [(64, 64, 256)]  # fails fast; the fitting ones lower in the sweep (-m slow)


def _mosaic_smem_case(rows, tile, d, monkeypatch):
    cfg = C.KernelConfig("mosaic_gpu", block_rows=rows, block_keys=tile)
    mem, _ = C.program_resources("mosaic_gpu", rows, tile, d, 2, cfg)
    assert (mem <= C.SMEM_BYTES) == MOSAIC_SMEM[rows, tile, d]  # the model agrees
    monkeypatch.setattr(C, "fits", lambda *a: (True, True))  # force h_p = rows / 64
    q = jax.ShapeDtypeStruct((1, rows // 64, 256, d), jnp.bfloat16)
    kv = jax.ShapeDtypeStruct((1, 1, 256, d), jnp.bfloat16)
    lower = lambda: jax.jit(lambda q, k, v: sale_attention_pallas(  # noqa: E731
        q, k, v, 1e-3, causal=True, config=cfg)).trace(q, kv, kv).lower(
            lowering_platforms=("cuda",))
    with gpu_lowering_target():
        if MOSAIC_SMEM[rows, tile, d]:
            lower()
        else:
            with pytest.raises(Exception, match="shared memory"):
                lower()


@pytest.mark.parametrize("case", QUICK)
def test_mosaic_gpu_shared_memory_model_matches_lowering(case, monkeypatch):
    _mosaic_smem_case(*case, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("case", [c for c in MOSAIC_SMEM if c not in QUICK])
def test_mosaic_gpu_shared_memory_sweep(case, monkeypatch):
    _mosaic_smem_case(*case, monkeypatch)


def test_chooser_falls_back_to_fewer_heads_then_raises():
    """Packing shrinks until a program fits; one head that cannot fit raises naming
    ``block_keys``. Triton and TPU keep one head (their compilers allocate memory)."""
    q4, k1 = (1, 4, 512, 128), (1, 1, 512, 128)
    plans = {rows: C.make_plan(q4, k1, BlockSizes(), C.KernelConfig(
        "mosaic_gpu", block_rows=rows, block_keys=128)) for rows in (64, 128, 256)}
    assert all(p.heads_per_program == 1 for p in plans.values())  # registers, then smem
    f32 = C.make_plan(q4, k1, BlockSizes(), C.KernelConfig("triton"), jnp.float32)
    assert f32.heads_per_program == 1  # float32 operands: 256 rows would spill
    assert C.make_plan((1, 4, 512, 64), k1[:3] + (64,), BlockSizes(),
                       C.KernelConfig("mosaic_gpu")).heads_per_program == 2
    with pytest.raises(ValueError, match="block_keys"):
        C.make_plan((1, 4, 512, 256), (1, 1, 512, 256), BlockSizes(),
                    C.KernelConfig("mosaic_gpu"))
    assert C.make_plan((1, 4, 512, 256), (1, 1, 512, 256), BlockSizes(),
                       C.KernelConfig("triton"), jnp.float32).heads_per_program == 1
    with pytest.raises(ValueError, match="block_keys"):
        C.make_plan(q4, k1, BlockSizes(), C.KernelConfig("triton", block_keys=32 * 64))


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
    assert (plan.rows, plan.tile, plan.n_pad, plan.d_pad) == (256, 64, 1024, 128)
    assert plan.heads_per_program == 4 and plan.programs_per_kv_head == 1
    mosaic = C.make_plan((1, 32, 1000, 96), (1, 8, 1000, 96), BlockSizes(),
                         C.KernelConfig("mosaic_gpu"))
    assert (mosaic.rows, mosaic.d_pad) == (64, 128)
