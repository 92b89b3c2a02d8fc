"""Running brax 0.14.2's trainers on jax 0.10: a stand-in for ``jax.device_put_replicated``
and a brax ``Env`` around one of our MJX tasks.

brax's PPO (``brax.training.agents.ppo.train``) places its training state on the local
devices with ``jax.device_put_replicated``, which jax removed; nothing else in that trainer
needs patching on jax 0.10.2 (checked on CPU, ``experiments/check_ppo_vs_brax.py``).
``install()`` provides the function (only when jax lacks it) so that brax can be run side by
side with our own PPO (``jaxlab.rfo.ppo``); nothing in ``jaxlab`` uses it.

``device_put_replicated(x, devices)`` follows the removed function's contract: every leaf of
``x`` comes back with a new leading axis of size ``len(devices)``, slice ``i`` living on
``devices[i]`` (one shard per device, sharded along that axis over a 1-D mesh of
``devices``), values unchanged; an empty ``devices`` raises ValueError.

``TaskEnv(task)`` is a minimal ``brax.envs.Env`` whose ``reset`` / ``step`` are our
``envs.reset`` / ``envs.step`` (same physics, reward, observation and termination; the
action is clipped to [-1, 1] first, as our PPO does), so both PPOs train on the same
environment. Our ``EnvState`` rides in brax's ``State.pipeline_state`` (a pytree, which is
all brax's wrappers need). Episode length and auto-reset come from brax's training wrappers.
"""

import contextlib

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import extras

_AXIS = "replica"


def device_put_replicated(x, devices):
    """``x`` (a pytree of arrays / scalars) replicated along a new leading axis over
    ``devices``: leaf shape ``s`` -> ``(len(devices),) + s``, slice ``i`` on ``devices[i]``.

    Raises:
      ValueError: ``devices`` is empty.
    """
    devices = list(devices)
    if not devices:
        raise ValueError("`devices` argument to `device_put_replicated` must be a non-empty "
                         "sequence.")
    sharding = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(devices), (_AXIS,)),
                                          jax.sharding.PartitionSpec(_AXIS))

    def put(leaf):
        leaf = jnp.asarray(leaf)
        shards = [jax.device_put(leaf[None], d) for d in devices]
        return jax.make_array_from_single_device_arrays((len(devices),) + leaf.shape,
                                                        sharding, shards)

    return jax.tree.map(put, x)


def install() -> bool:
    """Sets ``jax.device_put_replicated`` to the stand-in if jax has none.

    Returns:
      True if it was installed by this call, False if jax already had the function.
    """
    if hasattr(jax, "device_put_replicated"):
        return False
    jax.device_put_replicated = device_put_replicated
    return True


def uninstall() -> None:
    """Removes the stand-in (leaves a genuine ``jax.device_put_replicated`` alone)."""
    if getattr(jax, "device_put_replicated", None) is device_put_replicated:
        del jax.device_put_replicated


@contextlib.contextmanager
def installed():
    """``install()`` for the duration of a ``with`` block (removed after if it was added)."""
    added = install()
    try:
        yield
    finally:
        if added:
            uninstall()


def task_env(task):
    """A ``brax.envs.Env`` (``TaskEnv``) stepping our ``envs.Task`` ``task``."""
    extras.require("brax")
    from brax.envs import base as brax_base

    from jaxlab.rfo import envs

    class TaskEnv(brax_base.Env):
        """brax ``Env`` around ``envs.reset`` / ``envs.step`` of one task (module doc)."""

        def __init__(self, task):
            self.task = task

        def reset(self, rng):
            s = envs.reset(rng, self.task)
            return brax_base.State(pipeline_state=s, obs=s.obs, reward=jnp.float32(0.0),
                                   done=jnp.float32(0.0))

        def step(self, state, action):
            s, r = envs.step(self.task, state.pipeline_state, jnp.clip(action, -1.0, 1.0))
            return state.replace(pipeline_state=s, obs=s.obs, reward=r, done=s.done)

        @property
        def observation_size(self) -> int:
            return self.task.obs_dim

        @property
        def action_size(self) -> int:
            return self.task.act_dim

        @property
        def backend(self) -> str:
            return "mjx"

    return TaskEnv(task)
