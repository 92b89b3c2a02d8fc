"""Bad-input cases for ``jaxlab.rfo.softbody`` (meshes, the FEM body, its simulator)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.rfo import softbody
from tests.bad_inputs.harness import Case

CFG = softbody.SimConfig()


@functools.cache
def _cube():
    """One voxel: 8 nodes, 6 tets, two muscle groups of three tets each."""
    nodes, tets = softbody.voxel_mesh([(0, 0, 0)], 0.1)
    return nodes, tets


@functools.cache
def _body():
    nodes, tets = _cube()
    return softbody.build(nodes, tets, groups=[0, 0, 0, 1, 1, 1])


def _x():
    return jnp.asarray(_body().rest)


def _state(x=None, v=None):
    x = _x() if x is None else x
    return softbody.SoftState(x, jnp.zeros_like(_x()) if v is None else v)


ACT = jnp.zeros(2)

CASES = [
    # meshes
    Case("softbody.voxel_mesh: 2-D cells", lambda: softbody.voxel_mesh([(0, 0), (1, 0)], 0.1),
         "`cells`"),
    Case("softbody.voxel_mesh: h NaN", lambda: softbody.voxel_mesh([(0, 0, 0)], float("nan")),
         "`h`"),
    Case("softbody.quadruped_mesh: torso_cells (nx, ny) without nz",
         lambda: softbody.quadruped_mesh(torso_cells=(6, 3)), "`torso_cells`"),
    Case("softbody.quadruped_mesh: h 0", lambda: softbody.quadruped_mesh(h=0.0), "`h`"),
    Case("softbody.validate_mesh: tets of floats (np.loadtxt)",
         lambda: softbody.validate_mesh(_cube()[0], _cube()[1].astype(float)), "`tets`"),
    Case("softbody.validate_mesh: rel_tol negative",
         lambda: softbody.validate_mesh(*_cube(), rel_tol=-1.0), "`rel_tol`"),
    Case("softbody.build: fibres with a zero row", lambda: softbody.build(
        *_cube(), fibres=np.zeros((6, 3))), "`fibres`"),
    Case("softbody.build: groups of floats", lambda: softbody.build(
        *_cube(), groups=[0.5, 0.0, 0.0, 1.0, 1.0, 1.0]), "`groups`"),
    Case("softbody.build: num_groups 0 with active groups", lambda: softbody.build(
        *_cube(), groups=[0, 0, 0, 1, 1, 1], num_groups=0), "`groups`"),
    Case("softbody.soft_quadruped: cfg.dt 0",
         lambda: softbody.soft_quadruped(cfg=CFG._replace(dt=0.0)), "`cfg.dt`"),
    Case("softbody.soft_quadruped: cfg.substeps 0",
         lambda: softbody.soft_quadruped(cfg=CFG._replace(substeps=0)), "`cfg.substeps`"),
    # finite elements
    Case("softbody.deformation_gradient: x transposed [3, N]",
         lambda: softbody.deformation_gradient(_body(), _x().T), "`x`"),
    Case("softbody.deformation_gradient: x of integers",
         lambda: softbody.deformation_gradient(_body(), jnp.zeros((8, 3), jnp.int32)), "`x`"),
    Case("softbody.first_piola: one 3 x 3 F, not [T, 3, 3]",
         lambda: softbody.first_piola(_body(), jnp.eye(3)), "`f`"),
    Case("softbody.elastic_energy: activation of another body's groups",
         lambda: softbody.elastic_energy(_body(), _x(), jnp.zeros(8)), "`activation`"),
    Case("softbody.elastic_forces: x flattened [3N]",
         lambda: softbody.elastic_forces(_body(), _x().reshape(-1)), "`x`"),
    Case("softbody.center_of_mass: y transposed [3, N]",
         lambda: softbody.center_of_mass(_body(), _x().T), "`y`"),
    # simulation
    Case("softbody.forces: v batched [E, N, 3] with one x",
         lambda: softbody.forces(_body(), CFG, _x(), jnp.zeros((2, 8, 3)), ACT), "`v`"),
    Case("softbody.substep: NaN activation",
         lambda: softbody.substep(_body(), CFG, _state(), jnp.full(2, jnp.nan)), "`activation`"),
    Case("softbody.env_step: substeps 0",
         lambda: softbody.env_step(_body(), CFG, _state(), ACT, substeps=0), "`substeps`"),
    Case("softbody.env_step: cfg a Material",
         lambda: softbody.env_step(_body(), softbody.Material(), _state(), ACT), "`cfg`"),
    Case("softbody.total_energy: positions, not a SoftState",
         lambda: softbody.total_energy(_body(), CFG, _x()), "`state`"),
    Case("softbody.momentum: a batched state [E, N, 3]",
         lambda: softbody.momentum(_body(), _state(jnp.zeros((2, 8, 3)), jnp.ones((2, 8, 3)))),
         "`state.x`"),
    Case("softbody.angular_momentum: v of another mesh",
         lambda: softbody.angular_momentum(_body(), _state(v=jnp.ones((5, 3)))), "`state.v`"),
]

# The shape checks are static: they fire while tracing, under jit / vmap / grad alike.
CASES += [
    Case("softbody.elastic_forces: x transposed under jit",
         lambda: jax.jit(lambda x: softbody.elastic_forces(_body(), x))(_x().T), "`x`"),
    Case("softbody.momentum: a state batched twice under vmap", lambda: jax.vmap(
        lambda s: softbody.momentum(_body(), s))(_state(jnp.zeros((2, 2, 8, 3)),
                                                        jnp.zeros((2, 2, 8, 3)))), "`state.x`"),
]
