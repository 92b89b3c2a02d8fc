"""Pallas kernels used by jaxlab (each with a pure-jnp reference and ``interpret=`` mode).

The SALE kernels (quantized QK estimation, Relative Attention Score, block-sparse
attention) will live in ``pallas_kernels.sale``; they are not implemented yet.
"""
