"""experiments/lib/brax_compat.py: the stand-in for the removed
``jax.device_put_replicated`` (leading axis, values, placement, one and two CPU devices, the
pmap brax feeds it to), its install / uninstall, the brax ``Env`` around our task, and brax's
PPO trainer running a handful of env steps on it; plus the matched settings of
experiments/check_ppo_vs_brax.py."""

import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import check_ppo_vs_brax as cpb
from experiments.lib import brax_compat
from jaxlab.rfo import envs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_replicates_over_the_cpu_device():
    devices = jax.local_devices()[:1]
    tree = {"w": jnp.arange(6.0).reshape(2, 3), "n": np.int32(7), "s": 1.5,
            "u": (jnp.ones(4, jnp.uint32),)}
    out = brax_compat.device_put_replicated(tree, devices)
    assert jax.tree.structure(out) == jax.tree.structure(tree)
    np.testing.assert_array_equal(out["w"], np.arange(6.0).reshape(1, 2, 3))
    assert out["n"].shape == (1,) and int(out["n"][0]) == 7 and out["n"].dtype == np.int32
    assert out["s"].shape == (1,) and float(out["s"][0]) == 1.5
    assert out["u"][0].dtype == jnp.uint32 and out["u"][0].shape == (1, 4)
    for leaf in jax.tree.leaves(out):
        assert leaf.sharding.device_set == set(devices)
        (shard,) = leaf.addressable_shards
        assert shard.data.shape[0] == 1  # brax's ``_unpmap`` reads shard 0 and squeezes it
    np.testing.assert_array_equal(out["w"].addressable_shards[0].data.squeeze(0), tree["w"])


def test_empty_devices_raises():
    with pytest.raises(ValueError, match="non-empty"):
        brax_compat.device_put_replicated(jnp.zeros(2), [])


def test_two_host_devices_and_pmap():
    """Two CPU devices (a fresh process): one slice per device, and jax.pmap accepts it."""
    code = textwrap.dedent("""
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
        os.environ["JAX_PLATFORMS"] = "cpu"
        import jax, jax.numpy as jnp, numpy as np
        from experiments.lib import brax_compat
        devs = jax.local_devices()
        assert len(devs) == 2, devs
        x = {"a": jnp.arange(3.0), "b": jnp.float32(2.0)}
        y = brax_compat.device_put_replicated(x, devs)
        assert y["a"].shape == (2, 3) and y["b"].shape == (2,)
        assert [s.device for s in y["a"].addressable_shards] == devs
        for s in y["a"].addressable_shards:
            np.testing.assert_array_equal(s.data, np.arange(3.0)[None])
        z = jax.pmap(lambda t: t["a"] * t["b"])(y)
        np.testing.assert_array_equal(z, np.stack([np.arange(3.0) * 2] * 2))
        print("ok")
    """)
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_install_and_uninstall():
    if hasattr(jax, "device_put_replicated"):
        pytest.skip("this jax still has device_put_replicated")
    with brax_compat.installed():
        assert jax.device_put_replicated is brax_compat.device_put_replicated
        assert not brax_compat.install()  # already there: nothing to do
    assert not hasattr(jax, "device_put_replicated")


@pytest.mark.heavy
def test_task_env_steps_our_task():
    task = envs.make_task("pendulum")
    env = brax_compat.task_env(task)
    assert (env.observation_size, env.action_size) == (task.obs_dim, task.act_dim)

    @jax.jit  # one compile for both paths
    def both(key):
        s = env.reset(key)
        s1 = env.step(s, jnp.array([2.5]))  # clipped to 1, as our PPO's rollouts do
        ours = envs.reset(key, task)
        ours1, r = envs.step(task, ours, jnp.array([1.0]))
        return s, s1, ours, ours1, r

    s, s1, ours, ours1, r = both(jax.random.PRNGKey(3))
    np.testing.assert_array_equal(s.obs, ours.obs)
    np.testing.assert_allclose(s1.obs, ours1.obs, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s1.reward, r, rtol=1e-6, atol=1e-6)
    assert float(s1.done) == 0.0


def test_matched_settings():
    """Both PPOs consume the same env steps per update and share the matched settings."""
    cfg = cpb.our_config(4096)
    kw = cpb.brax_kwargs(4096, points=2)
    assert kw["batch_size"] * kw["num_minibatches"] * kw["unroll_length"] == (
        cfg.num_envs * cfg.rollout_len)
    assert kw["batch_size"] * kw["num_minibatches"] % kw["num_envs"] == 0
    assert (kw["num_envs"], kw["unroll_length"], kw["num_updates_per_batch"],
            kw["num_minibatches"]) == (cfg.num_envs, cfg.rollout_len, cfg.epochs, cfg.minibatches)
    assert (kw["learning_rate"], kw["discounting"], kw["gae_lambda"], kw["clipping_epsilon"],
            kw["entropy_cost"], kw["max_grad_norm"], kw["reward_scaling"],
            kw["episode_length"]) == (cfg.lr, cfg.gamma, cfg.gae_lambda, cfg.clip_eps,
                                      cfg.ent_coef, cfg.grad_clip, cfg.reward_scale,
                                      cfg.episode_length)
    assert kw["vf_loss_coefficient"] == 2 * cfg.vf_coef  # brax's loss halves it


def test_verdict_rule():
    def res(final, start=-100.0):
        return {"curve": [{"stochastic": [start] * 3}, {"stochastic": final}]}

    ok = cpb.verdict(res([10.0, 12.0, 8.0]), res([12.0, 11.0, 10.0]))  # gap 1 <= 11
    assert ok["decision"].startswith("PASS")
    bad = cpb.verdict(res([-60.0, -50.0, -55.0]), res([12.0, 11.0, 10.0]))
    assert bad["decision"].startswith("FAIL")
    flat = cpb.verdict(res([0.0, 0.0, 1.0]), res([-101.0, -100.0, -99.0]))
    assert flat["decision"].startswith("inconclusive")


@pytest.mark.slow  # ~1 min: compiles of brax's pmapped training epoch on the MJX pendulum
def test_brax_ppo_trains_on_wrapped_task():
    from brax.training.agents.ppo import train as brax_ppo

    env = brax_compat.task_env(envs.make_task("pendulum"))
    kw = dict(num_timesteps=64, num_envs=4, episode_length=16, unroll_length=8, batch_size=2,
              num_minibatches=2, num_updates_per_batch=1, num_evals=2, run_evals=False,
              network_factory=cpb.brax_network_factory(), seed=1)
    if not hasattr(jax, "device_put_replicated"):  # why the stand-in exists
        with pytest.raises(AttributeError, match="device_put_replicated"):
            brax_ppo.train(env, **kw)
    steps = []
    with brax_compat.installed():
        make_policy, params, _ = brax_ppo.train(
            env, policy_params_fn=lambda s, _mp, _p: steps.append(int(s)), **kw)
    assert steps[0] == 0 and steps[-1] >= 64
    assert all(np.isfinite(np.asarray(x)).all() for x in jax.tree.leaves(params))
    act, _ = make_policy(params, deterministic=True)(jnp.zeros((3, 3)), jax.random.PRNGKey(0))
    assert act.shape == (3, 1)
