"""The active supervision loop: rounds of querying the most informative unanchored nodes.

AvAtar's informativeness of source node i (our reading of the public code) weighs the
adjoint cost gradient by the cost and the row-normalised plan P = T / (T 1):

    score_i = sum_j P_ij |C_ij (grad_C f)_ij|,      grad_C f from ``adjoint.cost_gradient``.

The whole loop is one ``lax.scan`` over rounds with static shapes (anchors are a boolean
mask), so ``jit(vmap(...))`` runs many seeds at once. A fixed random test set is never
queried and is where the metrics are measured, so strategies are compared on the same
nodes; initial anchors and queries come from the other nodes.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxlab.avatar import adjoint, alignment, solvers, utilities
from jaxlab.avatar.tasks import AlignmentTask
from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey

STRATEGIES = ("avatar", "random", "entropy", "margin", "degree", "betweenness")


class ActiveResult(NamedTuple):
    """metrics: dict of [rounds + 1] arrays (before any query, then after each round);
    queried: [rounds, per_round] source nodes queried each round; anchors: [n] final mask;
    test: [n] the evaluation mask."""

    metrics: dict
    queried: Array
    anchors: Array
    test: Array


def informativeness(plan: Array, cost: Array, epsilon, utility: str = "entropy",
                    ctx: utilities.UtilityContext | None = None) -> Array:
    """[n] AvAtar node scores from the adjoint gradient of ``utility`` w.r.t. the cost."""
    g = utilities.gradient(utility, plan, ctx)
    gc = adjoint.cost_gradient(plan, g, epsilon)
    return jnp.sum(alignment.row_normalise(plan) * jnp.abs(cost * gc), axis=1)


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
    "strategy", "rounds", "n_test", "n_init", "per_round", "utility", "solver"))
def _run(task, key, epsilon, feat_weight, anchor_weight, *, strategy, rounds, n_test, n_init,
         per_round, utility, solver):
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
            plan = solvers.fgw_plan(cost, jnp.asarray(task.struct1, jnp.float32),
                                    jnp.asarray(task.struct2, jnp.float32), epsilon)
        else:
            plan = solvers.entropic_plan(cost, epsilon)
        return cost, plan

    def scores(k, cost, plan):
        if strategy == "avatar":
            return informativeness(plan, cost, epsilon, utility, ctx._replace(cost=cost))
        if strategy == "random":
            return jax.random.uniform(k, (n,))
        if strategy == "entropy":
            return alignment.row_entropy(plan)
        if strategy == "margin":
            return -alignment.row_margin(plan)
        if strategy == "degree":
            return jnp.asarray(task.degree, jnp.float32)
        return jnp.asarray(task.betweenness, jnp.float32)

    def body(mask, k):
        cost, plan = plan_for(mask)
        s = scores(k, cost, plan)
        s = jnp.where(mask | test, -jnp.inf, s)
        _, idx = jax.lax.top_k(s, per_round)
        return mask.at[idx].set(True), (alignment.alignment_metrics(plan, task.truth, test), idx)

    final, (mets, queried) = jax.lax.scan(body, anchors, jax.random.split(k_loop, rounds))
    _, plan = plan_for(final)
    last = alignment.alignment_metrics(plan, task.truth, test)
    mets = jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), mets, last)
    return ActiveResult(mets, queried, final, test)


def run_active(task: AlignmentTask, key: PRNGKey, strategy: str = "avatar", *,
               epsilon: float = 0.05, rounds: int = 10, test_frac: float = 0.5,
               init_frac: float = 0.2, budget_frac: float = 0.2, utility: str = "entropy",
               solver: str = "ot", feat_weight: float = 1.0,
               anchor_weight: float = 1.0) -> ActiveResult:
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
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {STRATEGIES}, got {strategy!r}.")
    if utility not in utilities.UTILITIES:
        raise ValueError(f"`utility` must be one of {utilities.UTILITIES}, got {utility!r}.")
    if solver not in ("ot", "fgw"):
        raise ValueError(f"`solver` must be 'ot' or 'fgw', got {solver!r}.")
    validation.check_in_range("epsilon", epsilon, 0.0, low_inclusive=False)
    n = task.truth.shape[-1]
    _check_task(task)
    n_test, n_init, per_round = budget_sizes(n, test_frac, init_frac, budget_frac, rounds)
    return _run(task, key, epsilon, feat_weight, anchor_weight, strategy=strategy,
                rounds=rounds, n_test=n_test, n_init=n_init, per_round=per_round,
                utility=utility, solver=solver)


def _check_task(task: AlignmentTask) -> None:
    n = task.truth.shape[-1]
    for name in ("pos1", "pos2", "struct1", "struct2", "lap1", "lap2"):
        validation.check_shape(f"task.{name}", getattr(task, name), (n, n))
    validation.check_shape("task.feat2", task.feat2, (n, task.feat1.shape[1]))
    for name in ("degree", "betweenness"):
        validation.check_shape(f"task.{name}", getattr(task, name), (n,))
