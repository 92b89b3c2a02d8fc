"""Anchor-aware costs and alignment metrics (jittable, static shapes).

Anchors are a boolean mask over source nodes: anchor k is matched to truth[k]. The cost is

    C = w_feat  ||feat1_i - feat2_j||^2 / mean  +  w_anchor ||pos1_i,A - pos2_j,truth(A)||^2 / mean

with A the anchor set (non-anchor columns are masked out), and anchored rows / columns
pinned: C[k, truth[k]] = 0 and the rest of row k and column truth[k] at the maximum.

Whole graphs (``tasks.GraphTask``, ours): the mask is over the task's k ground-truth pairs
(src[p], tgt[p]) (on a square task pair k is (k, truth[k]), the same mask), the positions
in pair order (``tasks.anchor_positions``) and the cost [n1, n2]; ``pair_metrics`` /
``ranks_of_pairs`` are the metrics of a rectangular plan on those pairs (the same numbers
as ``alignment_metrics`` on a square task with src = arange(n), tgt = truth).

Ties: every metric orders tied scores uniformly at random, never truth first (a plan with
all scores equal would otherwise get MRR 1 for any truth). Without a key a pair contributes
the exact expectation over those orders (``pair_values``; ranks: the midrank), with
``key`` one order is drawn. ``top1_probability`` is the same for "the row ranks the truth
first" (an argmax takes the first of tied entries).

Checks (shapes and dtypes also under ``jit``, values only on concrete arrays):
``anchor_cost``: ``mask`` [k]; ``ranks_of_truth`` / ``alignment_metrics``: ``plan`` /
``scores`` [n, n] and finite, ``truth`` [n] distinct integers in [0, n) (a one-to-one
alignment: a target named twice would let two sources share one true match),
``eval_mask`` [n];
``ranks_of_pairs`` / ``pair_metrics``: ``scores`` 2-D [n1, n2] and finite, ``src`` /
``tgt`` [k] integers in [0, n1) / [0, n2), ``eval_mask`` [k]; ``masked_mean``: ``mask``
bool, the shape of each value; ``row_normalise`` / ``row_entropy`` / ``row_margin``:
``plan`` 2-D, real, finite and non-negative (``row_margin``: two columns at least).

Traced values (inside a caller's ``jit`` / ``vmap``): in checked mode
(``jaxlab.core.checks``) ``alignment_metrics`` and ``pair_metrics`` check them too (a
non-finite plan, a truth / pair index out of range, a repeated truth) and raise
``jaxlab.core.CheckError`` naming the argument. Without checked mode a pair whose plan row
or column is not finite, or whose index is out of range, scores NaN (and so does a repeated
truth), never a rank: the metrics averaged over it are NaN, not a perfect score. A caller
that averages metrics must report a NaN, not drop it.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import tasks
from jaxlab.core import checked, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Array, PRNGKey

__all__ = ["cosine_similarity", "anchor_cost", "ranks_of_truth", "alignment_metrics",
    "ranks_of_pairs", "pair_values", "masked_mean", "pair_metrics", "top1_probability",
    "row_normalise", "row_entropy", "row_margin"]

checked.declare("jaxlab.avatar.alignment.alignment_metrics",
                "jaxlab.avatar.alignment.pair_metrics")


def cosine_similarity(x: Array, y: Array) -> Array:
    """[n, m] cosine similarity of the rows of ``x`` [n, d] and ``y`` [m, d] (rows of norm
    below 1e-12 are divided by 1e-12, so a zero row has similarity 0 to everything).

    Raises:
      ValueError: ``x`` or ``y`` not 2-D or (concrete) not finite, or their row lengths
        differ.
    """
    validation.check_ndim("x", x, 2)
    validation.check_ndim("y", y, 2)
    validation.check_finite("x", x)
    validation.check_finite("y", y)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"`x` rows have {x.shape[1]} entries, `y` rows {y.shape[1]}.")
    xn = x / jnp.maximum(jnp.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    yn = y / jnp.maximum(jnp.linalg.norm(y, axis=1, keepdims=True), 1e-12)
    return xn @ yn.T


def _sqdist(x, y):
    return jnp.maximum(jnp.sum(x**2, 1)[:, None] + jnp.sum(y**2, 1)[None, :] - 2 * x @ y.T, 0.0)


def _normalise(c):
    return c / jnp.maximum(jnp.mean(c), 1e-12)


def anchor_cost(task, mask: Array, feat_weight: float = 1.0, anchor_weight: float = 1.0) -> Array:
    """[n1, n2] cost given the anchor ``mask`` [k] (bool) over the task's pairs (a square
    task: over source nodes, pair k = (k, truth[k]); a ``tasks.GraphTask``: its k
    ground-truth pairs, positions in pair order)."""
    validation.check_shape("mask", mask, (tasks.num_pairs(task),))
    src, tgt = tasks.pair_nodes(task)
    n1, n2 = tasks.plan_shape(task)
    m = mask.astype(jnp.float32)
    r1, r2 = tasks.anchor_positions(task)
    c_anchor = _normalise(_sqdist(r1 * m[None, :], r2 * m[None, :]))
    feat1, feat2 = jnp.asarray(task.feat1, jnp.float32), jnp.asarray(task.feat2, jnp.float32)
    c_feat = _normalise(_sqdist(feat1, feat2)) if feat1.shape[1] > 1 else jnp.zeros_like(c_anchor)
    c = feat_weight * c_feat + jnp.where(m.sum() > 0, anchor_weight, 0.0) * c_anchor
    top = jnp.max(c)
    row_pin = jnp.zeros(n1, bool).at[src].set(mask)[:, None]
    col_pin = jnp.zeros(n2, bool).at[tgt].set(mask)[None, :]
    is_match = jnp.zeros((n1, n2), bool).at[src, tgt].set(True)
    c = jnp.where(row_pin | col_pin, top, c)
    return jnp.where((row_pin | col_pin) & is_match, 0.0, c)


def ranks_of_truth(scores: Array, truth: Array, key: PRNGKey | None = None
                   ) -> tuple[Array, Array]:
    """0-based rank of the true match per source row and per target column of ``scores``.

    Ties are never broken in the truth's favour: with g candidates scoring strictly higher
    than the truth and t others scoring the same, the truth's rank under a uniformly random
    order of the tied entries is g + U, U uniform on {0, ..., t}. Without ``key`` the
    expected rank g + t / 2 (the midrank) is returned; with ``key`` one such order is drawn.

    Args:
      scores: [n, n] plan or scores (higher = better match), finite.
      truth: [n] int, source node i's true target.
      key: optional PRNG key: draw the order of tied entries (int ranks) instead of
        returning the expected rank (float ranks).

    Returns:
      (source->target ranks [n], target->source ranks [n], aligned with source node i).
    """
    _check_scores("scores", scores, truth)
    n = scores.shape[0]
    return _ranks(*_better_and_tied(scores, jnp.arange(n), truth), key)


@checked.boundary
def alignment_metrics(plan: Array, truth: Array, eval_mask: Array, ks=(1, 10, 30, 50),
                      key: PRNGKey | None = None) -> dict:
    """Hits@k and MRR averaged over both directions on nodes where ``eval_mask`` is True.

    Ties in ``plan`` are ordered uniformly at random, never truth first: without ``key``
    each node contributes the exact expectation over that order (``expected_values``: an
    all-tied [n, n] plan has MRR H_n / n, H_n the n-th harmonic number, for any truth);
    with ``key`` one order is drawn (``ranks_of_truth``).
    """
    _check_scores("plan", plan, truth)
    validation.check_shape("eval_mask", eval_mask, (np.shape(plan)[0],))
    _check_nonempty_mask(eval_mask)
    checked.guard("jaxlab.avatar.alignment.alignment_metrics", _traced_square, plan, truth)
    n = np.shape(plan)[0]
    values = _values(plan, jnp.arange(n), truth, ks, key, distinct=True)
    return masked_mean(values, eval_mask)


def ranks_of_pairs(scores: Array, src: Array, tgt: Array, key: PRNGKey | None = None
                   ) -> tuple[Array, Array]:
    """``ranks_of_truth`` for a rectangular [n1, n2] ``scores`` and k pairs (src, tgt).

    Returns:
      ([k] rank of tgt[p] in row src[p], [k] rank of src[p] in column tgt[p]), 0-based;
      ties: the expected rank under a random order (float), or one drawn order with ``key``
      (int).
    """
    _check_pairs(scores, src, tgt)
    return _ranks(*_better_and_tied(scores, src, tgt), key)


def pair_values(scores: Array, src: Array, tgt: Array, ks=(1, 10, 30, 50),
                key: PRNGKey | None = None, per_direction: bool = False) -> dict:
    """Per-pair reciprocal rank and Hits@k of the pairs (src, tgt), each averaged over both
    directions: {"mrr": [k], "hits@K": [k]}. Their mean over a mask is ``pair_metrics``.
    ``per_direction``: also each direction alone ("mrr_st", "hits@K_st": tgt[p] in row
    src[p]; "mrr_ts", "hits@K_ts": src[p] in column tgt[p]).

    Ties: with g strictly better and t tied candidates the truth's 0-based rank is g + U,
    U uniform on {0, ..., t}; without ``key`` the values are the exact expectations
    E[1 / (g + U + 1)] = (H_{g+t+1} - H_g) / (t + 1) (H the harmonic numbers: the first 16
    terms summed, the rest by the asymptotic expansion of H, error below 1e-9) and
    P(g + U < K) = clip(K - g, 0, t + 1) / (t + 1); with ``key`` one order is drawn.
    """
    _check_pairs(scores, src, tgt)
    return _values(scores, src, tgt, ks, key, per_direction)


def _check_pairs(scores, src, tgt, name: str = "scores") -> None:
    validation.check_ndim(name, scores, 2)
    validation.check_finite(name, scores)
    k = np.shape(src)[-1]
    validation.check_shape("src", src, (k,))
    validation.check_shape("tgt", tgt, (k,))
    n1, n2 = np.shape(scores)
    validation.check_int_range("src", src, 0, n1)
    validation.check_int_range("tgt", tgt, 0, n2)


def _better_and_tied(scores, src, tgt):
    """([k] strictly better / tied others in the row, the same in the column) per pair."""
    true = scores[src, tgt]
    rows, cols = scores[src], scores[:, tgt]
    return (jnp.sum(rows > true[:, None], axis=1), jnp.sum(rows == true[:, None], axis=1) - 1,
            jnp.sum(cols > true[None, :], axis=0), jnp.sum(cols == true[None, :], axis=0) - 1)


def _draws(key, better, tied):
    """g + U with U uniform on {0, ..., t} (one draw per entry)."""
    u = jax.random.uniform(key, better.shape)
    return better + jnp.minimum(jnp.floor(u * (tied + 1.0)).astype(better.dtype), tied)


def _ranks(b_st, t_st, b_ts, t_ts, key):
    if key is None:
        return b_st + 0.5 * t_st, b_ts + 0.5 * t_ts
    k1, k2 = jax.random.split(as_key(key))
    return _draws(k1, b_st, t_st), _draws(k2, b_ts, t_ts)


_HEAD = 16  # harmonic terms summed exactly before the asymptotic tail


def _harmonic_rest(m):
    """H_m - log m - Euler's gamma for m >= 16 (asymptotic series; error < 1e-12)."""
    i = 1.0 / m
    i2 = i * i
    return 0.5 * i - i2 / 12.0 + i2 * i2 / 120.0 - i2 * i2 * i2 / 252.0


def _expected_rr(better, tied):
    """E[1 / (g + U + 1)], U uniform on {0, ..., t}: (H_{g+t+1} - H_g) / (t + 1)."""
    g, t = better.astype(jnp.float32), tied.astype(jnp.float32)
    u = jnp.arange(_HEAD, dtype=jnp.float32)
    head = jnp.sum(jnp.where(u <= t[..., None], 1.0 / (g[..., None] + u + 1.0), 0.0), -1)
    a, b = g + _HEAD, g + t + 1.0  # the rest: H_b - H_a when t >= _HEAD
    rest = jnp.log1p((b - a) / a) + _harmonic_rest(b) - _harmonic_rest(a)
    return (head + jnp.where(t >= _HEAD, rest, 0.0)) / (t + 1.0)


def _expected_hits(better, tied, k):
    """P(g + U < k), U uniform on {0, ..., t}."""
    g, t = better.astype(jnp.float32), tied.astype(jnp.float32)
    return jnp.clip(k - g, 0.0, t + 1.0) / (t + 1.0)


def _check_ks(ks) -> None:
    if not all(isinstance(k, int | np.integer) and not isinstance(k, bool) and k >= 1
               for k in ks):
        raise ValueError(f"`ks` must be positive integers (Hits@k for k >= 1), got {ks!r}.")


def _scorable(scores, src, tgt, distinct: bool):
    """[k] whether pair p can be ranked: src[p] / tgt[p] in range, row src[p] and column
    tgt[p] finite (and, ``distinct``, no tgt repeated). Concrete inputs were checked
    already; a traced one that fails makes the pair's values NaN (never a rank)."""
    n1, n2 = scores.shape
    finite = jnp.isfinite(scores)
    ok = (src >= 0) & (src < n1) & (tgt >= 0) & (tgt < n2)
    ok &= jnp.all(finite[jnp.clip(src, 0, n1 - 1)], 1)
    ok &= jnp.all(finite[:, jnp.clip(tgt, 0, n2 - 1)], 0)
    return ok & _distinct(tgt) if distinct else ok


def _values(scores, src, tgt, ks, key, per_direction=False, distinct=False) -> dict:
    _check_ks(ks)
    ok = _scorable(scores, src, tgt, distinct)
    b_st, t_st, b_ts, t_ts = _better_and_tied(scores, src, tgt)
    if key is None:
        one = {"mrr": (_expected_rr(b_st, t_st), _expected_rr(b_ts, t_ts))}
        for k in ks:
            one[f"hits@{k}"] = (_expected_hits(b_st, t_st, k), _expected_hits(b_ts, t_ts, k))
    else:
        r_st, r_ts = _ranks(b_st, t_st, b_ts, t_ts, key)
        one = {"mrr": (1.0 / (r_st + 1.0), 1.0 / (r_ts + 1.0))}
        for k in ks:
            one[f"hits@{k}"] = ((r_st < k).astype(jnp.float32),
                                (r_ts < k).astype(jnp.float32))
    out = {m: 0.5 * (st + ts) for m, (st, ts) in one.items()}
    if per_direction:
        for m, (st, ts) in one.items():
            out[f"{m}_st"], out[f"{m}_ts"] = st, ts
    return {m: jnp.where(ok, v, jnp.nan) for m, v in out.items()}


def masked_mean(values: dict, mask: Array) -> dict:
    """The mean of each [k] entry of ``values`` (``pair_values``) over the pairs where
    ``mask`` [k] is True; NaN where ``mask`` selects nothing (under ``jit``; concrete
    callers of the metrics get a ValueError instead).

    Raises:
      TypeError: ``mask`` not a bool array (or 0/1 integers: a float is no truth value).
      ValueError: ``mask`` not the shape of every entry of ``values``.
    """
    validation.check_bool("mask", mask)
    for name, v in values.items():
        if np.shape(v) != np.shape(mask):
            raise ValueError(f"`mask` must have the shape of each value, {np.shape(v)} "
                             f"(`values[{name!r}]`), got {np.shape(mask)}.")
    w = mask.astype(jnp.float32)
    total = w.sum()
    return {m: jnp.where(total > 0, jnp.sum(w * v) / jnp.maximum(total, 1.0), jnp.nan)
            for m, v in values.items()}


@checked.boundary
def pair_metrics(plan: Array, src: Array, tgt: Array, eval_mask: Array,
                 ks=(1, 10, 30, 50), key: PRNGKey | None = None) -> dict:
    """``alignment_metrics`` of a rectangular [n1, n2] ``plan`` on the pairs (src, tgt)
    where ``eval_mask`` [k] is True: MRR and Hits@k of the true partner in its row (among
    n2 targets) and in its column (among n1 sources), averaged over both directions; ties
    in random order (the expectation, or one order drawn from ``key``: ``pair_values``)."""
    validation.check_shape("eval_mask", eval_mask, (np.shape(src)[-1],))
    _check_nonempty_mask(eval_mask)
    _check_pairs(plan, src, tgt, name="plan")
    checked.guard("jaxlab.avatar.alignment.pair_metrics", _traced_pairs, plan, src, tgt)
    return masked_mean(_values(plan, src, tgt, ks, key), eval_mask)


def _traced_square(plan, truth) -> None:
    n = plan.shape[0]
    checked.check(jnp.all(jnp.isfinite(plan)), "`plan` must be finite.")
    checked.check(jnp.all((truth >= 0) & (truth < n)), f"`truth` must lie in [0, {n}).")
    checked.check(_distinct(truth), "`truth` must not name a target twice.")


def _traced_pairs(plan, src, tgt) -> None:
    n1, n2 = plan.shape
    checked.check(jnp.all(jnp.isfinite(plan)), "`plan` must be finite.")
    checked.check(jnp.all((src >= 0) & (src < n1)), f"`src` must lie in [0, {n1}).")
    checked.check(jnp.all((tgt >= 0) & (tgt < n2)), f"`tgt` must lie in [0, {n2}).")


def _distinct(x):
    """Whether the [k] entries of ``x`` are pairwise different (traced or concrete)."""
    return jnp.all(jnp.diff(jnp.sort(x)) != 0)


def top1_probability(scores: Array, src: Array, tgt: Array) -> Array:
    """[k] probability that row src[p] of ``scores`` ranks tgt[p] first when its ties are
    ordered uniformly at random: 1 / (t + 1) with no strictly better entry and t tied
    others, else 0 (an argmax would take the first of the tied entries)."""
    _check_pairs(scores, src, tgt)
    true = scores[src, tgt]
    rows = scores[src]
    better = jnp.sum(rows > true[:, None], axis=1)
    tied = jnp.sum(rows == true[:, None], axis=1) - 1
    return jnp.where(better == 0, 1.0 / (tied + 1.0), 0.0).astype(jnp.float32)


def _check_nonempty_mask(eval_mask) -> None:
    """ValueError if a concrete ``eval_mask`` selects nothing (the metrics would be 0/0)."""
    if isinstance(eval_mask, jax.core.Tracer):
        return
    if not np.any(np.asarray(eval_mask)):
        raise ValueError("`eval_mask` selects no node: the metrics of an empty set are "
                         "undefined.")


def _check_scores(name, scores, truth):
    validation.check_ndim(name, scores, 2)
    n = np.shape(scores)[0]
    validation.check_shape(name, scores, (n, n))
    validation.check_finite(name, scores)
    validation.check_shape("truth", truth, (n,))
    validation.check_int_range("truth", truth, 0, n)
    if not isinstance(truth, jax.core.Tracer):
        values, counts = np.unique(np.asarray(truth), return_counts=True)
        if np.any(counts > 1):
            raise ValueError(f"`truth` must name each target once (a one-to-one alignment), "
                             f"got target {values[counts > 1][0]} {counts.max()} times.")


def _check_plan(plan, min_columns: int = 1) -> None:
    """``plan`` [n, m] real with m >= ``min_columns``; finite and non-negative when
    concrete (a traced plan: its dtype and shape only)."""
    validation.check_real("plan", plan)
    validation.check_ndim("plan", plan, 2)
    if np.shape(plan)[1] < min_columns:
        raise ValueError(f"`plan` must have at least {min_columns} target columns, got shape "
                         f"{tuple(np.shape(plan))}.")
    validation.check_finite("plan", plan)
    validation.check_in_range("plan", plan, 0.0)


def row_normalise(plan: Array) -> Array:
    """[n, m] P = T / (T 1): each source row of the plan ``plan`` [n, m] (finite,
    non-negative) as a distribution over targets (an all-zero row stays 0).

    Raises:
      TypeError: ``plan`` not real. ValueError: ``plan`` not 2-D, not finite or negative.
    """
    _check_plan(plan)
    return _row_normalise(plan)


def _row_normalise(plan):
    return plan / jnp.maximum(plan.sum(1, keepdims=True), 1e-30)


def row_entropy(plan: Array) -> Array:
    """[n] entropy -sum_j P_ij log P_ij of each row of ``row_normalise(plan)``.

    Raises:
      as ``row_normalise``.
    """
    _check_plan(plan)
    p = _row_normalise(plan)
    return -jnp.sum(p * jnp.log(jnp.maximum(p, 1e-30)), 1)


def row_margin(plan: Array) -> Array:
    """[n] gap between the two largest entries of each row of ``row_normalise(plan)``.

    Raises:
      as ``row_normalise``; ValueError: fewer than two target columns.
    """
    _check_plan(plan, min_columns=2)
    p = _row_normalise(plan)
    top2 = jax.lax.top_k(p, 2)[0]
    return top2[:, 0] - top2[:, 1]
