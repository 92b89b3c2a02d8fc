"""Every study method's per-image features and fitted scorers, as the GEPC study computes them.

``image_features(keys, eps_fn, x, settings)`` evaluates GEPC's residuals and the public
code's per-time features, the score norm, MSMA's and DiffPath-6D's features of images
``x``, each image's noise drawn from its own key (so an image's features do not depend on
the batch it is computed in); ``fit_scorers`` fits every method's scorer on the fit
images' features (``fit_keys`` keys them) and ``method_scores`` scores new images.
``jaxlab.gepc.compare`` and ``experiments/gepc.py`` both compute their scores here.
"""

import functools
import weakref
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import sharding, validation
from jaxlab.core.types import PRNGKey
from jaxlab.gepc import baselines, groups, residual, schedule

__all__ = ["Settings", "DEFAULT_SETTINGS", "FEATURE_KEY", "fit_keys", "image_features",
           "fit_scorers", "method_scores"]


class Settings(NamedTuple):
    """The study's settings of every method's features and fit (the GEPC config's fields).

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
#: The features each method of ``baselines.METHODS`` reads (``image_features``' keys).
FEATURE_KEY = {"official": "official", "per_element": "residuals",
               "score_norm": "score_norm", "msma": "msma", "diffpath": "diffpath"}


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


def image_features(keys: PRNGKey, eps_fn, x, settings: Settings = DEFAULT_SETTINGS, *,
                   score_fn=None, t_index=None, with_maps: bool = False) -> dict:
    """Every study method's features of images ``x``, each image's noise from its key.

    Args:
      keys: [N] typed PRNG keys, one per image (``protocol.item_keys`` or ``fit_keys``).
      eps_fn: the noise-prediction model (``comparison.OODProblem``'s).
      x: [N, H, W, C] images.
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
        f = fit_features[FEATURE_KEY[m]]
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
    key = FEATURE_KEY[method]
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
                                      features[FEATURE_KEY[fitted.method]]), np.float64)
