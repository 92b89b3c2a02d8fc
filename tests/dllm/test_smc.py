"""SMC decoders on a toy denoiser with a known answer; weights, resampling, errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.dllm import decoding, path_smc

MASK, V = 3, 4
P1 = np.array([0.6, 0.3, 0.1])
P2 = np.array([0.2, 0.5, 0.3])


def toy_denoiser(tokens):
    """Context-free model: answer position i has the fixed law P_i (prompt length 1)."""
    m = tokens.shape[0]
    table = np.full((3, V), -1e9)
    table[1, :3], table[2, :3] = np.log(P1), np.log(P2)
    logits = jnp.broadcast_to(jnp.asarray(table, jnp.float32), (m, 3, V))
    hidden = jax.nn.one_hot(tokens, V)  # [M, L, V] stands in for hidden states
    return logits, hidden


def _weighted_histogram(state, n):
    tokens = np.asarray(state.decode.tokens[:, 1:])
    w = np.asarray(jax.vmap(lambda lw: jax.nn.softmax(lw))(state.log_weights)).reshape(-1)
    hist = np.zeros((3, 3))
    np.add.at(hist, (tokens[:, 0], tokens[:, 1]), w)
    return hist / hist.sum()


@pytest.mark.parametrize("resampler", ["multinomial", "systematic"])
def test_self_rewarding_smc_targets_p_squared(resampler):
    """Proposal samples x ~ p (T = 1) and weights by the Path LL p(x), so the weighted
    particles target p(x)^2 / Z whatever the (token-independent) order."""
    b, n = 400, 32
    prompt = jnp.zeros((b, 1), jnp.int32)
    state, info = jax.jit(lambda k: path_smc.run_particles(
        toy_denoiser, prompt, 2, key=k, mask_id=MASK, vocab_size=V, num_particles=n,
        policy="random", temperature=1.0, ess_threshold=0.99, resampler=resampler))(
        jax.random.key(0))
    target = np.outer(P1, P2) ** 2
    target /= target.sum()
    resampled = np.asarray(info.resampled)  # [steps, B]
    assert not resampled[0].any() and resampled[1].all()  # uniform at t=0; forced at t=1
    np.testing.assert_allclose(_weighted_histogram(state, n), target, atol=0.015)
    # Without resampling the same target holds (importance sampling only).
    state, info = path_smc.run_particles(toy_denoiser, prompt, 2, key=jax.random.key(1),
                                    mask_id=MASK, vocab_size=V, num_particles=n,
                                    policy="random", resample=False)
    assert not np.asarray(info.resampled).any()
    np.testing.assert_allclose(_weighted_histogram(state, n), target, atol=0.015)
    # Log weights of independent particles are their Path LLs.
    np.testing.assert_allclose(np.asarray(state.log_weights).reshape(-1),
                               np.asarray(state.decode.path_ll), rtol=1e-6)


def test_twist_telescopes_to_the_path_ll():
    def value_fn(hidden, tokens):  # any function of the partial trajectory
        masked = (tokens == MASK).sum(1)
        return -0.7 * masked + 0.3 * tokens[:, 1].astype(jnp.float32)

    prompt = jnp.zeros((5, 1), jnp.int32)
    state, _ = path_smc.run_particles(toy_denoiser, prompt, 2, key=jax.random.key(2), mask_id=MASK,
                                 vocab_size=V, num_particles=6, value_fn=value_fn,
                                 resample=False, policy="random")
    np.testing.assert_allclose(np.asarray(state.log_weights).reshape(-1),
                               np.asarray(state.decode.path_ll), rtol=1e-5, atol=1e-6)


def test_resample_step_only_touches_degenerate_problems():
    b, n, a = 2, 4, 2
    dec = decoding.DecodeState(jnp.arange(b * n * 3).reshape(b * n, 3),
                               jnp.zeros((b * n, a), jnp.int32), jnp.arange(b * n) * 1.0)
    lw = jnp.array([[0.0, 30.0, 0.0, 0.0], [0.1, 0.0, -0.1, 0.0]])
    state = path_smc.State(dec, lw, jnp.zeros((b, n)))
    logits = jnp.arange(b * n)[:, None, None] * jnp.ones((1, 3, 2))
    new, new_logits, info = path_smc.resample_step(jax.random.key(0), state, logits,
                                                   ess_threshold=0.5, resampler="multinomial")
    np.testing.assert_array_equal(np.asarray(info.resampled), [True, False])
    np.testing.assert_array_equal(np.asarray(info.ancestors[0]), [1, 1, 1, 1])
    np.testing.assert_array_equal(np.asarray(info.ancestors[1]), [0, 1, 2, 3])
    np.testing.assert_array_equal(np.asarray(new.decode.path_ll), [1, 1, 1, 1, 4, 5, 6, 7])
    np.testing.assert_array_equal(np.asarray(new_logits[:, 0, 0]), [1, 1, 1, 1, 4, 5, 6, 7])
    np.testing.assert_allclose(jax.nn.logsumexp(new.log_weights, 1),
                               jax.nn.logsumexp(lw, 1), rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(new.log_weights[1]), np.asarray(lw[1]))


def test_decoders_return_the_best_particle_and_count_nfe():
    prompt = jnp.zeros((7, 1), jnp.int32)
    kw = dict(key=jax.random.key(3), mask_id=MASK, vocab_size=V, num_particles=5)
    state, _ = path_smc.run_particles(toy_denoiser, prompt, 2, **kw)
    res, _ = path_smc.smc_decode(toy_denoiser, prompt, 2, **kw)
    np.testing.assert_allclose(np.asarray(res.path_ll),
                               np.asarray(state.decode.path_ll).reshape(7, 5).max(1))
    assert np.all(np.asarray(res.nfe) == 2 * 5)
    bon, _ = path_smc.best_of_n(toy_denoiser, prompt, 2, **kw)
    assert np.all(np.asarray(bon.answer) != MASK)
    # Best-of-N with many particles finds the mode of p, (0, 1).
    many, _ = path_smc.best_of_n(toy_denoiser, prompt, 2, key=jax.random.key(4), mask_id=MASK,
                            vocab_size=V, num_particles=64)
    np.testing.assert_array_equal(np.asarray(many.answer), np.tile([0, 1], (7, 1)))


@pytest.mark.parametrize("n", [0, -2, 2.5, "4"])
def test_bad_particle_counts_raise(n):
    with pytest.raises(ValueError, match="num_particles"):
        path_smc.smc_decode(toy_denoiser, jnp.zeros((2, 1), jnp.int32), 2, key=jax.random.key(0),
                       mask_id=MASK, vocab_size=V, num_particles=n)


def test_bad_resampler_and_vocab_raise():
    kw = dict(key=jax.random.key(0), mask_id=MASK, num_particles=2)
    with pytest.raises(ValueError, match="resampler"):
        path_smc.smc_decode(toy_denoiser, jnp.zeros((2, 1), jnp.int32), 2, vocab_size=V,
                       resampler="greedy", **kw)
    with pytest.raises(ValueError, match="vocab_size"):
        path_smc.smc_decode(toy_denoiser, jnp.zeros((2, 1), jnp.int32), 2, vocab_size=V + 3, **kw)



def _nan_after_first_step(hidden, tokens):
    """A value function that breaks once a token is committed (NaN twist at step 2)."""
    done = jnp.sum(tokens[:, 1:] != MASK, axis=1)
    return jnp.where(done > 0, jnp.nan, 0.0)


def test_nonfinite_weights_are_flagged_under_jit_and_raised_eagerly():
    prompt = jnp.zeros((3, 1), jnp.int32)
    kw = dict(mask_id=MASK, vocab_size=V, num_particles=4, value_fn=_nan_after_first_step)
    _, info = jax.jit(lambda k: path_smc.run_particles(toy_denoiser, prompt, 2, key=k, **kw))(
        jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(info.nonfinite_weights),
                                  [[False] * 3, [True] * 3])
    with pytest.raises(ValueError, match="step 1 .*`value_fn`"):
        path_smc.smc_decode(toy_denoiser, prompt, 2, key=jax.random.key(0), **kw)
    # A healthy run flags nothing.
    _, info = path_smc.run_particles(toy_denoiser, prompt, 2, key=jax.random.key(0), mask_id=MASK,
                                vocab_size=V, num_particles=4)
    assert not np.asarray(info.nonfinite_weights).any()


@pytest.mark.parametrize("kwargs,arg", [
    (dict(weight_scale=float("nan")), "weight_scale"),
    (dict(weight_scale=float("inf")), "weight_scale"),
    (dict(weight_scale=-1.0), "weight_scale"),
    (dict(temperature=-1.0), "temperature"),
    (dict(temperature=float("nan")), "temperature"),
])
def test_bad_settings_raise(kwargs, arg):
    with pytest.raises(ValueError, match=f"`{arg}`"):
        path_smc.smc_decode(toy_denoiser, jnp.zeros((2, 1), jnp.int32), 2, key=jax.random.key(0),
                       mask_id=MASK, vocab_size=V, num_particles=2, **kwargs)


@pytest.mark.parametrize("prompt", [[[-3], [0]], [[7], [0]], [[MASK], [0]]])
def test_bad_prompt_ids_raise(prompt):
    with pytest.raises(ValueError, match="`prompt`"):
        path_smc.smc_decode(toy_denoiser, jnp.asarray(prompt, jnp.int32), 2, key=jax.random.key(0),
                       mask_id=MASK, vocab_size=V, num_particles=2)
