"""Choose AvAtar's score variant (ours) on synthetic validation pairs, never the benchmarks.

Runs the whole-graph protocol (``jaxlab.avatar.wholegraph``, PARROT's code, each official
settings set in turn) on graph pairs of synthetic families (``experiments.lib.avatar_families``:
Barabasi-Albert, Holme-Kim, Watts-Strogatz, a block model; seeds from 1000, used nowhere
else) for the released score, its baselines and every point of the declared grid of
``jaxlab.avatar.teaching`` variants. The pick is declared before the run: the grid point with
the highest mean never-queried MRR after the last round over all validation pairs (ties: the
earlier point of ``GRID``). Reported beside it per strategy: the paper's metric, the share of
picks the plan already matched, the picks' mean row entropy, and the never-queried margin over
max(entropy, density) per pair with a 95% t interval.

  python -m experiments.avatar_variants --workdir=results/avatar_variants
  python -m experiments.avatar_variants --workdir=/tmp/av --families=holme_kim --seeds=1 \\
      --num_nodes=200

Writes ``summary.json`` (every run's final records, the table, the pick, provenance),
``table.md`` and ``never_queried.png``.
"""

import os
import sys
import time

from absl import app, flags

from .lib import avatar_families, console, provenance, results
from .lib.avatar_variants_study import plot, run_all, summarize, table_markdown

_WORKDIR = flags.DEFINE_string("workdir", None, "Output folder.")
_FAMILIES = flags.DEFINE_list("families", list(avatar_families.FAMILIES), "Graph families.")
_SETTINGS = flags.DEFINE_list("settings", ["acm_dblp", "foursquare_twitter"],
                              "PARROT's official settings sets to run each pair with.")
_SEEDS = flags.DEFINE_integer("seeds", 2, "Validation seeds per family (from 1000).")
_NUM_NODES = flags.DEFINE_integer("num_nodes", 500, "Nodes of each family graph.")
_ROUNDS = flags.DEFINE_integer("rounds", 10, "Query rounds.")
_CG_TOL = flags.DEFINE_float("cg_tol", 1e-5, "Relative residual of the adjoint CG (the "
                             "whole-graph study's).")


def main(argv):
    del argv
    console.require_workdir(_WORKDIR.value)
    for f in _FAMILIES.value:
        if f not in avatar_families.FAMILIES:
            print(f"error: --families: {f!r} is not one of {avatar_families.FAMILIES}.",
                  file=sys.stderr)
            sys.exit(2)
    os.makedirs(_WORKDIR.value, exist_ok=True)
    t0 = time.time()
    runs = run_all(_FAMILIES.value, _SETTINGS.value, _SEEDS.value, _NUM_NODES.value,
                   _ROUNDS.value, _CG_TOL.value, log=lambda m: print(m, flush=True))
    summary = summarize(runs)
    out = {"config": {"families": _FAMILIES.value, "settings": _SETTINGS.value,
                      "seeds": _SEEDS.value, "num_nodes": _NUM_NODES.value,
                      "rounds": _ROUNDS.value, "heldout_frac": 0.2,
                      "cg_tol": _CG_TOL.value},
           "summary": summary, "runs": runs, "wall_s": time.time() - t0,
           "load_avg_1min": [min(min(r["load_avg_1min"]) for r in runs.values()),
                             max(max(r["load_avg_1min"]) for r in runs.values())],
           "machine": provenance.machine(), "environment": provenance.environment(),
           "git": provenance.git_state(), "packages": provenance.package_versions()}
    results.write_json(os.path.join(_WORKDIR.value, "summary.json"), out)
    md = table_markdown(summary)
    results.atomic_write_text(os.path.join(_WORKDIR.value, "table.md"), md + "\n")
    plot(runs, summary, os.path.join(_WORKDIR.value, "never_queried.png"))
    print(md)
    print(f"pick: {summary['pick']['label']}")
    print(console.results_line(_WORKDIR.value, "table.md"), flush=True)


if __name__ == "__main__":
    app.run(main, flags_parser=console.parse_flags)
