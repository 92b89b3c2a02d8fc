"""SMC decoders on a toy denoiser with a known answer; weights, resampling, errors."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.core import checks
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


@pytest.mark.heavy
@pytest.mark.parametrize("resampler", ["multinomial", "systematic"])
def test_self_rewarding_smc_targets_p_squared(resampler):
    """Proposal samples x ~ p (T = 1) and weights by the Path LL p(x), so the weighted
    particles target p(x)^2 / Z whatever the (token-independent) order."""
    b, n = 400, 32
    prompt = jnp.zeros((b, 1), jnp.int32)
    state, info = jax.jit(lambda k: path_smc.run_particles(
        k, toy_denoiser, prompt, 2, mask_id=MASK, vocab_size=V, num_particles=n,
        policy="random", temperature=1.0, ess_threshold=0.99, resampler=resampler))(
        jax.random.key(0))
    target = np.outer(P1, P2) ** 2
    target /= target.sum()
    resampled = np.asarray(info.resampled)  # [steps, B]
    assert not resampled[0].any() and resampled[1].all()  # uniform at t=0; forced at t=1
    np.testing.assert_allclose(_weighted_histogram(state, n), target, atol=0.015)
    # Without resampling the same target holds (importance sampling only).
    state, info = path_smc.run_particles(jax.random.key(1), toy_denoiser, prompt, 2,
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
    state, _ = path_smc.run_particles(jax.random.key(2), toy_denoiser, prompt, 2, mask_id=MASK,
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


@pytest.mark.heavy
def test_decoders_return_the_best_particle_and_count_nfe():
    prompt = jnp.zeros((7, 1), jnp.int32)
    key = jax.random.key(3)
    kw = dict(mask_id=MASK, vocab_size=V, num_particles=5)
    state, _ = path_smc.run_particles(key, toy_denoiser, prompt, 2, **kw)
    res, _ = path_smc.smc_decode(key, toy_denoiser, prompt, 2, **kw)
    np.testing.assert_allclose(np.asarray(res.path_ll),
                               np.asarray(state.decode.path_ll).reshape(7, 5).max(1))
    assert np.all(np.asarray(res.nfe) == 2 * 5)
    bon, _ = path_smc.best_of_n(key, toy_denoiser, prompt, 2, **kw)
    assert np.all(np.asarray(bon.answer) != MASK)
    # Best-of-N with many particles finds the mode of p, (0, 1).
    many, _ = path_smc.best_of_n(jax.random.key(4), toy_denoiser, prompt, 2, mask_id=MASK,
                            vocab_size=V, num_particles=64)
    np.testing.assert_array_equal(np.asarray(many.answer), np.tile([0, 1], (7, 1)))


@pytest.mark.parametrize("n", [0, -2, 2.5, "4"])
def test_bad_particle_counts_raise(n):
    with pytest.raises(ValueError, match="num_particles"):
        path_smc.smc_decode(jax.random.key(0), toy_denoiser, jnp.zeros((2, 1), jnp.int32), 2,
                       mask_id=MASK, vocab_size=V, num_particles=n)


def test_bad_resampler_and_vocab_raise():
    key = jax.random.key(0)
    kw = dict(mask_id=MASK, num_particles=2)
    with pytest.raises(ValueError, match="resampler"):
        path_smc.smc_decode(key, toy_denoiser, jnp.zeros((2, 1), jnp.int32), 2, vocab_size=V,
                            resampler="greedy", **kw)
    with pytest.raises(ValueError, match="vocab_size"):
        path_smc.smc_decode(key, toy_denoiser, jnp.zeros((2, 1), jnp.int32), 2,
                            vocab_size=V + 3, **kw)



def _nan_after_first_step(hidden, tokens):
    """A value function that breaks once a token is committed (NaN twist at step 2)."""
    done = jnp.sum(tokens[:, 1:] != MASK, axis=1)
    return jnp.where(done > 0, jnp.nan, 0.0)


@pytest.mark.heavy
def test_nonfinite_weights_are_flagged_under_jit_and_raised_eagerly():
    prompt = jnp.zeros((3, 1), jnp.int32)
    kw = dict(mask_id=MASK, vocab_size=V, num_particles=4, value_fn=_nan_after_first_step)
    run = jax.jit(lambda k: path_smc.run_particles(k, toy_denoiser, prompt, 2, **kw))
    with checks(False):  # outside checked mode: a flag per step, raised by the entry point
        _, info = run(jax.random.key(0))
        np.testing.assert_array_equal(np.asarray(info.nonfinite_weights),
                                      [[False] * 3, [True] * 3])
        with pytest.raises(ValueError, match="step 1 .*`value_fn`"):
            path_smc.smc_decode(jax.random.key(0), toy_denoiser, prompt, 2, **kw)
    with checks(True):  # checked mode: the compiled run itself raises, naming `value_fn`
        with pytest.raises(Exception, match="`value_fn` returned non-finite"):
            jax.block_until_ready(
                jax.jit(lambda k: path_smc.run_particles(k, toy_denoiser, prompt, 2,
                                                         **kw))(jax.random.key(0)))
    # A healthy run flags nothing.
    _, info = path_smc.run_particles(jax.random.key(0), toy_denoiser, prompt, 2, mask_id=MASK,
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
        path_smc.smc_decode(jax.random.key(0), toy_denoiser, jnp.zeros((2, 1), jnp.int32), 2,
                       mask_id=MASK, vocab_size=V, num_particles=2, **kwargs)


@pytest.mark.parametrize("prompt", [[[-3], [0]], [[7], [0]], [[MASK], [0]]])
def test_bad_prompt_ids_raise(prompt):
    with pytest.raises(ValueError, match="`prompt`"):
        path_smc.smc_decode(jax.random.key(0), toy_denoiser, jnp.asarray(prompt, jnp.int32), 2,
                       mask_id=MASK, vocab_size=V, num_particles=2)


# --- POKE-SMC as twisted SMC, against enumeration (path_smc module docstring) -------------
# Context-dependent toy: answer length 4, tokens {0, 1}, mask 2, prompt length 1; position
# i has logit(p(x_i = 1)) = A_BIAS[i] + sum_j W[i, j] s_j, s_j = +1 / -1 / 0 for 1 / 0 / mask.
CMASK, CV, CA = 2, 3, 4
A_BIAS = np.array([0.3, -0.6, 0.9, -0.2])
W = np.array([[0.0, 1.1, -0.7, 0.4], [0.8, 0.0, 0.5, -1.2],
              [-0.9, 0.6, 0.0, 0.7], [0.5, -0.8, 1.0, 0.0]])


def ctx_denoiser(tokens):
    ans = tokens[:, 1:]
    s = jnp.where(ans == 1, 1.0, jnp.where(ans == 0, -1.0, 0.0))
    z = jnp.asarray(A_BIAS, jnp.float32) + s @ jnp.asarray(W.T, jnp.float32)  # [M, A]
    lg = jnp.stack([jnp.zeros_like(z), z, jnp.full_like(z, -1e9)], axis=-1)
    logits = jnp.concatenate([jnp.full((tokens.shape[0], 1, CV), -1e9), lg], axis=1)
    return logits, jax.nn.one_hot(tokens, CV)


def ctx_value(hidden, tokens):
    """A twist that depends on the partial answer (not on the hidden states)."""
    del hidden
    ans = tokens[:, 1:]
    return (-0.4 * jnp.sum(ans == CMASK, 1) + 0.8 * (ans[:, 0] == 1)
            - 0.5 * (ans[:, 3] == 0)).astype(jnp.float32)


def _np_law(ans, i):
    s = np.array([1.0 if a == 1 else -1.0 if a == 0 else 0.0 for a in ans])
    p1 = 1 / (1 + np.exp(-(A_BIAS[i] + W[i] @ s)))
    return np.array([1 - p1, p1])


def _np_value(ans):
    return -0.4 * sum(a == CMASK for a in ans) + 0.8 * (ans[0] == 1) - 0.5 * (ans[3] == 0)


def enumerate_twisted_targets(temperature, beta, block_length, steps=CA, twist=None):
    """{t: {partial answer: gamma_t}} with gamma_t(s) proportional to the sum over paths to
    s of q(path) exp(beta L_t + twist V(s)) (V := 0 at t = steps; ``twist`` None: beta), by
    enumerating every sampled x0 of the eligible positions and the confidence policy's
    (stable) top-k choice."""
    twist = beta if twist is None else twist
    _, _, schedule, blocks = decoding.step_plan(CA, steps, block_length)
    out = {t: {} for t in range(steps + 1)}

    def rec(ans, t, logq, ll):
        v = 0.0 if t == steps else _np_value(ans)
        out[t][ans] = out[t].get(ans, 0.0) + np.exp(logq + beta * ll + twist * v)
        if t == steps:
            return
        elig = [i for i in range(CA) if ans[i] == CMASK and i // block_length == blocks[t]]
        laws = {i: _np_law(ans, i) for i in elig}
        for x0 in itertools.product(range(2), repeat=len(elig)):
            q = {i: laws[i] ** (1 / temperature) / np.sum(laws[i] ** (1 / temperature))
                 for i in elig}
            lq = sum(np.log(q[i][x]) for i, x in zip(elig, x0, strict=True))
            score = [laws[i][x] for i, x in zip(elig, x0, strict=True)]
            pick = sorted(range(len(elig)), key=lambda j: -score[j])[:schedule[t]]
            new = list(ans)
            inc = 0.0
            for j in pick:
                new[elig[j]] = x0[j]
                inc += np.log(laws[elig[j]][x0[j]])
            rec(tuple(new), t + 1, logq + lq, ll + inc)

    rec((CMASK,) * CA, 0, 0.0, 0.0)
    return {t: {k: v / sum(d.values()) for k, v in d.items()} for t, d in out.items()}


def _assert_weighted_particles_follow(alg, targets, beta, steps, b, n, key, infos=None):
    """Runs ``alg`` on B identical problems and checks, after every step t, the particles
    weighted by log w + beta (V(s_t) - V(s_{t-1})) against ``targets[t]`` (``beta``: the
    twist's scale); returns whether any step resampled (``infos``: a list the steps' Info
    are appended to)."""

    @jax.jit
    def run(key):
        state = alg.init(key, jnp.zeros((b, 1), jnp.int32))
        out = []
        for t, k in enumerate(jax.random.split(key, steps)):
            state, info = alg.step(k, state)
            v = (jnp.zeros((b, n)) if t == steps - 1
                 else ctx_value(None, state.decode.tokens).reshape(b, n))
            out.append((state.decode.tokens[:, 1:], state.log_weights
                        + beta * (v - state.value), info))
        return out

    resampled_any = False
    for t, (tokens, log_w, info) in enumerate(run(key), start=1):
        resampled = info.resampled
        if infos is not None:
            infos.append(info)
        # One pool over the B identical problems with unnormalised weights: resampling keeps
        # each problem's mean weight (its estimate of the normalising constant), so this
        # has O(1 / (B N)) bias, not the O(1 / N) of per-problem self-normalisation.
        w = np.asarray(jax.nn.softmax(log_w.reshape(-1)))
        got = {}
        for row, wi in zip(map(tuple, np.asarray(tokens).tolist()), w, strict=True):
            got[row] = got.get(row, 0.0) + wi
        keys = sorted(set(got) | set(targets[t]))
        np.testing.assert_allclose([got.get(k, 0.0) for k in keys],
                                   [targets[t].get(k, 0.0) for k in keys], atol=0.015,
                                   err_msg=f"after {t} steps")
        resampled_any |= bool(np.asarray(resampled).any())
    return resampled_any


@pytest.mark.parametrize("temperature,beta,settings", [
    (0.7, 1.5, dict(resample=False)),
    (0.7, 1.5, dict(ess_threshold=1.0)),                                 # every step
    (1.6, 1.0, dict(ess_threshold=1.0, resample_schedule="block_ends")),
    (1.3, 0.7, dict(ess_threshold=1.0, resample_schedule="fractions",
                    resample_fractions=(0.25, 0.75))),
])
@pytest.mark.heavy
def test_poke_smc_weighted_particles_target_the_twisted_path_targets(temperature, beta,
                                                                     settings):
    """Two blocks of 2, confidence policy, T != 1, beta != 1, with the POKE twist: after t
    steps the particles weighted by log w + beta (V(s_t) - V(s_{t-1})) follow gamma_t, and
    the final weighted particles follow pi(x) ~ sum_tau q(x, tau) p(x; tau)^beta."""
    b, n, block = 200, 64, 2
    targets = enumerate_twisted_targets(temperature, beta, block)
    alg = path_smc.smc(ctx_denoiser, gen_length=CA, num_particles=n, mask_id=CMASK,
                       vocab_size=CV, value_fn=ctx_value, block_length=block,
                       temperature=temperature, weight_scale=beta, **settings)
    resampled_any = _assert_weighted_particles_follow(alg, targets, beta, CA, b, n,
                                                      jax.random.key(5))
    assert resampled_any == settings.get("resample", True)
    # The target is not the model's own law p(x): pi differs from the tempered proposal's
    # law with beta = 0 (a check that the enumeration is not trivially the proposal).
    proposal = enumerate_twisted_targets(temperature, 0.0, block)[CA]
    assert max(abs(targets[CA][k] - proposal[k]) for k in proposal) > 0.02


@pytest.mark.parametrize("schedule,fractions,expected", [
    ("every_step", (0.5,), [0, 1, 1, 1, 1, 1, 1, 1]),
    ("block_ends", (0.5,), [0, 0, 1, 0, 1, 0, 1, 0]),   # blocks of 2 steps
    ("fractions", (0.25, 0.5, 0.99), [0, 0, 1, 0, 1, 0, 0, 0]),  # 0.99 * 8 rounds to 8
])
def test_resampling_schedule_fires_only_at_its_steps(schedule, fractions, expected):
    np.testing.assert_array_equal(path_smc.resample_steps(8, 8, 2, schedule, fractions),
                                  np.array(expected, bool))
    if schedule == "every_step":
        return
    # In a run, ESS < N (forced) resamples exactly at the allowed steps (A = 4, blocks of 2).
    allowed = path_smc.resample_steps(CA, CA, 2, schedule, fractions)
    _, info = path_smc.run_particles(
        jax.random.key(0), ctx_denoiser, jnp.zeros((3, 1), jnp.int32), CA, mask_id=CMASK,
        vocab_size=CV, num_particles=8, block_length=2, temperature=1.3, ess_threshold=1.0,
        resample_schedule=schedule, resample_fractions=fractions)
    np.testing.assert_array_equal(np.asarray(info.resampled),
                                  np.broadcast_to(allowed[:, None], (CA, 3)))


@pytest.mark.parametrize("kwargs,arg", [
    (dict(resample_schedule="sometimes"), "resample_schedule"),
    (dict(resample_schedule="fractions", resample_fractions=(0.0,)), "resample_fractions"),
    (dict(resample_schedule="fractions", resample_fractions=(1.2,)), "resample_fractions"),
    (dict(resample_schedule="fractions", resample_fractions=()), "resample_fractions"),
    (dict(resample_schedule="fractions", resample_fractions=("a",)), "resample_fractions"),
])
def test_bad_resampling_schedules_raise(kwargs, arg):
    with pytest.raises(ValueError, match=f"`{arg}`"):
        path_smc.smc_decode(jax.random.key(0), toy_denoiser, jnp.zeros((2, 1), jnp.int32), 2,
                            mask_id=MASK, vocab_size=V,
                            num_particles=2, **kwargs)


# --- The path proposal: argmax tokens, Plackett-Luce positions (decoding docstring) ------


def _plackett_luce_set(logits, chosen):
    """Probability that a Gumbel-top-k draw over ``logits`` picks the set ``chosen`` (sum
    over its orders of the sequential draw without replacement)."""
    w = np.exp(np.asarray(logits) - np.max(logits))
    total = 0.0
    for perm in itertools.permutations(chosen):
        p, left = 1.0, w.sum()
        for j in perm:
            p *= w[j] / left
            left -= w[j]
        total += p
    return total


def enumerate_path_targets(token_temperature, position_temperature, beta, block_length,
                           steps):
    """{t: {partial answer: gamma_t}} under the ``"path"`` proposal: at step t the k_t
    committed positions are a Plackett-Luce set over log max_v p_i(v) / position_temperature
    (eligible positions of the step's block), each committed token is the argmax
    (``token_temperature`` 0) or drawn from p_i^(1 / T); Path LL and twist as above."""
    _, _, schedule, blocks = decoding.step_plan(CA, steps, block_length)
    out = {t: {} for t in range(steps + 1)}

    def rec(ans, t, logq, ll):
        v = 0.0 if t == steps else _np_value(ans)
        out[t][ans] = out[t].get(ans, 0.0) + np.exp(logq + beta * (ll + v))
        if t == steps:
            return
        elig = [i for i in range(CA) if ans[i] == CMASK and i // block_length == blocks[t]]
        laws = {i: _np_law(ans, i) for i in elig}
        logits = [np.log(laws[i].max()) / position_temperature for i in elig]
        for chosen in itertools.combinations(range(len(elig)), int(schedule[t])):
            lq_pos = np.log(_plackett_luce_set(logits, chosen))
            pos = [elig[j] for j in chosen]
            if token_temperature == 0:
                choices = [(tuple(int(np.argmax(laws[i])) for i in pos), 0.0)]
            else:
                q = {i: laws[i] ** (1 / token_temperature)
                     / np.sum(laws[i] ** (1 / token_temperature)) for i in pos}
                choices = [(x, sum(np.log(q[i][xi]) for i, xi in zip(pos, x, strict=True)))
                           for x in itertools.product(range(2), repeat=len(pos))]
            for x, lq_tok in choices:
                new = list(ans)
                inc = 0.0
                for i, xi in zip(pos, x, strict=True):
                    new[i] = xi
                    inc += np.log(laws[i][xi])
                rec(tuple(new), t + 1, logq + lq_pos + lq_tok, ll + inc)

    rec((CMASK,) * CA, 0, 0.0, 0.0)
    return {t: {k: v / sum(d.values()) for k, v in d.items()} for t, d in out.items()}


@pytest.mark.parametrize("token_t,pos_t,beta,block,steps,settings", [
    (0.0, 0.8, 1.5, CA, 2, dict(resample=False)),                  # 2 positions per step
    (0.0, 1.7, 2.0, CA, 2, dict(ess_threshold=1.0)),
    (0.6, 1.2, 0.8, 2, CA, dict(ess_threshold=1.0, resample_schedule="block_ends")),
])
@pytest.mark.heavy
def test_path_proposal_weighted_particles_target_the_path_targets(token_t, pos_t, beta, block,
                                                                  steps, settings):
    """Under the ``"path"`` proposal (positions drawn, tokens argmax or tempered) the
    weighted particles follow gamma_t with q the Plackett-Luce set law of the positions,
    with the POKE twist and with resampling."""
    b, n = 200, 64
    targets = enumerate_path_targets(token_t, pos_t, beta, block, steps)
    alg = path_smc.smc(ctx_denoiser, gen_length=CA, num_particles=n, mask_id=CMASK,
                       vocab_size=CV, value_fn=ctx_value, block_length=block, steps=steps,
                       temperature=token_t, weight_scale=beta, proposal="path",
                       position_temperature=pos_t, **settings)
    resampled_any = _assert_weighted_particles_follow(alg, targets, beta, steps, b, n,
                                                      jax.random.key(6))
    assert resampled_any == settings.get("resample", True)
    # The path proposal's law differs from the token proposal's at the same settings, and
    # its final target is not a point mass (the order, not only the tokens, is random).
    assert len(targets[steps]) > 1
    tokens_law = enumerate_twisted_targets(max(token_t, 1.0), beta, block, steps)[steps]
    keys = set(tokens_law) | set(targets[steps])
    assert max(abs(tokens_law.get(k, 0) - targets[steps].get(k, 0)) for k in keys) > 0.02


def test_path_proposal_at_zero_temperatures_is_greedy():
    """Position and token temperatures 0: every particle decodes greedy's path."""
    prompt = jnp.zeros((3, 1), jnp.int32)
    greedy = decoding.decode(jax.random.key(0), ctx_denoiser, prompt, CA, mask_id=CMASK,
                             vocab_size=CV, block_length=2)
    state, _ = path_smc.run_particles(
        jax.random.key(1), ctx_denoiser, prompt, CA, mask_id=CMASK, vocab_size=CV,
        num_particles=4, block_length=2, proposal="path", temperature=0.0,
        position_temperature=0.0)
    np.testing.assert_array_equal(np.asarray(state.decode.tokens[:, 1:]),
                                  np.repeat(np.asarray(greedy.answer), 4, axis=0))
    np.testing.assert_array_equal(np.asarray(state.decode.order),
                                  np.repeat(np.asarray(greedy.order), 4, axis=0))


@pytest.mark.parametrize("proposal,temperature", [("path", 0.0), ("path", 0.9),
                                                  ("tokens", 1.3)])
@pytest.mark.heavy
def test_greedy_reference_particle_keeps_greedys_path_through_resampling(proposal,
                                                                          temperature):
    """With ``greedy_reference`` particle 0 of every problem is greedy's decode (tokens and
    order), it is never replaced although the steps resample, and the output's Path LL is
    at least greedy's."""
    b, n, block = 6, 5, 2
    prompt = jnp.zeros((b, 1), jnp.int32)
    greedy = decoding.decode(jax.random.key(0), ctx_denoiser, prompt, CA, mask_id=CMASK,
                             vocab_size=CV, block_length=block)
    key = jax.random.key(2)
    kw = dict(mask_id=CMASK, vocab_size=CV, num_particles=n,
              block_length=block, proposal=proposal, temperature=temperature,
              position_temperature=2.0, ess_threshold=1.0, weight_scale=3.0,
              value_fn=ctx_value, greedy_reference=True)
    state, info = path_smc.run_particles(key, ctx_denoiser, prompt, CA, **kw)
    ref = np.asarray(state.decode.tokens[:, 1:]).reshape(b, n, CA)[:, 0]
    np.testing.assert_array_equal(ref, np.asarray(greedy.answer))
    np.testing.assert_array_equal(np.asarray(state.decode.order).reshape(b, n, CA)[:, 0],
                                  np.asarray(greedy.order))
    resampled = np.asarray(info.resampled)
    assert resampled[1:].mean() > 0.5  # ESS < N: resampled wherever the weights differ
    np.testing.assert_array_equal(np.asarray(info.ancestors)[:, :, 0], 0)
    # The other particles were redrawn (some ancestors differ from the identity).
    assert (np.asarray(info.ancestors)[1:, :, 1:] != np.arange(1, n)).any()
    res, _ = path_smc.smc_decode(key, ctx_denoiser, prompt, CA, **kw)
    assert np.all(np.asarray(res.path_ll) >= np.asarray(greedy.path_ll) - 1e-6)
    # Without the reference the same settings lose greedy's path on some problem.
    state, _ = path_smc.run_particles(key, ctx_denoiser, prompt, CA,
                                      **{**kw, "greedy_reference": False})
    paths = np.asarray(state.decode.order).reshape(b, n, CA)
    assert not all((paths[i] == np.asarray(greedy.order)[i]).all(-1).any() for i in range(b))


@pytest.mark.heavy
def test_select_by_weight_and_bad_path_settings_raise():
    prompt = jnp.zeros((4, 1), jnp.int32)
    key = jax.random.key(3)
    kw = dict(mask_id=CMASK, vocab_size=CV, num_particles=6,
              proposal="path", temperature=0.0, position_temperature=1.0)
    state, _ = path_smc.run_particles(key, ctx_denoiser, prompt, CA, **kw)
    res = path_smc.best_particle(state, CA, select="weight")
    best = np.argmax(np.asarray(state.log_weights), 1)
    np.testing.assert_allclose(np.asarray(res.path_ll),
                               np.asarray(state.decode.path_ll).reshape(4, 6)[np.arange(4), best])
    for bad, arg in [(dict(select="mean"), "select"), (dict(proposal="order"), "proposal"),
                     (dict(position_temperature=-1.0), "position_temperature"),
                     (dict(position_temperature=float("nan")), "position_temperature"),
                     (dict(greedy_reference=True, policy="random"), "greedy_reference")]:
        with pytest.raises(ValueError, match=f"`{arg}`"):
            path_smc.smc_decode(key, ctx_denoiser, prompt, CA, **{**kw, **bad})


def test_one_config_object_carries_every_option():
    """``SMCConfig`` passed as ``config=`` decodes exactly as its fields passed by name;
    ``best_of_n`` ignores its resampling fields; an unknown option or another type
    raises, naming it."""
    prompt = jnp.zeros((2, 1), jnp.int32)
    kw = dict(mask_id=MASK, vocab_size=V, num_particles=3)
    options = dict(weight_scale=2.0, ess_threshold=0.9, proposal="path", temperature=0.0,
                   position_temperature=0.5, select="weight", resampler="systematic")
    key = jax.random.key(3)
    by_name = path_smc.smc_decode(key, toy_denoiser, prompt, 2, **kw, **options)
    by_config = path_smc.smc_decode(key, toy_denoiser, prompt, 2, **kw,
                                    config=path_smc.SMCConfig(**options))
    for a, b in zip(jax.tree.leaves(by_name), jax.tree.leaves(by_config), strict=True):
        np.testing.assert_array_equal(a, b)
    best = path_smc.best_of_n(key, toy_denoiser, prompt, 2, **kw,
                              config=path_smc.SMCConfig(**options))
    again = path_smc.best_of_n(key, toy_denoiser, prompt, 2, **kw, **{
        k: v for k, v in options.items() if k not in ("ess_threshold", "resampler")})
    np.testing.assert_array_equal(best[0].answer, again[0].answer)
    assert not np.asarray(best[1].resampled).any()
    with pytest.raises(TypeError, match="beta"):
        path_smc.smc_decode(key, toy_denoiser, prompt, 2, **kw, beta=2.0)
    with pytest.raises(TypeError, match="`config`"):
        path_smc.smc(toy_denoiser, gen_length=2, **kw, config={"weight_scale": 2.0})
    assert path_smc.smc_config(weight_scale=3.0) == path_smc.SMCConfig(weight_scale=3.0)
