"""Trained RFO / SHAC / APG / PPO policies kept after a run, and the gait they walk.

``keep(folder, task, cfg, params, ...)`` saves the final weights of every seed (one orbax
step with its ``trained_with.json`` record, ``experiments.lib.artifacts.export``) and
draws ``com.png``: the centre of mass's forward position and height along one episode of
each seed's policy, with its mode (deterministic actions) and with its sampling noise,
from the same reset state, so a reader sees whether the return is a gait, a lean or the
noise. ``restore(folder, task, cfg, seeds, unit_key)`` reads the weights back (checked against
the record). ``policy_trace`` is the closed-loop rollout behind the plot (chunked flows
execute each chunk open loop, as in training).

The study binary (``experiments/rfo.py``) calls ``keep`` for every unit when
``config.keep_policies`` is set, into ``<workdir>/policies/<task>_<method>/``.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxlab.core import validation
from jaxlab.rfo import envs, ppo, references, train

from .lib import artifacts, plots

CONTROL_DT = 0.02  # the soft quadruped's control period [s]


def policy_fns(task: envs.Task, cfg):
    """(init, act, mode) of ``cfg``'s policy: ``init(key) -> params``, ``act(key, params,
    obs [B, O]) -> [B, chunk, A]`` (with its sampling noise), ``mode(params, obs) -> [B,
    chunk, A]`` (deterministic); PPO's actions are clipped to the box, as the task gets
    them."""
    if isinstance(cfg, train.TrainConfig):
        pol = train.make_policy(task, cfg)
        return pol.init, pol.act, pol.mode
    if not isinstance(cfg, ppo.PPOConfig):
        raise TypeError(f"`cfg` must be a TrainConfig or a PPOConfig, got "
                        f"{type(cfg).__name__}.")
    graphdef, init = train.network(lambda rngs: ppo.ActorCritic(task.obs_dim, task.act_dim,
                                                                cfg.hidden, rngs=rngs))

    def act(key, params, obs):
        mean, log_std, _ = nnx.merge(graphdef, params)(obs)
        a = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape)
        return jnp.clip(a, -1.0, 1.0)[:, None, :]

    def mode(params, obs):
        return jnp.clip(nnx.merge(graphdef, params)(obs)[0], -1.0, 1.0)[:, None, :]

    return init, act, mode


def policy_trace(key, task: envs.Task, cfg, params, state: envs.EnvState, horizon: int,
                 deterministic: bool, trace_fn=None):
    """One episode of one policy from ``state``: (rewards [T], ``trace_fn`` (default: the
    soft quadruped's centre of mass) of the physics state at steps 0 .. T [T + 1, ...]);
    T is ``horizon`` rounded down to whole chunks."""
    validation.check_positive_int("horizon", horizon)
    _, act, mode = policy_fns(task, cfg)
    chunk = getattr(cfg, "chunk", 1)
    trace_fn = trace_fn or references.com_fn()

    def decision(s, k):
        acts = (mode(params, s.obs[None]) if deterministic else act(k, params, s.obs[None]))[0]

        def inner(s, a):
            s1, r = envs.step(task, s, a)
            return s1, (r, s1.done, trace_fn(s1.pipeline_state))

        return jax.lax.scan(inner, s, acts)

    _, (r, done, tr) = jax.lax.scan(decision, state,
                                    jax.random.split(key, horizon // chunk))
    r, done = r.reshape(-1), done.reshape(-1)
    tr = tr.reshape((-1,) + tr.shape[2:])
    alive = jnp.cumprod(jnp.concatenate([jnp.ones_like(done[:1]), 1.0 - done[:-1]]))
    first = trace_fn(state.pipeline_state)
    return jnp.where(alive > 0, r, 0.0), jnp.concatenate([first[None], tr], 0)


def com_traces(key, task: envs.Task, cfg, params, horizon: int) -> dict:
    """{"mode" | "sampled": (returns [seeds], COM [seeds, T + 1, 3])} of every seed's
    policy (``params`` with a leading seed axis) from one reset state drawn from ``key``."""
    k_reset, k_act = jax.random.split(key)
    state = envs.reset(k_reset, task)
    out = {}
    for name, det in (("mode", True), ("sampled", False)):
        fn = jax.jit(jax.vmap(lambda p, det=det: policy_trace(k_act, task, cfg, p, state,
                                                              horizon, det)))
        r, com = jax.device_get(fn(params))
        out[name] = (np.asarray(r).sum(axis=1), np.asarray(com))
    return out


def plot_com(path: str, task_name: str, method: str, traces: dict) -> str:
    """Forward COM displacement and height per seed, mode and sampled (``com_traces``)."""
    fig, axes = plots.figure(2)
    for name, (rets, com) in traces.items():
        style = "-" if name == "mode" else ":"
        for i in range(com.shape[0]):
            t = CONTROL_DT * np.arange(com.shape[1])
            label = f"seed {i}, {name} ({rets[i]:.1f})"
            axes[0].plot(t, 100 * (com[i, :, 0] - com[i, 0, 0]), style, label=label)
            axes[1].plot(t, 100 * com[i, :, 2], style, label=label)
    axes[0].set(xlabel="time [s]", ylabel="forward COM displacement [cm]",
                title=f"{task_name} {method}")
    axes[1].set(xlabel="time [s]", ylabel="COM height [cm]", title="COM height")
    axes[0].legend(fontsize=6)
    return plots.save(fig, path, caption="One episode per seed from one reset state: the "
                      "policy's mode (solid) and with its sampling noise (dotted); the "
                      "legend gives each episode's return.")


def keep(folder: str, task_name: str, cfg, params, *, unit_key: str, config: dict,
         horizon: int, key) -> dict:
    """Saves every seed's final ``params`` [seeds, ...] under ``folder`` and draws
    ``folder/com.png`` (module doc).

    Returns:
      {"weights": folder, "plot": the PNG, "return_mode": [seeds], "return_sampled":
      [seeds]} (the plotted episodes' returns).
    """
    artifacts.export(os.path.join(folder, "weights"), 0, params, unit_key, config)
    task = envs.make_task(task_name)
    traces = com_traces(key, task, cfg, params, horizon)
    method = os.path.basename(folder).removeprefix(f"{task_name}_")
    png = plot_com(os.path.join(folder, "com.png"), task_name, method, traces)
    return {"weights": os.path.join(folder, "weights"), "plot": png,
            "return_mode": traces["mode"][0], "return_sampled": traces["sampled"][0]}


def restore(folder: str, task_name: str, cfg, seeds: int, unit_key: str,
            config: dict | None = None):
    """The weights ``keep`` saved under ``folder`` ([seeds, ...] params), used only when
    their record holds ``unit_key`` and checked against its sha256s (and ``config`` when
    given); None when ``folder`` holds none."""
    task = envs.make_task(task_name)
    init, _, _ = policy_fns(task, cfg)
    template = jax.eval_shape(jax.vmap(init), jax.random.split(jax.random.key(0), seeds))
    return artifacts.restore_first([(os.path.join(folder, "weights"), unit_key)], template,
                                   f"{task_name} policies", config)
