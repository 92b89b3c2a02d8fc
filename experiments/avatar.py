"""AvAtar active alignment: MRR vs round per strategy and protocol; CG vs dense adjoint.

  python -m experiments.avatar --config=experiments/configs/avatar.py:quick --workdir=results/avatar

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. Units: one per task (every strategy under every protocol, vmapped over
seeds; ``task_study``) and ``scaling`` (CG vs dense adjoint solve times and residuals); a
finished unit is never recomputed. Per task and protocol one program is compiled
(``avatar.run_active_switch``: the strategy is a traced switch index), then run once per
strategy (the quick preset spent ~6 s CPU compiling each (task, protocol, strategy)).
``config.aligner``: "simple" (``alignment.anchor_cost`` + Sinkhorn) or "parrot"
(``avatar.parrot``, the PARROT-class aligner).

Strategies are names of ``avatar.STRATEGIES`` or ``avatar-<score>`` (the AvAtar strategy
with node score ``<score>`` of ``avatar.scores.SCORES``). Declared comparison (fixed
before the runs): final-round MRR of each ``avatar-*`` strategy minus each baseline, paired
over the same seeds (same initial anchors), 95% paired bootstrap CI, and the goal that
each difference's CI lies above 0 (``avatar.comparison.declared_pairs``); the share of
round-0 picks already top-1 correct next to the pool's share. The seeds are the test
items of ``jaxlab.core.protocol`` (``protocol.item_keys(key(config.seed), "test", i)``),
each run is ``avatar.comparison.run_seeds`` and the comparison section of the summary is
``protocol.analyse`` of the unit's final MRRs (the paper's, never-queried and removal-only
lines: ``avatar.comparison.DEFAULT_METRICS``), so it equals
``avatar.compare(key(config.seed), task, contenders=config.strategies, tuning=0,
seeds=config.num_seeds, settings=run_settings(...))`` on the same task (tested). Task seeds / keys
of the reports (``task_seed`` 0, ``seed`` 0) were never used for choosing scores (the dev
runs used task seed 100). Real-data tasks are CPU-sized subsamples (``datasets.subsample``),
or with ``config.real_full`` (the ``full`` preset) the whole graph pairs
(``datasets.full_task``, cached by ``experiments.lib.task_cache``: sparse
``tasks.GraphTask``, [n1, n2] plans, the masks over the ground-truth pairs, as in the
paper); a strategy not defined there (``avatar.loop.graph_task_limit``: avatar-gain) is
skipped on those tasks (NaN in the unit result, listed under "skipped" in the summary). The
point-cloud and embedding tasks are jaxlab extensions, not in the paper.
"""

import dataclasses
import functools
import os
import time
import warnings

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from jaxlab.avatar import adjoint, comparison, datasets, loop, solvers, tasks
from jaxlab.core import metrics, sharding
from jaxlab.core import protocol as core_protocol

from . import common
from .configs import avatar as avatar_config
from .lib import plots, progress, study, task_cache, timing
from .lib import scalars as S

ALIGNERS = {"simple": "ot", "parrot": "parrot"}  # config.aligner -> avatar solver


def aligner_for(c, name: str) -> str:
    """The aligner of task ``name``: ``c.real_aligner`` on the real network-alignment
    datasets when set (the ``full`` preset: PARROT-class there, the simple aligner's
    eps = 0.05 Sinkhorn did not converge in ~3,800 iterations on the whole
    Foursquare-Twitter pair), else ``c.aligner``. ``c``: a ConfigDict or its dict."""
    real = c.get("real_aligner", "") if name in datasets.DATASETS else ""
    return real or c.get("aligner", "simple")
METRICS = ("mrr", "hits@1", "hits@10", "hits@30", "hits@50")
EXTENSIONS = ("point_cloud", "point_cloud_nonrigid", "embeddings")  # not in the paper
# AvAtar Table 3, MRR at round 10 (random / entropy / AvAtar), from the paper.
PUBLISHED = {"acm_dblp": "paper (full ACM-DBLP, random/entropy/AvAtar): PARROT "
                         ".829/.926/.936, JOENA .837/.972/.981",
             "foursquare_twitter": "paper: not in our notes (Douban PARROT .751/.791/.837)"}


parse_strategy = loop.parse_strategy  # "avatar-<score>" -> ("avatar", score)


def build_task(name: str, c: ml_collections.ConfigDict) -> tasks.AlignmentTask:
    """The task called ``name`` at the sizes of config ``c``."""
    if name == "synthetic_graph":
        return tasks.synthetic_graph_pair(c.graph_nodes, seed=c.task_seed)
    if name == "synthetic_hard":  # no features, 20% edge noise (the hard setting)
        return tasks.synthetic_graph_pair(c.hard_nodes, seed=c.task_seed,
                                          edge_noise=c.hard_edge_noise, feat_dim=0)
    if name in datasets.DATASETS:
        if c.get("real_full", False):
            return task_cache.full_task(name)  # built once, then read from the cache
        return datasets.subsample(name, c.real_nodes, seed=c.task_seed)
    if name in tasks.REAL_GRAPHS:
        return tasks.real_graph_pair(name, seed=c.task_seed)
    if name == "point_cloud":
        return tasks.point_cloud_pair(c.point_nodes, seed=c.task_seed)
    if name == "point_cloud_nonrigid":
        return tasks.point_cloud_pair(c.point_nodes, seed=c.task_seed, nonrigid=c.nonrigid)
    if name == "embeddings":
        return tasks.embedding_pair(c.embedding_nodes, seed=c.task_seed)
    raise ValueError(f"unknown task {name!r}.")


def task_study(c: ml_collections.ConfigDict, name: str) -> dict:
    """Every strategy of ``c.strategies`` under every protocol of ``c.protocols`` on task
    ``name``, ``avatar.run_active`` vmapped over ``c.num_seeds`` keys (the same keys for
    every strategy: paired) split over the devices of ``c.mesh_shape``; with
    ``c.seed_chunk`` > 0 the keys run ``seed_chunk`` at a time (the same keys; memory
    ``seed_chunk`` / ``num_seeds`` of one vmap, for the full graphs).

    Returns:
      {"metrics": [protocols, len(METRICS), strategies, seeds, rounds + 1] test metrics,
       "heldout": the same on the never-queried nodes (``c.heldout_frac`` under "paper";
       NaN when there are none; "fixed": the test set), "removal": [protocols,
       len(METRICS), strategies, seeds] the round-0 plan on the final test set,
       "picked": / "pool": [protocols, strategies, seeds, rounds] share of the round's
       queries / candidates already top-1 correct; NaN for a strategy not defined on the
       task), "skipped": the names of those strategies (``skipped_strategies``)}.
    """
    task = build_task(name, c)
    skipped = skipped_strategies(c, task, aligner_for(c, name))
    all_keys = core_protocol.item_keys(jax.random.key(c.seed), "test", np.arange(c.num_seeds))
    chunk = c.get("seed_chunk", 0) or c.num_seeds
    chunks = [(lo, min(lo + chunk, c.num_seeds)) for lo in range(0, c.num_seeds, chunk)]
    shape = (len(c.protocols), len(c.strategies), c.num_seeds)
    out = np.full((len(c.protocols), len(METRICS), *shape[1:], c.rounds + 1), np.nan,
                  np.float32)
    picked = np.full((*shape, c.rounds), np.nan, np.float32)
    held = np.full_like(out, np.nan)  # never queried ("fixed": the test set itself)
    removal = np.full(out.shape[:-1], np.nan, np.float32)
    pool = np.full((*shape, c.rounds), np.nan, np.float32)
    for name_s, why in skipped.items():
        logging.info("avatar %s / %s: skipped (%s)", name, name_s, why)
    runs = [(i, name_s) for i, name_s in enumerate(c.strategies) if name_s not in skipped]
    table = tuple(parse_strategy(name_s) for _, name_s in runs)
    report = progress.comparison_reporter()
    for p, protocol in enumerate(c.protocols):
        # One compile per (task, protocol): the strategy is a traced switch index
        # (comparison.run_seeds keeps the program; avatar.compare runs the same one).
        settings = run_settings(c, name, protocol)
        for j, (i, name_s) in enumerate(runs):
            t0 = time.perf_counter()
            for lo, hi in chunks:
                res = comparison.run_seeds(all_keys[lo:hi], task, table, j, settings)
                res_metrics = sharding.to_host(res.metrics)
                res_held = sharding.to_host(res.heldout_metrics)
                res_removal = sharding.to_host(res.removal_metrics)
                for m, key in enumerate(METRICS):
                    out[p, m, i, lo:hi] = res_metrics[key]
                    held[p, m, i, lo:hi] = res_held[key]
                    removal[p, m, i, lo:hi] = res_removal[key]
                picked[p, i, lo:hi] = sharding.to_host(res.picked_correct)
                pool[p, i, lo:hi] = sharding.to_host(res.pool_correct)
            logging.info("avatar %s / %s / %s: final MRR %.3f, round-0 picks correct %.2f "
                         "(pool %.2f) (%.1fs)", name, protocol, name_s,
                         out[p, 0, i, :, -1].mean(), picked[p, i, :, 0].mean(),
                         pool[p, i, :, 0].mean(), time.perf_counter() - t0)
            report(j + 1, len(runs), f"avatar {name} / {protocol}")
    return {"metrics": out, "picked": picked, "pool": pool, "skipped": sorted(skipped),
            "heldout": held, "removal": removal}


def run_settings(c: ml_collections.ConfigDict, name: str,
                 protocol_name: str) -> comparison.Settings:
    """The ``avatar.comparison.Settings`` of task ``name`` under ``protocol_name`` (of
    ``comparison.run_seeds`` and ``avatar.compare``)."""
    return comparison.Settings(
        epsilon=c.epsilon, rounds=c.rounds, test_frac=c.test_frac,
        init_frac=c.hard_init_frac if name == "synthetic_hard" else c.init_frac,
        budget_frac=c.budget_frac, utility=c.utility, solver=ALIGNERS[aligner_for(c, name)],
        sinkhorn_threshold=c.sinkhorn_threshold,
        sinkhorn_max_iterations=c.sinkhorn_max_iterations, cg_tol=c.cg_tol,
        protocol=protocol_name,
        heldout_frac=c.get("heldout_frac", 0.0) if protocol_name == "paper" else 0.0,
        mesh_shape=tuple(c.mesh_shape))


def task_comparison(c, result: dict, p: int) -> core_protocol.Comparison:
    """The declared comparison of one task's unit ``result`` (``task_study``) under
    protocol ``c.protocols[p]``: ``protocol.analyse`` of each line of
    ``comparison.DEFAULT_METRICS`` (the paper's final MRR, the never-queried and the
    removal-only one; a line whose values are not all finite is left out) per seed of every
    strategy that ran, with ``avatar.compare``'s pairs, goals and bootstrap key
    (``fold_in(key(c.seed), 2)``), so it equals ``avatar.compare``'s."""
    skipped = set(result.get("skipped", ()))
    ran = [(i, st) for i, st in enumerate(c.strategies) if st not in skipped]
    pairs = comparison.declared_pairs([st for _, st in ran])
    lines = {"mrr": result["metrics"], "never-queried mrr": result.get("heldout"),
             "removal-only mrr": result.get("removal")}
    key = jax.random.fold_in(jax.random.key(c.seed), 2)
    out = []
    for name in comparison.DEFAULT_METRICS:
        arr = lines[name]
        if arr is None:
            continue
        arr = np.asarray(arr)[p, METRICS.index("mrr")]
        values = {st: arr[i] if arr.ndim == 2 else arr[i, :, -1] for i, st in ran}
        if out and not all(np.isfinite(v).all() for v in values.values()):
            continue
        out.append(core_protocol.analyse(
            key, values, pairs=pairs,
            goals=tuple(core_protocol.Goal(a, b, metric=name) for a, b in pairs), metric=name))
    return dataclasses.replace(out[0], others={r.metric: r for r in out[1:]})


def comparison_dict(cmp: core_protocol.Comparison) -> dict:
    """``cmp.to_dict()`` without the seconds (the summary stays byte-identical across
    reruns)."""
    return cmp.to_dict(seconds=False)


def skipped_strategies(c: ml_collections.ConfigDict, task, aligner: str | None = None) -> dict:
    """{strategy name: why} for the strategies of ``c.strategies`` not defined on ``task``
    (a ``tasks.GraphTask``: ``loop.graph_task_limit``) with ``aligner`` (default
    ``c.aligner``); empty for a square task."""
    if not tasks.is_graph_task(task):
        return {}
    out = {}
    for name_s in c.strategies:
        why = loop.graph_task_limit(*parse_strategy(name_s), c.utility,
                                    ALIGNERS[aligner or c.aligner])
        if why is not None:
            out[name_s] = why
    return out


def hard_plan(n: int, epsilon: float, seed: int = 0, spread: float = 2.0,
              max_iterations: int = 20_000) -> jax.Array:
    """[n, n] entropic plan with non-uniform marginals (log-normal weights, ``spread`` the
    std of their log) on a uniform [0, 1] cost: log-domain Sinkhorn until the marginal
    error is below 1e-5 (or ``max_iterations``). The adjoint solves use the plan's own
    marginals, so its Sinkhorn accuracy does not affect their comparison."""
    k_cost, k_a, k_b = jax.random.split(jax.random.key(seed), 3)
    cost = jax.random.uniform(k_cost, (n, n))
    log_a, log_b = (jax.nn.log_softmax(spread * jax.random.normal(k, (n,))) for k in (k_a, k_b))

    @jax.jit
    def solve(cost, log_a, log_b):
        def update(fg):
            f, g = fg
            f = epsilon * (log_a - jax.nn.logsumexp((g[None, :] - cost) / epsilon, axis=1))
            g = epsilon * (log_b - jax.nn.logsumexp((f[:, None] - cost) / epsilon, axis=0))
            return f, g

        def err(fg):
            f, g = fg
            return jnp.abs(jnp.exp(jax.nn.logsumexp((f[:, None] + g[None, :] - cost)
                                                    / epsilon, axis=1)) - jnp.exp(log_a)).sum()

        def body(c):
            i, fg = c
            fg = update(fg)
            return i + 1, fg

        def cond(c):
            i, fg = c
            return (i < max_iterations) & ((i % 50 != 0) | (err(fg) > 1e-5))

        _, (f, g) = jax.lax.while_loop(cond, body, (1, update((jnp.zeros(n), jnp.zeros(n)))))
        return jnp.exp((f[:, None] + g[None, :] - cost) / epsilon)

    return solve(cost, log_a, log_b)


ADJOINT_REPEATS = 3  # warm runs per adjoint solve timing (the best is reported)


@functools.partial(jax.jit, static_argnums=(0, 1))
def _uniform_plan(n: int, epsilon: float) -> solvers.PlanResult:
    """The entropic plan (uniform marginals) of a uniform random [n, n] cost, as one
    compiled program (run eagerly, ott-jax's solver output builds its element-wise programs
    twice, once per weak type)."""
    return solvers.entropic_solve(jax.random.uniform(jax.random.key(n), (n, n)), epsilon)


@jax.jit
def _entropy_gradient(plan: jax.Array) -> jax.Array:
    """log T + 1 (entries that underflow floored at 1e-30), the entropy's gradient."""
    return jnp.log(jnp.maximum(plan, 1e-30)) + 1.0


def time_adjoint(n: int, repeats: int = ADJOINT_REPEATS, epsilon: float = 0.05,
                 plan: jax.Array | None = None) -> tuple[float, ...]:
    """(CG s, dense s, CG residual, dense residual, Cholesky s, Cholesky residual, then the
    first and third quartiles of the CG, dense and Cholesky seconds) at size n x n:
    best-of-``repeats`` seconds of each adjoint solve (warm, interleaved:
    ``timing.times_interleaved``), the spread of those repeats, and each solve's relative
    residual ||H y - rhs|| / ||rhs||. "dense" is the least-squares solve; "cholesky" the
    Cholesky solve of H with its null direction pinned (the fair direct baseline). ``plan``:
    the plan to use (default: the uniform-marginal entropic plan of a uniform random cost at
    ``epsilon``)."""
    if plan is None:
        res = _uniform_plan(n, float(epsilon))
        solvers.check_plan(res, epsilon=epsilon, where=f"time_adjoint n={n}")
        plan = res.plan
    g = _entropy_gradient(plan)
    methods = ("cg", "dense", "cholesky")
    times = timing.times_interleaved(
        {m: lambda m=m: adjoint.cost_gradient(plan, g, epsilon, method=m) for m in methods},
        repeats)
    sp = {m: timing.spread(times[m]) for m in methods}
    res = {m: float(adjoint.cost_gradient_and_info(plan, g, epsilon, method=m)[1].residual)
           for m in methods}
    return (sp["cg"]["min"], sp["dense"]["min"], res["cg"], res["dense"],
            sp["cholesky"]["min"], res["cholesky"],
            *(sp[m][q] for m in methods for q in ("q25", "q75")))


def _scaling(c: ml_collections.ConfigDict) -> np.ndarray:
    """[len(scaling_sizes), 12] ``time_adjoint`` rows (CG s, dense s, CG residual, dense
    residual, Cholesky s, Cholesky residual, quartiles of the CG, dense, Cholesky s)."""
    return np.array([time_adjoint(n) for n in c.scaling_sizes], np.float64)


def _units(config: ml_collections.ConfigDict, workdir: str) -> list[study.Unit]:
    del workdir
    units = [study.Unit(name, lambda ctx, name=name: task_study(config, name))
             for name in config.tasks]
    return units + [study.Unit("scaling", lambda ctx: _scaling(config)),
                    study.Unit("scaling_hard", lambda ctx: _scaling_hard(config))]


def _scaling_hard(c: ml_collections.ConfigDict) -> np.ndarray:
    """[len(scaling_hard_eps), 6] as ``_scaling`` on hard plans (``hard_plan``: non-uniform
    marginals, small epsilon) at n = ``scaling_hard_n``."""
    with warnings.catch_warnings():  # a CG solve at its cap is reported by its residual
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.array([time_adjoint(c.scaling_hard_n, epsilon=e,
                                      plan=hard_plan(c.scaling_hard_n, e))
                         for e in c.scaling_hard_eps], np.float64)


def _summarize(c, out) -> dict:
    s = {"config": c.to_dict(), "strategies": list(c.strategies),
         "protocols": list(c.protocols), "tasks": {}}
    for name in c.tasks:
        res = out[name]
        arr, picked, pool = (np.asarray(res[k]) for k in ("metrics", "picked", "pool"))
        task = {"published": PUBLISHED.get(name, ""),
                "extension": name in EXTENSIONS, "protocols": {}}
        for p, protocol in enumerate(c.protocols):
            # strategies skipped on this task (not defined on a GraphTask: task_study's
            # list, never inferred from NaNs, so a failed run shows as NaN, not "skipped")
            skipped = set(res.get("skipped", ()))
            ran = [i for i, st in enumerate(c.strategies) if st not in skipped]
            names = [c.strategies[i] for i in ran]
            t = {"skipped": [st for st in c.strategies if st not in names]}
            for m, mkey in enumerate(METRICS):
                mean, hw = metrics.mean_and_ci(arr[p, m][ran], axis=1)  # over seeds
                t[mkey] = {st: {"mean": mean[j].tolist(), "ci95": hw[j].tolist()}
                           for j, st in enumerate(names)}
            t["final_mrr"] = {st: t["mrr"][st]["mean"][-1] for st in names}
            t["round0_picked_correct"] = {st: float(picked[p, i, :, 0].mean())
                                          for i, st in zip(ran, names, strict=True)}
            t["round0_pool_correct"] = float(pool[p, ran, :, 0].mean())
            cmp = task_comparison(c, res, p)
            t["comparison"] = comparison_dict(cmp)
            t["paired_final_mrr"] = {
                f"{d.a} - {d.b}{label}": {"mean": d.value, "lo": d.low, "hi": d.high}
                for metric, label in (("mrr", ""), ("never-queried mrr", ", never queried"),
                                      ("removal-only mrr", ", removal only"))
                if metric in cmp.metrics for d in cmp[metric].differences}
            if "heldout" in res and "removal" in res:
                held, removal = np.asarray(res["heldout"]), np.asarray(res["removal"])
                lines = {", never queried": {st: held[p, 0, i, :, -1]
                                             for i, st in zip(ran, names, strict=True)},
                         ", removal only": {st: removal[p, 0, i]
                                            for i, st in zip(ran, names, strict=True)}}
                for label, field in ((", never queried", "final_mrr_heldout"),
                                     (", removal only", "final_mrr_removal")):
                    t[field] = {}
                    for st, v in lines[label].items():
                        if np.all(np.isfinite(v)):
                            mean, hw = metrics.mean_and_ci(v)
                            t[field][st] = {"mean": float(mean), "ci95": float(hw)}
            task["protocols"][protocol] = t
        s["tasks"][name] = task
    sc = np.asarray(out["scaling"])
    s["scaling"] = {"n": list(c.scaling_sizes), "cg_s": sc[:, 0].tolist(),
                    "dense_s": sc[:, 1].tolist(),
                    "dense_over_cg": (sc[:, 1] / sc[:, 0]).tolist(),
                    "cg_residual": sc[:, 2].tolist(), "dense_residual": sc[:, 3].tolist(),
                    "slope_cg": metrics.loglog_slope(c.scaling_sizes, sc[:, 0]),
                    "slope_dense": metrics.loglog_slope(c.scaling_sizes, sc[:, 1]),
                    "cholesky_s": sc[:, 4].tolist(),
                    "cholesky_over_cg": (sc[:, 4] / sc[:, 0]).tolist(),
                    "cholesky_residual": sc[:, 5].tolist(),
                    "slope_cholesky": metrics.loglog_slope(c.scaling_sizes, sc[:, 4])}
    if sc.shape[1] >= 12:  # best of ADJOINT_REPEATS warm runs, with their quartiles
        s["scaling"]["repeats"] = ADJOINT_REPEATS
        for j, m in enumerate(("cg", "dense", "cholesky")):
            s["scaling"][f"{m}_quartiles_s"] = sc[:, 6 + 2 * j:8 + 2 * j].tolist()
    if "scaling_hard" in out:
        hd = np.asarray(out["scaling_hard"])
        s["scaling_hard"] = {"n": c.scaling_hard_n, "epsilon": list(c.scaling_hard_eps),
                             "cg_s": hd[:, 0].tolist(), "dense_s": hd[:, 1].tolist(),
                             "cholesky_s": hd[:, 4].tolist(),
                             "dense_over_cg": (hd[:, 1] / hd[:, 0]).tolist(),
                             "cholesky_over_cg": (hd[:, 4] / hd[:, 0]).tolist(),
                             "cg_residual": hd[:, 2].tolist(),
                             "cholesky_residual": hd[:, 5].tolist()}
    logging.info("adjoint scaling: dense/cg %s, slopes cg %.2f dense %.2f, CG residuals %s",
                 np.round(s["scaling"]["dense_over_cg"], 1), s["scaling"]["slope_cg"],
                 s["scaling"]["slope_dense"], s["scaling"]["cg_residual"])
    return s


def _plot(c, s, out, workdir):
    del out
    panels = [(name, pr) for name in c.tasks for pr in c.protocols]
    fig, axes = plots.figure(len(panels) + 1, width=4.2)
    rounds = np.arange(c.rounds + 1)
    for ax, (name, pr) in zip(axes, panels, strict=False):
        for st, r in s["tasks"][name]["protocols"][pr]["mrr"].items():
            plots.line_with_band(ax, rounds, r["mean"], r["ci95"], label=st,
                                 lw=2.5 if st.startswith("avatar") else 1.2)
        ext = " (jaxlab ext.)" if name in EXTENSIONS else ""
        ax.set(xlabel="round", ylabel="test MRR", title=f"{name}{ext}, {pr}")
    axes[0].legend(fontsize=7)
    sc = s["scaling"]
    axes[-1].loglog(sc["n"], sc["cg_s"], "o-", label=f"CG (slope {sc['slope_cg']:.2f})")
    axes[-1].loglog(sc["n"], sc["dense_s"], "s--",
                    label=f"dense solve (slope {sc['slope_dense']:.2f})")
    if "cholesky_s" in sc:
        axes[-1].loglog(sc["n"], sc["cholesky_s"], "^:",
                        label=f"Cholesky, null direction pinned "
                              f"(slope {sc['slope_cholesky']:.2f})")
    for m, line in zip(("cg", "dense", "cholesky"), axes[-1].get_lines(), strict=False):
        if f"{m}_quartiles_s" in sc:  # the spread of the timed runs
            q = np.asarray(sc[f"{m}_quartiles_s"])
            axes[-1].fill_between(sc["n"], q[:, 0], q[:, 1], alpha=0.2, lw=0,
                                  color=line.get_color())
    axes[-1].set(xlabel="n (n x n plan)", ylabel="seconds", title="adjoint solve")
    axes[-1].legend(fontsize=7)
    timed = (f" Right: best of {sc['repeats']} warm runs per n; band: their interquartile "
             "range." if "repeats" in sc else " Right: one best-of timing per n.")
    plots.save(fig, os.path.join(workdir, "mrr_vs_round.png"),
               caption=plots.t_band(c.num_seeds) + timed)


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for results/REPORT.md: per task and protocol the final MRR of
    every strategy, the paired avatar - random / entropy differences, the share of round-0
    picks already correct, the published figures; the adjoint scaling."""
    rows = []
    for name, task in summary["tasks"].items():
        aligner = aligner_for(summary["config"], name)
        ext = " [jaxlab extension, not in the paper]" if task["extension"] else ""
        size = ""
        if name in datasets.DATASETS and summary["config"].get("real_full", False):
            n1, n2, k, _ = datasets.SIZES[name]
            size = f", full graphs {n1} x {n2}, {k} pairs"
        elif name in datasets.DATASETS:
            size = f", {summary['config']['real_nodes']}-node subsample"
        for pr, t in task["protocols"].items():
            f = t["final_mrr"]
            pub = f"; published: {task['published']}" if task["published"] else ""
            skip = (f"; not defined here: {', '.join(t['skipped'])}" if t.get("skipped")
                    else "")
            rows.append((f"{name}{ext} ({pr} protocol, {aligner} aligner{size}): final test MRR",
                         ", ".join(f"{k} {v:.3f}" for k, v in f.items()) + pub + skip))
            for field, label in (("final_mrr_heldout", "never queried"),
                                 ("final_mrr_removal", "removal only: round-0 plan on the "
                                                       "final test set")):
                if t.get(field) and pr == "paper":
                    rows.append((f"{name} ({pr}): final MRR, {label} (95% CI over seeds)",
                                 ", ".join(f"{k} {v['mean']:.3f} ± {v['ci95']:.3f}"
                                           for k, v in t[field].items())))
            for k, d in t["paired_final_mrr"].items():
                rows.append((f"{name} ({pr}): {k}, paired final MRR",
                             f"{d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"))
            rows.append((f"{name} ({pr}): round-0 picks already top-1 correct",
                         ", ".join(f"{k} {v:.2f}" for k, v in
                                   t["round0_picked_correct"].items())
                         + f" (pool {t['round0_pool_correct']:.2f})"))
        if task["published"]:
            rows.append((f"{name}: published (for comparison)", task["published"]))
    sc = summary["scaling"]
    if "repeats" in sc:
        q = {m: sc[f"{m}_quartiles_s"][-1] for m in ("cg", "dense")}
        rows.append((f"adjoint solve at n={sc['n'][-1]}: dense / CG time, best of "
                     f"{sc['repeats']} warm runs each (interquartile range of the runs)",
                     f"{sc['dense_over_cg'][-1]:.3g}x: CG {sc['cg_s'][-1]:.2e} s "
                     f"[{q['cg'][0]:.2e}, {q['cg'][1]:.2e}], dense {sc['dense_s'][-1]:.2e} s "
                     f"[{q['dense'][0]:.2e}, {q['dense'][1]:.2e}] (slopes over n "
                     f"{'/'.join(str(n) for n in sc['n'])}: CG {sc['slope_cg']:.2f}, dense "
                     f"{sc['slope_dense']:.2f}; CG residual {sc['cg_residual'][-1]:.1e})"))
    else:  # a summary from before the spread was recorded: one best-of time per n
        rows.append((f"adjoint solve at n={sc['n'][-1]}: dense / CG time",
                     f"{sc['dense_over_cg'][-1]:.1f}x (slopes CG {sc['slope_cg']:.2f}, "
                     f"dense {sc['slope_dense']:.2f}; CG residual {sc['cg_residual'][-1]:.1e})"))
    if "scaling_hard" in summary:
        hd = summary["scaling_hard"]
        rows.append((f"adjoint solve, hard plans (n={hd['n']}, non-uniform marginals): "
                     "Cholesky / CG time", ", ".join(
                         f"eps {e:g}: {r:.1f}x (CG residual {res:.0e})" for e, r, res in zip(
                             hd["epsilon"], hd["cholesky_over_cg"], hd["cg_residual"],
                             strict=True))))
    if "cholesky_s" in sc:
        rows.append((f"adjoint solve at n={sc['n'][-1]}: Cholesky (null direction pinned) "
                     "/ CG time", f"{sc['cholesky_over_cg'][-1]:.1f}x (slope Cholesky "
                     f"{sc['slope_cholesky']:.2f}; residual {sc['cholesky_residual'][-1]:.1e})"))
    return rows


# ------------------------------------------------------------------ TensorBoard series


def tb_scalars(config, unit, result, workdir):
    """TensorBoard series of a unit (``study.Experiment.scalars``; module docstring of
    ``experiments.lib.scalars``)."""
    del workdir
    out = {}
    if unit == "scaling":
        a = np.asarray(result, np.float64)
        steps, _ = S.sweep_steps(S.get_field(config, "scaling_sizes"), a.shape[0])
        for j, (run, tag) in enumerate([("cg", "avatar/adjoint_seconds"),
                                        ("dense", "avatar/adjoint_seconds"),
                                        ("cg", "avatar/adjoint_relative_residual"),
                                        ("dense", "avatar/adjoint_relative_residual"),
                                        ("cholesky", "avatar/adjoint_seconds"),
                                        ("cholesky", "avatar/adjoint_relative_residual")]):
            if j < a.shape[1]:
                out[(run, tag)] = (steps, a[:, j])
        return out
    if not isinstance(result, dict) or "metrics" not in result:
        return {}
    m = np.asarray(result["metrics"], np.float64)  # [protocols, metrics, strategies, seeds, R+1]
    protocols = S.run_names(S.get_field(config, "protocols"), m.shape[0], "protocol")
    strategies = S.run_names(S.get_field(config, "strategies"), m.shape[2], "strategy")
    metric_names = S.run_names(METRICS, m.shape[1], "metric")

    def run(p, s):
        return strategies[s] if len(protocols) == 1 else f"{strategies[s]} ({protocols[p]})"

    for p in range(m.shape[0]):
        for s in range(m.shape[2]):
            if strategies[s] in result.get("skipped", ()):  # not defined on this task
                continue
            for k, metric in enumerate(metric_names):
                out[(run(p, s), f"avatar/{metric}")] = (np.arange(m.shape[-1]),
                                                        S.mean(m[p, k, s], 0))
            for field in ("picked", "pool"):
                if field in result:
                    v = np.asarray(result[field], np.float64)[p, s]
                    out[(run(p, s), f"avatar/{field}_already_correct")] = (
                        np.arange(v.shape[-1]), S.mean(v, 0))
    return out


CAPTION = ("Final test MRR after the active rounds per selection strategy (higher is better); "
           "paired differences are AvAtar minus the baseline, so positive favours AvAtar.")

EXPERIMENT = study.Experiment(name="avatar", validate=avatar_config.validate_config, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline,
                              scalars=tb_scalars, caption=CAPTION)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/avatar.py:quick")
