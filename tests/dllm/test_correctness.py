"""Correctness twist: features, labelled rollouts (best-of-N's particles), the BCE fit on a
planted signal, the diagnostics against NumPy loops, the twist's SMC weights against a
NumPy recomputation, the ``"last_value"`` selection and save / load."""

import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.dllm import correctness, path_smc, tasks, weights
from tests.dllm.denoisers import sharpened_denoiser


@pytest.fixture(scope="module")
def setup():
    task = tasks.Addition(n_digits=2)
    return task, sharpened_denoiser(task, d_model=16, n_layers=1, mlp_hidden=24)


def _np_features(hidden, masked):
    out = []
    for h, m in zip(np.asarray(hidden, np.float64), np.asarray(masked), strict=True):
        mean_m = h[m].mean(0) if m.any() else np.zeros(h.shape[1])
        mean_u = h[~m].mean(0) if (~m).any() else np.zeros(h.shape[1])
        out.append(np.concatenate([mean_m, mean_u, [m.mean()]]))
    return np.stack(out)


def _np_gelu(x):  # jax.nn.gelu's default (tanh) form
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def _np_log_p_correct(params, feats):
    p = jax.tree.map(lambda a: np.asarray(a, np.float64), params)
    z = (feats - p["feature_mean"]) / p["feature_std"]
    i = 0
    while f"dense_{i}" in p:
        z = _np_gelu(z @ p[f"dense_{i}"]["w"] + p[f"dense_{i}"]["b"])
        i += 1
    logit = (z @ p["out"]["w"] + p["out"]["b"])[:, 0]
    return -np.logaddexp(0.0, -logit)


def _random_head(f, hidden=8, depth=2, seed=3):
    params = correctness.init_head(jax.random.key(seed), f, hidden, depth)
    rng = np.random.default_rng(seed)
    params["feature_mean"] = jnp.asarray(rng.normal(size=f), jnp.float32)
    params["feature_std"] = jnp.asarray(rng.uniform(0.5, 2.0, size=f), jnp.float32)
    params["out"]["b"] = jnp.asarray([0.3], jnp.float32)
    return params


def test_features_and_twist_fn_shapes_jit_vmap_against_numpy():
    rng = np.random.default_rng(0)
    hidden = rng.normal(size=(5, 4, 3)).astype(np.float32)
    masked = rng.random((5, 4)) < 0.5
    masked[0] = True
    masked[1] = False
    got = correctness.features(jnp.asarray(hidden), jnp.asarray(masked))
    assert got.shape == (5, correctness.num_features(3))
    np.testing.assert_allclose(np.asarray(got), _np_features(hidden, masked), rtol=1e-5,
                               atol=1e-6)
    params = _random_head(7)
    prompt_len, mask_id = 2, 9
    tokens = np.concatenate([np.zeros((5, 2), np.int32), np.where(masked, mask_id, 1)], 1)
    full_hidden = np.concatenate([rng.normal(size=(5, 2, 3)), hidden], 1).astype(np.float32)
    twist = correctness.make_twist_fn(params, prompt_len, mask_id)
    v = twist(jnp.asarray(full_hidden), jnp.asarray(tokens))
    assert v.shape == (5,) and np.all(np.asarray(v) < 0)
    np.testing.assert_allclose(np.asarray(v), _np_log_p_correct(
        params, _np_features(hidden, masked)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(jax.jit(twist)(full_hidden, tokens)), np.asarray(v),
                               rtol=1e-5, atol=1e-6)
    stacked = jax.vmap(twist)(jnp.stack([full_hidden, full_hidden[::-1]]),
                              jnp.stack([tokens, tokens[::-1]]))
    np.testing.assert_allclose(np.asarray(stacked[1]), np.asarray(v)[::-1], rtol=1e-5,
                               atol=1e-6)
    logits = correctness.head_logits(params, jnp.asarray(_np_features(hidden, masked),
                                                         jnp.float32))
    assert logits.shape == (5,)


def test_rollouts_are_best_of_n_particles_with_their_labels(setup):
    task, den = setup
    prompt, _ = task.sample(jax.random.key(0), 3)
    a, n = task.answer_len, 3
    ref = correctness.make_twist_fn(_random_head(correctness.num_features(16)),
                                    task.prompt_len, task.mask_id)
    kw = dict(proposal="path", temperature=0.0, position_temperature=1.0,
              greedy_reference=True)
    ro = correctness.collect_rollouts(jax.random.key(5), den, prompt, a, num_particles=n,
                                      mask_id=task.mask_id, verify_fn=task.verify,
                                      value_fn=ref, **kw)
    assert ro.features.shape == (3, n, a, 33)
    assert ro.path_ll.shape == ro.value.shape == (3, n, a)
    assert ro.correct.shape == (3, n) and ro.correct.dtype == bool
    state, info = path_smc.run_particles(
        jax.random.key(5), den, prompt, a, mask_id=task.mask_id, vocab_size=task.vocab_size,
        num_particles=n, value_fn=ref, resample=False, twist_scale=0.0, **kw)
    np.testing.assert_array_equal(np.asarray(ro.answer).reshape(3 * n, a),
                                  np.asarray(state.decode.tokens[:, -a:]))
    np.testing.assert_allclose(np.asarray(ro.path_ll), np.moveaxis(np.asarray(info.path_ll),
                                                                   0, 2), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ro.final_path_ll).reshape(-1),
                               np.asarray(state.decode.path_ll), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ro.value), np.moveaxis(np.asarray(info.value), 0, 2),
                               rtol=1e-5, atol=1e-6)
    ok = task.verify(jnp.repeat(prompt, n, axis=0), state.decode.tokens[:, -a:])
    np.testing.assert_array_equal(np.asarray(ro.correct).reshape(-1), np.asarray(ok))
    frac = np.asarray(ro.features)[..., -1]  # fraction masked: 1 at t = 0, one less a step
    np.testing.assert_allclose(frac, np.broadcast_to(1 - np.arange(a) / a, frac.shape),
                               atol=1e-6)


def _planted(p, n, s, f, seed):
    """Features whose first coordinate decides the label (plus step noise elsewhere)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(p, n, 1, f)) + 0.3 * rng.normal(size=(p, n, s, f))
    signal = rng.normal(size=(p, n))
    x[..., 0] = signal[..., None] * 2.0
    correct = signal > 0
    zeros = np.zeros((p, n, s), np.float32)
    return correctness.Rollouts(jnp.asarray(x, jnp.float32), jnp.asarray(zeros),
                                jnp.asarray(zeros), jnp.asarray(correct),
                                jnp.zeros((p, n, 2), jnp.int32), jnp.zeros((p, n)))


def test_fit_recovers_a_planted_separable_signal():
    ro = _planted(60, 4, 3, 5, seed=0)
    fit = correctness.fit(jax.random.key(0), ro, hidden=16, steps=600, batch_size=128,
                          lr=3e-3, eval_every=50, val_fraction=0.25)
    assert sorted(np.concatenate([fit.train_problems, fit.val_problems])) == list(range(60))
    assert len(fit.val_problems) == 15
    assert fit.val_loss.min() == fit.val_loss[fit.best_step // 50 - 1]
    test = _planted(40, 4, 3, 5, seed=1)  # fresh problems
    prob = jax.nn.sigmoid(correctness.head_logits(fit.params, test.features))
    labels = np.broadcast_to(np.asarray(test.correct)[..., None], prob.shape)
    base = np.mean(labels)
    assert float(correctness.brier(prob.reshape(-1), labels.reshape(-1))) < 0.1 * base * (
        1 - base)
    assert float(correctness.auroc_within(prob[:, :, 0], test.correct)) > 0.97


def test_fit_splits_by_problem_and_rejects_bad_arguments():
    ro = _planted(10, 3, 2, 4, seed=2)
    fit = correctness.fit(jax.random.key(1), ro, hidden=4, steps=20, batch_size=8,
                          eval_every=10, val_fraction=0.3)
    assert len(fit.val_problems) == 3 and not set(fit.val_problems) & set(fit.train_problems)
    with pytest.raises(ValueError, match="`lr`"):
        correctness.fit(jax.random.key(1), ro, lr=0.0)
    with pytest.raises(ValueError, match="`val_fraction`"):
        correctness.fit(jax.random.key(1), ro, val_fraction=1.0)
    with pytest.raises(TypeError, match="`rollouts`"):
        correctness.fit(jax.random.key(1), tuple(ro))
    with pytest.raises(ValueError, match="rollouts problems"):
        correctness.fit(jax.random.key(1), jax.tree.map(lambda x: x[:1], ro))


def test_brier_reliability_auroc_and_top1_against_numpy_loops():
    rng = np.random.default_rng(4)
    prob = rng.random(200)
    prob[:3] = [0.0, 1.0, 0.5]
    label = rng.random(200) < prob
    assert math.isclose(float(correctness.brier(prob, label)),
                        sum((p - y) ** 2 for p, y in zip(prob, label, strict=True)) / 200,
                        rel_tol=1e-5)
    rel = correctness.reliability(prob, label, num_bins=4)
    for k in range(4):
        inside = [(p, y) for p, y in zip(prob, label, strict=True)
                  if k / 4 <= p < (k + 1) / 4 or (k == 3 and p == 1.0)]
        assert int(rel.counts[k]) == len(inside)
        assert math.isclose(float(rel.mean_predicted[k]),
                            sum(p for p, _ in inside) / len(inside), rel_tol=1e-5)
        assert math.isclose(float(rel.observed_rate[k]),
                            sum(y for _, y in inside) / len(inside), rel_tol=1e-5)
    empty = correctness.reliability(np.array([0.1, 0.2]), np.array([True, False]), 2)
    assert np.isnan(float(empty.mean_predicted[1])) and int(empty.counts[1]) == 0

    scores = rng.integers(0, 4, size=(30, 5)).astype(np.float32)  # ties on purpose
    correct = rng.random((30, 5)) < 0.4
    wins = pairs = 0.0
    for s, c in zip(scores, correct, strict=True):
        for i in range(5):
            for j in range(5):
                if c[i] and not c[j]:
                    pairs += 1
                    wins += 1.0 if s[i] > s[j] else 0.5 if s[i] == s[j] else 0.0
    assert math.isclose(float(correctness.auroc_within(scores, correct)), wins / pairs,
                        rel_tol=1e-6)
    assert np.isnan(float(correctness.auroc_within(scores, np.ones((30, 5), bool))))
    hit, mixed = correctness.top1_on_mixed(scores, correct)
    for b in range(30):
        top = next(i for i in range(5) if scores[b, i] == scores[b].max())  # lowest index
        assert bool(hit[b]) == bool(correct[b, top])
        assert bool(mixed[b]) == (0 < correct[b].sum() < 5)
    assert [correctness.rank_step(f, 22) for f in (0.25, 0.5, 0.75)] == [6, 11, 16]
    table = correctness.ranking_table({"s": np.repeat(scores[..., None], 22, -1)}, correct)
    assert table["0.5"]["step"] == 11
    assert math.isclose(table["0.5"]["s"]["top1"], float(np.asarray(hit)[np.asarray(
        mixed)].mean()))


def test_twist_weights_in_smc_equal_a_numpy_recomputation(setup):
    task, den = setup
    prompt, _ = task.sample(jax.random.key(1), 2)
    a, n, tw = task.answer_len, 3, 0.7
    params = _random_head(correctness.num_features(16))
    twist = correctness.make_twist_fn(params, task.prompt_len, task.mask_id)
    alg = path_smc.smc(den, gen_length=a, num_particles=n, mask_id=task.mask_id,
                       value_fn=twist, proposal="path", temperature=0.0, resample=False,
                       twist_scale=tw)
    s0 = alg.init(jax.random.key(0), prompt)
    s1, _ = alg.step(jax.random.key(1), s0)
    s2, info1 = alg.step(jax.random.key(2), s1)

    def np_twist(state):
        hid = np.asarray(den(state.decode.tokens)[1])[:, task.prompt_len:]
        masked = np.asarray(state.decode.tokens[:, task.prompt_len:] == task.mask_id)
        return _np_log_p_correct(params, _np_features(hid, masked)).reshape(2, n)

    v0, v1 = np_twist(s0), np_twist(s1)
    np.testing.assert_allclose(np.asarray(info1.twist_increment), tw * (v1 - v0), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(
        np.asarray(s2.log_weights),
        tw * v1 + np.asarray(s2.decode.path_ll).reshape(2, n), rtol=1e-4, atol=1e-5)
    res, info = path_smc.smc_decode(
        jax.random.key(3), den, prompt, a, mask_id=task.mask_id, vocab_size=task.vocab_size,
        num_particles=n, value_fn=twist, proposal="path", temperature=0.0, twist_scale=tw,
        ess_threshold=1.0, select="last_value")
    assert res.answer.shape == (2, a) and np.all(np.asarray(res.nfe) == a * n)
    assert np.asarray(info.resampled).any()


def test_last_value_selection_follows_ancestry_in_smc_and_best_of_n(setup):
    task, den = setup
    prompt, _ = task.sample(jax.random.key(2), 4)
    a, n = task.answer_len, 4
    twist = correctness.make_twist_fn(_random_head(correctness.num_features(16), seed=5),
                                      task.prompt_len, task.mask_id)
    kw = dict(mask_id=task.mask_id, vocab_size=task.vocab_size, num_particles=n,
              value_fn=twist, proposal="path", temperature=0.0, greedy_reference=True)
    state, info = path_smc.run_particles(jax.random.key(4), den, prompt, a, ess_threshold=1.0,
                                         twist_scale=1.0, **kw)
    last = np.take_along_axis(np.asarray(info.value[-1]), np.asarray(info.ancestors[-1]), 1)
    np.testing.assert_allclose(np.asarray(state.last_value), last, rtol=1e-6)
    assert np.all(np.asarray(state.value) == 0.0)  # the twist removed at the end
    res = path_smc.best_particle(state, a, "last_value")
    pick = np.argmax(last, axis=1)
    np.testing.assert_array_equal(
        np.asarray(res.answer),
        np.asarray(state.decode.tokens[:, -a:]).reshape(4, n, a)[np.arange(4), pick])
    bon, binfo = path_smc.best_of_n(jax.random.key(4), den, prompt, a, select="last_value",
                                    **kw)
    pick = np.argmax(np.asarray(binfo.value[-1]), axis=1)
    bstate, _ = path_smc.run_particles(jax.random.key(4), den, prompt, a, resample=False,
                                       twist_scale=0.0, **kw)
    np.testing.assert_array_equal(
        np.asarray(bon.answer),
        np.asarray(bstate.decode.tokens[:, -a:]).reshape(4, n, a)[np.arange(4), pick])
    hand = path_smc.State(state.decode, state.log_weights, state.value)
    with pytest.raises(ValueError, match="last_value"):
        path_smc.best_particle(hand, a, "last_value")
    with pytest.raises(ValueError, match="value_fn"):
        path_smc.best_of_n(jax.random.key(4), den, prompt, a, select="last_value",
                           **{**kw, "value_fn": None})


def test_head_flops_count_the_layers():
    params = correctness.init_head(jax.random.key(0), 9, 8, 2)  # d_model 4
    mlp = 2 * 9 + 2 * (9 * 8 + 8 * 8 + 8 * 1) + (8 + 8 + 1)
    assert correctness.head_flops(params, 5) == 2 * 2 * 5 * 4 + mlp


def test_save_load_round_trip_and_mismatches(tmp_path):
    params = _random_head(11, hidden=6, depth=3)
    path = os.fspath(tmp_path / "head")
    weights.save_correctness_head(path, params, step=7, record={"task": "addition"})
    back = weights.load_correctness_head(path)
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)),
                 params, back)
    assert weights.read_record(path)["head"] == {"num_features": 11, "hidden": 6, "depth": 3}
    with pytest.raises(ValueError, match="hidden"):
        weights.load_correctness_head(path, hidden=5)
    with pytest.raises(ValueError, match="already holds"):
        weights.save_correctness_head(path, params)
    with pytest.raises(FileNotFoundError, match="path"):
        weights.load_correctness_head(os.fspath(tmp_path / "none"))
    with pytest.raises(ValueError, match="`params`"):
        weights.save_correctness_head(os.fspath(tmp_path / "bad"), {"w": np.zeros(3)})
