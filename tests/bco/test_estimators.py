import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.bco import estimators


def _z(samples, target):
    m = samples.mean(0)
    se = samples.std(0, ddof=1) / np.sqrt(samples.shape[0])
    return (m - target) / se


def test_two_point_is_unbiased_for_the_smoothed_gradient():
    """f(x) = sum x_i^3: grad f_delta(x)_i = 3 x_i^2 + 3 delta^2 / (d + 2) (ball smoothing)."""
    d, delta, n = 3, 0.6, 200_000
    x = jnp.array([0.3, -0.5, 0.1])
    f = lambda y: jnp.sum(y**3)  # noqa: E731

    def one(k):
        u = estimators.sphere(k, d)
        return estimators.two_point(f(x + delta * u), f(x - delta * u), u, delta)

    g = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(0), n)), np.float64)
    smoothed = 3 * np.asarray(x) ** 2 + 3 * delta**2 / (d + 2)
    assert np.all(np.abs(_z(g, smoothed)) < 4.5), _z(g, smoothed)
    # ... and distinguishable from the unsmoothed gradient at this delta.
    assert np.any(np.abs(_z(g, 3 * np.asarray(x) ** 2)) > 10)


def test_control_variate_two_point_is_unbiased_for_any_hint():
    d, delta, n = 4, 0.1, 200_000
    theta = jnp.array([1.0, -2.0, 0.5, 0.0])
    hint = jnp.array([3.0, 1.0, -1.0, 2.0])
    f = lambda y: jnp.dot(theta, y)  # noqa: E731
    x = jnp.zeros(d)

    def one(k):
        u = estimators.sphere(k, d)
        return estimators.two_point(f(x + delta * u), f(x - delta * u), u, delta, hint)

    g = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(1), n)), np.float64)
    assert np.all(np.abs(_z(g, np.asarray(theta))) < 4.5)


def test_one_point_box_is_unbiased_for_linear_losses():
    d, delta, n = 3, 0.2, 400_000
    theta = jnp.array([0.7, -1.0, 0.4])
    hint = jnp.array([0.5, -0.5, 0.0])
    x = jnp.array([0.2, -0.3, 0.5])

    def one(k):
        i, s = estimators.coordinate_query(k, d)
        y = x + s * delta * jax.nn.one_hot(i, d)
        return estimators.one_point_box(jnp.dot(theta, y), y, i, s, delta, hint)

    g = np.asarray(jax.jit(jax.vmap(one))(jax.random.split(jax.random.key(2), n)), np.float64)
    assert np.all(np.abs(_z(g, np.asarray(theta))) < 4.5)


def test_sphere_is_unit_and_isotropic():
    u = jax.vmap(lambda k: estimators.sphere(k, 5))(jax.random.split(jax.random.key(3), 50_000))
    np.testing.assert_allclose(jnp.linalg.norm(u, axis=-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.cov(np.asarray(u).T) * 5, np.eye(5), atol=0.03)
