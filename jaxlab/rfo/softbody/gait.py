"""The soft quadruped's gait task: forward centre-of-mass velocity paid after a settle window.

Same body, physics, action, observation, reset and health as ``quadruped`` (the
``soft_quadruped`` task, unchanged); only the reward differs:

    r_t = 1[t >= settle_steps] (c_x(s_{t+1}) - c_x(s_t)) / 0.02 s - 1e-3 ||a_t||^2,

t the number of steps taken before this one (0 for the first step of an episode), so the
step from s_t to s_{t+1} pays its velocity only once ``settle_steps`` steps have passed;
the control cost is charged on every step. The return of an episode of T > settle_steps
steps is therefore the centre of mass's forward displacement over steps settle_steps .. T
divided by 0.02 s, minus the control cost.

Why a constant posture cannot farm it: under a constant action the damped body moves to
a resting pose and stops. On ``soft_quadruped`` a constant action such as (-1, 1, -1, 1,
-1, 1, -1, 1) leans the body about 12 cm forward (a return of 5.1), and that lean is over
within about 64 steps (1.28 s: the centre of mass moves 11 cm by step 48 and about 1 cm
after), so ``settle_steps`` = 64 leaves it nothing to be paid for; only motion that
continues after 1.28 s earns. The window is not observed (the observation is
``soft_quadruped``'s), so a memoryless policy cannot time a posture change to the
window's start; a policy that changes posture once near step 64 still earns that one
lean (``references.posture_switch``: 5.8 at 128 steps, ``docs/rfo.rst``).

The episode step count lives in the physics state (``GaitState``: the node positions and
velocities and ``t``), so the reward stays a function of (state, next state, action) and
resets restart it. Checks: ``settle_steps`` a non-negative int (ValueError naming it);
the rest as ``quadruped.soft_quadruped``.
"""

from typing import NamedTuple

import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array
from jaxlab.rfo.softbody import quadruped, sim

__all__ = ["SETTLE_STEPS", "GaitState", "soft_quadruped_gait"]

#: the default settle window (steps of 0.02 s): half of the study's 128-step episodes
SETTLE_STEPS = 64


class GaitState(NamedTuple):
    """One environment of the gait task.

    Attributes:
      x: [N, 3] node positions.
      v: [N, 3] node velocities.
      t: int32 steps taken since the reset.
    """

    x: Array
    v: Array
    t: Array


def soft_quadruped_gait(settle_steps: int = SETTLE_STEPS, **kwargs) -> quadruped.SoftTask:
    """The gait task's parts (module doc), as ``quadruped.soft_quadruped(**kwargs)`` with
    a ``GaitState`` and the settle-window reward.

    Raises:
      ValueError: ``settle_steps`` is not an int >= 0, or ``quadruped.soft_quadruped``
        rejects ``kwargs``.
    """
    if isinstance(settle_steps, bool) or not isinstance(settle_steps, int) or settle_steps < 0:
        raise ValueError(f"`settle_steps` must be an int >= 0, got {settle_steps!r}.")
    soft = quadruped.soft_quadruped(**kwargs)
    env_dt = soft.cfg.dt * soft.cfg.substeps

    def as_soft(state: GaitState) -> sim.SoftState:
        return sim.SoftState(state.x, state.v)

    def init(key):
        s = soft.init(key)
        return GaitState(s.x, s.v, jnp.int32(0))

    def step(state, action):
        s = soft.step(as_soft(state), action)
        return GaitState(s.x, s.v, state.t + 1)

    def obs(state):
        return soft.obs(as_soft(state))

    def reward(s0, s1, action):
        validation.check_shape("action", action, (soft.act_dim,))
        dx = (quadruped.center_of_mass(soft.body, s1.x)[0]
              - quadruped.center_of_mass(soft.body, s0.x)[0])
        paid = (s0.t >= settle_steps).astype(dx.dtype)
        return paid * dx / env_dt - quadruped.CTRL_COST * jnp.sum(action ** 2)

    def health(state):
        return soft.health(as_soft(state))

    return quadruped.SoftTask(soft.body, soft.mesh, soft.cfg, init, step, obs, reward,
                              soft.obs_dim, soft.act_dim, health)
