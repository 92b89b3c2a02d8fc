"""A state-value critic trained on TD(lambda) targets, for truncated-horizon bootstrapping.

SHAC (Xu et al. 2022, Eq. 5-7): the policy loss over a short horizon H is closed by the
critic, L = -(1/H) sum_e [sum_{t<H} gamma^t r_t + gamma^H V(s_H)], and V is regressed on
TD(lambda) returns computed backward through the rollout,

    G_t = r_t + gamma * ((1 - lambda) V(s_{t+1}) + lambda G_{t+1}),   G_{H-1} = r + gamma V(s_H),

with V evaluated by a slowly moving target copy (Polyak averaging).
"""

import jax
from flax import nnx

from jaxlab.core import validation
from jaxlab.core.types import Array


class ValueNet(nnx.Module):
    """MLP V(obs) -> scalar."""

    def __init__(self, obs_dim: int, hidden: int, *, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(obs_dim, hidden, rngs=rngs)
        self.l2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, 1, rngs=rngs)

    def __call__(self, obs: Array) -> Array:
        """obs [..., O] -> [...]."""
        return self.out(jax.nn.silu(self.l2(jax.nn.silu(self.l1(obs)))))[..., 0]


def init(obs_dim: int, hidden: int, seed: int = 0):
    """(graphdef, params) of a fresh critic."""
    validation.check_positive_int("obs_dim", obs_dim)
    validation.check_positive_int("hidden", hidden)
    return nnx.split(ValueNet(obs_dim, hidden, rngs=nnx.Rngs(seed)))


def td_lambda_targets(rewards: Array, values: Array, gamma: float, lam: float) -> Array:
    """TD(lambda) returns (SHAC Eq. 7).

    Args:
      rewards: [T, ...] rewards r_0 .. r_{T-1}.
      values: [T + 1, ...] V(s_0) .. V(s_T) (only V(s_1) .. V(s_T) are used).
      gamma: discount in (0, 1]; lam: lambda in [0, 1].

    Returns:
      [T, ...] targets G_0 .. G_{T-1}.
    """
    if values.shape[0] != rewards.shape[0] + 1:
        raise ValueError(f"`values` must have {rewards.shape[0] + 1} rows (one per state incl. "
                         f"the last), got {values.shape[0]}.")
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"`lam` must lie in [0, 1], got {lam}.")

    def back(g_next, x):
        r, v_next = x
        g = r + gamma * ((1.0 - lam) * v_next + lam * g_next)
        return g, g

    _, g = jax.lax.scan(back, values[-1], (rewards, values[1:]), reverse=True)
    return g


def polyak(target, online, tau: float):
    """target <- (1 - tau) target + tau online."""
    return jax.tree.map(lambda t, o: (1.0 - tau) * t + tau * o, target, online)


def value_fn(graphdef):
    """(params, obs [..., O]) -> V [...]."""
    return lambda params, obs: nnx.merge(graphdef, params)(obs)


__all__ = ["ValueNet", "init", "td_lambda_targets", "polyak", "value_fn"]
