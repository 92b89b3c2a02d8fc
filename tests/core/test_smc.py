import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxlab.core import smc

WEIGHTS = np.array([0.05, 0.4, 0.15, 0.3, 0.1])


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(smc.RESAMPLERS))
def test_resampler_is_unbiased(name):
    """E[count_i] = M w_i: chi-square test over many independent resamplings."""
    fn = smc.get_resampler(name)
    m, reps = 10, 4000
    keys = jax.random.split(jax.random.key(0), reps)
    idx = jax.vmap(lambda k: fn(k, jnp.asarray(WEIGHTS), m))(keys)
    assert idx.shape == (reps, m) and idx.dtype == jnp.int32
    counts = np.bincount(np.asarray(idx).ravel(), minlength=len(WEIGHTS))
    expected = reps * m * WEIGHTS
    # The low-variance schemes are far from multinomial, so compare means with a z-test
    # using the multinomial variance as an upper bound on theirs.
    z = (counts - expected) / np.sqrt(expected * (1 - WEIGHTS))
    assert np.all(np.abs(z) < 4.5), z
    if name == "multinomial":
        assert stats.chisquare(counts, expected).pvalue > 1e-4


@pytest.mark.parametrize("name", ["systematic", "stratified", "residual"])
def test_low_variance_schemes_keep_floor_counts(name):
    fn = smc.get_resampler(name)
    m = 20
    for seed in range(20):
        counts = np.bincount(np.asarray(fn(jax.random.key(seed), jnp.asarray(WEIGHTS), m)),
                             minlength=len(WEIGHTS))
        low = np.floor(m * WEIGHTS)
        if name == "stratified":
            low = np.maximum(low - 1, 0)
        assert np.all(counts >= low), (counts, low)
        if name == "systematic":
            assert np.all(counts <= np.ceil(m * WEIGHTS))


def test_residual_deterministic_when_exact():
    w = jnp.array([0.25, 0.5, 0.25])
    idx = smc.residual(jax.random.key(0), w, 4)
    np.testing.assert_array_equal(np.sort(idx), [0, 1, 1, 2])


def test_ess_and_normalization():
    assert float(smc.ess(jnp.zeros(8))) == pytest.approx(8.0)
    assert float(smc.ess(jnp.array([0.0, -1e4, -1e4]))) == pytest.approx(1.0)
    lw = jnp.array([1.0, 2.0, 3.0]) + 1000.0  # exp would overflow without the shift
    w, log_mean = smc.normalize_log_weights(lw)
    lw64 = np.asarray(lw, np.float64)
    ref = np.exp(lw64 - lw64.max())
    np.testing.assert_allclose(w, ref / ref.sum(), rtol=1e-6)
    np.testing.assert_allclose(log_mean, lw64.max() + np.log(ref.mean()), rtol=1e-6)


def test_bad_input():
    with pytest.raises(ValueError, match="name"):
        smc.get_resampler("nope")
    with pytest.raises(ValueError, match="weights"):
        smc.systematic(jax.random.key(0), jnp.ones((2, 2)), 4)


@pytest.mark.parametrize("name", sorted(smc.RESAMPLERS))
@pytest.mark.parametrize("weights,num_samples,arg", [
    ([0.5, np.nan, 0.5], 4, "weights"), ([0.5, np.inf, 0.5], 4, "weights"),
    ([0.5, -0.1, 0.6], 4, "weights"), ([0.0, 0.0, 0.0], 4, "weights"), ([], 4, "weights"),
    ([0.5, 0.5], 0, "num_samples"), ([0.5, 0.5], -1, "num_samples"),
])
def test_resamplers_reject_bad_weights(name, weights, num_samples, arg):
    with pytest.raises(ValueError, match=f"`{arg}`"):
        smc.RESAMPLERS[name](jax.random.key(0), np.asarray(weights, np.float32), num_samples)


@pytest.mark.parametrize("name", sorted(smc.RESAMPLERS))
def test_traced_weights_are_not_inspected(name):
    """Inside jit the checks cannot see values: the function still traces and runs."""
    fn = jax.jit(lambda w: smc.RESAMPLERS[name](jax.random.key(0), w, 5))
    assert fn(jnp.asarray(WEIGHTS)).shape == (5,)


@pytest.mark.parametrize("log_weights", [[0.0, np.nan], [0.0, np.inf], [-np.inf, -np.inf], []])
def test_ess_rejects_bad_log_weights(log_weights):
    with pytest.raises(ValueError, match="`log_weights`"):
        smc.ess(jnp.asarray(log_weights, jnp.float32))


def test_ess_accepts_zero_weight_particles():
    assert float(smc.ess(jnp.array([0.0, -jnp.inf, 0.0]))) == pytest.approx(2.0)


# Legal weights at the edges of their dtype: the resamplers must match a NumPy float64
# normalisation of the same numbers.
EXTREME = {
    "float32_near_max": (WEIGHTS * 6e38).astype(np.float32),
    "int32_near_2^31": np.round(WEIGHTS / WEIGHTS.max() * (2**31 - 1)).astype(np.int32),
    "float32_subnormal": (WEIGHTS * 1e-39).astype(np.float32),
    "float64_tiny": WEIGHTS * 1e-300,
    "float64_huge": WEIGHTS * 1e300,
}


def _numpy_inverse_cdf(weights, u):
    w = np.asarray(weights, np.float64)
    cdf = np.cumsum(w / w.sum())
    return np.minimum(np.searchsorted(cdf / cdf[-1], u, side="right"), len(w) - 1)


@pytest.mark.parametrize("kind", sorted(EXTREME))
def test_extreme_weights_match_numpy_float64(kind):
    """Same key, same uniforms: the ancestors equal an inverse-CDF lookup in float64."""
    w, m = EXTREME[kind], 16
    for seed in range(3):
        key = jax.random.key(seed)
        u_sys = (np.arange(m) + float(jax.random.uniform(key))) / m
        u_str = (np.arange(m) + np.asarray(jax.random.uniform(key, (m,)), np.float64)) / m
        u_mul = np.sort(np.asarray(jax.random.uniform(key, (m,)), np.float64))
        for name, u in (("systematic", u_sys), ("stratified", u_str), ("multinomial", u_mul)):
            got = np.asarray(smc.RESAMPLERS[name](key, w, m))
            np.testing.assert_array_equal(got, _numpy_inverse_cdf(w, u), err_msg=name)


@pytest.mark.parametrize("kind", sorted(EXTREME))
def test_extreme_weights_residual_counts(kind):
    """Residual resampling of extreme weights keeps floor(M p_i) copies of particle i,
    p the float64 normalisation (the rest are random)."""
    w, m = EXTREME[kind], 20
    p = np.asarray(w, np.float64) / np.asarray(w, np.float64).sum()
    for seed in range(3):
        counts = np.bincount(np.asarray(smc.residual(jax.random.key(seed), w, m)),
                             minlength=len(p))
        assert counts.sum() == m
        assert np.all(counts >= np.floor(m * p)), (counts, m * p)


@pytest.mark.parametrize("name", sorted(smc.RESAMPLERS))
def test_traced_extreme_weights(name):
    """Inside jit the weights are divided by their max in the compiled body."""
    w = EXTREME["float32_near_max"]
    fn = jax.jit(lambda w: smc.RESAMPLERS[name](jax.random.key(0), w, 8))
    np.testing.assert_array_equal(fn(w), smc.RESAMPLERS[name](jax.random.key(0), w, 8))
    counts = np.bincount(np.asarray(fn(w)), minlength=len(w))
    assert (counts > 0).sum() > 1  # not every particle from one ancestor


@pytest.mark.parametrize("name", sorted(smc.RESAMPLERS))
def test_checked_mode_flags_traced_bad_weights(name):
    from jaxlab.core import checked

    fn = checked.checkify(jax.jit(lambda w: smc.RESAMPLERS[name](jax.random.key(0), w, 4)))
    before = checked.enabled()
    with checked.checks(True):
        with pytest.raises(checked.CheckError, match=f"smc.{name}: `weights` must"):
            fn(np.array([0.5, np.nan, 0.5], np.float32))
        with pytest.raises(checked.CheckError, match="`weights` must be non-negative"):
            fn(np.array([0.5, -1.0, 0.5], np.float32))
        np.testing.assert_array_equal(fn(WEIGHTS.astype(np.float32)),
                                      smc.RESAMPLERS[name](jax.random.key(0), WEIGHTS, 4))
    assert checked.enabled() == before
