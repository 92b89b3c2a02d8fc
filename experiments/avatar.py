"""AvAtar active alignment: MRR vs round per strategy; CG vs dense adjoint scaling.

  python -m experiments.avatar --config=experiments/configs/avatar.py:quick --workdir=results/avatar

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. Units: one per task (every strategy, vmapped over seeds, one jitted
``avatar.run_active`` scan each; ``task_study``) and ``scaling`` (CG vs dense adjoint solve
times); a finished unit is never recomputed.
"""

import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from experiments import common
from experiments.lib import plots, study, timing
from jaxlab import avatar
from jaxlab.avatar import adjoint, loop, solvers, tasks
from jaxlab.core import metrics, sharding

METRICS = ("mrr", "hits@1", "hits@10", "hits@30", "hits@50")


def build_task(name: str, c: ml_collections.ConfigDict) -> tasks.AlignmentTask:
    """The task called ``name`` at the sizes of config ``c``."""
    if name == "synthetic_graph":
        return tasks.synthetic_graph_pair(c.graph_nodes, seed=c.task_seed)
    if name in tasks.REAL_GRAPHS:
        return tasks.real_graph_pair(name, seed=c.task_seed)
    if name == "point_cloud":
        return tasks.point_cloud_pair(c.point_nodes, seed=c.task_seed)
    if name == "point_cloud_nonrigid":
        return tasks.point_cloud_pair(c.point_nodes, seed=c.task_seed, nonrigid=c.nonrigid)
    if name == "embeddings":
        return tasks.embedding_pair(c.embedding_nodes, seed=c.task_seed)
    raise ValueError(f"unknown task {name!r}.")


def task_study(c: ml_collections.ConfigDict, name: str) -> np.ndarray:
    """[len(METRICS), strategies, seeds, rounds + 1] test metrics of task ``name``: every
    strategy of ``c.strategies`` run by ``avatar.run_active``, vmapped over ``c.num_seeds``
    keys split over the devices of ``c.mesh_shape``."""
    task = build_task(name, c)
    keys = sharding.shard_batch(jax.random.split(jax.random.key(c.seed), c.num_seeds),
                                c.mesh_shape)
    out = np.zeros((len(METRICS), len(c.strategies), c.num_seeds, c.rounds + 1), np.float32)
    for i, strat in enumerate(c.strategies):
        t0 = time.perf_counter()
        res = jax.vmap(lambda k, strat=strat: avatar.run_active(
            task, k, strat, epsilon=c.epsilon, rounds=c.rounds, test_frac=c.test_frac,
            init_frac=c.init_frac, budget_frac=c.budget_frac, utility=c.utility,
            sinkhorn_threshold=c.sinkhorn_threshold,
            sinkhorn_max_iterations=c.sinkhorn_max_iterations, cg_tol=c.cg_tol))(keys)
        res_metrics = sharding.to_host(res.metrics)
        for m, key in enumerate(METRICS):
            out[m, i] = res_metrics[key]
        logging.info("avatar %s / %s: final MRR %.3f (%.1fs)", name, strat,
                     out[0, i, :, -1].mean(), time.perf_counter() - t0)
    return out


def time_adjoint(n: int, repeats: int = 3, epsilon: float = 0.05) -> tuple[float, float]:
    """Best-of-``repeats`` seconds of the CG and the dense adjoint solve at size n x n."""
    cost = jax.random.uniform(jax.random.key(n), (n, n))
    plan = solvers.entropic_plan(cost, epsilon)
    g = jnp.log(plan) + 1.0
    return tuple(timing.best_time(lambda m=m: adjoint.cost_gradient(plan, g, epsilon, method=m),
                                  repeats) for m in ("cg", "dense"))


def _scaling(c: ml_collections.ConfigDict) -> np.ndarray:
    """[len(scaling_sizes), 2] seconds of the (CG, dense) adjoint solve."""
    return np.array([time_adjoint(n) for n in c.scaling_sizes], np.float32)


def _units(config: ml_collections.ConfigDict, workdir: str) -> list[study.Unit]:
    del workdir
    units = [study.Unit(name, lambda ctx, name=name: task_study(config, name))
             for name in config.tasks]
    return units + [study.Unit("scaling", lambda ctx: _scaling(config))]


def _summarize(c, out) -> dict:
    s = {"config": c.to_dict(), "strategies": list(c.strategies), "tasks": {}}
    for name in c.tasks:
        arr = out[name]
        t = {}
        for m, key in enumerate(METRICS):
            mean, hw = metrics.mean_and_ci(arr[m], axis=1)  # over seeds
            t[key] = {st: {"mean": mean[i].tolist(), "ci95": hw[i].tolist()}
                      for i, st in enumerate(c.strategies)}
        final = {st: t["mrr"][st]["mean"][-1] for st in c.strategies}
        t["final_mrr"] = final
        t["avatar_minus_random_final_mrr"] = final.get("avatar", np.nan) - final.get(
            "random", np.nan)
        s["tasks"][name] = t
    sc = out["scaling"]
    s["scaling"] = {"n": list(c.scaling_sizes), "cg_s": sc[:, 0].tolist(),
                    "dense_s": sc[:, 1].tolist(),
                    "dense_over_cg": (sc[:, 1] / sc[:, 0]).tolist(),
                    "slope_cg": metrics.loglog_slope(c.scaling_sizes, sc[:, 0]),
                    "slope_dense": metrics.loglog_slope(c.scaling_sizes, sc[:, 1])}
    logging.info("adjoint scaling: dense/cg %s, slopes cg %.2f dense %.2f",
                 np.round(s["scaling"]["dense_over_cg"], 1), s["scaling"]["slope_cg"],
                 s["scaling"]["slope_dense"])
    return s


def _plot(c, s, out, workdir):
    del out
    names = list(c.tasks)
    fig, axes = plots.figure(len(names) + 1, width=4.2)
    rounds = np.arange(c.rounds + 1)
    for ax, name in zip(axes, names, strict=False):
        for st in c.strategies:
            r = s["tasks"][name]["mrr"][st]
            plots.line_with_band(ax, rounds, r["mean"], r["ci95"], label=st,
                                 lw=2.5 if st == "avatar" else 1.2)
        ax.set(xlabel="round", ylabel="test MRR", title=name)
    axes[0].legend(fontsize=7)
    sc = s["scaling"]
    axes[-1].loglog(sc["n"], sc["cg_s"], "o-", label=f"CG (slope {sc['slope_cg']:.2f})")
    axes[-1].loglog(sc["n"], sc["dense_s"], "s--",
                    label=f"dense solve (slope {sc['slope_dense']:.2f})")
    axes[-1].set(xlabel="n (n x n plan)", ylabel="seconds", title="adjoint solve")
    axes[-1].legend(fontsize=7)
    plots.save(fig, os.path.join(workdir, "mrr_vs_round.png"),
               caption=plots.t_band(c.num_seeds) + " Right: one timing per n.")


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for results/REPORT.md."""
    rows = []
    for name, t in summary["tasks"].items():
        f = t["final_mrr"]
        best = max((v, k) for k, v in f.items() if k != "avatar")
        rows.append((f"{name}: final test MRR avatar vs random (best baseline)",
                     f"{f['avatar']:.3f} vs {f['random']:.3f} ({best[1]} {best[0]:.3f})"))
    sc = summary["scaling"]
    rows.append((f"adjoint solve at n={sc['n'][-1]}: dense / CG time",
                 f"{sc['dense_over_cg'][-1]:.1f}x (slopes CG {sc['slope_cg']:.2f}, "
                 f"dense {sc['slope_dense']:.2f})"))
    return rows


EXPERIMENT = study.Experiment(name="avatar", validate=loop.validate_config, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/avatar.py:quick")
