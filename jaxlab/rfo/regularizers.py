"""RFO's two regularisers, both conditional flow matching (CFM) losses on the velocity field.

CFM toward a target action a_1 (pre-squash, atanh of the action): draw eps ~ N(0, I) and
s ~ U(0, 1), x_s = (1 - s) eps + s a_1, and regress v(x_s, s | obs) on a_1 - eps.

* ``stability_loss``: CFM on given (obs, action) pairs; ``train`` feeds it pairs drawn
  from a FIFO buffer of past policies' data (``buffer.py``, ``train.stability_term``),
  keeping the flow close to earlier behaviour (a stable flow between updates);
* ``exploration_loss``: CFM toward actions drawn uniformly from the action box, which
  keeps probability mass over the whole box.

Checks (eager, at the Python boundary, on concrete values; inside ``train``'s compiled
loss the inputs are traced and pass): ``cfm_loss``: ``obs`` [B, O] and ``target`` [B, D]
with one batch, both finite. ``stability_loss`` / ``pre_squash``: ``actions`` in [-1, 1]
(NaN rejected), ``actions`` [B, H, A] with the batch of ``obs``. ``exploration_loss``:
``action_shape`` a pair of positive integers; ``obs`` [B, O].
"""

import jax
import jax.numpy as jnp
from flax import nnx

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey

_EDGE = 1.0 - 1e-4  # atanh stays finite on saturated actions


def pre_squash(actions: Array) -> Array:
    """atanh of actions in [-1, 1] (clipped to the open box)."""
    validation.check_in_range("actions", actions, -1.0, 1.0)
    return jnp.arctanh(jnp.clip(actions, -_EDGE, _EDGE))


def cfm_loss(key: PRNGKey, graphdef, params, obs: Array, target: Array) -> Array:
    """Mean CFM loss. obs [B, O]; target [B, D] pre-squash actions (flattened chunks)."""
    validation.check_ndim("obs", obs, 2)
    validation.check_ndim("target", target, 2)
    validation.check_shape("target", target, (obs.shape[0], None))
    validation.check_finite("obs", obs)
    validation.check_finite("target", target)
    k_eps, k_s = jax.random.split(key)
    eps = jax.random.normal(k_eps, target.shape)
    s = jax.random.uniform(k_s, target.shape[:1])
    x = (1.0 - s[:, None]) * eps + s[:, None] * target
    v = nnx.merge(graphdef, params)(x, s, obs)
    return jnp.mean(jnp.sum((v - (target - eps)) ** 2, axis=-1))


def stability_loss(key: PRNGKey, graphdef, params, obs: Array, actions: Array) -> Array:
    """CFM toward (obs, action chunk) pairs of past policies: obs [B, O], actions [B, H, A]
    in [-1, 1]. In ``train`` the pairs are drawn from the buffer of earlier updates' data
    (``buffer.py``, ``train.stability_term``), not from the current rollout."""
    validation.check_ndim("obs", obs, 2)
    validation.check_shape("actions", actions, (obs.shape[0], None, None))
    target = jax.lax.stop_gradient(pre_squash(actions.reshape(actions.shape[0], -1)))
    return cfm_loss(key, graphdef, params, jax.lax.stop_gradient(obs), target)


def exploration_loss(key: PRNGKey, graphdef, params, obs: Array,
                     action_shape: tuple[int, int]) -> Array:
    """CFM toward actions uniform on [-1, 1]^(H x A) at the observed states."""
    if len(action_shape) != 2:
        raise ValueError(f"`action_shape` must be (chunk, act_dim), got {action_shape!r}.")
    for n in action_shape:
        validation.check_positive_int("action_shape", n)
    validation.check_ndim("obs", obs, 2)
    k_u, k_cfm = jax.random.split(key)
    u = jax.random.uniform(k_u, (obs.shape[0], action_shape[0] * action_shape[1]), minval=-1,
                           maxval=1)
    return cfm_loss(k_cfm, graphdef, params, jax.lax.stop_gradient(obs), pre_squash(u))
