"""Method-agnostic building blocks shared by every jaxlab method.

Pure: math, SMC, metrics (incl. bootstrap CIs), sharding helpers, validation, checked mode
(``checks(True)``: value checks inside compiled code, see ``checked``), chunk loops and the
shared types. Nothing here writes files, plots or imports matplotlib/orbax; the
experiment plumbing (checkpoints, results, provenance, plots, progress, timing, clusters)
lives in ``experiments.lib``.
"""

from jaxlab.core import checked, extras, keys, loops, metrics, sharding, smc, types, validation
from jaxlab.core.checked import CheckError, checks

__all__ = ["CheckError", "checked", "checks", "extras", "keys", "loops", "metrics", "sharding",
           "smc", "types", "validation"]
