"""Pallas kernels used by jaxlab (each with a pure-jnp reference and ``interpret=`` mode).

``pallas_kernels.sale``: SALE's reference and block-sparse attention kernel (in progress).
"""
