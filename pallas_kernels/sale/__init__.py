"""SALE: low-bit QK estimation, Relative Attention Score and block-sparse attention.

``reference`` is the pure-jnp reference of the whole method (arXiv 2505.24179). The Pallas
kernels (estimation + selection, block-sparse flash attention) are not written yet.
"""

from pallas_kernels.sale import reference
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

__all__ = ["BlockSizes", "attention_recall", "block_keep_mask", "calibrate_tau",
           "dense_attention", "estimate_scores", "quantize_blocks", "reference",
           "sale_attention"]
