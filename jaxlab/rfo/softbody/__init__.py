"""A small differentiable soft-body simulator in pure JAX and the soft quadruped task.

Modules (equations, provenance and what is ours: each module's docstring):

* ``fem``: linear tetrahedra, stable neo-Hookean elasticity, fibre muscles, lumped mass,
  the mesh validator (``validate_mesh``, run by ``build``);
* ``sim``: gravity, Rayleigh damping, penalty ground contact with smoothed Coulomb
  friction, semi-implicit Euler substeps in a checkpointed ``lax.scan``;
* ``mesh``: voxel meshes (Kuhn split, ``voxel_mesh``) and the quadruped's body
  (``quadruped_mesh``);
* ``quadruped``: the ``soft_quadruped`` task's reset, step, observation and reward
  (``jaxlab.rfo.make_task("soft_quadruped")`` is the trainers' task);
* ``gait``: the ``soft_quadruped_gait`` task's reward (forward velocity paid only after a
  settle window, so a constant posture cannot farm it) on the same body.
"""

from jaxlab.rfo.softbody import fem, gait, mesh, quadruped, sim  # noqa: F401 - submodules
from jaxlab.rfo.softbody.fem import (
    Body,
    Material,
    build,
    deformation_gradient,
    elastic_energy,
    elastic_forces,
    first_piola,
    validate_mesh,
)
from jaxlab.rfo.softbody.gait import GaitState, soft_quadruped_gait
from jaxlab.rfo.softbody.mesh import QuadrupedMesh, voxel_mesh
from jaxlab.rfo.softbody.mesh import quadruped as quadruped_mesh
from jaxlab.rfo.softbody.quadruped import SoftTask, center_of_mass, soft_quadruped
from jaxlab.rfo.softbody.sim import (
    SimConfig,
    SoftState,
    angular_momentum,
    env_step,
    forces,
    momentum,
    substep,
    total_energy,
)

__all__ = ["Body", "GaitState", "Material", "QuadrupedMesh", "SimConfig", "SoftState",
           "SoftTask", "angular_momentum", "build", "center_of_mass", "deformation_gradient",
           "elastic_energy", "elastic_forces", "env_step", "first_piola", "forces", "momentum",
           "quadruped_mesh", "soft_quadruped", "soft_quadruped_gait", "substep",
           "total_energy", "validate_mesh", "voxel_mesh"]
