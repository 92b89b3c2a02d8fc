"""Method-agnostic building blocks shared by every jaxlab method.

Pure: math, SMC, metrics (incl. bootstrap CIs), sharding helpers, validation, checked mode
(``checks(True)``: value checks inside compiled code, see ``checked``), chunk loops and the
shared types, and the comparison protocol every method's ``compare`` configures
(``protocol``). Nothing here writes files (but ``protocol.compare``'s opt-in
``results_path``), plots or imports matplotlib/orbax; the
experiment plumbing (checkpoints, results, provenance, plots, progress, timing, clusters)
lives in ``experiments.lib``.
"""

from jaxlab.core import (
                         analysis,
                         checked,
                         extras,
                         keys,
                         loops,
                         metrics,
                         protocol,
                         sharding,
                         smc,
                         types,
                         validation,
)
from jaxlab.core.checked import CheckError, checks, raise_check_errors

__all__ = ["CheckError", "analysis", "checked", "checks", "raise_check_errors", "extras", "keys",
           "loops", "metrics", "protocol", "sharding", "smc", "types", "validation"]
