"""A small differentiable soft-body simulator in pure JAX and the soft quadruped task.

* ``fem``: linear tetrahedra, stable neo-Hookean elasticity, fibre muscles, lumped mass,
  the mesh validator (``validate_mesh``, run by ``build``);
* ``sim``: gravity, Rayleigh damping, penalty ground contact with smoothed Coulomb
  friction, semi-implicit Euler substeps in a checkpointed ``lax.scan``;
* ``mesh``: voxel meshes (Kuhn split) and the quadruped's body;
* ``quadruped``: the ``soft_quadruped`` task's reset, step, observation and reward
  (``jaxlab.rfo.make_task("soft_quadruped")`` is the trainers' task).

Equations, provenance and what is ours: each module's docstring.
"""

from jaxlab.rfo.softbody import fem, mesh, quadruped, sim
from jaxlab.rfo.softbody.fem import Body, Material, build, validate_mesh
from jaxlab.rfo.softbody.quadruped import SoftTask, soft_quadruped
from jaxlab.rfo.softbody.sim import SimConfig, SoftState

__all__ = ["Body", "Material", "SimConfig", "SoftState", "SoftTask", "build", "fem", "mesh",
           "quadruped", "sim", "soft_quadruped", "validate_mesh"]
