"""#18: the stability regulariser's FIFO buffer of past policies' data (against a numpy
reference), the buffer-based stability term, the brax-style APG optimizer (against a numpy
Adam), the ablation / baseline method configs, and bad sizes."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.rfo import buffer as replay
from jaxlab.rfo import flow
from jaxlab.rfo import train as rfo_train


def _rows(rng, b, o=3, h=2, a=1):
    return (rng.normal(size=(b, o)).astype(np.float32),
            rng.uniform(-1, 1, size=(b, h, a)).astype(np.float32))


def test_add_is_fifo_like_a_deque():
    rng = np.random.default_rng(0)
    n = 7
    buf = replay.init(n, 3, 2, 1)
    ref = collections.deque(maxlen=n)  # oldest first
    for b in (3, 2, 4, 1, 9, 5):  # wraps, and one batch larger than the buffer
        obs, acts = _rows(rng, b)
        buf = jax.jit(replay.add)(buf, obs, acts)
        ref.extend(zip(obs, acts, strict=True))
        count = int(buf.count)
        assert count == len(ref)
        # slot order: the oldest row sits at ptr once full (at 0 before)
        start = int(buf.ptr) if count == n else 0
        order = [(start + i) % n for i in range(count)]
        np.testing.assert_array_equal(np.asarray(buf.obs)[order], np.stack([r[0] for r in ref]))
        np.testing.assert_array_equal(np.asarray(buf.actions)[order],
                                      np.stack([r[1] for r in ref]))


def test_sample_is_uniform_over_filled_slots():
    rng = np.random.default_rng(1)
    buf = replay.init(10, 3, 2, 1)
    obs, acts = _rows(rng, 4)
    buf = replay.add(buf, obs, acts)
    key = jax.random.key(3)
    s_obs, s_acts, nonempty = replay.sample(key, buf, 4000)
    assert bool(nonempty)
    # numpy reference: the same draws index the filled rows 0..3 only
    idx = np.asarray(jax.random.randint(key, (4000,), 0, 4))
    np.testing.assert_array_equal(np.asarray(s_obs), obs[idx])
    np.testing.assert_array_equal(np.asarray(s_acts), acts[idx])
    freq = np.bincount(idx, minlength=4) / 4000
    np.testing.assert_allclose(freq, 0.25, atol=0.03)  # 4 sd of a binomial proportion
    assert not bool(replay.sample(key, replay.init(10, 3, 2, 1), 5)[2])


@pytest.mark.parametrize("size", [0, -3, 2.5, True])
def test_bad_buffer_sizes_raise(size):
    with pytest.raises(ValueError, match="size"):
        replay.init(size, 3, 2, 1)
    with pytest.raises(ValueError, match="buffer_size"):
        rfo_train.check_config(rfo_train.TrainConfig(buffer_size=size, stability_coef=0.1))


def test_add_and_sample_check_shapes():
    buf = replay.init(4, 3, 2, 1)
    with pytest.raises(ValueError, match="obs"):
        replay.add(buf, jnp.zeros((2, 5)), jnp.zeros((2, 2, 1)))
    with pytest.raises(ValueError, match="actions"):
        replay.add(buf, jnp.zeros((2, 3)), jnp.zeros((2, 3, 1)))
    with pytest.raises(ValueError, match="batch"):
        replay.sample(jax.random.key(0), buf, 0)


def _flow_params():
    fcfg = flow.FlowConfig(3, 1, 2, 4, 16)
    graphdef, init = rfo_train.network(lambda rngs: flow.VelocityField(fcfg, rngs=rngs))
    return graphdef, init(jax.random.key(0))


@pytest.mark.heavy
def test_stability_term_reads_the_buffer_and_is_zero_when_empty():
    graphdef, params = _flow_params()
    rng = np.random.default_rng(2)
    key = jax.random.key(5)
    empty = replay.init(16, 3, 2, 1)
    assert float(rfo_train.stability_term(key, graphdef, params, empty, 8)) == 0.0
    g = jax.grad(lambda p: rfo_train.stability_term(key, graphdef, p, empty, 8))(params)
    assert all(float(jnp.abs(x).max()) == 0.0 for x in jax.tree.leaves(g))
    obs, acts = _rows(rng, 8)
    full_a = replay.add(empty, obs, acts)
    full_b = replay.add(empty, obs, -acts)  # same states, mirrored past actions
    la = float(rfo_train.stability_term(key, graphdef, params, full_a, 8))
    lb = float(rfo_train.stability_term(key, graphdef, params, full_b, 8))
    assert np.isfinite(la) and la > 0 and la != lb


def _np_adam(grads, lr, decay, clip, b1=0.7, b2=0.95, eps=1e-8):
    m = v = np.zeros_like(grads[0])
    out = []
    for t, g in enumerate(grads):
        g = np.clip(g, -clip, clip)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mh, vh = m / (1 - b1 ** (t + 1)), v / (1 - b2 ** (t + 1))
        out.append(-lr * decay ** t * mh / (np.sqrt(vh) + eps))
    return out


def test_apg_optimizer_matches_numpy_adam_with_elementwise_clip_and_decay():
    cfg = rfo_train.TrainConfig(policy="gaussian", lr=0.01, grad_clip=1.0,
                                grad_clip_mode="elementwise", lr_decay=0.9)
    opt = rfo_train.make_optimizer(cfg)
    grads = [np.array([5.0, 0.5, -0.2], np.float32), np.array([-4.0, 0.3, 2.0], np.float32),
             np.array([0.1, -3.0, 0.7], np.float32)]
    p = jnp.zeros(3)
    state = opt.init(p)
    got = []
    for g in grads:
        upd, state = opt.update(jnp.asarray(g), state, p)
        got.append(np.asarray(upd))
    want = _np_adam(grads, 0.01, 0.9, 1.0)
    np.testing.assert_allclose(np.stack(got), np.stack(want), rtol=1e-5, atol=1e-8)
    # a global-norm clip gives different updates on the same gradients
    opt_g = rfo_train.make_optimizer(cfg._replace(grad_clip_mode="global_norm"))
    s = opt_g.init(p)
    _, s = opt_g.update(jnp.asarray(grads[0]), s, p)
    u2, _ = opt_g.update(jnp.asarray(grads[1]), s, p)
    assert not np.allclose(np.asarray(u2), want[1], rtol=1e-3)


@pytest.mark.parametrize("field,value", [("grad_clip_mode", "norm"), ("lr_decay", 0.0),
                                         ("lr_decay", 1.5), ("lr_decay", float("nan"))])
def test_bad_optimizer_fields_raise(field, value):
    with pytest.raises(ValueError, match=field):
        rfo_train.check_config(rfo_train.TrainConfig(**{field: value}))


@pytest.mark.parametrize("value", [np.float32(0.9), np.float64(0.9), 1, np.int64(1)])
def test_lr_decay_accepts_numpy_floats_and_ints(value):
    cfg = rfo_train.TrainConfig(lr_decay=value)
    rfo_train.check_config(cfg)
    opt = rfo_train.make_optimizer(cfg)
    opt.update(jnp.ones(3), opt.init(jnp.zeros(3)), jnp.zeros(3))


@pytest.mark.parametrize("field,value,error", [("lr_decay", "0.9", TypeError),
                                               ("lr_decay", True, TypeError),
                                               ("grad_clip_mode", "norm", ValueError),
                                               ("lr", float("nan"), ValueError)])
def test_make_optimizer_checks_the_config_first(field, value, error):
    with pytest.raises(error, match=field):
        rfo_train.make_optimizer(rfo_train.TrainConfig(**{field: value}))
