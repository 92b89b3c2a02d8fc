import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.avatar import adjoint, solvers, utilities

EPS = 0.1


@pytest.fixture(scope="module")
def problem():
    cost = jax.random.uniform(jax.random.key(0), (12, 15))
    return cost, solvers.entropic_plan(cost, EPS, threshold=1e-7, max_iterations=10_000)


@pytest.mark.parametrize("method", ["cg", "dense"])
def test_matches_ott_implicit_differentiation(problem, method):
    cost, plan = problem
    w = jax.random.normal(jax.random.key(1), cost.shape)
    ref = solvers.implicit_utility_grad(cost, EPS, w)
    got = adjoint.cost_gradient(plan, w, EPS, method=method)
    np.testing.assert_allclose(got, ref, atol=1e-5 * float(jnp.abs(ref).max()) + 1e-7)


def _laplacian(key, n):
    a = (jax.random.uniform(key, (n, n)) < 0.3).astype(jnp.float32)
    a = jnp.triu(a, 1)
    a = a + a.T
    return jnp.diag(a.sum(1)) - a


@pytest.mark.parametrize("name", utilities.UTILITIES)
def test_utility_gradients_match_autodiff(problem, name):
    cost, plan = problem
    ctx = utilities.UtilityContext(cost=cost + 0.1, lap1=_laplacian(jax.random.key(2), 12),
                                   lap2=_laplacian(jax.random.key(3), 15))
    auto = jax.grad(lambda t: utilities.value(name, t, ctx))(plan)
    np.testing.assert_allclose(utilities.gradient(name, plan, ctx), auto, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", utilities.UTILITIES)
def test_cost_gradient_matches_finite_differences(problem, name):
    """Directional derivative of f(T(C)) through Sinkhorn vs <grad_C f, V>."""
    cost, plan = problem
    ctx = utilities.UtilityContext(cost=cost + 0.1, lap1=_laplacian(jax.random.key(2), 12),
                                   lap2=_laplacian(jax.random.key(3), 15))
    grad_c = adjoint.cost_gradient(plan, utilities.gradient(name, plan, ctx), EPS)
    v = jax.random.normal(jax.random.key(4), cost.shape)

    def f(c):
        t = solvers.entropic_plan(c, EPS, threshold=1e-7, max_iterations=10_000)
        return float(utilities.value(name, t, ctx))

    def central(h):
        return (f(cost + h * v) - f(cost - h * v)) / (2 * h)

    fd = (4 * central(2e-3) - central(4e-3)) / 3  # Richardson: O(h^4) error
    np.testing.assert_allclose(float(jnp.sum(grad_c * v)), fd, rtol=5e-2, atol=1e-4)


def test_bad_input(problem):
    cost, plan = problem
    with pytest.raises(ValueError, match="grad_plan"):
        adjoint.cost_gradient(plan, jnp.zeros((3, 3)), EPS)
    with pytest.raises(ValueError, match="epsilon"):
        adjoint.cost_gradient(plan, plan, 0.0)
    with pytest.raises(ValueError, match="method"):
        adjoint.cost_gradient(plan, plan, EPS, method="lu")
    with pytest.raises(ValueError, match="epsilon"):
        solvers.entropic_plan(cost, -1.0)
    with pytest.raises(ValueError, match="struct2"):
        solvers.fgw_plan(cost, jnp.zeros((12, 12)), jnp.zeros((12, 12)), EPS)
    with pytest.raises(ValueError, match="utility"):
        utilities.gradient("nope", plan)
    with pytest.raises(ValueError, match="ctx.cost"):
        utilities.gradient("kl", plan)
