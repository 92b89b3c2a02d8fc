"""The AvAtar score-variant search on synthetic validation pairs
(``experiments/avatar_variants.py`` is its command line): the declared grid, the runs, the
summary with the declared pick, the markdown table, the figure and the docs rows. No flags
here, so the docs generator imports it freely."""

import os
import time

import jax
import numpy as np

from jaxlab.avatar import parrot_official, wholegraph
from jaxlab.core import metrics

from . import avatar_families, provenance

FOLDER = "avatar_variants"  # its results folder and evidence page
CAPTION = ("AvAtar's score variants (ours) on synthetic validation pairs: never-queried MRR "
           "after the last round, mean over the pairs; higher is better.")


T = wholegraph.Teaching
# (strategy, Teaching or None): the baselines, the released score, then the declared grid.
BASELINES = (("random", None), ("entropy", None), ("density", None), ("avatar", None))
GRID = (("avatar_uncertain", T(1.0, 1.0)),
        ("avatar_discounted", T(1.0, 1.0)), ("avatar_discounted", T(4.0, 1.0)),
        ("avatar_discounted", T(16.0, 1.0)),
        ("avatar_density", T(1.0, 0.5)), ("avatar_density", T(1.0, 1.0)),
        ("avatar_density", T(1.0, 2.0)), ("avatar_density", T(4.0, 0.5)),
        ("avatar_density", T(4.0, 1.0)), ("avatar_density", T(4.0, 2.0)),
        ("avatar_discounted", T(4.0, 1.0, 0.5)), ("avatar_discounted", T(16.0, 1.0, 0.5)),
        ("avatar_density", T(4.0, 1.0, 0.5)))

def label(strategy: str, teach) -> str:
    """A run's name: the strategy, with its Teaching parameters for a variant."""
    if teach is None:
        return strategy
    parts = [f"power={teach.power:g}"]
    if strategy == "avatar_density":
        parts.append(f"weight={teach.weight:g}")
    if teach.diversity:
        parts.append(f"diversity={teach.diversity:g}")
    return f"{strategy}({', '.join(parts)})"


def _final(records: list[dict]) -> dict:
    later = records[1:]
    last = records[-1]
    return {"mrr": last["mrr"], "heldout_mrr": last["heldout_mrr"],
            "removal_mrr": last["removal_mrr"],
            "heldout_by_round": [r["heldout_mrr"] for r in records],
            "picked_correct": float(np.mean([r["picked_correct"] for r in later])),
            "picked_entropy": float(np.mean([r["picked_entropy"] for r in later])),
            "picked_uncertainty": float(np.mean([r["picked_uncertainty"] for r in later]))}


def run_all(families, settings_names, seeds, num_nodes, rounds, cg_tol=1e-5,
            log=print) -> dict:
    """Every (pair, strategy) run's final values: ``{pair: {label: _final}}``."""
    protocol = wholegraph.Protocol(rounds=rounds, heldout_frac=0.2, cg_tol=cg_tol)
    out = {}
    for family in families:
        for sname in settings_names:
            s = parrot_official.SETTINGS[sname]
            for seed in range(1000, 1000 + seeds):
                name = f"{family}/{sname}/{seed}"
                task, a1, a2 = avatar_families.validation_task(family, num_nodes, seed,
                                                               s.restart)
                g = parrot_official.prepare(task, a1, a2, s)
                host = parrot_official.host_products(g)
                key = jax.random.key(seed)
                r0 = wholegraph.solve_round0(key, task, g, s, protocol, host=host)
                out[name] = {"round0_heldout_mrr": r0.records[0]["heldout_mrr"],
                             "pairs": int(len(task.src)), "load_avg_1min": [os.getloadavg()[0]]}
                t0 = time.perf_counter()
                for strategy, teach in (*BASELINES, *GRID):
                    st = wholegraph.run(key, task, g, s, protocol, strategy, state=r0,
                                        host=host, teach=teach)
                    out[name][label(strategy, teach)] = _final(st.records)
                out[name]["load_avg_1min"].append(os.getloadavg()[0])
                log(f"{name}: {len(task.src)} pairs, {len(BASELINES) + len(GRID)} strategies "
                    f"in {time.perf_counter() - t0:.0f} s")
    return out


def summarize(runs: dict) -> dict:
    """Per strategy: means over the pairs, the never-queried margin over max(entropy,
    density) with a 95% t interval, and the declared pick."""
    names = [label(s, t) for s, t in (*BASELINES, *GRID)]
    table = {}
    for n in names:
        vals = {m: np.array([runs[p][n][m] for p in runs]) for m in
                ("mrr", "heldout_mrr", "removal_mrr", "picked_correct", "picked_entropy",
                 "picked_uncertainty")}
        rival = np.array([max(runs[p]["entropy"]["heldout_mrr"],
                              runs[p]["density"]["heldout_mrr"]) for p in runs])
        gain = vals["heldout_mrr"] - np.array([runs[p]["round0_heldout_mrr"] for p in runs])
        margin = vals["heldout_mrr"] - rival
        mean, half = (metrics.mean_and_ci(margin) if len(margin) >= 2
                      else (float(margin.mean()), float("nan")))
        table[n] = {m: float(v.mean()) for m, v in vals.items()}
        table[n].update(heldout_gain=float(gain.mean()),
                        margin_over_best_baseline=float(mean),
                        pairs_won=int(np.sum(margin > 0)), pairs_lost=int(np.sum(margin < 0)),
                        margin_ci95=[float(mean - half), float(mean + half)])
    grid = [label(s, t) for s, t in GRID]
    pick = max(grid, key=lambda n: (table[n]["heldout_mrr"], -grid.index(n)))
    strategy, teach = GRID[grid.index(pick)]
    return {"table": table, "pick": {"label": pick, "strategy": strategy,
                                     "teaching": teach._asdict()},
            "rule": "highest mean never-queried MRR after the last round over the "
                    "validation pairs (ties: the earlier grid point)"}


def table_markdown(summary: dict) -> str:
    rows = ["| strategy | never queried | gain over round 0 | margin over max(entropy, density) "
            "[95% CI] | paper's metric | picks already matched | picks' row entropy |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for n, t in summary["table"].items():
        lo, hi = t["margin_ci95"]
        rows.append(f"| {n} | {t['heldout_mrr']:.4f} | {t['heldout_gain']:+.4f} | "
                    f"{t['margin_over_best_baseline']:+.4f} [{lo:+.4f}, {hi:+.4f}] | "
                    f"{t['mrr']:.4f} | {t['picked_correct']:.2f} | {t['picked_entropy']:.3f} |")
    return "\n".join(rows)


def plot(runs: dict, summary: dict, path: str) -> None:
    """``never_queried.png``: per strategy, the share of picks the plan already matched
    against the never-queried MRR gain over round 0 (means over the validation pairs)."""
    from . import plots

    fig, axes = plots.figure(1, width=8.0, height=4.5)
    ax = axes[0]
    names = list(summary["table"])
    x = np.array([summary["table"][n]["picked_correct"] for n in names])
    y = np.array([summary["table"][n]["heldout_gain"] for n in names])
    ax.scatter(x, y, color=["C0" if n in dict(BASELINES) else "C3" for n in names])
    pick = summary["pick"]["label"]
    for xi, yi, n in zip(x, y, names, strict=True):
        if n in dict(BASELINES) or n == pick:  # the other variants: the evidence table
            ax.annotate(n if n != pick else f"ours: {n}", (xi, yi), fontsize=7,
                        xytext=(4, -10 if n == "density" else 3), textcoords="offset points")
    ax.set_xlabel("share of picks the plan already matched (mean over rounds and pairs)")
    ax.set_ylabel("never-queried MRR gain over round 0")
    ax.set_title(f"Validation pairs ({len(runs)}): baselines (blue), our {len(GRID)} variants "
                 "(red)")
    plots.save(fig, path, caption=f"Each point: one strategy's mean over the {len(runs)} "
                                  "validation pairs (no interval shown; the table has each "
                                  "margin's 95% t interval).")


def headline(record: dict) -> list[tuple[str, str]]:
    """(metric, value) rows of the evidence page: the pick and every strategy's row."""
    s = record["summary"]
    rows = [("the declared pick (" + s["rule"] + ")", s["pick"]["label"])]
    order = [label(x, t) for x, t in (*BASELINES, *GRID)]
    for n in sorted(s["table"], key=lambda n: order.index(n) if n in order else len(order)):
        t = s["table"][n]
        lo, hi = t["margin_ci95"]
        rows.append((n, f"never queried {t['heldout_mrr']:.4f} (gain over round 0 "
                        f"{t['heldout_gain']:+.4f}; minus max(entropy, density) "
                        f"{t['margin_over_best_baseline']:+.4f} [{lo:+.4f}, {hi:+.4f}], "
                        f"pairs won / lost {t.get('pairs_won', '?')} / "
                        f"{t.get('pairs_lost', '?')}); "
                        f"paper's metric {t['mrr']:.4f}; picks already matched "
                        f"{t['picked_correct']:.2f}; picks' row entropy "
                        f"{t['picked_entropy']:.3f}"))
    return rows


def load_text(record: dict) -> str:
    """The 1-minute load range along the run, in words."""
    return provenance.load_range_text([record.get("load_avg_1min")])
