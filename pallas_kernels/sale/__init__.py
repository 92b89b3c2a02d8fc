"""SALE: low-bit QK estimation, Relative Attention Score and block-sparse attention.

``reference`` is the pure-jnp reference of the whole method (arXiv 2505.24179);
``block_sparse_attention`` is the Pallas block-sparse flash-attention kernel (GPU-style
grid, ``interpret=True`` on CPU). Still to come: the estimation + selection kernel, the
TPU scalar-prefetch variant, ``jaxlab.attention`` and the benchmark (issue 8).
"""

from pallas_kernels.sale import reference
from pallas_kernels.sale.block_sparse_attention import block_sparse_attention
from pallas_kernels.sale.reference import (
    BlockSizes,
    attention_recall,
    block_keep_mask,
    calibrate_tau,
    dense_attention,
    estimate_scores,
    quantize_blocks,
    sale_attention,
)

__all__ = ["BlockSizes", "attention_recall", "block_keep_mask", "block_sparse_attention",
           "calibrate_tau", "dense_attention", "estimate_scores", "quantize_blocks", "reference",
           "sale_attention"]
