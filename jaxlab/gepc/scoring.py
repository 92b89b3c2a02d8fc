"""GEPC scoring: t selection by coefficient of variation, 1-D KDEs, inverse-CV weights.

Two scorers share one fitted structure (``KDEScorer``) and one ``score``:

``fit_official`` -- the public code (RouzAY/gepc-diffusion, ``gepc/methods/gepc.py``:
``fit_id_train``, ``_KDE1D``, ``_compute_t_weights_from_id``, ``_stable_t_mask``,
``_agg_across_t``). Features F [N, T, F'] per time t (``residual.consistency_features``;
column 0 is ``gepc_s``, the residual averaged over G):

  1. CV_t = std(gepc_s_t) / (|mean(gepc_s_t)| + 1e-6) on ID-train (unbiased std); keep the
     ``num_t`` times with the lowest CV; w_t = 1 / (CV_t + 1e-6), normalised over the kept t;
  2. one 1-D Gaussian KDE per (t, feature), Silverman bandwidth 0.9 min(std, IQR / 1.34)
     n^(-1/5) (IQR ignored when 0; bandwidth 0.1 when it comes out <= 1e-6);
  3. L_t = sum_f log p_{t,f} (``agg_feat="mean"``: the mean, the SVHN config);
     OOD score = -sum_t w_t L_t.

``fit`` -- the per-element variant (``per_element``, ours, jaxlab's first version): one KDE
per (t, g) residual, t kept by the CV of the mean residual, weight of each (t, g) column
1 / CV of that column, normalised. ``log_features=True`` (ours) fits the KDEs to log
residuals. Higher scores mean "more out-of-distribution" (AUROC with OOD positive).

Checks (eager; value checks skip traced arrays): ``fit_official``: ``features``
[N >= 2, T, F'] finite, ``num_t`` in [1, T], ``agg_feat`` in {"sum", "mean"};
``official_bandwidth``: ``x`` [N >= 2, K]; ``fit``: ``features`` [N >= 2, T, G], finite
and >= 0, ``num_t`` in [1, T]; ``score``: ``features`` [M, T, K] finite, with T covering
the selected times and K matching the fit. Spreads (std, CV) are computed on columns
scaled by a power of two (exact), so features up to float32's max fit and score like their
rescaled copies (a std's squares would overflow past ~1e19); a point more than 1e18
bandwidths from every training value gets a huge finite score (the KDE's z is capped);
``kde_log_density``: ``bandwidth`` > 0 and finite, ``train`` and ``x`` finite, ``x``
columns match ``train``; ``silverman_bandwidth``: ``x`` [N >= 2, K];
``fit_gmm``: ``x`` [N, D] finite, ``num_components`` in [1, N], ``iters`` >= 1;
``gmm_nll``: ``x`` [M, D] with the fitted D; ``fit_gmm_search``: ``x`` [N, D] finite,
``components`` integers in [1, N (k - 1) / k], ``covariance_types`` of sklearn's,
``folds`` (k) in [2, N], and at least one candidate with a finite held-out
log-likelihood; ``gmm_search_nll``: ``x`` [M, D] finite with the fitted D.
"""

import functools
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import extras, validation
from jaxlab.core.types import Array

__all__ = ["KDEScorer", "silverman_bandwidth", "kde_log_density", "fit", "official_bandwidth",
    "fit_official", "score", "DiagGMM", "fit_gmm", "gmm_component_logpdf", "gmm_nll",
    "GMM_COVARIANCES", "GMMSearch", "fit_gmm_search", "gmm_search_nll"]


class KDEScorer(NamedTuple):
    """t_index: [num_t] selected times; train: [N, K] ID features; bandwidth, weights: [K]."""

    t_index: Array
    train: Array
    bandwidth: Array
    weights: Array
    log_features: bool = False


def silverman_bandwidth(x: Array) -> Array:
    """0.9 min(std, IQR / 1.34) n^(-1/5) per column of x [N, K]."""
    validation.check_ndim("x", x, 2)
    validation.check_min_count("x.shape[0]", x.shape[0], 2, "`x` needs two rows for a spread")
    validation.check_finite("x", x)
    n = x.shape[0]
    std = _std(x, 0, ddof=1)
    q75, q25 = jnp.percentile(x, 75, 0), jnp.percentile(x, 25, 0)
    spread = jnp.minimum(std, (q75 - q25) / 1.34)
    spread = jnp.where(spread > 0, spread, jnp.maximum(std, 1e-6))
    return 0.9 * spread * n ** (-0.2)


def kde_log_density(train: Array, bandwidth: Array, x: Array) -> Array:
    """log p_k(x_k) of per-column Gaussian KDEs: train [N, K], x [M, K] -> [M, K]."""
    validation.check_ndim("train", train, 2)
    validation.check_shape("x", x, (None, train.shape[1]))
    validation.check_shape("bandwidth", bandwidth, (train.shape[1],))
    validation.check_in_range("bandwidth", bandwidth, float(jnp.finfo(jnp.float32).tiny))
    validation.check_finite("bandwidth", bandwidth)
    validation.check_finite("train", train)
    validation.check_finite("x", x)
    # |z| capped at 1e18 (z^2 <= 1e36 < float32's max): a point that far from every
    # training value gets a huge finite log density, not -inf.
    z = jnp.clip((x[:, None, :] - train[None, :, :]) / bandwidth, -1e18, 1e18)
    n = train.shape[0]
    return (jax.nn.logsumexp(-0.5 * z**2, axis=1) - jnp.log(n * bandwidth)
            - 0.5 * jnp.log(2 * jnp.pi))


def _pow2_scaled(x, axis=None):
    """x times the power of two that brings its largest |entry| (along ``axis``) into
    [0.5, 1): exact, so every scale-free statistic of it is unchanged, and sums and squares
    of values near the dtype's max no longer overflow."""
    top = jnp.max(jnp.abs(x), axis, keepdims=True)
    _, exponent = jnp.frexp(jnp.where(top > 0, top, 1.0))
    return jnp.ldexp(x, -exponent)


def _homogeneous(stat, x, axis=0):
    """``stat(x, axis)`` for a statistic of degree 1 in ``x`` (mean, std), computed on
    columns scaled by a power of two and scaled back: the same value (the scaling is
    exact), with no overflow of sums or squares near float32's max."""
    top = jnp.max(jnp.abs(x), axis, keepdims=True)
    _, exponent = jnp.frexp(jnp.where(top > 0, top, 1.0))
    return jnp.squeeze(jnp.ldexp(stat(jnp.ldexp(x, -exponent), axis), exponent), axis)


def _std(x, axis=0, ddof=0):
    """``jnp.std`` with no overflow near float32's max (``_homogeneous``)."""
    return _homogeneous(lambda v, a: jnp.std(v, a, ddof=ddof, keepdims=True), x, axis)


def _mean(x, axis=0):
    """``jnp.mean`` with no overflow near float32's max (``_homogeneous``)."""
    return _homogeneous(lambda v, a: jnp.mean(v, a, keepdims=True), x, axis)


def _cv(x, axis=0):
    """std / |mean| along ``axis`` (scale free: computed on ``_pow2_scaled`` columns)."""
    x = _pow2_scaled(x, axis)
    return jnp.std(x, axis) / jnp.maximum(jnp.abs(jnp.mean(x, axis)), 1e-12)


def _transform(features, log_features):
    f = jnp.asarray(features, jnp.float32)
    return jnp.log(jnp.maximum(f, 1e-12)) if log_features else f


def fit(features: Array, num_t: int = 2, log_features: bool = False) -> KDEScorer:
    """Fits the GEPC scorer on ID-train ``features`` [N, T, G] (residuals >= 0)."""
    validation.check_ndim("features", features, 3)
    validation.check_min_count("features.shape[0]", features.shape[0], 2,
                               "`features` needs two ID-train rows for a KDE bandwidth")
    validation.check_finite("features", features)
    validation.check_in_range("features", features, 0.0)
    raw = jnp.asarray(features, jnp.float32)
    n_t = raw.shape[1]
    if not 1 <= num_t <= n_t:
        raise ValueError(f"`num_t` must be in [1, {n_t}], got {num_t}.")
    t_index, sel, train, bandwidth, weights = _fit_arrays(raw, num_t, bool(log_features))
    _warn_zero_spread(sel, "features")
    return KDEScorer(t_index, train, bandwidth, weights, log_features)


@functools.partial(jax.jit, static_argnames=("num_t", "log_features"))
def _fit_arrays(raw, num_t, log_features):
    """``fit``'s arrays as one compiled program: (t_index, selected columns, KDE train
    columns, bandwidth, normalised weights)."""
    t_index = jnp.argsort(_cv(_pow2_scaled(raw).mean(-1)))[:num_t]
    sel = raw[:, t_index].reshape(raw.shape[0], -1)
    weights = 1.0 / jnp.maximum(_cv(sel), 1e-6)
    train = _transform(sel, log_features)
    return t_index, sel, train, silverman_bandwidth(train), weights / weights.sum()


def _warn_zero_spread(columns: Array, name: str) -> None:
    """RuntimeWarning naming ``name`` when a concrete KDE column has zero spread (its
    bandwidth falls back to a tiny constant and any other value scores as extreme)."""
    if isinstance(columns, jax.core.Tracer):
        return
    std = np.std(np.asarray(columns, np.float64), axis=0)
    if np.any(std == 0):
        warnings.warn(f"`{name}` has {int((std == 0).sum())} selected column(s) with zero "
                      "spread on ID-train (constant values): their KDE bandwidth falls back "
                      "to a constant and the OOD scores of other values become extreme.",
                      RuntimeWarning, stacklevel=3)


def official_bandwidth(x: Array) -> Array:
    """The public code's ``_KDE1D`` bandwidth per column of x [N, K]: 0.9 sigma n^(-1/5),
    sigma = min(std, IQR / 1.34) (std alone when IQR = 0), 0.1 when that is <= 1e-6."""
    validation.check_ndim("x", x, 2)
    validation.check_min_count("x.shape[0]", x.shape[0], 2, "`x` needs two rows for a spread")
    validation.check_finite("x", x)
    std = jnp.maximum(_std(x, 0, ddof=1), 1e-8)
    iqr = jnp.percentile(x, 75, 0) - jnp.percentile(x, 25, 0)
    sigma = jnp.where(iqr > 0, jnp.minimum(std, iqr / 1.34), std)
    bw = 0.9 * sigma * x.shape[0] ** (-0.2)
    return jnp.where(bw > 1e-6, bw, 0.1)


def fit_official(features: Array, num_t: int = 2, agg_feat: str = "sum") -> KDEScorer:
    """The public code's scorer on ID features [N, T, F'] (column 0 = ``gepc_s``).

    Args:
      features: [N >= 2, T, F'] per-t features (``residual.consistency_features`` columns,
        or ``[..., :1]`` for ``gepc_s`` alone, the public configs except CelebA).
      num_t: how many times (lowest CV of ``gepc_s``) are kept (``keep_k``).
      agg_feat: "sum" or "mean" of the log densities of the features at a t.

    Returns:
      KDEScorer with one column per (kept t, feature); the column weight is w_t (times
      1 / F' for "mean"), so ``score`` = -sum_t w_t L_t.
    """
    validation.check_ndim("features", features, 3)
    validation.check_min_count("features.shape[0]", features.shape[0], 2,
                               "`features` needs two ID-train rows for a KDE bandwidth")
    validation.check_finite("features", features)
    validation.check_one_of("agg_feat", agg_feat, ("sum", "mean"))
    f = jnp.asarray(features, jnp.float32)
    n_t = f.shape[1]
    if not 1 <= num_t <= n_t:
        raise ValueError(f"`num_t` must be in [1, {n_t}], got {num_t}.")
    return KDEScorer(*_fit_official_arrays(f, num_t, agg_feat), False)


@functools.partial(jax.jit, static_argnames=("num_t", "agg_feat"))
def _fit_official_arrays(f, num_t, agg_feat):
    """``fit_official``'s (t_index, train, bandwidth, weights) as one compiled program."""
    n, _, n_f = f.shape
    base = f[:, :, 0]
    cv = _std(base, 0, ddof=1) / (jnp.abs(_mean(base, 0)) + 1e-6)
    t_index = jnp.argsort(cv)[:num_t]
    w_t = 1.0 / (cv[t_index] + 1e-6)
    w_t = w_t / w_t.sum()
    weights = jnp.repeat(w_t, n_f) * (1.0 / n_f if agg_feat == "mean" else 1.0)
    train = f[:, t_index].reshape(n, -1)
    return t_index, train, official_bandwidth(train), weights


def score(scorer: KDEScorer, features: Array) -> Array:
    """OOD scores [M] for features [M, T, K] laid out as at the fit (larger = more OOD)."""
    validation.check_ndim("features", features, 3)
    validation.check_finite("features", features)
    t_index = np.asarray(scorer.t_index) if not isinstance(
        scorer.t_index, jax.core.Tracer) else np.zeros(scorer.t_index.shape, int)
    if features.shape[1] <= t_index.max() or (
            features.shape[2] * t_index.size != scorer.train.shape[1]):
        raise ValueError(f"`features` must have the fitted layout [M, T > {t_index.max()}, "
                         f"{scorer.train.shape[1] // t_index.size}], got {features.shape}.")
    # ``kde_log_density``'s value checks, made here: inside the program they see tracers
    validation.check_in_range("bandwidth", scorer.bandwidth, float(jnp.finfo(jnp.float32).tiny))
    validation.check_finite("bandwidth", scorer.bandwidth)
    validation.check_finite("train", scorer.train)
    return _score(scorer.t_index, scorer.train, scorer.bandwidth, scorer.weights,
                  jnp.asarray(features, jnp.float32), bool(scorer.log_features))


@functools.partial(jax.jit, static_argnames="log_features")
def _score(t_index, train, bandwidth, weights, features, log_features):
    """``score``'s numbers as one compiled program."""
    f = _transform(features[:, t_index].reshape(features.shape[0], -1), log_features)
    return -(kde_log_density(train, bandwidth, f) @ weights)


class DiagGMM(NamedTuple):
    """Diagonal Gaussian mixture: weights [K], means [K, D], variances [K, D].

    Kept as the test reference (``fit_gmm`` / ``gmm_nll``); the experiment uses
    ``fit_gmm_search``.
    """

    weights: np.ndarray
    means: np.ndarray
    variances: np.ndarray


def fit_gmm(x, num_components: int = 4, iters: int = 100, *, seed: int = 0) -> DiagGMM:
    """EM for a diagonal GMM (a plain density model; the experiment's MSMA / DiffPath-6D use
    ``fit_gmm_search``).

    Kept as the test reference: only the tests use it (with ``gmm_nll`` / ``DiagGMM``),
    as an independent density model to check the GMM baselines against.
    """
    x = np.asarray(x, np.float64)
    validation.check_ndim("x", x, 2)
    validation.check_finite("x", x)
    validation.check_positive_int("iters", iters)
    validation.check_min_count("x.shape[0]", x.shape[0], 2, "`x` needs two rows for a variance")
    n, d = x.shape
    if not 1 <= num_components <= n:
        raise ValueError(f"`num_components` must be in [1, {n}], got {num_components}.")
    rng = np.random.default_rng(seed)
    mu = x[rng.choice(n, num_components, replace=False)]
    var = np.tile(x.var(0) + 1e-6, (num_components, 1))
    w = np.full(num_components, 1.0 / num_components)
    for _ in range(iters):
        logp = gmm_component_logpdf(x, DiagGMM(w, mu, var))
        r = np.exp(logp - logp.max(1, keepdims=True))
        r /= r.sum(1, keepdims=True)
        nk = r.sum(0) + 1e-9
        w = nk / n
        mu = (r.T @ x) / nk[:, None]
        var = (r.T @ x**2) / nk[:, None] - mu**2 + 1e-6 * x.var(0)
        var = np.maximum(var, 1e-9)
    return DiagGMM(w, mu, var)


def gmm_component_logpdf(x, g: DiagGMM):
    """[N, K] log(w_k) + log N(x_n; mu_k, diag var_k) of rows ``x`` [N, D] (``fit_gmm``'s).

    Raises:
      ValueError: ``x`` is not [N, D] with the model's D.
    """
    validation.check_shape("x", x, (None, g.means.shape[1]))
    validation.check_finite("x", x)
    x = np.asarray(x, np.float64)
    ll = -0.5 * (((x[:, None, :] - g.means[None]) ** 2) / g.variances[None]
                 + np.log(2 * np.pi * g.variances[None])).sum(-1)
    return ll + np.log(g.weights)[None]


def gmm_nll(g: DiagGMM, x) -> np.ndarray:
    """Negative log-likelihood per row of a ``fit_gmm`` model.

    Kept as the test reference; the experiment's GMM baselines score with
    ``gmm_search_nll``.
    """
    validation.check_shape("x", x, (None, g.means.shape[1]))
    validation.check_finite("x", x)
    lp = gmm_component_logpdf(x, g)
    m = lp.max(1)
    return -(m + np.log(np.exp(lp - m[:, None]).sum(1)))


GMM_COVARIANCES = ("full", "tied", "diag", "spherical")


class GMMSearch(NamedTuple):
    """A standard-scaled sklearn GaussianMixture chosen by cross-validation.

    Attributes:
      pipeline: the fitted sklearn Pipeline (StandardScaler, GaussianMixture) (host object).
      n_components: the chosen number of components.
      covariance_type: the chosen covariance type.
      cv_loglik: mean held-out log-likelihood per row of the chosen setting.
    """

    pipeline: object
    n_components: int
    covariance_type: str
    cv_loglik: float


def fit_gmm_search(x, components=(1, 2, 4, 8, 16), covariance_types=GMM_COVARIANCES,
                   folds: int = 5, max_iter: int = 200, *, seed: int = 0) -> GMMSearch:
    """The density model of DiffPath-6D and MSMA: StandardScaler + GaussianMixture, the
    number of components and covariance type chosen by ``folds``-fold cross-validated
    held-out log-likelihood on ``x`` only (the official DiffPath ``eval_6d.py`` grid-searches
    {50, 100} components x the four covariance types with 10 folds on ~50k ID-train rows;
    our default grid is sized for a few hundred rows), then refitted on all of ``x``.

    Args:
      x: [N, D] ID (calibration) features.
      components: candidate numbers of components, each an integer (Python or NumPy; 2.5
        or NaN is rejected, not truncated) in [1, N (folds - 1) / folds].
      covariance_types: candidates among ``GMM_COVARIANCES``.
      folds: cross-validation folds in [2, N].
      max_iter: EM iterations (official: 200).
      seed: the folds' shuffle and the GMMs' initialisation.

    Returns:
      GMMSearch.

    Raises:
      ValueError: a bad ``x``, ``components``, ``covariance_types``, ``folds`` or
        ``max_iter`` (naming it), or no candidate fitted (every held-out log-likelihood
        non-finite).
    """
    extras.require("sklearn")
    from sklearn.mixture import GaussianMixture  # noqa: PLC0415 - host-side density model
    from sklearn.model_selection import GridSearchCV, KFold  # noqa: PLC0415
    from sklearn.pipeline import Pipeline  # noqa: PLC0415
    from sklearn.preprocessing import StandardScaler  # noqa: PLC0415
    from threadpoolctl import threadpool_limits  # noqa: PLC0415 - sklearn's dependency

    x = np.asarray(x, np.float64)
    validation.check_ndim("x", x, 2)
    validation.check_finite("x", x)
    validation.check_positive_int("max_iter", max_iter)
    n = x.shape[0]
    if not isinstance(folds, int | np.integer) or not 2 <= folds <= n:
        raise ValueError(f"`folds` must be an integer in [2, {n}], got {folds}.")
    components = list(components)
    for k in components:
        if not isinstance(k, int | np.integer) or isinstance(k, bool):
            raise ValueError(f"`components` must hold integers, got {k!r} "
                             f"({type(k).__name__}) in {components}.")
    components = [int(k) for k in components]
    limit = n * (folds - 1) // folds
    if not components or min(components) < 1 or max(components) > limit:
        raise ValueError(f"`components` must be non-empty integers in [1, {limit}] (the rows "
                         f"of a training fold), got {components}.")
    covariance_types = list(covariance_types)
    if not covariance_types:
        raise ValueError("`covariance_types` must name at least one covariance type.")
    for c in covariance_types:
        validation.check_one_of("covariance_types", c, GMM_COVARIANCES)
    pipe = Pipeline([("scaler", StandardScaler()),
                     ("gmm", GaussianMixture(max_iter=max_iter, random_state=seed,
                                             reg_covar=1e-6))])
    grid = GridSearchCV(pipe, {"gmm__n_components": components,
                               "gmm__covariance_type": covariance_types},
                        cv=KFold(folds, shuffle=True, random_state=seed), n_jobs=1,
                        error_score=-np.inf)
    what = (f"over `components`={components} x `covariance_types`={covariance_types} on "
            f"`x` ({n} rows)")
    with threadpool_limits(1):  # tiny EM problems: BLAS threads only contend (measured)
        try:
            grid.fit(x)
        except ValueError as e:
            if "fits failed" not in str(e):  # sklearn: every candidate raised
                raise
            raise ValueError(f"no candidate GMM fitted {what}: every fit raised.") from e
    if not np.isfinite(grid.best_score_):
        raise ValueError(f"no candidate GMM fitted {what}: the best cross-validated "
                         f"log-likelihood is {grid.best_score_} (every fit diverged).")
    best = grid.best_params_
    return GMMSearch(grid.best_estimator_, int(best["gmm__n_components"]),
                     str(best["gmm__covariance_type"]), float(grid.best_score_))


def gmm_search_nll(g: GMMSearch, x) -> np.ndarray:
    """[M] negative log-likelihood of the rows of ``x`` [M, D] (larger = more OOD)."""
    x = np.asarray(x, np.float64)
    validation.check_shape("x", x, (None, g.pipeline.named_steps["scaler"].n_features_in_))
    validation.check_finite("x", x)
    from threadpoolctl import threadpool_limits  # noqa: PLC0415

    with threadpool_limits(1):
        return -g.pipeline.score_samples(x)
