"""RFO through MJX: finite gradients through contacts, training improves return, the
key-first trainer API (seeds differ in their initial weights), errors."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax")

from jaxlab import rfo  # noqa: E402
from jaxlab.rfo import envs  # noqa: E402
from jaxlab.rfo import train as rfo_train  # noqa: E402


@pytest.mark.heavy
def test_gradients_through_contacts_are_finite_and_informative():
    task = envs.make_task("bouncing_ball")
    cfg = rfo_train.TrainConfig(num_envs=4, horizon=40)
    policy = rfo_train.make_policy(task, cfg)
    params = policy.init(jax.random.key(0))

    def ret(p):
        rewards, _, _ = rfo_train.rollout(jax.random.key(0), task, cfg, policy, p, 4, 40)
        return jnp.sum(rewards)

    grads = jax.jit(jax.grad(ret))(params)
    leaves = [np.asarray(g) for g in jax.tree.leaves(grads)]
    assert all(np.all(np.isfinite(g)) for g in leaves)
    assert sum(float(np.abs(g).sum()) for g in leaves) > 0  # the ball hits the floor


# Learning checks (57 s each at -n 2): -m slow.
@pytest.mark.parametrize("policy,chunk", [pytest.param("flow", 4, marks=pytest.mark.slow),
                                          pytest.param("gaussian", 1, marks=pytest.mark.slow)])
def test_short_training_improves_pendulum_return(policy, chunk):
    task = envs.make_task("pendulum")
    cfg = rfo.TrainConfig(policy=policy, chunk=chunk, num_envs=8, horizon=32, num_updates=25,
                          eval_horizon=64, stability_coef=0.01, exploration_coef=0.001)
    trainer = rfo.make_trainer(task, cfg)
    _, info = jax.jit(lambda k: rfo.run(k, trainer, cfg.num_updates))(jax.random.key(0))
    ev = np.asarray(info.eval_return)
    assert np.all(np.isfinite(ev))
    assert ev[-5:].mean() > ev[:3].mean() + 5.0  # returns are ~ -60 at the start


def _leaves(tree):
    return [np.asarray(x) for x in jax.tree.leaves(tree)]


# The flow policy by default; the Gaussian and PPO networks: -m slow (17 s each at -n 2).
@pytest.mark.parametrize("method", ["flow", pytest.param("gaussian", marks=pytest.mark.slow),
                                    pytest.param("ppo", marks=pytest.mark.slow)])
@pytest.mark.heavy
def test_initial_weights_come_from_the_key(method):
    """#18: seeds used to share initial weights (nnx.Rngs(0) / seed + 1)."""
    task = envs.make_task("pendulum")
    if method == "ppo":
        cfg = rfo.PPOConfig(num_envs=2, rollout_len=4, minibatches=2, episode_length=8,
                            hidden=8)
    else:
        cfg = rfo.TrainConfig(policy=method, num_envs=2, horizon=4, hidden=8, critic=True)
    init = jax.jit(rfo.make_trainer(task, cfg).init)
    keys = jax.random.split(jax.random.key(7), 2)
    a, b, a2 = init(keys[0]), init(keys[1]), init(keys[0])
    nets = ["params"] if method == "ppo" else ["params", "critic_params"]
    for net in nets:
        la, lb, la2 = (_leaves(getattr(s, net)) for s in (a, b, a2))
        assert all(np.array_equal(x, y) for x, y in zip(la, la2, strict=True))  # same key
        kernels = [(x, y) for x, y in zip(la, lb, strict=True) if x.ndim == 2]
        assert kernels and all(not np.array_equal(x, y) for x, y in kernels), net
    if method != "ppo":  # the target critic starts as the critic
        for x, y in zip(_leaves(a.critic_params), _leaves(a.target_params), strict=True):
            np.testing.assert_array_equal(x, y)
    # The functional form is the same computation, vmapped over seed keys.
    batched = jax.jit(jax.vmap(lambda k: rfo.init(k, task, cfg)))(keys)
    for x, y in zip(_leaves(b.params), _leaves(batched.params), strict=True):
        np.testing.assert_array_equal(x, y[1])


@pytest.mark.slow  # two compiles of the MJX update (~3 min on a busy 2-core CPU)
def test_chunked_scan_steps_equal_one_scan():
    """Update u uses fold_in(key, u): a run split into chunks draws the same keys."""
    task = envs.make_task("pendulum")
    cfg = rfo.TrainConfig(num_envs=2, horizon=4, chunk=2, hidden=8, eval_horizon=4,
                          episode_length=8)
    trainer = rfo.make_trainer(task, cfg)
    k_init, k_steps = jax.random.split(jax.random.key(3))
    scan = jax.jit(lambda s, start: rfo.scan_steps(k_steps, trainer, s, start, 2))
    s0 = trainer.init(k_init)
    s1, i1 = scan(s0, 0)
    s2, i2 = scan(s1, 2)
    _, whole = jax.jit(lambda k: rfo.run(k, trainer, 4))(jax.random.key(3))
    np.testing.assert_allclose(np.concatenate([i1.eval_return, i2.eval_return]),
                               whole.eval_return, rtol=1e-5, atol=1e-5)


def test_scan_steps_evaluates_every_k_updates_and_skips_the_rollout_elsewhere():
    """scan_steps' cadence on a toy trainer built on train.maybe_evaluate (cheap; the MJX
    trainers follow in the slow test below): evaluations at updates u with (u + 1) % k ==
    0 only, NaN elsewhere, the same values as k = 1 where both evaluate; under the vmap
    over seeds the skip stays a ``cond`` (the rollout is skipped, not computed and
    discarded by a ``select``)."""

    def evaluate(key, params):
        return params["w"] + jax.random.uniform(key)

    def init(key):
        return {"w": jax.random.normal(key)}

    def step(key, state, do_eval=True):
        k_eval, k_upd = jax.random.split(key)
        new = {"w": state["w"] + jax.random.normal(k_upd)}
        ev = rfo_train.maybe_evaluate(k_eval, do_eval, evaluate, new)
        return new, rfo_train.Info(new["w"], ev, jnp.float32(0), jnp.float32(0))

    from jaxlab.core.types import Algorithm

    toy = Algorithm(init, step)
    keys = jax.random.split(jax.random.key(0), 3)
    states = jax.vmap(toy.init)(keys)
    run = jax.jit(lambda s, every: jax.vmap(lambda k, st: rfo.scan_steps(
        k, toy, st, 0, 6, every))(keys, s), static_argnums=1)
    s1, i1 = run(states, 1)
    s3, i3 = run(states, 3)
    np.testing.assert_array_equal(np.asarray(i3.eval_return)[:, [2, 5]],
                                  np.asarray(i1.eval_return)[:, [2, 5]])
    assert np.all(np.isnan(np.asarray(i3.eval_return)[:, [0, 1, 3, 4]]))
    np.testing.assert_array_equal(s3["w"], s1["w"])
    jaxpr = str(jax.make_jaxpr(lambda s, start: jax.vmap(lambda k, st: rfo.scan_steps(
        k, toy, st, start, 6, 3))(keys, s))(states, 0))
    assert " cond[" in jaxpr  # a jnp.where / select would evaluate at every update
    assert " cond[" not in str(jax.make_jaxpr(lambda s: jax.vmap(lambda k, st: rfo.scan_steps(
        k, toy, st, 0, 6, 1))(keys, s))(states))  # every update: no branch at all


@pytest.mark.slow  # two compiles of the MJX update scan per method (~90 s each)
@pytest.mark.parametrize("method", ["flow", "ppo"])
def test_eval_every_skips_evaluations_and_keeps_the_rest_of_the_run(method):
    """#18: evaluation every few updates. The evaluated updates report exactly the returns
    of the every-update run (same keys, same parameters); the others report NaN; the
    training itself (train return, final parameters) is unchanged. Vmapped over seeds as
    the experiment runs it (the skip flag is not batched there)."""
    task = envs.make_task("pendulum")
    if method == "ppo":
        cfg = rfo.PPOConfig(num_envs=2, rollout_len=4, minibatches=2, episode_length=8,
                            hidden=8, eval_horizon=4)
    else:
        cfg = rfo.TrainConfig(num_envs=2, horizon=4, hidden=8, eval_horizon=4,
                              episode_length=8)
    trainer = rfo.make_trainer(task, cfg)
    keys = jax.random.split(jax.random.key(5), 2)
    states = jax.vmap(trainer.init)(keys)

    @functools.partial(jax.jit, static_argnums=1)
    def run(states, every):
        return jax.vmap(lambda k, s: rfo.scan_steps(k, trainer, s, 0, 6, every))(keys, states)

    s1, every1 = run(states, 1)
    s3, every3 = run(states, 3)
    ev1, ev3 = np.asarray(every1.eval_return), np.asarray(every3.eval_return)
    assert np.all(np.isfinite(ev1))
    np.testing.assert_array_equal(ev3[:, [2, 5]], ev1[:, [2, 5]])
    assert np.all(np.isnan(ev3[:, [0, 1, 3, 4]]))
    np.testing.assert_array_equal(every3.train_return, every1.train_return)
    for x, y in zip(_leaves(s1.params), _leaves(s3.params), strict=True):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="eval_every"):
        rfo.scan_steps(keys[0], trainer, trainer.init(keys[0]), 0, 6, 0)


def test_bad_training_arguments_raise():
    task = envs.make_task("pendulum")
    with pytest.raises(ValueError, match="horizon"):
        rfo.make_trainer(task, rfo.TrainConfig(horizon=0))
    with pytest.raises(ValueError, match="divisible"):
        rfo.make_trainer(task, rfo.TrainConfig(horizon=30, chunk=4))
    with pytest.raises(ValueError, match="ode_steps"):
        rfo.make_trainer(task, rfo.TrainConfig(ode_steps=0))
    with pytest.raises(ValueError, match="policy"):
        rfo.make_trainer(task, rfo.TrainConfig(policy="ppo"))
    with pytest.raises(TypeError, match="cfg"):
        rfo.make_trainer(task, {"policy": "flow"})
    with pytest.raises(ValueError, match="unknown task"):
        envs.make_task("walker")


def test_bad_episode_settings_raise():
    task = envs.make_task("pendulum")
    with pytest.raises(ValueError, match="episode_length"):
        rfo.make_trainer(task, rfo.TrainConfig(horizon=32, episode_length=40))
    with pytest.raises(ValueError, match="gamma"):
        rfo.make_trainer(task, rfo.TrainConfig(gamma=0.0))
