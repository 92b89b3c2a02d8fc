"""TD(lambda) and GAE against NumPy loops, the PPO log-density against scipy, PPO and the
SHAC-style critic on pendulum, and errors for bad settings."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxlab.rfo import critic, ppo


def _np_td_lambda(r, v, gamma, lam):
    t = len(r)
    g = np.zeros(t)
    for i in reversed(range(t)):
        nxt = v[t] if i == t - 1 else (1 - lam) * v[i + 1] + lam * g[i + 1]
        g[i] = r[i] + gamma * nxt
    return g


def _np_gae(r, v, gamma, lam):
    adv, run = np.zeros(len(r)), 0.0
    for i in reversed(range(len(r))):
        run = r[i] + gamma * v[i + 1] - v[i] + gamma * lam * run
        adv[i] = run
    return adv


@pytest.mark.parametrize("lam", [0.0, 0.7, 1.0])
def test_td_lambda_and_gae_match_numpy_loops(lam):
    rng = np.random.default_rng(0)
    r, v = rng.normal(size=(9, 3)), rng.normal(size=(10, 3))
    g = np.asarray(critic.td_lambda_targets(jnp.asarray(r), jnp.asarray(v), 0.9, lam))
    a = np.asarray(ppo.gae(jnp.asarray(r), jnp.asarray(v), 0.9, lam))
    for e in range(3):
        np.testing.assert_allclose(g[:, e], _np_td_lambda(r[:, e], v[:, e], 0.9, lam),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a[:, e], _np_gae(r[:, e], v[:, e], 0.9, lam), rtol=1e-5,
                                   atol=1e-6)
    if lam == 1.0:  # lambda = 1: the Monte-Carlo return bootstrapped at the end
        disc = 0.9 ** np.arange(9)
        np.testing.assert_allclose(g[0], disc @ r + 0.9 ** 9 * v[-1], rtol=1e-5)


def test_gaussian_log_prob_matches_scipy():
    rng = np.random.default_rng(1)
    a, m, ls = rng.normal(size=(5, 3)), rng.normal(size=(5, 3)), rng.normal(size=3) * 0.3
    ref = stats.norm(m, np.exp(ls)).logpdf(a).sum(-1)
    np.testing.assert_allclose(ppo.gaussian_log_prob(jnp.asarray(a), jnp.asarray(m),
                                                     jnp.asarray(ls)), ref, rtol=1e-5)


def test_bad_critic_and_ppo_arguments_raise():
    with pytest.raises(ValueError, match="values"):
        critic.td_lambda_targets(jnp.zeros(4), jnp.zeros(4), 0.9, 0.5)
    with pytest.raises(ValueError, match="lam"):
        critic.td_lambda_targets(jnp.zeros(4), jnp.zeros(5), 0.9, 1.5)
    with pytest.raises(ValueError, match="minibatches"):
        ppo.check_config(ppo.PPOConfig(num_envs=3, rollout_len=5, minibatches=4))
    with pytest.raises(ValueError, match="episode_length"):
        ppo.check_config(ppo.PPOConfig(rollout_len=32, episode_length=40))


def test_ppo_improves_pendulum_return():
    pytest.importorskip("brax")
    from jaxlab.rfo import envs

    cfg = ppo.PPOConfig(num_envs=16, rollout_len=32, num_updates=80, eval_horizon=128)
    _, m = jax.jit(ppo.make_train(envs.make_task("pendulum"), cfg))(jax.random.key(0))
    ev = np.asarray(m.eval_return)
    assert np.all(np.isfinite(ev))
    assert ev[-5:].mean() > ev[:3].mean() + 30.0  # about -120 at the start


def test_rfo_with_critic_over_carried_episodes_learns():
    pytest.importorskip("brax")
    from jaxlab.rfo import envs
    from jaxlab.rfo import train as rfo_train

    cfg = rfo_train.TrainConfig(num_envs=8, horizon=32, num_updates=30, eval_horizon=128,
                                episode_length=128, critic=True)
    state, m = jax.jit(rfo_train.make_train(envs.make_task("pendulum"), cfg))(
        jax.random.key(0))
    ev, closs = np.asarray(m.eval_return), np.asarray(m.critic_loss)
    assert np.all(np.isfinite(ev)) and np.all(np.isfinite(closs))
    assert ev[-5:].mean() > ev[:3].mean() + 10.0
    assert closs[-5:].mean() < 0.5 * closs[:3].mean()  # the critic fits its TD targets
    assert int(state.env_state.t.max()) <= 128  # episodes were reset at episode_length
