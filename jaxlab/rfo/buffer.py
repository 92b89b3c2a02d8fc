"""A fixed-size FIFO ring buffer of past policies' (observation, action chunk) pairs.

RFO's stability regulariser (the paper's stability term) fits the flow by
conditional flow matching toward data produced by *earlier* policies, not toward the
current rollout's own samples. The buffer is a pytree carried in ``RFOState``: ``add``
writes each rollout's decision-step pairs after the update that used the buffer, so the
update ``u`` regularises toward the data of updates ``< u``; ``sample`` draws rows uniformly
(with replacement) from the filled slots with the step's key. The data structure is ours
(a plain circular array, as in any replay buffer); nothing is copied from a library.

All functions are pure and jit-able; ``init`` checks its sizes eagerly (ValueError naming
the argument); ``add`` checks shapes and floating dtypes (static, also under tracing) and
finiteness of concrete ``obs`` / ``actions`` (skipped when traced); ``sample`` checks
``batch``.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey


class Buffer(NamedTuple):
    """Ring buffer state (add a leading seed axis when vmapped).

    Attributes:
      obs: [N, O] observations at decision steps.
      actions: [N, H, A] the action chunks taken there (in [-1, 1]).
      ptr: int32 scalar, the slot the next row is written to.
      count: int32 scalar, number of filled slots (<= N); slots 0..count-1 are filled.
    """

    obs: Array
    actions: Array
    ptr: Array
    count: Array


def init(size: int, obs_dim: int, chunk: int, act_dim: int) -> Buffer:
    """An empty buffer of ``size`` rows.

    Raises:
      ValueError: any size is not a positive integer (names the argument).
    """
    for name, n in (("size", size), ("obs_dim", obs_dim), ("chunk", chunk),
                    ("act_dim", act_dim)):
        validation.check_positive_int(name, n)
    return Buffer(jnp.zeros((size, obs_dim), jnp.float32),
                  jnp.zeros((size, chunk, act_dim), jnp.float32),
                  jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))


def add(buf: Buffer, obs: Array, actions: Array) -> Buffer:
    """Appends B rows in order, overwriting the oldest (FIFO) once full.

    Same result as writing the rows one at a time: when B > N only the last N rows stay.

    Args:
      buf: the buffer.
      obs: [B, O] floating.
      actions: [B, H, A] floating.

    Raises:
      ValueError: a shape mismatch, or NaN / inf in concrete ``obs`` / ``actions``.
      TypeError: ``obs`` / ``actions`` without a floating dtype.
    """
    n = buf.obs.shape[0]
    validation.check_shape("obs", obs, (None, buf.obs.shape[1]))
    validation.check_shape("actions", actions, (obs.shape[0],) + buf.actions.shape[1:])
    validation.check_floating("obs", obs)
    validation.check_floating("actions", actions)
    validation.check_finite("obs", obs)  # concrete arrays only (traced values pass)
    validation.check_finite("actions", actions)
    b = obs.shape[0]
    m = min(b, n)  # static: rows that survive
    idx = (buf.ptr + (b - m) + jnp.arange(m, dtype=jnp.int32)) % n
    return Buffer(buf.obs.at[idx].set(obs[b - m:].astype(buf.obs.dtype)),
                  buf.actions.at[idx].set(actions[b - m:].astype(buf.actions.dtype)),
                  ((buf.ptr + b) % n).astype(jnp.int32),
                  jnp.minimum(buf.count + b, n).astype(jnp.int32))


def sample(key: PRNGKey, buf: Buffer, batch: int) -> tuple[Array, Array, Array]:
    """``batch`` rows drawn uniformly with replacement from the filled slots.

    Returns:
      (obs [batch, O], actions [batch, H, A], nonempty: bool scalar). On an empty buffer
      the rows are slot 0's zeros and ``nonempty`` is False (callers mask the loss).
    """
    validation.check_positive_int("batch", batch)
    idx = jax.random.randint(key, (batch,), 0, jnp.maximum(buf.count, 1))
    return buf.obs[idx], buf.actions[idx], buf.count > 0
