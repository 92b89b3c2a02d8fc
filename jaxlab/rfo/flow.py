"""Flow policies: actions from a differentiable fixed-step ODE (RFO, arXiv 2602.03501).

a_0 ~ N(0, I); a_{k+1} = a_k + (1/K) v_theta(a_k, k/K | obs) for k < K (explicit Euler);
action = tanh(a_K); ``mode`` runs the same ODE from a_0 = 0 (the policy's deterministic
action, for evaluation). With ``chunk = H`` the flow acts on an [H, act_dim] action chunk that
is executed open loop. The whole map (noise, obs) -> action is differentiable in theta and
obs, so a policy gradient is the gradient of the rollout return through the Euler steps
(and the dynamics); no log-likelihood is needed.

Checks (eager, at the Python boundary; traced values pass): ``check_config`` / ``init``:
every ``FlowConfig`` field a positive integer. ``integrate``: ``ode_steps`` a positive
integer; ``obs`` [B, O] and ``noise`` [B, D] with the widths the velocity field was built
for; ``sample``: ``obs`` [B, obs_dim]; both: ``obs`` / ``noise`` finite when concrete.
Nothing is checked inside compiled code.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey


class FlowConfig(NamedTuple):
    """obs_dim, act_dim, chunk H, Euler steps K, MLP width / depth."""

    obs_dim: int
    act_dim: int
    chunk: int = 1
    ode_steps: int = 4
    hidden: int = 64
    depth: int = 2


class VelocityField(nnx.Module):
    """MLP v(a_s, s, obs) -> [chunk * act_dim]."""

    def __init__(self, cfg: FlowConfig, *, rngs: nnx.Rngs):
        d = cfg.chunk * cfg.act_dim
        widths = [d + 1 + cfg.obs_dim] + [cfg.hidden] * cfg.depth
        self.layers = nnx.List([nnx.Linear(i, o, rngs=rngs)
                                for i, o in zip(widths[:-1], widths[1:], strict=True)])
        self.out = nnx.Linear(cfg.hidden, d, rngs=rngs,
                              kernel_init=nnx.initializers.normal(1e-3))

    def __call__(self, a: Array, s: Array, obs: Array) -> Array:
        """a [B, H*A], s [B] flow time in [0, 1], obs [B, O] -> velocity [B, H*A]."""
        h = jnp.concatenate([a, s[:, None], obs], axis=-1)
        for layer in self.layers:
            h = jax.nn.silu(layer(h))
        return self.out(h)


def check_config(cfg: FlowConfig) -> None:
    for name in ("obs_dim", "act_dim", "chunk", "ode_steps", "hidden", "depth"):
        validation.check_positive_int(name, getattr(cfg, name))


def init(key: PRNGKey, cfg: FlowConfig):
    """(graphdef, params) of a velocity field with weights drawn from ``key``.

    Under ``jit`` / ``vmap`` keep only the params (the graphdef is static; a trainer takes
    it once from ``nnx.eval_shape``)."""
    check_config(cfg)
    return nnx.split(VelocityField(cfg, rngs=nnx.Rngs(key)))


def integrate(graphdef, params, obs: Array, noise: Array, ode_steps: int) -> Array:
    """Euler integration of the flow from ``noise`` [B, D] given ``obs`` [B, O] -> a_K [B, D]."""
    validation.check_positive_int("ode_steps", ode_steps)
    v = nnx.merge(graphdef, params)
    validation.check_ndim("obs", obs, 2)
    validation.check_ndim("noise", noise, 2)
    d = v.out.out_features
    validation.check_shape("noise", noise, (obs.shape[0], d))
    validation.check_shape("obs", obs, (None, v.layers[0].in_features - d - 1))
    validation.check_finite("obs", obs)
    validation.check_finite("noise", noise)
    dt = 1.0 / ode_steps

    def step(a, k):
        s = jnp.full(a.shape[:1], k * dt)
        return a + dt * v(a, s, obs), None

    a, _ = jax.lax.scan(step, noise, jnp.arange(ode_steps))
    return a


def sample(key: PRNGKey, graphdef, params, cfg: FlowConfig, obs: Array) -> Array:
    """Actions in [-1, 1]: tanh of the integrated flow. obs [B, O] -> [B, chunk, act_dim]."""
    validation.check_ndim("obs", obs, 2)
    if obs.shape[1] != cfg.obs_dim:
        raise ValueError(f"`obs` must have shape [B, {cfg.obs_dim}], got {obs.shape}.")
    noise = jax.random.normal(key, (obs.shape[0], cfg.chunk * cfg.act_dim))
    a = integrate(graphdef, params, obs, noise, cfg.ode_steps)
    return jnp.tanh(a).reshape(obs.shape[0], cfg.chunk, cfg.act_dim)


def mode(graphdef, params, cfg: FlowConfig, obs: Array) -> Array:
    """The flow's deterministic action: ``sample`` with the base noise set to zero,
    tanh(a_K) from a_0 = 0. obs [B, O] -> [B, chunk, act_dim]."""
    validation.check_ndim("obs", obs, 2)
    if obs.shape[1] != cfg.obs_dim:
        raise ValueError(f"`obs` must have shape [B, {cfg.obs_dim}], got {obs.shape}.")
    noise = jnp.zeros((obs.shape[0], cfg.chunk * cfg.act_dim), obs.dtype)
    a = integrate(graphdef, params, obs, noise, cfg.ode_steps)
    return jnp.tanh(a).reshape(obs.shape[0], cfg.chunk, cfg.act_dim)
