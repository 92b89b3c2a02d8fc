"""SALE's accuracy comparison on your own q, k, v: error and recall against dense attention.

``compare(key, problem, *, contenders, tuning, seeds, goals)`` is ``jaxlab.core.protocol``
configured for sparse attention:

* **Problem.** ``AttentionProblem(q, k, v)``: q [B, Hq, N, D], k and v [B, Hk, N, D]
  (``pallas_kernels.sale.reference``'s layout, Hq a multiple of Hk), with ``causal``,
  the tile ``sizes`` and the estimation ``bits``.
* **Items.** An item is one (batch, query head) slice, flattened ``i = b Hq + h`` (its
  key and value head ``h // (Hq / Hk)``). The tuning split takes slices ``0 ..
  tuning - 1``, the test split the next ``seeds`` slices: no slice is tuned on and
  tested. The values are deterministic (the item keys are unused).
* **Metrics** (``METRICS``), per slice, from the pure-jnp reference
  (``pallas_kernels.sale.reference``), against ``dense_attention`` of the slice:
  ``"error"``: mean |O - O_dense| / mean |O_dense| (lower is better); ``"recall"``: the
  mean over query rows of the exact attention mass inside the kept blocks (higher);
  ``"density"`` (default): the fraction of valid blocks kept (lower), where a slice whose
  relative error exceeds ``tolerance`` is censored and counts as dense (``censor_at``
  1.0): the cost of a setting that would have to fall back to dense attention.
* **Contenders** (``CONTENDERS``): ``"sale"`` (SALE's keep test at a threshold tau, the
  declared grid ``TAU_GRID``, the ``experiments/sale_accuracy.py`` taus, tuned on the
  tuning slices), ``"static"`` (the block-sparse baseline that keeps only SALE's
  always-kept sink, local and diagonal blocks) and ``"dense"`` (tau = 0: every block; the
  reference itself); or any ``protocol.Contender`` you write.
* **Goals** (``default_goals``): for density, SALE keeps fewer blocks than dense within
  the tolerance; for error and recall, SALE is more accurate than the static pattern.

What is ours: this configuration of the protocol (the paper reports per-setting averages
without paired CIs or a validation split of heads).
"""

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import protocol, validation
from jaxlab.core.keys import as_key
from jaxlab.core.protocol import Contender, Goal
from pallas_kernels.sale import reference as R

__all__ = ["AttentionProblem", "CONTENDERS", "DEFAULT_SIZES", "METRICS", "TAU_GRID", "compare",
           "default_contenders", "default_goals", "item_slices", "slice_metrics"]

#: SALE's declared threshold grid (the accuracy script's taus).
TAU_GRID = (1e-3, 8e-3, 3e-2, 1e-1)
#: The built-in contenders.
CONTENDERS = ("sale", "static", "dense")
#: SALE's default tiles (64 / 32 / 128).
DEFAULT_SIZES = R.BlockSizes()
#: metric -> higher is better.
METRICS = {"error": False, "recall": True, "density": False}


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


def item_slices(problem: AttentionProblem, split: str, index, tuning_items: int):
    """(q [1, n, N, D], k [1, n, N, D], v [1, n, N, D]) of items ``index`` of ``split``:
    the items on the head axis (module docstring), each with its own key and value head.

    Raises:
      TypeError: ``problem`` is not an ``AttentionProblem``; ``index`` not integers.
      ValueError: an unknown ``split``, ``tuning_items`` not an integer >= 0, or an item
        past the problem's B Hq (batch, head) slices.
    """
    if not isinstance(problem, AttentionProblem):
        raise TypeError(f"`problem` must be a jaxlab.attention.AttentionProblem, got "
                        f"{type(problem).__name__}.")
    validation.check_one_of("split", split, protocol.SPLITS)
    validation.check_min_count("tuning_items", tuning_items, 0, "slices before the test split")
    index = np.asarray(index)
    if index.dtype.kind not in "iu":
        raise TypeError(f"`index` must hold integer item indices, got dtype {index.dtype}.")
    flat = index.astype(np.int64) + (0 if split == "tuning" else tuning_items)
    q, k, v = (jnp.asarray(x) for x in problem[:3])
    hq, group = q.shape[1], q.shape[1] // k.shape[1]
    slices = q.shape[0] * hq
    if flat.size and (flat.min() < 0 or flat.max() >= slices):
        raise ValueError(f"`index` of split {split!r} must pick slices in [0, {slices}) (B Hq "
                         f"(batch, head) slices, the test split after {tuning_items} tuning "
                         f"ones), got slices {flat.min()} .. {flat.max()}.")
    b, h = flat // hq, flat % hq
    return q[b, h][None], k[b, h // group][None], v[b, h // group][None]


def slice_metrics(q, k, v, tau, *, causal: bool = False, sizes=DEFAULT_SIZES, bits=8,
                  dense=None) -> dict:
    """Per slice (head of ``q`` [1, n, N, D]) SALE's accuracy at ``tau`` (scalar or [n];
    ``inf`` keeps only the always-kept blocks).

    Returns:
      {"error": [n] mean |O - O_dense| / mean |O_dense|, "recall": [n] mean row recall,
      "density": [n] kept fraction of the valid blocks} as float64 NumPy.

    Raises:
      ValueError: ``tau`` NaN, negative, or mixing ``inf`` with finite thresholds;
        ``dense`` not of q's shape; and the reference's checks of q, k, v, ``sizes`` and
        ``bits``.
    """
    t = np.asarray(tau, np.float64)
    if np.isnan(t).any() or (t < 0).any() or (np.isinf(t).any() and not np.isinf(t).all()):
        raise ValueError(f"`tau` must be thresholds >= 0, or inf everywhere (only the "
                         f"always-kept blocks), got {t}.")
    if dense is None:
        dense = R.dense_attention(q, k, v, causal)
    else:
        validation.check_shape("dense", dense, np.shape(q))
    tau = jnp.asarray(tau, jnp.float32)
    if np.isinf(t).any():  # the static pattern: always-kept blocks only
        always = R.always_kept_blocks(q.shape[2], sizes, causal)
        keep = jnp.broadcast_to(always[None, None], (1, q.shape[1]) + always.shape)
        out = _masked_attention(q, k, v, keep, sizes, causal)
    else:
        out, keep = R.sale_attention(q, k, v, tau, sizes, bits, causal)
    err = jnp.abs(out.astype(jnp.float32) - dense).mean((2, 3)) / jnp.abs(dense).mean((2, 3))
    return {"error": np.asarray(err[0], np.float64),
            "recall": np.asarray(R.attention_recall(q, k, keep, sizes, causal)[0], np.float64),
            "density": np.asarray(R.causal_density(keep, q.shape[2], sizes, causal)[0],
                                  np.float64)}


def _masked_attention(q, k, v, keep, sizes, causal):
    """Softmax attention over the blocks of ``keep`` [1, n, nq, nk] (exact scores)."""
    n = q.shape[2]
    s = jnp.einsum("bhnd,bhmd->bhnm", q, k).astype(jnp.float32) / jnp.sqrt(q.shape[-1])
    n_pad = R.padded_length(n, sizes)
    rows = jnp.arange(n_pad) // sizes.block_q
    cols = jnp.arange(n_pad) // sizes.block_k
    el = keep[:, :, rows][:, :, :, cols][:, :, :n, :n]
    if causal:
        el = el & jnp.tril(jnp.ones((n, n), bool))
    s = jnp.where(el, s, -jnp.inf)
    return jnp.einsum("bhnm,bhmd->bhnd", jax.nn.softmax(s, -1), v.astype(jnp.float32))


class _Dense:
    """The dense output of each chunk of items, computed once and shared."""

    def __init__(self, tuning_items: int):
        self.tuning_items, self._cache = tuning_items, {}

    def __call__(self, items, problem):
        key = (items.split, tuple(items.index.tolist()))
        if key not in self._cache:
            q, k, v = item_slices(problem, items.split, items.index, self.tuning_items)
            self._cache[key] = (q, k, v, R.dense_attention(q, k, v, problem.causal))
        return self._cache[key]


def _runner(cache: _Dense, metric: str, tolerance: float, fixed_tau=None):
    def run(items, problem, tau=None):
        t = fixed_tau if tau is None else tau
        q, k, v, dense = cache(items, problem)
        m = slice_metrics(q, k, v, t, causal=problem.causal, sizes=problem.sizes,
                          bits=problem.bits, dense=dense)
        if metric == "density":
            return np.where(m["error"] > tolerance, np.inf, m["density"])
        return m[metric]
    return run


def default_contenders(names: Sequence[str] = CONTENDERS, *, metric: str = "density",
                       tolerance: float = 0.05, tau_grid=TAU_GRID,
                       tuning_items: int = 0) -> dict[str, Contender]:
    """The built-in contenders ``names`` with their declared grids (SALE: ``tau_grid``);
    ``tuning_items``: where the test slices start.

    Raises:
      TypeError: ``names`` is one string.
      ValueError: an unknown name or ``metric``, ``tolerance`` not > 0, ``tau_grid`` not
        finite taus >= 0, ``tuning_items`` not an integer >= 0.
    """
    if isinstance(names, str):
        raise TypeError(f"`names` must be a sequence of contender names, got one string "
                        f"{names!r}: write ({names!r},).")
    for name in names:
        validation.check_one_of("names", name, CONTENDERS)
    validation.check_one_of("metric", metric, tuple(METRICS))
    validation.check_in_range("tolerance", tolerance, 0.0, np.inf, low_inclusive=False,
                              high_inclusive=False)
    validation.check_min_count("tuning_items", tuning_items, 0, "slices before the test split")
    grid = tuple({"tau": float(t)} for t in tau_grid)
    if not grid or any(not np.isfinite(g["tau"]) or g["tau"] < 0 for g in grid):
        raise ValueError(f"`tau_grid` must be finite taus >= 0, got {tau_grid!r}.")
    cache = _Dense(tuning_items)
    out = {}
    for name in names:
        if name == "sale":
            out[name] = Contender(_runner(cache, metric, tolerance), grid)
        else:
            out[name] = Contender(_runner(cache, metric, tolerance,
                                          np.inf if name == "static" else 0.0))
    return out


def default_goals(metric: str = "density") -> tuple[Goal, ...]:
    """The declared claims: density: ``sale`` keeps fewer blocks than ``dense``; error and
    recall: ``sale`` is more accurate than ``static``."""
    validation.check_one_of("metric", metric, tuple(METRICS))
    return (Goal("sale", "dense"),) if metric == "density" else (Goal("sale", "static"),)


def _check_problem(problem, tuning_items: int, seeds: int) -> None:
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
    if tuning_items + seeds > q[0] * q[1]:
        raise ValueError(f"`tuning`={tuning_items} + `seeds`={seeds} slices exceed the "
                         f"problem's B Hq = {q[0] * q[1]} (batch, head) slices.")


def compare(key, problem: AttentionProblem, *, contenders=CONTENDERS, tuning=0,
            seeds: int, goals: Sequence[Goal] | None = None, pairs=None,
            metric: str = "density", tolerance: float = 0.05, tau_grid=TAU_GRID,
            level: float = 0.95, resamples: int = 2000, batch: int | None = None,
            progress=True, results_path=None) -> protocol.Comparison:
    """SALE against dense attention and the static block-sparse pattern on your q, k, v
    (module docstring): tau tuned on the tuning slices, paired test slices.

    Args:
      key: PRNG key (the bootstrap draws).
      problem: ``AttentionProblem``.
      contenders: names of ``CONTENDERS`` and/or a ``{name: protocol.Contender}`` mapping (a
        name mapped to None is the built-in one). Default: SALE, static, dense.
      tuning: ``protocol.Tuning`` or the number of tuning slices (>= 1 when SALE's grid
        has several taus).
      seeds: the number of test slices, >= 2.
      goals: declared ``protocol.Goal``s (default: ``default_goals(metric)`` where its
        contenders are compared).
      pairs: declared differences (default: the first contender against each other one).
      metric: one of ``METRICS``.
      tolerance: ``"density"`` only: the relative error above which a slice counts as
        dense (censored).
      tau_grid: SALE's declared taus (>= 0).
      level, resamples: the CIs' level and bootstrap resamples.
      batch: slices per contender call (None: each split in one call).
      progress, results_path: as ``protocol.compare``.

    Returns:
      ``protocol.Comparison``.

    Raises:
      TypeError / ValueError naming the argument: a problem that is not an
      ``AttentionProblem`` or with mismatched shapes, more slices asked than the problem
      holds, an unknown metric or contender, a bad ``tolerance`` or ``tau_grid``, and
      ``protocol.compare``'s.
    """
    validation.check_one_of("metric", metric, tuple(METRICS))
    validation.check_in_range("tolerance", tolerance, 0.0, np.inf, low_inclusive=False,
                              high_inclusive=False)
    tuning_items = protocol.as_tuning(tuning).items
    validation.check_min_count("seeds", seeds, 2, "paired test slices")
    _check_problem(problem, int(tuning_items), int(seeds))
    kw = dict(metric=metric, tolerance=tolerance, tau_grid=tau_grid,
              tuning_items=int(tuning_items))
    if isinstance(contenders, Mapping):
        named = [n for n, c in contenders.items() if c is None]
    else:
        if isinstance(contenders, str):
            raise TypeError("`contenders` must be a sequence of names or a mapping, got a "
                            "string.")
        named = list(contenders)
    for name in named:
        validation.check_one_of("contenders", name, CONTENDERS)
    if isinstance(contenders, Mapping):
        builtin = default_contenders(named, **kw)
        chosen = {n: builtin[n] if c is None else c for n, c in contenders.items()}
    else:
        chosen = default_contenders(tuple(contenders), **kw)
    if goals is None:
        goals = tuple(g for g in default_goals(metric) if g.a in chosen and g.b in chosen)
    return protocol.compare(as_key(key), problem, contenders=chosen, tuning=tuning,
                            seeds=seeds, goals=goals, pairs=pairs, metric=metric,
                            higher_is_better=METRICS[metric],
                            censor_at=1.0 if metric == "density" else None, batch=batch,
                            level=level, resamples=resamples, progress=progress,
                            results_path=results_path)
