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

# The soft body checks itself: material fields, duplicated tets, the substep bound, states
# and activations out of range (eager), and failed steps of the soft task (traced: the
# episode ends with reward 0 and ``info["unhealthy"]``, which the case turns into an error).
_INF, _NAN = float("inf"), float("nan")


def _failed_step(action=None, x=None, v=None):
    """One jitted ``envs.step`` of ``soft_quadruped``; raises FloatingPointError naming
    ``envs.step`` when the step failed (done = 1 and ``info["unhealthy"]`` = 1, reward 0)."""
    from jaxlab.rfo import envs

    task = envs.make_task("soft_quadruped")
    s0 = envs.reset(jax.random.key(0), task)
    ps = s0.pipeline_state
    s0 = s0._replace(pipeline_state=ps._replace(x=ps.x if x is None else x(ps.x),
                                                v=ps.v if v is None else v(ps.v)))
    a = jnp.zeros(8) if action is None else action
    s1, r = jax.jit(lambda s, a: envs.step(task, s, a))(s0, a)
    if float(s1.info["unhealthy"]) and float(s1.done) == 1.0 and float(r) == 0.0:
        raise FloatingPointError("`envs.step`: the soft step failed (done = 1, reward 0, "
                                 "info['unhealthy'] = 1).")
    return r


def _eager_step(action):
    from jaxlab.rfo import envs

    task = envs.make_task("soft_quadruped")
    return envs.step(task, envs.reset(jax.random.key(0), task), action)


CASES += [
    Case("softbody.Material: density inf", lambda: softbody.Material(density=_INF),
         "`material.density`"),
    Case("softbody.Material: youngs inf", lambda: softbody.Material(youngs=_INF),
         "`material.youngs`"),
    Case("softbody.Material: sigma_max NaN", lambda: softbody.Material(sigma_max=_NAN),
         "`material.sigma_max`"),
    Case("softbody.build: one tet listed twice (nodes reordered)", lambda: softbody.build(
        _cube()[0], np.concatenate([_cube()[1][:1], _cube()[1][:1, [1, 0, 3, 2]]])), "`tets`"),
    Case("softbody.build: a cube's tets listed twice",
         lambda: softbody.build(_cube()[0], np.concatenate([_cube()[1]] * 2)), "`tets`"),
    Case("softbody.validate_mesh: a node of no tet", lambda: softbody.validate_mesh(
        np.concatenate([_cube()[0], [[1.0, 1.0, 1.0]]]), _cube()[1]), "`nodes`"),
    Case("softbody.soft_quadruped: cfg.dt 0.05 above the stable bound",
         lambda: softbody.soft_quadruped(cfg=CFG._replace(dt=0.05)), "`cfg.dt`"),
    Case("softbody.soft_quadruped: cfg.dt 1.0 above the stable bound",
         lambda: softbody.soft_quadruped(cfg=CFG._replace(dt=1.0)), "`cfg.dt`"),
    Case("softbody.soft_quadruped: a very stiff material at the default dt",
         lambda: softbody.soft_quadruped(material=softbody.Material(youngs=1e9)), "`cfg.dt`"),
    Case("softbody.env_step: cfg.dt 0.05 under jit", lambda: jax.jit(
        lambda s: softbody.env_step(_body(), CFG._replace(dt=0.05), s, ACT))(_state()),
         "`cfg.dt`"),
    Case("softbody.env_step: activation 1e6",
         lambda: softbody.env_step(_body(), CFG, _state(), jnp.full(2, 1e6)), "`activation`"),
    Case("softbody.env_step: a NaN state",
         lambda: softbody.env_step(_body(), CFG, _state(_x().at[0, 0].set(jnp.nan)), ACT),
         "`state.x`"),
    Case("softbody.env_step: an inverted (mirrored) state", lambda: softbody.env_step(
        _body(), CFG, _state(_x() * jnp.array([1.0, 1.0, -1.0]) + 0.2), ACT), "`state.x`"),
    Case("softbody.env_step: velocity 1e30",
         lambda: softbody.env_step(_body(), CFG, _state(v=jnp.full((8, 3), 1e30)), ACT),
         "`state.v`"),
    Case("rfo.envs.step: soft_quadruped action 1e30 (eager)",
         lambda: _eager_step(jnp.full(8, 1e30)), "`action`"),
    Case("rfo.envs.step: soft_quadruped NaN action under jit",
         lambda: _failed_step(action=jnp.full(8, jnp.nan)), "`envs.step`"),
    Case("rfo.envs.step: soft_quadruped action 1e30 under jit",
         lambda: _failed_step(action=jnp.full(8, 1e30)), "`envs.step`"),
    Case("rfo.envs.step: soft_quadruped NaN state under jit",
         lambda: _failed_step(x=lambda x: x.at[0, 0].set(jnp.nan)), "`envs.step`"),
    Case("rfo.envs.step: soft_quadruped velocity 1e30 under jit",
         lambda: _failed_step(v=lambda v: jnp.full_like(v, 1e30)), "`envs.step`"),
]
