"""The whole-graph AvAtar study (``experiments/avatar_wholegraph.py`` is its command line):
the runs (``run_study``), the summary with the declared paired differences, the REPORT.md /
docs rows (``headline``), the markdown table and the figure. No flags here, so the suite
and the docs generator import it freely. Checkpoints, run keys and the machine's readings:
``wholegraph_runs``; task builds: ``task_cache``."""

import os
import time

import jax
import numpy as np

from jaxlab.avatar import datasets, parrot_official, wholegraph
from jaxlab.core import metrics

from . import provenance, results, task_cache, wholegraph_runs

# The AvAtar paper, Table 3 (MRR after 10 rounds, PARROT aligner): random, entropy, AvAtar.
PAPER = {"acm_dblp": {"random": 0.829, "entropy": 0.926, "avatar": 0.936}}
CAPTION = ("AvAtar's protocol on the whole graphs with PARROT (official settings): test MRR "
           "(both directions) after each round per selection strategy; higher is better.")
FOLDER = "avatar_wholegraph"  # its folder in a suite results folder (REPORT.md, docs)
METRICS = ("mrr", "mrr_st", "mrr_ts", "mrr_st_ties_against", "hits@1", "hits@10", "hits@30",
           "hits@50")
# In the records when measured: the truth first among ties (the earlier tables' ranking),
# the never-queried pairs (``Protocol.heldout_frac``), the removal-only line.
OPTIONAL = ("mrr_truth_first", "mrr_st_truth_first", "heldout_mrr", "heldout_hits@1",
            "removal_mrr", "removal_hits@1")
# The three lines every table gives, with their 95% CIs over seeds and paired differences.
LINES = {"mrr": "the paper's metric (test = pairs not yet queried)",
         "heldout_mrr": "never queried (a test set fixed before round 0)",
         "removal_mrr": "removal only (the round-0 plan on the final test set)"}



# Declared before the runs: (ours or the released score, rival), paired over seeds.
DECLARED = (("avatar", "random"), ("avatar", "entropy"), ("ours", "random"),
            ("ours", "entropy"), ("ours", "density"), ("ours", "avatar"))
GOAL_MARGIN = 0.02  # ours >= max(entropy, density) + 0.02 never-queried MRR, CI above 0


def _goal(done: dict, table: dict) -> dict | None:
    """Ours against the better of entropy and density (the higher mean never-queried MRR),
    paired over seeds: the margin, its 95% CI, and whether the goal holds."""
    rivals = [x for x in ("entropy", "density") if x in table and "heldout_mrr" in table[x]]
    if "ours" not in table or "heldout_mrr" not in table["ours"] or not rivals:
        return None
    rival = max(rivals, key=lambda x: table[x]["heldout_mrr"])
    a, b = done["ours"], done[rival]
    n = min(len(a), len(b))
    if n < 2:
        return None
    d = _paired([r[-1]["heldout_mrr"] for r in a[:n]], [r[-1]["heldout_mrr"] for r in b[:n]])
    return {"rival": rival, **d, "target": GOAL_MARGIN,
            "met": bool(d["mean"] >= GOAL_MARGIN and d["ci95"][0] > 0)}


def _paired(a, b) -> dict:
    d = np.asarray(a) - np.asarray(b)
    mean, half = metrics.mean_and_ci(d)
    return {"mean": float(mean), "ci95": [float(mean - half), float(mean + half)],
            "per_seed": d.tolist()}


def summarize(runs: dict, seeds: int, strategies, rounds: int) -> dict:
    """Final-round means, the declared paired differences, warm-start savings and solver
    diagnostics per dataset (``runs[dataset][strategy][seed]`` = the records of a run)."""
    out = {}
    for name, per in runs.items():
        done = {s: [per[s][k] for k in range(seeds) if k in per[s]
                    and len(per[s][k]) == rounds + 1] for s in strategies if s in per}
        table = {}
        for s, rs in done.items():
            if not rs:
                continue
            final = {m: [r[-1][m] for r in rs] for m in (*METRICS, *OPTIONAL)
                     if all(m in r[-1] for r in rs)}
            table[s] = {m: float(np.mean(v)) for m, v in final.items()}
            table[s]["seeds"] = len(rs)
            for m in (*LINES, "mrr_truth_first"):
                if m in final:
                    table[s][m + "_per_seed"] = final[m]
                    if len(rs) >= 2:
                        table[s][m + "_ci95"] = float(metrics.mean_and_ci(
                            np.asarray(final[m]))[1])
            for m in ("mrr", "mrr_truth_first", "heldout_mrr"):
                if all(m in r[0] for r in rs):
                    table[s]["round0_" + m] = float(np.mean([r[0][m] for r in rs]))
            later = [x for r in rs for x in r[1:]]
            table[s]["round_s_mean"] = float(np.mean([x["round_s"] for x in later]))
            table[s]["round_s_max"] = float(np.max([x["round_s"] for x in later]))
            table[s]["prod_steps_mean"] = float(np.mean([x["prod_steps"] for x in later]))
            table[s]["cg_iterations_mean"] = float(np.mean([x["cg_iterations"] for x in later]))
            for m in ("picked_correct", "picked_entropy", "picked_uncertainty"):
                if all(m in x for x in later):
                    table[s][m] = float(np.mean([x[m] for x in later]))
            if all("heldout_mrr" in x and "anchors" in x for r in rs for x in r):
                # never-queried MRR gained per 100 labels in each round, mean over seeds
                table[s]["heldout_gain_per_100_labels"] = [
                    float(np.mean([100.0 * (r[i]["heldout_mrr"] - r[i - 1]["heldout_mrr"])
                                   / max(r[i]["anchors"] - r[i - 1]["anchors"], 1)
                                   for r in rs])) for i in range(1, rounds + 1)]
        diffs = {}
        for mine, other in DECLARED:
            a, b = done.get(mine, []), done.get(other, [])
            n = min(len(a), len(b))
            if n >= 2:
                for m, label in (("mrr", ""), ("heldout_mrr", ", never queried"),
                                 ("removal_mrr", ", removal only")):
                    if all(m in r[-1] for r in a[:n] + b[:n]):
                        diffs[f"{mine}-{other}{label}"] = _paired(
                            [r[-1][m] for r in a[:n]], [r[-1][m] for r in b[:n]])
        goal = _goal(done, table)
        recs = [x for per_s in per.values() for r in per_s.values() for x in r[1:]]
        cmp_ = [x for x in recs if "prod_steps_cold" in x]
        # round 1's CG has no previous solution to start from: compare from round 2 on
        cg_cmp = [x for x in recs if "cg_iterations_cold" in x and x["round"] >= 2]
        r0 = [r[0] for per_s in per.values() for r in per_s.values()]
        loads = [x["load_avg_1min"] for x in recs if "load_avg_1min" in x]
        warm_starts = {
            "rounds_compared": len(cmp_),
            "prod_steps_cold": float(np.mean([x["prod_steps_cold"] for x in cmp_])) if cmp_
            else None,
            "prod_steps_warm": float(np.mean([x["prod_steps"] for x in cmp_])) if cmp_ else None,
            "cost_gap_max": float(max(x["cost_gap_cold"] for x in cmp_)) if cmp_ else None,
            "cg_cold": float(np.mean([x["cg_iterations_cold"] for x in cg_cmp])) if cg_cmp
            else None,
            "cg_warm": float(np.mean([x["cg_iterations"] for x in cg_cmp])) if cg_cmp else None,
            "round0_prod_steps": float(np.mean([x["prod_steps"] for x in r0])) if r0 else None,
        }
        solver = {
            "peak_rss_gb": float(max(x["peak_rss_gb"] for x in recs + r0)) if recs else None,
            "column_error_max": float(max(x["column_error"] for x in recs + r0)) if recs
            else None,
            "cg_not_converged": int(sum(not x["cg_converged"] for x in recs)),
            "prod_rwr_capped": int(sum(x["prod_change"] > x.get("prod_tol", 1e-2)
                                       for x in recs + r0)),
            "round0_s": float(np.mean([x["solve_s"] for x in r0])) if r0 else None,
            # compute of the table: every round of every run, each seed's round 0 once
            "rounds_h": (sum(x["round_s"] for x in recs)
                         + sum(x["solve_s"] for x in r0) / max(len(per), 1)) / 3600.0
            if recs else None,
            "load_avg_1min": [float(min(loads)), float(max(loads))] if loads else None,
        }
        out[name] = {"table": table, "paired": diffs, "goal": goal, "paper": PAPER.get(name),
                     "warm_starts": warm_starts, "solver": solver}
    return out


def load_ranges(record: dict) -> str:
    """The load along a whole-graph run (each dataset's 1-minute load range over its
    rounds, from ``summary.json``), in words for the machine line."""
    per = (record or {}).get("summary") or {}
    return provenance.load_range_text(
        [(d.get("solver") or {}).get("load_avg_1min") for d in per.values()
         if isinstance(d, dict)])


def _upgrade(s: dict) -> dict:
    """A dataset summary written before ties were ordered at random everywhere (its "mrr"
    ranked the truth first, "mrr_random_ties" at random) in today's names."""
    table = {}
    for strat, t in s["table"].items():
        if "mrr_random_ties" in t and "mrr_truth_first" not in t:
            t = {**t, "mrr_truth_first": t["mrr"], "mrr": t["mrr_random_ties"]}
            t.pop("mrr_ci95", None)
            if "round0_mrr_random_ties" in t:
                t.update(round0_mrr_truth_first=t["round0_mrr"],
                         round0_mrr=t["round0_mrr_random_ties"])
        table[strat] = t
    paired = dict(s["paired"])
    if any(k.endswith(", random tie order") for k in paired):
        paired = {(k[:-len(", random tie order")] if k.endswith(", random tie order")
                   else f"{k}, truth first among ties"): d for k, d in paired.items()}
    return {**s, "table": table, "paired": paired}


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for REPORT.md and the docs: per dataset the final MRR of every
    strategy beside the paper's, the declared paired differences, round times, warm-start
    savings, memory and solver diagnostics (from ``summary.json``'s ``summary``)."""
    rows = []
    for name, s in summary["summary"].items():
        s = _upgrade(s)
        t = s["table"]
        order = [x for x in ("random", "entropy", "density", "avatar", "ours") if x in t]
        if not order:
            rows.append((f"{name}", "no finished run"))
            continue
        seeds = min(t[x]["seeds"] for x in order)
        names = " / ".join(order)

        def with_ci(x, m, t=t):
            ci = t[x].get(m + "_ci95")
            return f"{t[x][m]:.3f}" + ("" if ci is None else f" ± {ci:.3f}")

        for m, label in LINES.items():
            if all(m in t[x] for x in order):
                rows.append((f"{name}: test MRR after the last round, {label} ({names})",
                             " / ".join(with_ci(x, m) for x in order)
                             + f" ({seeds} seeds, 95% CI over seeds, both directions, ties "
                             "in random order)"))
        if s.get("paper"):
            rows.append((f"{name}: the AvAtar paper, Table 3 (random / entropy / AvAtar, "
                         "PARROT)", " / ".join(f"{s['paper'][x]:.3f}"
                                              for x in ("random", "entropy", "avatar"))))
        if all("mrr_truth_first" in t[x] for x in order):
            rows.append((f"{name}: the paper's metric with the truth first among ties "
                         f"({names})", " / ".join(f"{t[x]['mrr_truth_first']:.3f}"
                                                  for x in order)))
        rows.append((f"{name}: source->target MRR, and with ties counted against the truth",
                     " / ".join(f"{t[x]['mrr_st']:.3f} ({t[x]['mrr_st_ties_against']:.3f})"
                                for x in order)))
        for k, d in s["paired"].items():
            rows.append((f"{name}: {k} MRR (paired over seeds, 95% CI)",
                         f"{d['mean']:+.4f} [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]"))
        if s.get("goal"):
            g = s["goal"]
            rows.append((f"{name}: ours - {g['rival']} (the better baseline), never queried "
                         f"MRR; goal >= +{g['target']:.2f} with the CI above 0",
                         f"{g['mean']:+.4f} [{g['ci95'][0]:+.4f}, {g['ci95'][1]:+.4f}]: "
                         + ("met" if g["met"] else "not met")))
        if all("picked_correct" in t[x] for x in order):
            rows.append((f"{name}: share of queries the plan already matched right (pick "
                         "quality: lower means the labels go where the plan is wrong)",
                         " / ".join(f"{t[x]['picked_correct']:.2f}" for x in order)))
        if all("picked_entropy" in t[x] for x in order):
            rows.append((f"{name}: the picks' plan row entropy / log n2, and their "
                         "uncertainty 1 - max_j P_ij (means over rounds)",
                         " / ".join(f"{t[x]['picked_entropy']:.3f}, "
                                    f"{t[x]['picked_uncertainty']:.2f}" for x in order)))
        if all("heldout_gain_per_100_labels" in t[x] for x in order):
            rows.append((f"{name}: never-queried MRR gained per 100 labels, round 1 / middle "
                         "round / last round",
                         " / ".join(f"{g[0]:+.4f}, {g[len(g) // 2]:+.4f}, {g[-1]:+.4f}"
                             for g in (t[x]["heldout_gain_per_100_labels"] for x in order))))
        r0_first = [t[x].get("round0_mrr_truth_first") for x in order]
        rows.append((f"{name}: MRR of the initial anchors (round 0): ties in random order"
                     + (", truth first" if None not in r0_first else ""),
                     f"{np.mean([t[x]['round0_mrr'] for x in order]):.3f}"
                     + (f", {np.mean(r0_first):.3f}" if None not in r0_first else "")))
        rows.append((f"{name}: seconds per round after round 0, mean (max)",
                     ", ".join(f"{x} {t[x]['round_s_mean']:.0f} ({t[x]['round_s_max']:.0f})"
                               for x in order)
                     + f"; round 0 (shared) {s['solver']['round0_s']:.0f}; the table's "
                     f"rounds {s['solver']['rounds_h']:.1f} h in all"))
        w = s["warm_starts"]
        if w["rounds_compared"]:
            cg = (f"; adjoint CG iterations {w['cg_cold']:.0f} from 0, {w['cg_warm']:.0f} warm "
                  "(rounds 2 on)" if w["cg_cold"] is not None else "")
            rows.append((f"{name}: warm starts, side by side in {w['rounds_compared']} rounds",
                         f"product-RWR steps {w['prod_steps_cold']:.1f} from 0, "
                         f"{w['prod_steps_warm']:.1f} warm (max |cost difference| "
                         f"{w['cost_gap_max']:.1e}){cg}; CPOT's 10 x 5 Sinkhorn sweeps are "
                         "PARROT's fixed schedule"))
        v = s["solver"]
        rows.append((f"{name}: peak resident memory (process high-water mark); CPOT "
                     "column-marginal error (max); CG not "
                     "converged", f"{v['peak_rss_gb']:.1f} GB; {v['column_error_max']:.2g}; "
                     f"{v['cg_not_converged']} rounds"))
    return rows


def table_markdown(summary: dict) -> str:
    """Per dataset: the three lines (``LINES``) with their 95% CIs over seeds, the truth
    first among ties, source->target, Hits@1, the paper's figure, seeds, round times."""

    def cell(t, m):
        if m not in t:
            return ""
        ci = t.get(m + "_ci95")
        return f"{t[m]:.3f}" + ("" if ci is None else f" ± {ci:.3f}")

    lines = []
    for name, s in summary.items():
        lines += [f"### {name}", "",
                  "| strategy | paper's metric | never queried | removal only | truth first "
                  "among ties | source->target | Hits@1 | paper | seeds | s / round (mean, "
                  "max) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for strat, t in s["table"].items():
            paper = (s["paper"] or {}).get(strat)
            lines.append(f"| {strat} | {cell(t, 'mrr')} | {cell(t, 'heldout_mrr')} | "
                         f"{cell(t, 'removal_mrr')} | {cell(t, 'mrr_truth_first')} | "
                         f"{t['mrr_st']:.3f} | {t['hits@1']:.3f} | "
                         f"{'' if paper is None else f'{paper:.3f}'} | {t['seeds']} | "
                         f"{t['round_s_mean']:.0f}, {t['round_s_max']:.0f} |")
        lines.append("\nMRR after the last round, both directions, ties in random order, "
                     "± the 95% CI half-width over seeds. Paper's metric: the test set is "
                     "every pair not yet queried. Never queried: a test set drawn before "
                     "round 0 that no strategy may query. Removal only: the round-0 plan "
                     "scored on the final test set, i.e. what removing the queried pairs "
                     "alone gives.")
        for k, d in s["paired"].items():
            lines.append(f"\n{k}: {d['mean']:+.4f} MRR, 95% CI [{d['ci95'][0]:+.4f}, "
                         f"{d['ci95'][1]:+.4f}] (paired over {len(d['per_seed'])} seeds)")
        lines.append("")
    return "\n".join(lines)


def plot(runs: dict, path: str, rounds: int) -> None:
    """``mrr.png``: test MRR per round, mean over the finished seeds with a 95% t band."""
    from matplotlib.ticker import MaxNLocator

    from . import plots

    names = list(runs)
    fig, axes = plots.figure(len(names), width=5.0, height=3.8)
    for ax, name in zip(np.ravel(axes), names, strict=False):
        for strat, per in runs[name].items():
            rs = [r for r in per.values() if len(r) == rounds + 1]
            if len(rs) < 2:
                continue
            y = np.array([[x["mrr"] for x in r] for r in rs])
            mean, half = metrics.mean_and_ci(y)
            plots.line_with_band(ax, np.arange(y.shape[1]), mean, half, label=strat)
        ax.set_title(name)
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel("test MRR (paper's metric, ties in random order)")
        ax.legend(fontsize=8)
    seeds = min((len(per) for r in runs.values() for per in r.values()), default=0)
    plots.save(fig, path, caption=plots.t_band(seeds))


def run_study(workdir: str, datasets_=("acm_dblp", "foursquare_twitter"), seeds: int = 3,
              strategies=("avatar", "random", "entropy", "density", "ours"), rounds: int = 10,
              warm: bool = True, cg_tol: float = 1e-4, compare_cold_rounds: int = 3,
              heldout_frac: float = 0.2, log=print) -> dict:
    """Runs (or resumes) the whole-graph study into ``workdir`` and writes its outputs.

    Args:
      workdir: output folder (``summary.json``, ``table.md``, ``mrr.png``, checkpoints/).
      datasets_: shipped dataset names, in order; seeds: seeds 0 .. seeds - 1;
      strategies: ``wholegraph.STRATEGIES`` names, run in this order per seed;
      rounds: query rounds; warm: warm starts; cg_tol: AvAtar's CG tolerance;
      compare_cold_rounds: rounds of seed 0 also run from 0 (the warm-start saving).
      heldout_frac: share of the pairs never queried (``wholegraph.Protocol``; 0: none,
        then the table has no never-queried line).
      log: callable taking one progress line.

    Returns:
      The dict written to ``summary.json``.

    Raises:
      ValueError: an unknown dataset or strategy, ``seeds`` < 1, a bad protocol field.
    """
    for s in strategies:
        if s not in wholegraph.STRATEGIES:
            raise ValueError(f"`strategies`: {s!r} is not one of {wholegraph.STRATEGIES}.")
    for d in datasets_:
        if d not in parrot_official.SETTINGS:
            raise ValueError(f"`datasets`: {d!r} is not one of "
                             f"{tuple(parrot_official.SETTINGS)}.")
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise ValueError(f"`seeds` must be an int >= 1, got {seeds!r}.")
    strategies, datasets_ = list(strategies), list(datasets_)
    ckpt = os.path.join(workdir, "checkpoints")
    os.makedirs(ckpt, exist_ok=True)
    p = wholegraph.Protocol(rounds=rounds, cg_tol=cg_tol, warm=warm,
                            heldout_frac=float(heldout_frac))
    wholegraph.check_protocol(p)
    config = {"datasets": datasets_, "seeds": seeds, "strategies": strategies,
              "protocol": p._asdict(), "compare_cold_rounds": compare_cold_rounds}
    runs: dict = {}
    build_s = {}
    t_start = time.time()
    for name in datasets_:
        s = parrot_official.SETTINGS[name]
        config[f"settings_{name}"] = s._asdict()
        t0 = time.perf_counter()
        pair = datasets.load_pair(name)
        task = task_cache.cached_task(pair, s.restart, log=log)
        g = parrot_official.prepare(task, pair.adj1, pair.adj2, s)
        host = parrot_official.host_products(g)
        build_s[name] = time.perf_counter() - t0
        data_key = task_cache.digest(pair, s.restart)
        log(f"{name}: task ready in {build_s[name]:.1f} s")
        runs[name] = {st: {} for st in strategies}
        for seed in range(seeds):
            r0_key = wholegraph_runs.run_key(data_key, s, p, "round0", seed)
            r0_path = os.path.join(ckpt, f"{name}-round0-seed{seed}.npz")
            round0 = wholegraph_runs.load_checkpoint(r0_path, r0_key)
            if round0 is None:
                log(f"{name} seed {seed}: round 0 (initial anchors, shared by strategies)")
                round0 = wholegraph.solve_round0(jax.random.key(seed), task, g, s, p,
                                                 host=host,
                                                 measure=wholegraph_runs.machine_readings)
                wholegraph_runs.save_checkpoint(r0_path, r0_key, round0)
                log(f"  round 0: MRR {round0.records[0]['mrr']:.4f} "
                    f"({round0.records[0]['solve_s']:.1f} s)")
            for strat in strategies:
                folder = os.path.join(ckpt, name)
                compare = seed == 0 and compare_cold_rounds > 0
                recs = wholegraph_runs.run_resumable(
                    task, g, s, p, strat, seed, folder, data_key, round0=round0,
                    compare_cold=compare, compare_rounds=compare_cold_rounds, host=host,
                    log=log)
                runs[name][strat][seed] = recs
                results.write_json(os.path.join(workdir, "progress.json"),
                                   {"config": config, "runs": runs, "build_s": build_s})
            # Release this seed's round 0 before the next one is loaded (two [n1, n2] solves
            # would otherwise be alive at once), and the task before the next dataset's.
            del round0
        del pair, task, g, host
    summary = summarize(runs, seeds, strategies, rounds)
    out = {"config": config, "summary": summary, "runs": runs, "build_s": build_s,
           "wall_s": time.time() - t_start, "machine": provenance.machine(),
           "environment": provenance.environment(), "git": provenance.git_state(),
           "packages": provenance.package_versions()}
    results.write_json(os.path.join(workdir, "summary.json"), out)
    md = table_markdown(summary)
    results.atomic_write_text(os.path.join(workdir, "table.md"), md + "\n")
    plot(runs, os.path.join(workdir, "mrr.png"), rounds)
    log(md)
    return out


# PARROT's plain ACM-DBLP script (experiments/ACM_DBLP_P.m: the graphs without attributes).
# AvAtar's code runs PARROT without attributes unless --use_attr is given; this variant
# measures what that changes (``round0_variants``).
ACM_DBLP_PLAIN = parrot_official.Settings(alpha=0.1, restart=0.5, gamma=0.9, lambda_p=1e-3,
                                          lambda_n=4e-4, lambda_a=1e-2, lambda_e=1e-5)


def round0_variants(seed: int = 0, log=print) -> dict:
    """Round-0 test MRR of ACM-DBLP (20% anchors of ``seed``) with PARROT's attributed
    script (the study's aligner) and with its plain script on the graphs without
    attributes: what AvAtar's default (no ``--use_attr``) would align with."""
    pair = datasets.load_pair("acm_dblp")
    out = {}
    for label, s, attributed in (("attributed (ACM_DBLP_A.m)", parrot_official.ACM_DBLP,
                                  True), ("plain (ACM_DBLP_P.m)", ACM_DBLP_PLAIN, False)):
        p = pair if attributed else pair._replace(feat1=pair.feat1[:, :0],
                                                  feat2=pair.feat2[:, :0])
        task = task_cache.cached_task(p, s.restart, log=log)
        g = parrot_official.prepare(task, p.adj1, p.adj2, s)
        r0 = wholegraph.solve_round0(jax.random.key(seed), task, g, s, wholegraph.Protocol(),
                                     host=parrot_official.host_products(g),
                                     measure=wholegraph_runs.machine_readings)
        rec = dict(r0.records[0])
        out[label] = rec
        log(f"{label}: MRR {rec['mrr']:.4f} (ties in random order), truth first "
            f"{rec['mrr_truth_first']:.4f}, source->target {rec['mrr_st']:.4f} "
            f"({rec['solve_s']:.0f} s)")
    return out
