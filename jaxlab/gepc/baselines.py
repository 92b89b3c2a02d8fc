"""OOD baselines on the same score model: score norm, MSMA, DiffPath-6D.

* score norm: ||s(x_t)||, averaged over ``num_noise`` draws, at one small t (ours).
* MSMA (Mahmood, Oliva, Styner, ICLR 2021, "Multiscale score matching for OOD detection"):
  the L2 norms of the score of the *clean* image at L noise levels (an N x L matrix), then
  an auxiliary density model (a GMM) on ID data; OOD score = GMM negative log-likelihood.
  Follows the paper: L = 10 noise levels, geometric between sigma_max and sigma_min
  (NCSN's 1 .. 0.01 for [0, 1] images, i.e. 2 .. 0.02 for our [-1, 1] images;
  ``msma_times``). Ours: the model is VP, so the VE level sigma maps to the VP time with
  abar = 1 / (1 + sigma^2) and the input is sqrt(abar) x0 (the VP image of the VE point
  x0 + 0); the feature is ||eps_theta|| = sigma_t ||s||, a per-level constant factor that
  the GMM's standard scaling removes.
* DiffPath-6D (Heng, Thiery, Soh, NeurIPS 2024; official code clear-nus/diffpath,
  ``save_train_statistics.py`` / ``eval_6d.py``): a deterministic DDIM inversion from x0
  to t = 1 in ``num_steps`` (10) steps, collecting eps_theta at the start of every step;
  with deps = (eps_{k+1} - eps_k) num_steps (the rate of change), the 6 statistics are the
  sums over path steps and pixels of eps, eps^2, eps^3, deps, deps^2, deps^3 (the official
  order); density: standard scaling + a GMM chosen by cross-validated held-out likelihood
  over components and covariance types (``scoring.fit_gmm_search``). Ours: the continuous
  cosine-VP time grid ``linspace(t0, 1 - 1e-3, num_steps + 1)`` instead of the respaced
  1000-step grid, the component grid sized for a few hundred fitting images
  (``scoring.fit_gmm_search``).
* denoising-error map (ours, the localisation baseline for GEPC's maps): per pixel
  (x0_hat - x0)^2 at time t, x0_hat = (x_t - sigma_t eps_theta(x_t, t)) / sqrt(abar_t).

Cost in score-network evaluations per image: score norm ``num_noise``, MSMA L, DiffPath
``num_steps``.

Checks (eager, before ``jit``): ``x0`` [B, H, W, C] finite; ``score_norm``: ``t`` in (0, 1],
``num_noise`` >= 1; ``msma_features``: ``ts`` in (0, 1]; ``msma_times``: 0 < ``sigma_min``
<= ``sigma_max`` < inf, ``levels`` >= 1; ``diffpath_features`` and ``ddim_inversion_eps``:
``num_steps`` >= 1, ``t0`` in (0, 1 - 1e-3); ``denoising_error_map``: ``ts`` in (0, 1].

Every method on your own features: ``fit(method, id_features, ...) -> Fitted`` and
``score(fitted, features) -> [N]`` (``METHODS``, ``METHOD_FEATURES``), as the GEPC study
fits and scores them; ``ood.auroc_with_ci`` compares the scores of ID and OOD images.
``eps_fn(x_t, t)`` everywhere takes t in [0, 1] on jaxlab's cosine VP schedule
(``schedule``); a model trained on another schedule needs a wrapper mapping t to its own
time and scaling.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Array, PRNGKey
from jaxlab.gepc import residual, schedule, scoring

__all__ = ["score_norm", "msma_features", "msma_times", "DIFFPATH_FEATURES", "diffpath_features",
    "ddim_inversion_eps", "denoising_error_map", "METHODS", "METHOD_FEATURES", "METHOD_LABELS",
    "Fitted", "fit", "score"]


def _check_x0(x0):
    validation.check_ndim("x0", x0, 4)
    validation.check_finite("x0", x0)


def check_eps_fn(eps_fn, x0) -> None:
    """``eps_fn(x [B, H, W, C], t [B])`` returns floats of x's shape (abstract evaluation,
    no forward pass); ValueError / TypeError naming ``eps_fn``."""
    x = jax.ShapeDtypeStruct(tuple(np.shape(x0)), jnp.float32)
    t = jax.ShapeDtypeStruct((np.shape(x0)[0],), jnp.float32)
    out = jax.eval_shape(eps_fn, x, t)
    if getattr(out, "shape", None) != x.shape:
        raise ValueError(f"`eps_fn` must map x {x.shape} and t {t.shape} to eps of shape "
                         f"{x.shape}, got {getattr(out, 'shape', type(out).__name__)}.")
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise TypeError(f"`eps_fn` must return floats, got {out.dtype}.")


def _finite_output(out, name: str = "eps_fn"):
    """Raises ValueError naming ``name`` if a concrete output holds NaN / inf."""
    if not isinstance(out, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(out))):
        raise ValueError(f"`{name}` returned non-finite values: the output holds "
                         f"{int((~np.isfinite(np.asarray(out))).sum())} NaN/inf entries.")
    return out


def score_norm(key: PRNGKey, eps_fn, x0: Array, *, t: float = 0.01,
               num_noise: int = 1) -> Array:
    """[B] mean ||s(x_t)|| at time t in (0, 1], over ``num_noise`` >= 1 noise draws.

    Args:
      key: PRNG key of the noise draws (typed, or a legacy ``uint32`` key).
      eps_fn: (x [B, H, W, C], t [B]) -> predicted noise [B, H, W, C].
      x0: [B, H, W, C] clean images.
      t: diffusion time in (0, 1].
      num_noise: noise draws averaged, >= 1.

    Returns:
      [B] mean score norm.
    """
    key = as_key(key)
    _check_x0(x0)
    validation.check_in_range("t", t, 0.0, 1.0, low_inclusive=False)
    validation.check_positive_int("num_noise", num_noise)
    check_eps_fn(eps_fn, x0)
    return _finite_output(_score_norm(eps_fn, x0, key, t, num_noise))


@functools.partial(jax.jit, static_argnames=("eps_fn", "t", "num_noise"))
def _score_norm(eps_fn, x0, key, t, num_noise):
    b = x0.shape[0]
    tb = jnp.full((b,), t)
    sigma = jnp.sqrt(1.0 - schedule.alpha_bar(t))

    def one(k):
        xt, _ = schedule.noise(x0, jax.random.normal(k, x0.shape), tb)
        return jnp.sqrt(jnp.sum((eps_fn(xt, tb) / sigma) ** 2, axis=(1, 2, 3)))

    return jax.lax.map(one, jax.random.split(key, num_noise)).mean(0)


def msma_features(eps_fn, x0: Array, ts) -> Array:
    """[B, L] ||eps_theta(sqrt(abar_t) x0, t)|| at each of the L times ``ts`` in (0, 1]."""
    _check_x0(x0)
    validation.check_in_range("ts", ts, 0.0, 1.0, low_inclusive=False)
    check_eps_fn(eps_fn, x0)
    return _finite_output(_msma_features(eps_fn, x0, ts))


@functools.partial(jax.jit, static_argnames="eps_fn")
def _msma_features(eps_fn, x0, ts):
    b = x0.shape[0]

    def at(t):
        tb = jnp.full((b,), t)
        return jnp.sqrt(jnp.sum(eps_fn(jnp.sqrt(schedule.alpha_bar(t)) * x0, tb) ** 2,
                                axis=(1, 2, 3)))

    return jax.lax.map(at, jnp.asarray(ts, jnp.float32)).T


def msma_times(sigma_min: float = 0.02, sigma_max: float = 2.0, levels: int = 10):
    """[levels] VP times of MSMA's geometric VE noise grid from ``sigma_max`` down to
    ``sigma_min`` (abar = 1 / (1 + sigma^2)), as float64 numpy."""
    validation.check_in_range("sigma_min", sigma_min, 0.0, low_inclusive=False)
    validation.check_in_range("sigma_max", sigma_max, sigma_min, np.inf, high_inclusive=False)
    validation.check_positive_int("levels", levels)
    sigmas = np.geomspace(sigma_max, sigma_min, levels)
    return schedule.t_from_sqrt_alpha_bar(1.0 / np.sqrt(1.0 + sigmas**2))


DIFFPATH_FEATURES = ("eps_sum", "eps_sum_sq", "eps_sum_cb", "deps_dt", "deps_dt_sq",
                     "deps_dt_cb")


def diffpath_features(eps_fn, x0: Array, num_steps: int = 10, t0: float = 1e-3) -> Array:
    """DiffPath-6D statistics of the DDIM inversion path (module docstring).

    Args:
      eps_fn: (x [B, H, W, C], t [B]) -> eps_theta.
      x0: [B, H, W, C] images.
      num_steps: DDIM inversion steps >= 1 (score evaluations per image).
      t0: start time in (0, 1 - 1e-3); the path ends at 1 - 1e-3.

    Returns:
      [B, 6] float32 in the order of ``DIFFPATH_FEATURES``: sums over steps and pixels of
      eps, eps^2, eps^3 and of deps, deps^2, deps^3 with deps = num_steps (eps_{k+1} -
      eps_k) (the deps sums are 0 when ``num_steps`` = 1).
    """
    _check_path(x0, num_steps, t0)
    check_eps_fn(eps_fn, x0)
    return _finite_output(_diffpath_features(eps_fn, x0, num_steps, t0))


def _check_path(x0, num_steps, t0) -> None:
    """The checks of ``diffpath_features`` / ``ddim_inversion_eps`` (module docstring)."""
    _check_x0(x0)
    validation.check_positive_int("num_steps", num_steps)
    validation.check_in_range("t0", t0, 0.0, 1.0 - 1e-3, low_inclusive=False,
                              high_inclusive=False)


def ddim_inversion_eps(eps_fn, x0, num_steps, t0):
    """[num_steps, B, H, W, C] eps_theta at the start of each DDIM inversion step.

    Args:
      eps_fn: (x [B, H, W, C], t [B]) -> eps_theta.
      x0: [B, H, W, C] finite images.
      num_steps: DDIM inversion steps >= 1 (static int).
      t0: start time in (0, 1 - 1e-3); the path ends at 1 - 1e-3.

    Raises:
      ValueError: a bad ``x0``, ``num_steps`` or ``t0`` (as ``diffpath_features``).
    """
    _check_path(x0, num_steps, t0)
    b = x0.shape[0]
    ts = jnp.linspace(t0, 1.0 - 1e-3, num_steps + 1)

    def step(x, tt):
        t, t_next = tt
        e = eps_fn(x, jnp.full((b,), t))
        ab, ab_n = schedule.alpha_bar(t), schedule.alpha_bar(t_next)
        x0_hat = (x - jnp.sqrt(1 - ab) * e) / jnp.sqrt(ab)
        return jnp.sqrt(ab_n) * x0_hat + jnp.sqrt(1 - ab_n) * e, e

    x_start = jnp.sqrt(schedule.alpha_bar(ts[0])) * x0
    _, eps = jax.lax.scan(step, x_start, (ts[:-1], ts[1:]))
    return eps


@functools.partial(jax.jit, static_argnames=("eps_fn", "num_steps", "t0"))
def _diffpath_features(eps_fn, x0, num_steps, t0):
    eps = ddim_inversion_eps(eps_fn, x0, num_steps, t0)
    deps = jnp.diff(eps, axis=0) * num_steps
    ax = (0, 2, 3, 4)
    return jnp.stack([jnp.sum(eps, ax), jnp.sum(eps**2, ax), jnp.sum(eps**3, ax),
                      jnp.sum(deps, ax), jnp.sum(deps**2, ax), jnp.sum(deps**3, ax)], 1)


def denoising_error_map(key: PRNGKey | None, eps_fn, x0: Array, ts, *,
                        noise: Array | None = None) -> Array:
    """[B, T, H, W] channel-mean (x0_hat - x0)^2 at each time of ``ts`` in (0, 1].

    Args:
      key: PRNG key of the forward noise (typed, or a legacy ``uint32`` key); may be None
        when ``noise`` is given.
      eps_fn: (x [B, H, W, C], t [B]) -> predicted noise [B, H, W, C].
      x0: [B, H, W, C] clean images.
      ts: [T] diffusion times in (0, 1].
      noise: optional [T, B, H, W, C] forward noise (default: drawn from ``key``; rows of a
        draw made for more times evaluate some of them only).

    Returns:
      [B, T, H, W] per-pixel denoising error.
    """
    _check_x0(x0)
    validation.check_in_range("ts", ts, 0.0, 1.0, low_inclusive=False)
    ts = jnp.atleast_1d(jnp.asarray(ts, jnp.float32))
    if noise is None:
        noise = _normal(as_key(key), (ts.shape[0],) + tuple(np.shape(x0)))
    validation.check_shape("noise", noise, (ts.shape[0],) + tuple(np.shape(x0)))
    return _denoising_error_map(eps_fn, x0, noise, ts)


@functools.partial(jax.jit, static_argnames="shape")
def _normal(key, shape):
    return jax.random.normal(key, shape)


@functools.partial(jax.jit, static_argnames="eps_fn")
def _denoising_error_map(eps_fn, x0, eps, ts):
    def at(te):
        t, e = te
        tb = jnp.full((x0.shape[0],), t)
        xt, sigma = schedule.noise(x0, e, tb)
        x0_hat = (xt - sigma * eps_fn(xt, tb)) / jnp.sqrt(schedule.alpha_bar(tb))[:, None,
                                                                                  None, None]
        return ((x0_hat - x0) ** 2).mean(-1)

    return jnp.moveaxis(jax.lax.map(at, (ts, eps)), 0, 1)


# --- fitting and scoring every method the same way ------------------------------------

#: The methods ``fit`` / ``score`` know, with the features each takes.
METHODS = ("official", "per_element", "score_norm", "msma", "diffpath")
METHOD_FEATURES = {
    "official": "[N, T, 3] residual.consistency_features' per-t features",
    "per_element": "[N, T, G] residuals (residual.consistency_features)",
    "score_norm": "[N] score_norm",
    "msma": "[N, levels] msma_features",
    "diffpath": "[N, 6] diffpath_features",
}
#: Display names of the methods (the study's tables).
METHOD_LABELS = {"official": "GEPC (official)", "per_element": "GEPC per-element (ours)",
                 "score_norm": "score norm", "msma": "MSMA", "diffpath": "DiffPath-6D"}


class Fitted(NamedTuple):
    """A method's scorer fitted on ID (calibration) features.

    Attributes:
      method: one of ``METHODS``.
      model: ``scoring.KDEScorer`` (GEPC), ``scoring.GMMSearch`` (MSMA, DiffPath) or None
        (score norm needs no fit).
      columns: the per-t feature columns the official scorer reads (empty otherwise).
    """

    method: str
    model: object
    columns: tuple[int, ...] = ()


def _check_method(method):
    validation.check_one_of("method", method, METHODS)


def fit(method: str, features, *, num_t: int = 2, official_features=("gepc_s",),
        agg_feat: str = "sum", gmm_components=(1, 2, 4, 8),
        gmm_covariances=("full", "diag"), gmm_folds: int = 5, seed: int = 0) -> Fitted:
    """Fits one method's OOD scorer on ID features, as the GEPC study does.

    Args:
      method: one of ``METHODS``; ``features`` must be its array (``METHOD_FEATURES``).
      features: the ID images' features of ``method``.
      num_t: GEPC: how many times (lowest CV) are kept (``scoring.fit_official`` /
        ``scoring.fit``).
      official_features: GEPC (official): the per-t features used, names of
        ``residual.OFFICIAL_FEATURES``.
      agg_feat: GEPC (official): "sum" or "mean" over features.
      gmm_components, gmm_covariances, gmm_folds, seed: MSMA / DiffPath: the
        cross-validated GMM grid (``scoring.fit_gmm_search``).

    Returns:
      ``Fitted``; ``score(fitted, features)`` scores new images.

    Raises:
      ValueError: an unknown ``method`` or feature name, or the fitting function's checks
        (shapes, too few rows).

    Example:
      >>> import numpy as np
      >>> from jaxlab.gepc import baselines
      >>> rng = np.random.default_rng(0)
      >>> id_feats = rng.normal(size=(200, 6)).astype(np.float32)    # e.g. DiffPath-6D
      >>> ood_feats = id_feats[:50] + 3.0
      >>> f = baselines.fit("diffpath", id_feats, gmm_components=(1, 2), gmm_folds=3)
      >>> s_id, s_ood = baselines.score(f, id_feats[:50]), baselines.score(f, ood_feats)
      >>> bool(s_ood.mean() > s_id.mean())
      True
    """
    _check_method(method)
    if method == "official":
        names = tuple(official_features)
        for n in names:
            validation.check_one_of("official_features", n, residual.OFFICIAL_FEATURES)
        validation.check_ndim("features", features, 3)
        cols = tuple(residual.OFFICIAL_FEATURES.index(n) for n in names)
        model = scoring.fit_official(np.asarray(features)[..., list(cols)], num_t, agg_feat)
        return Fitted(method, model, cols)
    if method == "per_element":
        return Fitted(method, scoring.fit(features, num_t))
    if method == "score_norm":
        validation.check_ndim("features", features, 1)
        return Fitted(method, None)
    validation.check_ndim("features", features, 2)
    return Fitted(method, scoring.fit_gmm_search(
        features, components=tuple(gmm_components), covariance_types=tuple(gmm_covariances),
        folds=gmm_folds, seed=seed))


def score(fitted: Fitted, features) -> np.ndarray:
    """OOD scores (larger = more OOD) of new images under a ``fit`` result.

    Args:
      fitted: from ``fit``.
      features: the images' features of ``fitted.method`` (``METHOD_FEATURES``), [N, ...].

    Returns:
      [N] float scores: GEPC's -sum_t w_t log KDE, the score norm itself, the GMM negative
      log-likelihood for MSMA and DiffPath.

    Example:
      >>> import numpy as np
      >>> from jaxlab.gepc import baselines
      >>> norms = np.array([1.0, 2.0, 3.0], np.float32)
      >>> baselines.score(baselines.fit("score_norm", norms), norms).tolist()
      [1.0, 2.0, 3.0]
    """
    if not isinstance(fitted, Fitted):
        raise ValueError(f"`fitted` must come from baselines.fit, got {type(fitted).__name__}.")
    _check_method(fitted.method)
    if fitted.method == "official":
        validation.check_ndim("features", features, 3)
        return np.asarray(scoring.score(fitted.model,
                                        np.asarray(features)[..., list(fitted.columns)]))
    if fitted.method == "per_element":
        return np.asarray(scoring.score(fitted.model, features))
    if fitted.method == "score_norm":
        validation.check_ndim("features", features, 1)
        return np.asarray(features)
    return np.asarray(scoring.gmm_search_nll(fitted.model, features))
