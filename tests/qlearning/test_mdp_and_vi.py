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
