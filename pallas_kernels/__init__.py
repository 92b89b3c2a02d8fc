"""Pallas kernels used by jaxlab (each with a pure-jnp reference and ``interpret=`` mode).

``pallas_kernels.sale``: SALE's reference, estimation and block-sparse attention kernels
for the Triton, Mosaic GPU and TPU backends (``sale.config.KernelConfig``).
"""
