"""Model-level attention: a drop-in ``attention(q, k, v)`` with ``impl="dense" | "sale"``;
``compare(key, AttentionProblem(q, k, v), seeds=...)`` (module ``comparison``): SALE against
dense attention and a static block-sparse pattern on your own q, k, v, with the threshold
tuned on validation heads and paired CIs on test heads (per-slice measures: module
``accuracy``)."""

from jaxlab.attention import accuracy, comparison
from jaxlab.attention.attention import IMPLS, LAYOUTS, attention, attention_sizes
from jaxlab.attention.comparison import AttentionProblem, compare

__all__ = ["IMPLS", "LAYOUTS", "AttentionProblem", "accuracy", "attention", "attention_sizes",
           "compare", "comparison"]
