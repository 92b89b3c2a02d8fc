"""The soft quadruped locomotion task's physics, observation, reward and reset.

Body: ``mesh.quadruped()`` (264 tets, 116 nodes, 5.5 kg: a 30 x 15 x 10 cm torso on four
10 cm legs), stable neo-Hookean with E = 60 kPa, nu = 0.3, rho = 1000 kg/m^3; 8 muscle
groups (front / back half of each leg, vertical fibres, peak active stress 15 kPa).
Physics (``sim.SimConfig`` defaults): substep 2 ms, 10 substeps per environment step
(frame skip 10: control at 50 Hz, one step = 0.02 s), Rayleigh damping alpha_m = 2 / s,
beta_k = 5e-4 s, ground contact k_c = 1e5 / s^2, c_c = 200 / s, smoothing length 1 mm,
friction 0.8. Episodes: the trainers' ``episode_length`` (the study presets use 128
steps = 2.56 s); the task never terminates by design, but ``envs.step`` ends the
episode of an environment whose state stopped being finite (``health``, below). These
constants are ours: a body that stands, settles within a few seconds when idle
(``tests/rfo/test_softbody.py``) and stays stable at 2 ms substeps (``sim.stable_dt`` of
this body and config: 2.17 ms; ``soft_quadruped`` refuses a larger ``cfg.dt``).

Action: 8 activations in [-1, 1], one per muscle group (``mesh.quadruped``): a concrete
action outside the box (or not finite) raises ValueError naming ``action``; a traced one
is clipped to the box by the step, while the reward's control cost is charged on the
action given (unchanged arithmetic, so healthy rollouts keep their rewards bit for bit);
``envs.step`` ends the episode of a non-finite action, or of one so large that the cost
overflows (e.g. 1e30: done = 1, reward 0, ``info["unhealthy"]`` = 1, never -inf).
Observation (31): centre-of-mass height (1) and velocity (3); the torso's heading, the
unit vector from its back face's centroid to its front face's (3); per leg (4 x 6) the
mean position of its nodes relative to the centre of mass and their mean velocity.
Reward: forward velocity of the centre of mass over the step minus a control cost,

    r = (c_x(s') - c_x(s)) / 0.02 s - 1e-3 ||a||^2,

with c the mass-weighted mean of the node positions.
Reset: the rest mesh with its feet at z = 2 mm (inside the contact's smoothing length)
plus uniform noise of +-1 mm on every node coordinate and zero velocity.

Health (``SoftTask.health`` = ``sim.health``): per environment, whether the state holds
a NaN / inf and whether a tet is inverted (det F <= 0; reported only: the material
pushes inverted tets back, and strong actions invert some without harm).

The pieces are returned as a ``SoftTask``; ``jaxlab.rfo.envs`` wraps them into the
``soft_quadruped`` ``Task`` (its own reset and step functions, no MJCF).
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey
from jaxlab.rfo.softbody import _checks, fem, mesh, sim

__all__ = ["CTRL_COST", "SoftTask", "soft_quadruped", "center_of_mass", "observe"]

CTRL_COST = 1e-3
RESET_HEIGHT = 2e-3
RESET_NOISE = 1e-3
OBS_DIM = 31


class SoftTask(NamedTuple):
    """A soft-body task's parts (all pure functions of one environment).

    Attributes:
      body: the ``fem.Body``.
      mesh: the ``mesh.QuadrupedMesh``.
      cfg: the ``sim.SimConfig``.
      init: key -> ``sim.SoftState``.
      step: (state, action [A]) -> next state (``cfg.substeps`` substeps).
      obs: state -> [obs_dim].
      reward: (state, next state, action) -> scalar.
      obs_dim, act_dim: sizes.
      health: state -> {"nonfinite": bool, "inverted": bool} (``sim.health``).
    """

    body: fem.Body
    mesh: mesh.QuadrupedMesh
    cfg: sim.SimConfig
    init: Callable[[PRNGKey], sim.SoftState]
    step: Callable[[sim.SoftState, Array], sim.SoftState]
    obs: Callable[[sim.SoftState], Array]
    reward: Callable[[sim.SoftState, sim.SoftState, Array], Array]
    obs_dim: int
    act_dim: int
    health: Callable[[sim.SoftState], dict]


def check_action(action: Array, act_dim: int) -> None:
    """``action``: real [act_dim]; when concrete, finite and in [-1, 1] (the declared box).
    Traced actions pass: the task clips them and ``envs.step`` flags non-finite ones."""
    validation.check_real("action", action)
    validation.check_shape("action", action, (act_dim,))
    validation.check_finite("action", action)
    validation.check_in_range("action", action, -1.0, 1.0)


def center_of_mass(body: fem.Body, y: Array) -> Array:
    """Mass-weighted mean [3] of node quantities y [N, 3] (positions or velocities)."""
    _checks.check_points("y", body, y)
    m = jnp.asarray(body.mass, y.dtype)
    return m @ y / jnp.sum(m)


def observe(body: fem.Body, quad: mesh.QuadrupedMesh, state: sim.SoftState) -> Array:
    """The 31 observations of the module doc."""
    com, vcom = center_of_mass(body, state.x), center_of_mass(body, state.v)
    heading = state.x[quad.front_nodes].mean(0) - state.x[quad.back_nodes].mean(0)
    heading = heading / jnp.sqrt(jnp.sum(heading ** 2) + 1e-12)
    legs_x = state.x[quad.leg_nodes].mean(1) - com  # [4, 3]
    legs_v = state.v[quad.leg_nodes].mean(1)
    return jnp.concatenate([com[2:], vcom, heading,
                            jnp.concatenate([legs_x, legs_v], axis=1).reshape(-1)])


def soft_quadruped(material: fem.Material = fem.Material(), cfg: sim.SimConfig = sim.SimConfig(),  # noqa: B008
                   torso_cells=(6, 3, 2), leg_cells=(1, 1, 2), h: float = 0.05) -> SoftTask:
    """The soft quadruped (module doc); the mesh sizes are arguments for the speed study.

    Raises:
      ValueError: a bad mesh size (``mesh.quadruped``), material (``fem.build``) or
        ``cfg`` field (``sim``'s checks), or ``cfg.dt`` above ``sim.stable_dt`` of this
        body and material.
      TypeError: ``cfg`` is not a ``SimConfig``.
    """
    sim._check_config(cfg)
    quad = mesh.quadruped(torso_cells, leg_cells, h)
    body = fem.build(quad.nodes, quad.tets, material, quad.groups, quad.fibres, num_groups=8)
    sim.check_dt(body, cfg)
    rest = quad.nodes + [0.0, 0.0, RESET_HEIGHT]
    env_dt = cfg.dt * cfg.substeps

    def init(key):
        x = jnp.asarray(rest) + jax.random.uniform(key, rest.shape, minval=-RESET_NOISE,
                                                   maxval=RESET_NOISE)
        return sim.SoftState(x, jnp.zeros_like(x))

    def step(state, action):
        check_action(action, body.num_groups)
        return sim.env_step(body, cfg, state, jnp.clip(action, -1.0, 1.0))

    def obs(state):
        return observe(body, quad, state)

    def reward(s0, s1, action):
        dx = center_of_mass(body, s1.x)[0] - center_of_mass(body, s0.x)[0]
        return dx / env_dt - CTRL_COST * jnp.sum(action ** 2)

    def health(state):
        return sim.health(body, state)

    return SoftTask(body, quad, cfg, init, step, obs, reward, OBS_DIM, body.num_groups,
                    health)
