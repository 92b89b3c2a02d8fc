"""Configs for experiments/sale.py: get_config("smoke" | "quick" | "full").

One causal head group of ``pallas_kernels.sale.synthetic.structured_qkv`` inputs (``heads``
query heads sharing ``kv_heads`` key/value heads, head dimension ``dim``, ``length``
tokens) under SALE's default tiles; per keep threshold in ``taus``, the pure-jnp reference
and the two Pallas kernels (``interpret``: in the Pallas interpreter, as on a CPU) are run
and compared. ``kernel_atol``: the largest |O_kernel - O_reference| the accuracy check
accepts.
"""

import ml_collections

LENGTHS = {"smoke": 512, "quick": 1024, "full": 4096}


def get_config(arg: str = "quick") -> ml_collections.ConfigDict:
    if arg not in LENGTHS:
        raise ValueError(f"unknown preset {arg!r}; choose from {', '.join(LENGTHS)}.")
    c = ml_collections.ConfigDict()
    c.length = LENGTHS[arg]
    c.heads, c.kv_heads, c.dim = 4, 2, 64
    c.taus = (1e-4, 1e-3, 1e-2, 3e-2)
    c.bits = 8
    c.interpret = True
    c.kernel_atol = 1e-4
    c.seed = 0
    return c
