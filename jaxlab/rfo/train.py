"""RFO and the Gaussian analytic-policy-gradient (APG) baseline: training by backpropagating
the return of a short MJX rollout through the policy and the dynamics.

Per update (brax APG style, DESIGN.md): reset ``num_envs`` environments, roll out
``horizon`` steps in a ``lax.scan`` (vmapped over environments), and minimise

    L(theta) = -mean_envs sum_t r_t / horizon
               + stability_coef * CFM(recent obs, actions) + exploration_coef * CFM(uniform)

with ``optax.clip_by_global_norm`` + Adam(b1=0.7, b2=0.95). The flow policy's actions come
from the Euler ODE of ``flow.py`` (``chunk`` > 1: one chunk of actions per ``chunk``
steps, executed open loop); the Gaussian baseline uses tanh(mu(obs) + sigma * eps) with
a learned state-independent log sigma. The regularisers apply to the flow only.
A whole run is ``make_train(...)(key)``: one ``lax.scan`` over updates, vmappable over seeds.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey
from jaxlab.rfo import envs, flow, regularizers


class TrainConfig(NamedTuple):
    """Hyperparameters of one RFO / APG run."""

    policy: str = "flow"  # "flow" or "gaussian"
    num_envs: int = 16
    horizon: int = 32
    num_updates: int = 50
    lr: float = 3e-3
    grad_clip: float = 1.0
    chunk: int = 1
    ode_steps: int = 4
    hidden: int = 64
    stability_coef: float = 0.0
    exploration_coef: float = 0.0
    eval_horizon: int = 100


class GaussianPolicy(nnx.Module):
    def __init__(self, obs_dim: int, act_dim: int, hidden: int, *, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(obs_dim, hidden, rngs=rngs)
        self.l2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.mu = nnx.Linear(hidden, act_dim, rngs=rngs, kernel_init=nnx.initializers.normal(1e-3))
        self.log_std = nnx.Param(jnp.full((act_dim,), -0.5))

    def __call__(self, obs, key):
        h = jax.nn.silu(self.l2(jax.nn.silu(self.l1(obs))))
        eps = jax.random.normal(key, (obs.shape[0], self.log_std.shape[0]))
        return jnp.tanh(self.mu(h) + jnp.exp(self.log_std[...]) * eps)[:, None, :]


def check_config(cfg: TrainConfig) -> None:
    if cfg.policy not in ("flow", "gaussian"):
        raise ValueError(f"`policy` must be 'flow' or 'gaussian', got {cfg.policy!r}.")
    for name in ("num_envs", "horizon", "num_updates", "chunk", "ode_steps", "eval_horizon"):
        validation.check_positive_int(name, getattr(cfg, name))
    if cfg.horizon % cfg.chunk:
        raise ValueError(f"`horizon`={cfg.horizon} must be divisible by `chunk`={cfg.chunk}.")
    if cfg.policy == "gaussian" and cfg.chunk != 1:
        raise ValueError("the Gaussian baseline acts per step: `chunk` must be 1.")


def init_policy(task: envs.Task, cfg: TrainConfig, seed: int = 0):
    """(graphdef, params, act_fn) with act_fn(graphdef, params, obs [B, O], key) -> [B, H, A]."""
    if cfg.policy == "flow":
        fcfg = flow.FlowConfig(task.obs_dim, task.act_dim, cfg.chunk, cfg.ode_steps, cfg.hidden)
        graphdef, params = flow.init(fcfg, seed)
        return graphdef, params, lambda g, p, o, k: flow.sample(g, p, fcfg, o, k)
    graphdef, params = nnx.split(GaussianPolicy(task.obs_dim, task.act_dim, cfg.hidden,
                                                rngs=nnx.Rngs(seed)))
    return graphdef, params, lambda g, p, o, k: nnx.merge(g, p)(o, k)


def rollout(task: envs.Task, cfg: TrainConfig, graphdef, params, act_fn, key: PRNGKey,
            num_envs: int, horizon: int):
    """Differentiable vmapped rollout from fresh resets.

    Returns:
      (rewards [horizon, num_envs], obs at decision steps [horizon / chunk, num_envs, O],
       actions [horizon / chunk, num_envs, chunk, A]).
    """
    k_reset, k_act = jax.random.split(key)
    state = jax.vmap(lambda k: envs.reset(task, k))(jax.random.split(k_reset, num_envs))
    step = jax.vmap(lambda s, a: envs.step(task, s, a))

    def decision(state, k):
        acts = act_fn(graphdef, params, state.obs, k)  # [E, H, A]
        obs = state.obs

        def inner(s, a):
            s, r = step(s, a)
            return s, r

        state, rewards = jax.lax.scan(inner, state, jnp.swapaxes(acts, 0, 1))
        return state, (rewards, obs, acts)

    _, (rewards, obs, acts) = jax.lax.scan(decision, state,
                                           jax.random.split(k_act, horizon // cfg.chunk))
    return rewards.reshape(horizon, num_envs), obs, acts


class TrainState(NamedTuple):
    params: nnx.State
    opt_state: optax.OptState
    key: PRNGKey


class Metrics(NamedTuple):
    """Per update: mean training return per step, eval return, grad norm (pre-clip)."""

    train_return: Array
    eval_return: Array
    grad_norm: Array


def make_train(task: envs.Task, cfg: TrainConfig, seed: int = 0):
    """Returns ``train(key) -> (TrainState, Metrics [num_updates])`` (jit / vmap it)."""
    check_config(cfg)
    graphdef, params0, act_fn = init_policy(task, cfg, seed)
    opt = optax.chain(optax.clip_by_global_norm(cfg.grad_clip),
                      optax.adam(cfg.lr, b1=0.7, b2=0.95))

    def loss_fn(params, key):
        k_roll, k_stab, k_expl = jax.random.split(key, 3)
        rewards, obs, acts = rollout(task, cfg, graphdef, params, act_fn, k_roll,
                                     cfg.num_envs, cfg.horizon)
        ret = jnp.mean(jnp.sum(rewards, 0)) / cfg.horizon
        loss = -ret
        if cfg.policy == "flow" and (cfg.stability_coef or cfg.exploration_coef):
            o = obs.reshape(-1, obs.shape[-1])
            a = acts.reshape(-1, cfg.chunk, task.act_dim)
            loss += cfg.stability_coef * regularizers.stability_loss(graphdef, params, o, a,
                                                                     k_stab)
            loss += cfg.exploration_coef * regularizers.exploration_loss(
                graphdef, params, o, (cfg.chunk, task.act_dim), k_expl)
        return loss, ret

    def evaluate(params, key):
        rewards, _, _ = rollout(task, cfg, graphdef, params, act_fn, key, cfg.num_envs,
                                cfg.eval_horizon - cfg.eval_horizon % cfg.chunk)
        return jnp.mean(jnp.sum(rewards, 0))

    def update(state: TrainState, _):
        key, k_loss, k_eval = jax.random.split(state.key, 3)
        (_, ret), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, k_loss)
        gnorm = optax.global_norm(grads)
        grads = jax.tree.map(lambda g: jnp.where(jnp.isfinite(g), g, 0.0), grads)
        upd, opt_state = opt.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, upd)
        return TrainState(params, opt_state, key), Metrics(ret, evaluate(params, k_eval), gnorm)

    def train(key: PRNGKey):
        state = TrainState(params0, opt.init(params0), key)
        return jax.lax.scan(update, state, None, length=cfg.num_updates)

    train.graphdef, train.act_fn = graphdef, act_fn
    return train
