"""SALE: low-bit QK estimation, Relative Attention Score and block-sparse attention.

``reference`` is the pure-jnp reference of the whole method (arXiv 2505.24179).
``estimate.estimate_and_select`` (the estimation kernel: exact sink / local / diagonal
attention, then the log-space keep test on int8/int4 codes, compact kept-tile lists) and
``block_sparse_attention`` (flash attention over kept tiles) are Pallas kernels for three
backends chosen per call by ``config.KernelConfig(backend=...)``: ``"triton"`` (GPU),
``"mosaic_gpu"`` (Hopper) and ``"tpu"``; ``estimate.sale_attention_pallas`` chains them
(the attention kernel starts from the estimation kernel's always-kept pass). All run on
CPU with ``interpret=True``; tests lower each for ``cuda`` and ``tpu`` on CPU. What the
kernels share (tile lists, partial state, layouts, ``Selection``) is in ``common``, which
the backends import instead of one another.
"""

from pallas_kernels.sale import reference
from pallas_kernels.sale.block_sparse_attention import block_sparse_attention
from pallas_kernels.sale.config import BACKENDS, KernelConfig
from pallas_kernels.sale.estimate import (
    Selection,
    estimate_and_select,
    kept_block_mask,
    sale_attention_pallas,
)
from pallas_kernels.sale.reference import (
    BlockSizes,
    attention_recall,
    block_keep_mask,
    calibrate_tau,
    causal_density,
    dense_attention,
    estimate_scores,
    quantize_blocks,
    sale_attention,
)

__all__ = ["BACKENDS", "BlockSizes", "KernelConfig", "Selection", "attention_recall",
           "block_keep_mask", "block_sparse_attention", "calibrate_tau", "causal_density",
           "dense_attention", "estimate_and_select", "estimate_scores", "kept_block_mask",
           "quantize_blocks", "reference", "sale_attention", "sale_attention_pallas"]
