"""AvAtar on the whole ACM-DBLP and Foursquare-Twitter graphs, the paper's protocol.

AvAtar's protocol (``jaxlab.avatar.wholegraph``) with PARROT as its official code runs it
(``jaxlab.avatar.parrot_official``, the official per-dataset settings): 20% of the
ground-truth pairs as initial anchors, 10 rounds of floor(0.2 k / 10) queries, the test
set every unanchored pair; strategies random, entropy, density and AvAtar (official score,
sq_l2 utility); paired seeds (each seed's initial anchors are shared by its strategies,
and so is its round-0 solve). The comparison is declared here, before any run: AvAtar
minus random and AvAtar minus entropy in MRR after round 10, paired over seeds, mean and
95% Student-t interval; nothing is tuned (PARROT's settings are the official scripts').

Writes ``<workdir>/summary.json`` (every round of every run: metrics, times, solver
diagnostics, memory; the table; the machine, versions and git commit), ``table.md`` and
``mrr.png``. A run stopped at any point resumes from ``<workdir>/checkpoints`` (at most
the round in progress is lost; checkpoints of another configuration or code version are
not read). The task builds are cached (``jaxlab.avatar.task_cache``).

  python -m experiments.avatar_wholegraph --workdir=results/avatar_wholegraph
  python -m experiments.avatar_wholegraph --workdir=/tmp/wg --datasets=foursquare_twitter \\
      --seeds=1 --strategies=random,avatar --rounds=2
"""

import json
import os
import sys
import time

import numpy as np
from absl import app, flags

from experiments.lib import provenance, results
from jaxlab.avatar import datasets, parrot_official, task_cache, wholegraph
from jaxlab.core import metrics

_WORKDIR = flags.DEFINE_string("workdir", None, "Output folder (results + checkpoints).")
_DATASETS = flags.DEFINE_list("datasets", ["acm_dblp", "foursquare_twitter"],
                              "Whole graph pairs, in order.")
_SEEDS = flags.DEFINE_integer("seeds", 3, "Paired seeds 0 .. seeds - 1.")
_STRATEGIES = flags.DEFINE_list("strategies", ["avatar", "random", "entropy", "density"],
                                "Strategies (wholegraph.STRATEGIES), run in this order per seed.")
_ROUNDS = flags.DEFINE_integer("rounds", 10, "Query rounds (the paper: 10).")
_WARM = flags.DEFINE_bool("warm", True, "Warm starts between rounds.")
_CG_TOL = flags.DEFINE_float("cg_tol", 1e-4, "Relative residual of AvAtar's adjoint CG.")
_COMPARE_ROUNDS = flags.DEFINE_integer(
    "compare_cold_rounds", 3, "On seed 0, also run the product RWR and the CG from zero in "
    "the first this many rounds (the warm-start saving, side by side).")

# The AvAtar paper, Table 3 (MRR after 10 rounds, PARROT aligner): random, entropy, AvAtar.
PAPER = {"acm_dblp": {"random": 0.829, "entropy": 0.926, "avatar": 0.936}}
METRICS = ("mrr", "mrr_st", "mrr_ts", "mrr_st_ties_against", "hits@1", "hits@10", "hits@30",
           "hits@50")


def _log(msg: str) -> None:
    print(msg, flush=True)


def _paired(a, b) -> dict:
    d = np.asarray(a) - np.asarray(b)
    mean, half = metrics.mean_and_ci(d)
    return {"mean": float(mean), "ci95": [float(mean - half), float(mean + half)],
            "per_seed": d.tolist()}


def summarize(runs: dict, seeds: int, strategies) -> dict:
    """Final-round means and the declared paired differences per dataset."""
    out = {}
    for name, per in runs.items():
        done = {s: [per[s][k] for k in range(seeds) if k in per[s]
                    and len(per[s][k]) == _ROUNDS.value + 1] for s in strategies if s in per}
        table = {}
        for s, rs in done.items():
            if not rs:
                continue
            final = {m: [r[-1][m] for r in rs] for m in METRICS}
            table[s] = {m: float(np.mean(v)) for m, v in final.items()}
            table[s]["seeds"] = len(rs)
            table[s]["mrr_per_seed"] = final["mrr"]
            table[s]["round0_mrr"] = float(np.mean([r[0]["mrr"] for r in rs]))
            later = [x for r in rs for x in r[1:]]
            table[s]["round_s_mean"] = float(np.mean([x["round_s"] for x in later]))
            table[s]["round_s_max"] = float(np.max([x["round_s"] for x in later]))
            table[s]["prod_steps_mean"] = float(np.mean([x["prod_steps"] for x in later]))
            table[s]["cg_iterations_mean"] = float(np.mean([x["cg_iterations"] for x in later]))
        diffs = {}
        for other in ("random", "entropy"):
            a, b = done.get("avatar", []), done.get(other, [])
            n = min(len(a), len(b))
            if n >= 2:
                diffs[f"avatar-{other}"] = _paired([r[-1]["mrr"] for r in a[:n]],
                                                   [r[-1]["mrr"] for r in b[:n]])
        out[name] = {"table": table, "paired": diffs, "paper": PAPER.get(name)}
    return out


def table_markdown(summary: dict) -> str:
    lines = []
    for name, s in summary.items():
        lines += [f"### {name}", "",
                  "| strategy | MRR after 10 rounds (both directions) | source->target | "
                  "ties counted against | Hits@1 | paper | seeds | s / round (mean, max) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for strat, t in s["table"].items():
            paper = (s["paper"] or {}).get(strat)
            lines.append(f"| {strat} | {t['mrr']:.3f} | {t['mrr_st']:.3f} | "
                         f"{t['mrr_st_ties_against']:.3f} | {t['hits@1']:.3f} | "
                         f"{'' if paper is None else f'{paper:.3f}'} | {t['seeds']} | "
                         f"{t['round_s_mean']:.0f}, {t['round_s_max']:.0f} |")
        for k, d in s["paired"].items():
            lines.append(f"\n{k}: {d['mean']:+.4f} MRR, 95% CI [{d['ci95'][0]:+.4f}, "
                         f"{d['ci95'][1]:+.4f}] (paired over {len(d['per_seed'])} seeds)")
        lines.append("")
    return "\n".join(lines)


def plot(runs: dict, path: str) -> None:
    from experiments.lib import plots

    names = list(runs)
    fig, axes = plots.figure(len(names), width=5.0, height=3.8)
    for ax, name in zip(np.ravel(axes), names, strict=False):
        for strat, per in runs[name].items():
            rs = [r for r in per.values() if len(r) == _ROUNDS.value + 1]
            if len(rs) < 2:
                continue
            y = np.array([[x["mrr"] for x in r] for r in rs])
            mean, half = metrics.mean_and_ci(y)
            plots.line_with_band(ax, np.arange(y.shape[1]), mean, half, label=strat)
        ax.set_title(name)
        ax.set_xlabel("round")
        ax.set_ylabel("test MRR (both directions)")
        ax.legend(title=plots.t_band(len(rs)) if runs[name] else None)
    plots.save(fig, path)


def main(argv):
    del argv
    if not _WORKDIR.value:
        print("--workdir is required.", file=sys.stderr)
        sys.exit(2)
    for s in _STRATEGIES.value:
        if s not in wholegraph.STRATEGIES:
            raise ValueError(f"`--strategies`: {s!r} is not one of {wholegraph.STRATEGIES}.")
    for d in _DATASETS.value:
        if d not in parrot_official.SETTINGS:
            raise ValueError(f"`--datasets`: {d!r} is not one of "
                             f"{tuple(parrot_official.SETTINGS)}.")
    if _SEEDS.value < 1:
        raise ValueError(f"`--seeds` must be >= 1, got {_SEEDS.value}.")
    work = _WORKDIR.value
    ckpt = os.path.join(work, "checkpoints")
    os.makedirs(ckpt, exist_ok=True)
    p = wholegraph.Protocol(rounds=_ROUNDS.value, cg_tol=_CG_TOL.value, warm=_WARM.value)
    wholegraph.check_protocol(p)
    config = {"datasets": _DATASETS.value, "seeds": _SEEDS.value,
              "strategies": _STRATEGIES.value, "protocol": p._asdict(),
              "compare_cold_rounds": _COMPARE_ROUNDS.value}
    runs: dict = {}
    build_s = {}
    t_start = time.time()
    for name in _DATASETS.value:
        s = parrot_official.SETTINGS[name]
        config[f"settings_{name}"] = s._asdict()
        t0 = time.perf_counter()
        pair = datasets.load_pair(name)
        task = datasets.full_task(name, restart=s.restart, log=_log)
        g = parrot_official.prepare(task, pair.adj1, pair.adj2, s)
        host = parrot_official.host_products(g)
        build_s[name] = time.perf_counter() - t0
        data_key = task_cache.digest(pair, s.restart)
        _log(f"{name}: task ready in {build_s[name]:.1f} s")
        runs[name] = {st: {} for st in _STRATEGIES.value}
        for seed in range(_SEEDS.value):
            r0_key = wholegraph.run_key(data_key, s, p, "round0", seed)
            r0_path = os.path.join(ckpt, f"{name}-round0-seed{seed}.npz")
            got = wholegraph.load_checkpoint(r0_path, r0_key)
            if got is None:
                _log(f"{name} seed {seed}: round 0 (initial anchors, shared by strategies)")
                anchors, rnd, rec = wholegraph.solve_round0(task, g, s, p, seed, host)
                wholegraph.save_checkpoint(r0_path, r0_key, 0, anchors, rnd, [rec])
                _log(f"  round 0: MRR {rec['mrr']:.4f} ({rec['solve_s']:.1f} s)")
            else:
                _, anchors, rnd, recs = got
                rec = recs[0]
            for strat in _STRATEGIES.value:
                folder = os.path.join(ckpt, name)
                compare = seed == 0 and _COMPARE_ROUNDS.value > 0
                recs = wholegraph.run(task, g, s, p, strat, seed, folder, data_key,
                                      round0=(anchors, rnd, rec), compare_cold=compare,
                                      compare_rounds=_COMPARE_ROUNDS.value, host=host,
                                      log=_log)
                runs[name][strat][seed] = recs
                partial = {"config": config, "runs": runs, "build_s": build_s}
                results.write_json(os.path.join(work, "progress.json"), partial)
    summary = summarize(runs, _SEEDS.value, _STRATEGIES.value)
    md = table_markdown(summary)
    out = {"config": config, "summary": summary, "runs": runs, "build_s": build_s,
           "wall_s": time.time() - t_start, "machine": provenance.machine(),
           "environment": provenance.environment(), "git": provenance.git_state(),
           "packages": provenance.package_versions()}
    results.write_json(os.path.join(work, "summary.json"), out)
    results.atomic_write_text(os.path.join(work, "table.md"), md + "\n")
    plot(runs, os.path.join(work, "mrr.png"))
    _log(md)
    _log(json.dumps({"wall_s": out["wall_s"]}))


if __name__ == "__main__":
    app.run(main)
