"""Particle-decoder mechanisms that can change answers: the step diagnostics, the
distinct-path resampler, the value-based selections, the separate twist scale, the
``value`` position policy and the greedy reference under semi-AR blocks (``path_smc`` and
``decoding`` docstrings), against NumPy references, brute-force enumeration of the toy
proposals and Monte Carlo."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.dllm import decoding, path_smc, poke
from tests.dllm.test_smc import (
    CA,
    CMASK,
    CV,
    _assert_weighted_particles_follow,
    _np_law,
    _np_value,
    _plackett_luce_set,
    ctx_denoiser,
    ctx_value,
    enumerate_twisted_targets,
)

U_BIAS = np.array([-0.9, -0.2, -1.4, -0.5])


def ctx_positions(hidden, tokens):
    """A per-position value [M, A] that depends on the partial answer (a stand-in for the
    head's per-masked-position predictions; 0 at committed positions)."""
    del hidden
    ans = tokens[:, 1:]
    s = jnp.where(ans == 1, 1.0, jnp.where(ans == 0, -1.0, 0.0))
    u = jnp.asarray(U_BIAS, jnp.float32) + 0.45 * jnp.roll(s, 1, axis=1) - 0.1 * jnp.sum(
        ans == CMASK, axis=1, keepdims=True)
    return jnp.where(ans == CMASK, u, 0.0)


def _np_positions(ans):
    s = np.array([1.0 if a == 1 else -1.0 if a == 0 else 0.0 for a in ans])
    masked = np.array([a == CMASK for a in ans])
    return np.where(masked, U_BIAS + 0.45 * np.roll(s, 1) - 0.1 * masked.sum(), 0.0)


def _state(answers):
    """DecodeState of the ctx toy (prompt [0]) at the given partial answers [B, A]."""
    ans = jnp.asarray(answers, jnp.int32)
    tokens = jnp.concatenate([jnp.zeros((ans.shape[0], 1), jnp.int32), ans], axis=1)
    return decoding.DecodeState(tokens, jnp.where(ans == CMASK, -1, 0).astype(jnp.int32),
                                jnp.zeros(ans.shape[0]))


def _np_scores(ans, i, x, policy, mix):
    law = _np_law(ans, i)
    if policy == "confidence":
        return law[x]
    if policy == "margin":
        return abs(law[1] - law[0])
    if policy == "neg_entropy":
        return float(np.sum(law * np.log(law)))
    return (1 - mix) * np.log(law[x]) + mix * _np_positions(ans)[i]


def _np_step_law(ans, elig, k, *, proposal, policy, temperature, position_temperature, mix):
    """{(committed positions, their tokens): q} of one step by brute force."""
    out = {}
    laws = {i: _np_law(ans, i) for i in elig}
    tq = {i: (laws[i] ** (1 / temperature) / np.sum(laws[i] ** (1 / temperature))
              if temperature > 0 else np.eye(2)[np.argmax(laws[i])]) for i in elig}
    if proposal == "tokens":
        for x0 in itertools.product(range(2), repeat=len(elig)):
            q = np.prod([tq[i][x] for i, x in zip(elig, x0, strict=True)])
            if q == 0:
                continue
            if policy == "random":  # every k-subset equally likely
                subsets = [(c, 1 / math.comb(len(elig), k))
                           for c in itertools.combinations(range(len(elig)), k)]
            else:
                sc = [_np_scores(ans, i, x, policy, mix) for i, x in zip(elig, x0, strict=True)]
                subsets = [(tuple(sorted(sorted(range(len(elig)), key=lambda j: -sc[j])[:k])),
                            1.0)]
            for c, w in subsets:
                key = (tuple(elig[j] for j in c), tuple(x0[j] for j in c))
                out[key] = out.get(key, 0.0) + q * w
        return out
    if policy == "value":
        logits = [((1 - mix) * np.log(laws[i].max()) + mix * _np_positions(ans)[i])
                  / position_temperature for i in elig]
    else:
        logits = [np.log(laws[i].max()) / position_temperature for i in elig]
    for c in itertools.combinations(range(len(elig)), k):
        p_set = _plackett_luce_set(logits, c)
        pos = [elig[j] for j in c]
        for x in itertools.product(range(2), repeat=len(pos)):
            q = p_set * np.prod([tq[i][xi] for i, xi in zip(pos, x, strict=True)])
            if q > 0:
                out[(tuple(pos), x)] = out.get((tuple(pos), x), 0.0) + q
    return out


@pytest.mark.parametrize("proposal,policy,temperature,pos_t,mix", [
    ("tokens", "confidence", 1.3, 1.0, 1.0),
    ("tokens", "confidence", 0.6, 1.0, 1.0),
    ("tokens", "margin", 0.9, 1.0, 1.0),
    ("tokens", "random", 1.1, 1.0, 1.0),
    ("tokens", "value", 1.2, 1.0, 0.4),
    ("path", "confidence", 0.0, 0.8, 1.0),
    ("path", "confidence", 0.7, 1.6, 1.0),
    ("path", "value", 0.0, 1.1, 0.6),
])
@pytest.mark.heavy
def test_proposal_log_prob_of_a_step_is_the_brute_force_law(proposal, policy, temperature,
                                                             pos_t, mix):
    """``decode_step(..., log_q=True)`` reports log q of the realised commit: the law of
    (committed positions, tokens) enumerated over every x0 (tokens) or every order of the
    committed set (path), for 2 and 3 of 4 positions per step; the realised commits follow
    that law (frequencies over 3000 rows)."""
    rows = 3000
    for ans, k in [((CMASK,) * CA, 2), ((1, CMASK, CMASK, CMASK), 2), ((CMASK,) * CA, 3)]:
        state = _state([ans] * rows)
        elig = [i for i in range(CA) if ans[i] == CMASK]
        logits, hidden = ctx_denoiser(state.tokens)
        pv = ctx_positions(hidden, state.tokens) if policy == "value" else None
        new, inc, _, log_q = decoding.decode_step(
            jax.random.key(k), state, logits, jnp.int32(k), jnp.int32(0), jnp.int32(1),
            mask_id=CMASK, prompt_len=1, policy=policy, temperature=temperature,
            block_length=CA, proposal=proposal, position_temperature=pos_t,
            position_values=pv, policy_mix=mix, log_q=True)
        law = _np_step_law(ans, elig, k, proposal=proposal, policy=policy,
                           temperature=temperature, position_temperature=pos_t, mix=mix)
        assert abs(sum(law.values()) - 1) < 1e-9
        got = np.asarray(new.tokens[:, 1:])
        seen = {}
        for r in range(rows):
            pos = tuple(i for i in elig if got[r, i] != CMASK)
            key = (pos, tuple(int(got[r, i]) for i in pos))
            np.testing.assert_allclose(float(log_q[r]), np.log(law[key]), rtol=1e-4,
                                       atol=1e-4)
            seen[key] = seen.get(key, 0) + 1
        for key, q in law.items():  # 4 binomial standard errors
            assert abs(seen.get(key, 0) / rows - q) < 4 * np.sqrt(q * (1 - q) / rows) + 1e-3


def test_set_log_prob_is_the_plackett_luce_set_law():
    """The quadrature equals the sum over the chosen set's orders (1 to 4 chosen of 6, with
    logits far apart) and the softmax for one chosen position."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(40, 6)) * np.array([[1.0], [4.0], [9.0], [0.3]] * 10)
    eligible = np.ones((40, 6), bool)
    eligible[::3, 5] = False
    chosen = np.zeros((40, 6), bool)
    for r in range(40):
        k = 1 + r % 4
        chosen[r, rng.choice(np.nonzero(eligible[r])[0], k, replace=False)] = True
    got = np.asarray(decoding.set_log_prob(jnp.asarray(logits, jnp.float32), chosen, eligible))
    for r in range(40):
        elig = np.nonzero(eligible[r])[0]
        c = [int(np.nonzero(elig == i)[0][0]) for i in np.nonzero(chosen[r])[0]]
        np.testing.assert_allclose(got[r], np.log(_plackett_luce_set(logits[r, elig], c)),
                                   rtol=2e-5, atol=2e-5)
    one = chosen & (np.cumsum(chosen, 1) == 1)
    soft = np.asarray(decoding.set_log_prob(jnp.asarray(logits, jnp.float32), one, eligible,
                                            max_k=1))
    quad = np.asarray(decoding.set_log_prob(jnp.asarray(logits, jnp.float32), one, eligible))
    np.testing.assert_allclose(soft, quad, rtol=2e-5, atol=2e-5)
    all_in = decoding.set_log_prob(jnp.asarray(logits, jnp.float32), eligible, eligible)
    np.testing.assert_array_equal(np.asarray(all_in), 0.0)


# --- Info: the step diagnostics ------------------------------------------------------------


def _unique(rows):
    return len({tuple(r) for r in rows})


@pytest.mark.parametrize("settings", [
    dict(ess_threshold=1.0, weight_scale=1.5, twist_scale=0.7),
    dict(resample=False, proposal="path", temperature=0.0, position_temperature=0.6),
    dict(ess_threshold=1.0, resampler="distinct", proposal="path", temperature=0.0,
         position_temperature=0.4, greedy_reference=True),
])
@pytest.mark.heavy
def test_info_records_each_steps_terms_by_construction(settings):
    """Stepping the toy by hand: ``distinct_paths`` counts the unique answers after the
    resampling, ``value`` / ``path_ll`` are V(s_t) / L_t before it, the twist, Path-LL and
    correction terms are the weight's changes and l - log q (q from the brute-force step
    law), with their variances over the N particles."""
    b, n, steps = 3, 6, 2
    beta = settings.get("weight_scale", 1.0)
    tw = settings.get("twist_scale", beta)
    path = settings.get("proposal") == "path"
    alg = path_smc.smc(ctx_denoiser, gen_length=CA, num_particles=n, mask_id=CMASK,
                       vocab_size=CV, value_fn=ctx_value, steps=steps,
                       **{"temperature": 1.2, **settings})
    state = alg.init(jax.random.key(0), jnp.zeros((b, 1), jnp.int32))
    prev_v = np.zeros((b, n))
    for t, key in enumerate(jax.random.split(jax.random.key(1), steps)):
        before = np.asarray(state.decode.tokens[:, 1:]).reshape(b, n, CA)
        ll_before = np.asarray(state.decode.path_ll).reshape(b, n)
        lw_before = np.asarray(state.log_weights)
        new, info = alg.step(key, state)
        anc = np.asarray(info.ancestors)
        v = np.array([[_np_value(tuple(r)) for r in p] for p in before])
        np.testing.assert_allclose(np.asarray(info.value), v, atol=1e-6)
        np.testing.assert_allclose(np.asarray(info.path_ll), ll_before, atol=1e-6)
        np.testing.assert_allclose(np.asarray(info.twist_increment), tw * (v - prev_v),
                                   atol=1e-5)
        after = np.take_along_axis(before, anc[..., None], axis=1)
        np.testing.assert_array_equal(np.asarray(info.distinct_paths),
                                      [_unique(p) for p in after])
        ll_after = np.asarray(new.decode.path_ll).reshape(b, n)
        l_step = ll_after - np.take_along_axis(ll_before, anc, axis=1)
        np.testing.assert_allclose(np.asarray(info.path_ll_increment), beta * l_step,
                                   atol=1e-5)
        final = np.asarray(new.decode.tokens[:, 1:]).reshape(b, n, CA)
        corr = np.asarray(info.proposal_correction)
        for p, i in itertools.product(range(b), range(n)):
            if settings.get("greedy_reference") and i == 0:
                assert abs(corr[p, i] - l_step[p, i]) < 1e-5  # log q = 0: greedy's step
                continue
            src = tuple(after[p, i])
            elig = [j for j in range(CA) if src[j] == CMASK]
            pos = tuple(j for j in elig if final[p, i, j] != CMASK)
            law = _np_step_law(src, elig, 2, proposal="path" if path else "tokens",
                               policy="confidence", temperature=0.0 if path else 1.2,
                               position_temperature=settings.get("position_temperature", 1),
                               mix=1.0)
            q = law[(pos, tuple(int(final[p, i, j]) for j in pos))]
            np.testing.assert_allclose(corr[p, i], l_step[p, i] - np.log(q), atol=2e-4)
        for f in ("twist_increment", "path_ll_increment", "proposal_correction"):
            np.testing.assert_allclose(np.asarray(getattr(info, f + "_var")),
                                       np.var(np.asarray(getattr(info, f)), axis=1),
                                       rtol=1e-5, atol=1e-6)
        # Without a resampling the weights changed by the twist and the Path-LL term (and
        # the last step removes the last twist).
        if not np.asarray(info.resampled).any():
            removed = tw * v if t == steps - 1 else 0.0
            np.testing.assert_allclose(
                np.asarray(new.log_weights), lw_before + np.asarray(info.twist_increment)
                + np.asarray(info.path_ll_increment) - removed, atol=1e-5)
        prev_v = np.take_along_axis(v, anc, axis=1)
        state = new


def test_ancestry_and_value_sum_follow_each_final_particles_path():
    """``ancestry`` walks ``Info.ancestors`` back from the final particles; the value
    estimate each final particle carries (``State.value_sum``) is the sum over t >= 1 of
    L_t + V(s_t) at its ancestors, plus its final Path LL."""
    b, n = 4, 5
    state, info = path_smc.run_particles(
        jax.random.key(3), ctx_denoiser, jnp.zeros((b, 1), jnp.int32), CA, mask_id=CMASK,
        vocab_size=CV, num_particles=n, value_fn=ctx_value, ess_threshold=1.0,
        temperature=1.4, weight_scale=2.0)
    anc = np.asarray(info.ancestors)
    assert (anc != np.arange(n)).any()  # resampling happened
    lineage = np.asarray(path_smc.ancestry(info.ancestors))
    expected = np.zeros((CA, b, n), int)
    cur = np.tile(np.arange(n), (b, 1))
    for t in range(CA - 1, -1, -1):
        cur = np.take_along_axis(anc[t], cur, axis=1)
        expected[t] = cur
    np.testing.assert_array_equal(lineage, expected)
    ll, v = np.asarray(info.path_ll), np.asarray(info.value)
    total = np.asarray(state.decode.path_ll).reshape(b, n).copy()
    for t in range(1, CA):
        total += np.take_along_axis(ll[t] + v[t], lineage[t], axis=1)
    np.testing.assert_allclose(np.asarray(state.value_sum), total, rtol=1e-5, atol=1e-5)


# --- The distinct-path resampler -------------------------------------------------------------


def _dup_state(answers, log_w, path_ll):
    """One problem's State holding the given partial answers [N, A]."""
    dec = _state(answers)._replace(path_ll=jnp.asarray(path_ll, jnp.float32))
    lw = jnp.asarray([log_w], jnp.float32)
    return path_smc.State(dec, lw, jnp.zeros_like(lw), jnp.zeros_like(lw))


ANSWERS = [(0, CMASK, 1, CMASK), (1, CMASK, CMASK, 0), (0, CMASK, 1, CMASK),
           (1, 1, CMASK, CMASK), (1, 1, CMASK, CMASK), (0, CMASK, 1, CMASK)]
LOG_W = [-0.3, -1.9, -1.2, 0.4, -0.7, -2.5]
PATH_LL = [-2.0, -1.0, -1.5, -3.0, -2.5, -1.2]


@pytest.mark.heavy
@pytest.mark.parametrize("keep_first", [False, True])
def test_distinct_resampling_keeps_every_distinct_path_and_its_weight(keep_first):
    """Three distinct answers among six particles: after a resampling the problem still
    holds exactly those three, each at its representative (highest Path LL; particle 0
    under ``keep_first``), and every answer keeps its total weight."""
    state = _dup_state(ANSWERS, LOG_W, PATH_LL)
    logits = jnp.zeros((6, 5, CV))
    for seed in range(20):
        new, _, info = path_smc.resample_step(jax.random.key(seed), state, logits,
                                              ess_threshold=1.0, resampler="distinct",
                                              keep_first=keep_first)
        assert bool(info.resampled[0])
        after = np.asarray(new.decode.tokens[:, 1:])
        assert int(info.distinct_paths[0]) == _unique(after) == _unique(ANSWERS) == 3
        anc = np.asarray(info.ancestors[0])
        reps = [0 if keep_first else 5, 1, 4]  # groups {0, 2, 5}, {1}, {3, 4}
        assert all(anc[r] == r for r in reps)
        assert set(anc) == set(reps)
        w_old, w_new = np.exp(LOG_W), np.exp(np.asarray(new.log_weights[0]))
        for a in {tuple(r) for r in ANSWERS}:
            np.testing.assert_allclose(
                w_new[[tuple(r) == a for r in after]].sum(),
                w_old[[tuple(r) == a for r in ANSWERS]].sum(), rtol=1e-5)
        np.testing.assert_allclose(np.asarray(new.decode.path_ll),
                                   np.asarray(PATH_LL)[anc], rtol=1e-6)


def test_distinct_resampling_refills_duplicate_slots_by_group_weight():
    """The duplicates' slots (here 2, 3 and 5) draw representatives independently with
    probability proportional to the group weight: per-slot frequencies and the joint law of
    slots 2 and 3 over 20000 resamplings (4 standard errors)."""
    state = _dup_state(ANSWERS, LOG_W, PATH_LL)
    same = path_smc.same_paths(state.decode, 1, 6)[0]
    draws = jax.vmap(lambda k: path_smc.distinct_resample(
        k, state.log_weights[0], same, state.decode.path_ll)[0])(
        jax.random.split(jax.random.key(7), 20000))
    draws = np.asarray(draws)
    w = np.exp(LOG_W)
    group = {5: w[[0, 2, 5]].sum(), 1: w[1], 4: w[[3, 4]].sum()}  # rep -> group weight
    p = {r: g / sum(group.values()) for r, g in group.items()}
    np.testing.assert_array_equal(draws[:, [1, 4, 5]], np.tile([1, 4, 5], (20000, 1)))
    for slot in (0, 2, 3):
        for r, pr in p.items():
            se = np.sqrt(pr * (1 - pr) / 20000)
            assert abs(np.mean(draws[:, slot] == r) - pr) < 4 * se
    for (r1, p1), (r2, p2) in itertools.product(p.items(), p.items()):
        pj = p1 * p2
        assert abs(np.mean((draws[:, 2] == r1) & (draws[:, 3] == r2)) - pj) < \
            4 * np.sqrt(pj * (1 - pj) / 20000)


@pytest.mark.heavy
def test_distinct_resampling_keeps_the_twisted_targets_on_partial_answers():
    """With the distinct resampler at every step, the weighted particles still follow
    gamma_t on partial answers (enumeration, the ``test_smc`` toy), and duplicates did
    arise and were refilled."""
    b, n, block, beta = 200, 64, 2, 1.5
    targets = enumerate_twisted_targets(0.7, beta, block)
    alg = path_smc.smc(ctx_denoiser, gen_length=CA, num_particles=n, mask_id=CMASK,
                       vocab_size=CV, value_fn=ctx_value, block_length=block, temperature=0.7,
                       weight_scale=beta, ess_threshold=1.0, resampler="distinct")
    infos = []
    assert _assert_weighted_particles_follow(alg, targets, beta, CA, b, n, jax.random.key(5),
                                             infos)
    distinct = np.stack([np.asarray(i.distinct_paths) for i in infos])
    assert (distinct < n).all()  # 64 particles, at most 16 answers: duplicates everywhere


@pytest.mark.heavy
@pytest.mark.parametrize("twist", [0.0, 0.6, 2.5])
def test_a_separate_twist_scale_targets_beta_l_plus_twist_v(twist):
    """``twist_scale`` beta_V != beta: gamma_t proportional to q exp(beta L_t + beta_V V_t)
    after every step (enumeration), the final one q exp(beta L_S)."""
    b, n, block, beta = 200, 64, 2, 1.2
    targets = enumerate_twisted_targets(0.8, beta, block, twist=twist)
    alg = path_smc.smc(ctx_denoiser, gen_length=CA, num_particles=n, mask_id=CMASK,
                       vocab_size=CV, value_fn=ctx_value, block_length=block, temperature=0.8,
                       weight_scale=beta, twist_scale=twist, ess_threshold=1.0)
    assert _assert_weighted_particles_follow(alg, targets, twist, CA, b, n, jax.random.key(8))


@pytest.mark.heavy
def test_defaults_are_the_explicit_previous_settings_bit_for_bit():
    """A default run equals the run with every new setting at its previous behaviour
    (twist scale = beta, multinomial resampler, Path-LL selection, confidence policy), and
    best-of-N equals SMC without resampling and without the twist; the twist changes the
    weights only through its own term (beta_V 0: no lookahead's weights)."""
    prompt = jnp.zeros((3, 1), jnp.int32)
    kw = dict(mask_id=CMASK, vocab_size=CV, num_particles=5, value_fn=ctx_value,
              weight_scale=1.7, ess_threshold=0.9, temperature=1.1, block_length=2)
    default = path_smc.smc_decode(jax.random.key(4), ctx_denoiser, prompt, CA, **kw)
    explicit = path_smc.smc_decode(jax.random.key(4), ctx_denoiser, prompt, CA, **kw,
                                   twist_scale=1.7, resampler="multinomial", select="path_ll",
                                   policy="confidence", policy_mix=1.0)
    for a, b in zip(jax.tree.leaves(default), jax.tree.leaves(explicit), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    no_value = {**kw, "value_fn": None}
    bon = path_smc.best_of_n(jax.random.key(4), ctx_denoiser, prompt, CA,
                             **{k: v for k, v in no_value.items()
                                if k not in ("ess_threshold", "value_fn")})
    smc = path_smc.smc_decode(jax.random.key(4), ctx_denoiser, prompt, CA, **no_value,
                              resample=False)
    for a, b in zip(jax.tree.leaves(bon), jax.tree.leaves(smc), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    off, _ = path_smc.run_particles(jax.random.key(4), ctx_denoiser, prompt, CA,
                                    **{**kw, "twist_scale": 0.0})
    none, _ = path_smc.run_particles(jax.random.key(4), ctx_denoiser, prompt, CA, **no_value)
    np.testing.assert_array_equal(np.asarray(off.log_weights), np.asarray(none.log_weights))
    np.testing.assert_array_equal(np.asarray(off.decode.tokens), np.asarray(none.decode.tokens))


# --- Selection rules ---------------------------------------------------------------------------


def _np_select(state, info, select, mix, b, n):
    ll_t, v_t = np.asarray(info.path_ll), np.asarray(info.value)
    lineage = np.asarray(path_smc.ancestry(info.ancestors))
    final = np.asarray(state.decode.path_ll, np.float64).reshape(b, n)
    est = final + sum(np.take_along_axis(ll_t[t] + v_t[t], lineage[t], axis=1)
                      for t in range(1, ll_t.shape[0]))
    if select == "value":
        return np.argmax(est / ll_t.shape[0], axis=1)
    z = lambda x: (x - x.mean(1, keepdims=True)) / np.where(  # noqa: E731
        x.std(1, keepdims=True) > 0, x.std(1, keepdims=True), 1.0)
    return np.argmax(mix * z(est) + (1 - mix) * z(final), axis=1)


@pytest.mark.heavy
@pytest.mark.parametrize("resample", [False, True])
@pytest.mark.parametrize("select,mix", [("value", 0.5), ("mix", 0.3), ("mix", 0.8)])
def test_value_selections_pick_the_numpy_argmax(resample, select, mix):
    """``"value"``: the highest mean over steps of L_t + V(s_t) along the particle's path;
    ``"mix"``: the standardised convex mix with Path LL; in best-of-N (value for the
    selection only) and in SMC."""
    b, n = 6, 5
    prompt = jnp.zeros((b, 1), jnp.int32)
    kw = dict(mask_id=CMASK, vocab_size=CV, num_particles=n, value_fn=ctx_value,
              temperature=1.3)
    if resample:
        state, info = path_smc.run_particles(jax.random.key(11), ctx_denoiser, prompt, CA,
                                             ess_threshold=1.0, **kw)
        res, _ = path_smc.smc_decode(jax.random.key(11), ctx_denoiser, prompt, CA,
                                     ess_threshold=1.0, select=select, select_mix=mix, **kw)
    else:
        state, info = path_smc.run_particles(jax.random.key(11), ctx_denoiser, prompt, CA,
                                             resample=False, twist_scale=0.0, **kw)
        res, _ = path_smc.best_of_n(jax.random.key(11), ctx_denoiser, prompt, CA,
                                    select=select, select_mix=mix, **kw)
    pick = _np_select(state, info, select, mix, b, n)
    tokens = np.asarray(state.decode.tokens[:, 1:]).reshape(b, n, CA)
    np.testing.assert_array_equal(np.asarray(res.answer), tokens[np.arange(b), pick])
    ll = np.asarray(state.decode.path_ll).reshape(b, n)
    np.testing.assert_allclose(np.asarray(res.path_ll), ll[np.arange(b), pick])


@pytest.mark.heavy
def test_best_of_n_reads_the_value_for_the_selection_only():
    """With a ``value_fn`` best-of-N draws the same particles with the same weights (no
    twist, no resampling) and the same NFE; only the chosen particle may change, and the
    mix at 0 is the Path-LL choice."""
    b, n = 8, 6
    prompt = jnp.zeros((b, 1), jnp.int32)
    kw = dict(mask_id=CMASK, vocab_size=CV, num_particles=n, temperature=1.3)
    plain, info0 = path_smc.best_of_n(jax.random.key(2), ctx_denoiser, prompt, CA, **kw)
    valued, info1 = path_smc.best_of_n(jax.random.key(2), ctx_denoiser, prompt, CA,
                                       value_fn=ctx_value, select="value", **kw)
    mix0, _ = path_smc.best_of_n(jax.random.key(2), ctx_denoiser, prompt, CA,
                                 value_fn=ctx_value, select="mix", select_mix=0.0, **kw)
    np.testing.assert_array_equal(np.asarray(mix0.answer), np.asarray(plain.answer))
    np.testing.assert_array_equal(np.asarray(valued.nfe), np.asarray(plain.nfe))
    assert not np.asarray(info1.resampled).any()
    np.testing.assert_array_equal(np.asarray(info1.twist_increment), 0.0)
    np.testing.assert_array_equal(np.asarray(info1.path_ll_increment),
                                  np.asarray(info0.path_ll_increment))
    assert (np.asarray(info1.value) != 0).any()
    assert not np.array_equal(np.asarray(valued.answer), np.asarray(plain.answer))


@pytest.mark.parametrize("kwargs,arg", [
    (dict(select="value"), "select"),
    (dict(select="mix"), "select"),
    (dict(select="mix", value_fn=ctx_value, select_mix=1.5), "select_mix"),
    (dict(twist_scale=-1.0), "twist_scale"),
    (dict(twist_scale=float("nan")), "twist_scale"),
    (dict(resampler="unique"), "resampler"),
    (dict(policy="value"), "position_value_fn"),
    (dict(policy="value", position_value_fn=ctx_positions, policy_mix=1.2), "policy_mix"),
    (dict(policy="value", position_value_fn=ctx_value), "position_value_fn"),
])
def test_bad_new_settings_raise(kwargs, arg):
    with pytest.raises((ValueError, TypeError), match=f"`{arg}`"):
        path_smc.smc_decode(jax.random.key(0), ctx_denoiser, jnp.zeros((2, 1), jnp.int32), CA,
                            mask_id=CMASK, vocab_size=CV, num_particles=2, **kwargs)


# --- The value choosing positions --------------------------------------------------------------


def _np_value_greedy(block, steps, mix):
    """Greedy decoding of the ctx toy with the ``value`` policy, in NumPy."""
    _, _, schedule, blocks = decoding.step_plan(CA, steps, block)
    ans, order = [CMASK] * CA, [-1] * CA
    for t in range(steps):
        elig = [i for i in range(CA) if ans[i] == CMASK and i // block == blocks[t]]
        x0 = {i: int(np.argmax(_np_law(tuple(ans), i))) for i in elig}
        sc = {i: _np_scores(tuple(ans), i, x0[i], "value", mix) for i in elig}
        for i in sorted(elig, key=lambda j: -sc[j])[:schedule[t]]:
            ans[i], order[i] = x0[i], t
    return ans, order


@pytest.mark.heavy
@pytest.mark.parametrize("block,steps,mix", [(CA, CA, 1.0), (CA, 2, 0.35), (2, CA, 0.7)])
def test_value_policy_picks_the_numpy_reference(block, steps, mix):
    """``policy="value"``: each step commits the eligible positions with the highest
    (1 - w) log p(x0) + w u, u the per-position value of the same pass (NumPy reference);
    the path proposal at position temperature 0 and SMC's greedy reference take the same
    path; the value policy costs no denoiser pass (one pass per step in the program, as
    ``confidence``)."""
    prompt = jnp.zeros((2, 1), jnp.int32)
    kw = dict(mask_id=CMASK, vocab_size=CV, block_length=block, steps=steps,
              position_value_fn=ctx_positions, policy_mix=mix)
    ref_ans, ref_order = _np_value_greedy(block, steps, mix)
    r = decoding.decode(jax.random.key(0), ctx_denoiser, prompt, CA, policy="value", **kw)
    np.testing.assert_array_equal(np.asarray(r.answer), [ref_ans] * 2)
    np.testing.assert_array_equal(np.asarray(r.order), [ref_order] * 2)
    conf = decoding.decode(jax.random.key(0), ctx_denoiser, prompt, CA, mask_id=CMASK,
                           vocab_size=CV, block_length=block, steps=steps)
    if mix == 1.0:
        assert not np.array_equal(np.asarray(conf.order), np.asarray(r.order))
    path = decoding.decode(jax.random.key(0), ctx_denoiser, prompt, CA, policy="value",
                           proposal="path", **kw)
    np.testing.assert_array_equal(np.asarray(path.order), np.asarray(r.order))
    state, _ = path_smc.run_particles(
        jax.random.key(1), ctx_denoiser, prompt, CA, num_particles=4, policy="value",
        proposal="path", temperature=0.0, position_temperature=1.5, greedy_reference=True,
        value_fn=ctx_value, ess_threshold=1.0, **kw)
    np.testing.assert_array_equal(np.asarray(state.decode.order).reshape(2, 4, CA)[:, 0],
                                  np.asarray(r.order))
    def marked(tokens):  # the denoiser with a marker op (sin), one per pass in the program
        logits, hidden = ctx_denoiser(tokens)
        return logits + 0.0 * jnp.sin(tokens[..., None].astype(jnp.float32)), hidden

    for policy in ("confidence", "value"):
        jaxpr = jax.make_jaxpr(lambda k, p=policy: decoding.decode(
            k, marked, prompt, CA, policy=p, **kw))(jax.random.key(0))
        assert _count_primitive(jaxpr.jaxpr, "sin") == 1  # in the scan body: one per step
    jaxpr = jax.make_jaxpr(lambda k: path_smc.run_particles(
        k, marked, prompt, CA, num_particles=3, policy="value", value_fn=ctx_value,
        **kw))(jax.random.key(1))
    assert _count_primitive(jaxpr.jaxpr, "sin") == 1


def _count_primitive(jaxpr, name):
    """Occurrences of primitive ``name`` in a jaxpr and its sub-jaxprs (scan bodies...)."""
    count = 0
    for eqn in jaxpr.eqns:
        count += eqn.primitive.name == name
        for v in eqn.params.values():
            for sub in (v if isinstance(v, tuple | list) else (v,)):
                if hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
                    count += _count_primitive(sub.jaxpr, name)
                elif hasattr(sub, "eqns"):
                    count += _count_primitive(sub, name)
    return count


@pytest.mark.heavy
def test_position_value_fn_is_the_heads_summands():
    """``poke.make_position_value_fn``: per masked position the head's prediction, 0 where
    committed; its sum over the answer is ``make_value_fn``'s value."""
    graphdef, params = poke.init(CV, 8, seed=1)
    vf = poke.make_value_fn(graphdef, params, 1, CMASK)
    pf = poke.make_position_value_fn(graphdef, params, 1, CMASK)
    hidden = jax.random.normal(jax.random.key(0), (5, 1 + CA, CV))
    tokens = jnp.asarray([[0, 1, CMASK, 0, CMASK]] * 5)
    per = np.asarray(pf(hidden, tokens))
    assert per.shape == (5, CA)
    np.testing.assert_array_equal(per[:, [0, 2]], 0.0)
    assert (per[:, [1, 3]] < 0).all()
    np.testing.assert_array_equal(per.sum(1), np.asarray(vf(hidden, tokens)))
    with pytest.raises(ValueError, match="`prompt_len`"):
        poke.make_position_value_fn(graphdef, params, -1, CMASK)


# --- The greedy reference under semi-AR blocks -------------------------------------------------

A12 = 12  # answer positions of the larger toy: coarse blocks of 3, two steps per block
RNG = np.random.default_rng(3)
B12, W12 = RNG.normal(size=A12) * 0.8, RNG.normal(size=(A12, A12)) * 0.6


def ctx12_denoiser(tokens):
    """The ctx toy with 12 answer positions (tokens {0, 1}, mask 2)."""
    ans = tokens[:, 1:]
    s = jnp.where(ans == 1, 1.0, jnp.where(ans == 0, -1.0, 0.0))
    z = jnp.asarray(B12, jnp.float32) + s @ jnp.asarray(W12.T, jnp.float32)
    lg = jnp.stack([jnp.zeros_like(z), z, jnp.full_like(z, -1e9)], axis=-1)
    logits = jnp.concatenate([jnp.full((tokens.shape[0], 1, CV), -1e9), lg], axis=1)
    return logits, jax.nn.one_hot(tokens, CV)


def ctx12_value(hidden, tokens):
    return (jnp.sum(tokens[:, 1:] == 1, 1) * 0.7 - jnp.sum(tokens[:, 1:] == CMASK, 1) * 0.3
            ).astype(jnp.float32)


def ctx12_positions(hidden, tokens):
    ans = tokens[:, 1:]
    return jnp.where(ans == CMASK, -jnp.abs(jnp.asarray(B12, jnp.float32)) - 0.2 * jnp.sum(
        ans == 1, 1, keepdims=True), 0.0)


@pytest.mark.parametrize("steps", [A12, 8])
@pytest.mark.parametrize("settings", [
    dict(proposal="path", temperature=0.0, position_temperature=1.5),
    dict(proposal="tokens", temperature=1.2),
    dict(proposal="path", temperature=0.0, position_temperature=1.0, policy="value",
         position_value_fn=ctx12_positions, policy_mix=0.5),
    dict(proposal="path", temperature=0.0, position_temperature=2.0, resampler="distinct"),
])
@pytest.mark.heavy
def test_reference_particle_is_blocked_greedy_under_coarse_blocks(steps, settings):
    """Coarse semi-AR blocks (``decoding.coarse_block``: 4 blocks of 3, one or two tokens per
    step): particle 0 of every problem is ``decoding.decode``'s decode under the same
    blocks, steps and policy (answer and order) through forced resampling, and differs
    from the unblocked greedy path."""
    block = decoding.coarse_block(A12)
    assert block == 3
    b, n = 4, 6
    prompt = jnp.zeros((b, 1), jnp.int32)
    pol = {k: settings[k] for k in ("policy", "position_value_fn", "policy_mix")
           if k in settings}
    greedy = decoding.decode(jax.random.key(0), ctx12_denoiser, prompt, A12, mask_id=CMASK,
                             vocab_size=CV, block_length=block, steps=steps, **pol)
    unblocked = decoding.decode(jax.random.key(0), ctx12_denoiser, prompt, A12, mask_id=CMASK,
                                vocab_size=CV, steps=steps, **pol)
    assert not np.array_equal(np.asarray(greedy.order), np.asarray(unblocked.order))
    state, info = path_smc.run_particles(
        jax.random.key(5), ctx12_denoiser, prompt, A12, mask_id=CMASK, vocab_size=CV,
        num_particles=n, block_length=block, steps=steps, value_fn=ctx12_value,
        weight_scale=3.0, ess_threshold=1.0, greedy_reference=True, **settings)
    assert np.asarray(info.resampled)[1:].any()
    ref = lambda x: np.asarray(x).reshape(b, n, A12)[:, 0]  # noqa: E731
    np.testing.assert_array_equal(ref(state.decode.tokens[:, 1:]), np.asarray(greedy.answer))
    np.testing.assert_array_equal(ref(state.decode.order), np.asarray(greedy.order))


def test_reference_breaks_confidence_ties_as_greedy_does():
    """Two positions whose log-confidences differ but whose confidences round to the same
    float32: greedy commits the lower position first (its tie rule on p), and so does the
    path proposal's reference particle (it ranks greedy's scores, not the log scale).

    Which pairs tie depends on how the compiled decoder rounds ``exp`` (it differs between
    jax versions), so the candidates are pairs that tie eagerly and the tie is confirmed by
    greedy itself: it commits position 0 first although position 1's log-confidence is
    higher."""
    rows = np.asarray(jax.random.normal(jax.random.key(0), (200_000, 4)) * 2, np.float32)
    lp = np.asarray(jnp.max(decoding.log_probs(jnp.asarray(rows), 3), -1))
    conf = np.asarray(jnp.exp(jnp.asarray(lp)))
    o = np.argsort(lp, kind="stable")
    ties = np.nonzero((np.diff(lp[o]) > 0) & (np.diff(conf[o]) == 0))[0]

    def table(lo, hi):  # position 0 gets `lo`, position 1 `hi`, whatever the state
        return jnp.stack([jnp.full(4, -1e9), jnp.asarray(lo), jnp.asarray(hi)])

    def tie_denoiser(tokens, tab):
        return jnp.broadcast_to(tab, (tokens.shape[0], 3, 4)), jax.nn.one_hot(tokens, 4)

    prompt = jnp.zeros((1, 1), jnp.int32)

    @jax.jit
    def greedy_order(tab):
        return decoding.decode(jax.random.key(0), lambda t: tie_denoiser(t, tab), prompt, 2,
                               mask_id=3, vocab_size=4).order

    for i in ties[:50]:  # the first pair that ties in the decoder's own arithmetic
        tab = table(rows[o[i]], rows[o[i + 1]])
        got = decoding.log_probs(tab[None], 3)[0, 1:].max(-1)
        if got[0] < got[1] and np.array_equal(np.asarray(greedy_order(tab)), [[0, 1]]):
            break
    else:
        pytest.fail("no float32 confidence tie found that greedy breaks by position")

    state, _ = path_smc.run_particles(jax.random.key(1), lambda t: tie_denoiser(t, tab),
                                      prompt, 2, mask_id=3, vocab_size=4, num_particles=3,
                                      proposal="path", temperature=0.0,
                                      position_temperature=1.0, greedy_reference=True)
    np.testing.assert_array_equal(np.asarray(state.decode.order)[0], [0, 1])
