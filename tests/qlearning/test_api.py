"""The uniform Algorithm API of jaxlab.qlearning: periodic(...).init / .step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import qlearning as ql
from jaxlab.core.types import Algorithm
from jaxlab.qlearning import periodic_q
from jaxlab.qlearning.reference import periodic_q_learning_numpy
from tests.qlearning import api_example


@pytest.fixture(scope="module")
def mdp():
    return ql.garnet(jax.random.key(0), 6, 2, 3, 0.9)


def _raw(x):
    return jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x


def _assert_equal(a, b):
    """Bit-equal pytrees (PRNG keys compared by their data)."""
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(_raw(x), _raw(y)), a, b)


def _assert_same_run(a, b):
    """Two compiled programs of the same run: integer, boolean and key leaves bit-equal,
    floats to float32 rounding (XLA may fuse the two programs' arithmetic differently; jax
    0.12 does, by one ulp here and there)."""
    def same(x, y):
        x, y = _raw(x), _raw(y)
        if jnp.issubdtype(x.dtype, jnp.floating):
            np.testing.assert_allclose(x, y, rtol=1e-6, atol=0)
        else:
            np.testing.assert_array_equal(x, y)

    jax.tree.map(same, a, b)


def _scan_steps(alg, state, keys):
    return jax.lax.scan(lambda s, k: alg.step(k, s), state, keys)


def test_step_is_the_kernel_on_the_keys_uniforms(mdp):
    sched = ql.schedules.constant(4)
    alg = ql.periodic(mdp, sched)
    assert isinstance(alg, Algorithm)
    state = alg.init(jax.random.key(1))
    kernel = periodic_q.build_kernel(mdp)
    for i in range(10):
        key = jax.random.key(100 + i)
        new, info = alg.step(key, state)
        ref = kernel(state, sched, jax.random.uniform(key, (3,)))
        _assert_equal(new, ref)
        same, same_info = ql.step(key, state, mdp, sched)  # the module-level step
        _assert_equal(same, new)
        _assert_equal(same_info, info)
        _assert_equal(new.key, state.key)  # step leaves the bulk path's key alone
        state = new


@pytest.mark.parametrize("sampling", ql.SAMPLING_MODES)
def test_scanned_steps_match_run_uniforms_and_numpy_reference(mdp, sampling):
    sched = ql.schedules.theory(0.9, 5.0)
    alg = ql.periodic(mdp, sched, sampling=sampling)
    state = alg.init(jax.random.key(2))
    keys = jax.random.split(jax.random.key(3), 2000)
    us = jax.vmap(lambda k: jax.random.uniform(k, (3,)))(keys)
    out, info = jax.jit(_scan_steps, static_argnums=0)(alg, state, keys)
    ref = jax.jit(lambda s, u: ql.run_uniforms(s, mdp, sched, u, sampling))(state, us)
    _assert_same_run(out, ref)
    period_fn = lambda n: int(np.floor(  # noqa: E731
        np.float32(5.0) * np.float32(0.9 ** (-2 / 3)) ** np.float32(n)))
    npy = periodic_q_learning_numpy(mdp.transitions, mdp.rewards, 0.9, period_fn,
                                    np.asarray(us), sampling, start_state=int(state.env_state))
    np.testing.assert_allclose(out.q, npy["q"], rtol=1e-5, atol=1e-5)
    assert int(out.outer_iter) == npy["outer_iter"]
    # Info: one target update per completed inner loop; samples consistent with the state.
    assert int(info.target_updated.sum()) == int(out.outer_iter)
    assert info.target_updated.dtype == jnp.bool_
    np.testing.assert_array_equal(info.next_state[-1], out.env_state)
    if sampling == "trajectory":  # s_t is the previous step's s'
        np.testing.assert_array_equal(info.state[1:], info.next_state[:-1])
    assert np.all((info.action >= 0) & (info.action < 2))


def test_info_td_error_and_step_size(mdp):
    alg = ql.periodic(mdp, ql.schedules.constant(10**6),
                      step_size=ql.schedules.constant_step(0.5))
    q0 = jax.random.uniform(jax.random.key(4), (6, 2))
    state = alg.init(jax.random.key(5), q0)
    new, info = alg.step(jax.random.key(6), state)
    s, a, s2 = int(info.state), int(info.action), int(info.next_state)
    y = mdp.rewards[s, a] + 0.9 * q0[s2].max()
    np.testing.assert_allclose(info.td_error, y - q0[s, a], rtol=1e-6)
    np.testing.assert_allclose(info.step_size, 0.5)
    np.testing.assert_allclose(new.q[s, a], q0[s, a] + 0.5 * (y - q0[s, a]), rtol=1e-6)
    assert not bool(info.target_updated)


def test_init_is_the_module_init(mdp):
    alg = ql.periodic(mdp, ql.schedules.constant(3))
    a, b = alg.init(jax.random.key(7)), ql.init(jax.random.key(7), mdp)
    _assert_equal(a, b)
    assert ql.State is periodic_q.PeriodicQState


def test_api_example_is_deterministic_jittable_and_vmaps():
    alg, init_args, step_args = api_example.build()
    key = jax.random.key(8)
    s = alg.init(key, *init_args)
    s1, i1 = alg.step(key, s, *step_args)
    s2, i2 = jax.jit(lambda k, st: alg.step(k, st, *step_args))(key, s)
    _assert_equal((s1, i1), (s2, i2))
    keys = jax.random.split(key, 4)
    states = jax.vmap(lambda k: alg.init(k, *init_args))(keys)
    batched, infos = jax.vmap(lambda k, st: alg.step(k, st, *step_args))(keys, states)
    assert batched.q.shape == (4, 5, 2) and infos.td_error.shape == (4,)
    one, _ = alg.step(keys[2], jax.tree.map(lambda x: x[2], states), *step_args)
    np.testing.assert_array_equal(batched.q[2], one.q)


def test_bad_input(mdp):
    with pytest.raises(ValueError, match="sampling"):
        ql.periodic(mdp, ql.schedules.constant(3), sampling="offline")
    with pytest.raises(ValueError, match="sampling"):
        ql.step(jax.random.key(0), ql.init(jax.random.key(0), mdp), mdp,
                ql.schedules.constant(3), sampling="offline")
    with pytest.raises(ValueError, match="q0"):
        ql.periodic(mdp, ql.schedules.constant(3)).init(jax.random.key(0), jnp.zeros((5, 2)))
