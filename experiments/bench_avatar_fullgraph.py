"""Benchmark: one solve of the PARROT-class and simple aligners on a whole graph pair.

The whole ACM-DBLP / Foursquare-Twitter pair (``datasets.full_task``, cached: sparse
``tasks.GraphTask``, [n1, n2] plans), 20% of the ground-truth pairs as random anchors
(``--seed``), test = the other ground-truth pairs. Prints (and writes ``--out`` as JSON):
the task build time; per phase (PARROT cost, each proximal Sinkhorn subproblem, the simple
aligner's cost and Sinkhorn solve) the compile and run seconds, the peak resident memory
of the phase (sampled from /proc every 50 ms) and XLA's temporary buffer bytes; Sinkhorn
iterations, convergence flag and marginal L1 error; MRR (both directions, as the loop's
``alignment.pair_metrics``; each direction too) and Hits@{1,10,30,50} on the test pairs.
``--sinkhorn_max_iterations`` caps each subproblem (a capped run measures the
per-iteration cost; its plan is then not converged, which the output says).
``--memory`` instead compiles (does not run) the active loop (``loop._run``, vmapped over
``--seeds`` keys, the full preset's strategy table minus avatar-gain, both aligners) at the
full shapes (a zero-filled task of those shapes, ``_shape_task``) and prints XLA's buffer
sizes in [n1, n2] float32 units.

  python -m experiments.bench_avatar_fullgraph --dataset=foursquare_twitter
  python -m experiments.bench_avatar_fullgraph --dataset=acm_dblp \\
      --simple_max_iterations=200
  python -m experiments.bench_avatar_fullgraph --dataset=acm_dblp --memory --seeds=1,16
"""

import json
import os
import resource
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from jaxlab.avatar import alignment, datasets, loop, parrot, solvers, tasks

from .lib import task_cache

_DATASET = flags.DEFINE_enum("dataset", "foursquare_twitter", list(datasets.DATASETS),
                             "Whole graph pair.")
_ALIGNERS = flags.DEFINE_list("aligners", ["parrot", "simple"], "parrot and / or simple.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the random anchors.")
_ANCHOR_FRAC = flags.DEFINE_float("anchor_frac", 0.2, "Share of the pairs used as anchors.")
_EPSILON = flags.DEFINE_float("epsilon", 0.05, "The simple aligner's eps (config default).")
_THRESHOLD = flags.DEFINE_float("sinkhorn_threshold", 1e-4, "Sinkhorn L1 marginal tolerance.")
_MAX_ITERS = flags.DEFINE_integer("sinkhorn_max_iterations", 10000,
                                  "Cap per Sinkhorn subproblem.")
_SIMPLE_MAX_ITERS = flags.DEFINE_integer("simple_max_iterations", None,
                                         "Cap of the simple aligner's Sinkhorn (default: "
                                         "--sinkhorn_max_iterations).")
_MEMORY = flags.DEFINE_bool("memory", False, "Compile the active loop and print its buffers.")
_SEEDS = flags.DEFINE_list("seeds", ["1", "16"], "--memory: numbers of seeds vmapped.")
_OUT = flags.DEFINE_string("out", "", "JSON file for the results.")


class PeakRss:
    """Samples the resident set size (/proc/self/statm) every 50 ms; ``take()`` returns the
    peak (GB) since the last ``take()``."""

    def __init__(self):
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._peak = 0
        self._stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def _rss(self) -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * self._page

    def _run(self):
        while not self._stop:
            self._peak = max(self._peak, self._rss())
            time.sleep(0.05)

    def take(self) -> float:
        peak, self._peak = max(self._peak, self._rss()), 0
        return peak / 1e9


def _timed(fn, *args):
    """(result, compile s, run s, XLA temp GB) of ``jax.jit(fn)(*args)``, compiled ahead."""
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    t1 = time.perf_counter()
    out = jax.block_until_ready(compiled(*args))
    t2 = time.perf_counter()
    mem = compiled.memory_analysis()
    temp = getattr(mem, "temp_size_in_bytes", float("nan")) / 1e9 if mem is not None else None
    return out, t1 - t0, t2 - t1, temp


def _metrics(plan, task, test) -> dict:
    src, tgt = tasks.pair_nodes(task)
    m = jax.jit(alignment.pair_metrics)(plan, src, tgt, test)
    r_st, r_ts = jax.jit(alignment.ranks_of_pairs)(plan, src, tgt)
    w = np.asarray(test)
    out = {k: float(v) for k, v in m.items()}
    out["mrr_s2t"] = float(np.mean(1.0 / (np.asarray(r_st)[w] + 1.0)))
    out["mrr_t2s"] = float(np.mean(1.0 / (np.asarray(r_ts)[w] + 1.0)))
    return out


def _plan_report(res: solvers.PlanResult) -> dict:
    return {"iterations": int(res.iterations), "converged": bool(res.converged),
            "marginal_error": float(res.marginal_error)}


def _phase(log, rss, name, fn, *args):
    out, comp, run, temp = _timed(fn, *args)
    log[name] = {"compile_s": comp, "run_s": run, "peak_rss_gb": rss.take(),
                 "xla_temp_gb": temp}
    print(f"  {name}: compile {comp:.1f}s, run {run:.1f}s, peak RSS {log[name]['peak_rss_gb']:.2f}"
          f" GB, XLA temp {temp:.2f} GB", flush=True)
    return out


def _parrot(task, mask, test, rss) -> dict:
    s = parrot.PARROT_DEFAULTS
    thr, cap = _THRESHOLD.value, _MAX_ITERS.value
    log = {"max_iterations": cap}
    cost = _phase(log, rss, "parrot_cost", lambda t, m: parrot.parrot_cost(t, m, s), task, mask)
    logh = jax.jit(parrot.log_prior)(task, mask)
    plan = jnp.full(cost.shape, 1.0 / cost.size, cost.dtype)
    subs = []
    for k in range(s.prox_iters):  # parrot_solve's loop, one jitted phase per step
        res = _phase(log, rss, f"parrot_sinkhorn_{k}",
                     lambda t, c, h, p, k=k: parrot.proximal_step(t, c, h, p, s, k == 0, thr,
                                                                  cap), task, cost, logh, plan)
        subs.append(_plan_report(res))
        print(f"    subproblem {k}: {subs[-1]}", flush=True)
        plan = res.plan
    log["subproblems"] = subs
    log["metrics"] = _metrics(plan, task, test)
    return log


def _simple(task, mask, test, rss) -> dict:
    cap = _SIMPLE_MAX_ITERS.value or _MAX_ITERS.value
    log = {"max_iterations": cap}
    cost = _phase(log, rss, "simple_cost", lambda t, m: alignment.anchor_cost(t, m), task, mask)
    res = _phase(log, rss, "simple_sinkhorn",
                 lambda c: solvers.entropic_solve(c, _EPSILON.value, _THRESHOLD.value,
                                                  cap), cost)
    log["subproblems"] = [_plan_report(res)]
    print(f"    {log['subproblems'][0]}", flush=True)
    log["metrics"] = _metrics(res.plan, task, test)
    return log


def _shape_task(name: str) -> tasks.GraphTask:
    """A ``GraphTask`` with the shapes of the whole pair ``name`` (its real sparse
    adjacencies and pairs, zeros for the dense features): enough to compile, built in
    seconds (no RWR solve, no betweenness)."""
    d = datasets.load_pair(name)
    n1, n2 = d.adj1.shape[0], d.adj2.shape[0]
    k = d.pairs.shape[0]
    return tasks.GraphTask(
        feat1=d.feat1, feat2=d.feat2, pos1=np.zeros((n1, k), np.float32),
        pos2=np.zeros((n2, k), np.float32),
        adj1=tasks.to_bcoo(tasks.sym_norm_adjacency(d.adj1)),
        adj2=tasks.to_bcoo(tasks.sym_norm_adjacency(d.adj2)),
        src=d.pairs[:, 0].astype(np.int32), tgt=d.pairs[:, 1].astype(np.int32),
        degree=np.zeros(n1), betweenness=np.zeros(n1))


def _memory(task) -> dict:
    """XLA buffer sizes of the full preset's active loop at this task's shapes (compiled,
    not run; CPU buffer assignment), in bytes and in [n1, n2] float32 units."""
    from .configs import avatar as cfg

    c = cfg.get_config("full")
    n1, n2 = tasks.plan_shape(task)
    unit = n1 * n2 * 4
    k = tasks.num_pairs(task)
    per_round = loop.budget_sizes(k, 0.0, c.init_frac, c.budget_frac, c.rounds)[2]
    out = {}
    for aligner, solver in (("simple", "ot"), ("parrot", "parrot")):
        names = [x for x in c.strategies
                 if loop.graph_task_limit(*loop.parse_strategy(x), c.utility, solver) is None]
        table = tuple(loop.parse_strategy(x) for x in names)
        run = jax.vmap(lambda t, key, i, solver=solver, table=table: loop._run(
            key, t, c.epsilon, 1.0, 1.0, strategy=table, rounds=c.rounds, test_frac=0.0,
            init_frac=c.init_frac, per_round=per_round, utility=c.utility, solver=solver,
            sinkhorn_threshold=c.sinkhorn_threshold,
            sinkhorn_max_iterations=c.sinkhorn_max_iterations, cg_tol=c.cg_tol, score="abs",
            utility_weights=None, protocol="paper", strategy_index=i),
            in_axes=(None, 0, None))
        for seeds in map(int, _SEEDS.value):
            keys = jax.random.split(jax.random.key(0), seeds)
            t0 = time.perf_counter()
            compiled = jax.jit(run).lower(task, keys, jnp.int32(0)).compile()
            mem = compiled.memory_analysis()
            row = {"compile_s": time.perf_counter() - t0, "strategies": names, "seeds": seeds}
            for f in ("temp_size_in_bytes", "argument_size_in_bytes", "output_size_in_bytes"):
                v = getattr(mem, f, None)
                row[f] = v
                if v is not None:
                    row[f.replace("_in_bytes", "_nm_units")] = v / unit
            out[f"{aligner}_{seeds}"] = row
            print(f"  {aligner}, {seeds} seed(s): {row}", flush=True)
    return out


def main(argv):
    del argv
    rss = PeakRss()
    name = _DATASET.value
    info = {"dataset": name, "backend": jax.default_backend(), "jax": jax.__version__,
            "seed": _SEED.value}
    t0 = time.perf_counter()
    task = _shape_task(name) if _MEMORY.value else task_cache.full_task(name)
    info["build_s"] = time.perf_counter() - t0
    info["build_peak_rss_gb"] = rss.take()
    n1, n2 = tasks.plan_shape(task)
    k = tasks.num_pairs(task)
    info.update(n1=n1, n2=n2, pairs=k, nnz1=int(task.adj1.nse), nnz2=int(task.adj2.nse))
    print(f"{name}: {n1} x {n2} nodes, {k} pairs, built in {info['build_s']:.1f}s "
          f"(peak RSS {info['build_peak_rss_gb']:.2f} GB)", flush=True)
    if _MEMORY.value:
        info["memory"] = _memory(task)
    else:
        order = np.random.default_rng(_SEED.value).permutation(k)
        anchors = np.zeros(k, bool)
        anchors[order[:int(round(_ANCHOR_FRAC.value * k))]] = True
        mask, test = jnp.asarray(anchors), jnp.asarray(~anchors)
        info["anchors"], info["test"] = int(anchors.sum()), int((~anchors).sum())
        for aligner in _ALIGNERS.value:
            print(f" {aligner}:", flush=True)
            fn = {"parrot": _parrot, "simple": _simple}[aligner]
            info[aligner] = fn(task, mask, test, rss)
            print(f"  metrics: {info[aligner]['metrics']}", flush=True)
    info["ru_maxrss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # KiB
    print(f"peak RSS of the process (ru_maxrss): {info['ru_maxrss_gb']:.2f} GB")
    if _OUT.value:
        with open(_OUT.value, "w") as f:
            json.dump(info, f, indent=1)


if __name__ == "__main__":
    app.run(main)
