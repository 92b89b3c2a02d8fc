"""Policies, schedules, Path LL (vs brute force) and decoder invariants."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.dllm import decoding
from jaxlab.dllm import model as model_lib

V, MASK, P, A = 7, 6, 3, 6


@pytest.fixture(scope="module")
def denoiser():
    cfg = model_lib.LLaDAConfig(vocab_size=V, d_model=32, n_layers=2, n_heads=2, n_kv_heads=2,
                                mlp_hidden_size=48, mask_token_id=MASK)
    graphdef, params = model_lib.init(cfg, seed=1)
    # Larger weights: a peaked, context-dependent predictive distribution.
    params = jax.tree.map(lambda x: 8 * x, params)
    return jax.jit(functools.partial(model_lib.apply, graphdef, params))


def _brute_force_path_ll(denoise_fn, prompt, answer, order):
    """One forward pass per (sequence, step), log-softmax in NumPy, summed in Python."""
    total = np.zeros(prompt.shape[0])
    for b in range(prompt.shape[0]):
        for t in range(int(order[b].max()) + 1):
            ctx = [answer[b, i] if order[b, i] < t else MASK for i in range(A)]
            logits = np.asarray(denoise_fn(jnp.asarray([list(prompt[b]) + ctx]))[0][0],
                                np.float64)
            for i in range(A):
                if order[b, i] == t:
                    z = np.delete(logits[P + i], MASK)
                    lse = np.log(np.exp(z - z.max()).sum()) + z.max()
                    total[b] += logits[P + i, answer[b, i]] - lse
    return total


@pytest.mark.heavy
@pytest.mark.parametrize("policy", decoding.POLICIES)
def test_path_ll_while_decoding_equals_exact_and_brute_force(denoiser, policy):
    prompt = jax.random.randint(jax.random.key(0), (3, P), 0, MASK)
    r = decoding.decode(jax.random.key(1), denoiser, prompt, A, mask_id=MASK,
                        vocab_size=V, policy=policy, steps=3, temperature=1.0)
    exact = decoding.path_log_likelihood(denoiser, prompt, r.answer, r.order, mask_id=MASK)
    brute = _brute_force_path_ll(denoiser, np.asarray(prompt), np.asarray(r.answer),
                                 np.asarray(r.order))
    np.testing.assert_allclose(np.asarray(r.path_ll), brute, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(exact), brute, rtol=1e-5, atol=1e-5)


def test_path_ll_depends_on_the_order(denoiser):
    prompt = jax.random.randint(jax.random.key(2), (4, P), 0, MASK)
    answer = jax.random.randint(jax.random.key(3), (4, A), 0, MASK)
    l2r = jnp.broadcast_to(jnp.arange(A), (4, A))
    r2l = l2r[:, ::-1]
    a = decoding.path_log_likelihood(denoiser, prompt, answer, l2r, mask_id=MASK)
    b = decoding.path_log_likelihood(denoiser, prompt, answer, r2l, mask_id=MASK)
    assert np.all(np.abs(np.asarray(a - b)) > 1e-4)


@pytest.mark.heavy
@pytest.mark.parametrize("steps,block", [(6, None), (3, None), (6, 2), (4, 3)])
def test_decoders_unmask_each_position_once_and_leave_no_mask(denoiser, steps, block):
    prompt = jax.random.randint(jax.random.key(4), (5, P), 0, MASK)
    r = decoding.decode(jax.random.key(5), denoiser, prompt, A, mask_id=MASK,
                        vocab_size=V, steps=steps, block_length=block, temperature=1.0)
    order = np.asarray(r.order)
    assert np.all(np.asarray(r.answer) != MASK)
    assert np.all((order >= 0) & (order < steps))
    sched = decoding.transfer_schedule(A, steps, block)
    for t in range(steps):  # exactly k_t positions per step (so none twice)
        np.testing.assert_array_equal((order == t).sum(1), sched[t])
    if block:  # semi-AR: every position of block j before any of block j + 1
        blocks = np.arange(A) // block
        for j in range(A // block - 1):
            assert np.all(order[:, blocks == j].max(1) < order[:, blocks == j + 1].min(1))
    assert np.all(np.asarray(r.nfe) == steps)


def test_threshold_decoding_finishes_with_adaptive_nfe(denoiser):
    prompt = jax.random.randint(jax.random.key(6), (8, P), 0, MASK)
    lo = decoding.decode_threshold(jax.random.key(0), denoiser, prompt, A, mask_id=MASK,
                                   vocab_size=V, threshold=0.05)
    hi = decoding.decode_threshold(jax.random.key(0), denoiser, prompt, A, mask_id=MASK,
                                   vocab_size=V, threshold=0.999)
    assert np.all(np.asarray(lo.answer) != MASK) and np.all(np.asarray(hi.answer) != MASK)
    assert np.all(np.asarray(hi.nfe) == A)  # nothing that sure: one token per step
    assert np.asarray(lo.nfe).mean() < A
    exact = decoding.path_log_likelihood(denoiser, prompt, lo.answer, lo.order, mask_id=MASK)
    np.testing.assert_allclose(np.asarray(lo.path_ll), np.asarray(exact), rtol=1e-5, atol=1e-5)


def test_schedule_matches_llada_and_rejects_bad_blocks():
    np.testing.assert_array_equal(decoding.transfer_schedule(10, 4), [3, 3, 2, 2])
    np.testing.assert_array_equal(decoding.transfer_schedule(8, 4, 4), [2, 2, 2, 2])
    with pytest.raises(ValueError, match="gen_length.*block_length"):
        decoding.transfer_schedule(10, 5, 4)
    with pytest.raises(ValueError, match="number of blocks"):
        decoding.transfer_schedule(12, 5, 4)


def test_policies_rank_as_defined():
    logp = jnp.log(jnp.array([[[0.7, 0.2, 0.1], [0.4, 0.35, 0.25], [0.5, 0.5, 0.0]]]))
    x0 = jnp.array([[0, 0, 0]])
    key = jax.random.key(0)
    np.testing.assert_allclose(decoding.policy_scores(key, logp, x0, "confidence")[0],
                               [0.7, 0.4, 0.5], rtol=1e-6)
    np.testing.assert_allclose(decoding.policy_scores(key, logp, x0, "margin")[0],
                               [0.5, 0.05, 0.0], atol=1e-6)
    p = np.array([[0.7, 0.2, 0.1], [0.4, 0.35, 0.25], [0.5, 0.5, 0.0]])
    want = [np.sum(r[r > 0] * np.log(r[r > 0])) for r in p]
    np.testing.assert_allclose(decoding.policy_scores(key, logp, x0, "neg_entropy")[0], want,
                               rtol=1e-5)
    with pytest.raises(ValueError, match="policy"):
        decoding.policy_scores(key, logp, x0, "greedy")


def test_wrong_vocab_and_mask_raise(denoiser):
    prompt = jnp.zeros((2, P), jnp.int32)
    with pytest.raises(ValueError, match="vocab_size"):
        decoding.decode(jax.random.key(0), denoiser, prompt, A, mask_id=MASK,
                        vocab_size=V + 1)
    with pytest.raises(ValueError, match="mask_id"):
        decoding.decode(jax.random.key(0), denoiser, prompt, A, mask_id=V, vocab_size=V)
    with pytest.raises(ValueError, match="block_length"):
        decoding.decode(jax.random.key(0), denoiser, prompt, A, mask_id=MASK,
                        vocab_size=V, block_length=4)


@pytest.mark.parametrize("bad,err", [(-3, ValueError), (V, ValueError), (99, ValueError),
                                     (MASK, ValueError), (None, ValueError), ("float", TypeError)])
def test_bad_prompts_raise_naming_prompt(denoiser, bad, err):
    if bad is None:
        prompt = jnp.zeros((P,), jnp.int32)  # 1-D
    elif bad == "float":
        prompt = jnp.zeros((2, P), jnp.float32)
    else:
        prompt = jnp.zeros((2, P), jnp.int32).at[1, 0].set(bad)
    for fn in (decoding.decode, decoding.decode_threshold):
        with pytest.raises(err, match="`prompt`"):
            fn(jax.random.key(0), denoiser, prompt, A, mask_id=MASK, vocab_size=V)


def test_prompt_checks_do_not_break_jit(denoiser):
    prompt = jnp.zeros((2, P), jnp.int32)
    fn = jax.jit(functools.partial(decoding.decode, denoise_fn=denoiser, gen_length=A,
                                   mask_id=MASK, vocab_size=V))
    eager = decoding.decode(jax.random.key(0), denoiser, prompt, A, mask_id=MASK,
                            vocab_size=V)
    np.testing.assert_array_equal(fn(jax.random.key(0), prompt=prompt).answer, eager.answer)


def test_path_ll_rejects_ids_and_orders_outside_their_ranges(denoiser):
    prompt = jnp.zeros((2, P), jnp.int32)
    answer = jnp.ones((2, A), jnp.int32)
    order = jnp.tile(jnp.arange(A), (2, 1))
    ok = decoding.path_log_likelihood(denoiser, prompt, answer, order, mask_id=MASK)
    assert np.all(np.isfinite(np.asarray(ok)))
    for bad_answer in (answer.at[0, 0].set(MASK), answer.at[0, 0].set(V + 2),
                       answer.at[0, 0].set(-1)):
        with pytest.raises(ValueError, match="`answer`"):
            decoding.path_log_likelihood(denoiser, prompt, bad_answer, order, mask_id=MASK)
    for bad_order in (order.at[0, 0].set(-1), order.at[0, 0].set(A)):
        with pytest.raises(ValueError, match="`order`"):
            decoding.path_log_likelihood(denoiser, prompt, answer, bad_order, mask_id=MASK)
    with pytest.raises(ValueError, match="`prompt`"):
        decoding.path_log_likelihood(denoiser, prompt.at[0, 0].set(99), answer, order,
                                     mask_id=MASK)


@pytest.mark.parametrize("temperature", [-0.1, float("nan")])
def test_bad_temperature_raises(denoiser, temperature):
    with pytest.raises(ValueError, match="`temperature`"):
        decoding.decode(jax.random.key(0), denoiser, jnp.zeros((2, P), jnp.int32), A,
                        mask_id=MASK, vocab_size=V, temperature=temperature)


def test_while_loop_decoders_vmap_in_checked_mode(denoiser):
    """Threshold decoding and SR-SMC (``lax.while_loop``s around a denoiser whose attention
    carries checks) run under ``vmap`` in checked mode and equal each problem decoded alone."""
    from jaxlab.core import checked
    from jaxlab.dllm import sr_smc

    assert checked.enabled()
    cfg = model_lib.LLaDAConfig(vocab_size=V, d_model=16, n_layers=1, n_heads=2, n_kv_heads=2,
                                mlp_hidden_size=32, mask_token_id=MASK)
    graphdef, params = model_lib.init(cfg, seed=3)
    plain = functools.partial(model_lib.apply, graphdef, params)  # not jitted: checks traced
    prompts = jax.random.randint(jax.random.key(1), (3, 1, P), 0, MASK)
    keys = jax.random.split(jax.random.key(2), 3)

    def thr(p, k):
        return decoding.decode_threshold(k, plain, p, A, mask_id=MASK, vocab_size=V,
                                         threshold=0.5, block_length=A // 2).answer

    def sr(p, k):
        return sr_smc.sr_smc_decode(k, plain, p, A, mask_id=MASK, vocab_size=V,
                                    num_particles=2, block_length=A // 2)[0].answer

    for fn in (thr, sr):
        batched = jax.vmap(fn)(prompts, keys)
        alone = jnp.stack([fn(p, k) for p, k in zip(prompts, keys, strict=True)])
        np.testing.assert_array_equal(batched, alone)
