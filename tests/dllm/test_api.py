"""The decoding API: ``smc`` / ``decoder`` Algorithms, their scans equal the decoders."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import dllm
from jaxlab.core.types import Algorithm
from jaxlab.dllm import decoding, path_smc
from tests.dllm import api_example
from tests.dllm.test_smc import MASK, V, toy_denoiser


def _scan(alg, key, init_args, steps):
    state = alg.init(key, *init_args)
    return jax.lax.scan(lambda s, k: alg.step(k, s), state, jax.random.split(key, steps))


def _assert_trees_equal(a, b):
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a, b)


def test_package_exports_the_uniform_api():
    assert dllm.State is path_smc.State and dllm.Info is path_smc.Info
    assert dllm.init is path_smc.init and dllm.step is path_smc.step
    alg, init_args, step_args = api_example.build()
    assert isinstance(alg, Algorithm)
    state = alg.init(jax.random.key(0), *init_args)
    assert isinstance(state, dllm.State)
    state, info = jax.jit(lambda k, s: alg.step(k, s, *step_args))(jax.random.key(1), state)
    assert isinstance(info, dllm.Info) and info.ess.shape == (2,)
    assert int(decoding.steps_done(state.decode.order)) == 1


@pytest.mark.heavy
def test_scan_of_step_is_smc_decode_bit_for_bit():
    """POKE-SMC on the example denoiser (value head, resampling at ESS < N): the scan of the
    Algorithm's step is run_particles, and best_particle of it is smc_decode."""
    alg, (prompt,), _ = api_example.build()
    key, steps = jax.random.key(7), api_example.GEN_LENGTH
    state, info = jax.jit(lambda k: _scan(alg, k, (prompt,), steps))(key)
    assert np.asarray(info.resampled).any()
    denoise_fn, value_fn, _ = api_example.model()
    kw = dict(vocab_size=api_example.VOCAB, value_fn=value_fn, **api_example.SETTINGS)
    ref_state, ref_info = path_smc.run_particles(key, denoise_fn, prompt, steps, **kw)
    _assert_trees_equal(state, ref_state)
    _assert_trees_equal(info, ref_info)
    result, _ = path_smc.smc_decode(key, denoise_fn, prompt, steps, **kw)
    _assert_trees_equal(path_smc.best_particle(state, steps), result)
    # The last step removed the twist: V = 0 and nothing is left masked.
    assert not np.asarray(state.value).any()
    assert not (np.asarray(state.decode.tokens) == api_example.MASK).any()


@pytest.mark.heavy
def test_step_is_deterministic_jittable_and_vmaps_over_keys():
    alg, init_args, step_args = api_example.build()
    step = jax.jit(lambda k, s: alg.step(k, s, *step_args))
    keys = jax.random.split(jax.random.key(3), 3)
    states = jax.vmap(lambda k: alg.init(k, *init_args))(keys)
    batched = jax.jit(jax.vmap(step))(keys, states)
    for i, k in enumerate(keys):
        one = step(k, jax.tree.map(lambda x, i=i: x[i], states))
        _assert_trees_equal(step(k, jax.tree.map(lambda x, i=i: x[i], states)), one)
        jax.tree.map(lambda x, y, i=i: np.testing.assert_allclose(
            np.asarray(x[i]), np.asarray(y), rtol=1e-5, atol=1e-6), batched, one)
    assert not np.array_equal(np.asarray(batched[0].decode.tokens[0]),
                              np.asarray(batched[0].decode.tokens[1]))  # keys matter


@pytest.mark.heavy
def test_decoder_scan_is_decode_and_best_of_n_is_unresampled_smc():
    prompt = jnp.zeros((4, 1), jnp.int32)
    key = jax.random.key(5)
    for policy, temperature in (("random", 1.0), ("confidence", 0.0)):
        alg = dllm.decoder(toy_denoiser, gen_length=2, mask_id=MASK, policy=policy,
                           temperature=temperature)
        state, info = _scan(alg, key, (prompt,), 2)
        ref = dllm.decode(key, toy_denoiser, prompt, 2, mask_id=MASK, vocab_size=V,
                          policy=policy, temperature=temperature)
        np.testing.assert_array_equal(np.asarray(state.tokens[:, 1:]), np.asarray(ref.answer))
        np.testing.assert_array_equal(np.asarray(state.order), np.asarray(ref.order))
        np.testing.assert_allclose(np.asarray(info.path_ll_increment).sum(0),
                                   np.asarray(ref.path_ll), rtol=1e-6)
    alg = dllm.smc(toy_denoiser, gen_length=2, num_particles=3, mask_id=MASK, resample=False)
    state, info = _scan(alg, key, (prompt,), 2)
    bon, _ = dllm.best_of_n(key, toy_denoiser, prompt, 2, mask_id=MASK, vocab_size=V,
                            num_particles=3)
    _assert_trees_equal(dllm.best_particle(state, 2), bon)
    assert not np.asarray(info.resampled).any()


def test_semi_ar_steps_follow_the_block_schedule():
    """With blocks the step index read off the state picks each step's block and count."""
    prompt = jnp.zeros((2, 1), jnp.int32)
    alg = dllm.decoder(toy_denoiser, gen_length=2, mask_id=MASK, block_length=1)
    state = alg.init(jax.random.key(0), prompt)
    for t in range(2):
        state, _ = alg.step(jax.random.key(t), state)
        np.testing.assert_array_equal(np.asarray(state.order[:, t]), [t, t])
    assert decoding.semi_ar_block(12) == 6 and decoding.semi_ar_block(7) == 1


@pytest.mark.parametrize("gen_length", range(1, 41))
def test_coarse_block_against_brute_force(gen_length):
    """The particle decoders' blocks: the smallest divisor >= max(2, A / 4), else one
    block; checked against the definition by enumeration, and never a one-token block."""
    b = decoding.coarse_block(gen_length)
    assert gen_length % b == 0
    ok = [d for d in range(1, gen_length + 1)
          if gen_length % d == 0 and d >= 2 and d * 4 >= gen_length]
    assert b == (min(ok) if ok else gen_length)
    assert gen_length // b <= 4 and (b >= 2 or gen_length == 1)
    decoding.transfer_schedule(gen_length, gen_length, b)  # a valid semi-AR plan


def test_coarse_block_examples_and_bad_input():
    assert [decoding.coarse_block(a) for a in (3, 4, 5, 11, 16, 22, 33)] == [3, 2, 5, 11, 4,
                                                                             11, 11]
    with pytest.raises(ValueError, match="`gen_length`"):
        decoding.coarse_block(0)
    with pytest.raises(ValueError, match="`num_blocks`"):
        decoding.coarse_block(8, num_blocks=0)
