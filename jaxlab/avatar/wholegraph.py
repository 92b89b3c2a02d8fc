"""AvAtar's protocol on whole graphs with PARROT as its official code runs it.

One run = one (strategy, key): AvAtar's protocol (yq-leo/AvAtar-ICML26,
``source/active_na.py``): int(``init_frac`` k) of the k ground-truth pairs as initial
anchors (a seeded permutation), then ``rounds`` rounds; each round re-runs the aligner on
the current anchors, scores the unanchored pairs' source nodes, labels the
floor(int(``budget_frac`` k) / ``rounds``) best, and the test set is every ground-truth
pair not anchored (queried pairs leave it). Metrics after each round on that test set:
MRR and Hits@{1,10,30,50} averaged over both directions (PlanetAlign's "mean", which
AvAtar logs), and each direction (PARROT's own script reports source -> target only);
ties in the plan are ordered uniformly at random (the exact expectation,
``alignment.pair_values``); ``mrr_truth_first`` / ``mrr_st_truth_first`` rank the truth
first among ties (what counting strictly better candidates gives) and
``mrr_st_ties_against`` last.

Beside the paper's metric (ours): ``Protocol.heldout_frac`` > 0 draws a set of pairs
before round 0 that is never queried (queries come from the rest); ``heldout_*`` are the
metrics on it, what the labels did to pairs nobody labelled. ``removal_*`` score the
round-0 plan on the round's test set: what removing the queried pairs alone would give.

Aligner: ``parrot_official`` (PARROT's code, its per-dataset settings). Strategies:
"random", "entropy" (row entropy of the plan), "density" (entropy x representativeness of
the RWR features, ``baselines``), "avatar" (AvAtar's official score with the sq_l2
utility, its network-alignment default: adjoint CG on the plan, eps = lambda_p + lambda_n +
lambda_a as AvAtar's code passes it, ``scores.official_score`` with PARROT's cost).

Ours: a round is a Python loop of jitted pieces (``round_solve``, ``select``), so each
piece compiles once per shape and a run can stop after any round:

* a run is a ``RunState`` (rounds done, anchors, the current solve, the records);
  ``solve_round0`` makes the state of the initial anchors (the same for every strategy of
  a key, so a caller solves it once and passes it to each strategy's ``run``), ``run``
  continues a state to ``protocol.rounds`` and calls ``callback(state)`` after every
  round. Resuming = passing the state to resume from; where states are kept (files,
  memory) is the caller's business (``experiments/lib/wholegraph_runs.py`` checkpoints
  them). Nothing here writes a file, prints or reads the machine: readings such as
  memory come from the caller's ``measure``;
* keys: the initial anchors are NumPy's permutation seeded by the key's bits read as one
  integer (``jax.random.key(seed)`` gives ``default_rng(seed)``, the official code's
  seeded permutation); round r's "random" scores use ``jax.random.split(key, rounds)[r]``;
* warm starts (``warm=True``): the RWR cosines grow by the new anchor columns only
  (``parrot_official.PositionStats``), the product-graph RWR starts from the previous
  round's fixed point (stopping on the same tolerance), AvAtar's adjoint CG starts from
  the previous round's solution. CPOT runs PARROT's fixed schedule (10 x 5 Sinkhorn
  sweeps) from the uniform plan every round (see ``parrot_official``).

Checks (eager): ``strategy`` in STRATEGIES, protocol fields (ranges), the budget against
the number of pairs (``sizes``: ``num_pairs`` a positive int), ``key`` a PRNG key
(``jaxlab.core.keys.as_key``), a resumed ``state`` against the task and protocol;
``round_solve`` / ``cold_product_steps``: ``anchors`` [k] bool, the task, its graphs and
settings.
"""

import functools
import time
import warnings
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import (
    adjoint,
    alignment,
    baselines,
    parrot_official,
    scores,
    tasks,
    teaching,
)
from jaxlab.core import validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Array, PRNGKey

__all__ = ["STRATEGIES", "VARIANTS", "Teaching", "OURS", "resolve", "Protocol", "smallest_task",
    "sizes", "initial_anchors", "Round", "initial_split", "round_solve", "cold_product_steps",
    "RunState", "run", "solve_round0"]

STRATEGIES = ("random", "entropy", "density", "avatar", "avatar_uncertain",
              "avatar_discounted", "avatar_density", "ours")
# the adjoint-score variants of ``teaching`` (ours), each with its two parameters
VARIANTS = ("avatar_uncertain", "avatar_discounted", "avatar_density")
_DENSITY_TERM = ("density", "avatar_density")


class Teaching(NamedTuple):
    """Parameters of the ``teaching`` variants: ``power`` (uncertainty exponent),
    ``weight`` (the density term's weight, ``avatar_density`` only) and ``diversity`` (the
    batch-diversity penalty of ``teaching.diverse_top_k`` on the RWR position features;
    0: plain top-k)."""

    power: float = 1.0
    weight: float = 1.0
    diversity: float = 0.0


_NO_TEACHING = Teaching()
# "ours": the variant and parameters picked on synthetic validation pairs
# (experiments/avatar_variants.py; docs/evidence/avatar_variants), frozen before any
# benchmark run.
OURS = ("avatar_density", Teaching(power=1.0, weight=2.0))


class Protocol(NamedTuple):
    """AvAtar's protocol and our solver limits.

    Attributes:
      rounds: query rounds (AvAtar: 10).
      init_frac: share of the ground-truth pairs given as initial anchors (0.2).
      budget_frac: share of them queried over all rounds (0.2).
      cg_tol: relative residual of the adjoint CG (AvAtar: 1e-9 in float64; float32 here;
        1e-4 as the square-task loop).
      cg_maxiter: CG cap.
      warm: warm starts between rounds (module docstring).
      heldout_frac: share of the pairs drawn before round 0 and never queried (after the
        initial anchors in the same permutation, so the initial anchors do not depend on
        it); 0: none (AvAtar's protocol).
      frozen_rwr: keep the RWR position features of the initial anchors (the queried pairs
        are still anchors of the cost, the plan's prior and the test set); False: every
        current anchor's RWR column (ours). AvAtar's code keeps ``rwr_anchors`` at the
        initial anchors through a PlanetAlign version that is not public, so which one
        its runs used cannot be known.
    """

    rounds: int = 10
    init_frac: float = 0.2
    budget_frac: float = 0.2
    cg_tol: float = 1e-4
    cg_maxiter: int = 2000
    warm: bool = True
    heldout_frac: float = 0.0
    frozen_rwr: bool = False


def check_protocol(protocol: Protocol) -> None:
    """Raises ValueError naming the bad field of ``protocol``."""
    if not isinstance(protocol, Protocol):
        raise TypeError(f"`protocol` must be a wholegraph.Protocol, got "
                        f"{type(protocol).__name__}.")
    validation.check_positive_int("protocol.rounds", protocol.rounds)
    for name in ("init_frac", "budget_frac"):
        validation.check_in_range(f"protocol.{name}", getattr(protocol, name), 0.0, 1.0,
                                  low_inclusive=False, high_inclusive=False)
    validation.check_in_range("protocol.cg_tol", protocol.cg_tol, 0.0, np.inf,
                              low_inclusive=False, high_inclusive=False)
    validation.check_positive_int("protocol.cg_maxiter", protocol.cg_maxiter)
    validation.check_in_range("protocol.heldout_frac", protocol.heldout_frac, 0.0, 1.0,
                              high_inclusive=False)
    for name in ("warm", "frozen_rwr"):
        if not isinstance(getattr(protocol, name), bool):
            raise ValueError(f"`protocol.{name}` must be a bool, got "
                             f"{getattr(protocol, name)!r}.")


def _counts(num_pairs: int, protocol: Protocol) -> tuple[int, int, int]:
    """(initial anchors, total budget, queries per round), unchecked."""
    budget = int(protocol.budget_frac * num_pairs)
    return int(protocol.init_frac * num_pairs), budget, budget // protocol.rounds


def _held(num_pairs: int, protocol: Protocol) -> int:
    return int(protocol.heldout_frac * num_pairs)


def _fits(num_pairs: int, protocol: Protocol) -> bool:
    n_init, _, per_round = _counts(num_pairs, protocol)
    return (per_round >= 1 and n_init >= 1
            and n_init + _held(num_pairs, protocol) + per_round * protocol.rounds < num_pairs)


def smallest_task(protocol: Protocol) -> int | None:
    """The fewest ground-truth pairs ``protocol`` runs on (at least one query per round,
    one initial anchor and one test pair left at the end); None when no size fits."""
    check_protocol(protocol)
    start = max(2, int(protocol.rounds / protocol.budget_frac) - 1)
    return next((k for k in range(start, start + 100_000) if _fits(k, protocol)), None)


def sizes(num_pairs: int, protocol: Protocol) -> tuple[int, int]:
    """(initial anchors, queries per round) for ``num_pairs`` ground-truth pairs.

    AvAtar's code: int(init_frac k) anchors, B = int(budget_frac k) queries in all, of which
    (B - B mod R) / R per round (R = ``protocol.rounds``): the per-round count is rounded
    down, so a budget that is not a multiple of R spends R floor(B / R) queries (a
    ``UserWarning`` names both counts).

    Raises:
      TypeError / ValueError: ``protocol`` not a valid Protocol (naming the field),
        ``num_pairs`` not a positive int.
      ValueError: fewer than one query per round, no initial anchor or no test pair left;
        the message names the smallest number of pairs the protocol runs on.
    """
    check_protocol(protocol)
    validation.check_positive_int("num_pairs", num_pairs)
    n_init, budget, per_round = _counts(num_pairs, protocol)
    if not _fits(num_pairs, protocol):
        low = smallest_task(protocol)
        need = (f"the smallest task for this protocol has {low} ground-truth pairs"
                if low is not None else "no task size fits these fractions")
        if per_round < 1:
            why = (f"`protocol.budget_frac`={protocol.budget_frac} gives {budget} queries, "
                   f"fewer than one per round (`protocol.rounds`={protocol.rounds})")
        else:
            why = (f"`protocol.init_frac`={protocol.init_frac}, `budget_frac` and "
                   "`heldout_frac` leave no initial anchor or no test pair")
        raise ValueError(f"`task` has {num_pairs} ground-truth pairs: {why}; {need}.")
    if per_round * protocol.rounds != budget:
        warnings.warn(f"`protocol.budget_frac`={protocol.budget_frac} asks for {budget} "
                      f"queries of the {num_pairs} pairs; {protocol.rounds} rounds of "
                      f"{per_round} (rounded down to whole queries per round) spend "
                      f"{per_round * protocol.rounds}.", UserWarning, stacklevel=2)
    return n_init, per_round


def _numpy_seed(key: PRNGKey) -> int:
    """The bits of a concrete typed key as one non-negative integer (``jax.random.key(s)``:
    ``s`` for 0 <= s < 2**32)."""
    data = np.asarray(jax.random.key_data(key), np.uint64).ravel()
    out = 0
    for word in data:
        out = (out << 32) | int(word)
    return out


def initial_anchors(key: PRNGKey, num_pairs: int, protocol: Protocol) -> np.ndarray:
    """[num_pairs] bool: the first int(init_frac k) pairs of a permutation seeded by ``key``.

    Args:
      key: a concrete PRNG key (typed, or a legacy uint32 key: ``as_key``); the permutation
        is NumPy's, seeded by the key's bits (``jax.random.key(seed)``: ``default_rng(seed)``).
      num_pairs: k, the task's ground-truth pairs.
      protocol: the Protocol (its ``init_frac``; the budget is checked, ``sizes``).
    """
    return initial_split(key, num_pairs, protocol)[0]


def initial_split(key: PRNGKey, num_pairs: int, protocol: Protocol
                  ) -> tuple[np.ndarray, np.ndarray]:
    """([num_pairs] bool initial anchors, [num_pairs] bool never-queried pairs): the first
    int(init_frac k) pairs of ``initial_anchors``' permutation, then the next
    int(heldout_frac k) (none when ``protocol.heldout_frac`` is 0)."""
    key = as_key(key)
    if key.shape != ():
        raise ValueError(f"`key` must be one key (shape ()), got shape {key.shape}.")
    n_init, _ = sizes(num_pairs, protocol)
    n_held = _held(num_pairs, protocol)
    order = np.random.default_rng(_numpy_seed(key)).permutation(num_pairs)
    mask = np.zeros(num_pairs, bool)
    mask[order[:n_init]] = True
    held = np.zeros(num_pairs, bool)
    held[order[n_init:n_init + n_held]] = True
    return mask, held


# ----------------------------------------------------------------------------- one round


class Round(NamedTuple):
    """What a solve of the current anchors leaves for the next round (all checkpointed).

    stats: PositionStats of the anchors; raw: [n1, n2] product-RWR iterate; cross: [n1, n2]
    PARROT's cost; plan: [n1, n2]; y: [n1 + n2] the last adjoint CG solution (zeros before
    the first)."""

    stats: parrot_official.PositionStats
    raw: Array
    cross: Array
    plan: Array
    y: Array


@functools.partial(jax.jit, static_argnames=("s", "warm", "host"))
def _solve(task, g, stats, anchors, raw, s, warm, host):
    c = parrot_official.cost(task, g, stats, anchors, s, raw if warm else None, host)
    sol = parrot_official.cpot(task, g, c, anchors, s, host)
    return c, sol


@jax.jit
def _metrics(plan, src, tgt, test, heldout, round0):
    """(metrics of ``plan`` on ``test``; on ``heldout`` ("heldout_*", NaN when empty); the
    round-0 values ``round0`` on ``test`` ("removal_*"; None at round 0), [k] per-pair
    values of ``plan``)."""
    both = alignment.pair_values(plan, src, tgt, per_direction=True)
    values = {m: v for m, v in both.items() if not m.endswith(("_st", "_ts"))}
    out = alignment.masked_mean(values, test)
    out.update({m: v for m, v in alignment.masked_mean(both, test).items()
                if m in ("mrr_st", "mrr_ts", "hits@1_st")})
    w = test.astype(jnp.float32)
    denom = jnp.maximum(w.sum(), 1.0)
    true = plan[src, tgt]
    rows, cols = plan[src], plan[:, tgt]
    better_st = jnp.sum(rows > true[:, None], axis=1)
    better_ts = jnp.sum(cols > true[None, :], axis=0)
    tied_st = jnp.sum(rows == true[:, None], axis=1) - 1
    out["mrr_truth_first"] = 0.5 * jnp.sum(w * (1.0 / (better_st + 1.0)
                                                + 1.0 / (better_ts + 1.0))) / denom
    out["mrr_st_truth_first"] = jnp.sum(w / (better_st + 1.0)) / denom
    out["mrr_st_ties_against"] = jnp.sum(w / (better_st + tied_st + 1.0)) / denom
    out.update({f"heldout_{m}": v for m, v in alignment.masked_mean(values, heldout).items()})
    if round0 is not None:
        out.update({f"removal_{m}": v for m, v in alignment.masked_mean(round0, test).items()})
    return out, values


@functools.partial(jax.jit, static_argnames=("strategy", "num", "cg_tol", "cg_maxiter", "eps",
                                             "warm_cg", "teach"))
def _select(key, plan, cross, y, anchors, src, rep, pos, *, strategy, num, cg_tol, cg_maxiter,
            eps, warm_cg, teach=_NO_TEACHING):
    """([num] picked pairs, new y, cg AdjointInfo, [num] the picks' normalised row entropy,
    [num] their uncertainty). ``pos``: [n1, k] RWR position features of the anchors
    (diversity only);
    ``rep``: [n1] representativeness of the RWR features
    (``baselines.representativeness``, constant over a run: computed once); ``anchors``:
    [k] pairs that may not be queried; ``teach``: the variants' parameters."""
    k = anchors.shape[0]
    no_cg = adjoint.AdjointInfo(jnp.bool_(True), jnp.float32(0.0), jnp.int32(0))
    entropy = alignment.row_entropy(plan)
    if strategy == "random":
        s, info = jax.random.uniform(key, (k,)), no_cg
    elif strategy == "entropy":
        s, info = entropy[src], no_cg
    elif strategy == "density":  # baselines.density_score with its constant factor cached
        s, info = (entropy * rep)[src], no_cg
    else:
        grad = (teaching.uncertain_utility_gradient(plan, teach.power)
                if strategy == "avatar_uncertain" else 2.0 * plan)  # sq_l2 utility
        y, info = adjoint.solve_adjoint(plan, grad, cg_tol, cg_maxiter,
                                        y if warm_cg else None)
        gc = adjoint.gradient_from_adjoint(plan, grad, y, eps)
        s = scores.official_score(plan, cross, gc)[src]
        if strategy in ("avatar_discounted", "avatar_density"):
            free = ~anchors
            s = (teaching.shift_nonnegative(s, free)
                 * teaching.uncertainty(plan)[src] ** teach.power)
            if strategy == "avatar_density":
                s = teaching.with_density(s, (entropy * rep)[src], free, teach.weight)
    s = jnp.where(anchors, -jnp.inf, s)
    if strategy in VARIANTS and teach.diversity > 0:
        idx = teaching.diverse_top_k(s, pos[src], num, teach.diversity)
    else:
        _, idx = jax.lax.top_k(s, num)
    rows = src[idx]
    return (idx, y, info, entropy[rows] / jnp.log(plan.shape[1]),
            teaching.uncertainty(plan)[rows])


_representativeness = jax.jit(baselines.representativeness)
_top1 = jax.jit(alignment.top1_probability)


def _check_task_and_graph(task, graph) -> None:
    """``task`` a GraphTask and ``graph`` its ``parrot_official.Graphs``, or a TypeError."""
    if not isinstance(task, tasks.GraphTask):
        raise TypeError(f"`task` must be a tasks.GraphTask (datasets.task), got "
                        f"{type(task).__name__}.")
    if not isinstance(graph, parrot_official.Graphs):
        raise TypeError(f"`graph` must be parrot_official.prepare(task, ...), got "
                        f"{type(graph).__name__}.")


def _check_solve_args(task, graph, anchors, settings) -> None:
    """The arguments of one solve: a GraphTask, its Graphs, Settings, [k] bool anchors."""
    _check_task_and_graph(task, graph)
    parrot_official.check_settings(settings)
    validation.check_shape("anchors", anchors, (tasks.num_pairs(task),))
    validation.check_bool("anchors", anchors)


def round_solve(task: tasks.GraphTask, graph: parrot_official.Graphs, anchors: np.ndarray,
                prev: Round | None, new_pairs: np.ndarray | None,
                settings: parrot_official.Settings, warm: bool,
                host: parrot_official.HostProducts | None = None) -> tuple[Round, dict]:
    """Solves the anchors ``anchors``: the position sums grown by ``new_pairs`` (all anchors
    when ``prev`` is None), the cost (warm or cold product RWR) and CPOT.

    Args:
      task: the GraphTask; graph: ``parrot_official.prepare`` of it.
      anchors: [k] bool, the anchored pairs after this round's queries.
      prev: the previous round's solve, or None (round 0: everything from scratch).
      new_pairs: [q] int, the pairs added since ``prev`` (ignored when ``prev`` is None).
      settings: PARROT's settings; warm: warm-start the product RWR from ``prev``.
      host: optional CPU sparse products (``parrot_official.host_products``).

    Returns:
      (Round, dict of diagnostics: prod_steps, prod_change, column_error, last_change,
      accepted).

    Raises:
      TypeError / ValueError naming ``task``, ``graph``, ``settings`` (a field),
      ``anchors`` (not [k] bool), ``prev`` (not a Round) or ``new_pairs`` (outside [0, k)).
    """
    _check_solve_args(task, graph, anchors, settings)
    if prev is not None and not isinstance(prev, Round):
        raise TypeError(f"`prev` must be a wholegraph.Round or None, got "
                        f"{type(prev).__name__}.")
    if prev is None:
        stats = parrot_official.add_anchors(parrot_official.empty_stats(task, graph), graph,
                                            np.flatnonzero(anchors))
        raw = jnp.zeros(tasks.plan_shape(task), jnp.float32)
        y = jnp.zeros(sum(tasks.plan_shape(task)), jnp.float32)
        use_warm = False
    else:
        stats = parrot_official.add_anchors(prev.stats, graph, new_pairs)
        raw, y, use_warm = prev.raw, prev.y, warm
    c, sol = _solve(task, graph, stats, jnp.asarray(anchors), raw, settings, use_warm, host)
    diag = {"prod_steps": int(c.prod_steps), "prod_change": float(c.prod_change),
            "column_error": float(sol.column_error), "last_change": float(sol.last_change),
            "accepted": int(sol.accepted)}
    return Round(stats, c.raw, c.cross, sol.plan, y), diag


def cold_product_steps(task: tasks.GraphTask, graph: parrot_official.Graphs,
                       anchors: np.ndarray, rnd: Round, settings: parrot_official.Settings,
                       host: parrot_official.HostProducts | None = None) -> tuple[int, float]:
    """(product-RWR steps from 0, max |C_cold - C_warm|) for the anchors of ``rnd``: the
    side-by-side measure of what the warm start saves.

    Raises:
      TypeError / ValueError naming ``task``, ``graph``, ``settings``, ``anchors`` or ``rnd``.
    """
    _check_solve_args(task, graph, anchors, settings)
    if not isinstance(rnd, Round):
        raise TypeError(f"`rnd` must be a wholegraph.Round, got {type(rnd).__name__}.")
    c = _cost_only(task, graph, rnd.stats, jnp.asarray(anchors), settings, host)
    return int(c.prod_steps), float(jnp.max(jnp.abs(c.cross - rnd.cross)))


@functools.partial(jax.jit, static_argnames=("s", "host"))
def _cost_only(task, g, stats, anchors, s, host):
    return parrot_official.cost(task, g, stats, anchors, s, None, host)


# ----------------------------------------------------------------------------- runs


class RunState(NamedTuple):
    """A run after ``step`` rounds: everything ``run`` needs to go on from there.

    Attributes:
      step: rounds done (0: the initial anchors only).
      anchors: [k] bool, the anchored ground-truth pairs.
      solve: the Round of those anchors (plan, cost, position sums, product-RWR iterate,
        the last adjoint CG solution).
      records: [step + 1] dicts, one per round (round 0 = the initial anchors): the test
        metrics, the round's times, solver diagnostics and whatever ``measure`` returned.
      heldout: [k] bool, the never-queried pairs (``initial_split``; None: none).
      round0_values: dict of [k] per-pair values of the round-0 plan
        (``alignment.pair_values``: the removal-only line; None: not recorded).
    """

    step: int
    anchors: np.ndarray
    solve: Round
    records: list
    heldout: np.ndarray | None = None
    round0_values: dict | None = None


def _check_state(state: RunState, num_pairs: int, protocol: Protocol) -> None:
    if not isinstance(state, RunState):
        raise TypeError(f"`state` must be a wholegraph.RunState (solve_round0 / run), got "
                        f"{type(state).__name__}.")
    if not isinstance(state.step, int | np.integer) or not 0 <= state.step <= protocol.rounds:
        raise ValueError(f"`state.step` must be an int in [0, protocol.rounds="
                         f"{protocol.rounds}], got {state.step!r}.")
    if np.shape(state.anchors) != (num_pairs,):
        raise ValueError(f"`state.anchors` must be [{num_pairs}] (the task's pairs), got "
                         f"{np.shape(state.anchors)}.")
    if state.heldout is not None and np.shape(state.heldout) != (num_pairs,):
        raise ValueError(f"`state.heldout` must be [{num_pairs}] (the task's pairs), got "
                         f"{np.shape(state.heldout)}.")
    if len(state.records) != state.step + 1:
        raise ValueError(f"`state.records` must hold step + 1 = {state.step + 1} records, got "
                         f"{len(state.records)}.")


def _measured(measure: Callable[[], dict] | None) -> dict:
    if measure is None:
        return {}
    got = measure()
    if not isinstance(got, dict):
        raise TypeError(f"`measure` must return a dict, got {type(got).__name__}.")
    return got


def _check_run_args(task, graph, settings, protocol) -> None:
    _check_task_and_graph(task, graph)
    check_protocol(protocol)
    parrot_official.check_settings(settings)


def solve_round0(key: PRNGKey, task: tasks.GraphTask, graph: parrot_official.Graphs,
                 settings: parrot_official.Settings, protocol: Protocol, *,
                 host: parrot_official.HostProducts | None = None,
                 measure: Callable[[], dict] | None = None) -> RunState:
    """The state of the initial anchors of ``key`` (round 0; shared by the strategies).

    Args:
      key: a concrete PRNG key (``initial_anchors``); pass the same key to ``run``.
      task: the GraphTask (RWR restart = ``settings.restart``).
      graph: ``parrot_official.prepare(task, adj1, adj2, settings)``.
      settings: PARROT's settings (``parrot_official.Settings``).
      protocol: the Protocol.
      host: optional ``parrot_official.HostProducts`` (CPU sparse products).
      measure: optional callable returning a dict merged into the record (the caller's
        readings, e.g. memory).

    Returns:
      RunState with ``step`` 0 and one record (metrics, ``solve_s``, diagnostics).
    """
    _check_run_args(task, graph, settings, protocol)
    anchors, held = initial_split(key, tasks.num_pairs(task), protocol)
    t0 = time.perf_counter()
    rnd, diag = round_solve(task, graph, anchors, None, None, settings, False, host)
    jax.block_until_ready(rnd.plan)
    t = time.perf_counter() - t0
    mets, values = _round_metrics(task, rnd.plan, anchors, held, None)
    rec = {"round": 0, "anchors": int(anchors.sum()), "test": int((~anchors).sum()), **mets,
           **diag, "solve_s": t, "round_s": t, **_measured(measure)}
    return RunState(0, anchors, rnd, [rec], held,
                    {m: np.asarray(v) for m, v in values.items()})


def _round_metrics(task, plan, anchors, held, round0) -> tuple[dict, dict]:
    """(the record's metrics as floats: the paper's on the unanchored pairs, "heldout_*"
    when ``held`` selects pairs, "removal_*" when ``round0`` is given; the [k] values)."""
    mets, values = _metrics(plan, jnp.asarray(task.src), jnp.asarray(task.tgt),
                            jnp.asarray(~anchors), jnp.asarray(held), round0)
    out = {m: float(v) for m, v in mets.items()
           if not (m.startswith("heldout_") and not held.any())}
    return out, values


def resolve(strategy: str, teach: Teaching | None = None) -> tuple[str, Teaching]:
    """(the strategy ``_select`` runs, its Teaching): "ours" -> ``OURS``.

    Raises:
      ValueError: ``teach`` given with "ours" (its parameters are frozen) or with a
        strategy that has none, or a ``teach`` field that is not a finite number >= 0.
    """
    if strategy == "ours":
        if teach is not None and tuple(teach) != tuple(OURS[1]):
            raise ValueError(f"`teach`: strategy 'ours' is {OURS[0]} with the frozen "
                             f"{OURS[1]}; got {teach}.")
        return OURS
    if teach is None:
        return strategy, _NO_TEACHING
    if strategy not in VARIANTS:
        raise ValueError(f"`teach` applies to the strategies {VARIANTS}, not {strategy!r}.")
    if not isinstance(teach, Teaching):
        raise TypeError(f"`teach` must be a wholegraph.Teaching, got {type(teach).__name__}.")
    for name, v in teach._asdict().items():
        if isinstance(v, bool) or not isinstance(v, int | float) or not (
                np.isfinite(v) and v >= 0):
            raise ValueError(f"`teach.{name}` must be a finite number >= 0, got {v!r}.")
    return strategy, Teaching(*(float(v) for v in teach))


def run(key: PRNGKey, task: tasks.GraphTask, graph: parrot_official.Graphs,
        settings: parrot_official.Settings, protocol: Protocol, strategy: str, *,
        state: RunState | None = None, compare_cold: bool = False,
        compare_rounds: int | None = None, host: parrot_official.HostProducts | None = None,
        measure: Callable[[], dict] | None = None,
        callback: Callable[[RunState], None] | None = None,
        teach: Teaching | None = None) -> RunState:
    """One (strategy, key) run of the protocol, from round 0 or from ``state``.

    Args:
      key: a concrete PRNG key (typed, or a legacy uint32 key): the initial anchors
        (``initial_anchors``) and round r's "random" scores (``split(key, rounds)[r]``).
      task: the GraphTask (RWR restart = ``settings.restart``).
      graph: ``parrot_official.prepare(task, adj1, adj2, settings)``.
      settings: PARROT's settings (``parrot_official.Settings``).
      protocol: the Protocol.
      strategy: one of STRATEGIES ("ours": ``OURS``, a variant with frozen parameters).
      state: the state to go on from: ``solve_round0(key, ...)`` (the round 0 shared by the
        strategies of a key) or a state a previous ``run`` handed to ``callback`` (resuming
        after that round); None: ``solve_round0`` here. Its records are copied, not changed.
      compare_cold: also run the product RWR from 0 and the CG from 0 each round (the
        warm-start saving, side by side; records ``prod_steps_cold``, ``cost_gap_cold``,
        ``cg_iterations_cold``).
      compare_rounds: compare only in the first this many rounds (None: every round).
      host: optional ``parrot_official.HostProducts`` (CPU sparse products).
      measure: optional callable returning a dict merged into each round's record (the
        caller's readings, e.g. memory or load; nothing of the machine is read here).
      callback: optional callable taking the RunState after each round (the caller's
        checkpoints and progress lines); an exception it raises stops the run.
      teach: the parameters of a ``VARIANTS`` strategy (None: ``Teaching()``; "ours" uses
        its frozen ones and refuses another).

    Returns:
      RunState after ``protocol.rounds`` rounds; ``records`` has rounds + 1 entries, each
      with the metrics, the round's times (``select_s``, ``solve_s``, ``round_s``), the
      picks' diagnostics (``picked_correct``: share the plan already matched;
      ``picked_entropy``: mean row entropy / log n2; ``picked_uncertainty``: mean
      1 - max_j P_ij) and the solver diagnostics.

    Raises:
      ValueError / TypeError naming the argument: an unknown ``strategy``, a bad protocol
      field or budget, a ``key`` that is no PRNG key, a ``state`` of another task.
    """
    validation.check_one_of("strategy", strategy, STRATEGIES)
    strategy, teach = resolve(strategy, teach)
    _check_run_args(task, graph, settings, protocol)
    key = as_key(key)
    k = tasks.num_pairs(task)
    _, per_round = sizes(k, protocol)
    if state is None:
        state = solve_round0(key, task, graph, settings, protocol, host=host, measure=measure)
    _check_state(state, k, protocol)
    step, anchors, rnd = int(state.step), np.array(state.anchors, bool), state.solve
    held = (np.zeros(k, bool) if state.heldout is None
            else np.array(state.heldout, bool))
    round0 = (None if state.round0_values is None
              else {m: jnp.asarray(v) for m, v in state.round0_values.items()})
    records = [dict(r) for r in state.records]
    src, tgt = jnp.asarray(task.src), jnp.asarray(task.tgt)
    # density's representativeness is an [n1, n1] cosine of the RWR features (~1e12 flops
    # on ACM-DBLP): computed once per run, not once per round
    rep = (_representativeness(jnp.asarray(task.pos1, jnp.float32))
           if strategy in _DENSITY_TERM else jnp.zeros(tasks.plan_shape(task)[0], jnp.float32))
    pos = (jnp.asarray(task.pos1, jnp.float32) if teach.diversity > 0
           else jnp.zeros((tasks.plan_shape(task)[0], 1), jnp.float32))
    keys = jax.random.split(key, protocol.rounds)
    eps = parrot_official.epsilon(settings)
    sel = dict(strategy=strategy, num=per_round, cg_tol=protocol.cg_tol,
               cg_maxiter=protocol.cg_maxiter, eps=eps, teach=teach)
    while step < protocol.rounds:
        t0 = time.perf_counter()
        blocked = jnp.asarray(anchors | held)  # never queried: anchored or held out
        # diversity: RWR proximity to the current anchors only (PARROT's position features)
        known = pos * jnp.asarray(anchors)[None, :] if teach.diversity > 0 else pos
        idx, y, cg, pick_h, pick_u = _select(keys[step], rnd.plan, rnd.cross, rnd.y,
                                             blocked, src, rep, known, warm_cg=protocol.warm,
                                             **sel)
        idx = np.asarray(idx)
        extra = {}
        compare = compare_cold and (compare_rounds is None or step < compare_rounds)
        if compare and strategy.startswith("avatar"):
            _, _, cg0, _, _ = _select(keys[step], rnd.plan, rnd.cross, rnd.y, blocked,
                                      src, rep, known, warm_cg=False, **sel)
            extra["cg_iterations_cold"] = int(cg0.iterations)
        t_select = time.perf_counter() - t0
        # ties in a plan row in random order (an argmax takes the first tied entry)
        picked_correct = float(jnp.mean(_top1(rnd.plan, src[idx], tgt[idx])))
        anchors = anchors.copy()
        anchors[idx] = True
        t1 = time.perf_counter()
        grown = np.zeros(0, np.int64) if protocol.frozen_rwr else idx  # new RWR columns
        rnd, diag = round_solve(task, graph, anchors, rnd._replace(y=y), grown, settings,
                                protocol.warm, host)
        jax.block_until_ready(rnd.plan)
        t_solve = time.perf_counter() - t1
        if compare:
            steps0, gap = cold_product_steps(task, graph, anchors, rnd, settings, host)
            extra.update(prod_steps_cold=steps0, cost_gap_cold=gap)
        mets, _ = _round_metrics(task, rnd.plan, anchors, held, round0)
        step += 1
        rec = {"round": step, "anchors": int(anchors.sum()), "test": int((~anchors).sum()),
               **mets, **diag, "cg_iterations": int(cg.iterations),
               "cg_converged": bool(cg.converged), "cg_residual": float(cg.residual),
               "picked_correct": picked_correct,
               "picked_entropy": float(jnp.mean(pick_h)),
               "picked_uncertainty": float(jnp.mean(pick_u)), "select_s": t_select,
               "solve_s": t_solve, "round_s": time.perf_counter() - t0,
               **_measured(measure), **extra}
        records = [*records, rec]
        state = RunState(step, anchors, rnd, records, state.heldout, state.round0_values)
        if callback is not None:
            callback(state)
    return state
