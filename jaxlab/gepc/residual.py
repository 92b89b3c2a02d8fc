"""The GEPC residual: group-equivariant posterior consistency of a diffusion score.

At noise level t, x_t = sqrt(abar) x0 + sqrt(1 - abar) eps and s(x) = -eps_theta(x, t) / sigma_t.
For each group element g,

    r_g(x) = P[(g^-1 s(g x_t) - s(x_t))^2] / (P[s(x_t)^2] + 1e-8),

where P pools a [H, W, C] map by a channel mean followed by the mean of the top
``rho`` fraction of |values| (rho = 0.3 in the public code). The per-pixel map is the
channel-mean of the ratio *before* pooling, averaged over g.

``consistency_features`` also returns the public code's per-t features
(RouzAY/gepc-diffusion, ``gepc/methods/gepc.py::_gepc_at_t``), each averaged over the
group *with the identity included* (n_G = |G| + 1 unless ``"id"`` is named):

  * ``gepc_s``      = (1 / n_G) sum_g r_g (the identity's r is exactly 0);
  * ``gepc_s_cos``  = (1 / n_G) sum_g (1 - cos(g^-1 s(g x_t), s(x_t))), cosine over all
    pixels and channels with norms clamped at 1e-6;
  * ``gepc_s_pair`` = mean over pairs i < j of the n_G back-transformed scores of
    P[(s_i - s_j)^2] / (P[s(x_t)^2] + 1e-8).

Same forward noise and the same (1 + |G|) score evaluations per t as the residuals.

Blind spot (exact, any score function): for a self-inverse g (hflip, vflip, rot180) and
an image g x noised with g eps (so its x_t is g x_t), the numerator of r_g is
P[(g s(x_t) - s(g x_t))^2] = P[g (s(x_t) - g^-1 s(g x_t))^2] = the numerator of r_g on
(x, eps), because P is invariant to pixel permutations. The g-term of GEPC therefore
cannot tell g x from x; only the other elements' terms and the denominator can.

Checks (eager, before ``jit``): ``x0`` is [B, H, W, C] and finite; ``ts`` in (0, 1] (NaN
rejected); ``rho`` in (0, 1]; ``group`` names known (rotations need square images);
``score_fn`` returns the shape of its input (by ``jax.eval_shape``, no compute); ``noise``
is [T, B, H, W, C].
``top_rho_pool`` checks ``m`` is 4-D and ``rho`` in (0, 1].
"""

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import checked, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Array, PRNGKey
from jaxlab.gepc import groups, schedule

__all__ = ["ScoreFn", "top_rho_pool", "score_from_eps", "OFFICIAL_FEATURES",
    "consistency_features", "gepc_residuals"]

checked.declare("jaxlab.gepc.residual.gepc_residuals", "jaxlab.gepc.residual.consistency_features")

ScoreFn = Callable[[Array, Array], Array]  # (x [B, H, W, C], t [B]) -> score [B, H, W, C]


def top_rho_pool(m: Array, rho: float) -> Array:
    """P[m]: channel mean, then the mean of the top-rho fraction of |values|. [B,H,W,C] -> [B]."""
    validation.check_ndim("m", m, 4)
    validation.check_in_range("rho", rho, 0.0, 1.0, low_inclusive=False)
    v = jnp.abs(m.mean(-1)).reshape(m.shape[0], -1)
    k = max(1, int(round(rho * v.shape[1])))
    return jax.lax.top_k(v, k)[0].mean(-1)


def score_from_eps(eps_fn: Callable[[Array, Array], Array]) -> ScoreFn:
    """s(x, t) = -eps_theta(x, t) / sigma_t for an eps-prediction model.

    Raises:
      TypeError: ``eps_fn`` is not callable (e.g. a model's params:
        ``train.make_eps_fn(model, params)`` makes the function).
    """
    if not callable(eps_fn):
        raise TypeError(f"`eps_fn` must be a function (x [B, H, W, C], t [B]) -> eps, got "
                        f"{type(eps_fn).__name__}.")

    def score(x, t):
        sigma = jnp.sqrt(1.0 - schedule.alpha_bar(t))[:, None, None, None]
        return -eps_fn(x, t) / sigma
    return score


def _traced_inputs(x0, ts) -> None:
    """Checked-mode checks of traced images and times."""
    checked.check(jnp.all(jnp.isfinite(x0)), "`x0` must be finite.")
    checked.check(jnp.all((ts > 0) & (ts <= 1)), "`ts` must lie in (0, 1].")


def _check(x0, ts, rho, where):
    validation.check_real("x0", x0)
    validation.check_ndim("x0", x0, 4)
    validation.check_nonempty("x0", x0)
    validation.check_finite("x0", x0)
    validation.check_in_range("rho", rho, 0.0, 1.0, low_inclusive=False)
    validation.check_ndim("ts", ts, 1)
    validation.check_nonempty("ts", ts)
    validation.check_in_range("ts", ts, 0.0, 1.0, low_inclusive=False)
    checked.guard(where, _traced_inputs, x0, ts)


def _check_score_fn(score_fn, x0):
    x = jax.ShapeDtypeStruct((2 * x0.shape[0],) + tuple(x0.shape[1:]), jnp.float32)
    t = jax.ShapeDtypeStruct((2 * x0.shape[0],), jnp.float32)
    out = jax.eval_shape(score_fn, x, t)
    if getattr(out, "shape", None) != x.shape:
        raise ValueError(f"`score_fn` must map x {x.shape} and t {t.shape} to a score of shape "
                         f"{x.shape}, got {getattr(out, 'shape', type(out).__name__)}.")
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise TypeError(f"`score_fn` must return floats, got {out.dtype}.")


def _check_outputs(*arrays) -> None:
    """ValueError naming ``score_fn`` when concrete residuals / features are not finite
    (a NaN / inf score; the residuals of finite scores are finite)."""
    for a in arrays:
        if a is None or isinstance(a, jax.core.Tracer):
            continue
        if not np.all(np.isfinite(np.asarray(a))):
            raise ValueError("`score_fn` returned non-finite scores: the residuals hold "
                             f"{int((~np.isfinite(np.asarray(a))).sum())} NaN/inf entries.")


#: Names of the public code's per-t features, the columns of ``consistency_features``.
OFFICIAL_FEATURES = ("gepc_s", "gepc_s_cos", "gepc_s_pair")


@checked.boundary
def consistency_features(key: PRNGKey | None, score_fn: ScoreFn, x0: Array, ts, *,
                         group=groups.DEFAULT_GROUP, rho: float = 0.3,
                         with_maps: bool = False, noise: Array | None = None):
    """Per-element residuals and the public code's per-t features in one pass.

    Args: as ``gepc_residuals`` (``noise`` [T, B, H, W, C] replaces the draw from ``key``,
      e.g. rows of a draw made for more times, to evaluate some of them only).

    Returns:
      (residuals [B, T, G], features [B, T, 3]) with the feature columns
      ``OFFICIAL_FEATURES`` (module docstring), and maps [B, T, H, W] when ``with_maps``.
    """
    key = as_key(key) if noise is None else key
    ts = jnp.atleast_1d(jnp.asarray(ts, jnp.float32))
    _check(x0, ts, rho, "jaxlab.gepc.residual.consistency_features")
    elems = groups.get(group, x0.shape)
    _check_score_fn(score_fn, x0)
    if noise is None:
        noise = jax.random.normal(key, (ts.shape[0],) + tuple(x0.shape))
    validation.check_shape("noise", noise, (ts.shape[0],) + tuple(x0.shape))
    r, f, maps = _consistency(score_fn, jnp.asarray(x0, jnp.float32), noise, ts, tuple(elems),
                              rho, with_maps, "id" in tuple(group))
    _check_outputs(r, f)
    return (r, f, maps) if with_maps else (r, f)


@checked.boundary
def gepc_residuals(key: PRNGKey | None, score_fn: ScoreFn, x0: Array, ts, *,
                   group=groups.DEFAULT_GROUP, rho: float = 0.3, with_maps: bool = False,
                   noise: Array | None = None):
    """Residuals r_g at every t and group element, vmapped in one jitted call.

    Args:
      key: PRNG key for the forward noise (shared across g, as in the public code; typed,
        or a legacy ``uint32`` key); may be None when ``noise`` is given.
      score_fn: (x [B, H, W, C], t [B]) -> score.
      x0: [B, H, W, C] clean images in [-1, 1].
      ts: [T] diffusion times in (0, 1].
      group: names of group elements (see groups.ELEMENTS).
      rho: top fraction kept by the pooling, in (0, 1].
      with_maps: also return the per-pixel maps.
      noise: optional [T, B, H, W, C] forward noise (default: drawn from ``key``).

    Returns:
      residuals [B, T, G] (and maps [B, T, H, W] averaged over g when ``with_maps``).
    """
    key = as_key(key) if noise is None else key
    ts = jnp.atleast_1d(jnp.asarray(ts, jnp.float32))
    _check(x0, ts, rho, "jaxlab.gepc.residual.gepc_residuals")
    elems = groups.get(group, x0.shape)
    _check_score_fn(score_fn, x0)
    if noise is None:
        noise = jax.random.normal(key, (ts.shape[0],) + tuple(x0.shape))
    validation.check_shape("noise", noise, (ts.shape[0],) + tuple(x0.shape))
    r, _, maps = _consistency(score_fn, jnp.asarray(x0, jnp.float32), noise, ts, tuple(elems),
                              rho, with_maps, "id" in tuple(group))
    _check_outputs(r)
    return (r, maps) if with_maps else r


def _cosine(a, b, tau=1e-6):
    """Cosine over all but the leading axis of a, b [..., B, H, W, C] -> [..., B]."""
    dot = (a * b).sum((-3, -2, -1))
    na = jnp.maximum(jnp.sqrt((a**2).sum((-3, -2, -1))), tau)
    nb = jnp.maximum(jnp.sqrt((b**2).sum((-3, -2, -1))), tau)
    return dot / (na * nb)


@functools.partial(jax.jit, static_argnames=("score_fn", "elems", "rho", "with_maps",
                                             "has_identity"))
def _consistency(score_fn, x0, eps, ts, elems, rho, with_maps, has_identity):
    n_g = len(elems) + (0 if has_identity else 1)  # the public code averages over G incl. id

    def at_t(t, e):
        xt, _ = schedule.noise(x0, e, t)
        # One batched score evaluation for x_t and all g x_t: [(1 + G) B, H, W, C].
        xs = jnp.concatenate([xt] + [el.forward(xt) for el in elems])
        scores = score_fn(xs, jnp.full((xs.shape[0],), t)).reshape((1 + len(elems),) + x0.shape)
        s = scores[0]
        denom = top_rho_pool(s**2, rho) + 1e-8
        back = jnp.stack([el.inverse(scores[i + 1]) for i, el in enumerate(elems)])
        diff2 = (back - s) ** 2  # [G, B, H, W, C]
        r = jax.vmap(lambda d: top_rho_pool(d, rho) / denom)(diff2)  # [G, B]
        cos = 1.0 - _cosine(back, s[None])  # [G, B]
        full = back if has_identity else jnp.concatenate([s[None], back])
        ii, jj = jnp.triu_indices(n_g, 1)
        pair = jax.vmap(lambda i, j: top_rho_pool((full[i] - full[j]) ** 2, rho) / denom)(
            ii, jj).mean(0)  # [B]
        feats = jnp.stack([r.sum(0) / n_g, cos.sum(0) / n_g, pair], -1)  # [B, 3]
        maps = (diff2.mean(-1) / denom[None, :, None, None]).mean(0) if with_maps else None
        return r.T, feats, maps

    r, f, m = jax.lax.map(lambda te: at_t(*te), (ts, eps))  # [T, B, G], [T, B, 3], maps
    return (jnp.moveaxis(r, 0, 1), jnp.moveaxis(f, 0, 1),
            jnp.moveaxis(m, 0, 1) if with_maps else None)
