"""SR-SMC against enumeration on a context-dependent toy denoiser; passes, errors."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.dllm import sr_smc

MASK, V = 2, 3  # answer tokens {0, 1}, mask id 2
# p(x_i | other position masked) and p(x_i | other position = v), answer length 2.
P_ALONE = np.array([[0.8, 0.2], [0.35, 0.65]])
P_GIVEN = np.array([[[0.7, 0.3], [0.1, 0.9]],    # position 0 given x_1 = 0 / 1
                    [[0.95, 0.05], [0.4, 0.6]]])  # position 1 given x_0 = 0 / 1


def _law(i, other):
    return P_ALONE[i] if other == MASK else P_GIVEN[i, other]


def toy_denoiser(tokens):
    """Prompt length 1; answer positions 1, 2 with the laws above."""
    def row(t):
        a0, a1 = t[1], t[2]
        l0 = jnp.where(a1 == MASK, jnp.asarray(P_ALONE[0]),
                       jnp.asarray(P_GIVEN[0])[jnp.minimum(a1, 1)])
        l1 = jnp.where(a0 == MASK, jnp.asarray(P_ALONE[1]),
                       jnp.asarray(P_GIVEN[1])[jnp.minimum(a0, 1)])
        lg = jnp.log(jnp.stack([l0, l1]))
        lg = jnp.concatenate([lg, jnp.full((2, 1), -1e9)], axis=1)
        return jnp.concatenate([jnp.full((1, V), -1e9), lg], axis=0)
    logits = jax.vmap(row)(tokens).astype(jnp.float32)
    return logits, jax.nn.one_hot(tokens, V)


def _tempered(p, temperature):
    q = p ** (1.0 / temperature)
    return q / q.sum()


def enumerate_target(temperature, threshold, block_length):
    """pi(x) proportional to sum over paths of q_T(path) * p(path), by enumeration of every
    pass's sampled x0 at all masked positions (module docstring of ``sr_smc``)."""
    target = np.zeros((2, 2))
    if block_length == 1:  # position 0, then position 1
        for x0, x1 in itertools.product(range(2), range(2)):
            q = _tempered(_law(0, MASK), temperature)[x0] * _tempered(_law(1, x0),
                                                                        temperature)[x1]
            target[x0, x1] += q * _law(0, MASK)[x0] * _law(1, x0)[x1]
        return target / target.sum()
    for y0, y1 in itertools.product(range(2), range(2)):  # first pass samples both
        q = _tempered(_law(0, MASK), temperature)[y0] * _tempered(_law(1, MASK), temperature)[y1]
        c = np.array([_law(0, MASK)[y0], _law(1, MASK)[y1]])
        first = int(np.argmax(c))  # no ties by construction
        both = threshold is not None and c[1 - first] >= threshold
        if both:
            target[y0, y1] += q * c[0] * c[1]
            continue
        y = (y0, y1)
        j = 1 - first
        for z in range(2):
            law = _law(j, y[first])
            x = [0, 0]
            x[first], x[j] = y[first], z
            target[x[0], x[1]] += q * c[first] * _tempered(law, temperature)[z] * law[z]
    return target / target.sum()


def _weighted_histogram(state):
    tokens = np.asarray(state.decode.tokens[:, 1:])
    w = np.asarray(jax.nn.softmax(state.log_weights, axis=1)).reshape(-1)
    hist = np.zeros((2, 2))
    np.add.at(hist, (tokens[:, 0], tokens[:, 1]), w)
    return hist / hist.sum()


@pytest.mark.parametrize("temperature,threshold,block_length,ess", [
    (1.0, None, 2, 0.5),    # one block, fixed schedule (one token per pass)
    (0.7, 0.6, 2, 0.99),    # threshold commits (both at once when confident), T < 1
    (1.6, None, 1, 0.99),   # two blocks: forced resampling between them, T > 1
    (1.6, 0.9, 1, 0.0),     # two blocks, never resampled (importance sampling only)
])
@pytest.mark.heavy
def test_weighted_particles_target_q_times_p(temperature, threshold, block_length, ess):
    b, n = 300, 32
    prompt = jnp.zeros((b, 1), jnp.int32)
    state, info = jax.jit(lambda k: sr_smc.run_particles(
        k, toy_denoiser, prompt, 2, mask_id=MASK, vocab_size=V, num_particles=n,
        block_length=block_length, threshold=threshold, temperature=temperature,
        ess_threshold=ess))(jax.random.key(0))
    target = enumerate_target(temperature, threshold, block_length)
    np.testing.assert_allclose(_weighted_histogram(state), target, atol=0.015)
    resampled = np.asarray(info.resampled)
    if ess == 0.0:
        assert not resampled.any()
    if ess == 0.99 and block_length == 1:
        assert resampled[0].all()  # the first block end always has unequal weights


def test_target_differs_from_proposal_and_from_p():
    """The check above can fail: q*p is far from both q and p on this model."""
    t = enumerate_target(1.0, None, 2)
    p = np.zeros((2, 2))
    for x0, x1 in itertools.product(range(2), range(2)):
        p[x0, x1] = 0.5 * (_law(0, MASK)[x0] * _law(1, x0)[x1]
                           + _law(1, MASK)[x1] * _law(0, x1)[x0])
    assert np.abs(t - p).max() > 0.05


@pytest.mark.heavy
def test_passes_adapt_per_problem_and_the_best_particle_is_returned():
    # Problem 0's prompt token makes the model certain (one pass per block commits both);
    # problem 1 stays unsure and needs one pass per token.
    def den(tokens):
        logits, hidden = toy_denoiser(tokens)
        sure = (tokens[:, :1] == 0)[..., None]
        return jnp.where(sure, logits * 50.0, logits), hidden

    prompt = jnp.array([[0], [1]], jnp.int32)
    res, info = sr_smc.sr_smc_decode(jax.random.key(1), den, prompt, 2, mask_id=MASK,
                                     vocab_size=V, num_particles=4, block_length=2,
                                     threshold=0.9)
    np.testing.assert_array_equal(np.asarray(info.passes.sum(0)), [1, 2])
    np.testing.assert_array_equal(np.asarray(res.nfe), [4, 8])
    state, _ = sr_smc.run_particles(jax.random.key(1), den, prompt, 2, mask_id=MASK,
                                    vocab_size=V, num_particles=4, block_length=2, threshold=0.9)
    np.testing.assert_allclose(np.asarray(res.path_ll),
                               np.asarray(state.decode.path_ll).reshape(2, 4).max(1))
    # Schedule mode: exactly steps / blocks passes per block.
    res, info = sr_smc.sr_smc_decode(jax.random.key(2), toy_denoiser,
                                     jnp.zeros((3, 1), jnp.int32), 2, mask_id=MASK, vocab_size=V,
                                     num_particles=2, block_length=1, threshold=None)
    np.testing.assert_array_equal(np.asarray(info.passes), np.ones((2, 3)))
    assert np.all(np.asarray(res.answer) != MASK)


@pytest.mark.heavy
def test_vmap_over_seeds_equals_one_by_one():
    alg = sr_smc.sr_smc(toy_denoiser, gen_length=2, num_particles=3, mask_id=MASK,
                        block_length=1, threshold=0.9, temperature=1.3, vocab_size=V)
    prompt = jnp.zeros((2, 1), jnp.int32)

    def run(key):
        state = alg.init(key, prompt)
        return jax.lax.scan(lambda s, k: alg.step(k, s), state, jax.random.split(key, 2))[0]

    keys = jax.random.split(jax.random.key(3), 4)
    batched = jax.jit(jax.vmap(run))(keys)
    for i in range(4):
        one = run(keys[i])
        np.testing.assert_array_equal(np.asarray(batched.decode.tokens[i]),
                                      np.asarray(one.decode.tokens))
        np.testing.assert_allclose(np.asarray(batched.log_weights[i]),
                                   np.asarray(one.log_weights), rtol=1e-6)


@pytest.mark.parametrize("kwargs,arg", [
    (dict(num_particles=0), "num_particles"),
    (dict(block_length=3), "block_length"),
    (dict(threshold=0.0), "threshold"),
    (dict(threshold=1.5), "threshold"),
    (dict(threshold=float("nan")), "threshold"),
    (dict(temperature=-1.0), "temperature"),
    (dict(ess_threshold=2.0), "ess_threshold"),
    (dict(threshold=None, steps=3), "steps"),
])
def test_bad_settings_raise(kwargs, arg):
    settings = dict(gen_length=2, num_particles=2, mask_id=MASK, block_length=1,
                    vocab_size=V) | kwargs
    with pytest.raises(ValueError, match=arg):
        sr_smc.sr_smc(toy_denoiser, **settings)


def test_bad_prompt_and_vocab_raise():
    alg = sr_smc.sr_smc(toy_denoiser, gen_length=2, num_particles=2, mask_id=MASK,
                        block_length=1)
    with pytest.raises(ValueError, match="prompt"):
        alg.init(jax.random.key(0), jnp.array([[MASK]], jnp.int32))
    alg = sr_smc.sr_smc(toy_denoiser, gen_length=2, num_particles=2, mask_id=MASK,
                        block_length=1, vocab_size=V + 1)
    with pytest.raises(ValueError, match="vocab"):
        alg.init(jax.random.key(0), jnp.zeros((1, 1), jnp.int32))
