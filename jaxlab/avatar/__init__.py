"""AvAtar: active supervision for entropic-OT alignment with adjoint-state gradients."""

from jaxlab.avatar import active, adjoint, alignment, solvers, tasks, utilities
from jaxlab.avatar.active import STRATEGIES, informativeness, run_active
from jaxlab.avatar.adjoint import cost_gradient
from jaxlab.avatar.tasks import AlignmentTask

__all__ = ["STRATEGIES", "AlignmentTask", "active", "adjoint", "alignment", "cost_gradient",
           "informativeness", "run_active", "solvers", "tasks", "utilities"]
