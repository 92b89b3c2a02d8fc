"""Bad-input cases for jaxlab.avatar (solvers, adjoint CG, utilities, active loop, tasks).

The last section gives every public function of ``jaxlab.avatar`` at least one misuse,
named ``avatar.<module>.<function>: what is bad``; the whole-graph pieces run on an 8-node
circulant graph pair (``_graph_task``), which no check lets reach a solve.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse as sp

from jaxlab import avatar
from jaxlab.avatar import (
    adjoint,
    alignment,
    baselines,
    comparison,
    datasets,
    loop,
    parrot,
    parrot_official,
    scores,
    solvers,
    tasks,
    utilities,
    wholegraph,
)
from tests.bad_inputs.harness import Case, train_smoke

EPS = 0.1


def _cost(n=6, m=7, seed=0):
    return jax.random.uniform(jax.random.key(seed), (n, m))


@functools.cache
def _plan():
    return solvers.entropic_plan(_cost(), EPS)


@functools.cache
def _karate():
    return tasks.real_graph_pair("karate", seed=0)


def _with(x, idx, value):
    x = np.array(x, np.float32)
    x[idx] = value
    return x


def _run(**kw):
    task = kw.pop("task", None) or _karate()
    kw.setdefault("rounds", 1)
    kw.setdefault("budget_frac", 0.1)
    return loop.run_active(jax.random.key(0), task, **kw)


def _train(**changes):
    return train_smoke("avatar", **changes)


def _lap(n):
    return np.eye(n) * 2 - np.ones((n, n)) / n


KEY = jax.random.key(0)
PO = parrot_official.ACM_DBLP


def _circulant(n):
    """[n, n] adjacency of the n-cycle with its second neighbours (no isolated node)."""
    adj = np.zeros((n, n))
    for d in (1, 2):
        adj[np.arange(n), (np.arange(n) + d) % n] = 1.0
    return np.maximum(adj, adj.T)


@functools.cache
def _graph_task(n=8):
    """A whole-graph task on two n-node circulant graphs with n - 2 ground-truth pairs."""
    pairs = np.stack([np.arange(n - 2), (np.arange(n - 2) + 1) % n], 1)
    return tasks.graph_task(_circulant(n), _circulant(n), np.zeros((n, 0)), np.zeros((n, 0)),
                            pairs)


@functools.cache
def _graphs(n=8):
    return parrot_official.prepare(_graph_task(n), _circulant(n), _circulant(n), PO)


def _empty(n=8):
    return parrot_official.empty_stats(_graph_task(n), _graphs(n))


def _round():
    """A Round of the 8-node task (the uniform plan, zero costs)."""
    return wholegraph.Round(_empty(), jnp.zeros((8, 8)), jnp.zeros((8, 8)),
                            jnp.full((8, 8), 1 / 64), jnp.zeros(16))


def _po_cost():
    g = _graphs()
    return parrot_official.Cost(jnp.zeros((8, 8)), jnp.zeros((8, 8)),
                                jnp.zeros(len(g.edges1)), jnp.zeros(len(g.edges2)),
                                jnp.int32(0), jnp.float32(0.0))


def _network_pair():
    """A datasets.NetworkPair (what ``datasets.load`` returns; not a task)."""
    adj = sp.csr_matrix(_circulant(8))
    return datasets.NetworkPair(adj, adj, np.zeros((8, 0)), np.zeros((8, 0)),
                                np.stack([np.arange(6)] * 2, 1))


def _result():
    """An ActiveResult holding only the final metrics of two seeds (three rounds)."""
    fields = dict.fromkeys(loop.ActiveResult._fields)
    return loop.ActiveResult(**fields)._replace(metrics={"mrr": np.zeros((2, 3))})


def _isolated_last(n=8):
    adj = _circulant(n)
    adj[-1], adj[:, -1] = 0.0, 0.0
    return adj


CASES = [
    # --- Sinkhorn / FGW -------------------------------------------------------------------
    Case("avatar/entropic_plan/not_converged", lambda: solvers.entropic_plan(
        _cost() * 1e4, 1e-3, max_iterations=5), "max_iterations"),
    Case("avatar/entropic_plan/cost_nan", lambda: solvers.entropic_plan(
        _with(_cost(), (0, 0), np.nan), EPS), "cost"),
    Case("avatar/entropic_plan/cost_inf", lambda: solvers.entropic_plan(
        _with(_cost(), (1, 2), np.inf), EPS), "cost"),
    Case("avatar/entropic_plan/epsilon_negative", lambda: solvers.entropic_plan(
        _cost(), -0.1), "epsilon"),
    Case("avatar/entropic_plan/cost_1d", lambda: solvers.entropic_plan(
        jnp.ones(5), EPS), "cost"),
    Case("avatar/entropic_plan/threshold_zero", lambda: solvers.entropic_plan(
        _cost(), EPS, threshold=0.0), "threshold"),
    Case("avatar/entropic_plan/max_iterations_zero", lambda: solvers.entropic_plan(
        _cost(), EPS, max_iterations=0), "max_iterations"),
    Case("avatar/fgw_plan/cost_nan", lambda: solvers.fgw_plan(
        _with(_cost(6, 6), (0, 0), np.nan), jnp.ones((6, 6)), jnp.ones((6, 6)), EPS), "cost"),
    Case("avatar/fgw_plan/struct1_inf", lambda: solvers.fgw_plan(
        _cost(6, 6), _with(np.ones((6, 6)), (0, 1), np.inf), jnp.ones((6, 6)), EPS),
        "struct1"),
    Case("avatar/fgw_plan/fused_penalty_negative", lambda: solvers.fgw_plan(
        _cost(6, 6), jnp.ones((6, 6)), jnp.ones((6, 6)), EPS, fused_penalty=-1.0),
        "fused_penalty"),
    Case("avatar/fgw_plan/epsilon_zero", lambda: solvers.fgw_plan(
        _cost(6, 6), jnp.ones((6, 6)), jnp.ones((6, 6)), 0.0), "epsilon"),
    Case("avatar/fgw_plan/not_converged", lambda: solvers.fgw_plan(
        _cost(6, 6) * 100, _cost(6, 6, 1) * 100, _cost(6, 6, 2) * 100, 1e-3), "epsilon"),
    Case("avatar/fgw_plan/diverged_nan", lambda: solvers.fgw_plan(
        _cost(6, 6) * 1e4, _cost(6, 6, 1) * 1e4, _cost(6, 6, 2) * 1e4, 1e-3), "epsilon"),
    # --- adjoint CG -----------------------------------------------------------------------
    Case("avatar/cost_gradient/maxiter_1", lambda: adjoint.cost_gradient(
        _plan(), jnp.log(_plan()) + 1.0, EPS, maxiter=1), "maxiter"),
    Case("avatar/cost_gradient/maxiter_zero", lambda: adjoint.cost_gradient(
        _plan(), jnp.log(_plan()) + 1.0, EPS, maxiter=0), "maxiter"),
    Case("avatar/cost_gradient/tol_zero", lambda: adjoint.cost_gradient(
        _plan(), jnp.log(_plan()) + 1.0, EPS, tol=0.0), "tol"),
    Case("avatar/cost_gradient/plan_nan", lambda: adjoint.cost_gradient(
        _with(_plan(), (0, 0), np.nan), jnp.ones((6, 7)), EPS), "plan"),
    Case("avatar/cost_gradient/plan_negative", lambda: adjoint.cost_gradient(
        _with(_plan(), (0, 0), -0.5), jnp.ones((6, 7)), EPS), "plan"),
    Case("avatar/cost_gradient/plan_zero_row", lambda: adjoint.cost_gradient(
        _with(_plan(), (2, slice(None)), 0.0), jnp.ones((6, 7)), EPS), "plan"),
    Case("avatar/cost_gradient/grad_plan_inf", lambda: adjoint.cost_gradient(
        _plan(), _with(np.ones((6, 7)), (1, 1), np.inf), EPS), "grad_plan"),
    Case("avatar/cost_gradient/epsilon_negative", lambda: adjoint.cost_gradient(
        _plan(), jnp.ones((6, 7)), -1.0), "epsilon"),
    # --- utilities / informativeness ------------------------------------------------------
    Case("avatar.utilities.gradient: unknown utility", lambda: utilities.gradient(
        "nope", _plan()), "utility"),
    Case("avatar/utilities/plan_nan", lambda: utilities.gradient(
        "entropy", _with(_plan(), (0, 0), np.nan)), "plan"),
    Case("avatar.utilities.value: negative plan entry", lambda: utilities.value(
        "entropy", _with(_plan(), (0, 0), -1.0)), "plan"),
    Case("avatar/utilities/lap1_shape", lambda: utilities.gradient(
        "consistency", _plan(), utilities.UtilityContext(lap1=_lap(5), lap2=_lap(7))),
        "ctx.lap1"),
    Case("avatar/utilities/kl_cost_shape", lambda: utilities.gradient(
        "kl", _plan(), utilities.UtilityContext(cost=jnp.ones((7, 6)))), "ctx.cost"),
    Case("avatar/informativeness/cost_nan", lambda: loop.informativeness(
        _plan(), _with(_cost(), (0, 0), np.nan), EPS), "cost"),
    Case("avatar/informativeness/cost_shape", lambda: loop.informativeness(
        _plan(), _cost(7, 6), EPS), "cost"),
    Case("avatar/informativeness/utility_unknown", lambda: loop.informativeness(
        _plan(), _cost(), EPS, utility="variance"), "utility"),
    # --- metrics --------------------------------------------------------------------------
    Case("avatar/alignment_metrics/truth_out_of_range", lambda: alignment.alignment_metrics(
        _plan()[:, :6], jnp.array([0, 1, 2, 3, 4, 9]), jnp.ones(6, bool)), "truth"),
    Case("avatar/alignment_metrics/plan_nan", lambda: alignment.alignment_metrics(
        _with(_plan()[:, :6], (0, 0), np.nan), jnp.arange(6), jnp.ones(6, bool)), "plan"),
    Case("avatar/alignment_metrics/eval_mask_shape", lambda: alignment.alignment_metrics(
        _plan()[:, :6], jnp.arange(6), jnp.ones(4, bool)), "eval_mask"),
    Case("avatar/anchor_cost/mask_shape", lambda: alignment.anchor_cost(
        _karate(), jnp.zeros(5, bool)), "mask"),
    # --- the active loop ------------------------------------------------------------------
    # The plan's convergence warning needs no query score: the random strategy with the
    # loop settings of tests/avatar/test_active.py (a program compiled there too).
    Case("avatar/run_active/epsilon_tiny", lambda: _run(
        epsilon=1e-5, strategy="random", rounds=3, test_frac=0.3, init_frac=0.2,
        budget_frac=0.3), "epsilon"),
    Case("avatar/run_active/feat_nan", lambda: _run(task=_karate()._replace(
        feat1=_with(_karate().feat1, (0, 0), np.nan))), "task.feat1"),
    Case("avatar/run_active/pos2_inf", lambda: _run(task=_karate()._replace(
        pos2=_with(_karate().pos2, (3, 3), np.inf))), "task.pos2"),
    Case("avatar/run_active/truth_not_permutation", lambda: _run(task=_karate()._replace(
        truth=np.zeros(34, np.int32))), "task.truth"),
    Case("avatar/run_active/truth_out_of_range", lambda: _run(task=_karate()._replace(
        truth=np.arange(34, dtype=np.int32) + 1)), "task.truth"),
    Case("avatar/run_active/feat_weight_negative", lambda: _run(feat_weight=-1.0),
         "feat_weight"),
    Case("avatar/run_active/anchor_weight_nan", lambda: _run(anchor_weight=np.nan),
         "anchor_weight"),
    Case("avatar/run_active/test_frac_negative", lambda: _run(test_frac=-0.1), "test_frac"),
    Case("avatar/run_active/utility_unknown", lambda: _run(utility="variance"), "utility"),
    Case("avatar/run_active/solver_unknown", lambda: _run(solver="emd"), "solver"),
    # --- the Algorithm API (constructor, init, step) ------------------------------------
    Case("avatar/active/budget_too_large", lambda: avatar.active(
        _karate(), budget_frac=0.5, test_frac=0.5), "budget_frac"),
    Case("avatar/active/pos1_nan", lambda: avatar.active(_karate()._replace(
        pos1=_with(_karate().pos1, (0, 1), np.nan))), "task.pos1"),
    Case("avatar/active/cg_tol_zero", lambda: avatar.active(_karate(), cg_tol=0.0), "cg_tol"),
    Case("avatar/init/test_frac_one", lambda: avatar.init(
        jax.random.key(0), _karate(), test_frac=1.0), "test_frac"),
    Case("avatar/init/fractions_exceed_nodes", lambda: avatar.init(
        jax.random.key(0), _karate(), test_frac=0.9, init_frac=0.5), "init_frac"),
    Case("avatar/step/strategy_unknown", lambda: avatar.step(
        jax.random.key(0), avatar.init(jax.random.key(0), _karate()), _karate(),
        strategy="oracle"), "strategy"),
    Case("avatar/step/num_queries_zero", lambda: avatar.step(
        jax.random.key(0), avatar.init(jax.random.key(0), _karate()), _karate(),
        num_queries=0), "num_queries"),
    Case("avatar/step/solver_unknown", lambda: avatar.step(
        jax.random.key(0), avatar.init(jax.random.key(0), _karate()), _karate(),
        solver="emd"), "solver"),
    # --- tasks ----------------------------------------------------------------------------
    Case("avatar.tasks.real_graph_pair: negative feat_noise", lambda: tasks.real_graph_pair(
        "karate", feat_noise=-1.0), "feat_noise"),
    Case("avatar.tasks.real_graph_pair: negative feat_dim", lambda: tasks.real_graph_pair(
        "karate", feat_dim=-2), "feat_dim"),
    Case("avatar/synthetic_graph_pair/too_small", lambda: tasks.synthetic_graph_pair(3),
         "num_nodes"),
    Case("avatar/point_cloud_pair/noise_negative", lambda: tasks.point_cloud_pair(
        20, noise=-0.1), "noise"),
    Case("avatar/embedding_pair/num_clusters_zero", lambda: tasks.embedding_pair(
        20, num_clusters=0), "num_clusters"),
    # --- experiment config ----------------------------------------------------------------
    Case("avatar/config/num_seeds_1", lambda: _train(num_seeds=1), "config.num_seeds"),
    Case("avatar/config/epsilon_zero", lambda: _train(epsilon=0.0), "config.epsilon"),
    Case("avatar/config/rounds_zero", lambda: _train(rounds=0), "config.rounds"),
    Case("avatar/config/test_frac_one", lambda: _train(test_frac=1.0), "config.test_frac"),
    Case("avatar/config/strategy_unknown", lambda: _train(strategies=["avatar", "oracle"]),
         "config.strategies"),
    Case("avatar/config/task_unknown", lambda: _train(tasks=["karate", "facebook"]),
         "config.tasks"),
    Case("avatar/config/utility_unknown", lambda: _train(utility="variance"),
         "config.utility"),
    Case("avatar/config/scaling_sizes_zero", lambda: _train(scaling_sizes=[0, 50]),
         "config.scaling_sizes"),
    # --- scores, protocols, multi-utility, real data -----------------------------
    Case("avatar/run_active/score_unknown", lambda: _run(score="oracle"), "score"),
    Case("avatar/run_active/protocol_unknown", lambda: _run(protocol="transductive"),
         "protocol"),
    Case("avatar/run_active/utility_tuple_unknown", lambda: _run(utility=("sq_l2", "var")),
         "utility"),
    Case("avatar/run_active/utility_weights_length", lambda: _run(
        utility=("sq_l2", "entropy"), utility_weights=(1.0,)), "utility_weights"),
    Case("avatar/run_active/utility_weights_negative", lambda: _run(
        utility=("sq_l2", "entropy"), utility_weights=(1.0, -1.0)), "utility_weights"),
    Case("avatar/init/protocol_unknown", lambda: loop.init(jax.random.key(0), _karate(),
                                                           protocol="x"), "protocol"),
    Case("avatar/informativeness/score_gain_needs_loop", lambda: loop.informativeness(
        _plan()[:, :6], _cost()[:, :6], EPS, score="gain"), "score"),
    Case("avatar.scores.official_score: cost of another shape", lambda: scores.official_score(
        jnp.ones((4, 4)), jnp.ones((4, 3)), jnp.ones((4, 4))), "cost"),
    Case("avatar.scores.abs_score: NaN grad_cost", lambda: scores.abs_score(
        jnp.ones((4, 4)), jnp.ones((4, 4)), _with(np.ones((4, 4)), (1, 1), np.nan)),
         "grad_cost"),
    Case("avatar.scores.gain_matrix: rectangular plan", lambda: scores.gain_matrix(
        jnp.ones((4, 5)), jnp.ones((4, 5)), jnp.ones((4, 5)), np.eye(4), np.eye(5),
        np.zeros(4, bool), np.arange(4)), "plan"),
    Case("avatar.scores.combine: one weight for two scores", lambda: scores.combine(
        [jnp.ones(3), jnp.ones(3)], [1.0]), "weights"),
    Case("avatar.datasets.load_pair: unknown name", lambda: datasets.load_pair("douban"), "name"),
    Case("avatar.datasets.subsample: more nodes than pairs", lambda: datasets.subsample(
        "foursquare_twitter", 5000), "num_nodes"),
    Case("avatar.datasets.subsample: negative seed", lambda: datasets.subsample(
        "foursquare_twitter", 50, seed=-1), "seed"),
    Case("avatar.datasets.subsample: num_nodes 0", lambda: datasets.subsample(
        "acm_dblp", 0), "num_nodes"),
    Case("avatar/tasks/from_adjacency_shape", lambda: tasks.task_from_adjacency(
        np.eye(4), np.eye(5), np.zeros((4, 0)), np.zeros((5, 0)), np.arange(4)), "adj2"),
    Case("avatar/config/protocol_unknown", lambda: _train(protocols=["paper", "online"]),
         "config.protocols"),
    Case("avatar/config/hard_init_frac_one", lambda: _train(hard_init_frac=1.0),
         "config.hard_init_frac"),
    Case("avatar/config/real_nodes_zero", lambda: _train(real_nodes=0), "config.real_nodes"),
    # --- review: PARROT and the density / topmatchings baselines ---------------------------
    Case("avatar/product_rwr/restart_one", lambda: parrot.product_rwr(
        _cost(4, 4), jnp.eye(4), jnp.eye(4), 1.0, 3), "restart"),
    Case("avatar/product_rwr/restart_zero", lambda: parrot.product_rwr(
        _cost(4, 4), jnp.eye(4), jnp.eye(4), 0.0, 3), "restart"),
    Case("avatar/product_rwr/restart_nan", lambda: parrot.product_rwr(
        _cost(4, 4), jnp.eye(4), jnp.eye(4), np.nan, 3), "restart"),
    Case("avatar/product_rwr/iters_zero", lambda: parrot.product_rwr(
        _cost(4, 4), jnp.eye(4), jnp.eye(4), 0.5, 0), "iters"),
    Case("avatar/product_rwr/iters_float", lambda: parrot.product_rwr(
        _cost(4, 4), jnp.eye(4), jnp.eye(4), 0.5, 2.5), "iters"),
    Case("avatar/parrot_settings/lambda_e_inf", lambda: parrot.check_settings(
        parrot.PARROT_DEFAULTS._replace(lambda_e=np.inf)), "lambda_e"),
    Case("avatar/parrot_settings/lambda_p_inf", lambda: parrot.check_settings(
        parrot.PARROT_DEFAULTS._replace(lambda_p=np.inf)), "lambda_p"),
    Case("avatar/run_active/parrot_attr_weight_inf", lambda: _run(
        solver=parrot.PARROT_DEFAULTS._replace(attr_weight=np.inf)), "attr_weight"),
    Case("avatar/node_cost/mask_float", lambda: parrot.node_cost(
        _karate(), np.ones(34, np.float32)), "mask"),
    Case("avatar/parrot_solve/mask_int", lambda: parrot.parrot_solve(
        _karate(), jnp.zeros(34, jnp.int32)), "mask"),
    Case("avatar.baselines.density_score: 3-D plan", lambda: baselines.density_score(
        np.full((2, 4, 4), 1 / 16), np.ones((4, 3))), "plan"),
    Case("avatar.baselines.density_score: x rows differ from the plan's", lambda: (
        baselines.density_score(_plan(), np.ones((5, 3)))), "x"),
    Case("avatar.baselines.density_score: NaN plan", lambda: baselines.density_score(
        _with(np.full((4, 4), 0.25), (0, 0), np.nan), np.ones((4, 3))), "plan"),
    Case("avatar.baselines.density_score: negative plan entry", lambda: baselines.density_score(
        _with(np.full((4, 4), 0.25), (0, 0), -0.25), np.ones((4, 3))), "plan"),
    Case("avatar.baselines.density_score: inf in x", lambda: baselines.density_score(
        np.full((4, 4), 0.25), _with(np.ones((4, 3)), (1, 1), np.inf)), "x"),
    Case("avatar.baselines.density_score: 1-D x", lambda: baselines.density_score(
        np.full((4, 4), 0.25), np.ones(4)), "x"),
    Case("avatar/representativeness/x_nan", lambda: baselines.representativeness(
        _with(np.ones((4, 3)), (0, 0), np.nan)), "x"),
    Case("avatar/representativeness/x_1d", lambda: baselines.representativeness(
        np.ones(4)), "x"),
    Case("avatar/cosine_similarity/y_1d", lambda: alignment.cosine_similarity(
        np.ones((4, 3)), np.ones(3)), "y"),
    Case("avatar/cosine_similarity/row_lengths_differ", lambda: alignment.cosine_similarity(
        np.ones((4, 3)), np.ones((5, 2))), "x"),
    Case("avatar/sample_matchings/plan_negative", lambda: baselines.sample_matchings(
        jax.random.key(0), _with(np.full((4, 4), 0.25), (2, 1), -0.1), 4), "plan"),
    Case("avatar.baselines.topmatchings_score: 1-D plan", lambda: baselines.topmatchings_score(
        jax.random.key(0), np.full(4, 0.25), 4), "plan"),
    # --- every public function, one misuse each (module.function: what) -------------------
    Case("avatar.adjoint.cost_gradient_and_info: unknown method", lambda: (
        adjoint.cost_gradient_and_info(_plan(), jnp.ones((6, 7)), EPS, method="lu")),
        "`method`"),
    Case("avatar.adjoint.solve_adjoint: maxiter 0", lambda: adjoint.solve_adjoint(
        _plan(), jnp.ones((6, 7)), maxiter=0), "`maxiter`"),
    Case("avatar.adjoint.solve_adjoint: x0 of the rows only", lambda: adjoint.solve_adjoint(
        _plan(), jnp.ones((6, 7)), x0=jnp.zeros(6)), "`x0`"),
    Case("avatar.adjoint.gradient_from_adjoint: y of the rows only", lambda: (
        adjoint.gradient_from_adjoint(_plan(), jnp.ones((6, 7)), jnp.zeros(6), EPS)), "`y`"),
    Case("avatar.adjoint.gradient_from_adjoint: epsilon 0", lambda: (
        adjoint.gradient_from_adjoint(_plan(), jnp.ones((6, 7)), jnp.zeros(13), 0.0)),
        "`epsilon`"),
    Case("avatar.alignment.masked_mean: mask of another length", lambda: (
        alignment.masked_mean({"mrr": jnp.ones(5)}, jnp.ones(4, bool))), "`mask`"),
    Case("avatar.alignment.masked_mean: float weights for a mask", lambda: (
        alignment.masked_mean({"mrr": jnp.ones(4)}, jnp.full(4, 0.5))), "`mask`"),
    Case("avatar.alignment.pair_values: tgt past the targets", lambda: alignment.pair_values(
        _plan(), jnp.arange(3), jnp.array([0, 1, 7])), "`tgt`"),
    Case("avatar.alignment.ranks_of_pairs: NaN score", lambda: alignment.ranks_of_pairs(
        _with(_plan(), (0, 0), np.nan), jnp.arange(3), jnp.arange(3)), "`scores`"),
    Case("avatar.alignment.ranks_of_truth: rectangular scores", lambda: (
        alignment.ranks_of_truth(_plan(), jnp.arange(6))), "`scores`"),
    Case("avatar.alignment.row_entropy: NaN plan", lambda: alignment.row_entropy(
        _with(_plan(), (0, 0), np.nan)), "`plan`"),
    Case("avatar.alignment.row_margin: one target column", lambda: alignment.row_margin(
        jnp.ones((4, 1))), "`plan`"),
    Case("avatar.alignment.row_normalise: negative entry", lambda: alignment.row_normalise(
        _with(_plan(), (1, 2), -0.5)), "`plan`"),
    Case("avatar.alignment.top1_probability: tgt shorter than src", lambda: (
        alignment.top1_probability(_plan(), jnp.arange(4), jnp.arange(3))), "`tgt`"),
    Case("avatar.baselines.topmatchings_score: num_samples 0", lambda: (
        baselines.topmatchings_score(KEY, np.full((4, 4), 1 / 16), 0)), "`num_samples`"),
    Case("avatar.comparison.declared_pairs: no names", lambda: comparison.declared_pairs([]),
         "`names`"),
    Case("avatar.comparison.default_grid: unknown name", lambda: comparison.default_grid(
        "avatar-variance"), "`name`"),
    Case("avatar.comparison.final_values: unknown metric", lambda: comparison.final_values(
        _result(), ("hits@5",)), "`metrics`"),
    Case("avatar.comparison.run_seeds: settings as a dict", lambda: comparison.run_seeds(
        jax.random.split(KEY, 2), _karate(), (("random", "abs"),), 0, {"rounds": 2}),
        "`settings`"),
    Case("avatar.comparison.run_seeds: index past the table", lambda: comparison.run_seeds(
        jax.random.split(KEY, 2), _karate(), (("random", "abs"),), 1), "`index`"),
    Case("avatar.compare: a bare name for the list", lambda: avatar.compare(
        KEY, _karate(), contenders="avatar", settings={"rounds": 2}), "`contenders`"),
    Case("avatar.align: unknown solver", lambda: avatar.align(
        loop.init(KEY, _karate()), _karate(), solver="emd"), "`solver`"),
    Case("avatar.datasets.from_graphs: truth naming a missing node", lambda: (
        datasets.from_graphs(tasks.nx.cycle_graph(5), tasks.nx.cycle_graph(5), [(0, 9)])),
        "`truth`"),
    Case("avatar.datasets.full_task: restart 1", lambda: datasets.full_task(
        "foursquare_twitter", restart=1.0), "`restart`"),
    Case("avatar.datasets.load: unknown name", lambda: datasets.load("douban"), "`source`"),
    Case("avatar.datasets.read_mat: no such file", lambda: datasets.read_mat(
        "/nonexistent/pair.mat"), "`path`"),
    Case("avatar.datasets.read_mat: unknown truth_key", lambda: datasets.read_mat(
        datasets.data_path("foursquare-twitter.mat"), truth_key="truth"), "`truth_key`"),
    Case("avatar.datasets.snowball: more nodes than allowed", lambda: datasets.snowball(
        np.random.default_rng(0), sp.csr_matrix(_circulant(8)), np.arange(8) < 3, 5),
        "`num_nodes`"),
    Case("avatar.loop.budget_sizes: budget past the candidates", lambda: loop.budget_sizes(
        34, 0.5, 0.2, 0.5, 2), "`budget_frac`"),
    Case("avatar.loop.budget_sizes: a float node count", lambda: loop.budget_sizes(
        34.0, 0.5, 0.2, 0.1, 2), "`num_nodes`"),
    Case("avatar.loop.check_result: the metrics dict", lambda: loop.check_result(
        _result().metrics), "`res`"),
    Case("avatar.loop.run_active_switch: strategy_index past the table", lambda: (
        loop.run_active_switch(KEY, _karate(), (("random", "abs"), ("entropy", "abs")), 2,
                               rounds=1, budget_frac=0.1)), "`strategy_index`"),
    Case("avatar.loop.check_switch: unknown setting", lambda: loop.check_switch(
        _karate(), (("random", "abs"),), roundz=2), "roundz"),
    Case("avatar.loop.check_switch: a budget the task cannot hold", lambda: loop.check_switch(
        _karate(), (("random", "abs"),), rounds=10), "`task`"),
    Case("avatar.loop.smallest_task: budget_frac 1", lambda: loop.smallest_task(
        0.5, 0.2, 1.0, 2), "`budget_frac`"),
    Case("avatar.loop.smallest_task: test_frac 1.5", lambda: loop.smallest_task(
        1.5, 0.2, 0.2, 2), "`test_frac`"),
    Case("avatar.parrot.log_prior: mask of n + 1 entries", lambda: parrot.log_prior(
        _karate(), np.zeros(35, bool)), "`mask`"),
    Case("avatar.parrot.parrot_cost: negative attr_weight", lambda: parrot.parrot_cost(
        _karate(), np.zeros(34, bool), parrot.PARROT_DEFAULTS._replace(attr_weight=-1.0)),
        "`attr_weight`"),
    Case("avatar.parrot.proximal_step: cost of another shape", lambda: parrot.proximal_step(
        _karate(), jnp.zeros((34, 33)), jnp.zeros((34, 34)), jnp.full((34, 34), 1 / 34**2)),
        "`cost`"),
    Case("avatar.parrot_official.add_anchors: pair index past the pairs", lambda: (
        parrot_official.add_anchors(_empty(), _graphs(), [0, 6])), "`pairs`"),
    Case("avatar.parrot_official.add_block: cols past the pairs", lambda: (
        parrot_official.add_block(_empty(), _graphs(), jnp.array([0, 9]), jnp.ones(2, bool))),
        "`cols`"),
    Case("avatar.parrot_official.add_block: float valid", lambda: parrot_official.add_block(
        _empty(), _graphs(), jnp.array([0, 1]), jnp.ones(2)), "`valid`"),
    Case("avatar.parrot_official.anchor_mask: anchors over nodes", lambda: (
        parrot_official.anchor_mask(_graph_task(), np.zeros(8, bool))), "`anchors`"),
    Case("avatar.parrot_official.cpot: parrot.ParrotSettings for s", lambda: (
        parrot_official.cpot(_graph_task(), _graphs(), _po_cost(), np.zeros(6, bool),
                             parrot.PARROT_DEFAULTS)), "`s`"),
    Case("avatar.parrot_official.empty_stats: graphs of another task", lambda: (
        parrot_official.empty_stats(_graph_task(10), _graphs())), "`g`"),
    Case("avatar.parrot_official.exp_cos_cost: feature widths differ", lambda: (
        parrot_official.exp_cos_cost(jnp.ones((3, 4)), jnp.ones((3, 5)))), "`x2`"),
    Case("avatar.parrot_official.host_products: the task for g", lambda: (
        parrot_official.host_products(_graph_task())), "`g`"),
    Case("avatar.parrot_official.position_costs: sums of another task", lambda: (
        parrot_official.position_costs(_empty(10), _graphs())), "`stats`"),
    Case("avatar.parrot_official.prepare: adj1 with an isolated node", lambda: (
        parrot_official.prepare(_graph_task(), _isolated_last(), _circulant(8), PO)),
        "`adj1`"),
    Case("avatar.scores.gain_score: anchors shorter than the plan", lambda: scores.gain_score(
        jnp.full((4, 4), 1 / 16), jnp.ones((4, 4)), jnp.ones((4, 4)), np.eye(4), np.eye(4),
        np.zeros(3, bool), np.arange(4)), "`anchors`"),
    Case("avatar.scores.l2_normalise: NaN score", lambda: scores.l2_normalise(
        jnp.array([1.0, jnp.nan])), "`s`"),
    Case("avatar.solvers.implicit_utility_grad: weights transposed", lambda: (
        solvers.implicit_utility_grad(_cost(), EPS, jnp.ones((7, 6)))), "`weights`"),
    Case("avatar.solvers.marginal_error: 1-D plan", lambda: solvers.marginal_error(
        jnp.full(4, 0.25)), "`plan`"),
    Case("avatar.tasks.anchor_positions: a NetworkPair", lambda: tasks.anchor_positions(
        _network_pair()), "`task`"),
    Case("avatar.tasks.as_graph_task: already a GraphTask", lambda: tasks.as_graph_task(
        _graph_task()), "`task`"),
    Case("avatar.tasks.graph_task: pairs repeating a node", lambda: tasks.graph_task(
        _circulant(8), _circulant(8), np.zeros((8, 0)), np.zeros((8, 0)), [[0, 0], [0, 1]]),
        "`pairs`"),
    Case("avatar.tasks.graph_pair: edge_noise 1", lambda: tasks.graph_pair(
        tasks.nx.cycle_graph(8), edge_noise=1.0), "`edge_noise`"),
    Case("avatar.tasks.is_graph_task: a NetworkPair", lambda: tasks.is_graph_task(
        _network_pair()), "`task`"),
    Case("avatar.tasks.norm_adjacencies: a NetworkPair", lambda: tasks.norm_adjacencies(
        _network_pair()), "`task`"),
    Case("avatar.tasks.num_pairs: a NetworkPair", lambda: tasks.num_pairs(_network_pair()),
         "`task`"),
    Case("avatar.tasks.pair_nodes: a dict of arrays", lambda: tasks.pair_nodes(
        {"src": np.arange(3), "tgt": np.arange(3)}), "`task`"),
    Case("avatar.tasks.plan_shape: a NetworkPair", lambda: tasks.plan_shape(_network_pair()),
         "`task`"),
    Case("avatar.tasks.rwr_columns: restart 1", lambda: tasks.rwr_columns(
        _circulant(8), np.arange(3), 1.0), "`restart`"),
    Case("avatar.tasks.rwr_matrix: restart 0", lambda: tasks.rwr_matrix(_circulant(8), 0.0),
         "`restart`"),
    Case("avatar.tasks.sym_norm_adjacency: negative weight", lambda: tasks.sym_norm_adjacency(
        -_circulant(8)), "`adj`"),
    Case("avatar.tasks.sym_norm_laplacian: non-square adjacency", lambda: (
        tasks.sym_norm_laplacian(_circulant(8)[:6])), "`adj`"),
    Case("avatar.tasks.to_bcoo: NaN entry", lambda: tasks.to_bcoo(
        _with(_circulant(8), (0, 1), np.nan)), "`m`"),
    Case("avatar.wholegraph.cold_product_steps: anchors over nodes", lambda: (
        wholegraph.cold_product_steps(_graph_task(), _graphs(), np.zeros(8, bool), _round(),
                                      PO)), "`anchors`"),
    Case("avatar.wholegraph.initial_anchors: a float num_pairs", lambda: (
        wholegraph.initial_anchors(KEY, 600.0, wholegraph.Protocol())), "`num_pairs`"),
    Case("avatar.wholegraph.initial_split: a batch of keys", lambda: wholegraph.initial_split(
        jax.random.split(KEY, 2), 600, wholegraph.Protocol()), "`key`"),
    Case("avatar.wholegraph.round_solve: anchors over nodes", lambda: wholegraph.round_solve(
        _graph_task(), _graphs(), np.zeros(8, bool), None, None, PO, False), "`anchors`"),
    Case("avatar.wholegraph.sizes: rounds 0", lambda: wholegraph.sizes(
        600, wholegraph.Protocol(rounds=0)), "`protocol.rounds`"),
    Case("avatar.wholegraph.smallest_task: budget_frac 0", lambda: wholegraph.smallest_task(
        wholegraph.Protocol(budget_frac=0.0)), "`protocol.budget_frac`"),
    Case("avatar.wholegraph.solve_round0: a square task", lambda: wholegraph.solve_round0(
        KEY, _karate(), _graphs(), PO, wholegraph.Protocol()), "`task`"),
]
