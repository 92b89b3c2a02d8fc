"""The paper's SGD inner loop, trajectory sampling and the MDP families, checked
against independent NumPy references (matrix powers, direct Bellman backups, counts)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import qlearning as ql
from jaxlab.qlearning import schedules
from jaxlab.qlearning.reference import periodic_q_learning_numpy


@pytest.fixture(scope="module")
def mdp():
    return ql.garnet(jax.random.key(0), 6, 2, 3, 0.9)


def _numpy_backup(p, r, gamma, q):
    """(T q)(s, a) = r + gamma sum_s' P max_a' q, written independently of the library."""
    p, r, q = (np.asarray(x, np.float64) for x in (p, r, q))
    out = np.empty_like(r)
    for s in range(r.shape[0]):
        for a in range(r.shape[1]):
            out[s, a] = r[s, a] + gamma * sum(p[s, a, t] * q[t].max() for t in range(len(q)))
    return out


def test_stationary_distribution_matches_matrix_power(mdp):
    pi = ql.stationary_distribution(mdp)
    p_u = np.asarray(mdp.transitions, np.float64).mean(1)
    p_u /= p_u.sum(-1, keepdims=True)  # float32 rows sum to 1 only up to ~1e-7
    ref = np.linalg.matrix_power(0.5 * (np.eye(6) + p_u), 4000)[0]  # lazy chain: aperiodic
    np.testing.assert_allclose(pi, ref, atol=1e-8)
    mu = ql.sampling_distribution(mdp, "trajectory")
    np.testing.assert_allclose(mu, np.repeat(ref[:, None] / 2, 2, 1), atol=1e-8)
    np.testing.assert_allclose(ql.sampling_distribution(mdp, "generative"), 1 / 12)


def test_trajectory_sampling_visits_pairs_at_the_stationary_rates(mdp):
    alg = ql.periodic(mdp, schedules.constant(10**8), sampling="trajectory")
    n = 200_000
    _, info = jax.jit(lambda k: jax.lax.scan(lambda s, kk: alg.step(kk, s), alg.init(k),
                                             jax.random.split(k, n)))(jax.random.key(3))
    counts = np.zeros((6, 2))
    np.add.at(counts, (np.asarray(info.state), np.asarray(info.action)), 1)
    mu = ql.sampling_distribution(mdp, "trajectory")
    # Markov-chain CLT: the sd of a frequency is a few times sqrt(mu / n) <= 1.3e-3.
    np.testing.assert_allclose(counts / n, mu, atol=6e-3)


@pytest.mark.parametrize("sampling", ql.SAMPLING_MODES)
def test_sgd_inner_loop_converges_to_one_step_backup_of_frozen_target(mdp, sampling):
    q0 = np.asarray(jax.random.uniform(jax.random.key(5), (6, 2))) * 5.0
    step = ql.paper_sgd_step(mdp, sampling)
    st = ql.init(jax.random.key(6), mdp, q0)
    st = jax.jit(lambda s: ql.run_steps(s, mdp, schedules.constant(10**8), 150_000, sampling,
                                        step))(st)
    np.testing.assert_array_equal(st.target, q0)  # the target stays frozen
    tq = _numpy_backup(mdp.transitions, mdp.rewards, 0.9, q0)
    # targets lie within gamma * range(q0) <= 4.5; >= 4e3 samples per (s, a)
    np.testing.assert_allclose(st.q, tq, atol=0.15)
    assert float(np.abs(np.asarray(st.q) - tq).max()) < float(np.abs(q0 - tq).max()) / 10


def test_sgd_step_formula():
    step = schedules.sgd_step(0.05)
    k = jnp.arange(0, 1000, 7)
    np.testing.assert_allclose(step(jnp.ones_like(k), k),
                               np.minimum(1.0, 2.0 / (0.05 * (np.arange(0, 1000, 7) + 40.0))),
                               rtol=1e-6)
    np.testing.assert_allclose(step(1, 0), 1.0)  # offset 2 / xi: alpha_0 = 1
    # the local-clock step ignores k and the global-clock step ignores the count
    np.testing.assert_allclose(schedules.inverse_count_step()(4, 1000), 0.25)
    np.testing.assert_allclose(step(1, 10), step(50, 10))


def test_growth_schedule_is_theory_at_two_thirds():
    n = jnp.arange(40)
    np.testing.assert_array_equal(schedules.growth(0.9, 2 / 3, 7.0)(n),
                                  schedules.theory(0.9, 7.0)(n))
    np.testing.assert_array_equal(schedules.growth(0.9, 2.0, 3.0)(n),
                                  np.floor(np.float32(3.0) * np.float32(0.9 ** -2.0)
                                           ** np.arange(40, dtype=np.float32)))


@pytest.mark.parametrize("sampling", ql.SAMPLING_MODES)
def test_sgd_and_bernoulli_match_numpy_reference(mdp, sampling):
    bern = ql.with_bernoulli_rewards(mdp)
    xi = float(ql.sampling_distribution(mdp, sampling).min())
    us = jax.random.uniform(jax.random.key(1), (3000, 3))
    st = ql.init(jax.random.key(2), bern)
    out = jax.jit(lambda s, u: ql.run_uniforms(s, bern, schedules.constant(41), u, sampling,
                                               schedules.sgd_step(xi)))(st, us)
    ref = periodic_q_learning_numpy(mdp.transitions, mdp.rewards, 0.9, lambda n: 41,
                                    np.asarray(us), sampling, step_scale=2.0,
                                    start_state=int(st.env_state), sgd_xi=np.float32(xi),
                                    bernoulli=True)
    np.testing.assert_allclose(out.q, ref["q"], rtol=1e-5, atol=1e-5)
    assert int(out.outer_iter) == ref["outer_iter"]


def test_bernoulli_rewards_have_the_mean_rewards(mdp):
    bern = ql.with_bernoulli_rewards(mdp)
    alg = ql.periodic(bern, schedules.constant(10**8))
    n = 100_000
    _, info = jax.jit(lambda k: jax.lax.scan(lambda s, kk: alg.step(kk, s), alg.init(k),
                                             jax.random.split(k, n)))(jax.random.key(4))
    r = np.asarray(info.reward)
    assert set(np.unique(r)) <= {0.0, 1.0}
    s, a = np.asarray(info.state), np.asarray(info.action)
    means = np.array([[r[(s == i) & (a == j)].mean() for j in range(2)] for i in range(6)])
    np.testing.assert_allclose(means, mdp.rewards, atol=0.03)  # ~8e3 draws per pair
    # Q* is unchanged: the Bernoulli draws have the same means.
    np.testing.assert_allclose(ql.value_iteration(bern), ql.value_iteration(mdp))


def test_sparse_reward_family():
    m = ql.sparse_reward(jax.random.key(2), 8, 3, 3, 0.99, num_rewarding=2)
    r = np.asarray(m.rewards)
    assert sorted(np.unique(r)) == [0.0, 1.0] and r.sum() == 2
    np.testing.assert_allclose(np.asarray(m.transitions).sum(-1), 1.0, atol=1e-6)
    g = ql.garnet(jax.random.split(jax.random.key(2))[0], 8, 3, 3, 0.99)
    np.testing.assert_array_equal(m.transitions, g.transitions)  # Garnet dynamics


def test_reducible_chain_is_rejected():
    p = np.zeros((3, 1, 3))
    p[0, 0, 1] = p[1, 0, 1] = p[2, 0, 2] = 1.0  # state 0 is transient
    m = ql.make_mdp(p, np.zeros((3, 1)), 0.9)
    with pytest.raises(ValueError, match="reducible"):
        ql.stationary_distribution(m)
    with pytest.raises(ValueError, match="reducible"):
        ql.paper_sgd_step(m, "trajectory")
