"""MsMwC (Chen, Luo, Wei 2021): the weighted-entropy OMD step against a float64 SciPy root
solve and the closed form, Alg. 1 against an independent NumPy loop, its per-expert regret
bound on adversarial losses, and the ensemble that uses it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize

from jaxlab import bco
from jaxlab.bco import ensembles, losses, msmwc


def _np_step(prev, x, eta):
    """float64 reference: p_i = prev_i exp(-eta_i (x_i + mu)), mu by Brent's method."""
    def excess(mu):
        return np.sum(prev * np.exp(-eta * (x + mu))) - 1.0
    mu = optimize.brentq(excess, -x.max() - 1.0, -x.min() + 1.0, xtol=1e-14)
    p = prev * np.exp(-eta * (x + mu))
    return p / p.sum()


@pytest.mark.heavy
def test_step_matches_scipy_root_and_kkt():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 9))
        prev = rng.dirichlet(np.ones(n))
        x = rng.normal(0, 3, n)
        eta = rng.uniform(0.01, 2.0, n)
        p = np.exp(np.asarray(msmwc.weighted_entropy_step(
            jnp.log(jnp.asarray(prev, jnp.float32)), jnp.asarray(x, jnp.float32),
            jnp.asarray(eta, jnp.float32)), np.float64))
        want = _np_step(prev, x, eta)
        np.testing.assert_allclose(p, want, rtol=2e-4, atol=1e-6)
        # KKT: x_i + ln(p_i / prev_i) / eta_i is the same for every i.
        g = x + np.log(want / prev) / eta
        assert np.ptp(g) < 1e-8


def test_step_equal_rates_is_the_softmax():
    rng = np.random.default_rng(1)
    prev, x = rng.dirichlet(np.ones(6)), rng.normal(0, 2, 6)
    logp = msmwc.weighted_entropy_step(jnp.log(jnp.asarray(prev, jnp.float32)),
                                       jnp.asarray(x, jnp.float32), jnp.full(6, 0.7))
    np.testing.assert_allclose(np.exp(logp), jax.nn.softmax(np.log(prev) - 0.7 * x),
                               rtol=1e-4, atol=1e-7)


def _np_msmwc(prior, eta, ls, ms):
    """Alg. 1 of Chen, Luo, Wei (2021) in float64 NumPy: returns [T, N] p_t."""
    pp, out = prior.copy(), []
    for loss, m in zip(ls, ms, strict=True):
        out.append(_np_step(pp, m, eta))
        pp = _np_step(pp, loss + 32.0 * eta * (loss - m) ** 2, eta)
    return np.asarray(out)


def _adversarial(seed, t=400, n=5):
    rng = np.random.default_rng(seed)
    base = rng.uniform(-1, 1, n)
    ls = np.clip(base + 0.5 * np.sign(np.sin(np.arange(t)[:, None] / (7 + 3 * np.arange(n))))
                 + rng.normal(0, 0.2, (t, n)), -1, 1)
    ms = np.concatenate([np.zeros((1, n)), ls[:-1]])  # hint = previous loss
    return ls, ms


def test_run_matches_numpy_algorithm_1():
    ls, ms = _adversarial(0, t=150)
    eta = np.array([1 / 64, 1 / 128, 1 / 256, 1 / 64, 1 / 512])
    prior = np.array([0.1, 0.2, 0.3, 0.25, 0.15])
    got = np.asarray(msmwc.run(prior, eta, ls, ms))
    np.testing.assert_allclose(got, _np_msmwc(prior, eta, ls, ms), rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_per_expert_regret_bound(seed):
    """sum_t <p_t - e_i, l_t> <= D_psi(e_i, q) + 32 eta_i sum_t (l_ti - m_ti)^2
    - 28 sum_t sum_j eta_j p_tj (l_tj - m_tj)^2 for every i (32 eta |l - m| <= 1 holds)."""
    ls, ms = _adversarial(seed)
    n = ls.shape[1]
    eta = np.array([1 / 64, 1 / 96, 1 / 128, 1 / 256, 1 / 64])
    q = np.full(n, 1.0 / n)
    assert np.all(32 * eta * np.abs(ls - ms) <= 1)
    p = np.asarray(msmwc.run(q, eta, ls, ms), np.float64)
    dev2 = (ls - ms) ** 2
    stability = 28 * np.sum(eta * p * dev2)
    for i in range(n):
        regret = np.sum(p * ls) - ls[:, i].sum()
        bregman = (np.log(1 / q[i]) - 1) / eta[i] + np.sum(q / eta)
        assert regret <= bregman + 32 * eta[i] * dev2[:, i].sum() - stability + 1e-3


def test_correction_penalises_a_noisy_expert():
    """Two experts with the same mean loss; one is noisy around the hint. With the
    correction MsMwC moves weight to the stable one (Hedge alone would not separate them)."""
    t = 2000
    rng = np.random.default_rng(3)
    noisy = rng.choice([-1.0, 1.0], t) * 0.9
    ls = np.stack([np.zeros(t), noisy], 1)
    ms = np.zeros_like(ls)
    p = np.asarray(msmwc.run(np.array([0.5, 0.5]), np.array([1 / 40, 1 / 40]), ls, ms))
    assert p[-1, 0] > 0.9


def test_bad_inputs_name_the_argument():
    ls, ms = _adversarial(0, t=10)
    with pytest.raises(ValueError, match="prior"):
        msmwc.run(np.array([0.5, 0.6, 0, 0, 0]), np.full(5, 0.01), ls, ms)
    with pytest.raises(ValueError, match="eta"):
        msmwc.run(np.full(5, 0.2), np.array([0.01, 0, 0.01, 0.01, 0.01]), ls, ms)
    with pytest.raises(ValueError, match="hints"):
        msmwc.run(np.full(5, 0.2), np.full(5, 0.01), ls, ms[:, :3])
    with pytest.raises(ValueError, match="meta"):
        ensembles.dynamic_ensemble(bco.ball(4), 0.1, 100, meta="adahedge")
    with pytest.raises(ValueError, match="optimistic"):
        ensembles.dynamic_ensemble(bco.ball(4), 0.1, 100, optimistic=True, meta="msmwc")


@pytest.mark.heavy
def test_msmwc_ensemble_runs_jitted_and_vmapped():
    dom = bco.ball(4)
    seq = losses.switching_quadratic(jax.random.key(0), 300, 4, 50)
    learner = ensembles.dynamic_ensemble(dom, 0.1, 300, meta="msmwc")
    runs = jax.jit(jax.vmap(lambda k: bco.run(k, learner, seq, jnp.zeros(4))))(
        jax.random.split(jax.random.key(1), 3))
    r = jax.vmap(lambda info: bco.dynamic_regret(info, seq, dom))(runs)
    assert np.all(np.isfinite(np.asarray(r)))
    state = learner.init(jax.random.key(0))
    for k in range(5):
        state, _ = learner.step(jax.random.key(k), state, lambda x: jnp.sum((x - 0.3) ** 2))
    w = np.exp(np.asarray(state.meta.log_pp))
    assert abs(w.sum() - 1) < 1e-5 and np.all(w > 0)
    assert np.all(np.asarray(state.meta.sum_dev2) > 0)
