"""PPO baseline (Schulman et al. 2017) on the same MJX tasks, written for jax 0.10.

brax 0.14.2's trainers call the removed ``jax.device_put_replicated`` on jax >= 0.10, so this
is our own loop with the same interface as ``train.make_trainer``: ``make_trainer(task, cfg)``
returns ``Algorithm(init, step)`` with ``init(key) -> PPOState`` (actor-critic weights and
the first environments drawn from ``key``) and ``step(key, state) -> (PPOState,
train.Info)``.

Per update: roll out ``rollout_len`` steps from the carried environments with a Gaussian
policy (no gradient through the physics; the env receives clip(a, -1, 1)), compute GAE
advantages (Schulman et al. 2016, Eq. 16) bootstrapped with V at the last state (time-limit
truncation), and run ``epochs`` x ``minibatches`` Adam steps on the clipped surrogate

    L = -E[min(rho A, clip(rho, 1 - eps, 1 + eps) A)] + vf_coef (V - G)^2 - ent_coef H[pi].

``gae`` takes optional ``termination`` / ``truncation`` masks with brax ``compute_gae``
semantics (see ``critic.py``). For a terminating task (``task.terminates``: hopper) an
environment whose step sets ``done`` restarts from a fresh state drawn at the start of the
update (brax ``AutoResetWrapper``) and ``done`` is GAE's termination mask (no bootstrap
through a terminal state); evaluation returns stop at the terminating step. Time-limit
resets happen only between updates (``episode_length`` is a multiple of ``rollout_len``),
where V(s_T) bootstraps the truncation. Tasks that never terminate take the unmasked path;
one that can fail (``task.resets_on_done``: ``soft_quadruped``) has its failed
environments reset and its evaluation returns stopped likewise, with GAE unmasked.

Checks (eager, at the Python boundary, on concrete values; traced values pass):
``check_config`` (run by ``make_trainer``): sizes are positive integers, ``lr``,
``grad_clip``, ``clip_eps``, ``reward_scale`` > 0, ``vf_coef``, ``ent_coef`` >= 0,
``gamma`` and ``gae_lambda`` in [0, 1], every float finite, ``minibatches`` divides
``num_envs * rollout_len``, ``episode_length`` a multiple of ``rollout_len``. ``gae``: as
``critic.td_lambda_targets``. Inside the compiled loop nothing is checked; a non-finite
gradient shows as a non-finite ``Info.grad_norm`` (the caller's to turn into an error).
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from jaxlab.core import checked, validation
from jaxlab.core.types import Algorithm, Array, PRNGKey
from jaxlab.rfo import critic, envs
from jaxlab.rfo.train import (
    Info,
    auto_reset,
    check_finite_fields,
    episode_mask,
    maybe_evaluate,
    network,
    reset_envs,
    reset_finished,
)

checked.declare("jaxlab.rfo.ppo.gae")

_LOG_2PI = math.log(2.0 * math.pi)


class PPOConfig(NamedTuple):
    num_envs: int = 16
    rollout_len: int = 32
    num_updates: int = 50
    epochs: int = 4
    minibatches: int = 4
    lr: float = 3e-4
    grad_clip: float = 0.5
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip_eps: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.0
    hidden: int = 64
    episode_length: int = 128
    eval_horizon: int = 100
    reward_scale: float = 0.1


class ActorCritic(nnx.Module):
    def __init__(self, obs_dim: int, act_dim: int, hidden: int, *, rngs: nnx.Rngs):
        self.pi1 = nnx.Linear(obs_dim, hidden, rngs=rngs)
        self.pi2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.mu = nnx.Linear(hidden, act_dim, rngs=rngs, kernel_init=nnx.initializers.normal(1e-2))
        self.log_std = nnx.Param(jnp.full((act_dim,), -0.5, jnp.float32))
        self.v1 = nnx.Linear(obs_dim, hidden, rngs=rngs)
        self.v2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.v = nnx.Linear(hidden, 1, rngs=rngs)

    def __call__(self, obs: Array):
        """obs [..., O] -> (mean [..., A], log_std [A], value [...])."""
        h = jnp.tanh(self.pi2(jnp.tanh(self.pi1(obs))))
        g = jnp.tanh(self.v2(jnp.tanh(self.v1(obs))))
        return self.mu(h), self.log_std[...], self.v(g)[..., 0]


def gaussian_log_prob(a: Array, mean: Array, log_std: Array) -> Array:
    """log N(a; mean, diag(exp(log_std))^2) summed over the last axis."""
    z = (a - mean) * jnp.exp(-log_std)
    return jnp.sum(-0.5 * z ** 2 - log_std - 0.5 * _LOG_2PI, axis=-1)


@checked.boundary
def gae(rewards: Array, values: Array, gamma: float, lam: float,
        termination: Array | None = None, truncation: Array | None = None) -> Array:
    """Generalised advantage estimates (brax ``compute_gae``'s ``vs - values``).

    Args:
      rewards: [T, ...] rewards.
      values: [T + 1, ...] V(s_0) .. V(s_T).
      gamma: discount in [0, 1]; lam: lambda in [0, 1].
      termination: optional [T, ...] 0/1, s_{t+1} terminal (no bootstrap).
      truncation: optional [T, ...] 0/1, step t crossed a time-limit reset (advantage 0,
        trace cut).

    Returns:
      [T, ...] advantages.
    """
    critic.check_return_inputs(rewards, values, gamma, lam, termination, truncation,
                               where="jaxlab.rfo.ppo.gae")
    if termination is not None or truncation is not None:
        d, tr = critic._masks(rewards, termination, truncation)
        keep = 1.0 - tr
        deltas = (rewards + gamma * (1.0 - d) * values[1:] - values[:-1]) * keep

        def back_masked(adv, x):
            delta, d_t, keep_t = x
            adv = delta + gamma * (1.0 - d_t) * keep_t * lam * adv
            return adv, adv

        _, adv = jax.lax.scan(back_masked, jnp.zeros_like(deltas[0]), (deltas, d, keep),
                              reverse=True)
        return adv
    deltas = rewards + gamma * values[1:] - values[:-1]

    def back(adv, d):
        adv = d + gamma * lam * adv
        return adv, adv

    _, adv = jax.lax.scan(back, jnp.zeros_like(deltas[0]), deltas, reverse=True)
    return adv


class PPOState(NamedTuple):
    """State of a PPO run (add a leading seed axis when vmapped).

    Attributes:
      params: actor-critic parameters.
      opt_state: their optax state.
      env_state: the carried environments, a batched ``EnvState`` [num_envs].
    """

    params: nnx.State
    opt_state: optax.OptState
    env_state: envs.EnvState


def check_config(cfg: PPOConfig) -> None:
    """Raises ValueError naming the first out-of-range field of ``cfg`` (module doc)."""
    for name in ("num_envs", "rollout_len", "num_updates", "epochs", "minibatches",
                 "eval_horizon", "episode_length", "hidden"):
        validation.check_positive_int(name, getattr(cfg, name))
    validation.check_fields(cfg, {
        "lr": validation.POSITIVE, "grad_clip": validation.POSITIVE,
        "clip_eps": validation.POSITIVE, "reward_scale": validation.POSITIVE,
        "vf_coef": validation.NON_NEGATIVE, "ent_coef": validation.NON_NEGATIVE,
        "gamma": validation.UNIT_CLOSED, "gae_lambda": validation.UNIT_CLOSED,
    }, prefix="PPOConfig")
    check_finite_fields(cfg, ("lr", "grad_clip", "clip_eps", "reward_scale", "vf_coef",
                              "ent_coef"), "PPOConfig")
    if (cfg.num_envs * cfg.rollout_len) % cfg.minibatches:
        raise ValueError(f"`num_envs * rollout_len` = {cfg.num_envs * cfg.rollout_len} must be "
                         f"divisible by `minibatches`={cfg.minibatches}.")
    if cfg.episode_length % cfg.rollout_len:
        raise ValueError(f"`episode_length`={cfg.episode_length} must be a multiple of "
                         f"`rollout_len`={cfg.rollout_len}.")


def env_steps_per_update(cfg: PPOConfig) -> int:
    return cfg.num_envs * cfg.rollout_len


def make_trainer(task: envs.Task, cfg: PPOConfig, *,
                 deterministic_eval: bool = False) -> Algorithm:
    """PPO on ``task`` (module doc); ``deterministic_eval`` also evaluates the policy's
    mean action (clipped to the box, as every action) on the evaluation's resets, into
    ``Info.eval_mode_return`` (the stochastic ``Info.eval_return`` unchanged).

    Returns:
      ``Algorithm(init, step)``: ``init(key) -> PPOState`` draws the actor-critic weights and
      the first ``num_envs`` environments from ``key``; ``step(key, state) -> (PPOState,
      Info)`` is one update (rollout, GAE, ``epochs`` x ``minibatches`` Adam steps, eval);
      ``step(key, state, do_eval=False)`` skips the evaluation (``Info.eval_return`` NaN).

    Raises:
      ValueError: ``check_config`` fails.
    """
    check_config(cfg)
    graphdef, init_params = network(lambda rngs: ActorCritic(task.obs_dim, task.act_dim,
                                                             cfg.hidden, rngs=rngs))
    opt = optax.chain(optax.clip_by_global_norm(cfg.grad_clip), optax.adam(cfg.lr))
    step_envs = jax.vmap(lambda s, a: envs.step(task, s, a))
    net = lambda p, o: nnx.merge(graphdef, p)(o)  # noqa: E731

    def act(key, params, obs):
        mean, log_std, v = net(params, obs)
        a = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
        return a, gaussian_log_prob(a, mean, log_std), v

    def collect(key, params, env_state, fresh):
        def one(s, k):
            a, logp, v = act(k, params, s.obs)
            s1, r = step_envs(s, jnp.clip(a, -1.0, 1.0))
            done = s1.done
            if task.resets_on_done:
                s1 = auto_reset(s1, fresh)
            return s1, (s.obs, a, logp, v, r, done)

        final, traj = jax.lax.scan(one, env_state, jax.random.split(key, cfg.rollout_len))
        return final, traj

    def loss_fn(params, batch):
        obs, a, logp_old, adv, ret = batch
        mean, log_std, v = net(params, obs)
        ratio = jnp.exp(gaussian_log_prob(a, mean, log_std) - logp_old)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        surr = jnp.minimum(ratio * adv,
                           jnp.clip(ratio, 1.0 - cfg.clip_eps, 1.0 + cfg.clip_eps) * adv)
        entropy = jnp.sum(log_std + 0.5 * (_LOG_2PI + 1.0))
        return -surr.mean() + cfg.vf_coef * jnp.mean((v - ret) ** 2) - cfg.ent_coef * entropy

    def evaluate(key, params, deterministic=False):
        k_reset, k_act = jax.random.split(key)

        def one(s, k):
            a = net(params, s.obs)[0] if deterministic else act(k, params, s.obs)[0]
            s1, r = step_envs(s, jnp.clip(a, -1.0, 1.0))
            return s1, (r, s1.done)

        _, (r, d) = jax.lax.scan(one, reset_envs(k_reset, task, cfg.num_envs),
                                 jax.random.split(k_act, cfg.eval_horizon))
        if task.resets_on_done:  # the episode return stops at the terminating step
            r = jnp.where(episode_mask(d) > 0, r, 0.0)
        return jnp.mean(jnp.sum(r, 0))

    def evaluate_mode(key, params):
        return evaluate(key, params, deterministic=True)

    def init(key: PRNGKey) -> PPOState:
        k_params, k_env = jax.random.split(key)
        params = init_params(k_params)
        return PPOState(params, opt.init(params), reset_envs(k_env, task, cfg.num_envs))

    def step(key: PRNGKey, state: PPOState, do_eval=True) -> tuple[PPOState, Info]:
        k_roll, k_perm, k_eval, k_reset = jax.random.split(key, 4)
        env_state = reset_finished(k_reset, task, state.env_state, cfg.episode_length)
        fresh = (reset_envs(jax.random.fold_in(k_reset, 1), task, cfg.num_envs)
                 if task.resets_on_done else None)
        final, (obs, a, logp, v, r, done) = collect(k_roll, state.params, env_state, fresh)
        v_last = net(state.params, final.obs)[2]
        values = jnp.concatenate([v, v_last[None]], 0)
        adv = gae(r * cfg.reward_scale, values, cfg.gamma, cfg.gae_lambda,
                  termination=done if task.terminates else None)
        ret = adv + v
        n = cfg.num_envs * cfg.rollout_len
        flat = jax.tree.map(lambda x: x.reshape((n,) + x.shape[2:]), (obs, a, logp, adv, ret))

        def epoch(carry, k):
            params, opt_state = carry
            perm = jax.random.permutation(k, n).reshape(cfg.minibatches, -1)

            def mb(carry, idx):
                params, opt_state = carry
                loss, g = jax.value_and_grad(loss_fn)(params, jax.tree.map(lambda x: x[idx],
                                                                           flat))
                upd, opt_state = opt.update(g, opt_state, params)
                return (optax.apply_updates(params, upd), opt_state), optax.tree.norm(g)

            return jax.lax.scan(mb, (params, opt_state), perm)

        (params, opt_state), gnorms = jax.lax.scan(epoch, (state.params, state.opt_state),
                                                   jax.random.split(k_perm, cfg.epochs))
        mode_return = (maybe_evaluate(k_eval, do_eval, evaluate_mode, params)
                       if deterministic_eval else jnp.float32(jnp.nan))
        info = Info(jnp.mean(r), maybe_evaluate(k_eval, do_eval, evaluate, params),
                    jnp.mean(gnorms), jnp.float32(0.0), mode_return)
        return PPOState(params, opt_state, final), info

    return Algorithm(init, step)
