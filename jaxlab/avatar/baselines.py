"""Query baselines beyond random / entropy / margin / degree: density and matching samples.

AvAtar's paper compares against density-based and matching-based (TopMatchings / Gibbs)
selection; its public code lists ``density`` as a mode name but ships no implementation of
either (yq-leo/AvAtar-ICML26, ``source/active_itr.py`` argument choices only), so both are
ours, written from the methods they name:

  density      s_i = H(P_i) * mean_k cos(x_i, x_k)            information density
               (Settles & Craven 2008, beta = 1): the row entropy of the plan times the
               node's mean cosine similarity to every source node, x_i = the node's
               positional row ``task.pos1[i]`` (RWR scores for graphs).
  topmatchings s_i = 1 - max_j (1/K) #{k : M_k(i) = j}         matching disagreement
               over K matchings M_k = argmax_sigma sum_i (log P_i,sigma(i) + g_i,sigma(i)),
               g iid Gumbel (perturb-and-MAP samples of the Gibbs distribution over
               matchings, Papandreou & Yuille 2011), each an exact assignment
               (``max_weight_assignment``: scipy's shortest-augmenting-path algorithm in
               JAX, so the compiled loop has no host callback).
               This stands in for Malmi, Gionis & Terzi (CIKM 2017)'s TopMatchings (the K
               best matchings) and Gibbs-sampling uncertainty: same quantity (how often a
               node's partner changes across plausible one-to-one matchings), different
               sampler.

Rectangular plans (ours; a ``tasks.GraphTask``'s [n1, n2]): both scores are per source row;
a sampled matching leaves n1 - n2 rows unmatched when n1 > n2 (they count as no vote).

``max_weight_assignment`` is ``scipy.optimize.linear_sum_assignment(w, maximize=True)``
(Crouse 2016's shortest augmenting paths, row by row, the same tie rule) in float32 inside
the program: a matching whose total weight ties another's to float32 rounding may come out
as the other (measured: none of 768 perturbed 150 x 150 entropic plans, against scipy's
float64); scipy's own solve is kept as the tests' reference.

Checks (eager; value checks skipped on traced arrays): ``plan`` 2-D [n, m], finite and
non-negative; ``x`` 2-D [n, d] and finite; ``num_samples`` a positive int (ValueError
naming the argument).
"""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

from jaxlab.avatar import alignment
from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey

__all__ = ["representativeness", "density_score", "max_weight_assignment", "sample_matchings",
           "topmatchings_score"]


def _check_plan(plan) -> int:
    """Checks ``plan`` is [n, m], finite and non-negative; returns n."""
    validation.check_ndim("plan", plan, 2)
    n = np.shape(plan)[0]
    validation.check_finite("plan", plan)
    validation.check_in_range("plan", plan, 0.0)
    return n


def _check_x(x, n=None) -> None:
    validation.check_ndim("x", x, 2)
    validation.check_shape("x", x, (n, None))
    validation.check_finite("x", x)


def representativeness(x: Array) -> Array:
    """[n] mean_k cos(x_i, x_k) over all n rows of ``x`` [n, d] (2-D, finite)."""
    _check_x(x)
    return jnp.mean(alignment.cosine_similarity(x, x), axis=1)


def density_score(plan: Array, x: Array) -> Array:
    """[n] information density: row entropy of ``plan`` [n, m] times ``representativeness(x)``.

    Raises:
      ValueError: ``plan`` not 2-D, not finite or negative; ``x`` not [n, d] or not finite.
    """
    _check_x(x, _check_plan(plan))
    return alignment.row_entropy(plan) * representativeness(jnp.asarray(x, plan.dtype))


def _assign(w: np.ndarray) -> np.ndarray:
    """[..., n] maximum-weight assignments of [..., n, m] weights (host, scipy; the tests'
    reference of ``max_weight_assignment``); with n > m the n - m unassigned rows get the
    out-of-range column m."""
    w = np.asarray(w, np.float64)
    flat = w.reshape(-1, *w.shape[-2:])
    out = np.full(flat.shape[:2], w.shape[-1], np.int32)
    for b, m in enumerate(flat):
        rows, cols = scipy.optimize.linear_sum_assignment(m, maximize=True)
        out[b, rows] = cols
    return out.reshape(w.shape[:-1])


def _min_cost_rows(cost: Array) -> Array:
    """[n] column of each row of the minimum-cost assignment of ``cost`` [n, m], n <= m:
    scipy's ``linear_sum_assignment`` (Crouse 2016), one shortest augmenting path per row
    (Dijkstra on reduced costs, a free column preferred on a tie), then the dual update."""
    n, m = cost.shape
    inf = jnp.array(jnp.inf, cost.dtype)

    def add_row(row, carry):
        u, v, col4row, row4col = carry

        def visit(st):  # settle the cheapest unsettled column reached from row i
            i, min_val, dist, path, seen_rows, seen_cols, _ = st
            seen_rows = seen_rows.at[i].set(True)
            r = min_val + cost[i] - u[i] - v
            closer = ~seen_cols & (r < dist)
            path = jnp.where(closer, i, path)
            dist = jnp.where(closer, r, dist)
            reach = jnp.where(seen_cols, inf, dist)
            low = jnp.min(reach)
            tied = reach == low
            free_tied = tied & (row4col < 0)
            j = jnp.where(jnp.any(free_tied), jnp.argmax(free_tied), jnp.argmax(tied))
            seen_cols = seen_cols.at[j].set(True)
            free = row4col[j] < 0
            return (jnp.where(free, i, row4col[j]), low, dist, path, seen_rows, seen_cols,
                    jnp.where(free, j, -1))

        start = (row, jnp.zeros((), cost.dtype), jnp.full((m,), inf),
                 jnp.full((m,), -1, jnp.int32), jnp.zeros((n,), bool), jnp.zeros((m,), bool),
                 jnp.int32(-1))
        _, min_val, dist, path, seen_rows, seen_cols, sink = jax.lax.while_loop(
            lambda st: st[-1] < 0, visit, start)
        u = u.at[row].add(min_val)
        moved = seen_rows & (jnp.arange(n) != row)
        u = jnp.where(moved, u + min_val - dist[jnp.maximum(col4row, 0)], u)
        v = jnp.where(seen_cols, v - (min_val - dist), v)

        def flip(a):  # along the path back to ``row``
            j, col4row, row4col, _ = a
            i = path[j]
            return col4row[i], col4row.at[i].set(j), row4col.at[j].set(i), i != row

        _, col4row, row4col, _ = jax.lax.while_loop(lambda a: a[-1], flip,
                                                    (sink, col4row, row4col, True))
        return u, v, col4row, row4col

    start = (jnp.zeros((n,), cost.dtype), jnp.zeros((m,), cost.dtype),
             jnp.full((n,), -1, jnp.int32), jnp.full((m,), -1, jnp.int32))
    return jax.lax.fori_loop(0, n, add_row, start)[2]


def max_weight_assignment(w: Array) -> Array:
    """[..., n] column of each row of the maximum-weight one-to-one assignment of ``w``
    [..., n, m] (finite; jit / vmap friendly): ``scipy.optimize.linear_sum_assignment(w,
    maximize=True)`` in JAX (module docstring); with n > m the n - m unassigned rows get
    the out-of-range column m.

    Raises:
      ValueError: ``w`` not at least 2-D or (concrete) not finite.
    """
    if np.ndim(w) < 2:
        raise ValueError(f"`w` must be [..., n, m], got shape {tuple(np.shape(w))}.")
    validation.check_finite("w", w)
    w = jnp.asarray(w)
    w = w if jnp.issubdtype(w.dtype, jnp.floating) else w.astype(jnp.float32)
    n, m = w.shape[-2:]

    def one(wi):
        if n <= m:
            return _min_cost_rows(-wi)
        rows = _min_cost_rows(-wi.T)  # [m] the row of each column
        return jnp.full((n,), m, jnp.int32).at[rows].set(jnp.arange(m, dtype=jnp.int32))

    flat = w.reshape(-1, n, m)
    return jax.vmap(one)(flat).reshape(w.shape[:-1])


def sample_matchings(key: PRNGKey, plan: Array, num_samples: int = 16) -> Array:
    """[num_samples, n] one-to-one matchings (perturb-and-MAP on log P, see module).

    Args:
      key: PRNG key of the Gumbel perturbations.
      plan: [n, m] non-negative finite plan (rectangular: a ``tasks.GraphTask``'s; with
        n > m, rows left unmatched in a sample get the column index m).
      num_samples: K >= 1 (static).

    Raises:
      ValueError: ``plan`` not 2-D, not finite or negative; ``num_samples`` not a
        positive int.
    """
    _check_plan(plan)
    validation.check_positive_int("num_samples", num_samples)
    logp = jnp.log(jnp.maximum(alignment.row_normalise(plan), 1e-30))
    w = logp[None] + jax.random.gumbel(key, (num_samples, *logp.shape), logp.dtype)
    return max_weight_assignment(w)


def topmatchings_score(key: PRNGKey, plan: Array, num_samples: int = 16) -> Array:
    """[n] 1 - (share of the K sampled matchings giving node i its most frequent partner)."""
    m = sample_matchings(key, plan, num_samples)
    n, cols = plan.shape
    # an unmatched row's index ``cols`` is out of range: dropped (counts nothing)
    counts = jnp.zeros((n, cols), jnp.float32).at[jnp.arange(n)[None, :], m].add(
        1.0, mode="drop")
    return 1.0 - jnp.max(counts, axis=1) / num_samples
