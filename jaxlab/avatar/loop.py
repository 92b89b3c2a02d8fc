"""The active supervision loop as an ``Algorithm``: one step = one query round.

AvAtar scores a source node from the adjoint cost gradient G = grad_C f of a plan utility
(``adjoint``, ``utilities``); ``score`` picks the formula (``scores``): "official" (the
public code's signed s_i = sum_j P_ij C_ij G_ij / a_i), "abs" (jaxlab's earlier
sum_j P_ij |C_ij G_ij|, the default, kept for continuity) or "gain" (ours: first-order
utility change of labelling node i, in expectation over its plausible partners). Several
utilities (a tuple) give the official weighted sum of L2-normalised scores.

API (blackjax / optax style; the key always first, shapes static, anchors a boolean mask):

    alg = active(task, "avatar", rounds=10)       # validates, binds task and settings
    state = alg.init(key)                          # State(anchors, test, heldout)
    state, info = alg.step(key, state)             # solve, score, pick, label; Info

``init(key, task, ...)`` / ``step(key, state, task, ...)`` are the same functions with the
task and settings as arguments (``active`` closes over them); ``evaluate(state, task, ...)``
measures the plan of the current anchors. ``run_active`` is the protocol: ``init``, then a
``lax.scan`` of ``step`` over ``rounds`` keys, then ``evaluate``, so ``jit(vmap(...))`` runs
many seeds at once; ``run_active_switch`` is the same with the strategy a traced index into
a static table (one compile for every strategy). Aligners (``solver``): "ot" / "fgw" on
``alignment.anchor_cost`` (the ``simple`` aligner) or "parrot" (``parrot``). Baselines
``density`` and ``topmatchings``: ``baselines``. Protocols: "fixed" (default; ours) — a
fixed random test set is never queried and is where the metrics are measured, so
strategies are compared on the same nodes; "paper" (AvAtar's) — the test set is every
node not anchored yet, queried nodes leave it, MRR over both directions on it. Under
"paper", ``heldout_frac`` > 0 also draws a never-queried set before round 0 (queries come
from the rest) and ``ActiveResult`` reports three lines: ``metrics`` (the paper's),
``heldout_metrics`` (never queried: what the labels did to pairs nobody labelled) and
``removal_metrics`` (the round-0 plan on the final test set: what removing the queried
pairs alone does). Ties in a plan are ordered at random, never truth first
(``alignment``).
``Info.picked_correct`` / ``pool_correct``: the
share of the round's queries / candidates whose plan row already ranks the true match
first (a useful strategy picks mostly wrong nodes).

Whole graphs (ours): ``task`` may be a ``tasks.GraphTask`` (``datasets.full_task``: n1 / n2
nodes, k ground-truth pairs, sparse adjacencies, [n1, n2] plans). The masks of ``State``
are then over the k pairs (on a square task pair i is (i, truth[i]), so a mask over source
nodes is the same thing and those results are unchanged bit for bit); node scores are per
source row, read at each pair's source node; the metrics are ``alignment.pair_metrics``
(both directions, the true partner among all n2 targets / n1 sources). Not defined on a
``GraphTask`` (``graph_task_limit``, ValueError naming the argument): the "fgw" solver,
the "gain" score, the "consistency" utility. Memory: each round holds a few dense
[n1, n2] float32 buffers (cost, plan, the Sinkhorn / CG work arrays; topmatchings its
[num_samples, n1, n2] perturbed copies); docs/avatar_fullgraph.md sizes them.

Checks (eager, before ``jit``): ``strategy``, ``score``, ``protocol``, ``utility`` (a name
or a non-empty tuple of names), ``solver`` (known names); ``utility_weights`` (one finite
weight >= 0 per utility); ``epsilon`` > 0; ``feat_weight``, ``anchor_weight`` >= 0 and
finite; ``rounds`` >= 1 and the fractions / budget (``budget_sizes``); every array of
``task`` (shapes, finite values, ``task.truth`` a permutation of 0..n-1; for a
``GraphTask`` its pairs in range and one-to-one). ``run_active``
and ``active`` make every check; ``init`` / ``step`` check names, fractions and counts
(they are meant to be traced).
Traced values: each round's Sinkhorn / FGW solve and adjoint CG solve report flags in
``Info`` / ``ActiveResult`` (``plan_converged``, ``plan_error``, ``cg_converged``,
``cg_residual``); ``check_result`` turns them into a ``RuntimeWarning`` with the numbers.
``run_active`` calls it itself (directly when its result is concrete, via
``jax.debug.callback`` when it is itself traced, e.g. under your ``vmap``); after your own
``jit(alg.step)`` call ``jaxlab.avatar.loop.check_result(info)``. ``check=False`` leaves the
check to the caller: a traced ``run_active`` then adds no host callback, so JAX's persistent
compilation cache can keep the compiled program (a program with a host callback is never
written to it); call ``check_result(res, ...)`` on the concrete result, as
``comparison.run_seeds`` does.
``informativeness`` checks ``plan`` / ``cost`` (shapes, finite) and warns like
``adjoint.cost_gradient``. ``check_switch`` makes ``run_active_switch``'s checks without
running (what ``compare`` checks before any contender runs).
"""

import functools
import inspect
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import (
    adjoint,
    alignment,
    baselines,
    parrot,
    scores,
    solvers,
    utilities,
)
from jaxlab.avatar import tasks as tasks_module
from jaxlab.avatar.tasks import AlignmentTask
from jaxlab.core import validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Algorithm, Array, PRNGKey

__all__ = ["STRATEGIES", "SOLVERS", "SCORES", "PROTOCOLS", "State", "Info", "ActiveResult",
    "informativeness", "smallest_task", "budget_sizes", "init", "align", "evaluate", "step",
    "active", "run_active", "run_active_switch", "check_switch", "check_result"]

STRATEGIES = ("avatar", "random", "entropy", "margin", "degree", "betweenness", "density",
              "topmatchings")
SOLVERS = ("ot", "fgw", "parrot")
SCORES = scores.SCORES
PROTOCOLS = ("fixed", "paper")


class State(NamedTuple):
    """State of the active loop.

    Attributes:
      anchors: [n] bool, source nodes whose match is labelled (initial anchors + queries).
      test: [n] bool, the nodes the metrics are measured on: "fixed", the held-out nodes
        (never queried; fixed by ``init``); "paper", every node not anchored yet.
      heldout: [n] bool, nodes drawn by ``init`` that are never queried (queries come only
        from the rest): "fixed", the test set; "paper", round(``heldout_frac`` n) nodes
        (none by default), measured beside the paper's metric.
    """

    anchors: Array
    test: Array
    heldout: Array


class Info(NamedTuple):
    """What one round (``step``) did.

    Attributes:
      metrics: dict of [] test metrics ("mrr", "hits@k") of this round's plan, i.e. of the
        anchors *before* this round's queries.
      queried: [num_queries] int32 source nodes labelled this round.
      plan_converged, plan_error: [] the solver's convergence flag and marginal L1 error.
      cg_converged, cg_residual: [] the adjoint CG flag and relative residual (True / 0 when
        the strategy is not "avatar"; the worst over utilities).
      picked_correct: [] share of this round's queries whose plan row already ranks the
        true match first (top-1 correct before labelling): a useful strategy picks few.
        Ties in the row count as a random order (``alignment.top1_probability``).
      pool_correct: [] the same share over all candidate nodes of the round (the base rate).
      heldout_metrics: dict of [] metrics of this round's plan on ``state.heldout`` (NaN
        when it is empty).
      pair_values: dict of [k] per-pair values of this round's plan
        (``alignment.pair_values``: reciprocal rank and Hits@k, both directions).
    """

    metrics: dict
    queried: Array
    plan_converged: Array
    plan_error: Array
    cg_converged: Array
    cg_residual: Array
    picked_correct: Array
    pool_correct: Array
    heldout_metrics: dict
    pair_values: dict


class ActiveResult(NamedTuple):
    """metrics: dict of [rounds + 1] arrays (before any query, then after each round);
    queried: [rounds, per_round] source nodes queried each round; anchors: [n] final mask;
    test: [n] the evaluation mask; plan_converged, plan_error: [rounds + 1] the solver's
    convergence flag and marginal L1 error of each plan; cg_converged, cg_residual:
    [rounds] the adjoint CG flag and relative residual of each round (True / 0 when the
    strategy is not "avatar"); picked_correct, pool_correct: [rounds] the share of queries /
    of candidates already top-1 correct before each round's labels (see ``Info``);
    heldout_metrics: dict of [rounds + 1] metrics on ``State.heldout`` (never queried; NaN
    when there is none; under "fixed" the same as ``metrics``); removal_metrics: dict of []
    the round-0 plan's metrics on the final ``test`` set (the removal-only line: what the
    last round's metrics would be if the labels had only removed the queried pairs from
    the test set and improved none of the rest)."""

    metrics: dict
    queried: Array
    anchors: Array
    test: Array
    plan_converged: Array
    plan_error: Array
    cg_converged: Array
    cg_residual: Array
    picked_correct: Array
    pool_correct: Array
    heldout_metrics: dict
    removal_metrics: dict


def _utilities(utility) -> tuple[str, ...]:
    names = (utility,) if isinstance(utility, str) else tuple(utility)
    if not names:
        raise ValueError("`utility` must name at least one utility.")
    for u in names:
        validation.check_one_of("utility", u, utilities.UTILITIES)
    return names


def _informativeness(plan, cost, epsilon, utility, ctx, cg_tol=1e-6, score="abs",
                     weights=None, gain_args=None):
    """[n] scores (one utility: raw; several: L2-normalised weighted sum) and CG report."""
    names = _utilities(utility)
    out, infos = [], []
    for u in names:
        g = utilities.gradient(u, plan, ctx)
        gc, info = adjoint.cost_gradient_and_info(plan, g, epsilon, tol=cg_tol)
        infos.append(info)
        if score == "abs":
            out.append(scores.abs_score(plan, cost, gc))
        elif score == "official":
            out.append(scores.official_score(plan, cost, gc))
        else:
            if gain_args is None:
                raise ValueError(f"`score`={score!r} needs the task and anchors (use the loop).")
            out.append(scores.gain_score(plan, cost, gc, *gain_args, sign=scores.GAIN_SIGN[u]))
    info = adjoint.AdjointInfo(jnp.all(jnp.stack([i.converged for i in infos])),
                               jnp.max(jnp.stack([i.residual for i in infos])),
                               jnp.max(jnp.stack([i.iterations for i in infos])))
    if len(out) == 1:
        return out[0], info
    w = (1.0 / len(out),) * len(out) if weights is None else weights
    return scores.combine(out, w), info


def informativeness(plan: Array, cost: Array, epsilon, utility="entropy",
                    ctx: utilities.UtilityContext | None = None, score: str = "abs",
                    utility_weights=None) -> Array:
    """[n] AvAtar node scores from the adjoint gradient of ``utility`` w.r.t. the cost.

    Args:
      plan, cost: [n, n] plan and its cost.
      epsilon: the plan's entropic regularisation.
      utility: a name of utilities.UTILITIES or a tuple of names (weighted sum of the
        L2-normalised scores, weights ``utility_weights``, default equal).
      ctx: what the utilities need (cost, Laplacians).
      score: "abs" or "official" (``scores``; "gain" needs the task: run it in the loop).

    Warns (``adjoint.check_adjoint``) when called eagerly and the CG solve did not converge.
    """
    names = _utilities(utility)
    validation.check_one_of("score", score, ("abs", "official"))
    validation.check_ndim("plan", plan, 2)
    validation.check_shape("cost", cost, np.shape(plan))
    validation.check_finite("cost", cost)
    _check_weights(utility_weights, names)
    s, info = _informativeness(plan, cost, epsilon, names, ctx, score=score,
                               weights=utility_weights)
    adjoint.check_adjoint(info, 1e-6, 500)
    return s


def _check_weights(weights, names) -> None:
    if weights is None:
        return
    if len(weights) != len(names):
        raise ValueError(f"`utility_weights` needs one weight per utility ({len(names)}), got "
                         f"{len(weights)}.")
    for w in weights:
        validation.check_in_range("utility_weights", w, 0.0, np.inf)


def _split_sizes(num_nodes: int, test_frac: float, init_frac: float) -> tuple[int, int]:
    for name, v in (("test_frac", test_frac), ("init_frac", init_frac)):
        validation.check_in_range(name, v, 0.0, 1.0, high_inclusive=False)
    n_test = int(round(test_frac * num_nodes))
    n_init = int(round(init_frac * num_nodes))
    if n_test + n_init > num_nodes:
        raise ValueError(f"`test_frac`={test_frac} and `init_frac`={init_frac} need "
                         f"{n_test} + {n_init} of the {num_nodes} nodes.")
    return n_test, n_init


def _budget_counts(num_nodes: int, test_frac: float, init_frac: float, budget_frac: float,
                   rounds: int) -> tuple[int, int, int, int] | None:
    """(test size, initial anchors, budget, queries per round), or None when they do not fit
    ``num_nodes`` (no query per round, or more queries than candidates)."""
    n_test, n_init = int(round(test_frac * num_nodes)), int(round(init_frac * num_nodes))
    n_query = int(round(budget_frac * num_nodes))
    if n_test + n_init > num_nodes or n_query > num_nodes - n_test - n_init \
            or n_query // rounds < 1:
        return None
    return n_test, n_init, n_query, n_query // rounds


def smallest_task(test_frac: float, init_frac: float, budget_frac: float,
                  rounds: int) -> int | None:
    """The fewest nodes (or ground-truth pairs of a ``GraphTask``) these fractions and
    ``rounds`` run on: at least one query per round, the budget within the candidates left
    after the test set and the initial anchors. None when no size fits.

    Raises:
      ValueError: ``rounds`` not a positive int, ``test_frac`` / ``init_frac`` outside
        [0, 1), ``budget_frac`` outside (0, 1).
    """
    validation.check_positive_int("rounds", rounds)
    for name, v in (("test_frac", test_frac), ("init_frac", init_frac)):
        validation.check_in_range(name, v, 0.0, 1.0, high_inclusive=False)
    validation.check_in_range("budget_frac", budget_frac, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    start = max(1, int((rounds - 0.5) / budget_frac))
    return next((n for n in range(start, start + 100_000)
                 if _budget_counts(n, test_frac, init_frac, budget_frac, rounds)), None)


def budget_sizes(num_nodes: int, test_frac: float, init_frac: float, budget_frac: float,
                 rounds: int) -> tuple[int, int, int]:
    """(test size, initial anchors, queries per round), validated against the candidates.

    Sizes: round(test_frac n), round(init_frac n) and B = round(budget_frac n) queries in
    all, floor(B / rounds) per round. A budget that is not a multiple of ``rounds`` is
    rounded down to whole queries per round: ``rounds`` floor(B / rounds) are spent and a
    ``UserWarning`` names both counts (77 nodes, 0.2, 10 rounds: 15 asked, 10 spent).

    Raises:
      ValueError: ``num_nodes`` not a positive int; fewer than one query per round, or a
        budget above the candidates left after the test set and the initial anchors; the
        message names the task's size and the smallest size (``smallest_task``) these
        settings run on.
    """
    validation.check_positive_int("num_nodes", num_nodes)
    validation.check_positive_int("rounds", rounds)
    validation.check_in_range("budget_frac", budget_frac, 0.0, 1.0, high_inclusive=False)
    n_test, n_init = _split_sizes(num_nodes, test_frac, init_frac)
    n_query = int(round(budget_frac * num_nodes))
    candidates = num_nodes - n_test - n_init
    if n_query > candidates or n_query // rounds < 1:
        low = smallest_task(test_frac, init_frac, budget_frac, rounds) if budget_frac > 0 \
            else None
        need = (f"the smallest task for these settings has {low} nodes"
                if low is not None else "no task size fits these fractions")
        if n_query > candidates:
            why = (f"the budget of {n_query} queries (`budget_frac`={budget_frac}) exceeds "
                   f"the {candidates} candidate nodes left after the test set and initial "
                   "anchors")
        else:
            why = (f"`budget_frac`={budget_frac} gives {n_query} queries, fewer than one per "
                   f"round (`rounds`={rounds})")
        raise ValueError(f"`task` has {num_nodes} nodes: {why}; {need}.")
    per_round = n_query // rounds
    if per_round * rounds != n_query:
        warnings.warn(f"`budget_frac`={budget_frac} asks for {n_query} queries of the "
                      f"{num_nodes} nodes; {rounds} rounds of {per_round} (rounded down to "
                      f"whole queries per round) spend {per_round * rounds}.", UserWarning,
                      stacklevel=2)
    return n_test, n_init, per_round


def init(key: PRNGKey, task: AlignmentTask, *, test_frac: float = 0.5,
         init_frac: float = 0.2, protocol: str = "fixed", heldout_frac: float = 0.0) -> State:
    """Draws the held-out test set and the initial anchors.

    Args:
      key: PRNG key (one permutation of the n nodes: the first round(test_frac n) are the
        test set ("paper": the first round(heldout_frac n) are the held-out set), the next
        round(init_frac n) the initial anchors).
      task: an AlignmentTask with n nodes (arrays may be traced), or a ``tasks.GraphTask``
        (then n is its number k of ground-truth pairs and the masks are over the pairs).
      test_frac, init_frac: fractions of n in [0, 1) (static Python floats).
      protocol: "fixed" (a held-out test set of round(test_frac n) nodes, never queried) or
        "paper" (AvAtar's: test = every node not anchored yet; ``test_frac`` is ignored).
      heldout_frac: "paper" only: a share of the nodes drawn before round 0 and never
        queried (``State.heldout``; 0: none, the paper's protocol bit for bit).

    Returns:
      State with ``anchors``, ``test`` and ``heldout`` [n] bool masks (``anchors`` disjoint
      from the others).
    """
    validation.check_one_of("protocol", protocol, PROTOCOLS)
    _check_heldout(heldout_frac, protocol)
    n = tasks_module.num_pairs(task)
    n_test, n_init = _split_sizes(n, heldout_frac if protocol == "paper" else test_frac,
                                  init_frac)
    order = jax.random.permutation(as_key(key), n)
    anchors = jnp.zeros(n, bool).at[order[n_test:n_test + n_init]].set(True)
    held = jnp.zeros(n, bool).at[order[:n_test]].set(True)
    if protocol == "paper":
        return State(anchors, ~anchors, held)
    return State(anchors, held, held)


def _check_heldout(heldout_frac, protocol) -> None:
    validation.check_in_range("heldout_frac", heldout_frac, 0.0, 1.0, high_inclusive=False)
    if protocol != "paper" and heldout_frac != 0.0:
        raise ValueError(f"`heldout_frac`={heldout_frac} is for protocol='paper'; the "
                         "'fixed' protocol's never-queried set is `test_frac`.")


def align(state: State, task: AlignmentTask, *, epsilon=0.05, solver: str = "ot",
          feat_weight=1.0, anchor_weight=1.0, sinkhorn_threshold: float = 1e-4,
          sinkhorn_max_iterations: int = 10000) -> tuple[Array, solvers.PlanResult]:
    """The anchor-aware cost of ``state.anchors`` and its plan.

    Args:
      state: the loop's State.
      task: the AlignmentTask.
      epsilon, solver, feat_weight, anchor_weight, sinkhorn_threshold, sinkhorn_max_iterations:
        as ``run_active``.

    Returns:
      ([n, n] cost, PlanResult of the "ot" / "fgw" solve on ``alignment.anchor_cost`` (the
      ``simple`` aligner), or PARROT's cost and plan (``solver`` "parrot" or a
      ``parrot.ParrotSettings``: the ``parrot`` aligner; ``epsilon``, ``feat_weight``,
      ``anchor_weight`` unused, the plan's eps is ``parrot.epsilon(settings)``)).
    """
    settings = parrot_settings(solver)
    if settings is not None:
        return parrot.parrot_solve(task, state.anchors, settings, sinkhorn_threshold,
                                   sinkhorn_max_iterations)
    validation.check_one_of("solver", solver, SOLVERS)
    if solver == "fgw" and tasks_module.is_graph_task(task):
        raise ValueError("`solver`='fgw' needs the dense shortest-path matrices of a square "
                         "task; a tasks.GraphTask has none.")
    cost = alignment.anchor_cost(task, state.anchors, feat_weight, anchor_weight)
    if solver == "fgw":
        res = solvers.fgw_solve(cost, jnp.asarray(task.struct1, jnp.float32),
                                jnp.asarray(task.struct2, jnp.float32), epsilon)
    else:
        res = solvers.entropic_solve(cost, epsilon, sinkhorn_threshold, sinkhorn_max_iterations)
    return cost, res


def evaluate(state: State, task: AlignmentTask, **align_settings) -> tuple[dict,
                                                                           solvers.PlanResult]:
    """Test metrics of the plan of ``state.anchors``: (dict of [] "mrr" / "hits@k",
    PlanResult). ``align_settings``: the keyword arguments of ``align``."""
    _, res = align(state, task, **align_settings)
    return _metrics(task, res.plan, state.test), res


def _on_pairs(task, s: Array) -> Array:
    """[k] the per-source-node scores ``s`` [n1] of the task's pairs (square task: ``s``)."""
    if tasks_module.is_graph_task(task):
        return s[jnp.asarray(task.src)]
    return s


def _metrics(task, plan, mask) -> dict:
    """Test metrics of ``plan`` on the pairs of ``mask`` (``alignment.alignment_metrics``
    on a square task, ``alignment.pair_metrics`` on a ``tasks.GraphTask``)."""
    if tasks_module.is_graph_task(task):
        return alignment.pair_metrics(plan, *tasks_module.pair_nodes(task), mask)
    return alignment.alignment_metrics(plan, task.truth, mask)


def _top1_correct(task, plan) -> Array:
    """[k] probability that the plan row of pair p's source ranks its target first (ties
    in a uniformly random order: ``alignment.top1_probability``)."""
    return alignment.top1_probability(plan, *tasks_module.pair_nodes(task))


def _pair_values(task, plan) -> dict:
    """[k] per-pair metric values of ``plan`` (``alignment.pair_values``)."""
    return alignment.pair_values(plan, *tasks_module.pair_nodes(task))


def _scores(key, strategy, task, cost, plan, epsilon, utility, cg_tol, score="abs",
            utility_weights=None, anchors=None, anchor_weight=1.0):
    """[k] scores of the task's pairs (of their source nodes) and the adjoint report."""
    k = tasks_module.num_pairs(task)
    no_cg = adjoint.AdjointInfo(jnp.bool_(True), jnp.float32(0.0), jnp.int32(0))
    if strategy == "avatar":
        if tasks_module.is_graph_task(task):  # no dense Laplacians; gain not defined
            ctx, gain_args = utilities.UtilityContext(cost=cost), None
        else:
            ctx = utilities.UtilityContext(cost=cost,
                                           lap1=jnp.asarray(task.lap1, jnp.float32),
                                           lap2=jnp.asarray(task.lap2, jnp.float32))
            gain_args = (task.pos1, task.pos2, anchors, jnp.asarray(task.truth), anchor_weight)
        s, cg = _informativeness(plan, cost, epsilon, utility, ctx, cg_tol, score,
                                 utility_weights, gain_args)
        return _on_pairs(task, s), cg
    if strategy == "random":
        return jax.random.uniform(key, (k,)), no_cg
    if strategy == "entropy":
        return _on_pairs(task, alignment.row_entropy(plan)), no_cg
    if strategy == "margin":
        return _on_pairs(task, -alignment.row_margin(plan)), no_cg
    if strategy == "degree":
        return _on_pairs(task, jnp.asarray(task.degree, jnp.float32)), no_cg
    if strategy == "density":
        return _on_pairs(task, baselines.density_score(plan, jnp.asarray(task.pos1,
                                                                          plan.dtype))), no_cg
    if strategy == "topmatchings":
        return _on_pairs(task, baselines.topmatchings_score(key, plan)), no_cg
    return _on_pairs(task, jnp.asarray(task.betweenness, jnp.float32)), no_cg


def _switch_scores(index, table, key, task, cost, plan, epsilon, utility, cg_tol,
                   utility_weights, anchors, anchor_weight):
    """``_scores`` of ``table[index]`` (a tuple of (strategy, score) pairs, ``index`` a
    traced int): one ``lax.switch``, so one compiled program serves every strategy (with an
    unbatched ``index`` under ``vmap`` only the chosen branch runs)."""

    def branch(pair):
        def f():
            s, cg = _scores(key, pair[0], task, cost, plan, epsilon, utility, cg_tol,
                            pair[1], utility_weights, anchors, anchor_weight)
            return s.astype(jnp.float32), adjoint.AdjointInfo(
                jnp.asarray(cg.converged, bool), jnp.asarray(cg.residual, jnp.float32),
                jnp.asarray(cg.iterations, jnp.int32))
        return f

    return jax.lax.switch(index, [branch(pair) for pair in table])


def check_strategy_table(table) -> tuple[tuple[str, str], ...]:
    """Validates a tuple of (strategy, score) pairs (``run_active_switch``); returns it as a
    tuple of tuples. Raises ValueError naming ``strategies``."""
    if isinstance(table, str) or len(table) < 1:
        raise ValueError(f"`strategies` must be a non-empty sequence of (strategy, score) "
                         f"pairs, got {table!r}.")
    out = []
    for pair in table:
        if isinstance(pair, str) or len(pair) != 2:
            raise ValueError(f"`strategies` entries must be (strategy, score) pairs, got "
                             f"{pair!r}.")
        validation.check_one_of("strategies", pair[0], STRATEGIES)
        validation.check_one_of("strategies", pair[1], SCORES)
        out.append((str(pair[0]), str(pair[1])))
    return tuple(out)


def step(key: PRNGKey, state: State, task: AlignmentTask, *, strategy: str = "avatar",
         num_queries: int = 1, epsilon=0.05, utility="entropy", solver: str = "ot",
         feat_weight=1.0, anchor_weight=1.0, sinkhorn_threshold: float = 1e-4,
         sinkhorn_max_iterations: int = 10000, cg_tol: float = 1e-4, score: str = "abs",
         utility_weights=None, protocol: str = "fixed",
         strategy_index=None) -> tuple[State, Info]:
    """One query round: solve the plan, score the nodes, label the ``num_queries`` best.

    Args:
      key: PRNG key (used by the "random" strategy).
      state: the loop's State.
      task: the AlignmentTask.
      strategy: one of STRATEGIES (static), or a tuple of (strategy, score) pairs of
        which ``strategy_index`` picks one (``run_active_switch``; ``score`` ignored).
      num_queries: source nodes labelled this round (static positive int).
      epsilon: as ``run_active``; so are utility, solver, feat_weight, anchor_weight,
        sinkhorn_threshold, sinkhorn_max_iterations, cg_tol, score, utility_weights and
        protocol.
      strategy_index: [] int (may be traced), the entry of a ``strategy`` table.

    Returns:
      (State with the queried nodes added to ``anchors``, Info of the round). Nodes already
      anchored or held out (``state.heldout``; under "fixed" the test nodes) are never
      queried; under "paper" the queried nodes leave the test set.
    """
    if isinstance(strategy, str):
        validation.check_one_of("strategy", strategy, STRATEGIES)
        validation.check_one_of("score", score, SCORES)
    else:
        strategy = check_strategy_table(strategy)
        if strategy_index is None:
            raise ValueError("`strategy_index` is required when `strategy` is a table.")
    validation.check_one_of("protocol", protocol, PROTOCOLS)
    _utilities(utility)
    validation.check_positive_int("num_queries", num_queries)
    key = as_key(key)
    cost, res = align(state, task, epsilon=epsilon, solver=solver, feat_weight=feat_weight,
                      anchor_weight=anchor_weight, sinkhorn_threshold=sinkhorn_threshold,
                      sinkhorn_max_iterations=sinkhorn_max_iterations)
    eps = plan_epsilon(solver, epsilon)
    if isinstance(strategy, str):
        s, cg = _scores(key, strategy, task, cost, res.plan, eps, utility, cg_tol, score,
                        utility_weights, state.anchors, anchor_weight)
    else:
        s, cg = _switch_scores(strategy_index, strategy, key, task, cost, res.plan, eps,
                               utility, cg_tol, utility_weights, state.anchors, anchor_weight)
    blocked = state.anchors | state.heldout
    s = jnp.where(blocked, -jnp.inf, s)
    _, idx = jax.lax.top_k(s, num_queries)
    values = _pair_values(task, res.plan)
    mets = alignment.masked_mean(values, state.test)
    held = alignment.masked_mean(values, state.heldout)
    correct = _top1_correct(task, res.plan)
    free = ~blocked
    pool = jnp.sum(jnp.where(free, correct, 0.0)) / jnp.maximum(jnp.sum(free), 1)
    anchors = state.anchors.at[idx].set(True)
    test = state.test & ~anchors if protocol == "paper" else state.test
    return (State(anchors, test, state.heldout),
            Info(mets, idx, res.converged, res.marginal_error, cg.converged, cg.residual,
                 jnp.mean(correct[idx]), pool.astype(jnp.float32), held, values))


def parrot_settings(solver) -> parrot.ParrotSettings | None:
    """The ParrotSettings of ``solver`` ("parrot": the defaults), None for "ot" / "fgw"."""
    if isinstance(solver, parrot.ParrotSettings):
        return solver
    return parrot.PARROT_DEFAULTS if solver == "parrot" else None


def plan_epsilon(solver, epsilon):
    """The entropic eps of the plans of ``solver`` (PARROT's own for the parrot aligner)."""
    settings = parrot_settings(solver)
    return epsilon if settings is None else parrot.epsilon(settings)


def _check_settings(task, strategy, utility, solver, epsilon, feat_weight, anchor_weight,
                    sinkhorn_threshold, sinkhorn_max_iterations, cg_tol, score="abs",
                    utility_weights=None, protocol="fixed", heldout_frac=0.0) -> None:
    if strategy not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {STRATEGIES}, got {strategy!r}.")
    _check_weights(utility_weights, _utilities(utility))
    validation.check_one_of("score", score, SCORES)
    validation.check_one_of("protocol", protocol, PROTOCOLS)
    _check_heldout(heldout_frac, protocol)
    if isinstance(solver, parrot.ParrotSettings):
        parrot.check_settings(solver)
    elif solver not in SOLVERS:
        raise ValueError(f"`solver` must be one of {SOLVERS} or a parrot.ParrotSettings, "
                         f"got {solver!r}.")
    if score == "gain" and parrot_settings(solver) is not None:
        raise ValueError("`score`='gain' is derived for the simple aligner's cost "
                         "(alignment.anchor_cost), not for `solver`='parrot'.")
    if tasks_module.is_graph_task(task):
        reason = graph_task_limit(strategy, score, utility, solver)
        if reason is not None:
            raise ValueError(reason)
    validation.check_in_range("epsilon", epsilon, 0.0, low_inclusive=False)
    validation.check_in_range("feat_weight", feat_weight, 0.0, np.inf)
    validation.check_in_range("anchor_weight", anchor_weight, 0.0, np.inf)
    validation.check_in_range("sinkhorn_threshold", sinkhorn_threshold, 0.0,
                              low_inclusive=False)
    validation.check_positive_int("sinkhorn_max_iterations", sinkhorn_max_iterations)
    validation.check_in_range("cg_tol", cg_tol, 0.0, low_inclusive=False)
    _check_task(task)


def graph_task_limit(strategy: str, score: str = "abs", utility="entropy",
                     solver="ot") -> str | None:
    """Why (strategy, score, utility, solver) is not defined on a ``tasks.GraphTask`` (a
    message naming the argument), or None when it is. Not defined there: ``solver`` "fgw"
    (no shortest-path matrices), ``score`` "gain" with the "avatar" strategy (it needs the
    target positions w.r.t. every target node, a task holds them for the pairs only), the
    "consistency" utility (dense Laplacians)."""
    if not isinstance(solver, parrot.ParrotSettings) and solver == "fgw":
        return ("`solver`='fgw' needs the dense shortest-path matrices of a square task; a "
                "tasks.GraphTask has none.")
    if strategy == "avatar" and score == "gain":
        return ("`score`='gain' needs positions w.r.t. every target node; a tasks.GraphTask "
                "holds them for its ground-truth pairs only.")
    if strategy == "avatar" and "consistency" in _utilities(utility):
        return ("`utility`='consistency' needs dense Laplacians; a tasks.GraphTask holds "
                "sparse normalised adjacencies.")
    return None


def active(task: AlignmentTask, strategy: str = "avatar", *, epsilon: float = 0.05,
           rounds: int = 10, test_frac: float = 0.5, init_frac: float = 0.2,
           budget_frac: float = 0.2, utility: str = "entropy", solver: str = "ot",
           feat_weight: float = 1.0, anchor_weight: float = 1.0,
           sinkhorn_threshold: float = 1e-4, sinkhorn_max_iterations: int = 10000,
           cg_tol: float = 1e-4, score: str = "abs", utility_weights=None,
           protocol: str = "fixed", heldout_frac: float = 0.0) -> Algorithm:
    """The active loop on ``task`` as an ``Algorithm`` (every check made here, eagerly).

    ``init(key) -> State``; ``step(key, state) -> (State, Info)`` labels
    floor(round(budget_frac n) / rounds) nodes. ``rounds`` steps spend the budget; the
    arguments are those of ``run_active``, which is ``init`` + a scan of ``rounds`` steps +
    ``evaluate``. The task's arrays are closed over (constants of a jitted step); vmap
    ``init`` / ``step`` over keys for seeds.
    """
    _check_settings(task, strategy, utility, solver, epsilon, feat_weight, anchor_weight,
                    sinkhorn_threshold, sinkhorn_max_iterations, cg_tol, score,
                    utility_weights, protocol, heldout_frac)
    per_round = _per_round(tasks_module.num_pairs(task), test_frac, init_frac, budget_frac,
                           rounds, protocol, heldout_frac)

    def init_fn(key: PRNGKey) -> State:
        return init(key, task, test_frac=test_frac, init_frac=init_frac, protocol=protocol,
                    heldout_frac=heldout_frac)

    def step_fn(key: PRNGKey, state: State) -> tuple[State, Info]:
        return step(key, state, task, strategy=strategy, num_queries=per_round,
                    epsilon=epsilon, utility=utility, solver=solver, feat_weight=feat_weight,
                    anchor_weight=anchor_weight, sinkhorn_threshold=sinkhorn_threshold,
                    sinkhorn_max_iterations=sinkhorn_max_iterations, cg_tol=cg_tol,
                    score=score, utility_weights=utility_weights, protocol=protocol)

    return Algorithm(init_fn, step_fn)


@functools.partial(jax.jit, static_argnames=(
    "strategy", "rounds", "test_frac", "init_frac", "per_round", "utility", "solver",
    "sinkhorn_threshold", "sinkhorn_max_iterations", "cg_tol", "score", "utility_weights",
    "protocol", "heldout_frac"))
def _run(key, task, epsilon, feat_weight, anchor_weight, *, strategy, rounds, test_frac,
         init_frac, per_round, utility, solver, sinkhorn_threshold, sinkhorn_max_iterations,
         cg_tol, score, utility_weights, protocol, heldout_frac=0.0, strategy_index=None):
    k_init, k_loop = jax.random.split(key)
    state = init(k_init, task, test_frac=test_frac, init_frac=init_frac, protocol=protocol,
                 heldout_frac=heldout_frac)
    plan_kw = {"epsilon": epsilon, "solver": solver, "feat_weight": feat_weight,
               "anchor_weight": anchor_weight, "sinkhorn_threshold": sinkhorn_threshold,
               "sinkhorn_max_iterations": sinkhorn_max_iterations}

    def body(s, k):
        return step(k, s, task, strategy=strategy, num_queries=per_round, utility=utility,
                    cg_tol=cg_tol, score=score, utility_weights=utility_weights,
                    protocol=protocol, strategy_index=strategy_index, **plan_kw)

    state, info = jax.lax.scan(body, state, jax.random.split(k_loop, rounds))
    _, res = align(state, task, **plan_kw)
    values = _pair_values(task, res.plan)

    def with_last(per_round, last):
        return jax.tree.map(lambda a, b: jnp.concatenate([a, b[None]]), per_round, last)

    mets = with_last(info.metrics, alignment.masked_mean(values, state.test))
    held = with_last(info.heldout_metrics, alignment.masked_mean(values, state.heldout))
    round0 = jax.tree.map(lambda v: v[0], info.pair_values)
    return ActiveResult(mets, info.queried, state.anchors, state.test,
                        jnp.concatenate([info.plan_converged, res.converged[None]]),
                        jnp.concatenate([info.plan_error, res.marginal_error[None]]),
                        info.cg_converged, info.cg_residual, info.picked_correct,
                        info.pool_correct, held, alignment.masked_mean(round0, state.test))


def _per_round(n, test_frac, init_frac, budget_frac, rounds, protocol,
               heldout_frac=0.0) -> int:
    validation.check_one_of("protocol", protocol, PROTOCOLS)
    _check_heldout(heldout_frac, protocol)
    return budget_sizes(n, heldout_frac if protocol == "paper" else test_frac, init_frac,
                        budget_frac, rounds)[2]


def check_result(res: ActiveResult | Info, epsilon=None, sinkhorn_threshold=None,
                 sinkhorn_max_iterations=None, cg_tol: float = 1e-6, *,
                 solver=None) -> bool:
    """Warns (RuntimeWarning) if any plan or adjoint solve of ``res`` did not converge.

    Call it on the concrete result of ``run_active(..., check=False)`` or of
    ``run_active`` under your own ``jit`` / ``vmap`` (``run_active`` does it itself
    otherwise), or on the ``Info`` of each of your own ``step`` calls.

    Args:
      res: an ``ActiveResult`` or a step's ``Info`` (concrete arrays, any leading batch axes).
      epsilon, sinkhorn_threshold, sinkhorn_max_iterations: the plan solver's settings, as
        passed to the loop (named in the warning).
      cg_tol: the adjoint CG's relative residual tolerance.
      solver: the loop's ``solver``; with "fgw" the Sinkhorn limits are not named (the FGW
        solve has its own).

    Returns:
      True when every solve converged.

    Raises:
      TypeError: ``res`` neither an ``ActiveResult`` nor an ``Info``.
    """
    if not isinstance(res, ActiveResult | Info):
        raise TypeError(f"`res` must be an ActiveResult (run_active) or a step's Info, got "
                        f"{type(res).__name__}.")
    if isinstance(solver, str) and solver == "fgw":
        sinkhorn_threshold = sinkhorn_max_iterations = None
    ok = solvers.check_plan(
        solvers.PlanResult(None, res.plan_converged, res.plan_error, None),
        sinkhorn_threshold, sinkhorn_max_iterations, epsilon, where=" in the active loop")
    cg = adjoint.AdjointInfo(res.cg_converged, res.cg_residual, None)
    return adjoint.check_adjoint(cg, cg_tol, 500, where=" in the active loop") and ok


def run_active(key: PRNGKey, task: AlignmentTask, strategy: str = "avatar", *,
               epsilon: float = 0.05, rounds: int = 10, test_frac: float = 0.5,
               init_frac: float = 0.2, budget_frac: float = 0.2, utility: str = "entropy",
               solver: str = "ot", feat_weight: float = 1.0,
               anchor_weight: float = 1.0, sinkhorn_threshold: float = 1e-4,
               sinkhorn_max_iterations: int = 10000, cg_tol: float = 1e-4,
               score: str = "abs", utility_weights=None,
               protocol: str = "fixed", heldout_frac: float = 0.0,
               check: bool = True) -> ActiveResult:
    """Runs the active alignment protocol (initial anchors, ``rounds`` rounds of queries).

    ``init(k0)``, then ``lax.scan`` of ``step`` over ``jax.random.split(k1, rounds)``, then
    ``evaluate`` of the final anchors, with ``k0, k1 = jax.random.split(key)``; one jitted
    program (task, ``epsilon`` and the weights traced, the rest static).

    Args:
      key: PRNG key (test split, initial anchors, random strategy); typed
        (``jax.random.key``) or a legacy uint32 key (converted, the same draws). vmap over
        it for seeds.
      task: an AlignmentTask (NumPy or JAX arrays) or a ``tasks.GraphTask``; its size
        must fit the budget (``budget_sizes``: e.g. 48 nodes for the defaults).
      strategy: one of STRATEGIES.
      epsilon: entropic regularisation > 0 of the plans (costs are mean-normalised).
      rounds: number of query rounds.
      test_frac, init_frac, budget_frac: fractions of n for the held-out test set, the
        initial anchors and the total query budget.
      utility: one of utilities.UTILITIES (for "avatar").
      solver: the aligner: "ot" (entropic OT on ``alignment.anchor_cost``: the ``simple``
        aligner) or "fgw" (fused Gromov-Wasserstein on it), or "parrot" / a
        ``parrot.ParrotSettings`` (the PARROT-class aligner of ``parrot``; its plans use
        eps = ``parrot.epsilon(settings)`` and ignore ``epsilon``, ``feat_weight``,
        ``anchor_weight``; ``score`` "gain" is not defined for it).
      feat_weight, anchor_weight: weights of the feature and anchor terms of the cost.
      sinkhorn_threshold: tolerance on the plan's L1 marginal error ("ot" solver). 1e-4:
        at 1e-5 and 3000 iterations the Sinkhorn solves of the default tasks stopped at
        2e-5..5e-5 (measured on karate; 1e-5 needed ~25k iterations), so every run warned.
      sinkhorn_max_iterations: Sinkhorn iteration cap (10000: some karate solves needed
        just over 3000 to reach 1e-4); a solve that hits it is reported.
      cg_tol: relative residual of the adjoint CG solves (500 iterations). 1e-4: at 1e-6 the
        float32 solves of the 150-node quick tasks ended at 1e-6..4e-5, so runs warned.
      score: the "avatar" node score, one of SCORES (``scores``: "abs" jaxlab's earlier
        score, "official" AvAtar's signed one, "gain" ours).
      utility_weights: weights of the utilities when ``utility`` is a tuple (default equal).
      protocol: "fixed" (held-out test set, ``test_frac``) or "paper" (test = every node not
        anchored yet; queried nodes leave it; ``test_frac`` ignored).
      heldout_frac: "paper" only: round(heldout_frac n) nodes drawn before round 0 and never
        queried (queries come from the rest); their metrics are
        ``ActiveResult.heldout_metrics``, beside the paper's ``metrics`` (which still count
        them: they are not anchored). 0 (default): none, the paper's protocol unchanged.
      check: True (default): warn (``check_result``) if a plan or adjoint solve did not
        converge, directly on a concrete result, through ``jax.debug.callback`` when traced.
        False: no check and, traced, no host callback in the caller's program (which JAX's
        persistent compilation cache can then keep); call ``check_result`` on the concrete
        result yourself.

    Returns:
      ActiveResult (metrics before any query and after each round; the never-queried
      metrics; the removal-only line).
    """
    _check_settings(task, strategy, utility, solver, epsilon, feat_weight, anchor_weight,
                    sinkhorn_threshold, sinkhorn_max_iterations, cg_tol, score,
                    utility_weights, protocol, heldout_frac)
    return _run_and_report(as_key(key), task, epsilon, feat_weight, anchor_weight,
                           strategy=strategy,
                           score=score, strategy_index=None, rounds=rounds,
                           test_frac=test_frac, init_frac=init_frac, budget_frac=budget_frac,
                           utility=utility, solver=solver,
                           sinkhorn_threshold=sinkhorn_threshold,
                           sinkhorn_max_iterations=sinkhorn_max_iterations, cg_tol=cg_tol,
                           utility_weights=utility_weights, protocol=protocol,
                           heldout_frac=heldout_frac, check=check)


def run_active_switch(key: PRNGKey, task: AlignmentTask, strategies, strategy_index, *,
                      epsilon: float = 0.05, rounds: int = 10, test_frac: float = 0.5,
                      init_frac: float = 0.2, budget_frac: float = 0.2,
                      utility: str = "entropy", solver: str = "ot", feat_weight: float = 1.0,
                      anchor_weight: float = 1.0, sinkhorn_threshold: float = 1e-4,
                      sinkhorn_max_iterations: int = 10000, cg_tol: float = 1e-4,
                      utility_weights=None, protocol: str = "fixed",
                      heldout_frac: float = 0.0, check: bool = True) -> ActiveResult:
    """``run_active`` of strategy ``strategies[strategy_index]`` with the index traced.

    ``strategies`` is a tuple of (strategy, score) pairs (static); the node scores are one
    ``lax.switch`` over them, so ``jit(vmap(lambda k, i: run_active_switch(k, task, table,
    i), in_axes=(0, None)))`` compiles once for every strategy of the table (the
    experiment's saving: one compile per task and protocol instead of one per strategy).
    With the same key, the result equals ``run_active(key, task, strategies[i][0],
    score=strategies[i][1], ...)`` with the same settings.

    Args:
      key, task, epsilon, ..., check: as ``run_active``.
      strategies: non-empty tuple of (strategy of STRATEGIES, score of SCORES) pairs.
      strategy_index: [] int in [0, len(strategies)) (may be traced; checked when concrete).
    """
    table = check_strategy_table(strategies)
    for strat, score in table:
        _check_settings(task, strat, utility, solver, epsilon, feat_weight, anchor_weight,
                        sinkhorn_threshold, sinkhorn_max_iterations, cg_tol, score,
                        utility_weights, protocol, heldout_frac)
    if not isinstance(strategy_index, jax.core.Tracer):
        validation.check_int_range("strategy_index", strategy_index, 0, len(table))
    return _run_and_report(as_key(key), task, epsilon, feat_weight, anchor_weight,
                           strategy=table,
                           score="abs", strategy_index=jnp.asarray(strategy_index, jnp.int32),
                           rounds=rounds, test_frac=test_frac, init_frac=init_frac,
                           budget_frac=budget_frac, utility=utility, solver=solver,
                           sinkhorn_threshold=sinkhorn_threshold,
                           sinkhorn_max_iterations=sinkhorn_max_iterations, cg_tol=cg_tol,
                           utility_weights=utility_weights, protocol=protocol,
                           heldout_frac=heldout_frac, check=check)


def check_switch(task: AlignmentTask, strategies, **settings) -> tuple[tuple[str, str], ...]:
    """The checks ``run_active_switch(key, task, strategies, i, **settings)`` makes before
    it runs, without running: the table, each strategy's settings on ``task``, the task's
    arrays and the budget (``budget_sizes``).

    Returns:
      The checked table (a tuple of (strategy, score) pairs).

    Raises:
      TypeError naming an unknown setting; ValueError naming the setting, the table entry
        or the task's field (``run_active_switch``'s checks).
    """
    names = tuple(n for n in inspect.signature(run_active_switch).parameters
                  if n != "check")[4:]
    unknown = sorted(set(settings) - set(names))
    if unknown:
        raise TypeError(f"unknown settings {unknown}: run_active_switch takes {names}.")
    kw = {n: p.default for n, p in inspect.signature(run_active_switch).parameters.items()
          if n in names}
    kw.update(settings)
    table = check_strategy_table(strategies)
    for strat, score in table:
        _check_settings(task, strat, kw["utility"], kw["solver"], kw["epsilon"],
                        kw["feat_weight"], kw["anchor_weight"], kw["sinkhorn_threshold"],
                        kw["sinkhorn_max_iterations"], kw["cg_tol"], score,
                        kw["utility_weights"], kw["protocol"], kw["heldout_frac"])
    with warnings.catch_warnings():  # the rounding warning comes again from the run
        warnings.simplefilter("ignore", UserWarning)
        _per_round(tasks_module.num_pairs(task), kw["test_frac"], kw["init_frac"],
                   kw["budget_frac"], kw["rounds"], kw["protocol"], kw["heldout_frac"])
    return table


def _run_and_report(key, task, epsilon, feat_weight, anchor_weight, *, strategy, score,
                    strategy_index, rounds, test_frac, init_frac, budget_frac, utility, solver,
                    sinkhorn_threshold, sinkhorn_max_iterations, cg_tol, utility_weights,
                    protocol, heldout_frac=0.0, check=True) -> ActiveResult:
    """The shared body of ``run_active`` / ``run_active_switch`` after their checks:
    per-round query counts, hashable utility settings, the run, the solver report (with
    ``check``)."""
    n = tasks_module.num_pairs(task)
    per_round = _per_round(n, test_frac, init_frac, budget_frac, rounds, protocol,
                           heldout_frac)
    utility = utility if isinstance(utility, str) else tuple(utility)
    utility_weights = None if utility_weights is None else tuple(map(float, utility_weights))
    res = _run(key, task, epsilon, feat_weight, anchor_weight, strategy=strategy,
               rounds=rounds, test_frac=test_frac, init_frac=init_frac, per_round=per_round,
               utility=utility, solver=solver, sinkhorn_threshold=sinkhorn_threshold,
               sinkhorn_max_iterations=sinkhorn_max_iterations, cg_tol=cg_tol, score=score,
               utility_weights=utility_weights, protocol=protocol,
               heldout_frac=float(heldout_frac), strategy_index=strategy_index)
    if not check:
        return res
    if isinstance(res.plan_converged, jax.core.Tracer):
        # Under the caller's jit / vmap: check when the values exist (once per call).
        jax.debug.callback(lambda r: check_result(r, None, sinkhorn_threshold,
                                                  sinkhorn_max_iterations, cg_tol,
                                                  solver=solver), res)
    else:
        check_result(res, epsilon, sinkhorn_threshold, sinkhorn_max_iterations, cg_tol,
                     solver=solver)
    return res


def _check_graph_task(task: tasks_module.GraphTask) -> None:
    n1, n2 = tasks_module.plan_shape(task)
    k = tasks_module.num_pairs(task)
    validation.check_shape("task.adj1", task.adj1, (n1, n1))
    validation.check_shape("task.adj2", task.adj2, (n2, n2))
    validation.check_shape("task.feat1", task.feat1, (n1, None))
    validation.check_shape("task.feat2", task.feat2, (n2, task.feat1.shape[1]))
    validation.check_shape("task.pos1", task.pos1, (n1, k))
    validation.check_shape("task.pos2", task.pos2, (n2, k))
    validation.check_shape("task.tgt", task.tgt, (k,))
    for name in ("degree", "betweenness"):
        validation.check_shape(f"task.{name}", getattr(task, name), (n1,))
    for name in ("feat1", "feat2", "pos1", "pos2", "degree", "betweenness"):
        validation.check_finite(f"task.{name}", getattr(task, name))
    for name in ("adj1", "adj2"):
        validation.check_finite(f"task.{name}.data", getattr(task, name).data)
    validation.check_int_range("task.src", task.src, 0, n1)
    validation.check_int_range("task.tgt", task.tgt, 0, n2)
    for name in ("src", "tgt"):
        v = getattr(task, name)
        if not isinstance(v, jax.core.Tracer) and len(np.unique(np.asarray(v))) != k:
            raise ValueError(f"`task.{name}` must not repeat a node (one-to-one pairs).")


def _check_task(task: AlignmentTask) -> None:
    if tasks_module.is_graph_task(task):
        _check_graph_task(task)
        return
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


def parse_strategy(name: str) -> tuple[str, str]:
    """A config strategy name: "avatar-<score>" -> ("avatar", score); a baseline name ->
    (name, "abs")."""
    return ("avatar", name[len("avatar-"):]) if name.startswith("avatar-") else (name, "abs")
