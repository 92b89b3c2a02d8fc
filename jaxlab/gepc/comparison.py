"""The GEPC study's comparison on your score model and your ID / OOD images.

``compare(key, problem, *, contenders, tuning, seeds, goals)`` is ``jaxlab.core.protocol``
configured for OOD detection:

* **Problem.** ``OODProblem(eps_fn, x_fit, x_id, x_ood)``: any noise-prediction model
  (``eps_fn(x [B, H, W, C], t [B])`` on jaxlab's cosine VP schedule, as ``gepc.detector``
  takes), the ID images every scorer is fitted on, and the ID and OOD images to detect.
* **Items.** An item is one image to score. Item ``i`` of a split is an OOD image when
  ``i`` is odd and an ID image when it is even (``item_images``), so both splits are
  balanced and the labels follow from the index alone. The tuning split takes the first
  ``ceil(tuning / 2)`` images of each of ``x_id`` and ``x_ood``, the test split the next
  ones: no image is both tuned on and tested. Item ``i``'s key (``protocol.item_keys``)
  draws its forward noise at every candidate time, its score-norm noise and its map
  noise (``image_features``), so an image's features do not depend on the batch it is
  scored in, and a binary that scores ID image ``j`` with the key of item ``2 j`` (OOD:
  ``2 j + 1``) reproduces ``compare``.
* **Fit.** The scorers (KDEs, GMMs) are fitted on ``x_fit`` only, whose noise keys are
  ``fit_keys(settings.seed, len(x_fit))``.
* **Values and statistic.** A contender's value for an item is the image's OOD score
  (larger = more OOD); the statistic is the AUROC over the items' labels
  (``auroc_statistic``, OOD positive), so every CI resamples images and every difference
  is an AUROC difference on the same images. Per-item wins and losses compare raw scores
  of different scorers and carry no meaning here; the CIs do.
* **Contenders** (``CONTENDERS``): ``"gepc"`` (the public code's scorer), ``"gepc_per_element"``
  (ours), ``"score_norm"``, ``"msma"``, ``"diffpath"``; each may also be a
  ``protocol.Contender`` you write (``run(items, problem, **params)`` returns [n] scores).
* **Tuning** (``default_contenders``): the GEPC scorers' ``num_t`` (how many of the
  lowest-CV candidate times the scorer keeps) over the declared grid ``(1, 2, 4)`` on the
  tuning items' AUROC; the baselines have nothing to tune (their GMMs are chosen by
  cross-validation on ``x_fit``).
* **Goals** (``DEFAULT_GOALS``): the paper's claim that GEPC beats each baseline (AUROC
  difference CI above 0).

The features of each chunk of items are computed once for every built-in contender (the
first contender run on a chunk pays for them in its seconds). What is ours: this
configuration of the protocol (the papers compare single AUROCs with no paired CIs).
"""

import functools
import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import protocol, sharding, validation
from jaxlab.core.keys import as_key
from jaxlab.core.protocol import Contender, Goal
from jaxlab.gepc import baselines, groups, residual, schedule

__all__ = ["OODProblem", "Settings", "CONTENDERS", "DEFAULT_GOALS", "DEFAULT_SETTINGS",
           "NUM_T_GRID", "compare", "default_contenders", "image_features", "item_images",
           "fit_keys", "fit_scorers", "method_scores", "auroc_statistic", "scores_to_items",
           "analyse_scores"]


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


class Settings(NamedTuple):
    """The study's settings of every built-in contender (the GEPC config's fields).

    Attributes:
      sqrt_abars: GEPC's candidate times as sqrt(abar) in (0, 1].
      group: GEPC's group elements (``groups.ELEMENTS``).
      rho: GEPC's top-fraction pooling in (0, 1].
      features: the official scorer's per-t features (``residual.OFFICIAL_FEATURES``).
      agg_feat: "sum" or "mean" of the features' log densities at a t.
      msma_levels, msma_sigma_min, msma_sigma_max: MSMA's geometric noise grid.
      diffpath_steps: DiffPath-6D's DDIM inversion steps.
      gmm_components, gmm_covariances, gmm_folds: the GMM grid of MSMA and DiffPath,
        chosen by cross-validation on ``x_fit``.
      seed: the seed of the fit images' noise keys (``fit_keys``) and of the GMM folds.
      batch: images per forward batch (the last one padded).
      mesh_shape: the device mesh each batch is split over (None: where it is).
    """

    sqrt_abars: tuple = (0.99997, 0.9999, 0.9979, 0.9969)
    group: tuple = groups.DEFAULT_GROUP
    rho: float = 0.3
    features: tuple = ("gepc_s",)
    agg_feat: str = "sum"
    msma_levels: int = 10
    msma_sigma_min: float = 0.02
    msma_sigma_max: float = 2.0
    diffpath_steps: int = 10
    gmm_components: tuple = (1, 2, 4, 8)
    gmm_covariances: tuple = ("full", "diag")
    gmm_folds: int = 5
    seed: int = 0
    batch: int = 200
    mesh_shape: Any = (-1,)


#: The study's settings (the defaults of ``Settings``).
DEFAULT_SETTINGS = Settings()
#: Built-in contender name -> ``baselines`` method.
CONTENDERS = {"gepc": "official", "gepc_per_element": "per_element",
              "score_norm": "score_norm", "msma": "msma", "diffpath": "diffpath"}
#: The GEPC scorers' declared ``num_t`` grid.
NUM_T_GRID = (1, 2, 4)
#: The paper's claim: GEPC's AUROC above each baseline's.
DEFAULT_GOALS = (Goal("gepc", "score_norm"), Goal("gepc", "msma"), Goal("gepc", "diffpath"))
# The features each method reads (``image_features``' keys).
_FEATURE_KEY = {"official": "official", "per_element": "residuals",
                "score_norm": "score_norm", "msma": "msma", "diffpath": "diffpath"}


# --- items -------------------------------------------------------------------------------

def _offset(tuning_items: int) -> int:
    return math.ceil(tuning_items / 2)


def item_images(problem: OODProblem, split: str, index, tuning_items: int):
    """The images of items ``index`` of ``split`` (module docstring).

    Args:
      problem: ``OODProblem``.
      split: "tuning" or "test".
      index: [n] item indices in the split.
      tuning_items: the number of tuning items (the test images start after theirs).

    Returns:
      (is_ood [n] bool, position [n] int: the row of ``x_ood`` where is_ood, else of
      ``x_id``).
    """
    validation.check_one_of("split", split, protocol.SPLITS)
    index = np.asarray(index, np.int64)
    start = 0 if split == "tuning" else _offset(tuning_items)
    return index % 2 == 1, start + index // 2


def fit_keys(seed: int, n: int) -> jax.Array:
    """[n] keys of the fit images' noise: ``fold_in(key(seed), i)``.

    Raises:
      ValueError: ``seed`` is not an integer or ``n`` not a non-negative integer.
    """
    validation.check_min_count("n", n, 0, "the number of fit images")
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise ValueError(f"`seed` must be an integer, got {seed!r}.")
    base = jax.random.key(int(seed))
    return jax.vmap(lambda i: jax.random.fold_in(base, i))(np.arange(n, dtype=np.uint32))


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


# --- features --------------------------------------------------------------------------------

@functools.partial(jax.jit, static_argnames=("n_t", "shape"))
def _item_noise(key_data, n_t, shape):
    """Per image one draw [2 T + 1, ...] from its key: rows 0 .. T - 1 the GEPC noise, row
    T the score-norm noise, the rest the map noise; as ([T, b, ...], [b, ...], [T, b, ...])."""
    z = jax.vmap(lambda kd: jax.random.normal(jax.random.wrap_key_data(kd),
                                              (2 * n_t + 1,) + shape))(key_data)
    z = jnp.swapaxes(z, 0, 1)
    return z[:n_t], z[n_t], z[n_t + 1:]


_SCORE_FNS = weakref.WeakKeyDictionary()


def _score_fn(eps_fn):
    """One ``residual.score_from_eps`` per model, so its jitted residual compiles once."""
    try:
        return _SCORE_FNS.setdefault(eps_fn, residual.score_from_eps(eps_fn))
    except TypeError:  # not weak-referenceable
        return residual.score_from_eps(eps_fn)


@functools.partial(jax.jit, static_argnames="eps_fn")
def _score_norm(eps_fn, x0, eps, t):
    tb = jnp.full((x0.shape[0],), t)
    xt, sigma = schedule.noise(x0, eps, tb)
    return jnp.sqrt(jnp.sum((eps_fn(xt, tb) / sigma) ** 2, axis=(1, 2, 3)))


def image_features(eps_fn, x, keys, settings: Settings = DEFAULT_SETTINGS, *, score_fn=None,
                   t_index=None, with_maps: bool = False) -> dict:
    """Every built-in contender's features of images ``x``, each image's noise from its key.

    Args:
      eps_fn: the noise-prediction model (``OODProblem``).
      x: [N, H, W, C] images.
      keys: [N] typed PRNG keys, one per image (item keys or ``fit_keys``).
      settings: ``Settings``.
      score_fn: ``residual.score_from_eps(eps_fn)`` (a static argument of the jitted
        residual: the same object on every call); default: one kept per ``eps_fn``.
      t_index: increasing indices into ``settings.sqrt_abars``, the times GEPC and the maps
        are evaluated at (default: all). An image's features at a time are those of the
        all-times evaluation (its noise is drawn for every time, then these rows are kept).
      with_maps: also the GEPC and denoising-error maps.

    Returns:
      {"residuals": [N, T', G], "official": [N, T', 3] (``residual.OFFICIAL_FEATURES``),
      "t_index": [T'] int32, "score_norm": [N] (at the smallest candidate time),
      "msma": [N, msma_levels], "diffpath": [N, 6]} as float32 NumPy, and with
      ``with_maps`` "gepc_map" / "denoise_map" [N, T', H, W]; in padded batches of
      ``settings.batch`` split over ``settings.mesh_shape``.
    """
    validation.check_ndim("x", x, 4)
    validation.check_finite("x", x)
    x = np.asarray(x, np.float32)
    key_data = np.asarray(jax.random.key_data(keys), np.uint32)
    if key_data.shape[0] != x.shape[0]:
        raise ValueError(f"`keys` must hold one key per image ({x.shape[0]}), got "
                         f"{key_data.shape[0]}.")
    validation.check_positive_int("settings.batch", settings.batch)
    ts_all = schedule.t_from_sqrt_alpha_bar(np.asarray(settings.sqrt_abars))
    n_t = len(ts_all)
    sel = np.arange(n_t) if t_index is None else np.asarray(t_index)
    if (sel.ndim != 1 or not sel.size or not np.issubdtype(sel.dtype, np.integer)
            or np.any(np.diff(sel) <= 0) or sel[0] < 0 or sel[-1] >= n_t):
        raise ValueError(f"`t_index` must be increasing integers in [0, {n_t}), got "
                         f"{np.asarray(t_index).tolist()}.")
    ts = ts_all[sel]
    score_fn = _score_fn(eps_fn) if score_fn is None else score_fn
    group, n_g = tuple(settings.group), len(settings.group)
    msma_ts = baselines.msma_times(settings.msma_sigma_min, settings.msma_sigma_max,
                                   settings.msma_levels)
    t_norm = float(ts_all.min())

    def batch_fn(xb, kd):
        res, norm, mp = _item_noise(kd, n_t, tuple(xb.shape[1:]))
        r, f, *m = residual.consistency_features(None, score_fn, xb, ts, group=group,
                                                 rho=settings.rho, with_maps=with_maps,
                                                 noise=res[sel])
        out = [r, f, _score_norm(eps_fn, xb, norm, t_norm)[:, None],
               baselines.msma_features(eps_fn, xb, msma_ts),
               baselines.diffpath_features(eps_fn, xb, settings.diffpath_steps)]
        if with_maps:
            out += [m[0], baselines.denoising_error_map(None, eps_fn, xb, ts, noise=mp[sel])]
        return [np.asarray(sharding.to_host(o), np.float32) for o in out]

    n, b = x.shape[0], settings.batch
    pad = (-n) % b
    xp = np.concatenate([x, np.repeat(x[-1:], pad, 0)]) if pad else x
    kp = np.concatenate([key_data, np.repeat(key_data[-1:], pad, 0)]) if pad else key_data
    parts = [batch_fn(*sharding.shard_batch((xp[i:i + b], kp[i:i + b]), settings.mesh_shape))
             for i in range(0, xp.shape[0], b)]
    cat = [np.concatenate(p)[:n] for p in zip(*parts, strict=True)]
    out = {"residuals": cat[0][..., :n_g], "official": cat[1], "score_norm": cat[2][:, 0],
           "msma": cat[3], "diffpath": cat[4], "t_index": sel.astype(np.int32)}
    if with_maps:
        out["gepc_map"], out["denoise_map"] = cat[5], cat[6]
    return out


def fit_scorers(fit_features: dict, settings: Settings = DEFAULT_SETTINGS, num_t: int = 2,
                methods=baselines.METHODS) -> dict:
    """``baselines.fit`` of each method of ``methods`` on the fit images' features
    (``image_features`` at every candidate time), as the GEPC study fits them.

    Raises:
      ValueError: an unknown method in ``methods``, or ``fit_features`` without the
        features a method reads.
    """
    if isinstance(methods, str):
        raise TypeError(f"`methods` must be a sequence of methods, got one string {methods!r}.")
    for m in methods:
        validation.check_one_of("methods", m, baselines.METHODS)
        _check_has_features("fit_features", fit_features, m)
    out = {}
    for m in methods:
        f = fit_features[_FEATURE_KEY[m]]
        if m in ("official", "per_element"):
            out[m] = baselines.fit(m, f, num_t=num_t, official_features=tuple(
                settings.features), agg_feat=settings.agg_feat)
        elif m in ("msma", "diffpath"):
            out[m] = baselines.fit(m, f, gmm_components=tuple(settings.gmm_components),
                                   gmm_covariances=tuple(settings.gmm_covariances),
                                   gmm_folds=settings.gmm_folds, seed=settings.seed)
        else:
            out[m] = baselines.fit(m, f)
    return out


def _check_has_features(name: str, features, method: str) -> None:
    key = _FEATURE_KEY[method]
    if not isinstance(features, Mapping) or key not in features:
        have = sorted(features) if isinstance(features, Mapping) else type(features).__name__
        raise ValueError(f"`{name}` must hold {key!r} (image_features' features of "
                         f"{method!r}), got {have}.")


def _rows_at(fitted, f):
    """A GEPC scorer re-indexed to the times the features ``f`` were evaluated at."""
    if fitted.method not in ("official", "per_element"):
        return fitted
    have = np.asarray(f["t_index"])
    pos = []
    for t in np.asarray(fitted.model.t_index):
        hit = np.flatnonzero(have == int(t))
        if not hit.size:
            raise ValueError(f"candidate time {int(t)} was not evaluated (features at times "
                             f"{have.tolist()}).")
        pos.append(int(hit[0]))
    return fitted._replace(model=fitted.model._replace(t_index=np.asarray(pos)))


def method_scores(fitted, features: dict) -> np.ndarray:
    """[N] OOD scores of the images of ``features`` under one ``fit_scorers`` entry.

    Raises:
      ValueError: ``features`` lacks the features of ``fitted.method``.
    """
    _check_has_features("features", features, fitted.method)
    return np.asarray(baselines.score(_rows_at(fitted, features),
                                      features[_FEATURE_KEY[fitted.method]]), np.float64)


# --- the protocol ------------------------------------------------------------------------------

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


def analyse_scores(key, id_scores: Mapping, ood_scores: Mapping, *, params=None,
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
                            metric="AUROC", higher_is_better=True, statistic=auroc_statistic,
                            level=level, resamples=resamples)


class _Features:
    """The features of the fit images and of each chunk of items, computed once per
    problem and shared by the built-in contenders."""

    def __init__(self, settings: Settings, tuning_items: int):
        self.settings, self.tuning_items = settings, tuning_items
        self._chunks, self._fitted, self._fit, self._problem = {}, {}, None, None

    def _check(self, problem):
        if self._problem is None:
            self._problem = problem
            self._score_fn = _score_fn(problem.eps_fn)
        elif problem is not self._problem:
            raise ValueError("the built-in contenders of one `compare` call score one problem.")

    def fitted(self, problem, method, num_t):
        self._check(problem)
        if self._fit is None:
            x = np.asarray(problem.x_fit, np.float32)
            self._fit = image_features(problem.eps_fn, x, fit_keys(self.settings.seed, len(x)),
                                       self.settings, score_fn=self._score_fn)
        k = (method, num_t if method in ("official", "per_element") else None)
        if k not in self._fitted:
            self._fitted[k] = fit_scorers(self._fit, self.settings, num_t, (method,))[method]
        return self._fitted[k]

    def items(self, items: protocol.Items, problem) -> dict:
        """The features of a chunk's images in item order (ID and OOD images computed
        apart, each in padded batches, so an image's features are those of its set)."""
        self._check(problem)
        k = (items.split, tuple(items.index.tolist()))
        if k not in self._chunks:
            is_ood, pos = item_images(problem, items.split, items.index, self.tuning_items)
            parts = {}
            for flag, x in ((False, problem.x_id), (True, problem.x_ood)):
                sel = np.flatnonzero(is_ood == flag)
                if sel.size:
                    parts[flag] = (sel, image_features(problem.eps_fn, np.asarray(x)[pos[sel]],
                                                       items.keys[sel], self.settings,
                                                       score_fn=self._score_fn))
            first = next(iter(parts.values()))[1]
            out = {n: np.empty((is_ood.size,) + a.shape[1:], a.dtype)
                   for n, a in first.items() if n != "t_index"}
            for sel, f in parts.values():
                for n in out:
                    out[n][sel] = f[n]
            out["t_index"] = first["t_index"]
            self._chunks[k] = out
        return self._chunks[k]


def _builtin(cache: _Features, method: str) -> Callable:
    def run(items, problem, num_t: int = 2):
        return method_scores(cache.fitted(problem, method, num_t), cache.items(items, problem))
    return run


def default_contenders(names: Sequence[str] = tuple(CONTENDERS), *, num_t_grid=NUM_T_GRID,
                       settings: Settings = DEFAULT_SETTINGS, tuning_items: int = 0
                       ) -> dict[str, Contender]:
    """The built-in contenders ``names`` (``CONTENDERS``) with their declared grids: the
    GEPC scorers' ``num_t`` over ``num_t_grid`` (each at most ``len(sqrt_abars)``); one
    feature cache shared by all of them (``tuning_items``: where the test images start).

    Raises:
      TypeError / ValueError: ``names`` is one string or names an unknown contender, or
        a ``num_t_grid`` entry is outside [1, len(settings.sqrt_abars)].
    """
    if isinstance(names, str):
        raise TypeError(f"`names` must be a sequence of contender names, got one string "
                        f"{names!r} (write ({names!r},)).")
    cache = _Features(settings, tuning_items)
    n_t = len(settings.sqrt_abars)
    for t in num_t_grid:
        if not 1 <= int(t) <= n_t:
            raise ValueError(f"`num_t_grid` entries must be in [1, {n_t}], got {t}.")
    out = {}
    for name in names:
        validation.check_one_of("contenders", name, tuple(CONTENDERS))
        method = CONTENDERS[name]
        grid = (tuple({"num_t": int(t)} for t in num_t_grid)
                if method in ("official", "per_element") else ({},))
        out[name] = Contender(_builtin(cache, method), grid)
    return out


def _check_problem(problem, tuning_items: int, seeds: int) -> None:
    if not isinstance(problem, OODProblem):
        raise TypeError(f"`problem` must be a gepc.comparison.OODProblem, got "
                        f"{type(problem).__name__}.")
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
    need_id = _offset(tuning_items) + math.ceil(seeds / 2)
    need_ood = _offset(tuning_items) + seeds // 2
    if shapes["x_id"][0] < need_id or shapes["x_ood"][0] < need_ood:
        raise ValueError(f"`seeds`={seeds} test and `tuning`={tuning_items} tuning items need "
                         f"{need_id} ID and {need_ood} OOD images, the problem holds "
                         f"{shapes['x_id'][0]} and {shapes['x_ood'][0]}.")


def compare(key, problem: OODProblem, *, contenders=tuple(CONTENDERS), tuning=0,
            seeds: int, goals: Sequence[Goal] = DEFAULT_GOALS, pairs=None,
            num_t_grid=NUM_T_GRID, settings: Settings = DEFAULT_SETTINGS, level: float = 0.95,
            resamples: int = 2000, batch: int | None = None, progress=True,
            results_path=None) -> protocol.Comparison:
    """The GEPC study's comparison on your problem (module docstring): AUROC of every
    contender on paired test images, ``num_t`` tuned on tuning images only.

    Args:
      key: PRNG key (item noise keys and bootstrap draws).
      problem: ``OODProblem``.
      contenders: names of ``CONTENDERS`` and/or a ``{name: protocol.Contender}`` mapping
        (a name mapped to None is the built-in one). Default: all five, GEPC first.
      tuning: ``protocol.Tuning`` or the number of tuning images (items), half ID, half
        OOD; with 0 the GEPC grids must have one point (e.g. ``num_t_grid=(2,)``).
      seeds: the number of test images (items), >= 2; half ID, half OOD.
      goals: declared ``protocol.Goal``s (default: ``DEFAULT_GOALS``, those whose
        contenders are compared).
      pairs: declared differences (default: the first contender against each other one).
      num_t_grid: the GEPC scorers' declared grid.
      settings: ``Settings`` of the built-in contenders.
      level, resamples: the CIs' level and bootstrap resamples.
      batch: items per contender call (None: each split in one call).
      progress: as ``protocol.compare``.
      results_path: as ``protocol.compare`` (per-chunk scores as JSON lines).

    Returns:
      ``protocol.Comparison`` (``metric="AUROC"``, higher is better).

    Raises:
      TypeError / ValueError naming the argument: a problem that is not an ``OODProblem``,
      images that are not [N, H, W, C] finite with one [H, W, C], too few ID / OOD images
      for ``tuning`` + ``seeds``, an unknown contender name, and ``protocol.compare``'s.
    """
    tuning_items = protocol.as_tuning(tuning).items
    validation.check_min_count("seeds", seeds, 2, "paired test images")
    _check_problem(problem, int(tuning_items), int(seeds))
    if isinstance(contenders, Mapping):
        named = [n for n, c in contenders.items() if c is None]
        builtin = default_contenders(named, num_t_grid=num_t_grid, settings=settings,
                                     tuning_items=int(tuning_items))
        chosen = {n: builtin[n] if c is None else c for n, c in contenders.items()}
    else:
        if isinstance(contenders, str):
            raise TypeError("`contenders` must be a sequence of names or a mapping, got a "
                            "string.")
        chosen = default_contenders(tuple(contenders), num_t_grid=num_t_grid,
                                    settings=settings, tuning_items=int(tuning_items))
    if goals is DEFAULT_GOALS:  # the paper's claims about the contenders compared
        goals = tuple(g for g in goals if g.a in chosen and g.b in chosen)
    return protocol.compare(as_key(key), problem, contenders=chosen, tuning=tuning,
                            seeds=seeds, goals=goals, pairs=pairs, metric="AUROC",
                            higher_is_better=True, statistic=auroc_statistic, batch=batch,
                            level=level, resamples=resamples, progress=progress,
                            results_path=results_path)
