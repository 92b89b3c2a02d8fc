"""The active supervision loop: rounds of querying the most informative unanchored nodes.

AvAtar's informativeness of source node i (our reading of the public code) weighs the
adjoint cost gradient by the cost and the row-normalised plan P = T / (T 1):

    score_i = sum_j P_ij |C_ij (grad_C f)_ij|,      grad_C f from ``adjoint.cost_gradient``.

The whole loop is one ``lax.scan`` over rounds with static shapes (anchors are a boolean
mask), so ``jit(vmap(...))`` runs many seeds at once. A fixed random test set is never
queried and is where the metrics are measured, so strategies are compared on the same
nodes; initial anchors and queries come from the other nodes.

Checks (eager, before ``jit``): ``strategy``, ``utility``, ``solver`` (known names);
``epsilon`` > 0; ``feat_weight``, ``anchor_weight`` >= 0 and finite; ``rounds`` >= 1 and
the fractions / budget (``budget_sizes``); every array of ``task`` (shapes, finite values,
``task.truth`` a permutation of 0..n-1). Traced values: each round's Sinkhorn / FGW solve
and adjoint CG solve report flags that the scan returns in ``ActiveResult``
(``plan_converged``, ``plan_error``, ``cg_converged``, ``cg_residual``); ``run_active`` turns
them into a ``RuntimeWarning`` with the numbers (directly when its result is concrete, via
``jax.debug.callback`` when it is itself traced, e.g. under the experiment's ``vmap``).
``informativeness`` checks ``plan`` / ``cost`` (shapes, finite) and warns like
``adjoint.cost_gradient``. ``validate_config`` checks an experiment config (called first in
``experiment.train_and_evaluate``).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import adjoint, alignment, solvers, utilities
from jaxlab.avatar import tasks as tasks_module
from jaxlab.avatar.tasks import AlignmentTask
from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey

STRATEGIES = ("avatar", "random", "entropy", "margin", "degree", "betweenness")


class ActiveResult(NamedTuple):
    """metrics: dict of [rounds + 1] arrays (before any query, then after each round);
    queried: [rounds, per_round] source nodes queried each round; anchors: [n] final mask;
    test: [n] the evaluation mask; plan_converged, plan_error: [rounds + 1] the solver's
    convergence flag and marginal L1 error of each plan; cg_converged, cg_residual:
    [rounds] the adjoint CG flag and relative residual of each round (True / 0 when the
    strategy is not "avatar")."""

    metrics: dict
    queried: Array
    anchors: Array
    test: Array
    plan_converged: Array
    plan_error: Array
    cg_converged: Array
    cg_residual: Array


def _informativeness(plan, cost, epsilon, utility, ctx, cg_tol=1e-6):
    g = utilities.gradient(utility, plan, ctx)
    gc, info = adjoint.cost_gradient_and_info(plan, g, epsilon, tol=cg_tol)
    return jnp.sum(alignment.row_normalise(plan) * jnp.abs(cost * gc), axis=1), info


def informativeness(plan: Array, cost: Array, epsilon, utility: str = "entropy",
                    ctx: utilities.UtilityContext | None = None) -> Array:
    """[n] AvAtar node scores from the adjoint gradient of ``utility`` w.r.t. the cost.

    Warns (``adjoint.check_adjoint``) when called eagerly and the CG solve did not converge.
    """
    validation.check_one_of("utility", utility, utilities.UTILITIES)
    validation.check_ndim("plan", plan, 2)
    validation.check_shape("cost", cost, np.shape(plan))
    validation.check_finite("cost", cost)
    scores, info = _informativeness(plan, cost, epsilon, utility, ctx)
    adjoint.check_adjoint(info, 1e-6, 500)
    return scores


def budget_sizes(num_nodes: int, test_frac: float, init_frac: float, budget_frac: float,
                 rounds: int) -> tuple[int, int, int]:
    """(test size, initial anchors, queries per round), validated against the candidates."""
    validation.check_positive_int("rounds", rounds)
    for name, v in (("test_frac", test_frac), ("init_frac", init_frac),
                    ("budget_frac", budget_frac)):
        validation.check_in_range(name, v, 0.0, 1.0, high_inclusive=False)
    n_test = int(round(test_frac * num_nodes))
    n_init = int(round(init_frac * num_nodes))
    n_query = int(round(budget_frac * num_nodes))
    candidates = num_nodes - n_test - n_init
    if n_query > candidates:
        raise ValueError(f"budget of {n_query} queries (`budget_frac`={budget_frac}) exceeds the "
                         f"{candidates} candidate nodes left after the test set and initial "
                         "anchors.")
    per_round = n_query // rounds
    if per_round < 1:
        raise ValueError(f"`budget_frac`={budget_frac} gives {n_query} queries, fewer than "
                         f"`rounds`={rounds}.")
    return n_test, n_init, per_round


@functools.partial(jax.jit, static_argnames=(
    "strategy", "rounds", "n_test", "n_init", "per_round", "utility", "solver",
    "sinkhorn_threshold", "sinkhorn_max_iterations", "cg_tol"))
def _run(task, key, epsilon, feat_weight, anchor_weight, *, strategy, rounds, n_test, n_init,
         per_round, utility, solver, sinkhorn_threshold, sinkhorn_max_iterations, cg_tol):
    n = task.truth.shape[0]
    k_split, k_loop = jax.random.split(key)
    order = jax.random.permutation(k_split, n)
    test = jnp.zeros(n, bool).at[order[:n_test]].set(True)
    anchors = jnp.zeros(n, bool).at[order[n_test:n_test + n_init]].set(True)
    ctx = utilities.UtilityContext(lap1=jnp.asarray(task.lap1, jnp.float32),
                                   lap2=jnp.asarray(task.lap2, jnp.float32))

    def plan_for(mask):
        cost = alignment.anchor_cost(task, mask, feat_weight, anchor_weight)
        if solver == "fgw":
            res = solvers.fgw_solve(cost, jnp.asarray(task.struct1, jnp.float32),
                                    jnp.asarray(task.struct2, jnp.float32), epsilon)
        else:
            res = solvers.entropic_solve(cost, epsilon, sinkhorn_threshold,
                                         sinkhorn_max_iterations)
        return cost, res

    no_cg = adjoint.AdjointInfo(jnp.bool_(True), jnp.float32(0.0), jnp.int32(0))

    def scores(k, cost, plan):
        if strategy == "avatar":
            return _informativeness(plan, cost, epsilon, utility, ctx._replace(cost=cost),
                                    cg_tol)
        if strategy == "random":
            return jax.random.uniform(k, (n,)), no_cg
        if strategy == "entropy":
            return alignment.row_entropy(plan), no_cg
        if strategy == "margin":
            return -alignment.row_margin(plan), no_cg
        if strategy == "degree":
            return jnp.asarray(task.degree, jnp.float32), no_cg
        return jnp.asarray(task.betweenness, jnp.float32), no_cg

    def body(mask, k):
        cost, res = plan_for(mask)
        s, cg = scores(k, cost, res.plan)
        s = jnp.where(mask | test, -jnp.inf, s)
        _, idx = jax.lax.top_k(s, per_round)
        mets = alignment.alignment_metrics(res.plan, task.truth, test)
        return mask.at[idx].set(True), (mets, idx, res.converged, res.marginal_error, cg)

    final, (mets, queried, conv, err, cg) = jax.lax.scan(body, anchors,
                                                         jax.random.split(k_loop, rounds))
    _, res = plan_for(final)
    last = alignment.alignment_metrics(res.plan, task.truth, test)
    mets = jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), mets, last)
    return ActiveResult(mets, queried, final, test,
                        jnp.concatenate([conv, res.converged[None]]),
                        jnp.concatenate([err, res.marginal_error[None]]),
                        cg.converged, cg.residual)


def check_result(res: ActiveResult, epsilon=None, sinkhorn_threshold=None,
                 sinkhorn_max_iterations=None, cg_tol: float = 1e-6) -> bool:
    """Warns (RuntimeWarning) if any plan or adjoint solve of ``res`` did not converge.

    Call it on the concrete result of ``run_active`` under your own ``jit`` / ``vmap``
    (``run_active`` does it itself otherwise). Returns True when every solve converged.
    """
    ok = solvers.check_plan(
        solvers.PlanResult(None, res.plan_converged, res.plan_error, None),
        sinkhorn_threshold, sinkhorn_max_iterations, epsilon, where=" in the active loop")
    cg = adjoint.AdjointInfo(res.cg_converged, res.cg_residual, None)
    return adjoint.check_adjoint(cg, cg_tol, 500, where=" in the active loop") and ok


def run_active(task: AlignmentTask, key: PRNGKey, strategy: str = "avatar", *,
               epsilon: float = 0.05, rounds: int = 10, test_frac: float = 0.5,
               init_frac: float = 0.2, budget_frac: float = 0.2, utility: str = "entropy",
               solver: str = "ot", feat_weight: float = 1.0,
               anchor_weight: float = 1.0, sinkhorn_threshold: float = 1e-4,
               sinkhorn_max_iterations: int = 10000, cg_tol: float = 1e-4) -> ActiveResult:
    """Runs the active alignment protocol (initial anchors, ``rounds`` rounds of queries).

    Args:
      task: an AlignmentTask (NumPy or JAX arrays; vmap over ``key`` for seeds).
      key: PRNG key (test split, initial anchors, random strategy).
      strategy: one of STRATEGIES.
      epsilon: entropic regularisation > 0 of the plans (costs are mean-normalised).
      rounds: number of query rounds.
      test_frac, init_frac, budget_frac: fractions of n for the held-out test set, the
        initial anchors and the total query budget.
      utility: one of utilities.UTILITIES (for "avatar").
      solver: "ot" (entropic OT on the cost) or "fgw" (fused Gromov-Wasserstein).
      feat_weight, anchor_weight: weights of the feature and anchor terms of the cost.
      sinkhorn_threshold: tolerance on the plan's L1 marginal error ("ot" solver). 1e-4:
        at 1e-5 and 3000 iterations the Sinkhorn solves of the default tasks stopped at
        2e-5..5e-5 (measured on karate; 1e-5 needed ~25k iterations), so every run warned.
      sinkhorn_max_iterations: Sinkhorn iteration cap (10000: some karate solves needed
        just over 3000 to reach 1e-4); a solve that hits it is reported.
      cg_tol: relative residual of the adjoint CG solves (500 iterations). 1e-4: at 1e-6 the
        float32 solves of the 150-node quick tasks ended at 1e-6..4e-5, so runs warned.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {STRATEGIES}, got {strategy!r}.")
    if utility not in utilities.UTILITIES:
        raise ValueError(f"`utility` must be one of {utilities.UTILITIES}, got {utility!r}.")
    if solver not in ("ot", "fgw"):
        raise ValueError(f"`solver` must be 'ot' or 'fgw', got {solver!r}.")
    validation.check_in_range("epsilon", epsilon, 0.0, low_inclusive=False)
    validation.check_in_range("feat_weight", feat_weight, 0.0, np.inf)
    validation.check_in_range("anchor_weight", anchor_weight, 0.0, np.inf)
    validation.check_in_range("sinkhorn_threshold", sinkhorn_threshold, 0.0,
                              low_inclusive=False)
    validation.check_positive_int("sinkhorn_max_iterations", sinkhorn_max_iterations)
    validation.check_in_range("cg_tol", cg_tol, 0.0, low_inclusive=False)
    n = task.truth.shape[-1]
    _check_task(task)
    n_test, n_init, per_round = budget_sizes(n, test_frac, init_frac, budget_frac, rounds)
    res = _run(task, key, epsilon, feat_weight, anchor_weight, strategy=strategy,
               rounds=rounds, n_test=n_test, n_init=n_init, per_round=per_round,
               utility=utility, solver=solver, sinkhorn_threshold=sinkhorn_threshold,
               sinkhorn_max_iterations=sinkhorn_max_iterations, cg_tol=cg_tol)
    limits = (sinkhorn_threshold, sinkhorn_max_iterations) if solver == "ot" else (None, None)
    limits = (*limits, cg_tol)
    if isinstance(res.plan_converged, jax.core.Tracer):
        # Under the caller's jit / vmap: check when the values exist (once per call).
        jax.debug.callback(lambda r: check_result(r, None, *limits), res)
    else:
        check_result(res, epsilon, *limits)
    return res


def _check_task(task: AlignmentTask) -> None:
    n = task.truth.shape[-1]
    for name in ("pos1", "pos2", "struct1", "struct2", "lap1", "lap2"):
        validation.check_shape(f"task.{name}", getattr(task, name), (n, n))
    validation.check_shape("task.feat2", task.feat2, (n, task.feat1.shape[1]))
    for name in ("degree", "betweenness"):
        validation.check_shape(f"task.{name}", getattr(task, name), (n,))
    for name in ("feat1", "feat2", "pos1", "pos2", "struct1", "struct2", "lap1", "lap2",
                 "degree", "betweenness"):
        validation.check_finite(f"task.{name}", getattr(task, name))
    validation.check_int_range("task.truth", task.truth, 0, n)
    if not isinstance(task.truth, jax.core.Tracer):
        t = np.asarray(task.truth)
        if t.ndim == 1 and len(np.unique(t)) != n:
            raise ValueError(f"`task.truth` must be a permutation of 0..{n - 1}, got "
                             f"{n - len(np.unique(t))} repeated entries.")


def validate_config(config) -> None:
    """Checks an AvAtar experiment config (experiments/configs/avatar.py); raises ValueError
    naming ``config.<field>``. ``num_seeds`` >= 2 because a 95% CI is computed over seeds."""
    validation.check_fields(config, {
        "epsilon": validation.POSITIVE, "rounds": validation.POSITIVE_INT,
        "test_frac": validation.UNIT_OPEN_RIGHT, "init_frac": validation.UNIT_OPEN_RIGHT,
        "budget_frac": validation.UNIT_OPEN_RIGHT, "graph_nodes": validation.POSITIVE_INT,
        "point_nodes": validation.POSITIVE_INT, "embedding_nodes": validation.POSITIVE_INT,
        "nonrigid": validation.NON_NEGATIVE, "sinkhorn_threshold": validation.POSITIVE,
        "sinkhorn_max_iterations": validation.POSITIVE_INT, "cg_tol": validation.POSITIVE})
    validation.check_min_count("config.num_seeds", config.num_seeds, 2,
                               "a 95% confidence interval over seeds is computed")
    validation.check_min_count("config.graph_nodes", config.graph_nodes, 4,
                               "the Holme-Kim graph attaches 3 edges per node")
    for name in ("strategies", "tasks", "scaling_sizes"):
        if len(config[name]) < 1:
            raise ValueError(f"`config.{name}` must not be empty.")
    for s in config.strategies:
        validation.check_one_of("config.strategies", s, STRATEGIES)
    known = ("synthetic_graph", "point_cloud", "point_cloud_nonrigid", "embeddings",
             *tasks_module.REAL_GRAPHS)
    for t in config.tasks:
        validation.check_one_of("config.tasks", t, known)
    validation.check_one_of("config.utility", config.utility, utilities.UTILITIES)
    for v in config.scaling_sizes:
        validation.check_min_count("config.scaling_sizes", v, 2, "each is an n x n plan size")
    sizes = {"synthetic_graph": config.graph_nodes, "point_cloud": config.point_nodes,
             "point_cloud_nonrigid": config.point_nodes, "embeddings": config.embedding_nodes}
    for t in config.tasks:
        n = sizes[t] if t in sizes else tasks_module.REAL_GRAPHS[t]().number_of_nodes()
        try:
            budget_sizes(n, config.test_frac, config.init_frac, config.budget_frac,
                         config.rounds)
        except ValueError as e:
            raise ValueError(f"config.budget_frac / config.rounds do not fit task {t!r} "
                             f"({n} nodes): {e}") from None
