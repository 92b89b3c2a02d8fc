"""pass@N, pass@k and best-of-N of N sampled answers against brute force."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.dllm import evaluation, path_smc, tasks


def test_pass_at_k_is_the_chance_that_k_of_n_samples_include_a_right_one():
    """Brute force: the share of the C(N, k) subsets of size k holding a right sample."""
    rng = np.random.default_rng(0)
    correct = rng.random((12, 6)) < rng.random((12, 1))
    for k in range(1, 7):
        want = [np.mean([row[list(s)].any() for s in itertools.combinations(range(6), k)])
                for row in correct]
        np.testing.assert_allclose(evaluation.pass_at_k(correct, k), want, rtol=1e-6,
                                   atol=1e-6)
        np.testing.assert_allclose(
            evaluation.pass_at_k(correct, k),
            [1 - math.comb(6 - c, k) / math.comb(6, k) for c in correct.sum(1)], atol=1e-6)
    np.testing.assert_array_equal(evaluation.pass_at_k(correct, 6),
                                  evaluation.pass_at_n(correct))
    np.testing.assert_array_equal(evaluation.pass_at_n(correct), correct.any(1))


@pytest.mark.parametrize("k", [0, 7, 1.5])
def test_pass_at_k_checks_k(k):
    with pytest.raises(ValueError, match="`k`"):
        evaluation.pass_at_k(np.zeros((2, 6), bool), k)


def test_correct_must_be_problems_by_samples():
    with pytest.raises(ValueError, match="`correct` must be 2-D"):
        evaluation.pass_at_n(np.zeros(4, bool))
    with pytest.raises(ValueError, match="`path_ll` must have shape"):
        evaluation.best_of_n_correct(np.zeros((2, 3), bool), np.zeros((2, 4)))


def test_best_of_n_correct_picks_the_highest_score():
    rng = np.random.default_rng(1)
    correct, ll = rng.random((20, 5)) < 0.5, rng.normal(size=(20, 5))
    want = [c[np.argmax(s)] for c, s in zip(correct, ll, strict=True)]
    np.testing.assert_array_equal(evaluation.best_of_n_correct(correct, ll), want)


@pytest.mark.heavy
def test_particle_correctness_agrees_with_best_of_n():
    """Same key and proposal: the highest-Path-LL particle is ``path_smc.best_of_n``'s
    answer, and every particle is verified by the task."""
    task = tasks.Addition(n_digits=2)
    w = jax.random.normal(jax.random.key(3), (task.vocab_size, task.vocab_size))

    def denoise(tokens):  # a fixed random bigram-ish denoiser, deterministic
        return w[tokens], jax.nn.one_hot(tokens, 4)

    prompt, _ = task.sample(jax.random.key(0), 5)
    key = jax.random.key(7)
    pc = evaluation.particle_correctness(key, denoise, task, prompt, num_particles=3)
    ref, _ = path_smc.best_of_n(key, denoise, prompt, task.answer_len, num_particles=3,
                                mask_id=task.mask_id, vocab_size=task.vocab_size)
    best = np.argmax(np.asarray(pc.path_ll), 1)
    np.testing.assert_array_equal(np.asarray(pc.answer)[np.arange(5), best], ref.answer)
    np.testing.assert_allclose(np.asarray(pc.path_ll)[np.arange(5), best], ref.path_ll,
                               rtol=1e-6)
    for i in range(3):
        np.testing.assert_array_equal(pc.correct[:, i],
                                      task.verify(prompt, jnp.asarray(pc.answer[:, i])))
    assert pc.answer.dtype == jnp.int32 and np.all(np.asarray(pc.answer) < task.mask_id)
