"""Tasks: the hopper's reward, health test and observation against brax's ``Hopper`` (v5)
and a hand computation; the reacher's against brax's ``Reacher`` (v5) and by hand;
``register_task``; termination handling in the training rollouts (auto-reset, masks) on a
cheap registered task that terminates every third step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import rfo
from jaxlab.rfo import envs, ppo
from jaxlab.rfo import train as rfo_train

DT = 0.002 * 4  # hopper.xml timestep x brax's n_frames


def _task_and_init(name):
    """The task and a jitted ``pipeline.init`` of its system."""
    from brax.mjx import pipeline

    task = envs.make_task(name)
    return task, jax.jit(lambda q, qd: pipeline.init(task.sys, q, qd))


def _brax_env_step(env, metric_names, ps0, ps1, action):
    """brax ``env.step`` from ``ps0`` with the physics replaced by ``ps1``."""
    from brax.envs.base import State

    env.pipeline_step = lambda ps, a: ps1
    metrics = {k: jnp.float32(0) for k in metric_names}
    state = State(ps0, jnp.zeros(11), jnp.float32(0), jnp.float32(0), metrics)
    return env.step(state, action)


@pytest.fixture(scope="module")
def hopper():
    return _task_and_init("hopper")


def _brax_step(ps0, ps1, action):
    """brax's ``Hopper.step`` from ``ps0`` with the physics replaced by ``ps1``."""
    from brax.envs import hopper as brax_hopper

    return _brax_env_step(brax_hopper.Hopper(backend="mjx"),
                          ("reward_forward", "reward_ctrl", "reward_healthy", "x_position",
                           "x_velocity"), ps0, ps1, action)


@pytest.mark.heavy
def test_hopper_standing_pose_earns_the_healthy_bonus_minus_control(hopper):
    task, init = hopper
    assert task.terminates and task.obs_dim == 11
    ps = init(task.init_q, jnp.zeros(6))
    a = jnp.array([0.3, -0.5, 0.2])
    r = task.reward_fn(ps, ps, a)
    np.testing.assert_allclose(r, 1.0 - 1e-3 * float(jnp.sum(a ** 2)), rtol=1e-6)
    assert float(task.done_fn(ps)) == 0.0 and bool(envs.hopper_healthy(ps))
    obs = task.obs_fn(ps)
    np.testing.assert_allclose(obs[0], 1.25, rtol=1e-6)  # the torso height, not q[1] = 0
    ref = _brax_step(ps, ps, a)
    np.testing.assert_allclose(r, ref.reward, rtol=1e-6)
    np.testing.assert_allclose(obs, ref.obs, rtol=1e-6)
    assert float(ref.done) == 0.0


@pytest.mark.parametrize("index,value,why", [
    ((0, 1), -0.6, "torso z = 0.65 < 0.7"),
    ((0, 2), 0.25, "pitch 0.25 > 0.2"),
    ((0, 2), -0.25, "pitch -0.25 < -0.2"),
    ((1, 4), 150.0, "joint velocity 150 > 100"),
])
def test_hopper_unhealthy_states_are_done(hopper, index, value, why):
    task, init = hopper
    qqd = [task.init_q, jnp.zeros(6)]
    which, i = index
    qqd[which] = qqd[which].at[i].set(value)
    ps = init(*qqd)
    assert float(task.done_fn(ps)) == 1.0, why
    assert float(_brax_step(ps, ps, jnp.zeros(3)).done) == 1.0, why


def test_hopper_reward_matches_brax_and_a_hand_computation_on_random_states(hopper):
    task, init = hopper
    rng = np.random.default_rng(0)
    for _ in range(3):
        q0 = jnp.asarray(rng.uniform(-0.15, 0.15, 6), jnp.float32)
        q1 = jnp.asarray(rng.uniform(-0.15, 0.15, 6), jnp.float32)
        qd1 = jnp.asarray(rng.normal(size=6) * 5, jnp.float32)
        a = jnp.asarray(rng.uniform(-1, 1, 3), jnp.float32)
        ps0, ps1 = init(q0, jnp.zeros(6)), init(q1, qd1)
        # Hand: the torso origin is (q[0], 0, 1.25 + q[1]) (slide joints at the body origin).
        hand = (q1[0] - q0[0]) / DT + 1.0 - 1e-3 * jnp.sum(a ** 2)
        r = task.reward_fn(ps0, ps1, a)
        np.testing.assert_allclose(r, hand, rtol=1e-4, atol=1e-4)
        ref = _brax_step(ps0, ps1, a)
        np.testing.assert_allclose(r, ref.reward, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(task.obs_fn(ps1), ref.obs, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(task.obs_fn(ps1)[0], 1.25 + q1[1], rtol=1e-5)
        assert float(task.done_fn(ps1)) == float(ref.done)


@pytest.fixture(scope="module")
def reacher():
    return _task_and_init("reacher")


def _brax_reacher_step(ps0, ps1, action):
    """brax's ``Reacher.step`` from ``ps0`` with the physics replaced by ``ps1``."""
    from brax.envs import reacher as brax_reacher

    return _brax_env_step(brax_reacher.Reacher(backend="mjx"), ("reward_dist", "reward_ctrl"),
                          ps0, ps1, action)


@pytest.mark.heavy
def test_reacher_obs_and_reward_match_brax_and_a_hand_computation(reacher):
    """On random arm angles, velocities and targets: obs and reward equal brax's Reacher
    (v5); the reward is -||tip - target|| - ||a||^2 with the tip 0.21 m from the base along
    the arm (link 0.1 m + tip offset 0.11 m; checked by hand at the straight arm)."""
    task, init = reacher
    assert task.obs_dim == 11 and task.act_dim == 2 and not task.terminates
    rng = np.random.default_rng(0)
    for _ in range(3):
        q = jnp.asarray(np.r_[rng.uniform(-np.pi, np.pi, 2), rng.uniform(-0.2, 0.2, 2)],
                        jnp.float32)
        qd = jnp.asarray(np.r_[rng.normal(size=2), 0.0, 0.0], jnp.float32)
        a = jnp.asarray(rng.uniform(-1, 1, 2), jnp.float32)
        ps = init(q, qd)
        ref = _brax_reacher_step(ps, ps, a)
        np.testing.assert_allclose(task.reward_fn(ps, ps, a), ref.reward, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(task.obs_fn(ps), ref.obs, rtol=1e-6, atol=1e-6)
    # Straight arm along +x (both angles 0), target at (0.1, 0.05): tip at (0.21, 0).
    ps = init(jnp.array([0.0, 0.0, 0.1, 0.05]), jnp.zeros(4))
    a = jnp.array([0.5, -0.5])
    hand = -np.hypot(0.21 - 0.1, 0.05) - 0.5
    np.testing.assert_allclose(task.reward_fn(ps, ps, a), hand, rtol=1e-4)


@pytest.mark.heavy
def test_reacher_reset_follows_brax():
    """Targets uniform in radius (r = 0.2 U) over the disk, arm angles within 0.1 of 0,
    target velocities 0, arm velocities within 0.005: brax's reset distribution."""
    task = envs.make_task("reacher")
    q, qd = jax.vmap(task.reset_fn)(jax.random.split(jax.random.key(0), 4000))
    q, qd = np.asarray(q), np.asarray(qd)
    r = np.hypot(q[:, 2], q[:, 3])
    assert r.max() <= 0.2 + 1e-6 and abs(r.mean() - 0.1) < 0.005  # E[0.2 U] = 0.1
    assert np.abs(q[:, :2]).max() <= 0.1 + 1e-6 and np.abs(q[:, :2]).max() > 0.09
    assert np.all(qd[:, 2:] == 0) and np.abs(qd[:, :2]).max() <= 0.005 + 1e-7
    k1, k2 = jax.random.split(jax.random.key(1))
    s1, s2 = envs.reset(k1, task), envs.reset(k2, task)
    assert not np.allclose(s1.obs[4:6], s2.obs[4:6])  # the target differs per reset


def _timed_pendulum():
    """The pendulum, terminating every third step (mjx ``time`` restarts at a reset)."""
    base = envs.make_task("pendulum")
    limit = 2.5 * base.n_frames * float(base.sys.opt.timestep)
    return envs.Task("timed_pendulum", base.sys, base.n_frames, base.init_q, base.reset_noise,
                     base.obs_fn, base.reward_fn, base.obs_dim, base.act_dim,
                     lambda ps: ps.time > limit)


@pytest.fixture(scope="module")
def timed():
    if "timed_pendulum" not in envs.task_names():
        rfo.register_task("timed_pendulum", _timed_pendulum)
    return envs.make_task("timed_pendulum")


def test_register_task_adds_a_task_and_rejects_bad_names(timed):
    assert "timed_pendulum" in rfo.task_names() and timed.terminates
    assert envs.make_task("timed_pendulum") is timed
    assert not envs.make_task("pendulum").terminates
    with pytest.raises(ValueError, match="name"):
        rfo.register_task("timed_pendulum", _timed_pendulum)
    with pytest.raises(ValueError, match="name"):
        rfo.register_task("pendulum", _timed_pendulum)
    with pytest.raises(ValueError, match="name"):
        rfo.register_task("", _timed_pendulum)
    with pytest.raises(ValueError, match="factory"):
        rfo.register_task("not_callable", 3)
    rfo.register_task("returns_none", lambda: None)
    with pytest.raises(ValueError, match="Task"):
        envs.make_task("returns_none")


def test_segment_discounts_and_episode_mask_by_hand():
    d = jnp.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    w, boot = rfo_train.segment_discounts(d, 0.5)
    np.testing.assert_allclose(w, [[1, 1], [0.5, 0.5], [1, 0.25], [0.5, 1]])
    np.testing.assert_allclose(boot, [0.25, 0.5])
    np.testing.assert_allclose(rfo_train.episode_mask(d), [[1, 1], [1, 1], [0, 1], [0, 0]])
    w0, b0 = rfo_train.segment_discounts(jnp.zeros((5, 1)), 0.9)
    np.testing.assert_allclose(w0[:, 0], 0.9 ** np.arange(5), rtol=1e-6)
    np.testing.assert_allclose(b0, [0.9 ** 5], rtol=1e-6)


@pytest.mark.heavy
def test_rollout_auto_resets_terminated_envs_and_masks_eval_returns(timed):
    cfg = rfo.TrainConfig(policy="gaussian", num_envs=2, horizon=8, hidden=8)
    policy = rfo_train.make_policy(timed, cfg)
    params = policy.init(jax.random.key(0))
    state = rfo_train.reset_envs(jax.random.key(1), timed, 2)
    fresh = rfo_train.reset_envs(jax.random.key(2), timed, 2)
    final, r, all_obs, _, _, d = rfo_train.rollout_from(jax.random.key(3), timed, cfg, policy,
                                                        params, state, 8, fresh)
    np.testing.assert_array_equal(d[:, 0], [0, 0, 1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(d[:, 1], d[:, 0])
    np.testing.assert_allclose(all_obs[3], fresh.obs, rtol=1e-6)  # restarted from fresh
    np.testing.assert_array_equal(final.t, [2, 2])
    masked, _, _ = rfo_train.rollout(jax.random.key(3), timed, cfg, policy, params, 2, 8)
    assert np.all(np.asarray(masked)[3:] == 0.0) and np.all(np.asarray(masked)[:3] != 0.0)


# PPO on the terminating task: -m slow (30 s at -n 2); PPO's GAE masks have their own test.
@pytest.mark.parametrize("method", ["gaussian_critic",
                                    pytest.param("ppo", marks=pytest.mark.slow)])
@pytest.mark.heavy
def test_trainers_run_on_a_terminating_task(timed, method):
    if method == "ppo":
        cfg = rfo.PPOConfig(num_envs=2, rollout_len=4, minibatches=2, episode_length=8,
                            hidden=8, eval_horizon=8)
    else:
        cfg = rfo.TrainConfig(policy="gaussian", num_envs=2, horizon=4, hidden=8, critic=True,
                              eval_horizon=8, episode_length=8, critic_iters=2)
    trainer = rfo.make_trainer(timed, cfg)
    state, infos = jax.jit(lambda k: rfo.run(k, trainer, 2))(jax.random.key(0))
    for name, x in infos._asdict().items():  # the mode's return: NaN unless asked for
        if name != "eval_mode_return":
            assert np.all(np.isfinite(np.asarray(x))), name
    assert np.all(np.isnan(np.asarray(infos.eval_mode_return)))
    # The eval return stops at the termination (step 3 of 8): 3 pendulum rewards (each in
    # about [-1.01, 1]) instead of 8 hanging-down ones (about -1 each).
    assert np.all(np.abs(np.asarray(infos.eval_return)) <= 3.1)


def test_ppo_gae_uses_termination_masks():
    r, v = jnp.ones((3, 1)), jnp.full((4, 1), 10.0)
    adv = ppo.gae(r, v, 0.5, 1.0, termination=jnp.array([[0.0], [1.0], [0.0]]))
    # step 1 terminal: A_1 = r - V = -9; A_0 = r + 0.5 V - V + 0.5 A_1 = -4 - 4.5.
    np.testing.assert_allclose(adv[:2, 0], [-8.5, -9.0])


# A jitted RFO update through the reacher's MJX physics (about 2 min of compile on a 2-core
# CPU): -m slow.
@pytest.mark.slow
def test_rfo_trains_through_the_reacher():
    task = envs.make_task("reacher")
    cfg = rfo.TrainConfig(policy="flow", num_envs=2, horizon=4, hidden=16, critic=True,
                          eval_horizon=8, episode_length=8, critic_iters=2, chunk=2)
    trainer = rfo.make_trainer(task, cfg)
    state0 = trainer.init(jax.random.split(jax.random.key(0))[0])  # run's init half
    state, infos = jax.jit(lambda k: rfo.run(k, trainer, 2))(jax.random.key(0))
    for name, x in infos._asdict().items():  # the mode's return: NaN unless asked for
        if name != "eval_mode_return":
            assert np.all(np.isfinite(np.asarray(x))), name
    moved = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))),
                         jax.tree.leaves(state0.params), jax.tree.leaves(state.params))
    assert max(moved) > 0  # the policy was updated through the physics
    # -||tip - target|| - ||a||^2 per step: the tip is at most 0.21 + 0.2 m from the target.
    assert np.all(np.asarray(infos.eval_return) <= 0.0)
    assert np.all(np.asarray(infos.eval_return) >= -8 * (0.41 + 2.0))
