"""The GEPC study's comparison on your score model and your ID / OOD images:
``compare = protocol.bind(SPEC)`` (the protocol: ``jaxlab.core.protocol``; the problem,
items, metric, contenders and goals: ``SPEC.doc``, which is ``compare``'s docstring).

What is ours: this configuration of the protocol (the papers compare single AUROCs with no
paired CIs).
"""

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from jaxlab.core import protocol, validation
from jaxlab.core.protocol import Goal
from jaxlab.core.types import PRNGKey
from jaxlab.gepc import groups, residual, scoring
from jaxlab.gepc.features import (
    Settings,
    fit_keys,
    fit_scorers,
    image_features,
    method_scores,
)

__all__ = ["OODProblem", "CONTENDERS", "NUM_T_GRID", "DEFAULT_GOALS", "AUROC", "SPEC",
           "compare", "item_images", "auroc_statistic", "scores_to_items", "analyse_scores"]


class OODProblem(NamedTuple):
    """Your OOD-detection problem.

    Attributes:
      eps_fn: ``eps_fn(x [B, H, W, C], t [B]) -> eps_hat [B, H, W, C]``, t in [0, 1] on
        jaxlab's cosine VP schedule (``gepc.schedule``).
      x_fit: [N_fit >= 2, H, W, C] ID images the scorers are fitted on.
      x_id: [N_id, H, W, C] ID images to score (tuning, then test items).
      x_ood: [N_ood, H, W, C] OOD images to score (tuning, then test items).
    """

    eps_fn: Callable[..., Any]
    x_fit: Any
    x_id: Any
    x_ood: Any


#: Built-in contender name -> ``baselines`` method.
CONTENDERS = {"gepc": "official", "gepc_per_element": "per_element",
              "score_norm": "score_norm", "msma": "msma", "diffpath": "diffpath"}
#: The GEPC scorers' declared ``num_t`` grid.
NUM_T_GRID = (1, 2, 4)
#: The paper's claim: GEPC's AUROC above each baseline's.
DEFAULT_GOALS = (Goal("gepc", "score_norm"), Goal("gepc", "msma"), Goal("gepc", "diffpath"))
_GEPC_METHODS = ("official", "per_element")


def item_images(items: protocol.Items):
    """The images of ``items`` (``SPEC.doc``): (is_ood [n] bool: odd items, row [n] int:
    the row of ``x_ood`` where is_ood, else of ``x_id``); a split's rows start after the
    ``ceil(tuning_items / 2)`` rows of each set the tuning items hold."""
    if not isinstance(items, protocol.Items):
        raise TypeError(f"`items` must be a protocol.Items, got {type(items).__name__}.")
    index = np.asarray(items.index, np.int64)
    first = np.asarray(items.positions, np.int64) - index  # 0, or the tuning items
    return index % 2 == 1, -(-first // 2) + index // 2


def auroc_statistic(values, index) -> float:
    """AUROC (OOD positive; ties count one half, Mann-Whitney U / (n+ n-)) of scores
    ``values`` [n] of items ``index`` [n] (odd = OOD); ValueError when the items hold one
    class only (the protocol drops such resamples). NumPy, no checks: it runs once per
    bootstrap resample."""
    v = np.asarray(values, np.float64)
    labels = np.asarray(index) % 2 == 1
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("`index` must hold ID (even) and OOD (odd) items.")
    s = np.sort(v)
    ranks = (np.searchsorted(s, v, "left") + np.searchsorted(s, v, "right") + 1) / 2.0
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


#: The metric: each item's value is its image's OOD score, the statistic the AUROC.
AUROC = protocol.Metric("AUROC", higher_is_better=True, statistic=auroc_statistic)


def scores_to_items(id_scores, ood_scores) -> np.ndarray:
    """[2 m] item values of a balanced test split: ``id_scores[j]`` at item ``2 j``,
    ``ood_scores[j]`` at ``2 j + 1`` (m = the shorter length).

    Raises:
      ValueError: scores that are not 1-D or not finite.
    """
    for name, v in (("id_scores", id_scores), ("ood_scores", ood_scores)):
        validation.check_ndim(name, v, 1)
        validation.check_finite(name, np.asarray(v, np.float64))
    m = min(len(id_scores), len(ood_scores))
    out = np.empty(2 * m, np.float64)
    out[0::2], out[1::2] = np.asarray(id_scores)[:m], np.asarray(ood_scores)[:m]
    return out


def analyse_scores(key: PRNGKey, id_scores: Mapping, ood_scores: Mapping, *, params=None,
                   pairs=None, goals=DEFAULT_GOALS, level: float = 0.95,
                   resamples: int = 2000) -> protocol.Comparison:
    """``protocol.analyse`` of scores already computed on the test images (what
    ``compare`` ends with, for scores a binary computed): contender name -> [N_id] ID
    scores and [N_ood] OOD scores, paired as ``scores_to_items``. ``key`` is the
    bootstrap key, ``fold_in(compare's key, 2)`` to reproduce ``compare``."""
    if set(id_scores) != set(ood_scores):
        raise ValueError(f"`id_scores` and `ood_scores` must name the same contenders, got "
                         f"{sorted(id_scores)} and {sorted(ood_scores)}.")
    values = {n: scores_to_items(id_scores[n], ood_scores[n]) for n in id_scores}
    if goals is DEFAULT_GOALS:
        goals = tuple(g for g in goals if g.a in values and g.b in values)
    return protocol.analyse(key, values, params=params, pairs=pairs, goals=goals,
                            metric=AUROC.name, higher_is_better=AUROC.higher_is_better,
                            statistic=AUROC.statistic, level=level, resamples=resamples)


# --- the built-in contenders -----------------------------------------------------------------

class _Problem(OODProblem):
    """The checked problem of one ``compare`` call, with the features its built-in
    contenders share (``features``)."""


class _Features:
    """The features of the fit images and of each chunk of items, computed once per call
    and shared by the built-in contenders (the first one run on a chunk pays for them)."""

    def __init__(self, problem: OODProblem, settings: Settings):
        self.problem, self.settings = problem, settings
        self._chunks, self._fitted, self._fit = {}, {}, None

    def fitted(self, method: str, num_t: int):
        if self._fit is None:
            x = np.asarray(self.problem.x_fit, np.float32)
            self._fit = image_features(fit_keys(self.settings.seed, len(x)),
                                       self.problem.eps_fn, x, self.settings)
        k = (method, num_t if method in _GEPC_METHODS else None)
        if k not in self._fitted:
            self._fitted[k] = fit_scorers(self._fit, self.settings, num_t, (method,))[method]
        return self._fitted[k]

    def items(self, items: protocol.Items) -> dict:
        """The features of a chunk's images in item order (ID and OOD images computed
        apart, each in padded batches, so an image's features are those of its set)."""
        k = (items.split, tuple(items.index.tolist()))
        if k not in self._chunks:
            is_ood, rows = item_images(items)
            parts = {}
            for flag, x in ((False, self.problem.x_id), (True, self.problem.x_ood)):
                sel = np.flatnonzero(is_ood == flag)
                if sel.size:
                    parts[flag] = (sel, image_features(
                        items.keys[sel], self.problem.eps_fn, np.asarray(x)[rows[sel]],
                        self.settings))
            first = next(iter(parts.values()))[1]
            out = {n: np.empty((is_ood.size,) + a.shape[1:], a.dtype)
                   for n, a in first.items() if n != "t_index"}
            for sel, f in parts.values():
                for n in out:
                    out[n][sel] = f[n]
            out["t_index"] = first["t_index"]
            self._chunks[k] = out
        return self._chunks[k]


def _builtin(name: str, ctx: protocol.Context) -> protocol.Contender:
    """The built-in ``name`` (a ``baselines`` method of ``CONTENDERS``) as a contender: [n]
    OOD scores of the items' images; the GEPC scorers with their ``num_t`` grid."""
    foreign = [m.name for m in ctx.metrics if m != AUROC]
    if foreign:
        raise ValueError(f"`metrics`: the built-in contender {name!r} reports the AUROC only, "
                         f"not {foreign}.")
    method = CONTENDERS[name]
    if method not in _GEPC_METHODS:
        def run(items, problem):
            return method_scores(problem.features.fitted(method, None),
                                 problem.features.items(items))
        return protocol.Contender(run)

    def run_gepc(items, problem, num_t: int = 2):
        n_t = len(problem.features.settings.sqrt_abars)
        if isinstance(num_t, bool) or not isinstance(num_t, int | np.integer) or \
                not 1 <= num_t <= n_t:
            raise ValueError(f"`contenders`: the built-in {name!r} cannot run num_t={num_t!r}: "
                             f"`num_t` must be an integer in [1, {n_t}] (the candidate "
                             "times `settings.sqrt_abars`).")
        return method_scores(problem.features.fitted(method, int(num_t)),
                             problem.features.items(items))
    return protocol.Contender(run_gepc, tuple({"num_t": t} for t in NUM_T_GRID))


# --- the spec --------------------------------------------------------------------------------

def _as_problem(problem, settings: Settings) -> _Problem:
    if not isinstance(problem, OODProblem):
        raise TypeError(f"`problem` must be a gepc.OODProblem, got {type(problem).__name__}.")
    if not callable(problem.eps_fn):
        raise TypeError("`problem.eps_fn` must be callable.")
    shapes = {}
    for name in ("x_fit", "x_id", "x_ood"):
        x = getattr(problem, name)
        validation.check_ndim(f"problem.{name}", x, 4)
        validation.check_finite(f"problem.{name}", x)
        shapes[name] = np.shape(x)
    validation.check_min_count("problem.x_fit", shapes["x_fit"][0], 2, "the scorers' fit")
    if len({s[1:] for s in shapes.values()}) != 1:
        raise ValueError(f"`problem`'s images must share [H, W, C], got {shapes}.")
    checked = _Problem(*problem)
    checked.features = _Features(checked, settings)
    return checked


def _check_settings(s: Settings) -> None:
    validation.check_fields(s, {
        "rho": (0.0, 1.0, False, True), "msma_levels": validation.POSITIVE_INT,
        "msma_sigma_min": validation.POSITIVE, "msma_sigma_max": validation.POSITIVE,
        "diffpath_steps": validation.POSITIVE_INT, "batch": validation.POSITIVE_INT},
        prefix="settings")
    for field, allowed in (("group", groups.ELEMENTS), ("features", residual.OFFICIAL_FEATURES),
                           ("gmm_covariances", scoring.GMM_COVARIANCES)):
        values = getattr(s, field)
        if isinstance(values, str) or not len(values):
            raise ValueError(f"`settings.{field}` must be a non-empty sequence, got "
                             f"{values!r}.")
        for v in values:
            validation.check_one_of(f"settings.{field}", v, allowed)
    validation.check_one_of("settings.agg_feat", s.agg_feat, ("sum", "mean"))
    t = np.asarray(s.sqrt_abars, np.float64)
    if t.ndim != 1 or not t.size or not np.all((t > 0) & (t <= 1)):
        raise ValueError(f"`settings.sqrt_abars` must be values in (0, 1], got "
                         f"{s.sqrt_abars!r}.")
    if s.msma_sigma_min > s.msma_sigma_max:
        raise ValueError(f"`settings.msma_sigma_min`={s.msma_sigma_min} must not exceed "
                         f"`settings.msma_sigma_max`={s.msma_sigma_max}.")
    if isinstance(s.gmm_components, str) or not len(s.gmm_components):
        raise ValueError(f"`settings.gmm_components` must name at least one component count, "
                         f"got {s.gmm_components!r}.")
    validation.check_int_range("settings.gmm_components",
                               np.asarray(s.gmm_components, np.int64), 1, 2**31)
    validation.check_min_count("settings.gmm_folds", s.gmm_folds, 2, "cross-validation folds")
    if isinstance(s.seed, bool) or not isinstance(s.seed, int | np.integer):
        raise TypeError(f"`settings.seed` must be an int, got {s.seed!r}.")


def _check_items(problem: OODProblem, settings, tuning: int, seeds: int) -> None:
    del settings
    if tuning == 1:
        raise ValueError("`tuning` must be 0 or >= 2: the tuning AUROC needs an ID and an "
                         "OOD image.")
    first = math.ceil(tuning / 2)
    need_id, need_ood = first + math.ceil(seeds / 2), first + seeds // 2
    n_id, n_ood = len(problem.x_id), len(problem.x_ood)
    if n_id < need_id or n_ood < need_ood:
        raise ValueError(f"`tuning`={tuning} and `seeds`={seeds} items need {need_id} ID and "
                         f"{need_ood} OOD images, the problem holds {n_id} and {n_ood}.")


SPEC = protocol.Spec(
    name="gepc",
    contenders={name: (lambda ctx, n=name: _builtin(n, ctx)) for name in CONTENDERS},
    defaults=tuple(CONTENDERS),
    metrics=(AUROC,),
    goals=lambda names, metrics: DEFAULT_GOALS,
    problem=_as_problem,
    settings=Settings,
    check_settings=_check_settings,
    check_items=_check_items,
    tuning=8,
    seeds=16,
    summary="The GEPC study's comparison on your score model and images: the AUROC of "
            "every scorer on paired test images, GEPC's ``num_t`` tuned on tuning images.",
    doc="""* **Problem.** ``gepc.OODProblem(eps_fn, x_fit, x_id, x_ood)``: any noise-prediction
  model on jaxlab's cosine VP schedule (as ``gepc.detector`` takes), the ID images every
  scorer is fitted on (only those), and the ID and OOD images to detect.
* **Items.** One image each. Item ``i`` of a split is OOD when ``i`` is odd, ID when even
  (``comparison.item_images``), so both splits are balanced; the tuning split takes the
  first ``ceil(tuning / 2)`` images of ``x_id`` and of ``x_ood``, the test split the next
  ones. Item ``i``'s key draws its noise at every candidate time, its score-norm and its
  map noise (``features.image_features``): an image's scores do not depend on its batch,
  and a binary that scores ID image ``j`` with the key of test item ``2 j`` (OOD:
  ``2 j + 1``) reproduces ``compare``. The fit images' keys are
  ``features.fit_keys(settings.seed, len(x_fit))``.
* **Metric** ``"AUROC"``: an item's value is its image's OOD score (larger = more OOD),
  the statistic the AUROC over the items' labels (OOD positive), so every CI resamples
  images; per-item wins and losses compare raw scores of different scorers and carry no
  meaning here.
* **Contenders**: ``"gepc"`` (the public code's scorer), ``"gepc_per_element"`` (ours),
  ``"score_norm"``, ``"msma"``, ``"diffpath"``. The GEPC scorers tune ``num_t`` (how many
  lowest-CV candidate times they keep) over ``(1, 2, 4)``; another grid:
  ``protocol.Builtin("gepc", grid=({"num_t": 2},))``. The baselines tune nothing (their
  GMMs are chosen by cross-validation on ``x_fit``). The features of a chunk of items are
  computed once for every built-in (the first run on it pays for them).
* **Settings** (``gepc.Settings``): the study's candidate times, group, rho, official
  features, MSMA / DiffPath / GMM settings, the fit keys' seed, the forward batch and mesh.
* **Goals**: the paper's claim that GEPC's AUROC beats each baseline's (CI above 0).""")

compare = protocol.bind(SPEC)
