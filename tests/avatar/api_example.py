"""A tiny AvAtar ``Algorithm`` for the shared API test (CPU, seconds)."""

from jaxlab import avatar
from jaxlab.avatar import tasks
from jaxlab.core.types import Algorithm


def build() -> tuple[Algorithm, tuple, tuple]:
    """(alg, init_args, step_args): ``alg.init(key)``, ``alg.step(key, state)`` on a
    16-point cloud with the AvAtar strategy (one entropic OT solve and one adjoint CG solve
    per step). The task is closed over, so both take no extra arguments."""
    task = tasks.point_cloud_pair(16, seed=0)
    alg = avatar.active(task, "avatar", rounds=2, test_frac=0.25, init_frac=0.25,
                        budget_frac=0.25, sinkhorn_max_iterations=2000)
    return alg, (), ()
