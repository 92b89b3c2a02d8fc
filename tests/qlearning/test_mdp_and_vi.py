import jax
import numpy as np
import pytest

from jaxlab import qlearning as ql


def _vi_numpy(p, r, gamma, iters=5000):
    q = np.zeros_like(r, dtype=np.float64)
    for _ in range(iters):
        q = r + gamma * p @ q.max(-1)
    return q


def test_garnet_structure():
    mdp = ql.garnet(jax.random.key(0), 12, 3, 4, 0.9)
    p = np.asarray(mdp.transitions)
    assert p.shape == (12, 3, 12)
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-6)
    assert np.all((p > 0).sum(-1) == 4)
    assert np.all((np.asarray(mdp.rewards) >= 0) & (np.asarray(mdp.rewards) <= 1))


def test_garnet_probabilities_are_flat_dirichlet():
    """Each P[s, a, :] restricted to its support is Dirichlet(1, ..., 1): the entry of the
    lowest reachable state is Beta(1, b - 1) (KS test over 600 rows), and the same key
    gives the same MDP."""
    from scipy import stats

    b = 3
    mdp = ql.garnet(jax.random.key(11), 30, 20, b, 0.9)
    p = np.asarray(mdp.transitions).reshape(-1, 30)
    first = p[np.arange(len(p)), (p > 0).argmax(-1)]
    assert stats.kstest(first, stats.beta(1, b - 1).cdf).pvalue > 1e-3
    again = ql.garnet(jax.random.key(11), 30, 20, b, 0.9)
    np.testing.assert_array_equal(np.asarray(again.transitions), np.asarray(mdp.transitions))


@pytest.mark.parametrize("make", [
    lambda: ql.garnet(jax.random.key(3), 8, 3, 3, 0.9),
    lambda: ql.chain(6, 0.95),
])
def test_value_iteration_matches_numpy_and_exact_policy_evaluation(make):
    mdp = make()
    p, r, g = (np.asarray(mdp.transitions, np.float64), np.asarray(mdp.rewards, np.float64),
               float(mdp.gamma))
    q = np.asarray(ql.value_iteration(mdp), np.float64)
    np.testing.assert_allclose(q, _vi_numpy(p, r, g), atol=1e-4)
    # Independent check: Q* is the exact value of its own greedy policy (linear solve).
    pi = q.argmax(-1)
    s = np.arange(len(pi))
    v = np.linalg.solve(np.eye(len(pi)) - g * p[s, pi], r[s, pi])
    np.testing.assert_allclose(q, r + g * p @ v, atol=1e-4)


def test_chain_rewards_far_state():
    q = np.asarray(ql.value_iteration(ql.chain(5, 0.9)))
    assert q[0].argmax() == 1  # going right beats the small near reward


def test_make_mdp_errors():
    p = np.full((3, 2, 3), 1 / 3)
    with pytest.raises(ValueError, match="gamma"):
        ql.make_mdp(p, np.zeros((3, 2)), 1.0)
    with pytest.raises(ValueError, match="gamma"):
        ql.make_mdp(p, np.zeros((3, 2)), -0.1)
    with pytest.raises(ValueError, match="rewards"):
        ql.make_mdp(p, np.zeros((2, 2)), 0.9)
    with pytest.raises(ValueError, match="transitions"):
        ql.make_mdp(np.ones((3, 2, 4)) / 4, np.zeros((3, 2)), 0.9)
    with pytest.raises(ValueError, match="summing to 1"):
        ql.make_mdp(np.ones((3, 2, 3)), np.zeros((3, 2)), 0.9)
    with pytest.raises(ValueError, match="branching"):
        ql.garnet(jax.random.key(0), 3, 2, 4, 0.9)
    with pytest.raises(ValueError, match="gamma"):
        ql.garnet(jax.random.key(0), 3, 2, 2, 1.5)


def test_value_iteration_reports_convergence():
    mdp = ql.garnet(jax.random.key(3), 8, 3, 3, 0.9)
    q, info = ql.value_iteration(mdp, return_info=True)
    assert bool(info.converged) and int(info.iterations) < 10_000
    assert float(info.residual) <= 1e-5 * (1 - 0.9) / 0.9
    np.testing.assert_array_equal(q, ql.value_iteration(mdp))


def test_value_iteration_hitting_the_cap_raises_or_warns():
    mdp = ql.garnet(jax.random.key(3), 8, 3, 3, 0.9)
    with pytest.raises(RuntimeError, match=r"`max_iters`=5.*`tol`.*residual"):
        ql.value_iteration(mdp, max_iters=5)
    with pytest.warns(RuntimeWarning, match="max_iters"):
        q, info = ql.value_iteration(mdp, max_iters=5, return_info=True)
    assert not bool(info.converged) and int(info.iterations) == 5
    # The reported residual is the last sweep's ||TQ - Q||_inf (checked independently).
    p, r = np.asarray(mdp.transitions, np.float64), np.asarray(mdp.rewards, np.float64)
    qs = [np.zeros_like(r)]
    for _ in range(5):
        qs.append(r + 0.9 * p @ qs[-1].max(-1))
    np.testing.assert_allclose(q, qs[-1], rtol=1e-5)
    np.testing.assert_allclose(float(info.residual), np.abs(qs[-1] - qs[-2]).max(), rtol=1e-4)


def test_value_iteration_flag_under_jit():
    mdp = ql.garnet(jax.random.key(3), 8, 3, 3, 0.9)
    _, info = jax.jit(lambda m: ql.value_iteration(m, max_iters=5, return_info=True))(mdp)
    assert not bool(info.converged)  # traced: no error, the caller reads the flag


@pytest.mark.parametrize("call,arg", [
    (lambda m: ql.value_iteration(m, tol=0.0), "tol"),
    (lambda m: ql.value_iteration(m, max_iters=0), "max_iters"),
    (lambda m: ql.value_iteration(m._replace(gamma=jax.numpy.float32(1.0))), "gamma"),
    (lambda m: ql.value_iteration(m._replace(transitions=m.transitions * 0.5)), "transitions"),
    (lambda m: ql.bellman_optimality(m, np.full((8, 3), np.nan)), "q"),
    (lambda m: ql.make_mdp(m.transitions, np.full((8, 3), np.inf), 0.9), "rewards"),
])
def test_bad_value_iteration_inputs_name_the_argument(call, arg):
    mdp = ql.garnet(jax.random.key(3), 8, 3, 3, 0.9)
    with pytest.raises(ValueError, match=arg):
        call(mdp)


@pytest.mark.parametrize("preset", ["smoke", "quick", "full"])
def test_presets_pass_validation_and_bad_fields_fail(preset):
    from experiments.configs import qlearning as qcfg

    cfg = qcfg.get_config(preset)
    qcfg.validate_config(cfg)
    cfg.num_seeds = 1
    with pytest.raises(ValueError, match="config.num_seeds"):
        qcfg.validate_config(cfg)
    cfg = qcfg.get_config(preset)
    cfg.eps_rel = (0.1, 0.1)
    with pytest.raises(ValueError, match="config.eps_rel"):
        qcfg.validate_config(cfg)
