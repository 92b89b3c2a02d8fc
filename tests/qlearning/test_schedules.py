import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.qlearning import schedules


def test_constant_period():
    s = schedules.constant(7)
    np.testing.assert_array_equal(jax.vmap(s)(jnp.arange(50)), 7)


def test_theory_period_grows_like_gamma_pow():
    gamma = 0.9
    s = schedules.theory(gamma, base=10.0)
    n = np.arange(60)
    k = np.asarray(jax.vmap(s)(n))
    np.testing.assert_array_equal(k, np.floor(10.0 * gamma ** (-2.0 * n / 3.0)).astype(int))
    assert np.all(np.diff(k) >= 0) and k[-1] > 10 * k[0]


def test_shrinking_is_floored_and_capped():
    k = np.asarray(jax.vmap(schedules.geometric(100.0, 0.5))(jnp.arange(20)))
    assert k[0] == 100 and k[-1] == 1 and np.all(np.diff(k) <= 0)
    capped = np.asarray(jax.vmap(schedules.geometric(2.0, 10.0, max_period=500))(jnp.arange(40)))
    assert capped.max() == 500 and capped.dtype == np.int32  # no overflow past the cap


def test_stack_vmaps_over_schedules():
    st = schedules.stack([schedules.constant(3), schedules.theory(0.9, 5.0)])
    out = jax.vmap(lambda s: s(jnp.int32(30)))(st)
    np.testing.assert_array_equal(out, [3, int(np.floor(5 * 0.9 ** (-20.0)))])


def test_step_sizes():
    np.testing.assert_allclose(schedules.inverse_count_step()(jnp.arange(1, 5)),
                               [1, 1 / 2, 1 / 3, 1 / 4], rtol=1e-6)
    np.testing.assert_allclose(schedules.constant_step(0.1)(jnp.arange(1, 4)), 0.1)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_periods(bad):
    with pytest.raises(ValueError, match="period"):
        schedules.constant(bad)


def test_bad_schedule_args():
    with pytest.raises(ValueError, match="base"):
        schedules.geometric(0.5, 1.1)
    with pytest.raises(ValueError, match="ratio"):
        schedules.geometric(1.0, -1.0)
    with pytest.raises(ValueError, match="gamma"):
        schedules.theory(1.0)
    with pytest.raises(ValueError, match="alpha"):
        schedules.constant_step(0.0)
    with pytest.raises(ValueError, match="schedules"):
        schedules.stack([])
