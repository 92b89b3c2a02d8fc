"""Differentiable MJX tasks for RFO: tiny MJCF models stepped by brax's MJX pipeline.

Each task is a frozen ``Task`` (hashable, a static argument of jitted code) with pure
``reset(key, task)`` and ``step(task, state, action)``; rewards are smooth functions of the
physics state so that ``jax.grad`` of a rollout's return is informative. Reverse-mode
gradients through ``mjx.step`` need ``opt.iterations == 1`` (otherwise the solver is a
``while_loop``), which ``make_task`` sets.

Tasks: ``pendulum`` (torque-limited swing-up), ``cartpole`` (balance a pole on a cart from
a tilted start), ``hopper`` (brax's ``Hopper`` v5 reward, health test and termination on
brax's hopper model; see ``_hopper``), ``reacher`` (brax's ``Reacher`` v5 model, reset,
observation and reward; see ``_reacher``), ``bouncing_ball`` (contacts with the floor;
for gradient checks), ``soft_quadruped`` (no MJCF: a soft-body quadruped stepped by
the pure-JAX finite-element simulator ``jaxlab.rfo.softbody``, through the task's own
``init_state_fn`` / ``step_fn``) and ``soft_quadruped_gait`` (the same body, its forward
velocity paid only after a settle window: ``jaxlab.rfo.softbody.gait``). Users add tasks
with ``register_task(name, factory)``.

Termination: ``EnvState.done`` is 1.0 when the step just taken ended in a terminal state
(brax's ``State.done``); a ``Task`` with ``done_fn=None`` never terminates (``done`` stays
0). Only ``hopper`` terminates (when unhealthy). The state is not reset here: the training
loops (``train.rollout_from``, ``ppo``) replace finished environments by fresh ones (brax's
``AutoResetWrapper``) and pass ``done`` to the critic targets / GAE as the termination mask.

Failure (tasks with a ``health_fn``: ``soft_quadruped``, ``soft_quadruped_gait``): a step
whose state is not finite (``health_fn``'s ``"nonfinite"``), whose action is not finite or
whose reward is not finite *fails*: ``done`` = 1, reward 0 (never a NaN / -inf reward) and
``EnvState.info["unhealthy"]`` = 1; the task's other health flags (``"inverted"``) are
reported in ``info`` without ending the episode. ``Task.resets_on_done`` makes the
training loops reset failed environments like terminated ones and stop episode returns
there; their critic / GAE termination masks stay those of ``task.terminates`` (false for
``soft_quadruped``), so a healthy rollout runs the very same arithmetic as without the
checks (bit for bit), and a failed step is bootstrapped like a time-limit reset. The
gradient through a failed step may be non-finite: the trainers zero non-finite gradient
entries and count such updates (``train.check_nonfinite_grad_share``).

Checks (eager, at the Python boundary; nothing runs inside compiled code):
``make_task``: ``name`` one of ``TASK_NAMES`` (or a registered name). ``register_task``:
``name`` a new non-empty string, ``factory`` callable. ``Task`` / ``new_task``: a non-empty
``name``, positive integer ``n_frames``, ``obs_dim`` and ``act_dim``, callable functions.
``reset``: a key and a ``Task``. ``step``: ``action`` of shape ``(task.act_dim,)`` (also
under ``vmap``, where the shape is per environment) and, when concrete, finite (and, for
``soft_quadruped``, in [-1, 1]: its step function checks the declared box).
``fused_bodies`` / ``load_mjcf``: exactly one of ``xml`` (MJCF text) and ``path``;
``require_bodies`` a sequence of names. ``body_index`` / ``site_index``: a loaded ``sys``
and a ``name`` it holds.
"""

import contextlib
import dataclasses
import functools
import io
import logging
import re
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxlab.core import extras, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Array, PRNGKey

__all__ = ["EnvState", "Task", "TASK_NAMES", "task_names", "register_task", "new_task",
    "load_mjcf", "fused_bodies", "body_index", "site_index", "make_task", "reset", "step"]


def _import_mujoco_quietly() -> None:
    """Imports ``mujoco.mjx`` once, dropping its "Failed to import warp" / "mujoco_warp"
    lines (printed on every import without the optional GPU backend ``warp``, which MJX on
    JAX does not use); any other output is passed on to this module's ``logging`` logger
    (level WARNING). The one place this is done."""
    if "mujoco.mjx" in sys.modules:
        return
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            import mujoco.mjx  # noqa: F401
    except ImportError:  # the rfo extra is not installed: the loaders raise later
        pass
    rest = [line for line in buf.getvalue().splitlines()
            if not re.match(r"Failed to import (mujoco_)?warp", line)]
    if rest:
        logging.getLogger(__name__).warning("%s", "\n".join(rest))


_import_mujoco_quietly()

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
    """One environment (add a leading axis when batched).

    Attributes:
      pipeline_state: brax MJX pipeline state.
      obs: [O] observation.
      t: int32 steps since the last reset.
      done: float32 1.0 if the last step ended in a terminal state, else 0.0.
      info: None, or for a task with a ``health_fn`` {"unhealthy": float32 1.0 if the last
        step failed (module doc), and the task's reported flags, e.g. "inverted"}.
    """

    pipeline_state: Any
    obs: Array
    t: Array
    done: Array
    info: dict | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class Task:
    """An MJX task. Hashes by identity (a static jit argument).

    ``reward_fn(ps0, ps1, action)`` is the reward of the step ps0 -> ps1;
    ``done_fn(ps1) -> {0., 1.}`` the termination flag of the state reached (``None``: the
    task never terminates); ``reset_fn(key) -> (q, qd)`` the initial positions and
    velocities (``None``: ``init_q`` plus uniform noise of ``reset_noise``, zero velocity).
    With a ``reset_fn``, ``init_q`` and ``reset_noise`` may be None (``new_task`` takes
    every field by keyword and leaves them out).

    A task with its own physics (no MJCF, e.g. ``soft_quadruped``) sets both
    ``init_state_fn(key) -> ps`` (the initial physics state, any pytree) and
    ``step_fn(ps, action) -> ps`` (one whole environment step); ``sys`` may then be
    None, ``reset_fn`` / ``init_q`` / ``reset_noise`` are unused and ``n_frames`` is
    informative only. ``obs_fn``, ``reward_fn`` and ``done_fn`` take that state.
    ``health_fn(ps) -> {"nonfinite": bool, ...}`` (optional, cheap: it runs every step)
    lets ``step`` turn a failed step into an ended episode (module doc).

    Raises:
      ValueError: ``name`` not a non-empty string; ``n_frames``, ``obs_dim`` or ``act_dim``
        not a positive integer; only one of ``init_state_fn`` and ``step_fn``; without
        them, neither ``reset_fn`` nor both ``init_q`` and ``reset_noise``.
      TypeError: ``obs_fn`` or ``reward_fn`` not callable, or another function field
        neither callable nor None.
    """

    name: str
    sys: Any
    n_frames: int
    init_q: Array
    reset_noise: float
    obs_fn: Callable[[Any], Array]
    reward_fn: Callable[[Any, Any, Array], Array]
    obs_dim: int
    act_dim: int
    done_fn: Callable[[Any], Array] | None = None
    reset_fn: Callable[[PRNGKey], tuple[Array, Array]] | None = None
    init_state_fn: Callable[[PRNGKey], Any] | None = None
    step_fn: Callable[[Any, Array], Any] | None = None
    health_fn: Callable[[Any], dict] | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"`name` must be a non-empty string, got {self.name!r}.")
        for field in ("n_frames", "obs_dim", "act_dim"):
            validation.check_positive_int(field, getattr(self, field))
        for field in ("obs_fn", "reward_fn", "done_fn", "reset_fn", "init_state_fn",
                      "step_fn", "health_fn"):
            fn = getattr(self, field)
            if not callable(fn) and (fn is not None or field in ("obs_fn", "reward_fn")):
                raise TypeError(f"task {self.name!r}: `{field}` must be a function, got "
                                f"{type(fn).__name__}.")
        if (self.init_state_fn is None) != (self.step_fn is None):
            raise ValueError(f"task {self.name!r}: give both `init_state_fn` and `step_fn` "
                             "(a task with its own physics) or neither (an MJX task).")
        if self.own_physics:
            return
        if self.reset_fn is None and (self.init_q is None or self.reset_noise is None):
            raise ValueError(f"task {self.name!r}: `init_q` and `reset_noise` are needed when "
                             "there is no `reset_fn`.")

    @property
    def own_physics(self) -> bool:
        """Whether the task steps its own physics (``init_state_fn`` / ``step_fn``) rather
        than brax's MJX pipeline (static)."""
        return self.step_fn is not None

    @property
    def terminates(self) -> bool:
        """Whether the task ends episodes by design (``done_fn``; static): the training
        loops then use ``done`` as the critic / GAE termination mask."""
        return self.done_fn is not None

    @property
    def resets_on_done(self) -> bool:
        """Whether ``step`` can set ``done`` (a ``done_fn`` or a ``health_fn``; static): the
        training loops then reset finished environments and stop episode returns there."""
        return self.done_fn is not None or self.health_fn is not None


class _DevicePutArrays:
    """The ``jax.numpy`` of brax's MJCF loader, whose only use there is ``array`` on every
    leaf of the new ``System``: ``jax.device_put`` onto ``device`` instead, which gives the
    same arrays (dtype, weak type, shape, values) without building a program per leaf
    (``jnp.array`` of a Python scalar and of a NumPy scalar of the same dtype build the
    same program twice)."""

    def __init__(self, device):
        self._device = device

    def array(self, x):
        return jax.device_put(x, self._device)

    def __getattr__(self, name):
        return getattr(jnp, name)


@contextlib.contextmanager
def _mjx_on_local_device():
    """Makes brax place the MJX model on this process's first device.

    ``mujoco.mjx.put_model`` without a device picks ``jax.devices()[0]``, which in a
    multi-host run belongs to process 0: on every other process the model's arrays would
    live on a device it cannot address. Brax's MJCF loader passes no device, so it is
    bound here for the duration of a load, and the loader's arrays are put there too
    (``_DevicePutArrays``).
    """
    extras.require("brax")
    from brax.io import mjcf

    device = jax.local_devices()[0]
    put_model, jp = mjcf.mjx.put_model, mjcf.jp
    mjcf.mjx.put_model = functools.partial(put_model, device=device)
    mjcf.jp = _DevicePutArrays(device)
    try:
        yield mjcf
    finally:
        mjcf.mjx.put_model, mjcf.jp = put_model, jp


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


# brax ``envs/hopper.py`` (v5) defaults.
HOPPER_FORWARD_WEIGHT = 1.0
HOPPER_CTRL_COST = 1e-3
HOPPER_HEALTHY_REWARD = 1.0
HOPPER_HEALTHY_Z = (0.7, float("inf"))
HOPPER_HEALTHY_ANGLE = (-0.2, 0.2)
HOPPER_HEALTHY_STATE = (-100.0, 100.0)


def hopper_healthy(ps) -> Array:
    """brax's hopper health test (``terminate_when_unhealthy=True``).

    healthy = z_torso in (0.7, inf) and q[2] (torso pitch) in (-0.2, 0.2) and every entry of
    (q[2:], qd) in (-100, 100), with z_torso = ``ps.x.pos[0, 2]``, the world height of the
    torso body (q[1] is the rootz slide offset from the torso's rest height 1.25 m).

    Args:
      ps: a (single) brax MJX pipeline state of the hopper.

    Returns:
      bool scalar.
    """
    z, angle = ps.x.pos[0, 2], ps.q[2]
    state_vec = jnp.concatenate([ps.q[2:], ps.qd])
    lo, hi = HOPPER_HEALTHY_STATE
    ok = jnp.all((lo < state_vec) & (state_vec < hi))
    ok &= (HOPPER_HEALTHY_Z[0] < z) & (z < HOPPER_HEALTHY_Z[1])
    ok &= (HOPPER_HEALTHY_ANGLE[0] < angle) & (angle < HOPPER_HEALTHY_ANGLE[1])
    return ok


def _hopper():
    """brax's ``Hopper`` (v5, ``terminate_when_unhealthy=True``) on its own MJCF model.

    reward = 1.0 * (x_torso(s') - x_torso(s)) / dt + 1.0 - 1e-3 * ||a||^2, dt = 4 * timestep
    (the healthy bonus is paid on every step because unhealthy states terminate);
    done = 1 - healthy(s') (``hopper_healthy``); obs = (z_torso, q[2:], clip(qd, -10, 10)),
    the torso's world height replacing the rootz offset q[1] and the x position dropped.
    """
    from etils import epath

    sys = _load(path=epath.resource_path("brax") / "envs/assets/hopper.xml")
    dt = sys.opt.timestep * 4

    def obs(ps):
        return jnp.concatenate([ps.x.pos[0, 2:3], ps.q[2:], jnp.clip(ps.qd, -10, 10)])

    def reward(ps0, ps1, a):
        forward = HOPPER_FORWARD_WEIGHT * (ps1.x.pos[0, 0] - ps0.x.pos[0, 0]) / dt
        return forward + HOPPER_HEALTHY_REWARD - HOPPER_CTRL_COST * jnp.sum(a ** 2)

    def done(ps):
        return 1.0 - hopper_healthy(ps).astype(jnp.float32)

    q0 = jnp.asarray(sys.init_q)
    return Task("hopper", sys, 4, q0, 5e-3, obs, reward, int(q0.shape[0]) - 1 + sys.qd_size(),
                sys.act_size(), done)


# brax ``envs/reacher.py`` (v5): fingertip offset in the second arm link's frame.
REACHER_TIP_OFFSET = (0.11, 0.0, 0.0)


def _reacher():
    """brax's ``Reacher`` (v5) on its own MJCF model (2 arm joints, 2 target slides).

    reset: q = init_q + U(-0.1, 0.1), qd = U(-0.005, 0.005), then the target slides q[2:] =
    (r cos phi, r sin phi) with r ~ 0.2 U, phi ~ 2 pi U and qd[2:] = 0; obs (11) = (cos
    q[:2], sin q[:2], q[2:], tip velocity xy, tip - target xyz); reward = -||tip - target|| -
    ||a||^2 (``brax.math.safe_norm``); 2 frames per step (brax's default for MJX); never
    terminates (brax's episode length bounds it).
    """
    extras.require("brax")
    from brax import base, math
    from etils import epath

    sys = _load(path=epath.resource_path("brax") / "envs/assets/reacher.xml")
    offset = base.Transform.create(pos=jnp.asarray(REACHER_TIP_OFFSET))

    def tip_minus_target(ps):
        return ps.x.take(1).do(offset).pos - ps.x.pos[2]

    def obs(ps):
        tip_vel = offset.do(ps.xd.take(1)).vel
        return jnp.concatenate([jnp.cos(ps.q[:2]), jnp.sin(ps.q[:2]), ps.q[2:], tip_vel[:2],
                                tip_minus_target(ps)])

    def reward(ps0, ps1, a):
        return -math.safe_norm(tip_minus_target(ps1)) - jnp.sum(jnp.square(a))

    q0 = jnp.asarray(sys.init_q)

    def reset_q(key):
        k_q, k_qd, k_r, k_phi = jax.random.split(key, 4)
        q = q0 + jax.random.uniform(k_q, q0.shape, minval=-0.1, maxval=0.1)
        qd = jax.random.uniform(k_qd, (sys.qd_size(),), minval=-0.005, maxval=0.005)
        r, phi = 0.2 * jax.random.uniform(k_r), 2.0 * jnp.pi * jax.random.uniform(k_phi)
        q = q.at[2:].set(jnp.stack([r * jnp.cos(phi), r * jnp.sin(phi)]))
        return q, qd.at[2:].set(0.0)

    return Task("reacher", sys, 2, q0, 0.1, obs, reward, 11, sys.act_size(), None, reset_q)


def _ball():
    sys = _load(BALL_XML)

    def obs(ps):
        return jnp.stack([ps.q[0], ps.qd[0]])

    def reward(ps0, ps1, a):
        return -jnp.square(ps1.q[0] - 0.5)

    return Task("bouncing_ball", sys, 1, jnp.array([0.0]), 0.05, obs, reward, 2, 1)


def _soft_quadruped():
    """The soft-body quadruped (``jaxlab.rfo.softbody.quadruped``): pure-JAX tetrahedral
    FEM, 8 leg muscles, reward = forward centre-of-mass velocity - 1e-3 ||a||^2; never
    terminates by design; a step that leaves the state non-finite fails (module doc)."""
    from jaxlab.rfo.softbody import quadruped

    soft = quadruped.soft_quadruped()
    return new_task("soft_quadruped", None, n_frames=soft.cfg.substeps, obs_fn=soft.obs,
                    reward_fn=soft.reward, obs_dim=soft.obs_dim, act_dim=soft.act_dim,
                    init_state_fn=soft.init, step_fn=soft.step, health_fn=soft.health)


def _soft_quadruped_gait():
    """``soft_quadruped`` with the gait reward (``jaxlab.rfo.softbody.gait``): forward
    centre-of-mass velocity paid only after a 64-step settle window, which a constant
    posture (a lean) cannot farm; same body, observation, action, reset and failure."""
    from jaxlab.rfo.softbody import gait

    soft = gait.soft_quadruped_gait()
    return new_task("soft_quadruped_gait", None, n_frames=soft.cfg.substeps,
                    obs_fn=soft.obs, reward_fn=soft.reward, obs_dim=soft.obs_dim,
                    act_dim=soft.act_dim, init_state_fn=soft.init, step_fn=soft.step,
                    health_fn=soft.health)


_TASKS: dict[str, Callable[[], Task]] = {
    "pendulum": _pendulum, "cartpole": _cartpole, "hopper": _hopper, "reacher": _reacher,
    "bouncing_ball": _ball, "soft_quadruped": _soft_quadruped,
    "soft_quadruped_gait": _soft_quadruped_gait}
TASK_NAMES = tuple(sorted(_TASKS))  # the built-in tasks; ``task_names()`` adds registered ones


def task_names() -> tuple[str, ...]:
    """Sorted names of every task ``make_task`` accepts (built-in and registered)."""
    return tuple(sorted(_TASKS))


def register_task(name: str, factory: Callable[[], Task]) -> None:
    """Makes ``make_task(name)`` build ``factory()`` (once per process).

    ``factory`` takes no argument and returns a ``Task``; ``load_mjcf`` gives it a brax
    system with the reverse-mode friendly solver settings, e.g.::

        def my_task():
            sys = envs.load_mjcf(MY_XML)
            return envs.Task("my_task", sys, n_frames, init_q, 0.1, obs_fn, reward_fn,
                             obs_dim, sys.act_size())
        envs.register_task("my_task", my_task)

    Raises:
      ValueError: ``name`` is not a non-empty string or is already taken; ``factory`` is
        not callable.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a non-empty string, got {name!r}.")
    if name in _TASKS:
        raise ValueError(f"`name`={name!r} is already a task; registered: {sorted(_TASKS)}.")
    if not callable(factory):
        raise ValueError(f"`factory` must be a callable returning a Task, got {factory!r}.")
    _TASKS[name] = factory


def new_task(name: str, sys, *, n_frames: int, obs_fn, reward_fn, obs_dim: int,
             act_dim: int, reset_fn=None, init_q=None, reset_noise: float | None = None,
             done_fn=None, init_state_fn=None, step_fn=None, health_fn=None) -> Task:
    """A ``Task`` with every field by keyword; ``init_q`` / ``reset_noise`` only without
    ``reset_fn``; ``init_state_fn`` and ``step_fn`` (together, ``sys`` None) for a task
    with its own physics, optionally with its ``health_fn``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.rfo import envs
      >>> sys = envs.load_mjcf(envs.PENDULUM_XML)
      >>> task = envs.new_task(
      ...     "my_pendulum", sys, n_frames=2, obs_dim=2, act_dim=1,
      ...     obs_fn=lambda ps: jnp.concatenate([ps.q, ps.qd]),
      ...     reward_fn=lambda ps0, ps1, a: jnp.cos(ps1.q[0]),
      ...     reset_fn=lambda key: (jax.random.uniform(key, (1,)), jnp.zeros(1)))
      >>> envs.reset(jax.random.key(0), task).obs.shape
      (2,)
    """
    return Task(name, sys, n_frames, init_q, reset_noise, obs_fn, reward_fn, obs_dim, act_dim,
                done_fn, reset_fn, init_state_fn, step_fn, health_fn)


def _mjcf_root(xml, path):
    if (xml is None) == (path is None):
        raise ValueError("give exactly one of `xml` and `path`.")
    if path is None and not isinstance(xml, str):
        raise TypeError(f"`xml` must be an MJCF string, got {type(xml).__name__}.")
    text = xml if path is None else open(path, encoding="utf-8").read()  # noqa: SIM115
    try:
        return ElementTree.fromstring(text)
    except ElementTree.ParseError as e:
        which = ("`xml` is not MJCF text (a file name? pass it as `path=`)"
                 if path is None else f"`path`={str(path)!r} is not an MJCF file")
        raise ValueError(f"{which}: {e}.") from e


def fused_bodies(xml: str | None = None, path=None) -> dict[str, str]:
    """The bodies brax's MJCF loader merges into their parent, and the parent each ends in.

    brax (``brax.io.mjcf``) fuses every body without a joint into its parent (geoms, sites
    and child bodies move to the parent, offset by the body's pose), so such a body has no
    index of its own in the loaded ``System``: body indices counted in the MJCF file then
    point at other bodies. ``body_index`` and ``load_mjcf(require_bodies=...)`` raise on
    these names instead.

    Args:
      xml: an MJCF string, or
      path: an MJCF file.

    Returns:
      {fused body name (``"<unnamed #i>"`` without a name): the surviving ancestor's name
      (``"world"`` for the world body)}.

    Example:
      >>> from jaxlab.rfo import envs
      >>> envs.fused_bodies(xml='''<mujoco><worldbody><body name="arm">
      ...   <joint name="j" type="hinge"/><geom size="0.1"/>
      ...   <body name="tip" pos="0.5 0 0"><site name="tip_site"/></body>
      ... </body></worldbody></mujoco>''')
      {'tip': 'arm'}
    """
    root = _mjcf_root(xml, path)
    out, count = {}, [0]

    def walk(elem, survivor):
        for child in elem:
            if child.tag != "body":
                continue
            count[0] += 1
            name = child.attrib.get("name", f"<unnamed #{count[0]}>")
            jointless = child.find("joint") is None and child.find("freejoint") is None
            if jointless:
                out[name] = survivor
            walk(child, survivor if jointless else name)

    for wb in root.iter("worldbody"):
        walk(wb, "world")
    return out


def load_mjcf(xml: str | None = None, path=None, *, require_bodies=()):
    """A brax ``System`` from an MJCF string ``xml`` or file ``path``, with one solver
    iteration (reverse-mode gradients through ``mjx.step``).

    MJCF conventions to keep in mind: angles (``euler``, ``axisangle``, hinge ``range``,
    ``ref``) are in *degrees* unless the file sets ``<compiler angle="radian"/>``; brax
    fuses every body without a joint into its parent (``fused_bodies``), so look bodies
    and sites up by name in the loaded system (``body_index``, ``site_index``), never by
    their order in the file.

    Args:
      xml: an MJCF string, or
      path: an MJCF file.
      require_bodies: names of bodies your task reads (positions, velocities); a body
        that brax fuses away raises here instead of being silently replaced.

    Returns:
      The brax ``System``.

    Raises:
      ValueError: a body of ``require_bodies`` is fused into its parent (naming both and
        the sites it carried) or is not in the file.
    """
    if isinstance(require_bodies, str):
        raise TypeError(f"`require_bodies` must be a sequence of body names, got one string "
                        f"{require_bodies!r}: write ({require_bodies!r},).")
    if require_bodies:
        fused = fused_bodies(xml, path)
        root = _mjcf_root(xml, path)
        names = {b.attrib.get("name") for b in root.iter("body")}
        for b in require_bodies:
            if b in fused:
                body = next(e for e in root.iter("body") if e.attrib.get("name") == b)
                sites = [s.attrib.get("name", "?") for s in body.findall("site")]
                raise ValueError(
                    f"`require_bodies`: body {b!r} has no joint, so brax fuses it into "
                    f"{fused[b]!r}" + (f" (its sites {sites} move there)" if sites else "")
                    + "; give it a joint, or read the parent body with the child's offset "
                    "(or a site by envs.site_index).")
            if b not in names:
                raise ValueError(f"`require_bodies`: no body named {b!r} in the MJCF.")
    return _load(xml, path)


def _names(sys, kind: str) -> list[str]:
    import mujoco

    mj_model = getattr(sys, "mj_model", None)
    if not isinstance(mj_model, mujoco.MjModel):
        raise TypeError(f"`sys` must be a loaded brax System (envs.load_mjcf, or a task's "
                        f"task.sys), got {type(sys).__name__}.")
    obj = {"body": mujoco.mjtObj.mjOBJ_BODY, "site": mujoco.mjtObj.mjOBJ_SITE}[kind]
    n = {"body": mj_model.nbody, "site": mj_model.nsite}[kind]
    return [mujoco.mj_id2name(mj_model, obj, i) for i in range(n)]


def body_index(sys, name: str) -> int:
    """Index of body ``name`` in a loaded brax ``System`` (``ps.x.pos[i]`` is its position;
    brax's ``x`` skips the world body, so this is the MuJoCo id minus one).

    Raises:
      ValueError: no such body in ``sys``, e.g. because brax fused it into its parent
        (``fused_bodies``), naming the bodies that exist.
      TypeError: ``sys`` is not a loaded ``System`` (e.g. the ``Task`` itself).
    """
    names = _names(sys, "body")
    if name not in names:
        raise ValueError(f"`name`: body {name!r} is not in the loaded system (bodies: "
                         f"{[n for n in names[1:]]}); brax fuses a body without a joint into "
                         "its parent (envs.fused_bodies).")
    return names.index(name) - 1


def site_index(sys, name: str) -> int:
    """Index of site ``name`` in a loaded brax ``System`` (``ps.site_xpos[i]``).

    Raises:
      ValueError: no such site, naming the sites that exist.
      TypeError: ``sys`` is not a loaded ``System`` (e.g. the ``Task`` itself).
    """
    names = _names(sys, "site")
    if name not in names:
        raise ValueError(f"`name`: site {name!r} is not in the loaded system (sites: "
                         f"{names}).")
    return names.index(name)


@functools.cache
def make_task(name: str) -> Task:
    """Builds (once per process) the task ``name``."""
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}: `name` must be one of {sorted(_TASKS)}.")
    task = _TASKS[name]()
    if not isinstance(task, Task):
        raise ValueError(f"the factory of task {name!r} must return a Task, got "
                         f"{type(task).__name__}.")
    return task


def initial_q_qd(key: PRNGKey, task: Task) -> tuple[Array, Array]:
    """Initial (positions [q_size], velocities [qd_size]) of ``reset`` (MJX tasks).

    Raises:
      ValueError: a task with its own physics (its state comes from ``init_state_fn``).
    """
    if task.own_physics:
        raise ValueError(f"task {task.name!r} has its own physics: its initial state is "
                         "`task.init_state_fn(key)`, not (q, qd).")
    if task.reset_fn is not None:
        return task.reset_fn(key)
    q = task.init_q + task.reset_noise * jax.random.uniform(key, task.init_q.shape,
                                                           minval=-1, maxval=1)
    return q, jnp.zeros(task.sys.qd_size())


def reset(key: PRNGKey, task: Task) -> EnvState:
    """Initial state: ``task.init_state_fn(key)`` for a task with its own physics;
    otherwise ``task.reset_fn(key)`` if the task has one, else uniform noise of
    ``task.reset_noise`` on positions and zero velocity; ``key`` typed, or a legacy
    ``uint32`` key."""
    key = as_key(key)
    if not isinstance(task, Task):
        raise TypeError(f"`task` must be an envs.Task (the arguments are reset(key, task)), "
                        f"got {type(task).__name__}.")
    if task.own_physics:
        ps = task.init_state_fn(key)
        info = None if task.health_fn is None else _health_info(task, ps)
        return EnvState(ps, task.obs_fn(ps), jnp.int32(0), jnp.float32(0.0), info)
    extras.require("brax")
    from brax.mjx import pipeline

    q, qd = initial_q_qd(key, task)
    ps = pipeline.init(task.sys, q, qd)
    return EnvState(ps, task.obs_fn(ps), jnp.int32(0), jnp.float32(0.0))


def step(task: Task, state: EnvState, action: Array) -> tuple[EnvState, Array]:
    """``task.n_frames`` physics steps with ``action`` in [-1, 1]^act_dim (for a task with
    its own physics: ``task.step_fn(ps, action)``).

    Args:
      task: the ``Task``.
      state: the ``EnvState`` of one environment.
      action: [act_dim] action.

    Returns:
      (next state, whose ``done`` is ``task.done_fn`` of the state reached (0 for a task
      that never terminates), or 1 after a failed step, reward scalar, 0 after a failed
      step (module doc)).

    Raises:
      TypeError: ``task`` is not a ``Task`` or ``state`` not an ``EnvState`` (e.g. the
        arguments in another order than ``step(task, state, action)``).
    """
    if not isinstance(task, Task):
        raise TypeError(f"`task` must be an envs.Task (the arguments are step(task, state, "
                        f"action)), got {type(task).__name__}.")
    if not isinstance(state, EnvState):
        raise TypeError(f"`state` must be an envs.EnvState (the arguments are step(task, "
                        f"state, action)), got {type(state).__name__}.")
    validation.check_shape("action", action, (task.act_dim,))
    validation.check_finite("action", action)
    if task.own_physics:
        ps = task.step_fn(state.pipeline_state, action)
    else:
        extras.require("brax")
        from brax.mjx import pipeline

        def frame(ps, _):
            return pipeline.step(task.sys, ps, action), None

        ps, _ = jax.lax.scan(frame, state.pipeline_state, None, length=task.n_frames)
    r = task.reward_fn(state.pipeline_state, ps, action)
    done = jnp.float32(0.0) if task.done_fn is None else task.done_fn(ps).astype(jnp.float32)
    if task.health_fn is None:
        return EnvState(ps, task.obs_fn(ps), state.t + 1, done), r
    failed = ~(jnp.all(jnp.isfinite(action)) & jnp.isfinite(r))
    info = _health_info(task, ps, failed)
    unhealthy = info["unhealthy"] > 0
    return (EnvState(ps, task.obs_fn(ps), state.t + 1, jnp.where(unhealthy, 1.0, done), info),
            jnp.where(unhealthy, jnp.zeros_like(r), r))


def _health_info(task: Task, ps, failed: Array | bool = False) -> dict:
    """``EnvState.info`` of a task with a ``health_fn``: "unhealthy" (its "nonfinite" flag
    or ``failed``) and its other flags, as float32."""
    flags = dict(task.health_fn(ps))
    if "nonfinite" not in flags:
        raise ValueError(f"task {task.name!r}: `health_fn` must return a dict with a "
                         f"'nonfinite' flag, got keys {sorted(flags)}.")
    unhealthy = jnp.asarray(flags.pop("nonfinite")) | failed
    return {"unhealthy": unhealthy.astype(jnp.float32),
            **{k: jnp.asarray(v).astype(jnp.float32) for k, v in flags.items()}}
