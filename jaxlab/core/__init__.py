"""Method-agnostic building blocks shared by every jaxlab method.

Pure: math, SMC, metrics (incl. bootstrap CIs), sharding helpers, validation, chunk loops
and the shared types. Nothing here writes files, plots or imports matplotlib/orbax; the
experiment plumbing (checkpoints, results, provenance, plots, progress, timing, clusters)
lives in ``experiments.lib``.
"""

from jaxlab.core import loops, metrics, sharding, smc, types, validation

__all__ = ["loops", "metrics", "sharding", "smc", "types", "validation"]
