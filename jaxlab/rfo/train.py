"""RFO and the Gaussian analytic-policy-gradient (APG) baseline: training by backpropagating
the return of a short MJX rollout through the policy and the dynamics.

Per update: reset ``num_envs`` environments (or, with
``episode_length`` > 0, continue them), roll out ``horizon`` steps in a ``lax.scan``
(vmapped over environments), and minimise

    L(theta) = -mean_envs sum_t r_t / horizon
               + stability_coef * CFM(buffered past (obs, actions))
               + exploration_coef * CFM(uniform)

or, with ``critic=True`` (SHAC Eq. 5), -mean_envs [sum_t gamma^t r_t + gamma^H V(s_H)] / H
with V fitted to TD(lambda) targets after each update (``critic.py``),

with ``optax.clip_by_global_norm`` (or, ``grad_clip_mode="elementwise"``, ``optax.clip``)
+ Adam(b1=0.7, b2=0.95) at ``lr * lr_decay^update``.

Provenance. The paper (arXiv 2602.03501): the flow policy differentiated through the ODE
and the dynamics, the stability regulariser as CFM toward past policies' data (kept in a
FIFO ``buffer.Buffer`` carried in ``RFOState``, filled after each update from that
rollout's decision-step pairs, sampled uniformly with the step's key, so update u reads
only the data of updates < u) and the exploration regulariser. Reference code: brax APG
(``brax/training/agents/apg/train.py``: -mean reward of a rollout from fresh resets,
auto-reset, Adam(0.7, 0.95), element-wise clip and an exponential lr schedule in recent
versions; the stored snapshot we read, commit 034c6da, still has plain Adam and a
global-norm clip) and SHAC (Xu et al. 2022: Eq. 5 short-horizon loss, TD(lambda) critic,
Polyak target). Ours: the MJX environment layer, chunked flows, buffer sizes, the decay
rate 0.997 of the experiment's ``apg``, and no observation normaliser in either baseline.
The critic-free brax-style APG is ``policy="gaussian", critic=False, episode_length=0,
grad_clip_mode="elementwise", lr_decay < 1`` (the experiment's ``apg``); the Gaussian
policy with ``critic=True`` is SHAC with a Gaussian policy (``shac_gaussian``).

Termination (tasks with ``task.terminates``, i.e. hopper): inside a training rollout an
environment whose step sets ``done`` is replaced by a fresh one drawn at the start of the
update (brax ``AutoResetWrapper``; no gradient crosses the reset); the SHAC loss restarts
its discount after a termination and bootstraps only the segment still running at the
horizon (SHAC's ``compute_actor_loss``: a terminal state has value 0); the critic's
TD(lambda) targets get ``done`` as the termination mask. Evaluation returns
(``rollout``) count rewards up to and including the terminating step. Tasks that never
terminate take the unmasked code paths (same numbers as before termination existed).
A task that can fail (``task.resets_on_done`` without ``terminates``: ``soft_quadruped``,
whose ``envs.step`` ends the episode of a non-finite state with reward 0) has its failed
environments reset in the same way and its evaluation returns stopped there, while the
loss and the critic keep the unmasked paths (a failed step is bootstrapped like a
time-limit reset): selections only, so its healthy rollouts are unchanged bit for bit.
After a mid-horizon reset the step counter restarts, so such an episode's time limit falls
at the first update boundary at or after ``episode_length`` steps. The flow policy's actions come
from the Euler ODE of ``flow.py`` (``chunk`` > 1: one chunk of actions per ``chunk``
steps, executed open loop); the Gaussian baseline uses tanh(mu(obs) + sigma * eps) with
a learned state-independent log sigma. The regularisers apply to the flow only.
``make_trainer(task, cfg)`` returns an ``Algorithm``: ``init(key) -> RFOState`` draws the
policy and critic weights and the first environments from ``key`` (so seeds differ in
their initial weights), ``step(key, state) -> (RFOState, Info)`` is one update. A whole
run is ``trainers.run(key, trainer, num_updates)``: one ``lax.scan``, vmappable over seeds.

Checks (eager, at the Python boundary, on concrete values; traced values pass):
  * ``check_config`` (run by ``make_trainer``): ``policy`` in {flow, gaussian}; sizes
    positive integers; ``horizon`` divisible by ``chunk``; ``eval_horizon`` >= ``chunk``;
    ``episode_length`` 0 or a multiple of ``horizon``; ``lr``, ``grad_clip``,
    ``critic_lr`` > 0; ``stability_coef``, ``exploration_coef`` >= 0; ``gamma`` in (0, 1];
    ``buffer_size`` a positive int; ``grad_clip_mode`` in {global_norm, elementwise};
    ``lr_decay`` a real number (Python or NumPy int / float) in (0, 1];
    ``td_lambda``, ``target_alpha`` in [0, 1]; every float finite.
  * ``reset_envs`` / ``rollout`` / ``rollout_from``: ``num_envs`` and ``horizon``
    positive integers, ``horizon`` a multiple of ``cfg.chunk``.
Inside the compiled update nothing is checked: non-finite gradient entries (known near
contacts) are zeroed before the optimizer step, and ``Info.grad_norm`` (the
norm before zeroing) is then non-finite: that is the flag the caller turns into an error.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxlab.core import validation
from jaxlab.core.types import Algorithm, Array, PRNGKey
from jaxlab.rfo import buffer as replay
from jaxlab.rfo import critic, envs, flow, regularizers

GRAD_CLIP_MODES = ("global_norm", "elementwise")


class TrainConfig(NamedTuple):
    """Hyperparameters of one RFO / APG run.

    ``episode_length`` 0 resets every environment before each update (brax APG style);
    a positive value (a multiple of ``horizon``) carries the environments across updates
    and resets them every ``episode_length`` steps, so successive short horizons walk
    through whole episodes (SHAC style). ``critic`` closes each horizon with a learned
    value ``gamma^H V(s_H)`` trained on TD(lambda) targets (``critic.py``); the target
    critic moves as target <- target_alpha * target + (1 - target_alpha) * online after
    each update (SHAC's alpha = 0.2, ``critic.polyak``). ``buffer_size`` rows of past
    (obs, action chunk) pairs feed the stability regulariser (``buffer.py``; carried only
    when ``stability_coef`` > 0). ``grad_clip_mode`` "global_norm" clips the gradient's
    global norm to ``grad_clip``; "elementwise" clips each entry to [-grad_clip, grad_clip]
    (brax APG). The policy's learning rate is ``lr * lr_decay ** update``.
    """

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
    episode_length: int = 0
    critic: bool = False
    gamma: float = 0.99
    td_lambda: float = 0.95
    critic_lr: float = 2e-3
    critic_iters: int = 8
    target_alpha: float = 0.2
    buffer_size: int = 4096
    grad_clip_mode: str = "global_norm"  # or "elementwise" (brax APG: optax.clip(1.0))
    lr_decay: float = 1.0  # lr * lr_decay^update (brax APG's exponential schedule)


class GaussianPolicy(nnx.Module):
    """tanh(mu(obs) + sigma * eps) with a learned state-independent log sigma (APG)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int, *, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(obs_dim, hidden, rngs=rngs)
        self.l2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.mu = nnx.Linear(hidden, act_dim, rngs=rngs, kernel_init=nnx.initializers.normal(1e-3))
        self.log_std = nnx.Param(jnp.full((act_dim,), -0.5, jnp.float32))

    def __call__(self, obs: Array, key: PRNGKey) -> Array:
        """obs [B, O] -> actions [B, 1, A] in [-1, 1]."""
        h = jax.nn.silu(self.l2(jax.nn.silu(self.l1(obs))))
        eps = jax.random.normal(key, (obs.shape[0], self.log_std.shape[0]))
        return jnp.tanh(self.mu(h) + jnp.exp(self.log_std[...]) * eps)[:, None, :]

    def mode(self, obs: Array) -> Array:
        """The deterministic action tanh(mu(obs)) (noise 0): obs [B, O] -> [B, 1, A]."""
        h = jax.nn.silu(self.l2(jax.nn.silu(self.l1(obs))))
        return jnp.tanh(self.mu(h))[:, None, :]


def check_finite_fields(cfg, names, prefix: str) -> None:
    """Raises ValueError if a float field of ``cfg`` is NaN or +-inf (a generic check kept
    here privately; ``validation.check_fields`` lets +inf through its one-sided ranges)."""
    for name in names:
        value = getattr(cfg, name)
        if isinstance(value, float) and not np.isfinite(value):
            raise ValueError(f"`{prefix}.{name}` must be finite, got {value!r}.")


def check_config(cfg: TrainConfig) -> None:
    """Raises ValueError naming the first out-of-range field of ``cfg`` (module doc)."""
    if cfg.policy not in ("flow", "gaussian"):
        raise ValueError(f"`policy` must be 'flow' or 'gaussian', got {cfg.policy!r}.")
    for name in ("num_envs", "horizon", "num_updates", "chunk", "ode_steps", "eval_horizon",
                 "hidden"):
        validation.check_positive_int(name, getattr(cfg, name))
    if cfg.horizon % cfg.chunk:
        raise ValueError(f"`horizon`={cfg.horizon} must be divisible by `chunk`={cfg.chunk}.")
    if cfg.eval_horizon < cfg.chunk:
        raise ValueError(f"`eval_horizon`={cfg.eval_horizon} must be >= `chunk`={cfg.chunk}.")
    if cfg.policy == "gaussian" and cfg.chunk != 1:
        raise ValueError("the Gaussian baseline acts per step: `chunk` must be 1.")
    if cfg.episode_length < 0 or cfg.episode_length % cfg.horizon:
        raise ValueError(f"`episode_length`={cfg.episode_length} must be 0 or a positive "
                         f"multiple of `horizon`={cfg.horizon}.")
    if not 0.0 < cfg.gamma <= 1.0:
        raise ValueError(f"`gamma` must lie in (0, 1], got {cfg.gamma}.")
    if cfg.critic:
        validation.check_positive_int("critic_iters", cfg.critic_iters)
    validation.check_positive_int("buffer_size", cfg.buffer_size)
    validation.check_one_of("grad_clip_mode", cfg.grad_clip_mode, GRAD_CLIP_MODES)
    if (not isinstance(cfg.lr_decay, int | float | np.integer | np.floating)
            or isinstance(cfg.lr_decay, bool)):
        raise TypeError(f"`lr_decay` must be a real number in (0, 1], got "
                        f"{type(cfg.lr_decay).__name__} {cfg.lr_decay!r}.")
    validation.check_in_range("lr_decay", cfg.lr_decay, 0.0, 1.0, low_inclusive=False)
    validation.check_fields(cfg, {
        "lr": validation.POSITIVE, "grad_clip": validation.POSITIVE,
        "critic_lr": validation.POSITIVE, "stability_coef": validation.NON_NEGATIVE,
        "exploration_coef": validation.NON_NEGATIVE, "td_lambda": validation.UNIT_CLOSED,
        "target_alpha": validation.UNIT_CLOSED,
    }, prefix="TrainConfig")
    check_finite_fields(cfg, ("lr", "grad_clip", "critic_lr", "stability_coef",
                              "exploration_coef"), "TrainConfig")


def network(make: Callable[[nnx.Rngs], nnx.Module]):
    """(graphdef, init) of the module ``make(rngs)``: the static graphdef (taken abstractly,
    no weights drawn) and ``init(key) -> params`` (weights drawn from ``key``; jit / vmap
    it)."""
    graphdef = nnx.split(nnx.eval_shape(lambda: make(nnx.Rngs(0))))[0]
    return graphdef, lambda key: nnx.split(make(nnx.Rngs(key)))[1]


class Policy(NamedTuple):
    """A policy network of a ``TrainConfig``.

    Attributes:
      graphdef: the static nnx graph.
      init: ``init(key) -> params``.
      act: ``act(key, params, obs [B, O]) -> actions [B, chunk, A]`` in [-1, 1].
      mode: ``mode(params, obs [B, O]) -> actions [B, chunk, A]``: the deterministic
        action (the Gaussian's tanh(mean); the flow from zero base noise).
    """

    graphdef: nnx.GraphDef
    init: Callable[[PRNGKey], nnx.State]
    act: Callable[[PRNGKey, nnx.State, Array], Array]
    mode: Callable[[nnx.State, Array], Array] | None = None


def make_policy(task: envs.Task, cfg: TrainConfig) -> Policy:
    """The flow policy (``cfg.policy == "flow"``) or the Gaussian APG policy of ``cfg``."""
    if cfg.policy == "flow":
        fcfg = flow.FlowConfig(task.obs_dim, task.act_dim, cfg.chunk, cfg.ode_steps, cfg.hidden)
        flow.check_config(fcfg)
        graphdef, init = network(lambda rngs: flow.VelocityField(fcfg, rngs=rngs))
        return Policy(graphdef, init, lambda k, p, o: flow.sample(k, graphdef, p, fcfg, o),
                      lambda p, o: flow.mode(graphdef, p, fcfg, o))
    graphdef, init = network(lambda rngs: GaussianPolicy(task.obs_dim, task.act_dim, cfg.hidden,
                                                         rngs=rngs))
    return Policy(graphdef, init, lambda k, p, o: nnx.merge(graphdef, p)(o, k),
                  lambda p, o: nnx.merge(graphdef, p).mode(o))


def reset_envs(key: PRNGKey, task: envs.Task, num_envs: int) -> envs.EnvState:
    """``num_envs`` fresh environment states (a batched ``EnvState``)."""
    validation.check_positive_int("num_envs", num_envs)
    return jax.vmap(lambda k: envs.reset(k, task))(jax.random.split(key, num_envs))


def replace_envs(mask: Array, fresh: envs.EnvState, state: envs.EnvState) -> envs.EnvState:
    """Batched ``state`` with the environments where ``mask`` [E] is true taken from
    ``fresh`` (no gradient flows from the replaced environments)."""
    return jax.tree.map(
        lambda f, s: jnp.where(mask.reshape(mask.shape + (1,) * (s.ndim - 1)), f, s),
        fresh, state)


def reset_finished(key: PRNGKey, task: envs.Task, state: envs.EnvState,
                   episode_length: int) -> envs.EnvState:
    """Batched ``state`` with every environment whose step count reached ``episode_length``
    replaced by a fresh reset."""
    fresh = reset_envs(key, task, state.t.shape[0])
    return replace_envs(state.t >= episode_length, fresh, state)


def auto_reset(state: envs.EnvState, fresh: envs.EnvState) -> envs.EnvState:
    """brax ``AutoResetWrapper``: environments whose last step terminated (``done``) restart
    from ``fresh``."""
    return replace_envs(state.done > 0, fresh, state)


def episode_mask(dones: Array) -> Array:
    """[T, E] 1.0 up to and including each environment's first termination, 0.0 after."""
    alive = jnp.concatenate([jnp.ones_like(dones[:1]), 1.0 - dones[:-1]], 0)
    return jnp.cumprod(alive, axis=0)


def segment_discounts(dones: Array, gamma: float) -> tuple[Array, Array]:
    """Discounts of the SHAC loss (Eq. 5 per episode segment) with terminations ``dones``.

    w_t = gamma^(t - b_t), b_t the first step of the segment holding step t (0, or the step
    after the last termination before t); the bootstrap weight at the horizon is
    gamma^(H - b_H).

    Args:
      dones: [H, E] 0/1 termination flags of the H steps.
      gamma: discount.

    Returns:
      (w [H, E], bootstrap weights [E]).
    """
    def one(disc, d):
        return jnp.where(d > 0, 1.0, disc * gamma), disc

    boot, w = jax.lax.scan(one, jnp.ones_like(dones[0]), dones)
    return w, boot


def rollout_from(key: PRNGKey, task: envs.Task, cfg: TrainConfig, policy: Policy, params,
                 state: envs.EnvState, horizon: int, fresh: envs.EnvState | None = None,
                 deterministic: bool = False):
    """Differentiable vmapped rollout of ``horizon`` steps from batched ``state``.

    With ``fresh`` (a batched ``EnvState``) and a terminating task, an environment whose
    step sets ``done`` continues from its ``fresh`` state (``auto_reset``); otherwise it
    continues from the terminal state. ``deterministic`` acts with ``policy.mode`` (the
    keys are drawn as without it, and unused).

    Returns:
      (final state, rewards [horizon, E], obs at every step [horizon + 1, E, O] (after a
       reset, the fresh observation), obs at decision steps [horizon / chunk, E, O], actions
       [horizon / chunk, E, chunk, A], dones [horizon, E]).
    """
    _check_horizon(horizon, cfg.chunk)
    step = jax.vmap(lambda s, a: envs.step(task, s, a))

    def decision(state, k):
        acts = (policy.mode(params, state.obs) if deterministic
                else policy.act(k, params, state.obs))  # [E, H, A]
        obs = state.obs

        def inner(s, a):
            s1, r = step(s, a)
            done = s1.done
            if fresh is not None and task.resets_on_done:
                s1 = auto_reset(s1, fresh)
            return s1, (r, s.obs, done)

        state, (rewards, step_obs, dones) = jax.lax.scan(inner, state,
                                                         jnp.swapaxes(acts, 0, 1))
        return state, (rewards, step_obs, obs, acts, dones)

    final, (rewards, step_obs, obs, acts, dones) = jax.lax.scan(
        decision, state, jax.random.split(key, horizon // cfg.chunk))
    e = rewards.shape[2]
    all_obs = jnp.concatenate([step_obs.reshape(horizon, e, -1), final.obs[None]], 0)
    return (final, rewards.reshape(horizon, e), all_obs, obs, acts,
            dones.reshape(horizon, e))


def _check_horizon(horizon, chunk) -> None:
    validation.check_positive_int("horizon", horizon)
    if horizon % chunk:
        raise ValueError(f"`horizon`={horizon} must be a multiple of `cfg.chunk`={chunk}.")


def rollout(key: PRNGKey, task: envs.Task, cfg: TrainConfig, policy: Policy, params,
            num_envs: int, horizon: int, deterministic: bool = False):
    """Differentiable vmapped rollout from fresh resets (one episode per environment);
    ``deterministic`` acts with the policy's mode from the same resets.

    Returns:
      (rewards [horizon, num_envs] (for a terminating task, 0 after each environment's
       terminating step: ``sum(rewards, 0)`` is the episode return), obs at decision steps
       [horizon / chunk, num_envs, O], actions [horizon / chunk, num_envs, chunk, A]).
    """
    _check_horizon(horizon, cfg.chunk)
    k_reset, k_act = jax.random.split(key)
    state = reset_envs(k_reset, task, num_envs)
    _, rewards, _, obs, acts, dones = rollout_from(k_act, task, cfg, policy, params, state,
                                                   horizon, deterministic=deterministic)
    if task.resets_on_done:
        rewards = jnp.where(episode_mask(dones) > 0, rewards, 0.0)
    return rewards, obs, acts


class RFOState(NamedTuple):
    """State of an RFO / APG run (add a leading seed axis when vmapped).

    Attributes:
      params: policy parameters (flow velocity field or Gaussian MLP).
      opt_state: the policy's optax state.
      env_state: the carried environments, a batched ``EnvState`` [num_envs].
      critic_params: critic parameters (``None`` without a critic).
      target_params: the Polyak target critic (``None`` without a critic).
      critic_opt_state: the critic's optax state (``None`` without a critic).
      buffer: the ``buffer.Buffer`` of past (obs, action chunk) pairs for the stability
        regulariser (``None`` when ``stability_coef`` is 0).
    """

    params: nnx.State
    opt_state: optax.OptState
    env_state: envs.EnvState
    critic_params: nnx.State | None
    target_params: nnx.State | None
    critic_opt_state: optax.OptState | None
    buffer: replay.Buffer | None = None


class Info(NamedTuple):
    """Per update (scalars; [num_updates] when scanned): mean training reward per step,
    eval return, policy grad norm (before zeroing non-finite entries and clipping; non-finite
    flags a bad gradient), critic loss (0 without a critic), and the eval return of the
    policy's mode (deterministic actions from the same resets; NaN unless the trainer was
    made with ``deterministic_eval=True``)."""

    train_return: Array
    eval_return: Array
    grad_norm: Array
    critic_loss: Array
    eval_mode_return: Array = float("nan")


def maybe_evaluate(key: PRNGKey, do_eval, evaluate: Callable, params) -> Array:
    """``evaluate(key, params)`` when ``do_eval``, else NaN (no evaluation rollout is run).

    A Python bool decides at trace time; a traced bool goes through ``lax.cond``, which stays
    a branch (the rollout is skipped) as long as the flag is not batched, e.g. the update
    index of ``trainers.scan_steps`` under a vmap over seeds.
    """
    if isinstance(do_eval, bool):
        return evaluate(key, params) if do_eval else jnp.float32(jnp.nan)
    return jax.lax.cond(do_eval, evaluate, lambda k, p: jnp.float32(jnp.nan), key, params)


def env_steps_per_update(cfg: TrainConfig) -> int:
    """Environment steps one update consumes (the evaluation rollout is not counted)."""
    return cfg.num_envs * cfg.horizon


def make_trainer(task: envs.Task, cfg: TrainConfig, *,
                 deterministic_eval: bool = False) -> Algorithm:
    """RFO (``cfg.policy == "flow"``) or Gaussian APG on ``task`` (module doc).

    Args:
      task: the task.
      cfg: the run's config.
      deterministic_eval: also evaluate the policy's mode (``Policy.mode``) on the
        evaluation's resets, into ``Info.eval_mode_return``; the stochastic evaluation
        (``Info.eval_return``) is computed as without it, from the same key.

    Returns:
      ``Algorithm(init, step)``: ``init(key) -> RFOState`` draws the policy and critic
      weights and the first ``num_envs`` environments from ``key``;
      ``step(key, state, do_eval=True) -> (RFOState, Info)`` is one update; its
      ``Info.eval_return`` is NaN when ``do_eval`` is false (``maybe_evaluate``). Both are
      pure (jit / vmap).

    Raises:
      ValueError: ``check_config`` fails.
    """
    check_config(cfg)
    policy = make_policy(task, cfg)
    opt = make_optimizer(cfg)
    c_graphdef, c_init = network(lambda rngs: critic.ValueNet(task.obs_dim, cfg.hidden,
                                                              rngs=rngs))
    value = critic.value_fn(c_graphdef)
    c_opt = optax.chain(optax.clip_by_global_norm(cfg.grad_clip),
                        optax.adam(cfg.critic_lr, b1=0.7, b2=0.95))
    discounts = cfg.gamma ** jnp.arange(cfg.horizon, dtype=jnp.float32)
    uses_buffer = cfg.policy == "flow" and cfg.stability_coef > 0

    def loss_fn(params, target_params, env_state, fresh, buf, key):
        k_roll, k_stab, k_expl = jax.random.split(key, 3)
        final, rewards, all_obs, obs, acts, dones = rollout_from(
            k_roll, task, cfg, policy, params, env_state, cfg.horizon, fresh)
        ret = jnp.mean(jnp.sum(rewards, 0)) / cfg.horizon
        if cfg.critic and task.terminates:
            # SHAC Eq. 5 per episode segment: the discount restarts after a termination and
            # only the segment still running at the horizon is closed by the target critic.
            w, w_boot = segment_discounts(dones, cfg.gamma)
            boot = w_boot * value(target_params, final.obs)
            loss = -jnp.mean(jnp.sum(w * rewards, 0) + boot) / cfg.horizon
        elif cfg.critic:
            # SHAC Eq. 5: discounted short-horizon return closed by the target critic.
            boot = cfg.gamma ** cfg.horizon * value(target_params, final.obs)
            loss = -jnp.mean(discounts @ rewards + boot) / cfg.horizon
        else:
            loss = -ret
        o = obs.reshape(-1, obs.shape[-1])
        a = acts.reshape(-1, cfg.chunk, task.act_dim)
        if uses_buffer:
            # stability: CFM toward past policies' pairs from the buffer (this rollout's
            # pairs enter it only after this update).
            loss += cfg.stability_coef * stability_term(k_stab, policy.graphdef, params, buf,
                                                        o.shape[0])
        if cfg.policy == "flow" and cfg.exploration_coef:
            loss += cfg.exploration_coef * regularizers.exploration_loss(
                k_expl, policy.graphdef, params, o, (cfg.chunk, task.act_dim))
        aux = (ret, final, jax.lax.stop_gradient(rewards), jax.lax.stop_gradient(all_obs),
               dones, jax.lax.stop_gradient(o), jax.lax.stop_gradient(a))
        return loss, aux

    def fit_critic(c_params, target_params, c_opt_state, rewards, all_obs, dones):
        targets = critic.td_lambda_targets(rewards, value(target_params, all_obs), cfg.gamma,
                                           cfg.td_lambda,
                                           termination=dones if task.terminates else None)

        def c_loss(p):
            return jnp.mean((value(p, all_obs[:-1]) - targets) ** 2)

        def it(carry, _):
            p, s = carry
            loss, g = jax.value_and_grad(c_loss)(p)
            upd, s = c_opt.update(g, s, p)
            return (optax.apply_updates(p, upd), s), loss

        (c_params, c_opt_state), losses = jax.lax.scan(it, (c_params, c_opt_state), None,
                                                       length=cfg.critic_iters)
        return c_params, critic.polyak(target_params, c_params, cfg.target_alpha), c_opt_state, \
            losses[-1]

    def evaluate(key, params, deterministic=False):
        rewards, _, _ = rollout(key, task, cfg, policy, params, cfg.num_envs,
                                cfg.eval_horizon - cfg.eval_horizon % cfg.chunk,
                                deterministic=deterministic)
        return jnp.mean(jnp.sum(rewards, 0))

    def evaluate_mode(key, params):
        return evaluate(key, params, deterministic=True)

    def init(key: PRNGKey) -> RFOState:
        k_policy, k_critic, k_env = jax.random.split(key, 3)
        params = policy.init(k_policy)
        env_state = reset_envs(k_env, task, cfg.num_envs)
        buf = (replay.init(cfg.buffer_size, task.obs_dim, cfg.chunk, task.act_dim)
               if uses_buffer else None)
        if not cfg.critic:
            return RFOState(params, opt.init(params), env_state, None, None, None, buf)
        c_params = c_init(k_critic)
        return RFOState(params, opt.init(params), env_state, c_params, c_params,
                        c_opt.init(c_params), buf)

    def step(key: PRNGKey, state: RFOState, do_eval=True) -> tuple[RFOState, Info]:
        k_loss, k_eval, k_reset = jax.random.split(key, 3)
        if cfg.episode_length:
            env_state = reset_finished(k_reset, task, state.env_state, cfg.episode_length)
        else:
            env_state = reset_envs(k_reset, task, cfg.num_envs)
        # Fresh states for mid-horizon terminations (a key of their own: the other tasks'
        # key streams are unchanged).
        fresh = (reset_envs(jax.random.fold_in(k_reset, 1), task, cfg.num_envs)
                 if task.resets_on_done else None)
        (_, (ret, final, rewards, all_obs, dones, o, a)), grads = jax.value_and_grad(
            loss_fn, has_aux=True)(state.params, state.target_params, env_state, fresh,
                                   state.buffer, k_loss)
        gnorm = optax.tree.norm(grads)
        grads = jax.tree.map(lambda g: jnp.where(jnp.isfinite(g), g, 0.0), grads)
        upd, opt_state = opt.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, upd)
        c_params, target_params, c_opt_state = (state.critic_params, state.target_params,
                                                state.critic_opt_state)
        c_loss = jnp.float32(0.0)
        if cfg.critic:
            c_params, target_params, c_opt_state, c_loss = fit_critic(
                c_params, target_params, c_opt_state, rewards, all_obs, dones)
        final = jax.lax.stop_gradient(final)
        buf = replay.add(state.buffer, o, a) if uses_buffer else None
        new = RFOState(params, opt_state, final, c_params, target_params, c_opt_state, buf)
        mode_return = (maybe_evaluate(k_eval, do_eval, evaluate_mode, params)
                       if deterministic_eval else jnp.float32(jnp.nan))
        return new, Info(ret, maybe_evaluate(k_eval, do_eval, evaluate, params), gnorm, c_loss,
                         mode_return)

    return Algorithm(init, step)


def check_nonfinite_grad_share(grad_norm, limit: float, what: str = "run") -> float:
    """Fails a run whose share of updates with a non-finite policy gradient exceeds
    ``limit``.

    Non-finite gradient entries (near contacts) are zeroed inside the update, so a run goes
    on; ``Info.grad_norm`` (the norm before zeroing) is then non-finite for that update.
    This turns too many such updates into an error instead of a quietly degraded run
    (``config.max_nonfinite_grad_share`` of ``experiments/rfo.py``).

    Args:
      grad_norm: ``Info.grad_norm`` of the updates, any shape (e.g. [seeds, U]).
      limit: the largest allowed share in [0, 1] (1 never fails).
      what: names the run in the error.

    Returns:
      The share of non-finite entries.

    Raises:
      FloatingPointError: the share exceeds ``limit``.
      ValueError: ``limit`` outside [0, 1].

    Example:
      >>> import numpy as np
      >>> from jaxlab.rfo import train
      >>> train.check_nonfinite_grad_share(np.array([1.0, np.nan, 2.0, 3.0]), 0.5)
      0.25
    """
    validation.check_in_range("limit", limit, 0.0, 1.0)
    g = np.asarray(grad_norm)
    share = float(np.mean(~np.isfinite(g))) if g.size else 0.0
    if share > limit:
        raise FloatingPointError(
            f"{what}: {share:.1%} of updates ({int((~np.isfinite(g)).sum())} of {g.size}) had "
            f"non-finite policy gradients, more than the limit {limit:.1%} "
            "(max_nonfinite_grad_share); try a smaller lr, grad_clip or horizon.")
    return share


def make_optimizer(cfg: TrainConfig) -> optax.GradientTransformation:
    """The policy optimizer: clip (global norm, or element-wise as brax APG's
    ``optax.clip``), then Adam(b1=0.7, b2=0.95) at ``lr * lr_decay ** update``.

    Raises:
      ValueError / TypeError: ``cfg`` fails ``check_config`` (naming the field).
    """
    check_config(cfg)
    clip = (optax.clip(cfg.grad_clip) if cfg.grad_clip_mode == "elementwise"
            else optax.clip_by_global_norm(cfg.grad_clip))
    lr = (cfg.lr if cfg.lr_decay == 1.0 else
          optax.exponential_decay(cfg.lr, transition_steps=1, decay_rate=cfg.lr_decay))
    return optax.chain(clip, optax.adam(lr, b1=0.7, b2=0.95))


def stability_term(key: PRNGKey, graphdef, params, buf: replay.Buffer, batch: int) -> Array:
    """The stability regulariser: CFM (``regularizers.stability_loss``) toward ``batch``
    (obs, action chunk) pairs drawn uniformly from the buffer of past policies' data; 0 while
    the buffer is empty (the first update)."""
    k_sample, k_cfm = jax.random.split(key)
    obs, acts, nonempty = replay.sample(k_sample, buf, batch)
    loss = regularizers.stability_loss(k_cfm, graphdef, params, obs, acts)
    return jnp.where(nonempty, loss, 0.0)
