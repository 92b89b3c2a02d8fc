"""Bad-input cases for jaxlab.avatar (solvers, adjoint CG, utilities, active loop, tasks)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import avatar
from jaxlab.avatar import (
    adjoint,
    alignment,
    baselines,
    datasets,
    loop,
    parrot,
    scores,
    solvers,
    tasks,
    utilities,
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
    Case("avatar/utilities/unknown", lambda: utilities.gradient("nope", _plan()), "utility"),
    Case("avatar/utilities/plan_nan", lambda: utilities.gradient(
        "entropy", _with(_plan(), (0, 0), np.nan)), "plan"),
    Case("avatar/utilities/plan_negative", lambda: utilities.value(
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
    Case("avatar/graph_pair/feat_noise_negative", lambda: tasks.real_graph_pair(
        "karate", feat_noise=-1.0), "feat_noise"),
    Case("avatar/graph_pair/feat_dim_negative", lambda: tasks.real_graph_pair(
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
    Case("avatar/scores/official_cost_shape", lambda: scores.official_score(
        jnp.ones((4, 4)), jnp.ones((4, 3)), jnp.ones((4, 4))), "cost"),
    Case("avatar/scores/abs_grad_nan", lambda: scores.abs_score(
        jnp.ones((4, 4)), jnp.ones((4, 4)), _with(np.ones((4, 4)), (1, 1), np.nan)),
         "grad_cost"),
    Case("avatar/scores/gain_plan_not_square", lambda: scores.gain_matrix(
        jnp.ones((4, 5)), jnp.ones((4, 5)), jnp.ones((4, 5)), np.eye(4), np.eye(5),
        np.zeros(4, bool), np.arange(4)), "plan"),
    Case("avatar/scores/combine_weights_length", lambda: scores.combine(
        [jnp.ones(3), jnp.ones(3)], [1.0]), "weights"),
    Case("avatar/datasets/name_unknown", lambda: datasets.load_pair("douban"), "name"),
    Case("avatar/datasets/subsample_too_big", lambda: datasets.subsample(
        "foursquare_twitter", 5000), "num_nodes"),
    Case("avatar/datasets/subsample_seed_negative", lambda: datasets.subsample(
        "foursquare_twitter", 50, seed=-1), "seed"),
    Case("avatar/datasets/subsample_nodes_zero", lambda: datasets.subsample(
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
    Case("avatar/density/plan_3d", lambda: baselines.density_score(
        np.full((2, 4, 4), 1 / 16), np.ones((4, 3))), "plan"),
    Case("avatar/density/x_rows_differ", lambda: baselines.density_score(
        _plan(), np.ones((5, 3))), "x"),
    Case("avatar/density/plan_nan", lambda: baselines.density_score(
        _with(np.full((4, 4), 0.25), (0, 0), np.nan), np.ones((4, 3))), "plan"),
    Case("avatar/density/plan_negative", lambda: baselines.density_score(
        _with(np.full((4, 4), 0.25), (0, 0), -0.25), np.ones((4, 3))), "plan"),
    Case("avatar/density/x_inf", lambda: baselines.density_score(
        np.full((4, 4), 0.25), _with(np.ones((4, 3)), (1, 1), np.inf)), "x"),
    Case("avatar/density/x_1d", lambda: baselines.density_score(
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
    Case("avatar/topmatchings/plan_1d", lambda: baselines.topmatchings_score(
        jax.random.key(0), np.full(4, 0.25), 4), "plan"),
]
