"""Tabular MDPs: the container and the study's families (Garnet, chain, sparse reward,
Bernoulli rewards), plus the stationary distribution of the uniform behaviour policy.

Families (four; the dynamics generators are ours, standard in the
literature): ``garnet`` (Archibald et al. 1995), ``chain`` (an exploration chain),
``sparse_reward`` (Garnet dynamics, reward 1 on one random (s, a), 0 elsewhere; meant
for gamma = 0.99) and ``with_bernoulli_rewards`` (any MDP with mean rewards in [0, 1]
whose sampled reward is Bernoulli(r(s, a)) instead of r(s, a)).

Checks (eager, at the Python boundary, on concrete values; traced values pass):
  * ``make_mdp`` / ``check_mdp``: ``transitions`` [S, A, S] non-negative, finite, each
    P[s, a, :] summing to 1; ``rewards`` [S, A] finite; ``gamma`` in [0, 1) (``make_mdp``)
    or [0, 1] (``check_mdp``, the weakest requirement; value iteration asks for < 1).
  * ``garnet``: ``num_states``, ``num_actions``, ``branching`` positive integers with
    ``branching`` <= ``num_states``; ``gamma`` in [0, 1); ``key`` concrete (the draw is
    made on the host with NumPy, ``host_rng``).
  * ``chain``: ``num_states`` >= 2; ``gamma`` in [0, 1); ``success_prob`` in (0, 1];
    ``far_reward`` and ``near_reward`` finite.
  * ``sparse_reward``: as ``garnet``, plus ``num_rewarding`` in [1, S A].
  * ``with_bernoulli_rewards``: a valid MDP with every r(s, a) in [0, 1].
  * ``stationary_distribution``: a valid MDP; raises ValueError when the uniform
    behaviour policy's chain is reducible (some state has probability < 1e-9), since
    trajectory sampling then never visits some (s, a) and xi = 0.
  * ``make_mdp`` / ``check_mdp`` also need S >= 1, A >= 1, a scalar ``gamma`` and rewards
    small enough for float32 Q-values: max |r| / (1 - gamma) <= ``MAX_Q`` (~8.5e37, so a
    TD error cannot overflow).
In checked mode (``jaxlab.core.checks(True)``) the runs of ``periodic_q`` check a traced
MDP's rewards the same way and that Q stays finite (``check_mdp_traced``).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import checked, validation
from jaxlab.core.types import Array, PRNGKey

checked.declare("jaxlab.qlearning.make_mdp")

# Largest |Q| allowed: a TD error (r + gamma max Q' - Q) and its square-free update then
# stay below float32's max (3.4e38).
MAX_Q = float(np.finfo(np.float32).max) / 4.0


class TabularMDP(NamedTuple):
    """A finite discounted MDP with deterministic expected rewards.

    Attributes:
      transitions: [S, A, S] P(s' | s, a); rows sum to one.
      rewards: [S, A] expected reward r(s, a).
      gamma: scalar discount in [0, 1).
      bernoulli: ``None`` (the sampled reward is r(s, a)) or a bool scalar; when True the
        sampled reward is Bernoulli(r(s, a)) (``with_bernoulli_rewards``), with the same
        mean, so Q* and value iteration are unchanged.
    """

    transitions: Array
    rewards: Array
    gamma: Array
    bernoulli: Array | None = None

    @property
    def num_states(self) -> int:
        return self.transitions.shape[0]

    @property
    def num_actions(self) -> int:
        return self.transitions.shape[1]


@checked.boundary
def make_mdp(transitions, rewards, gamma) -> TabularMDP:
    """Validates and builds a TabularMDP.

    Args:
      transitions: [S, A, S] non-negative, each P[s, a] summing to one.
      rewards: [S, A].
      gamma: discount in [0, 1).

    Raises:
      ValueError: naming the argument whose shape or range is wrong.
    """
    validation.check_ndim("transitions", transitions, 3)
    s, a, s2 = np.shape(transitions)
    if s != s2 or s < 1 or a < 1:
        raise ValueError(f"`transitions` must have shape (S, A, S) with S, A >= 1, got "
                         f"{(s, a, s2)}.")
    validation.check_shape("rewards", rewards, (s, a))
    _check_gamma("gamma", gamma)
    validation.check_in_range("gamma", gamma, 0.0, 1.0, high_inclusive=False)
    _check_transitions("transitions", transitions)
    validation.check_finite("rewards", rewards)
    _check_reward_scale("rewards", rewards, gamma)
    checked.guard("jaxlab.qlearning.make_mdp", _traced_make_mdp, transitions, rewards, gamma)
    return TabularMDP(jnp.asarray(transitions, jnp.float32), jnp.asarray(rewards, jnp.float32),
                      jnp.asarray(gamma, jnp.float32))


def _traced_make_mdp(transitions, rewards, gamma) -> None:
    """Checked-mode checks of ``make_mdp``'s traced arguments."""
    r = jnp.max(jnp.abs(rewards))
    checked.check(jnp.all(jnp.isfinite(rewards)), "`rewards` must be finite.")
    checked.check((gamma >= 0) & (gamma < 1), "`gamma` must lie in [0, 1), got {g}.", g=gamma)
    checked.check(r <= MAX_Q * (1.0 - jnp.clip(gamma, 0.0, 1.0)),
                  "`rewards` are too large for float32 Q-values: max |r| = {r}.", r=r)
    rows = jnp.sum(transitions, -1)
    checked.check(jnp.all(transitions >= 0) & jnp.all(jnp.abs(rows - 1.0) <= 1e-5),
                  "`transitions` must be non-negative with rows summing to 1.")


def _check_gamma(name: str, gamma) -> None:
    """TypeError unless ``gamma`` is a real scalar (a list or an array of them is not)."""
    if isinstance(gamma, bool) or np.ndim(gamma) != 0 or isinstance(gamma, list | tuple):
        raise TypeError(f"`{name}` must be a real scalar, got {type(gamma).__name__} "
                        f"of shape {np.shape(gamma)}.")
    dtype = gamma.dtype if hasattr(gamma, "dtype") else np.asarray(gamma).dtype
    if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)):
        raise TypeError(f"`{name}` must be a real scalar, got dtype {dtype}.")


def _check_reward_scale(name: str, rewards, gamma) -> None:
    """ValueError if max |r| / (1 - gamma) exceeds ``MAX_Q`` (concrete values only)."""
    if isinstance(rewards, jax.core.Tracer) or isinstance(gamma, jax.core.Tracer):
        return
    g = float(gamma)
    r = float(np.max(np.abs(np.asarray(rewards, np.float64)), initial=0.0))
    if g < 1.0 and r / (1.0 - g) > MAX_Q:
        raise ValueError(f"`{name}` are too large for float32 Q-values: max |r| / (1 - gamma) "
                         f"= {r / (1.0 - g):.3g} > {MAX_Q:.3g}; rescale the rewards.")


def check_mdp_traced(mdp: TabularMDP) -> None:
    """Checked-mode checks of a (possibly traced) MDP: finite rewards within ``MAX_Q``
    (1 - gamma) and rows of ``mdp.transitions`` summing to one (no-op outside checked mode)."""
    r = jnp.max(jnp.abs(mdp.rewards))
    checked.check(jnp.all(jnp.isfinite(mdp.rewards)), "`mdp.rewards` must be finite.")
    checked.check(r <= MAX_Q * (1.0 - jnp.minimum(mdp.gamma, 1.0)),
                  "`mdp.rewards` are too large for float32 Q-values: max |r| = {r}.", r=r)
    rows = jnp.sum(mdp.transitions, -1)
    checked.check(jnp.all(mdp.transitions >= 0) & jnp.all(jnp.abs(rows - 1.0) <= 1e-5),
                  "`mdp.transitions` must be non-negative with rows summing to 1.")


def _check_transitions(name: str, transitions) -> None:
    """Raises ValueError unless a concrete P is finite, non-negative, rows summing to 1."""
    if isinstance(transitions, jax.core.Tracer):
        return
    validation.check_finite(name, transitions)
    p = np.asarray(transitions, np.float64)
    if np.any(p < 0) or not np.allclose(p.sum(-1), 1.0, atol=1e-5):
        rows = np.abs(p.sum(-1) - 1.0)
        raise ValueError(f"`{name}` must be non-negative with each P[s, a, :] summing to 1; "
                         f"min entry {p.min():.3g}, max |row sum - 1| {rows.max():.3g}.")


def check_mdp(mdp: TabularMDP) -> None:
    """Validates a ``TabularMDP`` built by hand (``make_mdp`` does this on construction).

    Raises:
      ValueError: naming ``mdp.transitions``, ``mdp.rewards`` or ``mdp.gamma``.
    """
    validation.check_ndim("mdp.transitions", mdp.transitions, 3)
    s, a, s2 = np.shape(mdp.transitions)
    if s != s2 or s < 1 or a < 1:
        raise ValueError(f"`mdp.transitions` must have shape (S, A, S) with S, A >= 1, got "
                         f"{(s, a, s2)}.")
    validation.check_shape("mdp.rewards", mdp.rewards, (s, a))
    _check_gamma("mdp.gamma", mdp.gamma)
    validation.check_in_range("mdp.gamma", mdp.gamma, 0.0, 1.0)
    _check_transitions("mdp.transitions", mdp.transitions)
    validation.check_finite("mdp.rewards", mdp.rewards)
    _check_reward_scale("mdp.rewards", mdp.rewards, mdp.gamma)
    if mdp.bernoulli is not None and not isinstance(mdp.rewards, jax.core.Tracer):
        r = np.asarray(mdp.rewards)
        if bool(np.asarray(mdp.bernoulli)) and (r.min() < 0 or r.max() > 1):
            raise ValueError(f"`mdp.rewards` must lie in [0, 1] when `mdp.bernoulli` is set "
                             f"(they are Bernoulli means), got [{r.min():.3g}, {r.max():.3g}].")


def garnet(key: PRNGKey, num_states: int, num_actions: int, branching: int,
           gamma: float) -> TabularMDP:
    """A random Garnet MDP (Archibald et al., 1995).

    Each (s, a) moves to ``branching`` distinct next states chosen uniformly, with
    probabilities from a flat Dirichlet; rewards are uniform on [0, 1]. Setup code run
    once: the draw is made on the host with NumPy, from a generator seeded by the key's
    data (``host_rng``), so it compiles nothing (JAX's samplers cost seconds of XLA
    compile per shape on a CPU) and the same key always gives the same MDP.

    Args:
      key: concrete PRNG key (typed or raw uint32).
      num_states: S >= 1.
      num_actions: A >= 1.
      branching: number of reachable next states per (s, a), 1 <= b <= S.
      gamma: discount in [0, 1).
    """
    _check_garnet_dims(num_states, num_actions, branching)
    validation.check_in_range("gamma", gamma, 0.0, 1.0, high_inclusive=False)
    transitions, rewards = _garnet_draw(host_rng(key), num_states, num_actions, branching)
    return TabularMDP(jnp.asarray(transitions, jnp.float32), jnp.asarray(rewards, jnp.float32),
                      jnp.asarray(gamma, jnp.float32))


def host_rng(key: PRNGKey) -> np.random.Generator:
    """A NumPy generator seeded by the data of a concrete JAX ``key`` (same key, same
    stream), for setup draws that should not compile anything.

    Raises:
      ValueError: if ``key`` is traced (the draw needs its value).
    """
    if isinstance(key, jax.core.Tracer):
        raise ValueError("`key` must be concrete (setup draws are made on the host with "
                         "NumPy); call this outside jit/vmap.")
    data = np.asarray(jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
                      else key, np.uint32)
    return np.random.default_rng(data.ravel().tolist())


def _check_garnet_dims(num_states, num_actions, branching) -> None:
    validation.check_positive_int("num_states", num_states)
    validation.check_positive_int("num_actions", num_actions)
    validation.check_positive_int("branching", branching)
    if branching > num_states:
        raise ValueError(f"`branching` must be <= num_states={num_states}, got {branching}.")


def _garnet_draw(rng: np.random.Generator, num_states: int, num_actions: int,
                 branching: int) -> tuple[np.ndarray, np.ndarray]:
    """([S, A, S] transitions, [S, A] rewards) in float64 from ``rng``."""
    shape = (num_states, num_actions)
    support = np.argsort(rng.random(shape + (num_states,)), axis=-1)[..., :branching]
    transitions = np.zeros(shape + (num_states,))
    np.put_along_axis(transitions, support, rng.dirichlet(np.ones(branching), shape), -1)
    return transitions, rng.random(shape)


def chain(num_states: int, gamma: float, success_prob: float = 0.9,
          far_reward: float = 1.0, near_reward: float = 0.05) -> TabularMDP:
    """A chain MDP where exploration matters (actions: 0 = left, 1 = right).

    "Right" moves one state right with probability ``success_prob`` and otherwise one
    state left; "left" always moves left. Going left at state 0 pays ``near_reward``;
    taking "right" at the last state pays ``far_reward``.

    Args:
      num_states: S >= 2.
      gamma: discount in [0, 1).
      success_prob: probability in (0, 1] that "right" succeeds.
      far_reward: reward for "right" at the last state.
      near_reward: reward for "left" at state 0.
    """
    validation.check_positive_int("num_states", num_states)
    if num_states < 2:
        raise ValueError(f"`num_states` must be >= 2 for a chain, got {num_states}.")
    validation.check_in_range("gamma", gamma, 0.0, 1.0, high_inclusive=False)
    validation.check_in_range("success_prob", success_prob, 0.0, 1.0, low_inclusive=False)
    validation.check_finite("far_reward", far_reward)
    validation.check_finite("near_reward", near_reward)
    s = np.arange(num_states)
    left, right = np.maximum(s - 1, 0), np.minimum(s + 1, num_states - 1)
    p = np.zeros((num_states, 2, num_states))
    p[s, 0, left] = 1.0
    p[s, 1, right] += success_prob
    p[s, 1, left] += 1.0 - success_prob
    r = np.zeros((num_states, 2))
    r[0, 0] = near_reward
    r[-1, 1] = far_reward
    return make_mdp(p, r, gamma)


def sparse_reward(key: PRNGKey, num_states: int, num_actions: int, branching: int,
                  gamma: float, num_rewarding: int = 1) -> TabularMDP:
    """Garnet dynamics with a sparse reward: 1 on ``num_rewarding`` random (s, a), else 0.

    The dynamics are ``garnet(jax.random.split(key)[0], ...)``; the rewarding pairs are
    drawn on the host from the second key (``host_rng``).

    Args:
      key: concrete PRNG key (dynamics and the rewarding pairs).
      num_states, num_actions, branching: as in ``garnet``.
      gamma: discount in [0, 1) (the study uses 0.99).
      num_rewarding: number of (s, a) pairs paying 1, in [1, S A].
    """
    _check_garnet_dims(num_states, num_actions, branching)
    validation.check_in_range("gamma", gamma, 0.0, 1.0, high_inclusive=False)
    validation.check_positive_int("num_rewarding", num_rewarding)
    if num_rewarding > num_states * num_actions:
        raise ValueError(f"`num_rewarding` must be <= S A = {num_states * num_actions}, got "
                         f"{num_rewarding}.")
    k_dyn, k_rew = jax.random.split(key)
    base = garnet(k_dyn, num_states, num_actions, branching, gamma)
    rewards = np.zeros(num_states * num_actions)
    rewards[host_rng(k_rew).permutation(num_states * num_actions)[:num_rewarding]] = 1.0
    return base._replace(
        rewards=jnp.asarray(rewards.reshape(num_states, num_actions), jnp.float32))


def with_bernoulli_rewards(mdp: TabularMDP) -> TabularMDP:
    """``mdp`` whose sampled reward is Bernoulli(r(s, a)) (mean rewards must be in [0, 1])."""
    out = mdp._replace(bernoulli=jnp.asarray(True))
    check_mdp(out)
    return out


def stationary_distribution(mdp: TabularMDP) -> np.ndarray:
    """[S] stationary distribution of the uniform behaviour policy's state chain.

    Solves pi P_u = pi, sum pi = 1 with P_u(s, s') = mean_a P(s' | s, a) (least squares
    on the stacked system, float64).

    Raises:
      ValueError: if the chain is reducible (some pi(s) < 1e-9): trajectory sampling
        would never visit that state.
    """
    check_mdp(mdp)
    p_u = np.asarray(mdp.transitions, np.float64).mean(1)
    n = p_u.shape[0]
    a = np.vstack([p_u.T - np.eye(n), np.ones((1, n))])
    b = np.zeros(n + 1)
    b[-1] = 1.0
    pi = np.linalg.lstsq(a, b, rcond=None)[0]
    resid = np.abs(pi @ p_u - pi).max()
    if pi.min() < 1e-9 or resid > 1e-8:
        raise ValueError(f"`mdp`'s uniform-policy chain is reducible (min stationary "
                         f"probability {pi.min():.3g}, residual {resid:.3g}): trajectory "
                         f"sampling cannot visit every (s, a); pick another MDP seed.")
    return pi / pi.sum()
