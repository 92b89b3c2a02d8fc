"""Differences between the jax versions pallas_kernels supports (0.10.2 .. 0.12.x), in one place.

pallas_kernels never imports jaxlab, so this module holds the shims the kernels and their
measurement helpers need (``jaxlab/_compat.py`` holds jaxlab's). Each shim names the jax
versions it bridges; add a shim here instead of a ``jax.__version__`` check at a call site.
"""

from __future__ import annotations

import jax

JAX_VERSION: tuple[int, ...] = tuple(int(p) for p in jax.__version__.split(".")[:3] if p.isdigit())


def pallas_use_mosaic_gpu_default() -> bool | None:
    """The global ``jax_pallas_use_mosaic_gpu`` default, or None where jax has no such flag.

    jax 0.10.x has the flag (default True: a ``pallas_call`` on GPU without compiler params
    lowers through Mosaic GPU). jax 0.12 removed it: a GPU ``pallas_call`` without compiler
    params lowers through Triton. Our kernels always pass their backend's compiler params
    (``pallas_kernels.sale.config``), so the value is only reported, never relied on.
    """
    try:
        return bool(jax.config.jax_pallas_use_mosaic_gpu)
    except AttributeError:
        return None


def gpu_lowering_target(device_kind: str = "NVIDIA H100", num_cores: int | None = 132):
    """Context manager under which ``lower(lowering_platforms=("cuda",))`` works without a GPU.

    jax 0.10.x lowers Triton kernels on a machine without a GPU for compute capability 9.0.
    jax 0.12 asks for the target GPU instead ("No supported GPU devices found, please specify
    an abstract GPU device"): this enters a one-device abstract mesh whose abstract device is
    ``device_kind`` (default H100, i.e. the same 9.0 target). On jax 0.10.x, or where a GPU is
    present, it does nothing.
    """
    import contextlib

    sharding = jax.sharding
    if not hasattr(sharding, "AbstractDevice") or any(
            d.platform == "gpu" for d in jax.devices()):
        return contextlib.nullcontext()
    device = sharding.AbstractDevice(device_kind=device_kind, num_cores=num_cores,
                                     platform="gpu")
    mesh = sharding.AbstractMesh((1,), ("_gpu_target",), abstract_device=device)
    return sharding.use_abstract_mesh(mesh)


def mgpu_load(ref, layout):
    """``plgpu.load`` of a whole ref with ``layout``.

    jax 0.10.x: ``load(src, idx, *, layout)`` (``idx=()`` for the whole ref); jax 0.12:
    ``load(src, *, layout)`` (index the ref itself).
    """
    import inspect

    from jax.experimental.pallas import mosaic_gpu as plgpu

    if "idx" in inspect.signature(plgpu.load).parameters:
        return plgpu.load(ref, (), layout=layout)
    return plgpu.load(ref, layout=layout)


def mgpu_transpose_ref(ref, perm):
    """``plgpu.transpose_ref(ref, perm)`` (jax 0.10.x) / ``ref.transpose(perm)`` (jax 0.12, where
    ``transpose_ref`` is deprecated)."""
    from jax.experimental.pallas import mosaic_gpu as plgpu

    if "transpose_ref" in getattr(plgpu, "_deprecations", {}):
        return ref.transpose(perm)  # what the deprecated transpose_ref does on jax 0.12
    return plgpu.transpose_ref(ref, perm)
