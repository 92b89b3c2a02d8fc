import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import qlearning as ql
from jaxlab.qlearning.reference import periodic_q_learning_numpy


@pytest.fixture(scope="module")
def mdp():
    return ql.garnet(jax.random.key(0), 6, 2, 3, 0.9)


@pytest.mark.parametrize("sampling", ql.SAMPLING_MODES)
@pytest.mark.parametrize("which", ["constant", "theory"])
def test_matches_numpy_reference(mdp, sampling, which):
    sched = ql.schedules.constant(37) if which == "constant" else ql.schedules.theory(0.9, 5.0)
    period_fn = (lambda n: 37) if which == "constant" else (
        lambda n: int(np.floor(np.float32(5.0) * np.float32(0.9 ** (-2 / 3)) ** np.float32(n))))
    us = jax.random.uniform(jax.random.key(1), (3000, 3))
    st = ql.init(jax.random.key(2), mdp)
    out = jax.jit(lambda s, u: ql.run_uniforms(s, mdp, sched, u, sampling))(st, us)
    ref = periodic_q_learning_numpy(mdp.transitions, mdp.rewards, 0.9, period_fn,
                                    np.asarray(us), sampling, start_state=int(st.env_state))
    np.testing.assert_allclose(out.q, ref["q"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.target, ref["target"], rtol=1e-5, atol=1e-5)
    assert int(out.outer_iter) == ref["outer_iter"]
    assert int(out.num_samples) == 3000


def test_inner_loop_averages_to_bellman_operator(mdp):
    """With a frozen target (period > steps) and 1/c steps, Q -> T Q_target."""
    q0 = jax.random.uniform(jax.random.key(5), (6, 2)) * 5.0
    st = ql.init(jax.random.key(6), mdp, q0)
    st = ql.run_steps(st, mdp, ql.schedules.constant(10**8), 120_000)
    np.testing.assert_array_equal(st.target, q0)  # never updated
    tq = ql.bellman_optimality(mdp, q0)
    # ~10^4 samples per (s, a); targets lie within gamma * range(q0) <= 4.5.
    np.testing.assert_allclose(st.q, tq, atol=0.1)


@pytest.mark.heavy
@pytest.mark.parametrize("sampling", ql.SAMPLING_MODES)
def test_converges_to_value_iteration(mdp, sampling):
    # The mean over 4 seeds (one seed's final error is itself noisy: ~0.03-0.06).
    q_star = ql.value_iteration(mdp)
    st = jax.vmap(lambda k: ql.init(k, mdp))(jax.random.split(jax.random.key(7), 4))
    _, tr = jax.jit(jax.vmap(lambda s: ql.simulate(s, mdp, ql.schedules.theory(0.9, 20.0),
                                                   q_star, 800, 500, sampling)))(st)
    assert float(tr.target_error[:, 0].min()) > 1.0
    assert float(tr.target_error[:, -1].mean()) < 0.05
    assert np.all(np.diff(np.asarray(tr.samples[0])) == 500)


@pytest.mark.heavy
def test_vmap_over_seeds_and_schedules_equals_loop(mdp):
    q_star = ql.value_iteration(mdp)
    scheds = [ql.schedules.constant(50), ql.schedules.theory(0.9, 10.0),
              ql.schedules.geometric(200.0, 0.8)]
    keys = jax.random.split(jax.random.key(8), 3)

    def one(k, s):
        return ql.simulate(ql.init(k, mdp), mdp, s, q_star, 5, 500)[1].target_error

    batched = jax.jit(jax.vmap(jax.vmap(one, (0, None)), (None, 0)))(
        keys, ql.schedules.stack(scheds))
    for i, s in enumerate(scheds):
        for j, k in enumerate(keys):
            np.testing.assert_allclose(batched[i, j], one(k, s), rtol=1e-5)


def test_no_retracing_across_schedules_and_seeds(mdp):
    q_star = ql.value_iteration(mdp)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def run(key, sched):
        return ql.simulate(ql.init(key, mdp), mdp, sched, q_star, 3, 100)[1]

    for k, s in [(0, ql.schedules.constant(5)), (1, ql.schedules.constant(9)),
                 (2, ql.schedules.theory(0.9, 3.0))]:
        run(jax.random.key(k), s)


def test_samples_to_accuracy():
    samples = jnp.array([10, 20, 30, 40])
    errors = jnp.array([[5.0, 0.5, 2.0, 0.1], [0.1, 0.1, 0.1, 0.1], [5.0, 4.0, 3.0, 2.0]])
    np.testing.assert_array_equal(ql.samples_to_accuracy(samples, errors, 1.0),
                                  [40.0, 10.0, np.inf])
    with pytest.raises(ValueError, match="eps"):
        ql.samples_to_accuracy(samples, errors, 0.0)


def test_bad_input(mdp):
    st = ql.init(jax.random.key(0), mdp)
    with pytest.raises(ValueError, match="sampling"):
        ql.run_steps(st, mdp, ql.schedules.constant(3), 10, sampling="offline")
    with pytest.raises(ValueError, match="q0"):
        ql.init(jax.random.key(0), mdp, jnp.zeros((5, 2)))
    with pytest.raises(ValueError, match="q_star"):
        ql.simulate(st, mdp, ql.schedules.constant(3), jnp.zeros(6), 2, 2)
    with pytest.raises(ValueError, match="num_steps"):
        ql.run_steps(st, mdp, ql.schedules.constant(3), 0)
    with pytest.raises(ValueError, match="uniforms"):
        ql.run_uniforms(st, mdp, ql.schedules.constant(3), jnp.zeros((4, 2)))
