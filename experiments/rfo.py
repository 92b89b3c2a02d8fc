"""RFO (and its regulariser ablations) vs baselines on MJX tasks: return vs env steps.

Methods (``METHODS``): ``rfo`` (flow policy, both regularisers, SHAC critic when
``common.critic``), ``rfo_chunked`` (the same with action chunks), the ablations
``rfo_none`` / ``rfo_stability`` / ``rfo_exploration`` (``rfo`` with no regulariser /
only the buffer-based stability term / only the exploration term; ``rfo`` is "both"),
``shac_gaussian`` (a Gaussian policy trained by the same short-horizon loss with the SHAC
critic: SHAC with a Gaussian policy, called "apg" formerly), ``apg`` (critic-free
brax-style APG: Gaussian policy, -mean reward of a whole ``episode_length`` rollout from
fresh resets, element-wise clip, Adam(0.7, 0.95), exponentially decayed lr) and ``ppo``.

  python -m experiments.rfo --config=experiments/configs/rfo.py:quick --workdir=results/rfo

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. One unit per (task, method), named ``<task>_<method>`` and keyed by the
method config that determines it (``run_spec``): all seeds as one jitted, vmapped program
whose updates are a ``lax.scan``, split into ``num_chunks`` chunks through the unit's
resumable runner, so an interrupted study resumes and a finished (task, method) is never
redone while its spec and the code are unchanged. Seeds are the test items of the
task's key (``protocol.item_keys(task_key(config, task), "test", i)``), so seeds differ
in their initial weights and every method on a task sees the same seed keys. Methods get
the same budget of environment steps (``rfo.contender_config``). The seed axis is placed
on the ``config.mesh_shape`` mesh when it divides. A last unit, ``throughput``, measures
env steps/s of the vmapped MJX rollout at several batch sizes.

The units run ``rfo.seed_program`` (the programs of ``rfo.train_seeds``) and the summary's
``comparison`` rows are ``protocol.analyse`` of the per-seed values: the summary's
comparison of a task and metric equals ``rfo.compare(task_key(config, task), task,
contenders=config.methods, seeds=config.num_seeds, settings=settings(config,
task))[metric]`` (``tests/rfo/test_compare.py``), without its seconds and records. The
declared ratio's interval uses the same bootstrap draws (``paired_ratio``).
"""

import os
import time
import zlib

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from jaxlab import rfo
from jaxlab.core import extras, loops, metrics, protocol, sharding
from jaxlab.core.types import PRNGKey
from jaxlab.rfo import envs, train

from . import common
from .configs import rfo as rfo_configs
from .lib import exported, plots, study, timing

METHODS = rfo.CONTENDERS
# Comparisons declared before any ablation run: RFO with both regularisers
# minus each ablation and each baseline, paired by seed (every method on a task sees the
# same seed keys), final eval return and eval-return AUC, paired bootstrap 95% CI over
# seeds (``protocol.analyse``, the last step of ``rfo.compare``). Reported for every pair
# present in a run; nothing else is compared in the summary.
DECLARED = tuple(("rfo", m) for m in METHODS if m != "rfo")
ABLATIONS = rfo.comparison.ABLATIONS
# Declared with the soft-body study: the ratio of mean final eval returns RFO / SHAC with a
# Gaussian policy (the paper reports ~2x on its soft quadruped), CI by the comparison's
# paired bootstrap (``paired_ratio``).
DECLARED_RATIOS = (("rfo", "shac_gaussian"),)
PAPER_RATIO = {"soft_quadruped": 2.0}  # the paper's RFO / strongest baseline, approximate


def settings(config: ml_collections.ConfigDict, task: str) -> rfo.Settings:
    """The ``rfo.Settings`` of ``task`` at ``config`` (what ``rfo.compare`` takes)."""
    c = config.common
    return rfo.Settings(
        env_steps=int(config.task_env_steps.get(task, config.env_steps)),
        num_envs=c.num_envs, horizon=c.horizon, lr=c.lr, hidden=c.hidden,
        eval_horizon=c.eval_horizon, episode_length=c.episode_length, critic=c.critic,
        gamma=c.gamma, chunk=config.rfo.chunk, ode_steps=config.rfo.ode_steps,
        stability_coef=config.rfo.stability_coef,
        exploration_coef=config.rfo.exploration_coef, buffer_size=config.rfo.buffer_size,
        apg_lr=config.apg.lr, apg_lr_decay=config.apg.lr_decay,
        apg_grad_clip=config.apg.grad_clip, ppo_epochs=config.ppo.epochs,
        ppo_minibatches=config.ppo.minibatches, ppo_lr=config.ppo.lr,
        chunks=config.num_chunks, eval_every=int(config.get("eval_every", 1)))


def method_config(config: ml_collections.ConfigDict, task: str, method: str):
    """(TrainConfig | PPOConfig, env steps per update) for ``method`` on ``task``
    (``rfo.contender_config``)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}.")
    return rfo.contender_config(method, settings(config, task))


def _chunking(config, cfg) -> tuple[int, int]:
    """(number of chunks, updates per chunk); the run has their product of updates."""
    return rfo.schedule(cfg.num_updates, config.num_chunks)[:2]


def eval_every(config, cfg) -> int:
    """Updates between evaluations: the largest divisor of the updates per chunk that is
    <= ``config.eval_every``, so every method's last update is evaluated and its
    evaluations are evenly spaced in env steps (the AUC is their mean); ``rfo.schedule``."""
    return rfo.schedule(cfg.num_updates, config.num_chunks, int(config.get("eval_every", 1)))[2]


def run_spec(config: ml_collections.ConfigDict, task: str, method: str) -> dict:
    """Everything that determines the (task, method) unit's result besides the code."""
    cfg, _ = method_config(config, task, method)
    spec = {"task": task, "method": method, "cfg": cfg._asdict(), "seeds": config.num_seeds,
            "seed": config.seed, "chunks": _chunking(config, cfg)[0],
            "eval_every": eval_every(config, cfg), "keys": "protocol.item_keys"}
    limit = config.get("max_nonfinite_grad_share", 1.0)
    if limit < 1.0:  # a limit can fail the unit: part of its key (1.0, never, is not)
        spec["max_nonfinite_grad_share"] = limit
    for flag in ("deterministic_eval", "keep_policies"):  # part of the key only when set
        if config.get(flag, False):
            spec[flag] = True
    return spec


def task_key(config: ml_collections.ConfigDict, task: str) -> jax.Array:
    """The key of ``task``'s comparison: ``config.seed`` folded with the task name (stable
    under reordering ``config.tasks``); ``rfo.compare(task_key(config, task), task, ...)``
    trains from the same seed keys as the binary."""
    return jax.random.fold_in(jax.random.key(config.seed), zlib.crc32(task.encode()))


def seed_keys(config: ml_collections.ConfigDict, task: str) -> jax.Array:
    """[num_seeds] run keys of ``task``: the test items of ``task_key``
    (``protocol.item_keys``); shared by every method on the task."""
    return protocol.item_keys(task_key(config, task), "test", np.arange(config.num_seeds))


def run_method(config: ml_collections.ConfigDict, task_name: str, method: str,
               run_chunks: loops.ChunkRunner = loops.run_chunks,
               keep_dir: str | None = None) -> dict:
    """Trains ``method`` on ``task_name`` for all seeds; returns per-update eval returns.

    The seeds run ``rfo.seed_program`` (the programs of ``rfo.train_seeds``, which
    ``rfo.compare`` runs) from ``seed_keys(config, task_name)``, in ``num_chunks`` chunks
    through ``run_chunks`` (the unit's resumable runner in the study; a plain loop by
    default).

    Evaluation (``eval_horizon`` steps on ``num_envs`` fresh environments) runs after every
    ``eval_every(config, cfg)``-th update only; its rollouts are not counted as env steps.

    Returns:
      {"task", "method", "env_steps" [U], "eval_env_steps" [E], "eval_every", "eval_return"
      [seeds, E], "train_reward" [seeds, U], "nonfinite_grad_updates" [seeds],
      "grad_norm" [seeds, U] (pre-clip policy gradient norms; non-finite: a zeroed
      update), "wall_s", "config"} (NumPy arrays; E = U / eval_every).

    With ``config.deterministic_eval`` each evaluation also runs the policies' modes
    ("eval_mode_return" [seeds, E]); with ``keep_dir`` the final weights of every seed
    and a plot of their centre-of-mass trajectories are kept there
    (``rfo_policies.keep``; "policies" holds the paths and the plotted returns).

    Raises:
      FloatingPointError: an eval return is non-finite.
    """
    cfg, _ = method_config(config, task_name, method)
    prog = rfo.seed_program(envs.make_task(task_name), cfg, chunks=config.num_chunks,
                            eval_every=int(config.get("eval_every", 1)),
                            deterministic_eval=bool(config.get("deterministic_eval", False)))
    keys = seed_keys(config, task_name)
    # The init and chunk programs are served from the exported-program cache
    # (``experiments.lib.exported``): a warm run neither traces nor lowers them.
    spec = run_spec(config, task_name, method)
    prefix = f"rfo.{task_name}_{method}"
    init = exported.load_or_export(prog.init, keys, name=f"{prefix}.init", key=spec)
    carry = sharding.shard_batch(init(keys), config.mesh_shape)
    # out_shardings = input shardings: every chunk hits the same compiled program.
    shardings = jax.tree.map(lambda x: x.sharding, carry)
    per_chunk = prog.per_chunk

    t0 = time.perf_counter()
    chunk = exported.load_or_export(prog.chunk, carry, jnp.int32(0), name=f"{prefix}.chunk",
                                    key=spec, out_shardings=shardings)
    carry = run_chunks(
        lambda c, i: chunk(c, jnp.int32(i)), carry, prog.chunks,
        desc=f"{task_name} {method}", unit="env steps",
        units_per_chunk=config.num_seeds * per_chunk * prog.steps_per_update,
        log_fn=lambda i, c: "eval return "
        f"{sharding.to_host(c[2][:, (i + 1) * per_chunk - 1]).mean():.1f}")
    curves = prog.curves(carry, sharding.to_host)
    gn = curves.grad_norm
    # Non-finite gradient entries (near contacts) are zeroed inside the update and show as a
    # non-finite pre-clip grad norm: counted per seed, reported, never silently averaged.
    bad_grads = (~np.isfinite(gn)).sum(axis=1)
    if bad_grads.any():
        logging.warning("rfo: %s %s: %d of %d updates had non-finite policy gradients "
                        "(zeroed before the step); per seed %s", task_name, method,
                        int(bad_grads.sum()), gn.size, bad_grads.tolist())
    train.check_nonfinite_grad_share(gn, config.get("max_nonfinite_grad_share", 1.0),
                                     f"rfo: {task_name} {method}")
    ev = curves.eval_return
    if not np.all(np.isfinite(ev)):
        raise FloatingPointError(f"rfo: {task_name} {method}: non-finite eval returns "
                                 f"({int((~np.isfinite(ev)).sum())} entries).")
    out = {"task": task_name, "method": method, "env_steps": curves.env_steps,
           "eval_env_steps": curves.eval_env_steps, "eval_every": prog.eval_every,
           "eval_return": ev, "train_reward": curves.train_return,
           "nonfinite_grad_updates": bad_grads, "grad_norm": np.asarray(gn, np.float32),
           "wall_s": time.perf_counter() - t0,
           "config": cfg._asdict()}
    if curves.eval_mode_return is not None:
        out["eval_mode_return"] = curves.eval_mode_return
    if keep_dir:
        from . import rfo_policies

        params = jax.device_get(sharding.to_host(carry[0].params))
        out["policies"] = rfo_policies.keep(
            os.path.join(keep_dir, f"{task_name}_{method}"), task_name, cfg, params,
            unit_key=str(spec), config=spec, horizon=cfg.eval_horizon,
            key=jax.random.fold_in(task_key(config, task_name), 3))
    return out


def _physics(backend: str):
    """brax's physics pipeline module: "mjx" (what the tasks train on) or "generalized"."""
    if backend == "mjx":
        extras.require("brax")
        from brax.mjx import pipeline
    elif backend == "generalized":
        extras.require("brax")
        from brax.generalized import pipeline
    else:
        raise ValueError(f"unknown `backend` {backend!r}; choose mjx or generalized.")
    return pipeline


def rollout_throughput(task_name: str, batch_sizes, horizon: int,
                       backends=("mjx",), repeats: int = 3) -> dict:
    """Env steps/s of a jitted vmapped rollout (random actions, the task's reward) per
    physics backend and batch size, forward only and forward + backward (the gradient of
    the summed reward with respect to every action, as RFO's update needs).

    Both backends step the same brax ``System`` (the task's MJCF, one solver iteration
    for MJX) from the task's reset distribution; each env step is ``task.n_frames``
    physics steps. Rates are of the best of ``repeats`` timed runs; ``spread_s`` holds
    those runs' spread (``timing.spread``).
    """
    task = envs.make_task(task_name)
    rates, spreads = {}, {}
    for backend in backends:
        pipe = _physics(backend)

        def env_step(ps, a, pipe=pipe):
            ps1 = jax.lax.scan(lambda p, _: (pipe.step(task.sys, p, a), None), ps, None,
                               length=task.n_frames)[0]
            return ps1, task.reward_fn(ps, ps1, a)

        def total_reward(acts, ps0, env_step=env_step):  # acts [H, B, A]
            def one(ps, a):
                return jax.vmap(env_step)(ps, a)
            return jax.lax.scan(one, ps0, acts)[1].sum()

        for mode in ("forward", "forward+backward"):
            for b in batch_sizes:
                @jax.jit
                def roll(key, b=b, mode=mode, pipe=pipe, total_reward=total_reward):
                    k0, k1 = jax.random.split(key)
                    q, qd = jax.vmap(lambda k: envs.initial_q_qd(k, task))(
                        jax.random.split(k0, b))
                    ps0 = jax.vmap(lambda q, qd: pipe.init(task.sys, q, qd))(q, qd)
                    acts = jax.random.uniform(k1, (horizon, b, task.act_dim), minval=-1,
                                              maxval=1)
                    if mode == "forward":
                        return total_reward(acts, ps0)
                    return jax.grad(total_reward)(acts, ps0)

                times = timing.times_interleaved(
                    {"roll": lambda roll=roll: roll(jax.random.key(0))}, repeats)["roll"]
                s = timing.spread(times)
                rates.setdefault(backend, {}).setdefault(mode, {})[str(b)] = b * horizon / s["min"]
                spreads.setdefault(backend, {}).setdefault(mode, {})[str(b)] = s
    base = rates[backends[0]]["forward"][str(batch_sizes[0])]
    return {"task": task_name, "horizon": horizon, "env_steps_per_s": rates,
            "spread_s": spreads, "repeats": repeats,
            "ratio_vs_mjx_forward_smallest_batch": {
                be: {mo: {k: v / base for k, v in r.items()} for mo, r in by.items()}
                for be, by in rates.items()}}


def _task_methods(config) -> dict[str, tuple[str, ...]]:
    """{task: methods} in config order."""
    per_task = config.get("task_methods", {})
    return {t: tuple(per_task.get(t, config.methods)) for t in config.tasks}


def _units(config: ml_collections.ConfigDict, workdir: str) -> list[study.Unit]:
    keep_dir = (os.path.join(workdir, "policies") if config.get("keep_policies", False)
                else None)
    units = [study.Unit(f"{t}_{m}",
                        lambda ctx, t=t, m=m: run_method(config, t, m, ctx.run_chunks,
                                                         keep_dir),
                        spec=run_spec(config, t, m))
             for t, ms in _task_methods(config).items() for m in ms]
    tp = config.throughput
    if tp.task:
        units.append(study.Unit(
            "throughput",
            lambda ctx: rollout_throughput(tp.task, tuple(tp.batch_sizes), tp.horizon,
                                           tuple(tp.get("backends", ("mjx",)))),
            spec={"throughput": tp.to_dict()}))
    return units


def _runs(config, out) -> dict:
    """{task: {method: unit result}} in config order."""
    return {t: {m: out[f"{t}_{m}"] for m in ms} for t, ms in _task_methods(config).items()}


def _final(run) -> np.ndarray:
    """[seeds] final eval return: the mean over the last 10% of evaluations, per seed
    (``rfo.final_return``)."""
    return rfo.final_return(run["eval_return"])


def _auc(run) -> np.ndarray:
    """[seeds] area under the learning curve per env step: the mean eval return over the
    evaluations (evenly spaced in env steps, the last at the end of training; ``rfo.auc``)."""
    return rfo.auc(run["eval_return"])


def bootstrap_key(config, task: str) -> jax.Array:
    """The key of ``task``'s bootstrap draws: ``rfo.compare``'s (``fold_in(task_key, 2)``)."""
    return jax.random.fold_in(task_key(config, task), 2)


def comparison(config, task: str, per_seed: dict, metric: str) -> dict | None:
    """The declared comparison of ``task`` (``protocol.analyse``, the last step of
    ``rfo.compare``, with ``rfo.compare``'s bootstrap key) over per-seed values
    ``{method: [seeds]}`` of ``metric`` (one of ``rfo.METRICS``), JSON-ready and without
    seconds; None when no declared pair is present or there is one seed."""
    pairs = [(a, b) for a, b in DECLARED if a in per_seed and b in per_seed]
    if not pairs or config.num_seeds < 2:
        return None
    out = protocol.analyse(bootstrap_key(config, task), per_seed, pairs=pairs, metric=metric,
                           higher_is_better=True)
    return out.to_dict(seconds=False)


def paired_ratio(key: PRNGKey, a, b, resamples: int = 2000) -> dict:
    """mean(a) / mean(b) for paired per-seed values, with a 95% percentile CI from the
    protocol's paired bootstrap (``protocol.analyse`` with ``ratio=True``: the draws
    ``metrics.bootstrap_indices(key, n, resamples)``, those of the comparison rows made
    with the same key).

    The ratio is defined only while mean(b) stays away from 0: ``"defined"`` is False
    (and the CI NaN) when a resample's mean(b) is <= 0, e.g. a rival whose returns
    straddle zero, where no ratio is meaningful.

    Returns:
      {"ratio", "ci_low", "ci_high", "seeds", "defined"}.
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise ValueError(f"`a` and `b` must be paired 1-D arrays of >= 2 seeds, got "
                         f"{a.shape} and {b.shape}.")
    d = protocol.analyse(key, {"a": a, "b": b}, ratio=True, resamples=resamples,
                         warn=False).differences[0]
    idx = np.asarray(metrics.bootstrap_indices(key, a.size, resamples))
    defined = bool(b.mean() > 0 and np.all(b[idx].mean(axis=1) > 0))
    lo, hi = (d.ratio_low, d.ratio_high) if defined else (np.nan, np.nan)
    return {"ratio": float(d.ratio), "ci_low": float(lo), "ci_high": float(hi),
            "seeds": int(a.size), "defined": defined}


def grad_norm_stats(grad_norm) -> dict:
    """What the pre-clip policy gradient norms of a run say about its gradients.

    Args:
      grad_norm: [seeds, U] norms per seed and update (non-finite: a zeroed update).

    Returns:
      {"median", "q10", "q90"} over all finite entries; "early_median" / "late_median"
      over the first / last quarter of the updates; "log10_spread": the mean over seeds
      of the standard deviation of log10 norms across updates (how erratic one seed's
      gradients are; 1 = a typical factor of 10 from update to update); "nonfinite_share".
    """
    g = np.asarray(grad_norm, np.float64)
    if g.ndim != 2 or g.shape[1] < 1:
        raise ValueError(f"`grad_norm` must be [seeds, updates], got shape {g.shape}.")
    ok = np.isfinite(g) & (g > 0)
    q = max(g.shape[1] // 4, 1)

    def quantile(x, m, p):
        return float(np.quantile(x[m], p)) if m.any() else float("nan")

    logs = np.where(ok, np.log10(np.where(ok, g, 1.0)), np.nan)
    spread = [float(np.nanstd(row)) for row in logs if np.isfinite(row).sum() > 1]
    return {"median": quantile(g, ok, 0.5), "q10": quantile(g, ok, 0.1),
            "q90": quantile(g, ok, 0.9), "early_median": quantile(g[:, :q], ok[:, :q], 0.5),
            "late_median": quantile(g[:, -q:], ok[:, -q:], 0.5),
            "log10_spread": float(np.mean(spread)) if spread else float("nan"),
            "nonfinite_share": float(np.mean(~np.isfinite(g)))}


def _summarize(config, out) -> dict:
    summary = {"config": config.to_dict(), "final_eval_return": {}, "auc_eval_return": {},
               "comparison": {}}
    for t, by_m in _runs(config, out).items():
        summary["final_eval_return"][t] = {}
        summary["auc_eval_return"][t] = {}
        finals = {m: _final(r) for m, r in by_m.items()}
        aucs = {m: _auc(r) for m, r in by_m.items()}
        for m, r in by_m.items():
            mean, hw = metrics.mean_and_ci(finals[m])
            summary["final_eval_return"][t][m] = {
                "mean": float(mean), "ci95": float(hw),
                "initial": float(np.asarray(r["eval_return"])[:, 0].mean()),
                "env_steps": int(r["env_steps"][-1]), "wall_s": float(r["wall_s"]),
                "nonfinite_grad_updates": int(np.sum(r["nonfinite_grad_updates"]))}
            if "eval_mode_return" in r:  # deterministic_eval: the policies' modes
                m_mean, m_hw = metrics.mean_and_ci(rfo.final_return(r["eval_mode_return"]))
                summary.setdefault("final_eval_mode_return", {}).setdefault(t, {})[m] = {
                    "mean": float(m_mean), "ci95": float(m_hw)}
            if "grad_norm" in r:
                summary.setdefault("grad_norm", {}).setdefault(t, {})[m] = grad_norm_stats(
                    r["grad_norm"])
            a_mean, a_hw = metrics.mean_and_ci(aucs[m])
            summary["auc_eval_return"][t][m] = {"mean": float(a_mean), "ci95": float(a_hw)}
            logging.info("%s %s: eval return %.1f +- %.1f (AUC %.1f) after %d env steps", t, m,
                         mean, hw, a_mean, r["env_steps"][-1])
        by_metric = {metric: comparison(config, t, per_seed, metric)
                     for metric, per_seed in zip(rfo.METRICS, (finals, aucs), strict=True)}
        if all(v is not None for v in by_metric.values()):
            summary["comparison"][t] = by_metric
        ratios = {f"{a} / {b}": {**paired_ratio(bootstrap_key(config, t), finals[a],
                                                finals[b]),
                                 "paper": PAPER_RATIO.get(t)}
                  for a, b in DECLARED_RATIOS
                  if a in finals and b in finals and len(finals[a]) == len(finals[b]) > 1}
        if ratios:
            summary.setdefault("ratio_final_eval_return", {})[t] = ratios
    if not summary["comparison"]:
        del summary["comparison"]
    if "throughput" in out:
        summary["throughput"] = out["throughput"]
    return summary


def _plot(config, summary, out, workdir):
    del summary
    runs = _runs(config, out)
    fig, axes = plots.figure(len(runs))
    for ax, (t, by_m) in zip(axes, runs.items(), strict=True):
        for m, r in by_m.items():
            mean, hw = metrics.mean_and_ci(np.asarray(r["eval_return"]))
            plots.line_with_band(ax, r.get("eval_env_steps", r["env_steps"]), mean, hw,
                                 label=m)
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
        auc = summary.get("auc_eval_return", {}).get(t)
        if auc:
            rows.append((f"{t}: area under the eval-return curve per env step (mean +- 95% CI)",
                         ", ".join(f"{m} {auc[m]['mean']:.1f} +- {auc[m]['ci95']:.1f}"
                                   for m in by_m if m in auc)))
        for key, what in (("final_return", "final eval return"),
                          ("auc", "eval-return AUC")):
            comp = summary.get("comparison", {}).get(t, {}).get(key)
            if comp:
                rows.append((f"{t}: declared paired differences of {what} "
                             f"({comp['test_items']} seeds, paired bootstrap 95% CI)",
                             ", ".join(f"{d['a']} - {d['b']} {d['value']:+.1f} "
                                       f"[{d['ci'][0]:+.1f}, {d['ci'][1]:+.1f}]"
                                       for d in comp["differences"])))
        gn = summary.get("grad_norm", {}).get(t)
        if gn:
            rows.append((f"{t}: pre-clip policy gradient norm per update, median (first / last "
                         "quarter of updates; mean per-seed std of log10 norms)",
                         ", ".join(f"{m} {gn[m]['median']:.3g} ({gn[m]['early_median']:.3g} / "
                                   f"{gn[m]['late_median']:.3g}; {gn[m]['log10_spread']:.2f})"
                                   for m in by_m if m in gn)))
        for k, v in summary.get("ratio_final_eval_return", {}).get(t, {}).items():
            ci = (f"[{v['ci_low']:.2f}, {v['ci_high']:.2f}]" if v["defined"]
                  else "(95% CI n/a: the rival's mean return is not > 0 in every "
                  "resample)")
            paper = f"; paper ~{v['paper']:.0f}x" if v.get("paper") else ""
            rows.append((f"{t}: declared ratio of mean final eval returns {k} "
                         f"({v['seeds']} seeds, paired-bootstrap 95% CI)",
                         f"{v['ratio']:.2f} {ci}{paper}"))
    if "throughput" in summary:
        tp = summary["throughput"]
        for backend, by_mode in tp["env_steps_per_s"].items():
            for mode, rates in by_mode.items():
                spread = tp["spread_s"][backend][mode]
                cells = ", ".join(
                    f"B={b}: {r:.0f} (IQR {100 * spread[b]['iqr'] / spread[b]['min']:.0f}%)"
                    for b, r in sorted(rates.items(), key=lambda kv: int(kv[0])))
                rows.append((f"{tp['task']}: vmapped {backend} rollout env steps/s, {mode}, "
                             f"best of {tp['repeats']} (spread: IQR / best)", cells))
    return rows


# ------------------------------------------------------------------ TensorBoard series


def tb_scalars(config, unit, result, workdir):
    """TensorBoard series of a unit (``study.Experiment.scalars``; module docstring of
    ``experiments.lib.scalars``)."""
    del config, workdir
    if not isinstance(result, dict):
        return {}
    out = {}
    if "env_steps" in result:
        for field in ("eval_return", "train_reward"):
            # evaluations run every few updates: their own env-step axis when present
            key = "eval_env_steps" if field == "eval_return" and "eval_env_steps" in result \
                else "env_steps"
            steps = np.asarray(result[key]).reshape(-1)
            if field in result:
                v = np.asarray(result[field], np.float64)
                out[f"rfo/{field}"] = (steps, v.reshape(-1, steps.size).mean(0))
    elif isinstance(result.get("env_steps_per_s"), dict):
        by_backend = result["env_steps_per_s"]
        if by_backend and not isinstance(next(iter(by_backend.values())), dict):
            by_backend = {"mjx": {"forward": by_backend}}  # formerly: MJX forward
        for backend, by_mode in by_backend.items():
            for mode, rates in by_mode.items():
                bs = sorted(rates, key=int)
                tag = "rfo/rollout_env_steps_per_s_vs_batch"
                out[(f"{backend}_{mode.replace('+', '_')}", tag)] = (
                    np.array([int(b) for b in bs]), np.array([rates[b] for b in bs]))
    return out


CAPTION = ("Evaluation return at equal environment steps (higher is better), mean +- t 95% CI "
           "over seeds; declared differences are RFO minus the rival, paired by seed, with "
           "paired bootstrap 95% CIs.")

EXPERIMENT = study.Experiment(name="rfo", validate=rfo_configs.validate_config, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline,
                              scalars=tb_scalars, caption=CAPTION)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/rfo.py:quick")
