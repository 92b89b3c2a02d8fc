"""SALE: low-bit QK estimation, Relative Attention Score and block-sparse attention.

``reference`` is the pure-jnp reference of the whole method (arXiv 2505.24179);
``estimate.estimate_and_select`` (quantize + estimate + select, compact kept-block lists)
and ``block_sparse_attention`` (flash attention over kept blocks) are Pallas kernels with a
GPU-style grid, tested with ``interpret=True`` on CPU; ``estimate.sale_attention_pallas``
chains them. ``block_sparse_attention_tpu`` is the TPU (scalar-prefetch) form. Still to
come: ``jaxlab.attention`` inside the dLLM model and accelerator validation (issue 8).
"""

from pallas_kernels.sale import reference
from pallas_kernels.sale.block_sparse_attention import block_sparse_attention
from pallas_kernels.sale.estimate import estimate_and_select, sale_attention_pallas
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
           "calibrate_tau", "dense_attention", "estimate_and_select", "estimate_scores",
           "quantize_blocks", "reference", "sale_attention", "sale_attention_pallas"]
