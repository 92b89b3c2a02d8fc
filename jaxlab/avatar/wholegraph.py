"""AvAtar's protocol on whole graphs with PARROT as its official code runs it.

One run = one (strategy, seed): AvAtar's protocol (yq-leo/AvAtar-ICML26,
``source/active_na.py``): round(``init_frac`` k) of the k ground-truth pairs as initial
anchors (a seeded permutation), then ``rounds`` rounds; each round re-runs the aligner on
the current anchors, scores the unanchored pairs' source nodes, labels the
floor(round(``budget_frac`` k) / ``rounds``) best, and the test set is every ground-truth
pair not anchored (queried pairs leave it). Metrics after each round on that test set:
MRR and Hits@{1,10,30,50} averaged over both directions (PlanetAlign's "mean", which
AvAtar logs), and each direction (PARROT's own script reports source -> target only);
ranks count strictly better candidates (ties in the plan favour the truth), and
``mrr_st_ties_against`` counts ties against it.

Aligner: ``parrot_official`` (PARROT's code, its per-dataset settings). Strategies:
"random", "entropy" (row entropy of the plan), "density" (entropy x representativeness of
the RWR features, ``baselines``), "avatar" (AvAtar's official score with the sq_l2
utility, its network-alignment default: adjoint CG on the plan, eps = lambda_p + lambda_n +
lambda_a as AvAtar's code passes it, ``scores.official_score`` with PARROT's cost).

Ours: a round is a Python loop of jitted pieces (``round_solve``, ``select``), so each
piece compiles once per shape and a run can stop after any round:

* shared round 0: the plan of the initial anchors is the same for every strategy of a
  seed; ``Runner`` solves it once per seed and checkpoints it;
* warm starts (``warm=True``): the RWR cosines grow by the new anchor columns only
  (``parrot_official.PositionStats``), the product-graph RWR starts from the previous
  round's fixed point (stopping on the same tolerance), AvAtar's adjoint CG starts from
  the previous round's solution. CPOT runs PARROT's fixed schedule (10 x 5 Sinkhorn
  sweeps) from the uniform plan every round (see ``parrot_official``);
* checkpoints: after every round, the anchors, the position sums, the product-RWR
  iterate, the plan, the cost and the CG solution go to one ``.npz`` per run (written to
  a temporary name, then renamed), keyed by a hash of the data, the settings, the
  protocol, the strategy, the seed and the source of the modules that compute a round; a
  mismatching or unreadable checkpoint is ignored with a warning, so a resumed run loses
  at most the round in progress and never reads another configuration's state.

Checks (eager): ``strategy`` in STRATEGIES, protocol fields (ranges), ``seed`` int >= 0.
"""

import ast
import functools
import hashlib
import inspect
import json
import os
import textwrap
import time
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
    parrot_official,
    scores,
    task_cache,
    tasks,
)
from jaxlab.core import validation
from jaxlab.core.types import Array

__all__ = ["STRATEGIES", "Protocol", "sizes", "initial_anchors", "Round", "round_solve",
    "cold_product_steps", "tie_aware_metrics", "run", "solve_round0"]

STRATEGIES = ("random", "entropy", "density", "avatar")


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
    """

    rounds: int = 10
    init_frac: float = 0.2
    budget_frac: float = 0.2
    cg_tol: float = 1e-4
    cg_maxiter: int = 2000
    warm: bool = True


def check_protocol(p: Protocol) -> None:
    """Raises ValueError naming the bad field of ``p``."""
    validation.check_positive_int("protocol.rounds", p.rounds)
    for name in ("init_frac", "budget_frac"):
        validation.check_in_range(f"protocol.{name}", getattr(p, name), 0.0, 1.0,
                                  low_inclusive=False, high_inclusive=False)
    validation.check_in_range("protocol.cg_tol", p.cg_tol, 0.0, np.inf, low_inclusive=False,
                              high_inclusive=False)
    validation.check_positive_int("protocol.cg_maxiter", p.cg_maxiter)
    if not isinstance(p.warm, bool):
        raise ValueError(f"`protocol.warm` must be a bool, got {p.warm!r}.")


def sizes(k: int, p: Protocol) -> tuple[int, int]:
    """(initial anchors, queries per round) for k ground-truth pairs (AvAtar's code:
    int(0.2 k) anchors, (B - B mod R) / R per round with B = int(0.2 k))."""
    n_init = int(p.init_frac * k)
    budget = int(p.budget_frac * k)
    per_round = budget // p.rounds
    if per_round < 1:
        raise ValueError(f"`protocol.budget_frac`={p.budget_frac} gives {budget} queries for "
                         f"{k} pairs, fewer than `protocol.rounds`={p.rounds}.")
    if n_init < 1 or n_init + per_round * p.rounds >= k:
        raise ValueError(f"`protocol.init_frac`={p.init_frac} and `budget_frac` leave no test "
                         f"pair (k={k}).")
    return n_init, per_round


def initial_anchors(k: int, seed: int, p: Protocol) -> np.ndarray:
    """[k] bool: the first int(init_frac k) pairs of a permutation seeded by ``seed``."""
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"`seed` must be an integer >= 0, got {seed!r}.")
    n_init, _ = sizes(k, p)
    order = np.random.default_rng(seed).permutation(k)
    mask = np.zeros(k, bool)
    mask[order[:n_init]] = True
    return mask


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
def _metrics(plan, src, tgt, test):
    r_st, r_ts = alignment.ranks_of_pairs(plan, src, tgt)
    out = alignment.pair_metrics(plan, src, tgt, test)
    w = test.astype(jnp.float32)
    denom = jnp.maximum(w.sum(), 1.0)
    true = plan[src, tgt]
    ties_st = jnp.sum(plan[src] >= true[:, None], axis=1) - 1
    out["mrr_st"] = jnp.sum(w / (r_st + 1.0)) / denom
    out["mrr_ts"] = jnp.sum(w / (r_ts + 1.0)) / denom
    out["mrr_st_ties_against"] = jnp.sum(w / (ties_st + 1.0)) / denom
    out["hits@1_st"] = jnp.sum(w * (r_st < 1)) / denom
    return out


@functools.partial(jax.jit, static_argnames=("strategy", "num", "cg_tol", "cg_maxiter", "eps",
                                             "warm_cg"))
def _select(key, plan, cross, y, anchors, src, rep, *, strategy, num, cg_tol, cg_maxiter,
            eps, warm_cg):
    """([num] picked pairs, new y, cg AdjointInfo). ``rep``: [n1] representativeness of the
    RWR features (``baselines.representativeness``, constant over a run: computed once)."""
    k = anchors.shape[0]
    no_cg = adjoint.AdjointInfo(jnp.bool_(True), jnp.float32(0.0), jnp.int32(0))
    if strategy == "random":
        s, info = jax.random.uniform(key, (k,)), no_cg
    elif strategy == "entropy":
        s, info = alignment.row_entropy(plan)[src], no_cg
    elif strategy == "density":  # baselines.density_score with its constant factor cached
        s, info = (alignment.row_entropy(plan) * rep)[src], no_cg
    else:
        grad = 2.0 * plan  # sq_l2 utility
        y, info = adjoint.solve_adjoint(plan, grad, cg_tol, cg_maxiter,
                                        y if warm_cg else None)
        gc = adjoint.gradient_from_adjoint(plan, grad, y, eps)
        s = scores.official_score(plan, cross, gc)[src]
    s = jnp.where(anchors, -jnp.inf, s)
    _, idx = jax.lax.top_k(s, num)
    return idx, y, info


_representativeness = jax.jit(baselines.representativeness)


def round_solve(task, g, anchors: np.ndarray, prev: Round | None, new_pairs, s, warm: bool,
                host=None):
    """Solves the anchors ``anchors``: the position sums grown by ``new_pairs`` (all anchors
    when ``prev`` is None), the cost (warm or cold product RWR) and CPOT.

    Returns:
      (Round, dict of diagnostics: prod_steps, prod_change, column_error, last_change,
      accepted).
    """
    if prev is None:
        stats = parrot_official.add_anchors(parrot_official.empty_stats(task, g), g,
                                            np.flatnonzero(anchors))
        raw = jnp.zeros(tasks.plan_shape(task), jnp.float32)
        y = jnp.zeros(sum(tasks.plan_shape(task)), jnp.float32)
        use_warm = False
    else:
        stats = parrot_official.add_anchors(prev.stats, g, new_pairs)
        raw, y, use_warm = prev.raw, prev.y, warm
    c, sol = _solve(task, g, stats, jnp.asarray(anchors), raw, s, use_warm, host)
    diag = {"prod_steps": int(c.prod_steps), "prod_change": float(c.prod_change),
            "column_error": float(sol.column_error), "last_change": float(sol.last_change),
            "accepted": int(sol.accepted)}
    return Round(stats, c.raw, c.cross, sol.plan, y), diag


def cold_product_steps(task, g, anchors: np.ndarray, rnd: Round, s,
                       host=None) -> tuple[int, float]:
    """(product-RWR steps from 0, max |C_cold - C_warm|) for the anchors of ``rnd``: the
    side-by-side measure of what the warm start saves."""
    c = _cost_only(task, g, rnd.stats, jnp.asarray(anchors), s, host)
    return int(c.prod_steps), float(jnp.max(jnp.abs(c.cross - rnd.cross)))


@functools.partial(jax.jit, static_argnames=("s", "host"))
def _cost_only(task, g, stats, anchors, s, host):
    return parrot_official.cost(task, g, stats, anchors, s, None, host)


@jax.jit
def tie_aware_metrics(plan, src, tgt, test):
    """MRR with ties in the plan broken in a uniformly random order (the expectation, exact):
    a truth with r strictly better and e tied candidates has expected reciprocal rank
    (H(r + e + 1) - H(r)) / (e + 1), H the harmonic numbers (torch's argsort, which
    PlanetAlign ranks with, orders ties arbitrarily). Returns {"mrr_random_ties": both
    directions, "mrr_st_random_ties": source -> target} on the pairs where ``test``."""
    true = plan[src, tgt]

    def expected_rr(better, tied):
        r, e = better.astype(jnp.float32), tied.astype(jnp.float32)
        return (jax.scipy.special.digamma(r + e + 2.0)
                - jax.scipy.special.digamma(r + 1.0)) / (e + 1.0)

    rows, cols = plan[src], plan[:, tgt]
    st = expected_rr(jnp.sum(rows > true[:, None], 1), jnp.sum(rows == true[:, None], 1) - 1)
    ts = expected_rr(jnp.sum(cols > true[None, :], 0), jnp.sum(cols == true[None, :], 0) - 1)
    w = test.astype(jnp.float32)
    denom = jnp.maximum(w.sum(), 1.0)
    return {"mrr_random_ties": 0.5 * jnp.sum(w * (st + ts)) / denom,
            "mrr_st_random_ties": jnp.sum(w * st) / denom}


# ----------------------------------------------------------------------------- checkpoints


def code_text(source: str) -> str:
    """The syntax tree of ``source`` without docstrings, comments or layout (``ast.dump``):
    what a checkpoint key hashes, so editing documentation does not invalidate a run."""
    tree = ast.parse(textwrap.dedent(source))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)


def source_digest() -> str:
    """SHA-256 of the code (``code_text``) of the modules and functions that compute a round
    (a checkpoint key part)."""
    h = hashlib.sha256()
    for obj in (parrot_official, parrot, adjoint, alignment, baselines, scores, tasks,
                round_solve, run, _select, _metrics):
        h.update(code_text(inspect.getsource(obj)).encode())
    return h.hexdigest()


def run_key(data_key: str, s, p: Protocol, strategy: str, seed: int) -> str:
    """The checkpoint key of one run (data, settings, protocol, strategy, seed, code)."""
    text = json.dumps([data_key, list(s), list(p), strategy, int(seed), source_digest()])
    return hashlib.sha256(text.encode()).hexdigest()


def save_checkpoint(path: str, key: str, step: int, anchors, rnd: Round, records) -> None:
    """Writes one run's state after round ``step`` (atomic rename)."""
    arrays = {"key": np.asarray(key), "step": np.asarray(step), "anchors": np.asarray(anchors),
              "records": np.asarray(json.dumps(records)), "raw": np.asarray(rnd.raw),
              "cross": np.asarray(rnd.cross), "plan": np.asarray(rnd.plan),
              "y": np.asarray(rnd.y)}
    for name, v in rnd.stats._asdict().items():
        arrays[f"stats_{name}"] = np.asarray(v)
    task_cache.save_npz_atomic(path, arrays)


def load_checkpoint(path: str, key: str):
    """(step, anchors, Round, records) from ``path`` if it holds this ``key``, else None
    (a warning when a file exists but does not match or cannot be read)."""
    if not os.path.isfile(path):
        return None
    try:
        with np.load(path) as z:
            if str(z["key"]) != key:
                warnings.warn(f"checkpoint {path} belongs to another configuration or code "
                              "version; starting this run from round 0.", RuntimeWarning,
                              stacklevel=2)
                return None
            stats = parrot_official.PositionStats(
                **{f: jnp.asarray(z[f"stats_{f}"]) for f in
                   parrot_official.PositionStats._fields})
            rnd = Round(stats, jnp.asarray(z["raw"]), jnp.asarray(z["cross"]),
                        jnp.asarray(z["plan"]), jnp.asarray(z["y"]))
            return int(z["step"]), z["anchors"].copy(), rnd, json.loads(str(z["records"]))
    except (OSError, ValueError, KeyError) as e:
        warnings.warn(f"checkpoint {path} is unreadable ({e}); starting this run from round "
                      "0.", RuntimeWarning, stacklevel=2)
        return None


# ----------------------------------------------------------------------------- runs


def _rss_gb() -> float:
    """Peak resident memory of this process so far (GB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def run(task, g, s, p: Protocol, strategy: str, seed: int, folder: str, data_key: str,
        round0=None, compare_cold: bool = False, compare_rounds: int | None = None,
        host=None, log=print) -> list[dict]:
    """One (strategy, seed) run of the protocol, resumed from its checkpoint when present.

    Args:
      task: the GraphTask (RWR restart = ``s.restart``); g: ``parrot_official.prepare``.
      s: parrot_official.Settings; p: Protocol; strategy: one of STRATEGIES; seed: int >= 0.
      folder: checkpoint folder; data_key: the task cache digest (part of the key).
      round0: optional (anchors, Round, record) of the seed's shared round 0.
      compare_cold: also time the product RWR from 0 and CG from 0 each round (the
        warm-start saving, side by side).
      compare_rounds: compare only in the first this many rounds (None: every round).
      host: optional ``parrot_official.HostProducts`` (CPU sparse products).
      log: callable taking one progress line.

    Returns:
      [rounds + 1] records (round 0 = the initial anchors), each with the metrics, the
      round's times, solver diagnostics and peak memory.
    """
    validation.check_one_of("strategy", strategy, STRATEGIES)
    check_protocol(p)
    parrot_official.check_settings(s)
    k = tasks.num_pairs(task)
    _, per_round = sizes(k, p)
    key = run_key(data_key, s, p, strategy, seed)
    path = os.path.join(folder, f"run-{strategy}-seed{seed}.npz")
    got = load_checkpoint(path, key)
    if got is not None:
        step, anchors, rnd, records = got
        log(f"  {strategy} seed {seed}: resumed after round {step}")
    else:
        if round0 is None:
            round0 = solve_round0(task, g, s, p, seed, host)
        anchors, rnd, rec = round0
        anchors, step, records = anchors.copy(), 0, [dict(rec)]
    src, tgt = jnp.asarray(task.src), jnp.asarray(task.tgt)
    # density's representativeness is an [n1, n1] cosine of the RWR features (~1e12 flops
    # on ACM-DBLP): computed once per run, not once per round
    rep = (_representativeness(jnp.asarray(task.pos1, jnp.float32)) if strategy == "density"
           else jnp.zeros(tasks.plan_shape(task)[0], jnp.float32))
    keys = jax.random.split(jax.random.PRNGKey(seed), p.rounds)
    eps = parrot_official.epsilon(s)
    while step < p.rounds:
        t0 = time.perf_counter()
        sel = dict(strategy=strategy, num=per_round, cg_tol=p.cg_tol, cg_maxiter=p.cg_maxiter,
                   eps=eps)
        idx, y, cg = _select(keys[step], rnd.plan, rnd.cross, rnd.y, jnp.asarray(anchors), src,
                             rep, warm_cg=p.warm, **sel)
        idx = np.asarray(idx)
        extra = {}
        compare = compare_cold and (compare_rounds is None or step < compare_rounds)
        if compare and strategy == "avatar":
            _, _, cg0 = _select(keys[step], rnd.plan, rnd.cross, rnd.y, jnp.asarray(anchors),
                                src, rep, warm_cg=False, **sel)
            extra["cg_iterations_cold"] = int(cg0.iterations)
        t_select = time.perf_counter() - t0
        picked_correct = float(np.mean(np.asarray(jnp.argmax(rnd.plan[src[idx]], axis=1))
                                       == np.asarray(tgt[idx])))
        anchors[idx] = True
        t1 = time.perf_counter()
        rnd, diag = round_solve(task, g, anchors, rnd._replace(y=y), idx, s, p.warm, host)
        jax.block_until_ready(rnd.plan)
        t_solve = time.perf_counter() - t1
        if compare:
            steps0, gap = cold_product_steps(task, g, anchors, rnd, s, host)
            extra.update(prod_steps_cold=steps0, cost_gap_cold=gap)
        mets = {m: float(v) for m, v in _metrics(rnd.plan, src, tgt,
                                                  jnp.asarray(~anchors)).items()}
        step += 1
        rec = {"round": step, "anchors": int(anchors.sum()), "test": int((~anchors).sum()),
               **mets, **diag, "cg_iterations": int(cg.iterations),
               "cg_converged": bool(cg.converged), "cg_residual": float(cg.residual),
               "picked_correct": picked_correct, "select_s": t_select, "solve_s": t_solve,
               "round_s": time.perf_counter() - t0, "peak_rss_gb": _rss_gb(),
               "load_avg_1min": os.getloadavg()[0], **extra}
        records.append(rec)
        save_checkpoint(path, key, step, anchors, rnd, records)
        log(f"  {strategy} seed {seed} round {step}/{p.rounds}: MRR {rec['mrr']:.4f} "
            f"({rec['round_s']:.1f} s: select {t_select:.1f}, solve {t_solve:.1f}; "
            f"product RWR {diag['prod_steps']} steps; CG {rec['cg_iterations']})")
    return records


def solve_round0(task, g, s, p: Protocol, seed: int, host=None):
    """(anchors, Round, record) of the initial anchors of ``seed`` (shared by strategies)."""
    anchors = initial_anchors(tasks.num_pairs(task), seed, p)
    t0 = time.perf_counter()
    rnd, diag = round_solve(task, g, anchors, None, None, s, False, host)
    jax.block_until_ready(rnd.plan)
    t = time.perf_counter() - t0
    src, tgt = jnp.asarray(task.src), jnp.asarray(task.tgt)
    mets = {m: float(v) for m, v in _metrics(rnd.plan, src, tgt, jnp.asarray(~anchors)).items()}
    rec = {"round": 0, "anchors": int(anchors.sum()), "test": int((~anchors).sum()), **mets,
           **diag, "solve_s": t, "round_s": t, "peak_rss_gb": _rss_gb(),
           "load_avg_1min": os.getloadavg()[0]}
    return anchors, rnd, rec
