"""Reference lines (``rfo.references``) and the gait task (``soft_quadruped_gait``)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.rfo import envs, references
from jaxlab.rfo.softbody import gait, quadruped


@pytest.fixture(scope="module")
def soft():
    return envs.make_task("soft_quadruped")


def _loop_returns(task, key, actions, num_envs):
    """Returns of ``actions`` by a Python loop over ``envs.step`` (no scan, no vmap)."""
    step = jax.jit(lambda s, a: envs.step(task, s, a))
    out = []
    for k in jax.random.split(key, num_envs):
        s, total = envs.reset(k, task), 0.0
        for a in actions:
            s, r = step(s, a)
            total += float(r)
        out.append(total)
    return np.array(out)


def test_episode_returns_equal_a_step_by_step_loop(soft):
    actions = jax.random.uniform(jax.random.key(1), (6, soft.act_dim), minval=-1, maxval=1)
    got = references.episode_returns(jax.random.key(2), soft, actions, 2)
    np.testing.assert_allclose(got, _loop_returns(soft, jax.random.key(2), actions, 2),
                               rtol=1e-5, atol=1e-6)


def test_sinusoid_actions_follow_the_declared_family():
    phase, offset = np.linspace(0, 3, 8), np.linspace(-0.2, 0.2, 8)
    got = references.sinusoid_actions(0.7, 2.5, phase, offset, 10, 0.02)
    t = 0.02 * np.arange(10)[:, None]
    np.testing.assert_allclose(got, offset + 0.7 * np.sin(2 * np.pi * 2.5 * t + phase),
                               rtol=1e-5, atol=1e-6)


def test_best_sinusoid_keeps_the_best_candidate_inside_the_box(soft):
    ref = references.best_sinusoid(jax.random.key(0), soft, 8, candidates=6, num_envs=1)
    scores = np.asarray(ref.history)
    assert scores.shape == (6,) and np.isclose(float(ref.fit_ret), scores.max(), rtol=1e-5)
    assert np.all(np.abs(np.asarray(ref.actions)) <= 1.0)
    assert float(ref.ret) == pytest.approx(
        _loop_returns(soft, jax.random.fold_in(jax.random.key(0), 1), ref.actions, 1).mean(),
        rel=1e-5, abs=1e-6)


@pytest.mark.heavy
def test_optimisers_rank_zero_constant_trajectory_on_the_original_reward(soft):
    """On ``soft_quadruped`` (16 steps): the best constant posture beats the zero action,
    and trajectory optimisation beats the best constant posture (held-out returns)."""
    key = jax.random.key(0)
    zero = references.zero_action(key, soft, 16, num_envs=2)
    const = references.best_constant(key, soft, 16, num_envs=2, restarts=2, iterations=15,
                                     lr=0.3, candidates=8)
    traj = references.trajectory_optimisation(key, soft, 16, num_envs=2, iterations=30,
                                              lr=0.1)
    assert float(const.ret) > float(zero.ret) + 0.2, (float(const.ret), float(zero.ret))
    assert float(traj.ret) > float(const.ret), (float(traj.ret), float(const.ret))
    history = np.asarray(const.history)
    assert history[-1] > history[0]  # the ascent climbed


def test_gait_reward_is_the_original_after_the_settle_window():
    """The gait task's rewards equal ``soft_quadruped``'s from step ``settle_steps`` on
    and its control cost alone before (same dynamics), on random actions."""
    settle = 3
    g, s = gait.soft_quadruped_gait(settle), quadruped.soft_quadruped()
    actions = jax.random.uniform(jax.random.key(4), (6, 8), minval=-1, maxval=1)
    gs, ss = g.init(jax.random.key(5)), s.init(jax.random.key(5))
    for t, a in enumerate(actions):
        gs1, ss1 = g.step(gs, a), s.step(ss, a)
        np.testing.assert_array_equal(gs1.x, ss1.x)
        want = (float(s.reward(ss, ss1, a)) if t >= settle
                else -quadruped.CTRL_COST * float(np.sum(np.asarray(a, np.float64) ** 2)))
        assert float(g.reward(gs, gs1, a)) == pytest.approx(want, rel=1e-5, abs=1e-6), t
        np.testing.assert_array_equal(g.obs(gs1), s.obs(ss1))
        gs, ss = gs1, ss1
    assert int(gs.t) == len(actions)


def test_gait_task_is_registered_beside_the_original():
    task = envs.make_task("soft_quadruped_gait")
    original = envs.make_task("soft_quadruped")
    assert (task.obs_dim, task.act_dim) == (original.obs_dim, original.act_dim)
    state = envs.reset(jax.random.key(0), task)
    assert int(state.pipeline_state.t) == 0
    state, r = envs.step(task, state, jnp.ones(8))
    assert int(state.pipeline_state.t) == 1
    assert float(r) == pytest.approx(-quadruped.CTRL_COST * 8)


@pytest.mark.heavy
def test_a_constant_posture_cannot_farm_the_gait_task():
    """At the study's 128 steps the best constant posture found earns next to nothing on
    ``soft_quadruped_gait``, far below the best random sinusoid gait, while on
    ``soft_quadruped`` the same search finds a lean worth more than 1."""
    key = jax.random.key(0)
    sizes = dict(num_envs=1, restarts=1, iterations=4, lr=0.5, candidates=16)
    task = envs.make_task("soft_quadruped_gait")
    const = references.best_constant(key, task, 128, **sizes)
    sine = references.best_sinusoid(key, task, 128, candidates=24, num_envs=1)
    lean = references.best_constant(key, envs.make_task("soft_quadruped"), 128, **sizes)
    assert float(lean.ret) > 1.0, float(lean.ret)
    assert float(sine.ret) > 0.5, float(sine.ret)
    assert float(const.ret) < 0.2 * float(sine.ret), (float(const.ret), float(sine.ret))


def test_bad_arguments_raise_naming_them(soft):
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="episode_length"):
        references.zero_action(key, soft, 0)
    with pytest.raises(ValueError, match="restarts"):
        references.best_constant(key, soft, 4, restarts=0)
    with pytest.raises(ValueError, match="switch_step"):
        references.posture_switch(key, soft, 4, 4)
    with pytest.raises(ValueError, match="actions"):
        references.episode_returns(key, soft, jnp.zeros((3, 5)), 1)
    with pytest.raises(ValueError, match="actions"):
        references.episode_returns(key, soft, jnp.full((3, 8), jnp.nan), 1)
    with pytest.raises(TypeError, match="task"):
        references.zero_action(key, "soft_quadruped", 4)
    with pytest.raises(ValueError, match="settle_steps"):
        gait.soft_quadruped_gait(-1)


def test_bad_settings_raise_naming_them(soft):
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="lr"):
        references.best_constant(key, soft, 4, lr=0.0)
    with pytest.raises(ValueError, match="init_scale"):
        references.trajectory_optimisation(key, soft, 4, init_scale=-1.0)
    with pytest.raises(ValueError, match="freq_hz"):
        references.best_sinusoid(key, soft, 4, freq_hz=(3.0, 1.0))
    with pytest.raises(ValueError, match="control_dt"):
        references.best_sinusoid(key, soft, 4, control_dt=float("inf"))
