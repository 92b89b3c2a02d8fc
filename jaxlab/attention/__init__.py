"""Model-level attention: a drop-in ``attention(q, k, v)`` with ``impl="dense" | "sale"``."""

from jaxlab.attention.attention import IMPLS, LAYOUTS, attention, attention_sizes

__all__ = ["IMPLS", "LAYOUTS", "attention", "attention_sizes"]
