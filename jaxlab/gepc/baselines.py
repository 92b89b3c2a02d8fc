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
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey
from jaxlab.gepc import schedule


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


def score_norm(eps_fn, x0: Array, key: PRNGKey, t: float = 0.01, num_noise: int = 1) -> Array:
    """[B] mean ||s(x_t)|| at time t in (0, 1], over ``num_noise`` >= 1 noise draws."""
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


def denoising_error_map(eps_fn, x0: Array, key: PRNGKey, ts) -> Array:
    """[B, T, H, W] channel-mean (x0_hat - x0)^2 at each time of ``ts`` in (0, 1]."""
    _check_x0(x0)
    validation.check_in_range("ts", ts, 0.0, 1.0, low_inclusive=False)
    return _denoising_error_map(eps_fn, x0, key, jnp.atleast_1d(jnp.asarray(ts, jnp.float32)))


@functools.partial(jax.jit, static_argnames="eps_fn")
def _denoising_error_map(eps_fn, x0, key, ts):
    eps = jax.random.normal(key, (ts.shape[0],) + x0.shape)

    def at(te):
        t, e = te
        tb = jnp.full((x0.shape[0],), t)
        xt, sigma = schedule.noise(x0, e, tb)
        x0_hat = (xt - sigma * eps_fn(xt, tb)) / jnp.sqrt(schedule.alpha_bar(tb))[:, None,
                                                                                  None, None]
        return ((x0_hat - x0) ** 2).mean(-1)

    return jnp.moveaxis(jax.lax.map(at, (ts, eps)), 0, 1)
