"""Experiment: return vs environment steps for RFO, RFO-chunked, Gaussian APG and PPO.

``train_and_evaluate(config, workdir)`` is what the binary, the suite, the notebook and the
tests call. For every (task, method) all seeds run as one jitted, vmapped program whose
update loop is a ``lax.scan``; the run is split into ``num_chunks`` chunks with an orbax
checkpoint after each, and a finished (task, method) is stored in ``runs/`` under a key of
(config, code version) and never redone, so an interrupted study resumes without losing
work. Methods get the same budget of environment steps. The seed axis is placed on the
``config.mesh_shape`` mesh when it divides. Also measures env steps/s of the vmapped MJX
rollout at several batch sizes.
"""

import functools
import json
import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from experiments.lib import checkpoint, plots, provenance, results, study, timing
from jaxlab.core import metrics, sharding
from jaxlab.rfo import envs, ppo, train

METHODS = ("rfo", "rfo_chunked", "apg", "ppo")


def method_config(config: ml_collections.ConfigDict, task: str, method: str):
    """(TrainConfig | PPOConfig, env steps per update) for ``method`` on ``task``."""
    c = config.common
    budget = int(config.task_env_steps.get(task, config.env_steps))
    if method == "ppo":
        cfg = ppo.PPOConfig(num_envs=c.num_envs, rollout_len=c.horizon,
                            num_updates=max(budget // (c.num_envs * c.horizon), 1),
                            epochs=config.ppo.epochs, minibatches=config.ppo.minibatches,
                            lr=config.ppo.lr, hidden=c.hidden, episode_length=c.episode_length,
                            eval_horizon=c.eval_horizon, gamma=c.gamma)
        return cfg, ppo.env_steps_per_update(cfg)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}.")
    chunk = config.rfo.chunk if method == "rfo_chunked" else 1
    flow_policy = method != "apg"
    cfg = train.TrainConfig(
        policy="flow" if flow_policy else "gaussian", num_envs=c.num_envs, horizon=c.horizon,
        num_updates=max(budget // (c.num_envs * c.horizon), 1), lr=c.lr, chunk=chunk,
        ode_steps=config.rfo.ode_steps, hidden=c.hidden,
        stability_coef=config.rfo.stability_coef if flow_policy else 0.0,
        exploration_coef=config.rfo.exploration_coef if flow_policy else 0.0,
        eval_horizon=c.eval_horizon, episode_length=c.episode_length, critic=c.critic,
        gamma=c.gamma)
    return cfg, train.env_steps_per_update(cfg)


def _make(task, method, cfg):
    return ppo.make_train(task, cfg) if method == "ppo" else train.make_train(task, cfg)


def run_method(config, task_name: str, method: str, workdir: str) -> dict:
    """Trains ``method`` on ``task_name`` for all seeds; returns per-update eval returns.

    The finished run is kept as ``workdir/runs/<task>_<method>_<key>.json`` with key =
    hash of (everything that determines it, code version): a changed setting (seeds, budget,
    any method hyperparameter) or changed code trains anew instead of reusing it.
    """
    cfg, per_update = method_config(config, task_name, method)
    n_chunks = min(config.num_chunks, cfg.num_updates)
    per_chunk = -(-cfg.num_updates // n_chunks)
    num_updates = per_chunk * n_chunks
    seed0 = config.seed + 1000 * config.tasks.index(task_name)
    ckpt_cfg = {"task": task_name, "method": method, "cfg": cfg._asdict(),
                "seeds": config.num_seeds, "seed": seed0, "chunks": n_chunks}
    path = os.path.join(workdir, "runs",
                        f"{task_name}_{method}_{provenance.unit_key(ckpt_cfg)}.json")
    if os.path.exists(path):
        logging.info("rfo: %s %s finished earlier with this config and code (%s)",
                     task_name, method, path)
        with open(path) as f:
            return json.load(f)
    task = envs.make_task(task_name)
    fns = _make(task, method, cfg._replace(num_updates=num_updates))
    keys = jax.random.split(jax.random.key(seed0), config.num_seeds)
    state = jax.jit(jax.vmap(fns.init))(keys)
    buf = jnp.zeros((config.num_seeds, num_updates), jnp.float32)
    carry = (state, buf, buf, buf)
    carry = sharding.shard_batch(carry, config.mesh_shape)

    def scan_chunk(st):
        return jax.lax.scan(fns.update, st, None, length=per_chunk)

    # out_shardings = input shardings: every chunk hits the same compiled program.
    shardings = jax.tree.map(lambda x: x.sharding, carry)

    @functools.partial(jax.jit, out_shardings=shardings)
    def chunk(c, i):
        st, ev, tr, gn = c
        st, m = jax.vmap(scan_chunk)(st)
        ev = jax.lax.dynamic_update_slice_in_dim(ev, m.eval_return, i * per_chunk, 1)
        tr = jax.lax.dynamic_update_slice_in_dim(tr, m.train_return, i * per_chunk, 1)
        gn = jax.lax.dynamic_update_slice_in_dim(gn, m.grad_norm, i * per_chunk, 1)
        return st, ev, tr, gn

    t0 = time.perf_counter()
    _, ev, tr, gn = study.run_resumable(
        lambda c, i: chunk(c, jnp.int32(i)), carry, n_chunks,
        checkpoint_dir=checkpoint.checkpoint_dir_for(workdir, ckpt_cfg),
        desc=f"{task_name} {method}", unit="env steps",
        units_per_chunk=config.num_seeds * per_chunk * per_update,
        log_fn=lambda i, c: "eval return "
        f"{sharding.to_host(c[1][:, (i + 1) * per_chunk - 1]).mean():.1f}")
    ev, tr, gn = sharding.to_host((ev, tr, gn))
    # Non-finite gradient entries (near contacts) are zeroed inside the update and show as a
    # non-finite pre-clip grad norm: counted per seed, reported, never silently averaged.
    bad_grads = (~np.isfinite(gn)).sum(axis=1)
    if bad_grads.any():
        logging.warning("rfo: %s %s: %d of %d updates had non-finite policy gradients "
                        "(zeroed before the step); per seed %s", task_name, method,
                        int(bad_grads.sum()), gn.size, bad_grads.tolist())
    if not np.all(np.isfinite(ev)):
        raise FloatingPointError(f"rfo: {task_name} {method}: non-finite eval returns "
                                 f"({int((~np.isfinite(ev)).sum())} entries).")
    out = {"task": task_name, "method": method,
           "env_steps": (per_update * np.arange(1, num_updates + 1)).tolist(),
           "eval_return": ev.tolist(), "train_reward": tr.tolist(),
           "nonfinite_grad_updates": bad_grads.tolist(),
           "wall_s": time.perf_counter() - t0, "config": cfg._asdict()}
    results.write_json(path, out)
    return out


def rollout_throughput(task_name: str, batch_sizes, horizon: int, repeats: int = 3) -> dict:
    """Env steps/s of a jitted vmapped MJX rollout (random actions) per batch size."""
    task = envs.make_task(task_name)
    step = jax.vmap(lambda s, a: envs.step(task, s, a))
    rates = {}
    for b in batch_sizes:
        @jax.jit
        def roll(key, b=b):
            k0, k1 = jax.random.split(key)
            s = train.reset_envs(task, k0, b)
            acts = jax.random.uniform(k1, (horizon, b, task.act_dim), minval=-1, maxval=1)
            return jax.lax.scan(lambda s, a: step(s, a), s, acts)[1]

        sec = timing.best_time(lambda roll=roll: roll(jax.random.key(0)), repeats=repeats)
        rates[str(b)] = b * horizon / sec
    base = rates[str(batch_sizes[0])]
    return {"task": task_name, "horizon": horizon, "env_steps_per_s": rates,
            "speedup_vs_smallest_batch": {k: v / base for k, v in rates.items()}}


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Runs every (task, method), measures rollout throughput, writes summary.json + PNGs."""
    train.validate_config(config)
    task_methods = config.get("task_methods", {})
    for m in {*config.methods, *(m for ms in task_methods.values() for m in ms)}:
        if m not in METHODS:
            raise ValueError(f"unknown method {m!r} in `config.methods`; choose from "
                             f"{METHODS}.")
    if config.num_seeds < 2:
        raise ValueError(f"`num_seeds` must be >= 2 for confidence intervals, got "
                         f"{config.num_seeds}.")
    runs = {t: {m: run_method(config, t, m, workdir) for m in task_methods.get(t, config.methods)}
            for t in config.tasks}
    summary = {"config": config.to_dict(), "final_eval_return": {}}
    for t, by_m in runs.items():
        summary["final_eval_return"][t] = {}
        for m, r in by_m.items():
            ev = np.asarray(r["eval_return"])
            k = max(1, ev.shape[1] // 10)  # mean of the last 10% of updates, per seed
            final = ev[:, -k:].mean(axis=1)
            mean, hw = metrics.mean_and_ci(final)
            summary["final_eval_return"][t][m] = {
                "mean": float(mean), "ci95": float(hw), "initial": float(ev[:, 0].mean()),
                "env_steps": int(r["env_steps"][-1]), "wall_s": r["wall_s"],
                "nonfinite_grad_updates": int(np.sum(r["nonfinite_grad_updates"]))}
            logging.info("%s %s: eval return %.1f +- %.1f after %d env steps", t, m, mean, hw,
                         r["env_steps"][-1])
    if config.throughput.task:
        summary["throughput"] = rollout_throughput(config.throughput.task,
                                                   tuple(config.throughput.batch_sizes),
                                                   config.throughput.horizon)
    results.write_summary(workdir, summary, config)
    _plot(runs, workdir)
    return summary


def _plot(runs, workdir):
    fig, axes = plots.figure(len(runs))
    for ax, (t, by_m) in zip(axes, runs.items(), strict=True):
        for m, r in by_m.items():
            mean, hw = metrics.mean_and_ci(np.asarray(r["eval_return"]))
            plots.line_with_band(ax, r["env_steps"], mean, hw, label=m)
        ax.set(xlabel="environment steps", ylabel="eval return", title=f"{t} (mean, 95% CI)")
        ax.legend(fontsize=8)
    seeds = {len(r["eval_return"]) for by_m in runs.values() for r in by_m.values()}
    plots.save(fig, os.path.join(workdir, "return_vs_env_steps.png"),
               caption=plots.t_band(max(seeds)) if len(seeds) == 1 else
               f"Line: mean over seeds ({sorted(seeds)} per run); band: 95% Student-t CI.")


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for results/REPORT.md."""
    rows = []
    final = summary["final_eval_return"]
    tasks = [t for t in summary["config"]["tasks"] if t in final]  # config order, also
    order = {m: i for i, m in enumerate(METHODS)}  # for summaries read back from JSON
    for t in tasks:
        by_m = dict(sorted(final[t].items(), key=lambda kv: order.get(kv[0], len(order))))
        cells = ", ".join(f"{m} {v['mean']:.1f} +- {v['ci95']:.1f}" for m, v in by_m.items())
        steps = max(v["env_steps"] for v in by_m.values())
        rows.append((f"{t}: final eval return at {steps} env steps (mean +- 95% CI)", cells))
    if "throughput" in summary:
        tp = summary["throughput"]
        rates = sorted(tp["env_steps_per_s"].items(), key=lambda kv: int(kv[0]))
        cells = ", ".join(f"B={b}: {r:.0f}" for b, r in rates)
        rows.append((f"{tp['task']}: vmapped MJX rollout env steps/s", cells))
    return rows
