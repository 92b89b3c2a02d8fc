"""RFO through MJX: finite gradients through contacts, training improves return, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax")

from jaxlab.rfo import envs  # noqa: E402
from jaxlab.rfo import train as rfo_train  # noqa: E402


def test_gradients_through_contacts_are_finite_and_informative():
    task = envs.make_task("bouncing_ball")
    cfg = rfo_train.TrainConfig(num_envs=4, horizon=40)
    graphdef, params, act_fn = rfo_train.init_policy(task, cfg)

    def ret(p):
        rewards, _, _ = rfo_train.rollout(task, cfg, graphdef, p, act_fn, jax.random.key(0), 4,
                                          40)
        return jnp.sum(rewards)

    grads = jax.jit(jax.grad(ret))(params)
    leaves = [np.asarray(g) for g in jax.tree.leaves(grads)]
    assert all(np.all(np.isfinite(g)) for g in leaves)
    assert sum(float(np.abs(g).sum()) for g in leaves) > 0  # the ball hits the floor


# The Gaussian (APG) learning check runs under -m slow (57 s); the flow policy's is default.
@pytest.mark.parametrize("policy,chunk", [("flow", 4),
                                          pytest.param("gaussian", 1, marks=pytest.mark.slow)])
def test_short_training_improves_pendulum_return(policy, chunk):
    task = envs.make_task("pendulum")
    cfg = rfo_train.TrainConfig(policy=policy, chunk=chunk, num_envs=8, horizon=32,
                                num_updates=25, eval_horizon=64, stability_coef=0.01,
                                exploration_coef=0.001)
    _, metrics = jax.jit(rfo_train.make_train(task, cfg))(jax.random.key(0))
    ev = np.asarray(metrics.eval_return)
    assert np.all(np.isfinite(ev))
    assert ev[-5:].mean() > ev[:3].mean() + 5.0  # returns are ~ -60 at the start


def test_bad_training_arguments_raise():
    task = envs.make_task("pendulum")
    with pytest.raises(ValueError, match="horizon"):
        rfo_train.make_train(task, rfo_train.TrainConfig(horizon=0))
    with pytest.raises(ValueError, match="divisible"):
        rfo_train.make_train(task, rfo_train.TrainConfig(horizon=30, chunk=4))
    with pytest.raises(ValueError, match="ode_steps"):
        rfo_train.make_train(task, rfo_train.TrainConfig(ode_steps=0))
    with pytest.raises(ValueError, match="policy"):
        rfo_train.make_train(task, rfo_train.TrainConfig(policy="ppo"))
    with pytest.raises(ValueError, match="unknown task"):
        envs.make_task("walker")


def test_bad_episode_settings_raise():
    task = envs.make_task("pendulum")
    with pytest.raises(ValueError, match="episode_length"):
        rfo_train.make_train(task, rfo_train.TrainConfig(horizon=32, episode_length=40))
    with pytest.raises(ValueError, match="gamma"):
        rfo_train.make_train(task, rfo_train.TrainConfig(gamma=0.0))
