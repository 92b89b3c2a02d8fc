"""TD(lambda) and GAE against NumPy loops, the PPO log-density against scipy, PPO and the
SHAC-style critic on pendulum, and errors for bad settings."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxlab import rfo
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


def test_polyak_follows_shac_keeping_alpha_of_the_target():
    target = {"a": jnp.array([1.0, -2.0]), "b": {"c": jnp.array(4.0)}}
    online = {"a": jnp.array([3.0, 2.0]), "b": {"c": jnp.array(0.0)}}
    # SHAC: target <- alpha * target + (1 - alpha) * online, alpha = 0.2 by default.
    out = critic.polyak(target, online)
    np.testing.assert_allclose(out["a"], [0.2 * 1 + 0.8 * 3, 0.2 * -2 + 0.8 * 2], rtol=1e-6)
    np.testing.assert_allclose(out["b"]["c"], 0.2 * 4.0, rtol=1e-6)
    np.testing.assert_allclose(critic.polyak(target, online, alpha=0.9)["a"], [1.2, -1.6],
                               rtol=1e-6)
    np.testing.assert_allclose(critic.polyak(target, online, alpha=1.0)["a"], target["a"])
    np.testing.assert_allclose(critic.polyak(target, online, alpha=0.0)["a"], online["a"])


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


@pytest.mark.slow  # a learning check (38 s at -n 2)
def test_ppo_improves_pendulum_return():
    pytest.importorskip("brax")
    from jaxlab.rfo import envs

    cfg = ppo.PPOConfig(num_envs=16, rollout_len=32, num_updates=80, eval_horizon=128)
    trainer = rfo.make_trainer(envs.make_task("pendulum"), cfg)
    _, m = jax.jit(lambda k: rfo.run(k, trainer, cfg.num_updates))(jax.random.key(0))
    ev = np.asarray(m.eval_return)
    assert np.all(np.isfinite(ev))
    assert ev[-5:].mean() > ev[:3].mean() + 30.0  # about -120 at the start


@pytest.mark.slow  # a learning check (51 s at -n 2)
def test_rfo_with_critic_over_carried_episodes_learns():
    pytest.importorskip("brax")
    from jaxlab.rfo import envs

    # A slow target (keep 0.8 of it per update): with SHAC's default alpha = 0.2 the TD
    # targets move with the online critic and on this 30-update budget the reported critic
    # loss does not fall (it hovers around 40-200 while the return still improves).
    cfg = rfo.TrainConfig(num_envs=8, horizon=32, num_updates=30, eval_horizon=128,
                          episode_length=128, critic=True, target_alpha=0.8)
    trainer = rfo.make_trainer(envs.make_task("pendulum"), cfg)
    state, m = jax.jit(lambda k: rfo.run(k, trainer, cfg.num_updates))(jax.random.key(0))
    ev, closs = np.asarray(m.eval_return), np.asarray(m.critic_loss)
    assert np.all(np.isfinite(ev)) and np.all(np.isfinite(closs))
    assert ev[-5:].mean() > ev[:3].mean() + 10.0
    assert closs[-5:].mean() < 0.5 * closs[:3].mean()  # the critic fits its TD targets
    assert int(state.env_state.t.max()) <= 128  # episodes were reset at episode_length


def _np_masked(r, v, gamma, lam, term, trunc):
    """NumPy loop of brax-semantics TD(lambda) targets and GAE with episode masks."""
    t = len(r)
    g, adv = np.zeros(t), np.zeros(t)
    g_next, a_next = v[t], 0.0
    for i in reversed(range(t)):
        if trunc[i]:
            g[i], adv[i] = v[i], 0.0
        else:
            cont = gamma * (1.0 - term[i])
            g[i] = r[i] + cont * ((1 - lam) * v[i + 1] + lam * g_next)
            adv[i] = r[i] + cont * v[i + 1] - v[i] + cont * lam * a_next
        g_next, a_next = g[i], adv[i]
    return g, adv


def _random_episode_data(seed, t=12, b=5):
    rng = np.random.default_rng(seed)
    r = rng.normal(size=(t, b)).astype(np.float32)
    v = rng.normal(size=(t + 1, b)).astype(np.float32)
    term = (rng.uniform(size=(t, b)) < 0.2).astype(np.float32)
    trunc = (rng.uniform(size=(t, b)) < 0.2).astype(np.float32) * (1 - term)
    return r, v, term, trunc


@pytest.mark.parametrize("lam", [0.0, 0.8, 1.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_masked_gae_and_td_lambda_match_brax_compute_gae(lam, seed):
    pytest.importorskip("brax")
    from brax.training.agents.ppo import losses as brax_losses

    r, v, term, trunc = _random_episode_data(seed)
    assert term.any() and trunc.any()
    vs, _ = brax_losses.compute_gae(truncation=jnp.asarray(trunc), termination=jnp.asarray(term),
                                    rewards=jnp.asarray(r), values=jnp.asarray(v[:-1]),
                                    bootstrap_value=jnp.asarray(v[-1]), lambda_=lam,
                                    discount=0.9)
    g = critic.td_lambda_targets(jnp.asarray(r), jnp.asarray(v), 0.9, lam,
                                 termination=jnp.asarray(term), truncation=jnp.asarray(trunc))
    a = ppo.gae(jnp.asarray(r), jnp.asarray(v), 0.9, lam, termination=jnp.asarray(term),
                truncation=jnp.asarray(trunc))
    np.testing.assert_allclose(g, vs, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a, np.asarray(vs) - v[:-1], rtol=1e-5, atol=1e-5)
    for e in range(r.shape[1]):
        g_ref, a_ref = _np_masked(r[:, e].astype(np.float64), v[:, e].astype(np.float64), 0.9,
                                  lam, term[:, e], trunc[:, e])
        np.testing.assert_allclose(g[:, e], g_ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a[:, e], a_ref, rtol=1e-5, atol=1e-5)


def test_masks_change_only_steps_at_or_before_episode_ends():
    r, v, _, _ = _random_episode_data(3)
    zeros = jnp.zeros_like(jnp.asarray(r))
    plain = critic.td_lambda_targets(jnp.asarray(r), jnp.asarray(v), 0.9, 0.7)
    # All-zero masks take the masked path and reproduce the unmasked result.
    np.testing.assert_allclose(
        critic.td_lambda_targets(jnp.asarray(r), jnp.asarray(v), 0.9, 0.7, termination=zeros,
                                 truncation=zeros), plain, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(
        ppo.gae(jnp.asarray(r), jnp.asarray(v), 0.9, 0.7, termination=zeros),
        ppo.gae(jnp.asarray(r), jnp.asarray(v), 0.9, 0.7), rtol=1e-6, atol=1e-6)
    # A termination at step 6 of env 0: G_6 = r_6 exactly; steps after it are untouched.
    term = np.zeros_like(r)
    term[6, 0] = 1.0
    g = np.asarray(critic.td_lambda_targets(jnp.asarray(r), jnp.asarray(v), 0.9, 0.7,
                                            termination=jnp.asarray(term)))
    np.testing.assert_allclose(g[6, 0], r[6, 0], rtol=1e-6)
    np.testing.assert_allclose(g[7:], np.asarray(plain)[7:], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(g[:, 1:], np.asarray(plain)[:, 1:], rtol=1e-6, atol=1e-6)
    assert abs(g[5, 0] - np.asarray(plain)[5, 0]) > 1e-3  # the trace before the end changed


@pytest.mark.parametrize("call,arg", [
    (lambda: critic.polyak({"w": jnp.zeros(2)}, {"w": jnp.ones(2)}, 1.5), "alpha"),
    (lambda: critic.td_lambda_targets(jnp.ones((3, 2)), jnp.ones((4, 3)), 0.9, 0.5), "values"),
    (lambda: critic.td_lambda_targets(jnp.ones(3), jnp.ones(4), 0.9, 0.5,
                                      truncation=jnp.full(3, 0.5)), "truncation"),
    (lambda: ppo.gae(jnp.ones(3), jnp.ones(4), 1.5, 0.5), "gamma"),
    (lambda: ppo.gae(jnp.array([1.0, jnp.nan, 0.0]), jnp.ones(4), 0.9, 0.5), "rewards"),
    (lambda: ppo.gae(jnp.ones(3), jnp.ones(4), 0.9, 0.5, termination=jnp.ones(4)),
     "termination"),
    (lambda: ppo.check_config(ppo.PPOConfig(clip_eps=0.0)), "clip_eps"),
    (lambda: ppo.check_config(ppo.PPOConfig(gae_lambda=-0.1)), "gae_lambda"),
    (lambda: ppo.check_config(ppo.PPOConfig(lr=float("inf"))), "lr"),
])
def test_bad_return_and_ppo_inputs_name_the_argument(call, arg):
    with pytest.raises(ValueError, match=arg):
        call()


def test_gae_and_td_lambda_still_jit_and_vmap():
    r, v, term, trunc = _random_episode_data(4)
    f = jax.jit(jax.vmap(lambda r, v, d, t: ppo.gae(r, v, 0.9, 0.8, d, t), in_axes=1,
                         out_axes=1))
    np.testing.assert_allclose(f(r, v, term, trunc),
                               ppo.gae(jnp.asarray(r), jnp.asarray(v), 0.9, 0.8,
                                       jnp.asarray(term), jnp.asarray(trunc)),
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("preset", ["smoke", "quick", "full"])
def test_rfo_presets_pass_validation_and_bad_fields_fail(preset):
    from experiments.configs import rfo as rfo_cfg

    cfg = rfo_cfg.get_config(preset)
    rfo_cfg.validate_config(cfg)
    cfg.common.lr = float("nan")
    with pytest.raises(ValueError, match="config.common.lr"):
        rfo_cfg.validate_config(cfg)
