"""Anchor-aware costs and alignment metrics (jittable, static shapes).

Anchors are a boolean mask over source nodes: anchor k is matched to truth[k]. The cost is

    C = w_feat  ||feat1_i - feat2_j||^2 / mean  +  w_anchor ||pos1_i,A - pos2_j,truth(A)||^2 / mean

with A the anchor set (non-anchor columns are masked out), and anchored rows / columns
pinned: C[k, truth[k]] = 0 and the rest of row k and column truth[k] at the maximum.

Checks (shapes and dtypes also under ``jit``, values only on concrete arrays):
``anchor_cost``: ``mask`` [n]; ``ranks_of_truth`` / ``alignment_metrics``: ``plan`` /
``scores`` [n, n] and finite, ``truth`` [n] integers in [0, n), ``eval_mask`` [n].
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array


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
    """[n, n] cost given the anchor ``mask`` [n] (bool) over source nodes."""
    validation.check_shape("mask", mask, (np.shape(task.truth)[-1],))
    truth = jnp.asarray(task.truth)
    m = mask.astype(jnp.float32)
    f1 = jnp.asarray(task.pos1, jnp.float32) * m[None, :]
    f2 = jnp.asarray(task.pos2, jnp.float32)[:, truth] * m[None, :]
    c_anchor = _normalise(_sqdist(f1, f2))
    feat1, feat2 = jnp.asarray(task.feat1, jnp.float32), jnp.asarray(task.feat2, jnp.float32)
    c_feat = _normalise(_sqdist(feat1, feat2)) if feat1.shape[1] > 1 else jnp.zeros_like(c_anchor)
    c = feat_weight * c_feat + jnp.where(m.sum() > 0, anchor_weight, 0.0) * c_anchor
    top = jnp.max(c)
    n = c.shape[0]
    row_pin = mask[:, None]
    col_pin = jnp.zeros(n, bool).at[truth].set(mask)[None, :]
    is_match = jnp.zeros((n, n), bool).at[jnp.arange(n), truth].set(True)
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
    r_st, r_ts = ranks_of_truth(plan, truth)
    w = eval_mask.astype(jnp.float32)
    denom = jnp.maximum(w.sum(), 1.0)

    def avg(v):
        return 0.5 * (jnp.sum(w * v[0]) + jnp.sum(w * v[1])) / denom

    out = {"mrr": avg((1.0 / (r_st + 1.0), 1.0 / (r_ts + 1.0)))}
    for k in ks:
        out[f"hits@{k}"] = avg(((r_st < k).astype(jnp.float32), (r_ts < k).astype(jnp.float32)))
    return out


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
