"""Query scores whose labels teach (ours): AvAtar's adjoint score, reweighted.

The released AvAtar score (``scores.official_score``: s_i = sum_j P_ij C_ij G_ij / a_i with
G = grad_C f through entropic OT, the sq_l2 utility f = sum T^2) carries a P^2-like factor,
so confident rows rank first: on whole ACM-DBLP 80% of its picks were already matched by
the plan (entropy's 30%), and its labels added less to never-queried pairs than random
ones. Nothing in that utility says a label on a row the plan already gets right teaches
nothing. The variants below stay in the paper's framework (one adjoint solve of the plan,
the same cost and formula) and change only the utility or the weighting of its score.

T: [n, m] plan, P = T / (T 1) its rows as distributions, u_i = 1 - max_j P_ij the plan's
own probability that row i's top match is wrong (its uncertainty).

Declared before any run, each with what it is expected to change:

* ``uncertain_utility_gradient`` (strategy ``avatar_uncertain``): the utility counts only
  what the plan is unsure of, f_u(T) = sum_i u_i^power sum_j T_ij^2 (u held constant), so
  grad_T f_u = 2 u_i^power T_ij replaces sq_l2's 2 T_ij in the adjoint solve. Expected: the
  impact of a label is measured on uncertain rows; the picks' P factor is untouched, so
  confident rows may still rank high (a partial fix).
* ``discounted`` (strategy ``avatar_discounted``): the released score shifted to be
  non-negative over the candidates (rank-preserving), times u_i^power: the expected impact
  of a label that is news (probability u_i) rather than of any label. Expected: the share
  of already-matched picks falls to entropy's or below, and among uncertain rows the
  adjoint impact orders the picks; ``power`` sets how hard confident rows are discounted
  (u is close to 1 for every row of a flat entropic plan, so power 1 barely acts).
* ``with_density`` (strategy ``avatar_density``): ``discounted`` plus ``weight`` times the
  density baseline's score (row entropy x representativeness of the RWR features), each
  L2-normalised over the candidates (AvAtar's ``combine`` rule). Expected: the density
  baseline's coverage of representative regions (it won on never-queried pairs wherever
  measured) with the adjoint impact breaking its ties.

* ``diverse_top_k`` (the ``Teaching.diversity`` field of any variant): one round's picks
  are taken greedily, each candidate's (max-scaled) score lowered by ``diversity`` times its
  largest cosine similarity to the round's earlier picks in the RWR position features.
  Expected: one round's labels do not cluster in one region of the graph (several labels
  there teach the never-queried pairs little more than one).

Which one, and its ``power`` / ``weight``, is chosen on validation graph pairs of synthetic
families only (``experiments/avatar_variants.py``), never on the benchmarks, then frozen
(``wholegraph.OURS``).

Checks: ``plan`` [n, m] real, non-negative and finite (concrete values); ``power`` >= 0
and ``weight`` >= 0 finite Python numbers; ``candidates`` [n] bool with one True at least.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import alignment
from jaxlab.core import validation
from jaxlab.core.types import Array

__all__ = ["uncertainty", "uncertain_utility_gradient", "shift_nonnegative", "discounted",
           "with_density", "diverse_top_k"]


def _check_power(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            np.isfinite(value) and value >= 0):
        raise ValueError(f"`{name}` must be a finite number >= 0, got {value!r}.")


def _check_candidates(candidates, n: int) -> None:
    validation.check_shape("candidates", candidates, (n,))
    validation.check_bool("candidates", candidates)
    if not isinstance(candidates, jax.core.Tracer) and not np.any(np.asarray(candidates)):
        raise ValueError("`candidates` must select at least one row.")


def uncertainty(plan: Array) -> Array:
    """[n] u_i = 1 - max_j P_ij, the plan's probability that row i's top match is wrong.

    Raises:
      TypeError / ValueError: ``plan`` not a real, finite, non-negative [n, m] array.
    """
    return 1.0 - jnp.max(alignment.row_normalise(plan), axis=1)


def uncertain_utility_gradient(plan: Array, power: float = 1.0) -> Array:
    """[n, m] grad_T f_u = 2 u_i^power T_ij of f_u(T) = sum_i u_i^power sum_j T_ij^2 (u held
    constant): the sq_l2 utility restricted to the rows the plan is unsure of."""
    _check_power("power", power)
    u = uncertainty(plan)
    return 2.0 * (u**power)[:, None] * plan


def shift_nonnegative(s: Array, candidates: Array) -> Array:
    """[n] s - min over the candidates (>= 0 on them; rank-preserving), 0 elsewhere."""
    validation.check_ndim("s", s, 1)
    _check_candidates(candidates, s.shape[0])
    low = jnp.min(jnp.where(candidates, s, jnp.inf))
    return jnp.where(candidates, s - low, 0.0)


def discounted(s: Array, plan: Array, candidates: Array, power: float = 1.0) -> Array:
    """[n] shift_nonnegative(s) * u^power: a score's expected impact of a label that is news.

    Args:
      s: [n] a query score (e.g. ``scores.official_score``), higher = query first.
      plan: [n, m] the plan the score was computed on.
      candidates: [n] bool, the rows that may be queried.
      power: the discount's strength (0: no discount).
    """
    _check_power("power", power)
    validation.check_shape("s", s, (plan.shape[0],))
    return shift_nonnegative(s, candidates) * uncertainty(plan) ** power


def with_density(s: Array, density: Array, candidates: Array, weight: float = 1.0) -> Array:
    """[n] s / ||s|| + weight * density / ||density|| over the candidates (0 elsewhere).

    Args:
      s: [n] a non-negative query score (e.g. ``discounted``).
      density: [n] the density baseline's score (``baselines.density_score``).
      candidates: [n] bool, the rows that may be queried.
      weight: the density term's weight.
    """
    _check_power("weight", weight)
    validation.check_ndim("s", s, 1)
    validation.check_shape("density", density, s.shape)
    _check_candidates(candidates, s.shape[0])

    def unit(x):
        x = jnp.where(candidates, x, 0.0)
        return x / jnp.maximum(jnp.linalg.norm(x), 1e-12)

    return jnp.where(candidates, unit(s) + weight * unit(density), 0.0)


def diverse_top_k(s: Array, features: Array, num: int, diversity: float) -> Array:
    """[num] indices picked greedily by s_i / max(s) - diversity * max_{p picked} cos(x_i, x_p).

    Args:
      s: [k] scores, -inf where a row may not be picked (at least ``num`` finite, the
        finite ones >= 0).
      features: [k, d] each row's features x_i (e.g. its RWR position features).
      num: picks (static).
      diversity: the similarity penalty (0: ``lax.top_k``'s picks, in order).
    """
    _check_power("diversity", diversity)
    validation.check_ndim("s", s, 1)
    validation.check_shape("features", features, (s.shape[0], None))
    validation.check_positive_int("num", num)
    if num > s.shape[0]:
        raise ValueError(f"`num` must be <= the {s.shape[0]} rows of `s`, got {num}.")
    x = features / jnp.maximum(jnp.linalg.norm(features, axis=1, keepdims=True), 1e-12)
    finite = jnp.isfinite(s)
    top = jnp.max(jnp.where(finite, s, -jnp.inf))
    base = jnp.where(finite, s / jnp.maximum(top, 1e-30), -jnp.inf)

    def pick(carry, _):
        sim, taken = carry
        eff = jnp.where(taken, -jnp.inf, base - diversity * sim)
        i = jnp.argmax(eff)
        sim = jnp.maximum(sim, x @ x[i])
        return (sim, taken.at[i].set(True)), i

    init = (jnp.zeros(s.shape[0], s.dtype), jnp.zeros(s.shape[0], bool))
    _, idx = jax.lax.scan(pick, init, None, length=num)
    return idx
