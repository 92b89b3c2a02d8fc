"""Differentiable MJX tasks for RFO: tiny MJCF models stepped by brax's MJX pipeline.

Each task is a frozen ``Task`` (hashable, a static argument of jitted code) with pure
``reset(key, task)`` and ``step(task, state, action)``; rewards are smooth functions of the
physics state so that ``jax.grad`` of a rollout's return is informative. Reverse-mode
gradients through ``mjx.step`` need ``opt.iterations == 1`` (otherwise the solver is a
``while_loop``), which ``make_task`` sets (DESIGN.md, MJX facts).

Tasks: ``pendulum`` (torque-limited swing-up), ``cartpole`` (balance a pole on a cart from
a tilted start), ``hopper`` (brax's hopper model, forward velocity + posture), and
``bouncing_ball`` (contacts with the floor; for gradient checks).

No task terminates early (hopper included), so ``EnvState`` carries no done flag; episode
ends are time limits handled by the training loops.

Checks (eager, at the Python boundary; nothing runs inside compiled code):
``make_task``: ``name`` one of ``TASK_NAMES``. ``step``: ``action`` of shape
``(task.act_dim,)`` (also under ``vmap``, where the shape is per environment) and, when
concrete, finite.
"""

import contextlib
import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey

PENDULUM_XML = """
<mujoco model="pendulum">
  <option timestep="0.02"/>
  <worldbody>
    <body name="pole">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0 0 0.5" size="0.045" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" gear="2" ctrllimited="true" ctrlrange="-1 1"/></actuator>
</mujoco>
"""

CARTPOLE_XML = """
<mujoco model="cartpole">
  <option timestep="0.02"/>
  <worldbody>
    <body name="cart">
      <joint name="slider" type="slide" axis="1 0 0" range="-3 3" limited="true"
             damping="0.1"/>
      <geom type="box" size="0.2 0.1 0.05" mass="1"/>
      <body name="pole">
        <joint name="hinge" type="hinge" axis="0 1 0" damping="0.02"/>
        <geom type="capsule" fromto="0 0 0 0 0 0.6" size="0.03" mass="0.2"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="slider" gear="10" ctrllimited="true" ctrlrange="-1 1"/></actuator>
</mujoco>
"""

BALL_XML = """
<mujoco model="ball">
  <option timestep="0.01"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.3">
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.1" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="z" gear="20" ctrllimited="true" ctrlrange="-1 1"/></actuator>
</mujoco>
"""


class EnvState(NamedTuple):
    pipeline_state: Any
    obs: Array
    t: Array


@dataclasses.dataclass(frozen=True, eq=False)
class Task:
    """An MJX task. Hashes by identity (a static jit argument)."""

    name: str
    sys: Any
    n_frames: int
    init_q: Array
    reset_noise: float
    obs_fn: Callable[[Any], Array]
    reward_fn: Callable[[Any, Any, Array], Array]
    obs_dim: int
    act_dim: int


@contextlib.contextmanager
def _mjx_on_local_device():
    """Makes brax place the MJX model on this process's first device.

    ``mujoco.mjx.put_model`` without a device picks ``jax.devices()[0]``, which in a
    multi-host run belongs to process 0: on every other process the model's arrays would
    live on a device it cannot address. Brax's MJCF loader passes no device, so it is
    bound here for the duration of a load.
    """
    from brax.io import mjcf

    put_model = mjcf.mjx.put_model
    mjcf.mjx.put_model = functools.partial(put_model, device=jax.local_devices()[0])
    try:
        yield mjcf
    finally:
        mjcf.mjx.put_model = put_model


def _load(xml: str | None = None, path=None):
    """A brax ``System`` from an MJCF string or file, with reverse-mode friendly solver
    settings (one solver iteration)."""
    with _mjx_on_local_device() as mjcf:
        sys = mjcf.loads(xml) if path is None else mjcf.load(path)
    return sys.tree_replace({"opt.iterations": 1, "opt.ls_iterations": 4})


def _pendulum():
    sys = _load(PENDULUM_XML)

    def obs(ps):
        th = ps.q[0]
        return jnp.stack([jnp.cos(th), jnp.sin(th), ps.qd[0]])

    def reward(ps0, ps1, a):
        return jnp.cos(ps1.q[0]) - 1e-3 * ps1.qd[0] ** 2 - 1e-3 * jnp.sum(a ** 2)

    return Task("pendulum", sys, 2, jnp.array([jnp.pi]), 0.1, obs, reward, 3, 1)


def _cartpole():
    sys = _load(CARTPOLE_XML)

    def obs(ps):
        return jnp.concatenate([ps.q[:1], jnp.cos(ps.q[1:]), jnp.sin(ps.q[1:]), ps.qd])

    def reward(ps0, ps1, a):
        return jnp.cos(ps1.q[1]) - 0.05 * ps1.q[0] ** 2 - 1e-3 * jnp.sum(a ** 2)

    return Task("cartpole", sys, 2, jnp.array([0.0, 0.4]), 0.1, obs, reward, 5, 1)


def _hopper():
    from etils import epath

    sys = _load(path=epath.resource_path("brax") / "envs/assets/hopper.xml")

    def obs(ps):
        return jnp.concatenate([ps.q[1:], jnp.clip(ps.qd, -10, 10)])

    def reward(ps0, ps1, a):
        dt = sys.opt.timestep * 4
        forward = (ps1.q[0] - ps0.q[0]) / dt
        upright = -jnp.square(ps1.q[2]) - jnp.square(jnp.maximum(0.8 - ps1.q[1], 0.0))
        return forward + upright - 1e-3 * jnp.sum(a ** 2)

    q0 = jnp.asarray(sys.init_q)
    return Task("hopper", sys, 4, q0, 5e-3, obs, reward, int(q0.shape[0]) - 1 + sys.qd_size(),
                sys.act_size())


def _ball():
    sys = _load(BALL_XML)

    def obs(ps):
        return jnp.stack([ps.q[0], ps.qd[0]])

    def reward(ps0, ps1, a):
        return -jnp.square(ps1.q[0] - 0.5)

    return Task("bouncing_ball", sys, 1, jnp.array([0.0]), 0.05, obs, reward, 2, 1)


_TASKS = {"pendulum": _pendulum, "cartpole": _cartpole, "hopper": _hopper,
          "bouncing_ball": _ball}
TASK_NAMES = tuple(sorted(_TASKS))


@functools.cache
def make_task(name: str) -> Task:
    """Builds (once per process) the task ``name``."""
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}: `name` must be one of {sorted(_TASKS)}.")
    return _TASKS[name]()


def reset(key: PRNGKey, task: Task) -> EnvState:
    """Initial state with uniform noise of ``task.reset_noise`` on positions."""
    from brax.mjx import pipeline

    q = task.init_q + task.reset_noise * jax.random.uniform(key, task.init_q.shape, minval=-1,
                                                           maxval=1)
    ps = pipeline.init(task.sys, q, jnp.zeros(task.sys.qd_size()))
    return EnvState(ps, task.obs_fn(ps), jnp.int32(0))


def step(task: Task, state: EnvState, action: Array) -> tuple[EnvState, Array]:
    """``task.n_frames`` physics steps with ``action`` in [-1, 1]^act_dim; returns reward."""
    from brax.mjx import pipeline

    validation.check_shape("action", action, (task.act_dim,))
    validation.check_finite("action", action)

    def frame(ps, _):
        return pipeline.step(task.sys, ps, action), None

    ps, _ = jax.lax.scan(frame, state.pipeline_state, None, length=task.n_frames)
    r = task.reward_fn(state.pipeline_state, ps, action)
    return EnvState(ps, task.obs_fn(ps), state.t + 1), r
