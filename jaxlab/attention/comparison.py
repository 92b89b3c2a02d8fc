"""SALE's accuracy comparison on your own q, k, v: ``compare = protocol.bind(SPEC)`` (the
protocol: ``jaxlab.core.protocol``; the problem, items, metrics, contenders and goals:
``SPEC.doc``, which is ``compare``'s docstring).

What is ours: this configuration of the protocol (the paper reports per-setting averages
without paired CIs or a validation split of heads).
"""

import math
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxlab.attention.accuracy import DEFAULT_SIZES, check_tau, slice_metrics
from jaxlab.core import protocol, validation
from jaxlab.core.protocol import Goal, Metric
from pallas_kernels.sale import reference as R

__all__ = ["AttentionProblem", "Settings", "CONTENDERS", "METRICS", "TAU_GRID", "SPEC",
           "compare", "default_goals", "item_slices"]

#: SALE's declared threshold grid (the accuracy script's taus).
TAU_GRID = (1e-3, 8e-3, 3e-2, 1e-1)
#: The built-in contenders and their fixed thresholds (SALE's is tuned over ``TAU_GRID``).
CONTENDERS = {"sale": None, "static": math.inf, "dense": 0.0}
#: The metrics every built-in returns from one run (``SPEC.doc``). A recall is a float32
#: sum of softmax probabilities: its bound allows their rounding above 1.
METRICS = (Metric("error", higher_is_better=False, bounds=(0.0, math.inf)),
           Metric("recall", higher_is_better=True, bounds=(0.0, 1.0 + 1e-5)),
           Metric("density", higher_is_better=False, bounds=(0.0, 1.0), censor_at=1.0))


class AttentionProblem(NamedTuple):
    """Your attention inputs.

    Attributes:
      q: [B, Hq, N, D] queries.
      k, v: [B, Hk, N, D] keys and values (Hq a multiple of Hk: GQA).
      causal: causal attention.
      sizes: ``pallas_kernels.sale.reference.BlockSizes`` (block_q, block_k, local).
      bits: SALE's estimation bits (8 or 4).
    """

    q: Any
    k: Any
    v: Any
    causal: bool = False
    sizes: R.BlockSizes = DEFAULT_SIZES
    bits: int = 8


class Settings(NamedTuple):
    """The comparison's settings.

    Attributes:
      tolerance: the relative output error above which a slice's density is censored (it
        counts as dense: the setting would have to fall back to dense attention).
    """

    tolerance: float = 0.05


def item_slices(problem: AttentionProblem, items: protocol.Items):
    """(q [1, n, N, D], k [1, n, N, D], v [1, n, N, D]) of ``items``: slice ``b Hq + h``
    at ``items.positions`` (tuning slices first, then the test slices), each with its own
    key and value head ``h // (Hq / Hk)``.

    Raises:
      TypeError: ``problem`` is not an ``AttentionProblem``, ``items`` not a
        ``protocol.Items``.
      ValueError: an item past the problem's B Hq (batch, head) slices.
    """
    if not isinstance(problem, AttentionProblem):
        raise TypeError(f"`problem` must be a jaxlab.attention.AttentionProblem, got "
                        f"{type(problem).__name__}.")
    if not isinstance(items, protocol.Items):
        raise TypeError(f"`items` must be a protocol.Items, got {type(items).__name__}.")
    flat = np.asarray(items.positions, np.int64)
    q, k, v = (jnp.asarray(x) for x in problem[:3])
    hq, group = q.shape[1], q.shape[1] // k.shape[1]
    slices = q.shape[0] * hq
    if flat.size and (flat.min() < 0 or flat.max() >= slices):
        raise ValueError(f"`items` of split {items.split!r} must pick slices in [0, {slices}) "
                         f"(B Hq (batch, head) slices, the test split after "
                         f"{items.tuning_items} tuning ones), got slices {flat.min()} .. "
                         f"{flat.max()}.")
    b, h = flat // hq, flat % hq
    return q[b, h][None], k[b, h // group][None], v[b, h // group][None]


def default_goals(metric: str = "density") -> tuple[Goal, ...]:
    """The declared claims for ``metric``: density: ``sale`` keeps fewer blocks than
    ``dense``; error and recall: ``sale`` is more accurate than ``static``."""
    validation.check_one_of("metric", metric, tuple(m.name for m in METRICS))
    return (Goal("sale", "dense"),) if metric == "density" else (Goal("sale", "static"),)


# --- the built-in contenders -----------------------------------------------------------------

class _Problem(AttentionProblem):
    """The checked problem of one ``compare`` call, with the dense output of each chunk of
    items (``dense``), computed once and shared by the built-in contenders."""


def _dense(problem: _Problem, items: protocol.Items):
    key = (items.split, tuple(items.index.tolist()))
    if key not in problem.dense:
        q, k, v = item_slices(problem, items)
        problem.dense[key] = (q, k, v, R.dense_attention(q, k, v, problem.causal))
    return problem.dense[key]


def _builtin(name: str, ctx: protocol.Context) -> protocol.Contender:
    """The call's metrics (of ``METRICS``) per item, from one run of SALE at ``tau`` (the
    static pattern: inf, dense: 0); a density whose relative error exceeds the tolerance is
    censored (inf)."""
    foreign = [m.name for m in ctx.metrics if m not in METRICS]
    if foreign:
        raise ValueError(f"`metrics`: the built-in contender {name!r} reports "
                         f"{[m.name for m in METRICS]} only, not {foreign}.")
    metrics, tolerance = tuple(m.name for m in ctx.metrics), ctx.settings.tolerance

    def measure(items, problem, tau):
        try:
            check_tau(tau)
        except ValueError as e:
            raise ValueError(f"`contenders`: the built-in {name!r} cannot run tau={tau!r}: "
                             f"{e}") from None
        q, k, v, dense = _dense(problem, items)
        m = slice_metrics(q, k, v, tau, causal=problem.causal, sizes=problem.sizes,
                          bits=problem.bits, dense=dense)
        m["density"] = np.where(m["error"] > tolerance, np.inf, m["density"])
        return {n: m[n] for n in metrics}

    if CONTENDERS[name] is None:
        def run_sale(items, problem, tau):
            return measure(items, problem, tau)
        return protocol.Contender(run_sale, tuple({"tau": t} for t in TAU_GRID))

    def run(items, problem):
        return measure(items, problem, CONTENDERS[name])
    return protocol.Contender(run)


# --- the spec --------------------------------------------------------------------------------

def _as_problem(problem, settings) -> _Problem:
    del settings
    if not isinstance(problem, AttentionProblem):
        raise TypeError(f"`problem` must be a jaxlab.attention.AttentionProblem, got "
                        f"{type(problem).__name__}.")
    for name in ("q", "k", "v"):
        validation.check_ndim(f"problem.{name}", getattr(problem, name), 4)
        validation.check_finite(f"problem.{name}", getattr(problem, name))
    q, k, v = (np.shape(x) for x in problem[:3])
    if k != v or k[0] != q[0] or k[2:] != q[2:] or q[1] % k[1]:
        raise ValueError(f"`problem`'s k and v must be [B, Hk, N, D] with q [B, Hq, N, D] and "
                         f"Hq a multiple of Hk, got q {q}, k {k}, v {v}.")
    if not isinstance(problem.sizes, R.BlockSizes):
        raise TypeError("`problem.sizes` must be a pallas_kernels.sale.reference.BlockSizes.")
    validation.check_one_of("problem.bits", problem.bits, (8, 4))
    checked = _Problem(*problem)
    checked.dense = {}
    return checked


def _check_settings(settings: Settings) -> None:
    validation.check_in_range("settings.tolerance", settings.tolerance, 0.0, np.inf,
                              low_inclusive=False, high_inclusive=False)


def _check_items(problem: AttentionProblem, settings, tuning: int, seeds: int) -> None:
    del settings
    b, hq = np.shape(problem.q)[:2]
    if tuning + seeds > b * hq:
        raise ValueError(f"`tuning`={tuning} + `seeds`={seeds} slices exceed the problem's "
                         f"B Hq = {b * hq} (batch, head) slices.")


SPEC = protocol.Spec(
    name="attention",
    contenders={name: (lambda ctx, n=name: _builtin(n, ctx)) for name in CONTENDERS},
    defaults=tuple(CONTENDERS),
    metrics=METRICS,
    default_metrics=("density",),
    goals=lambda names, metrics: tuple(g._replace(metric=m) for m in metrics
                                       for g in default_goals(m)),
    problem=_as_problem,
    settings=Settings,
    check_settings=_check_settings,
    check_items=_check_items,
    tuning=4,
    seeds=8,
    summary="SALE against dense attention and the static block-sparse pattern on your q, k, "
            "v: tau tuned on tuning slices, paired CIs on test slices.",
    doc="""* **Problem.** ``AttentionProblem(q, k, v, causal, sizes, bits)``: q [B, Hq, N, D], k
  and v [B, Hk, N, D] (``pallas_kernels.sale.reference``'s layout, Hq a multiple of Hk),
  the tiles and SALE's estimation bits.
* **Items.** One (batch, query head) slice each, ``i = b Hq + h`` (its key and value
  head ``h // (Hq / Hk)``; ``comparison.item_slices``): the tuning split takes slices
  ``0 .. tuning - 1``, the test split the next ``seeds``. The values are deterministic
  (the item keys are unused).
* **Metrics**, all from one run of the pure-jnp reference against the slice's dense
  attention: ``"density"`` (default), the share of valid blocks kept (lower is better),
  censored at 1.0 (counts as dense) where the relative error exceeds
  ``settings.tolerance``; ``"error"``, mean |O - O_dense| / mean |O_dense| (lower);
  ``"recall"``, the mean over query rows of the exact attention mass inside the kept
  blocks (higher). ``metrics=("error", "recall", "density")`` reports all three, tuned on
  the first.
* **Contenders**: ``"sale"`` (SALE's keep test at tau, tuned over ``TAU_GRID`` = (1e-3,
  8e-3, 3e-2, 0.1), the accuracy script's taus; another grid: ``protocol.Builtin("sale",
  grid=({"tau": 1e-3}, ...))``), ``"static"`` (only SALE's always-kept sink, local and
  diagonal blocks) and ``"dense"`` (tau = 0: every block).
* **Settings** (``attention.comparison.Settings``): ``tolerance`` (0.05).
* **Goals**: SALE keeps fewer blocks than dense within the tolerance (the density claim);
  for error or recall pass ``goals=comparison.default_goals("error")`` (SALE more
  accurate than the static pattern).""")

compare = protocol.bind(SPEC)
