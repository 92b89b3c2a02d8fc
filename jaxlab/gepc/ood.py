"""The GEPC OOD detector as an ``Algorithm``: fit on ID images, then score batches.

    alg = gepc.detector(eps_fn)                    # constructor: checks, binds settings
    state = alg.init(key, x_fit)                   # residual features of ID images -> KDEs
    state, info = alg.step(key, state, x)          # Info(scores, residuals, features)

``init(key, x_fit, score_fn, ...)`` / ``step(key, state, x, score_fn, ...)`` take the score
function and settings as arguments (``detector`` closes over them). ``init`` computes the
residuals r_g(x) and the per-t features (``residual.consistency_features``: the key draws
the forward noise, shared across g) of the ID images and fits the scorer; ``step``
computes those of ``x`` and their OOD scores (larger = more OOD).

``scorer="official"`` (default) is the public code's: the ``features`` (default
``("gepc_s",)``, the residual averaged over G incl. the identity; CelebA's config adds
``"gepc_s_cos"``, ``"gepc_s_pair"``) per t, one KDE per (t, feature), the ``num_t``
lowest-CV t, score -sum_t w_t L_t (``scoring.fit_official``). ``scorer="per_element"`` is
our extension: one KDE per (t, g) residual (``scoring.fit``), optionally on log residuals
(``log_features``). The state does not change across steps: GEPC
has no online update, the step is the detector's forward pass. Each call evaluates the
score model on (1 + G) T copies of its batch at once: split large sets into batches.

Checks: ``x_fit`` / ``x`` [B, H, W, C] finite, then those of ``residual.gepc_residuals``
(``ts`` in (0, 1], ``rho``, ``group``, ``score_fn``'s output shape) and ``scoring.fit`` /
``scoring.fit_official`` / ``scoring.score`` (two rows or more, ``num_t`` in [1, T], the
fitted feature layout); ``scorer`` in {"official", "per_element"}, ``features`` non-empty
names of ``residual.OFFICIAL_FEATURES``, ``log_features`` only with "per_element";
``detector`` checks ``sqrt_abars`` in (0, 1], ``group``, ``rho``, ``num_t`` and these
before any call. Value checks skip traced arrays.
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxlab.core import metrics, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Algorithm, Array, PRNGKey
from jaxlab.gepc import groups, residual, schedule, scoring

__all__ = ["SQRT_ABARS", "SCORERS", "State", "Info", "init", "step", "detector", "AurocCI",
    "auroc_with_ci"]

#: sqrt(abar) of the candidate times in the public code.
SQRT_ABARS = (0.99997, 0.9999, 0.9979, 0.9969)


class State(NamedTuple):
    """The fitted scorer (``scoring.KDEScorer`` without its static ``log_features`` flag).

    Attributes:
      t_index: [num_t] int, the selected times (indices into ``ts``).
      train: [N, num_t K] ID-train features at the selected times (K = number of official
        features, or G for per_element; logs if log_features).
      bandwidth: [num_t K] Silverman bandwidths of the KDEs.
      weights: [num_t K] inverse-CV weights of the columns.
    """

    t_index: Array
    train: Array
    bandwidth: Array
    weights: Array


class Info(NamedTuple):
    """scores: [B] OOD scores (larger = more OOD); residuals: [B, T, G] the residuals r_g at
    every time of ``ts`` and group element; features: [B, T, 3] the public code's per-t
    features (``residual.OFFICIAL_FEATURES``)."""

    scores: Array
    residuals: Array
    features: Array


SCORERS = ("official", "per_element")


def _check_images(name, x):
    validation.check_ndim(name, x, 4)
    validation.check_finite(name, x)


def _check_scorer(scorer, features, log_features):
    validation.check_one_of("scorer", scorer, SCORERS)
    features = tuple(features)
    if not features:
        raise ValueError("`features` must name at least one of "
                         f"{residual.OFFICIAL_FEATURES}.")
    for f in features:
        validation.check_one_of("features", f, residual.OFFICIAL_FEATURES)
    if log_features and scorer != "per_element":
        raise ValueError("`log_features` is an option of scorer='per_element' only.")
    return features


def _scorer_input(r, f, scorer, features):
    if scorer == "per_element":
        return r
    return f[..., [residual.OFFICIAL_FEATURES.index(n) for n in features]]


def init(key: PRNGKey, x_fit: Array, score_fn: residual.ScoreFn, *, ts,
         group=groups.DEFAULT_GROUP, rho: float = 0.3, num_t: int = 2,
         scorer: str = "official", features=("gepc_s",), agg_feat: str = "sum",
         log_features: bool = False) -> State:
    """Fits the detector on ID images.

    Args:
      key: PRNG key of the forward noise.
      x_fit: [N >= 2, H, W, C] ID images in [-1, 1].
      score_fn: (x [B, H, W, C], t [B]) -> score (e.g. ``residual.score_from_eps``); a
        static argument of the jitted residual: pass the same function object each call.
      ts: [T] candidate diffusion times in (0, 1].
      group: group element names (``groups.ELEMENTS``).
      rho: top fraction kept by the pooling, in (0, 1].
      num_t: how many times (lowest CV on ``x_fit``) the scorer keeps.
      scorer: "official" (the public code) or "per_element" (ours; module docstring).
      features: the official scorer's per-t features (``residual.OFFICIAL_FEATURES``).
      agg_feat: "sum" or "mean" of the features' log densities at a t (official scorer).
      log_features: per_element only: KDEs on log residuals (ours).

    Returns:
      State.
    """
    key = as_key(key)
    features = _check_scorer(scorer, features, log_features)
    _check_images("x_fit", x_fit)
    r, f = residual.consistency_features(key, score_fn, x_fit, ts, group=group, rho=rho)
    if scorer == "per_element":
        return State(*scoring.fit(r, num_t, log_features)[:4])
    return State(*scoring.fit_official(_scorer_input(r, f, scorer, features), num_t,
                                       agg_feat)[:4])


def step(key: PRNGKey, state: State, x: Array, score_fn: residual.ScoreFn, *, ts,
         group=groups.DEFAULT_GROUP, rho: float = 0.3, scorer: str = "official",
         features=("gepc_s",), log_features: bool = False) -> tuple[State, Info]:
    """Scores a batch: residual features of ``x`` [B, H, W, C] and their OOD scores.

    Args: as ``init`` (``ts``, ``group``, ``rho``, ``scorer``, ``features``,
      ``log_features`` must be those of the fit); ``key`` draws this batch's forward noise.

    Returns:
      (``state`` unchanged, Info(scores [B], residuals [B, T, G], features [B, T, 3])).
    """
    key = as_key(key)
    features = _check_scorer(scorer, features, log_features)
    _check_images("x", x)
    r, f = residual.consistency_features(key, score_fn, x, ts, group=group, rho=rho)
    sc = scoring.KDEScorer(*state, log_features)
    return state, Info(scoring.score(sc, _scorer_input(r, f, scorer, features)), r, f)


def detector(eps_fn, *, sqrt_abars=SQRT_ABARS, group=groups.DEFAULT_GROUP, rho: float = 0.3,
             num_t: int = 2, scorer: str = "official", features=("gepc_s",),
             agg_feat: str = "sum", log_features: bool = False) -> Algorithm:
    """GEPC on the eps-prediction model ``eps_fn`` as an ``Algorithm``.

    ``init(key, x_fit) -> State``, ``step(key, state, x) -> (State, Info)``.

    Args:
      eps_fn: (x [B, H, W, C], t [B]) -> eps_theta (e.g. ``train.make_eps_fn``); the score
        is s = -eps_theta / sigma_t.
      sqrt_abars: candidate noise levels as sqrt(abar(t)) in (0, 1] (public-code values).
      group, rho, num_t, scorer, features, agg_feat, log_features: as ``init``.
    """
    features = _check_scorer(scorer, features, log_features)
    validation.check_one_of("agg_feat", agg_feat, ("sum", "mean"))
    validation.check_in_range("sqrt_abars", sqrt_abars, 0.0, 1.0, low_inclusive=False)
    for name in group:
        validation.check_one_of("group", name, tuple(groups.ELEMENTS))
    validation.check_in_range("rho", rho, 0.0, 1.0, low_inclusive=False)
    if not 1 <= num_t <= len(sqrt_abars):
        raise ValueError(f"`num_t` must be in [1, len(sqrt_abars) = {len(sqrt_abars)}], "
                         f"got {num_t}.")
    ts = schedule.t_from_sqrt_alpha_bar(np.asarray(sqrt_abars))
    group = tuple(group)
    score_fn = residual.score_from_eps(eps_fn)

    def init_fn(key: PRNGKey, x_fit: Array) -> State:
        return init(key, x_fit, score_fn, ts=ts, group=group, rho=rho, num_t=num_t,
                    scorer=scorer, features=features, agg_feat=agg_feat,
                    log_features=log_features)

    def step_fn(key: PRNGKey, state: State, x: Array) -> tuple[State, Info]:
        return step(key, state, x, score_fn, ts=ts, group=group, rho=rho, scorer=scorer,
                    features=features, log_features=log_features)

    return Algorithm(init_fn, step_fn)


class AurocCI(NamedTuple):
    """AUROC of OOD against ID scores with a percentile-bootstrap interval.

    Attributes:
      auroc: the AUROC on all images (OOD = positive class; larger scores = more OOD).
      low, high: the ``level`` percentile-bootstrap interval over images.
    """

    auroc: float
    low: float
    high: float


def auroc_with_ci(key: PRNGKey, id_scores, ood_scores, num_resamples: int = 1000,
                  level: float = 0.95) -> AurocCI:
    """AUROC of separating ``ood_scores`` from ``id_scores`` (larger = more OOD), with a
    percentile-bootstrap CI resampling the pooled images (``metrics.bootstrap_ci`` of
    ``metrics.auroc``), as in the GEPC study's tables.

    Args:
      key: PRNG key of the bootstrap.
      id_scores: [N_id] scores of in-distribution images.
      ood_scores: [N_ood] scores of OOD images.
      num_resamples: bootstrap resamples (>= 2).
      level: the interval's coverage in (0, 1).

    Returns:
      ``AurocCI(auroc, low, high)`` (Python floats).

    Raises:
      ValueError: scores not 1-D, empty or NaN (``metrics.auroc``), bad ``num_resamples``.

    Example:
      >>> import jax, numpy as np
      >>> from jaxlab.gepc import ood
      >>> rng = np.random.default_rng(0)
      >>> r = ood.auroc_with_ci(jax.random.key(0), rng.normal(size=200),
      ...                       rng.normal(size=200) + 2.0, num_resamples=200)
      >>> 0.85 < r.auroc < 0.97 and r.low <= r.auroc <= r.high
      True
    """
    for name, x in (("id_scores", id_scores), ("ood_scores", ood_scores)):
        validation.check_real(name, x)
        validation.check_ndim(name, x, 1)
        validation.check_nonempty(name, x)
        if np.any(np.isnan(np.asarray(x, np.float64))):
            raise ValueError(f"`{name}` must not contain NaN, got "
                             f"{int(np.isnan(np.asarray(x, np.float64)).sum())} NaN entries.")
    s = np.concatenate([np.asarray(id_scores), np.asarray(ood_scores)])
    lab = np.concatenate([np.zeros(len(id_scores), bool), np.ones(len(ood_scores), bool)])
    point, lo, hi = metrics.bootstrap_ci(key, metrics.auroc, (jnp.asarray(s, jnp.float32), lab),
                                         num_resamples, level)
    return AurocCI(float(point), float(lo), float(hi))
