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

Checks (shapes and dtypes also under ``jit``, values only on concrete arrays):
``anchor_cost``: ``mask`` [k]; ``ranks_of_truth`` / ``alignment_metrics``: ``plan`` /
``scores`` [n, n] and finite, ``truth`` [n] integers in [0, n), ``eval_mask`` [n];
``ranks_of_pairs`` / ``pair_metrics``: ``scores`` 2-D [n1, n2] and finite, ``src`` /
``tgt`` [k] integers in [0, n1) / [0, n2), ``eval_mask`` [k].
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import tasks
from jaxlab.core import validation
from jaxlab.core.types import Array

__all__ = ["cosine_similarity", "anchor_cost", "ranks_of_truth", "alignment_metrics",
    "ranks_of_pairs", "pair_metrics", "row_normalise", "row_entropy", "row_margin"]


def cosine_similarity(x: Array, y: Array) -> Array:
    """[n, m] cosine similarity of the rows of ``x`` [n, d] and ``y`` [m, d] (rows of norm
    below 1e-12 are divided by 1e-12, so a zero row has similarity 0 to everything).

    Raises:
      ValueError: ``x`` or ``y`` not 2-D, or their row lengths differ.
    """
    validation.check_ndim("x", x, 2)
    validation.check_ndim("y", y, 2)
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


def ranks_of_truth(scores: Array, truth: Array) -> tuple[Array, Array]:
    """0-based rank of the true match per source row and per target column of ``scores``.

    Returns:
      (source->target ranks [n], target->source ranks [n], aligned with source node i).
    """
    _check_scores("scores", scores, truth)
    n = scores.shape[0]
    rows = jnp.arange(n)
    true_row = scores[rows, truth]
    r_st = jnp.sum(scores > true_row[:, None], axis=1)
    r_ts = jnp.sum(scores[:, truth] > true_row[None, :], axis=0)
    return r_st, r_ts


def alignment_metrics(plan: Array, truth: Array, eval_mask: Array, ks=(1, 10, 30, 50)) -> dict:
    """Hits@k and MRR averaged over both directions on nodes where ``eval_mask`` is True."""
    _check_scores("plan", plan, truth)
    validation.check_shape("eval_mask", eval_mask, (np.shape(plan)[0],))
    _check_nonempty_mask(eval_mask)
    return _pair_average(*ranks_of_truth(plan, truth), eval_mask, ks)


def ranks_of_pairs(scores: Array, src: Array, tgt: Array) -> tuple[Array, Array]:
    """``ranks_of_truth`` for a rectangular [n1, n2] ``scores`` and k pairs (src, tgt).

    Returns:
      ([k] rank of tgt[p] in row src[p], [k] rank of src[p] in column tgt[p]), 0-based.
    """
    validation.check_ndim("scores", scores, 2)
    validation.check_finite("scores", scores)
    k = np.shape(src)[-1]
    validation.check_shape("src", src, (k,))
    validation.check_shape("tgt", tgt, (k,))
    n1, n2 = np.shape(scores)
    validation.check_int_range("src", src, 0, n1)
    validation.check_int_range("tgt", tgt, 0, n2)
    true = scores[src, tgt]
    r_st = jnp.sum(scores[src] > true[:, None], axis=1)
    r_ts = jnp.sum(scores[:, tgt] > true[None, :], axis=0)
    return r_st, r_ts


def _pair_average(r_st, r_ts, eval_mask, ks) -> dict:
    if not all(isinstance(k, int | np.integer) and not isinstance(k, bool) and k >= 1
               for k in ks):
        raise ValueError(f"`ks` must be positive integers (Hits@k for k >= 1), got {ks!r}.")
    w = eval_mask.astype(jnp.float32)
    denom = jnp.maximum(w.sum(), 1.0)

    def avg(v):
        return 0.5 * (jnp.sum(w * v[0]) + jnp.sum(w * v[1])) / denom

    out = {"mrr": avg((1.0 / (r_st + 1.0), 1.0 / (r_ts + 1.0)))}
    for k in ks:
        out[f"hits@{k}"] = avg(((r_st < k).astype(jnp.float32), (r_ts < k).astype(jnp.float32)))
    return out


def pair_metrics(plan: Array, src: Array, tgt: Array, eval_mask: Array,
                 ks=(1, 10, 30, 50)) -> dict:
    """``alignment_metrics`` of a rectangular [n1, n2] ``plan`` on the pairs (src, tgt)
    where ``eval_mask`` [k] is True: MRR and Hits@k of the true partner in its row (among
    n2 targets) and in its column (among n1 sources), averaged over both directions."""
    validation.check_shape("eval_mask", eval_mask, (np.shape(src)[-1],))
    _check_nonempty_mask(eval_mask)
    return _pair_average(*ranks_of_pairs(plan, src, tgt), eval_mask, ks)


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


def row_normalise(plan: Array) -> Array:
    """P = T / (T 1): each source row as a distribution over targets."""
    return plan / jnp.maximum(plan.sum(1, keepdims=True), 1e-30)


def row_entropy(plan: Array) -> Array:
    p = row_normalise(plan)
    return -jnp.sum(p * jnp.log(jnp.maximum(p, 1e-30)), 1)


def row_margin(plan: Array) -> Array:
    p = row_normalise(plan)
    top2 = jax.lax.top_k(p, 2)[0]
    return top2[:, 0] - top2[:, 1]
