"""A sweep of non-finite and extreme values over the array arguments of public functions.

Each entry is a public function, a good call's arguments and the names of its float array
arguments; every such argument in turn gets a NaN, a +inf and a -inf entry (the rest of
the call unchanged), and a few get extreme finite values whose right answer is known.
"""

import functools

import jax
import numpy as np

from jaxlab import qlearning
from jaxlab.attention import attention
from jaxlab.avatar import alignment, scores, solvers
from jaxlab.bco import losses, variation
from jaxlab.core import metrics, smc
from jaxlab.gepc import scoring
from jaxlab.rfo import critic, ppo
from tests.bad_inputs.harness import Case

KEY = jax.random.key(0)
RNG = np.random.default_rng(0)
N = 4
PLAN = (np.eye(N) * 0.2 + 0.01).astype(np.float32)
COST = RNG.uniform(0.1, 1.0, (N, N)).astype(np.float32)
POS = RNG.uniform(0.0, 1.0, (N, N)).astype(np.float32)
TRUTH = np.arange(N)
ANCHORS = np.array([True, False, False, False])
FEATS = np.abs(1.0 + 0.2 * RNG.normal(size=(30, 3, 2))).astype(np.float32)
GMM_X = RNG.normal(size=(40, 2))
QKV = RNG.normal(size=(1, 8, 1, 4)).astype(np.float32)
P2 = np.full((2, 2, 2), 0.5, np.float32)


def _scorer():
    return scoring.fit(FEATS, num_t=2)


def _gmm():
    return scoring.fit_gmm(GMM_X, num_components=2, iters=5)


# (label, function, good keyword arguments, the float array arguments to corrupt: a name
# gets NaN, +inf and -inf; (name, "NaN +inf") only those)
TABLE = [
    ("smc.systematic", lambda **a: smc.systematic(KEY, a["weights"], 4),
     {"weights": np.array([0.2, 0.3, 0.5], np.float32)}, ["weights"]),
    ("smc.stratified", lambda **a: smc.stratified(KEY, a["weights"], 4),
     {"weights": np.array([0.2, 0.3, 0.5], np.float32)}, ["weights"]),
    ("smc.multinomial", lambda **a: smc.multinomial(KEY, a["weights"], 4),
     {"weights": np.array([0.2, 0.3, 0.5], np.float32)}, ["weights"]),
    ("smc.residual", lambda **a: smc.residual(KEY, a["weights"], 4),
     {"weights": np.array([0.2, 0.3, 0.5], np.float32)}, ["weights"]),
    # a -inf log weight is a zero weight; infinite scores still rank
    ("smc.normalize_log_weights", smc.normalize_log_weights,
     {"log_weights": np.array([0.0, -1.0, -2.0], np.float32)}, [("log_weights", "NaN +inf")]),
    ("smc.ess", smc.ess, {"log_weights": np.array([0.0, -1.0, -2.0], np.float32)},
     [("log_weights", "NaN +inf")]),
    ("metrics.auroc", metrics.auroc, {"scores": np.array([0.1, 0.4, 0.35, 0.8], np.float32),
                                      "labels": np.array([0, 0, 1, 1])}, [("scores", "NaN")]),
    ("metrics.average_ranks", metrics.average_ranks, {"x": np.array([3.0, 1.0, 2.0])},
     [("x", "NaN")]),
    ("metrics.cumulative_regret", metrics.cumulative_regret,
     {"losses": np.array([1.0, 0.5, 0.2]), "comparator_losses": np.array([0.1, 0.1, 0.1])},
     ["losses", "comparator_losses"]),
    ("metrics.loglog_slope", metrics.loglog_slope,
     {"x": np.array([1.0, 2.0, 4.0]), "y": np.array([1.0, 4.0, 16.0])}, ["x", "y"]),
    ("metrics.mean_and_ci", metrics.mean_and_ci, {"samples": np.array([1.0, 2.0, 3.0])},
     ["samples"]),
    ("alignment.cosine_similarity", alignment.cosine_similarity,
     {"x": POS[:3], "y": POS[1:]}, ["x", "y"]),
    ("alignment.ranks_of_truth", alignment.ranks_of_truth,
     {"scores": PLAN, "truth": TRUTH}, ["scores"]),
    ("alignment.alignment_metrics", alignment.alignment_metrics,
     {"plan": PLAN, "truth": TRUTH, "eval_mask": np.ones(N, bool)}, ["plan"]),
    ("alignment.ranks_of_pairs", alignment.ranks_of_pairs,
     {"scores": PLAN, "src": TRUTH, "tgt": TRUTH}, ["scores"]),
    ("alignment.pair_values", alignment.pair_values,
     {"scores": PLAN, "src": TRUTH, "tgt": TRUTH}, ["scores"]),
    ("alignment.pair_metrics", alignment.pair_metrics,
     {"plan": PLAN, "src": TRUTH, "tgt": TRUTH, "eval_mask": np.ones(N, bool)}, ["plan"]),
    ("alignment.top1_probability", alignment.top1_probability,
     {"scores": PLAN, "src": TRUTH, "tgt": TRUTH}, ["scores"]),
    ("alignment.row_normalise", alignment.row_normalise, {"plan": PLAN}, ["plan"]),
    ("alignment.row_entropy", alignment.row_entropy, {"plan": PLAN}, ["plan"]),
    ("alignment.row_margin", alignment.row_margin, {"plan": PLAN}, ["plan"]),
    ("scores.abs_score", scores.abs_score, {"plan": PLAN, "cost": COST, "grad_cost": COST},
     ["plan", "cost", "grad_cost"]),
    ("scores.official_score", scores.official_score,
     {"plan": PLAN, "cost": COST, "grad_cost": COST}, ["plan", "cost", "grad_cost"]),
    ("scores.gain_matrix", scores.gain_matrix,
     {"plan": PLAN, "cost": COST, "grad_cost": COST, "pos1": POS, "pos2": POS,
      "anchors": ANCHORS, "truth": TRUTH}, ["plan", "cost", "grad_cost", "pos1", "pos2"]),
    ("scores.gain_score", scores.gain_score,
     {"plan": PLAN, "cost": COST, "grad_cost": COST, "pos1": POS, "pos2": POS,
      "anchors": ANCHORS, "truth": TRUTH}, ["plan", "cost", "grad_cost", "pos1", "pos2"]),
    ("scores.l2_normalise", scores.l2_normalise, {"s": np.array([1.0, 2.0, 3.0])}, ["s"]),
    ("solvers.entropic_solve", lambda **a: solvers.entropic_solve(a["cost"], 0.1).plan,
     {"cost": COST}, ["cost"]),
    ("solvers.entropic_plan", lambda **a: solvers.entropic_plan(a["cost"], 0.1),
     {"cost": COST}, ["cost"]),
    ("solvers.fgw_solve", lambda **a: solvers.fgw_solve(a["cost"], a["struct1"], a["struct2"],
                                                        0.1).plan,
     {"cost": COST, "struct1": POS, "struct2": POS.T}, ["cost", "struct1", "struct2"]),
    ("solvers.fgw_plan", lambda **a: solvers.fgw_plan(a["cost"], a["struct1"], a["struct2"],
                                                      0.1),
     {"cost": COST, "struct1": POS, "struct2": POS.T}, ["cost", "struct1", "struct2"]),
    ("solvers.implicit_utility_grad", lambda **a: solvers.implicit_utility_grad(
        a["cost"], 0.1, a["weights"]), {"cost": COST, "weights": COST}, ["cost", "weights"]),
    ("solvers.marginal_error", solvers.marginal_error, {"plan": PLAN}, ["plan"]),
    ("scoring.silverman_bandwidth", scoring.silverman_bandwidth, {"x": FEATS[:, 0]}, ["x"]),
    ("scoring.official_bandwidth", scoring.official_bandwidth, {"x": FEATS[:, 0]}, ["x"]),
    ("scoring.kde_log_density", scoring.kde_log_density,
     {"train": FEATS[:, 0], "bandwidth": np.array([0.1, 0.1], np.float32),
      "x": FEATS[:3, 0]}, ["train", "bandwidth", "x"]),
    ("scoring.fit", scoring.fit, {"features": FEATS}, ["features"]),
    ("scoring.fit_official", scoring.fit_official, {"features": FEATS}, ["features"]),
    ("scoring.score", lambda **a: scoring.score(_scorer(), a["features"]),
     {"features": FEATS[:3]}, ["features"]),
    ("scoring.fit_gmm", lambda **a: scoring.fit_gmm(a["x"], 2, 5), {"x": GMM_X}, ["x"]),
    ("scoring.gmm_nll", lambda **a: scoring.gmm_nll(_gmm(), a["x"]), {"x": GMM_X[:3]},
     ["x"]),
    ("scoring.gmm_component_logpdf", lambda **a: scoring.gmm_component_logpdf(a["x"], _gmm()),
     {"x": GMM_X[:3]}, ["x"]),
    ("critic.td_lambda_targets", lambda **a: critic.td_lambda_targets(
        a["rewards"], a["values"], 0.9, 0.9),
     {"rewards": np.ones(3, np.float32), "values": np.ones(4, np.float32)},
     ["rewards", "values"]),
    ("ppo.gae", lambda **a: ppo.gae(a["rewards"], a["values"], 0.9, 0.9),
     {"rewards": np.ones(3, np.float32), "values": np.ones(4, np.float32)},
     ["rewards", "values"]),
    ("qlearning.make_mdp", lambda **a: qlearning.make_mdp(a["transitions"], a["rewards"], 0.9),
     {"transitions": P2, "rewards": np.zeros((2, 2), np.float32)},
     ["transitions", "rewards"]),
    ("qlearning.samples_to_accuracy", lambda **a: qlearning.samples_to_accuracy(
        a["trace_samples"], a["errors"], 0.1),
     {"trace_samples": np.array([1.0, 2.0, 3.0]), "errors": np.array([0.5, 0.2, 0.05])},
     ["trace_samples", ("errors", "NaN -inf")]),  # an infinite error: a diverged record
    ("losses.path_length", losses.path_length, {"points": np.ones((3, 2))}, ["points"]),
    ("variation.estimated_variation", variation.estimated_variation,
     {"estimates": np.ones((3, 2))}, ["estimates"]),
    ("variation.stats", variation.stats,
     {"estimates": np.ones((3, 2)), "grads": np.ones((3, 2))}, ["estimates", "grads"]),
    ("attention dense", lambda **a: attention(a["q"], a["k"], a["v"]),
     {"q": QKV, "k": QKV, "v": QKV}, ["q", "k", "v"]),
]

BAD = {"NaN": np.nan, "+inf": np.inf, "-inf": -np.inf}


def _corrupt(value, bad):
    out = np.array(value, copy=True)
    out.flat[0] = bad
    return out


def _call(fn, good, name, bad):
    return fn(**{**good, name: _corrupt(good[name], bad)})


def _bad_values(spec):
    name, whats = (spec, tuple(BAD)) if isinstance(spec, str) else (spec[0], spec[1].split())
    return [(name, what, BAD[what]) for what in whats]


CASES = [Case(f"{label}: {what} in `{name}`",
              functools.partial(_call, fn, good, name, bad), f"`{name}`")
         for label, fn, good, specs in TABLE for spec in specs
         for name, what, bad in _bad_values(spec)]
