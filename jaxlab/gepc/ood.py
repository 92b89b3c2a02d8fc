"""The GEPC OOD detector as an ``Algorithm``: fit on ID images, then score batches.

    alg = gepc.detector(eps_fn)                    # constructor: checks, binds settings
    state = alg.init(key, x_fit)                   # residual features of ID images -> KDEs
    state, info = alg.step(key, state, x)          # Info(scores [B], residuals [B, T, G])

``init(key, x_fit, score_fn, ...)`` / ``step(key, state, x, score_fn, ...)`` take the score
function and settings as arguments (``detector`` closes over them). ``init`` computes the
residuals r_g(x) (``residual.gepc_residuals``: the key draws the forward noise, shared
across g) of the ID images and fits ``scoring.fit`` (the ``num_t`` lowest-CV times, one 1-D
Gaussian KDE per feature, inverse-CV weights); ``step`` computes the residuals of ``x``
and their OOD scores (larger = more OOD). The state does not change across steps: GEPC
has no online update, the step is the detector's forward pass. Each call evaluates the
score model on (1 + G) T copies of its batch at once: split large sets into batches.

Checks: ``x_fit`` / ``x`` [B, H, W, C] finite, then those of ``residual.gepc_residuals``
(``ts`` in (0, 1], ``rho``, ``group``, ``score_fn``'s output shape) and ``scoring.fit`` /
``scoring.score`` (two rows or more, ``num_t`` in [1, T], the fitted feature layout);
``detector`` also checks ``sqrt_abars`` in (0, 1], ``group``, ``rho``, ``num_t`` before any
call. Value checks skip traced arrays.
"""

from typing import NamedTuple

import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Algorithm, Array, PRNGKey
from jaxlab.gepc import groups, residual, schedule, scoring

#: sqrt(abar) of the candidate times in the public code.
SQRT_ABARS = (0.99997, 0.9999, 0.9979, 0.9969)


class State(NamedTuple):
    """The fitted scorer (``scoring.KDEScorer`` without its static ``log_features`` flag).

    Attributes:
      t_index: [num_t] int, the selected times (indices into ``ts``).
      train: [N, num_t G] ID-train features at the selected times (logs if log_features).
      bandwidth: [num_t G] Silverman bandwidths of the KDEs.
      weights: [num_t G] inverse-CV weights (sum to one).
    """

    t_index: Array
    train: Array
    bandwidth: Array
    weights: Array


class Info(NamedTuple):
    """scores: [B] OOD scores (larger = more OOD); residuals: [B, T, G] the features r_g at
    every time of ``ts`` and group element."""

    scores: Array
    residuals: Array


def _check_images(name, x):
    validation.check_ndim(name, x, 4)
    validation.check_finite(name, x)


def init(key: PRNGKey, x_fit: Array, score_fn: residual.ScoreFn, *, ts,
         group=groups.DEFAULT_GROUP, rho: float = 0.3, num_t: int = 2,
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
      log_features: fit the KDEs to log residuals (our extension; False = public code).

    Returns:
      State.
    """
    _check_images("x_fit", x_fit)
    r = residual.gepc_residuals(score_fn, x_fit, key, ts, group, rho)
    return State(*scoring.fit(r, num_t, log_features)[:4])


def step(key: PRNGKey, state: State, x: Array, score_fn: residual.ScoreFn, *, ts,
         group=groups.DEFAULT_GROUP, rho: float = 0.3,
         log_features: bool = False) -> tuple[State, Info]:
    """Scores a batch: residual features of ``x`` [B, H, W, C] and their OOD scores.

    Args: as ``init`` (``ts``, ``group``, ``rho``, ``log_features`` must be those of the
      fit); ``key`` draws this batch's forward noise.

    Returns:
      (``state`` unchanged, Info(scores [B], residuals [B, T, G])).
    """
    _check_images("x", x)
    r = residual.gepc_residuals(score_fn, x, key, ts, group, rho)
    return state, Info(scoring.score(scoring.KDEScorer(*state, log_features), r), r)


def detector(eps_fn, *, sqrt_abars=SQRT_ABARS, group=groups.DEFAULT_GROUP, rho: float = 0.3,
             num_t: int = 2, log_features: bool = False) -> Algorithm:
    """GEPC on the eps-prediction model ``eps_fn`` as an ``Algorithm``.

    ``init(key, x_fit) -> State``, ``step(key, state, x) -> (State, Info)``.

    Args:
      eps_fn: (x [B, H, W, C], t [B]) -> eps_theta (e.g. ``train.make_eps_fn``); the score
        is s = -eps_theta / sigma_t.
      sqrt_abars: candidate noise levels as sqrt(abar(t)) in (0, 1] (public-code values).
      group, rho, num_t, log_features: as ``init``.
    """
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
                    log_features=log_features)

    def step_fn(key: PRNGKey, state: State, x: Array) -> tuple[State, Info]:
        return step(key, state, x, score_fn, ts=ts, group=group, rho=rho,
                    log_features=log_features)

    return Algorithm(init_fn, step_fn)
