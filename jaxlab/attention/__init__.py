"""Model-level attention: a drop-in ``attention(q, k, v)`` with ``impl="dense" | "sale"``."""

from jaxlab.attention.attention import IMPLS, attention

__all__ = ["IMPLS", "attention"]
