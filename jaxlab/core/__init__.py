"""Method-agnostic building blocks shared by every jaxlab method."""

from jaxlab.core import (
    checkpoint,
    metrics,
    plots,
    progress,
    sharding,
    smc,
    timing,
    types,
    validation,
)

__all__ = ["checkpoint", "metrics", "plots", "progress", "sharding", "smc", "timing", "types",
           "validation"]
