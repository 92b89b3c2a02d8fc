"""Node informativeness scores from the adjoint cost gradient G = grad_C f (``adjoint``).

T: [n, n] plan, a = T 1, P = T / a (row-normalised), C: [n, n] cost, G: [n, n]. The scores::

    abs        s_i = sum_j P_ij |C_ij G_ij|                    (jaxlab's earlier reading)
    official   s_i = sum_j P_ij C_ij G_ij / a_i                (AvAtar's public code, signed;
               = (1/eps) sum_j P_ij^2 (ya_i + yb_j - grad_T f_ij) C_ij, its sparse path)
    gain       s_i = sigma sum_j P_ij <G, dC^(i->j)>           (ours)

``official`` follows yq-leo/AvAtar-ICML26 ``source/utils/active_utils.py``
(``get_adjoint_grad_scores_sparse``, used by ``query_anchors``): each utility's score is
L2-normalised over the nodes, then a weighted sum over utilities (``combine``). Both the
``abs`` and ``official`` scores carry a P^2-like factor, so confident rows (often already
correct) rank high — a measured defect.

``gain`` (ours) is a first-order estimate of the utility change caused by supervising
node i, in expectation over its plausible partners j ~ P_i. Labelling i <-> j changes the
anchor-aware cost of ``alignment.anchor_cost`` in two ways:

  * pinning: row i and column j go to the cost's maximum ``top`` except C_ij -> 0, so
    <G, dC_pin> = R_i + Q_j - G_ij (2 top - C_ij), R_i = sum_l G_il (top - C_il),
    Q_j = sum_k G_kj (top - C_kj);
  * position: anchor i <-> j adds the coordinate pair (p, q) = (pos1[:, i], pos2[:, j]) to
    the anchor distance S_kl = sum_anchors (pos1_ka - pos2_l,truth(a))^2, normalised by
    nu = mean(S); exactly, d(S / nu) = (D - (S / nu) mean(D)) / (nu + mean(D)) with
    D_kl = (p_k - q_l)^2, so (G masked to 0 on pinned rows / columns, w = anchor_weight)
    <G, dC_pos> = w [p^2 . G1 + q^2 . G^T 1 - 2 p^T G q - <G, S / nu> mean(D)] / (nu + mean(D)),
    for all (i, j) at once with two n x n matmuls (O(n^3) time, O(n^2) memory).

The score is first order in dC (the plan's response is linearised through G).
sigma = +1 for the concentration utilities (entropy: f = sum T log T, sq_l2, kl) whose
increase is wanted, -1 for ``consistency`` (a smoothness penalty). The change of ``top``
and of the feature term are ignored (first order). Measured (dev task: 200-node synthetic,
task seed 100, not a reported seed): ``gain`` still ranks confident, already-correct nodes
first (hubs have large position vectors, so |dC| is large) — 62% of round-0 picks correct
against 12% of the pool (official 44%, row entropy 0%). Variants tried there and dropped:
the spread std_{P_i}(dC) (same), (1 - max_j P_ij) x gain (25-40%), std / |mean| (~ pool).

Checks (eager): ``plan``, ``cost``, ``grad_cost`` [n, m] (square for ``gain``; ``abs`` and
``official`` also take the rectangular plans of a ``tasks.GraphTask``) and finite;
``score`` a known name; ``gain_matrix`` / ``gain_score``: ``pos1`` / ``pos2`` [n, n],
``anchors`` [n] bool, ``truth`` [n] integers in [0, n); ``l2_normalise``: ``s`` real and
finite; ``combine``: ``scores`` / ``weights`` equal non-zero lengths and finite weights.
Value checks skip traced arrays.
"""

import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import alignment
from jaxlab.core import validation
from jaxlab.core.types import Array

__all__ = ["SCORES", "abs_score", "official_score", "gain_matrix", "gain_score", "l2_normalise",
    "combine"]

SCORES = ("abs", "official", "gain")
GAIN_SIGN = {"entropy": 1.0, "sq_l2": 1.0, "kl": 1.0, "consistency": -1.0}


def _check(plan, cost, grad_cost, square=True):
    validation.check_ndim("plan", plan, 2)
    n, m = np.shape(plan)
    if square:
        validation.check_shape("plan", plan, (n, n))
    validation.check_shape("cost", cost, (n, m))
    validation.check_shape("grad_cost", grad_cost, (n, m))
    for name, x in (("plan", plan), ("cost", cost), ("grad_cost", grad_cost)):
        validation.check_finite(name, x)


def abs_score(plan: Array, cost: Array, grad_cost: Array) -> Array:
    """[n] s_i = sum_j P_ij |C_ij G_ij| (``plan`` [n, m] may be rectangular)."""
    _check(plan, cost, grad_cost, square=False)
    return jnp.sum(alignment.row_normalise(plan) * jnp.abs(cost * grad_cost), axis=1)


def official_score(plan: Array, cost: Array, grad_cost: Array) -> Array:
    """[n] s_i = sum_j P_ij C_ij G_ij / a_i (signed; ``plan`` [n, m] may be rectangular)."""
    _check(plan, cost, grad_cost, square=False)
    a = jnp.maximum(plan.sum(1), 1e-30)
    return jnp.sum(alignment.row_normalise(plan) * cost * grad_cost, axis=1) / a


def _sqdist(x, y):
    return jnp.maximum(jnp.sum(x**2, 1)[:, None] + jnp.sum(y**2, 1)[None, :] - 2 * x @ y.T, 0.0)


def gain_matrix(plan: Array, cost: Array, grad_cost: Array, pos1: Array, pos2: Array,
                anchors: Array, truth: Array, anchor_weight=1.0,
                pinning: bool = True) -> Array:
    """[n, n] <G, dC^(i->j)>: first-order utility change of labelling i <-> j (see module).

    Args:
      plan, cost, grad_cost: [n, n] plan T, its cost C and G = grad_C f.
      pos1, pos2: [n, n] positional matrices of the task (column a: w.r.t. node a).
      anchors: [n] bool, current anchors (source nodes); truth: [n] int, their matches
        (only the anchored entries are read).
      anchor_weight: w, the weight of the anchor term in the cost.
      pinning: include the pinning part (False: the position part only).

    Raises:
      ValueError: ``plan`` / ``cost`` / ``grad_cost`` not [n, n] or not finite, ``pos1`` /
        ``pos2`` not [n, n] or not finite, ``anchors`` / ``truth`` not [n], ``truth``
        outside [0, n).
      TypeError: ``anchors`` not bool, ``truth`` not integers.
    """
    _check(plan, cost, grad_cost)
    n = plan.shape[0]
    validation.check_shape("pos1", pos1, (n, n))
    validation.check_shape("pos2", pos2, (n, n))
    validation.check_finite("pos1", pos1)
    validation.check_finite("pos2", pos2)
    validation.check_shape("anchors", anchors, (n,))
    validation.check_bool("anchors", anchors)
    validation.check_shape("truth", truth, (n,))
    validation.check_int_range("truth", truth, 0, n)
    g = grad_cost
    m = anchors.astype(plan.dtype)
    row_pin = anchors[:, None]
    col_pin = jnp.zeros(n, bool).at[truth].set(anchors)[None, :]
    gm = jnp.where(row_pin | col_pin, 0.0, g)
    p1 = jnp.asarray(pos1, plan.dtype)
    p2 = jnp.asarray(pos2, plan.dtype)
    s = _sqdist(p1 * m[None, :], p2[:, truth] * m[None, :])
    nu = jnp.maximum(jnp.mean(s), 1e-12)
    lin = (p1**2).T @ gm.sum(1)  # [n] over the new anchor i
    col = (p2**2).T @ gm.sum(0)  # [n] over its partner j
    cross = p1.T @ gm @ p2  # [n, n]
    mean_d = (jnp.mean(p1**2, 0)[:, None] + jnp.mean(p2**2, 0)[None, :]
              - 2.0 * jnp.mean(p1, 0)[:, None] * jnp.mean(p2, 0)[None, :])
    # exact re-normalisation: (S + D) / (nu + mean D) - S / nu
    d_pos = ((lin[:, None] + col[None, :] - 2.0 * cross - jnp.sum(gm * s) / nu * mean_d)
             / (nu + mean_d))
    d = jnp.where(m.sum() > 0, anchor_weight, 0.0) * d_pos
    if pinning:
        top = jnp.max(cost)
        slack = top - cost
        r = jnp.sum(g * slack, 1)
        q = jnp.sum(g * slack, 0)
        d = d + r[:, None] + q[None, :] - g * (2.0 * top - cost)
    return d


def gain_score(plan: Array, cost: Array, grad_cost: Array, pos1: Array, pos2: Array,
               anchors: Array, truth: Array, anchor_weight=1.0, sign=1.0) -> Array:
    """[n] s_i = sign * E_{j ~ P_i} <G, dC^(i->j)> (arguments as ``gain_matrix``)."""
    d = gain_matrix(plan, cost, grad_cost, pos1, pos2, anchors, truth, anchor_weight)
    return sign * jnp.sum(alignment.row_normalise(plan) * d, axis=1)


def l2_normalise(s: Array) -> Array:
    """s / ||s||_2 (torch.nn.functional.normalize: the norm floored at 1e-12).

    Raises:
      TypeError: ``s`` not real. ValueError: ``s`` (concrete) not finite.
    """
    validation.check_real("s", s)
    validation.check_finite("s", s)
    return s / jnp.maximum(jnp.linalg.norm(s), 1e-12)


def combine(scores, weights) -> Array:
    """[n] sum_u w_u s_u / ||s_u|| (AvAtar's multi-utility score)."""
    if len(scores) < 1 or len(scores) != len(weights):
        raise ValueError(f"`weights` must have one entry per score (got {len(weights)} for "
                         f"{len(scores)} scores, at least one).")
    for w in weights:
        validation.check_finite("weights", w)
    return sum(w * l2_normalise(s) for s, w in zip(scores, weights, strict=True))
