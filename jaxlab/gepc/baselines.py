"""OOD baselines on the same score model: score norm, MSMA-style, DiffPath-style.

* score norm: ||s(x_t)||, averaged over ``num_noise`` draws, at one small t.
* MSMA (Mahmood et al. 2021) style: norms ||sigma_t s(sqrt(abar_t) x0, t)|| = ||eps_theta||
  at ~10 noise levels (the model is VP, so the clean image is scaled, not noised), then a
  GMM on ID-train; the OOD score is the GMM negative log-likelihood.
* DiffPath (Heng et al. 2024) style: a deterministic DDIM inversion path from x0 to t = 1;
  features = sum ||eps_theta||^2 and sum ||delta eps_theta||^2 along the path (the rate
  and curvature of the path), then a GMM.
* denoising-error map (ours, the localisation baseline for GEPC's maps): per pixel
  (x0_hat - x0)^2 at time t, x0_hat = (x_t - sigma_t eps_theta(x_t, t)) / sqrt(abar_t).

Checks (eager, before ``jit``): ``x0`` [B, H, W, C] finite; ``score_norm``: ``t`` in (0, 1],
``num_noise`` >= 1; ``msma_features``: ``ts`` in (0, 1]; ``diffpath_features``:
``num_steps`` >= 1, ``t0`` in (0, 1 - 1e-3); ``denoising_error_map``: ``ts`` in (0, 1].
"""

import functools

import jax
import jax.numpy as jnp

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey
from jaxlab.gepc import schedule


def _check_x0(x0):
    validation.check_ndim("x0", x0, 4)
    validation.check_finite("x0", x0)


def score_norm(eps_fn, x0: Array, key: PRNGKey, t: float = 0.01, num_noise: int = 1) -> Array:
    """[B] mean ||s(x_t)|| at time t in (0, 1], over ``num_noise`` >= 1 noise draws."""
    _check_x0(x0)
    validation.check_in_range("t", t, 0.0, 1.0, low_inclusive=False)
    validation.check_positive_int("num_noise", num_noise)
    return _score_norm(eps_fn, x0, key, t, num_noise)


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
    return _msma_features(eps_fn, x0, ts)


@functools.partial(jax.jit, static_argnames="eps_fn")
def _msma_features(eps_fn, x0, ts):
    b = x0.shape[0]

    def at(t):
        tb = jnp.full((b,), t)
        return jnp.sqrt(jnp.sum(eps_fn(jnp.sqrt(schedule.alpha_bar(t)) * x0, tb) ** 2,
                                axis=(1, 2, 3)))

    return jax.lax.map(at, jnp.asarray(ts, jnp.float32)).T


def diffpath_features(eps_fn, x0: Array, num_steps: int = 10, t0: float = 1e-3) -> Array:
    """[B, 2] (sum ||eps||^2, sum ||delta eps||^2) along a DDIM inversion path of
    ``num_steps`` >= 1 steps from ``t0`` in (0, 1 - 1e-3) to 1 - 1e-3."""
    _check_x0(x0)
    validation.check_positive_int("num_steps", num_steps)
    validation.check_in_range("t0", t0, 0.0, 1.0 - 1e-3, low_inclusive=False,
                              high_inclusive=False)
    return _diffpath_features(eps_fn, x0, num_steps, t0)


@functools.partial(jax.jit, static_argnames=("eps_fn", "num_steps", "t0"))
def _diffpath_features(eps_fn, x0, num_steps, t0):
    b = x0.shape[0]
    ts = jnp.linspace(t0, 1.0 - 1e-3, num_steps + 1)

    def step(carry, tt):
        x, prev_eps = carry
        t, t_next = tt
        tb = jnp.full((b,), t)
        e = eps_fn(x, tb)
        ab, ab_n = schedule.alpha_bar(t), schedule.alpha_bar(t_next)
        x0_hat = (x - jnp.sqrt(1 - ab) * e) / jnp.sqrt(ab)
        x_next = jnp.sqrt(ab_n) * x0_hat + jnp.sqrt(1 - ab_n) * e
        feats = jnp.stack([jnp.sum(e**2, (1, 2, 3)), jnp.sum((e - prev_eps) ** 2, (1, 2, 3))], 1)
        return (x_next, e), feats

    x_start = jnp.sqrt(schedule.alpha_bar(ts[0])) * x0
    (_, _), feats = jax.lax.scan(step, (x_start, jnp.zeros_like(x0)), (ts[:-1], ts[1:]))
    f = feats.sum(0)
    # The first delta is against zeros; drop it from the curvature term.
    return f.at[:, 1].add(-feats[0, :, 1])


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
