"""AvAtar on the whole ACM-DBLP and Foursquare-Twitter graphs, the paper's protocol.

AvAtar's protocol (``jaxlab.avatar.wholegraph``) with PARROT as its official code runs it
(``jaxlab.avatar.parrot_official``, the official per-dataset settings): 20% of the
ground-truth pairs as initial anchors, 10 rounds of floor(0.2 k / 10) queries, the test
set every unanchored pair; strategies random, entropy, density, AvAtar (official score,
sq_l2 utility) and ours (``wholegraph.OURS``: the ``jaxlab.avatar.teaching`` variant chosen
on synthetic validation pairs by ``experiments/avatar_variants.py``, frozen before this
study runs). Beside that metric: a set of 20% of the pairs drawn before round 0 and
never queried (``--heldout_frac``; queries come from the rest) and the removal-only line
(the round-0 plan on the final test set); ties in random order. Paired seeds (each
seed's initial anchors are shared by its strategies, and so is its round-0 solve). The
comparison is declared here, before any run (``wholegraph_study.DECLARED``): AvAtar minus
random and minus entropy, ours minus random, entropy, density and AvAtar, and the goal ours
minus the better of entropy and density on never-queried pairs (>= +0.02, CI above 0), in
MRR after round 10, paired over seeds, mean and 95% Student-t interval (on each of the
three lines); nothing is tuned on the benchmarks (PARROT's settings are the official
scripts'; ours was chosen on synthetic pairs).

Writes ``<workdir>/summary.json`` (every round of every run: metrics, times, solver
diagnostics, memory; the table; the machine, versions and git commit), ``table.md`` and
``mrr.png`` (``experiments.lib.wholegraph_study``). A run stopped at any point resumes
from ``<workdir>/checkpoints`` (``experiments.lib.wholegraph_runs``: at most the round in
progress is lost; checkpoints of another configuration or code version are not read). The
task builds are cached (``experiments.lib.task_cache``).

  python -m experiments.avatar_wholegraph --workdir=results/avatar_wholegraph
  python -m experiments.avatar_wholegraph --workdir=/tmp/wg --datasets=foursquare_twitter \\
      --seeds=2 --strategies=random,avatar --rounds=2
  python -m experiments.avatar_wholegraph --workdir=/tmp/wg --round0_variants
"""

import os

from absl import app, flags

from .lib import console, results, wholegraph_study

_WORKDIR = flags.DEFINE_string("workdir", None, "Output folder (results + checkpoints).")
_DATASETS = flags.DEFINE_list("datasets", ["acm_dblp", "foursquare_twitter"],
                              "Whole graph pairs, in order.")
_SEEDS = flags.DEFINE_integer("seeds", 3, "Paired seeds 0 .. seeds - 1.")
_STRATEGIES = flags.DEFINE_list("strategies",
                                ["avatar", "random", "entropy", "density", "ours"],
                                "Strategies (wholegraph.STRATEGIES), run in this order per seed.")
_ROUNDS = flags.DEFINE_integer("rounds", 10, "Query rounds (the paper: 10).")
_WARM = flags.DEFINE_bool("warm", True, "Warm starts between rounds.")
_CG_TOL = flags.DEFINE_float("cg_tol", 1e-5,
                              "Relative residual of the adjoint CG (AvAtar and ours).")
_HELDOUT = flags.DEFINE_float(
    "heldout_frac", 0.2, "Share of the pairs drawn before round 0 and never queried (the "
    "never-queried line of the table; 0: none).")
_VARIANTS = flags.DEFINE_bool(
    "round0_variants", False, "Instead: round-0 MRR of ACM-DBLP (seed 0) with PARROT's "
    "attributed and plain scripts (<workdir>/round0_variants.json).")
_COMPARE_ROUNDS = flags.DEFINE_integer(
    "compare_cold_rounds", 3, "On seed 0, also run the product RWR and the CG from zero in "
    "the first this many rounds (the warm-start saving, side by side).")


def main(argv):
    del argv
    console.require_workdir(_WORKDIR.value)
    if _VARIANTS.value:
        out = wholegraph_study.round0_variants(0, log=lambda msg: print(msg, flush=True))
        results.write_json(os.path.join(_WORKDIR.value, "round0_variants.json"), out)
        print(console.results_line(_WORKDIR.value, "round0_variants.json"), flush=True)
        return
    wholegraph_study.run_study(
        _WORKDIR.value, _DATASETS.value, _SEEDS.value, _STRATEGIES.value, _ROUNDS.value,
        _WARM.value, _CG_TOL.value, _COMPARE_ROUNDS.value, _HELDOUT.value,
        log=lambda msg: print(msg, flush=True))
    print(console.results_line(_WORKDIR.value, "table.md"), flush=True)


if __name__ == "__main__":
    app.run(main, flags_parser=console.parse_flags)
