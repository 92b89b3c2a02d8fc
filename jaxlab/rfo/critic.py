"""A state-value critic trained on TD(lambda) targets, for truncated-horizon bootstrapping.

SHAC (Xu et al. 2022, Eq. 5-7): the policy loss over a short horizon H is closed by the
critic, L = -(1/H) sum_e [sum_{t<H} gamma^t r_t + gamma^H V(s_H)], and V is regressed on
TD(lambda) returns computed backward through the rollout,

    G_t = r_t + gamma * ((1 - lambda) V(s_{t+1}) + lambda G_{t+1}),   G_{H-1} = r + gamma V(s_H),

with V evaluated by a slowly moving target copy, updated after each critic fit by SHAC's
Polyak rule (Xu et al. 2022, Alg. 1; ``polyak``)

    target <- alpha * target + (1 - alpha) * online,   alpha = 0.2

(alpha is the fraction of the *target* kept).

Episode boundaries follow brax's ``compute_gae``: ``termination[t] = 1`` means s_{t+1} is
terminal (no bootstrap: G_t = r_t); ``truncation[t] = 1`` means the transition t crossed a
time-limit reset, so s_{t+1} is not the true next state and the step gives no target
(G_t = V(s_t)), and the trace is cut there without treating s_t as terminal. Without
masks (the default; no task in ``envs`` terminates) the original recursion runs unchanged.

Checks (eager, at the Python boundary, on concrete values; traced values pass):
``td_lambda_targets``: ``values`` has T + 1 rows and the trailing shape of ``rewards``;
``rewards`` / ``values`` finite; ``gamma`` and ``lam`` in [0, 1]; masks of ``rewards``'
shape with entries in {0, 1}. ``polyak``: ``alpha`` in [0, 1]. ``init``: positive sizes.
Nothing is checked inside compiled code.
"""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxlab.core import checked, validation
from jaxlab.core.types import Array, PRNGKey


class ValueNet(nnx.Module):
    """MLP V(obs) -> scalar."""

    def __init__(self, obs_dim: int, hidden: int, *, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(obs_dim, hidden, rngs=rngs)
        self.l2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, 1, rngs=rngs)

    def __call__(self, obs: Array) -> Array:
        """obs [..., O] -> [...]."""
        return self.out(jax.nn.silu(self.l2(jax.nn.silu(self.l1(obs)))))[..., 0]


def init(key: PRNGKey, obs_dim: int, hidden: int):
    """(graphdef, params) of a critic with weights drawn from ``key``."""
    validation.check_positive_int("obs_dim", obs_dim)
    validation.check_positive_int("hidden", hidden)
    return nnx.split(ValueNet(obs_dim, hidden, rngs=nnx.Rngs(key)))


def _traced_returns(rewards, values, gamma, lam) -> None:
    """Checked-mode checks of traced return inputs."""
    checked.check(jnp.all(jnp.isfinite(rewards)), "`rewards` must be finite.")
    checked.check(jnp.all(jnp.isfinite(values)), "`values` must be finite.")
    checked.check((gamma >= 0) & (gamma <= 1), "`gamma` must lie in [0, 1], got {g}.", g=gamma)
    checked.check((lam >= 0) & (lam <= 1), "`lam` must lie in [0, 1], got {l}.", l=lam)


def _check_return_scale(rewards, values, gamma) -> None:
    """ValueError when concrete returns may overflow their dtype: |G_t| <= max|r| *
    min(T, 1 / (1 - gamma)) + max|V| (the bound is computed in float64 on the host)."""
    if any(isinstance(x, jax.core.Tracer) for x in (rewards, values, gamma)):
        return
    r = float(np.max(np.abs(np.asarray(rewards, np.float64)), initial=0.0))
    v = float(np.max(np.abs(np.asarray(values, np.float64)), initial=0.0))
    g = float(gamma)
    horizon = np.shape(rewards)[0] if g >= 1.0 else min(np.shape(rewards)[0], 1.0 / (1.0 - g))
    bound = r * horizon + v
    dtype = jnp.result_type(rewards, values)
    top = float(jnp.finfo(dtype).max) if jnp.issubdtype(dtype, jnp.floating) else np.inf
    if not bound <= top:
        raise ValueError(f"`rewards` / `values` are too large for {jnp.dtype(dtype).name} "
                         f"returns: max|r| * horizon + max|V| = {bound:.3g} > {top:.3g}; "
                         "rescale them.")


def check_return_inputs(rewards, values, gamma, lam, termination=None,
                        truncation=None, where: str = "jaxlab.rfo.critic.td_lambda_targets"
                        ) -> None:
    """Shared checks of ``td_lambda_targets`` and ``ppo.gae`` (eager; in checked mode also
    traced values, as checks of ``where``; see module doc)."""
    if np.ndim(rewards) < 1:
        raise ValueError(f"`rewards` must be [T, ...], got shape {np.shape(rewards)}.")
    if np.shape(values)[:1] != (np.shape(rewards)[0] + 1,):
        raise ValueError(f"`values` must have {np.shape(rewards)[0] + 1} rows (one per state "
                         f"incl. the last), got shape {np.shape(values)}.")
    if np.shape(values)[1:] != np.shape(rewards)[1:]:
        raise ValueError(f"`values` must have the trailing shape of `rewards` "
                         f"{np.shape(rewards)[1:]}, got {np.shape(values)[1:]}.")
    validation.check_finite("rewards", rewards)
    validation.check_finite("values", values)
    validation.check_real("rewards", rewards)
    validation.check_real("values", values)
    validation.check_nonempty("rewards", rewards)
    validation.check_in_range("gamma", gamma, 0.0, 1.0)
    validation.check_in_range("lam", lam, 0.0, 1.0)
    _check_return_scale(rewards, values, gamma)
    checked.guard(where, _traced_returns, rewards, values, gamma, lam)
    for name, m in (("termination", termination), ("truncation", truncation)):
        if m is None:
            continue
        validation.check_shape(name, m, np.shape(rewards))
        if not isinstance(m, jax.core.Tracer):
            v = np.asarray(m)
            if not np.all((v == 0) | (v == 1)):
                raise ValueError(f"`{name}` must hold only 0 / 1 flags, got values "
                                 f"{np.unique(v)[:5]}.")


def _masks(rewards, termination, truncation):
    zeros = jnp.zeros_like(rewards)
    d = zeros if termination is None else jnp.asarray(termination, rewards.dtype)
    tr = zeros if truncation is None else jnp.asarray(truncation, rewards.dtype)
    return d, tr


@checked.boundary
def td_lambda_targets(rewards: Array, values: Array, gamma: float, lam: float,
                      termination: Array | None = None,
                      truncation: Array | None = None) -> Array:
    """TD(lambda) returns (SHAC Eq. 7), equal to brax ``compute_gae``'s ``vs``.

    Args:
      rewards: [T, ...] rewards r_0 .. r_{T-1}.
      values: [T + 1, ...] V(s_0) .. V(s_T) (V(s_0) .. V(s_{T-1}) are used only at
        truncated steps).
      gamma: discount in [0, 1]; lam: lambda in [0, 1].
      termination: optional [T, ...] 0/1, s_{t+1} terminal (no bootstrap).
      truncation: optional [T, ...] 0/1, step t crossed a time-limit reset (no target:
        G_t = V(s_t); the trace is cut).

    Returns:
      [T, ...] targets G_0 .. G_{T-1}.
    """
    check_return_inputs(rewards, values, gamma, lam, termination, truncation)
    if termination is not None or truncation is not None:
        d, tr = _masks(rewards, termination, truncation)

        def back_masked(g_next, x):
            r, v, v_next, d_t, tr_t = x
            g = r + gamma * (1.0 - d_t) * ((1.0 - lam) * v_next + lam * g_next)
            g = jnp.where(tr_t > 0, v, g)
            return g, g

        _, g = jax.lax.scan(back_masked, values[-1], (rewards, values[:-1], values[1:], d, tr),
                            reverse=True)
        return g

    def back(g_next, x):
        r, v_next = x
        g = r + gamma * ((1.0 - lam) * v_next + lam * g_next)
        return g, g

    _, g = jax.lax.scan(back, values[-1], (rewards, values[1:]), reverse=True)
    return g


def polyak(target, online, alpha: float = 0.2):
    """SHAC's target-critic update: target <- alpha * target + (1 - alpha) * online.

    Args:
      target: pytree of target-critic parameters.
      online: pytree of the same structure, the freshly fitted critic.
      alpha: the fraction of ``target`` kept, in [0, 1] (SHAC: 0.2; 1 freezes the target,
        0 copies the online critic).

    Returns:
      The new target pytree.
    """
    validation.check_in_range("alpha", alpha, 0.0, 1.0)
    return jax.tree.map(lambda t, o: alpha * t + (1.0 - alpha) * o, target, online)


def value_fn(graphdef):
    """(params, obs [..., O]) -> V [...]."""
    return lambda params, obs: nnx.merge(graphdef, params)(obs)


__all__ = ["ValueNet", "init", "td_lambda_targets", "polyak", "value_fn"]

checked.declare("jaxlab.rfo.critic.td_lambda_targets")
