"""``jaxlab.dllm.compare`` (the paper's comparison on a user's problem, with per-problem
records) and the study binary's tuning, which is ``compare``'s."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab import dllm
from jaxlab.core import protocol
from jaxlab.dllm import comparison, decoding, model, path_smc, tasks, train


class Reverse:
    """A user's task: the answer is the prompt reversed; tokens 0-4, mask 5."""

    name, vocab_size, mask_id, prompt_len, answer_len = "reverse", 6, 5, 4, 4

    def sample(self, key, n):
        p = jax.random.randint(key, (n, 4), 0, 5)
        return p, p[:, ::-1]

    def verify(self, prompt, answer):
        return jnp.all(answer == prompt[:, ::-1], axis=1)


def oracle(tokens):
    """A noisy oracle denoiser: the right token plus fixed per-position noise."""
    target = jnp.concatenate([tokens[:, :4], tokens[:, 3::-1]], axis=1)
    logits = 2.0 * jax.nn.one_hot(target, 6) + jax.random.normal(jax.random.key(7), (8, 6))
    return logits.at[..., 5].set(-1e9), tokens[..., None].astype(jnp.float32)


TASK = Reverse()
# A value that prefers particles whose committed answer tokens match the prompt reversed:
# enough for POKE-SMC to act, no training.
VALUE = lambda hidden, tokens: -jnp.sum(  # noqa: E731
    (tokens[:, 4:] != 5) & (tokens[:, 4:] != tokens[:, 3::-1]), axis=1).astype(jnp.float32)
PROBLEM = comparison.Problem(TASK, oracle, VALUE, num_particles=2)


def test_item_problems_are_one_sample_per_item_key():
    keys = protocol.item_keys(jax.random.key(0), "test", np.arange(5))
    prompt, answer = comparison.item_problems(keys, TASK)
    for i in range(5):
        p, a = TASK.sample(jax.random.fold_in(keys[i], 0), 1)
        np.testing.assert_array_equal(prompt[i], p[0])
        np.testing.assert_array_equal(answer[i], a[0])


@pytest.mark.heavy
def test_decode_items_equals_each_problem_decoded_alone_at_any_batch():
    """Item i's value is its problem decoded on its own with ``fold_in(k_i, 1)`` and
    verified (no vmap), whatever the number of problems per call."""
    keys = protocol.item_keys(jax.random.key(1), "test", np.arange(4))
    fn = comparison.decoder("path_smc", PROBLEM)
    correct, (result, bad, records) = comparison.decode_items(keys, fn, TASK)
    again, _ = comparison.decode_items(keys, fn, TASK, batch=2)
    np.testing.assert_array_equal(correct, again)
    assert not bad.any() and result.answer.shape == (4, 1, 4)
    assert records["particle_answers"].shape == (4, 1, 2, 4)
    prompt, _ = comparison.item_problems(keys, TASK)
    alone = jax.jit(lambda k, p: path_smc.smc_decode(
        k, oracle, p, 4, mask_id=5, vocab_size=6, num_particles=2, proposal="path",
        temperature=0.0, position_temperature=1.0, greedy_reference=True)[0].answer)
    for i in range(4):
        answer = alone(jax.random.fold_in(keys[i], 1), prompt[i:i + 1])
        np.testing.assert_array_equal(result.answer[i], answer)
        assert correct[i] == bool(TASK.verify(prompt[i:i + 1], answer)[0])


@pytest.mark.heavy
def test_compare_on_a_users_problem_tunes_on_tuning_problems_and_pairs_the_test(tmp_path):
    path = tmp_path / "items.jsonl"
    grid = [{"weight_scale": 1.0}, {"weight_scale": 4.0}]
    out = dllm.compare(jax.random.key(2), PROBLEM,
                       contenders={"poke_smc": protocol.Builtin("poke_smc", grid),
                                   "greedy": "greedy",
                                   "best_of_n": protocol.Builtin("best_of_n", [{}])},
                       tuning=4, seeds=12, batch=4, resamples=200, progress=False,
                       results_path=path)
    assert list(out.contenders) == ["poke_smc", "greedy", "best_of_n"]
    assert [(d.a, d.b) for d in out.differences] == [("poke_smc", "greedy"),
                                                      ("poke_smc", "best_of_n")]
    # The default goals: POKE-SMC beats greedy and best-of-N (SR-SMC absent) by 2 points.
    assert [(g.goal.b, g.goal.margin) for g in out.goals] == [("greedy", 0.02),
                                                              ("best_of_n", 0.02)]
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r.get("split") for r in lines[1:]] == ["tuning"] * 2 + ["test"] * 9
    # Tuning kept the better grid point on the tuning problems (first on a tie).
    rows = out.contenders["poke_smc"].tuning
    best = max(range(2), key=lambda i: rows[i][1])
    assert out.contenders["poke_smc"].params == grid[best]
    # Greedy's test values and answers recomputed from the test item keys (one batched
    # decode).
    keys = protocol.item_keys(jax.random.key(2), "test", np.arange(12))
    prompt, _ = comparison.item_problems(keys, TASK)
    r = decoding.decode(jax.random.key(0), oracle, prompt, 4, mask_id=5, vocab_size=6)
    np.testing.assert_array_equal(out.contenders["greedy"].values,
                                  np.asarray(TASK.verify(prompt, r.answer), float))
    np.testing.assert_array_equal(out.records["greedy"]["answer"], r.answer)
    test = [r for r in lines if r.get("split") == "test"]
    for n in out.contenders:
        assert sum((r["values"]["accuracy"] for r in test if r["contender"] == n), []) == \
            out.contenders[n].values.tolist()
    # The particle records: each final particle's answer verified; pass@N is "some particle
    # right", which the chosen answer's correctness never exceeds.
    for n in ("poke_smc", "best_of_n"):
        rec = out.records[n]
        assert rec["particles_correct"].shape == (12, 2)
        np.testing.assert_array_equal(rec["pass_at_n"], rec["particles_correct"].any(1))
        assert np.all(out.contenders[n].values <= rec["pass_at_n"])
        np.testing.assert_array_equal(out.contenders[n].values,
                                      np.asarray(TASK.verify(prompt, rec["answer"]), float))
        assert np.all((1 <= rec["distinct_paths"]) & (rec["distinct_paths"] <= 2))
        assert rec["top_path_ll_correct"].shape == (12, 4)
    assert not out.records["best_of_n"]["resampling_events"].any()  # never resamples
    assert "top_path_ll_plus_value_correct" in out.records["poke_smc"]
    assert out.to_dict()["records"]["poke_smc"]["pass_at_n"] == \
        out.records["poke_smc"]["pass_at_n"].tolist()
    d = out.differences[0]
    assert d.value == pytest.approx(np.mean(out.contenders["poke_smc"].values
                                            - out.contenders["greedy"].values))
    assert d.low <= d.value <= d.high
    assert "goal poke_smc better than greedy by > 0.02" in out.table()


@pytest.mark.parametrize("kwargs, match", [
    ({"problem": PROBLEM._replace(value_fn=None)}, "problem.value_fn"),
    ({"problem": (TASK, oracle)}, "problem"),
    ({"problem": PROBLEM._replace(num_particles=0)}, "num_particles"),
    ({"contenders": ("poke_smc", "beam")}, "contenders"),
    ({"contenders": "poke_smc"}, "contenders"),
    ({"contenders": {"mine": None}}, "contenders\\['mine'\\]"),
    ({"contenders": {"smc": protocol.Builtin("sr_smc", [{"weight_scale": 2.0}])}},
     "contenders\\['smc'\\]"),
])
def test_bad_calls_name_the_argument_before_decoding(kwargs, match, monkeypatch):
    def never(*args, **kw):
        raise AssertionError("decoded before the checks")

    monkeypatch.setattr(comparison, "decode_items", never)
    args = {"problem": PROBLEM, "contenders": ("poke_smc", "greedy"), **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        dllm.compare(jax.random.key(0), args.pop("problem"), tuning=0, seeds=2,
                     progress=False, **args)


def test_grids_name_only_the_contenders_settings():
    with pytest.raises(ValueError, match="name"):
        comparison.decoder("beam", PROBLEM)
    with pytest.raises(ValueError, match="settings"):
        comparison.decoder("greedy", PROBLEM, temperature=1.0)
    assert comparison.SPEC.contenders["best_of_n"](None).grid == comparison.GRIDS["best_of_n"]
    assert comparison.default_goals(("greedy", "sr_smc")) == []
    with pytest.raises(TypeError, match="names"):
        comparison.default_goals("poke_smc")


@pytest.mark.heavy
def test_contender_settings_reach_the_decoders():
    """The grid settings reach the library decoders: blocked greedy is greedy on the
    proposal's blocks (the particles' reference path); best-of-N with ``select="value"`` is
    ``path_smc.best_of_n`` reading ``problem.value_fn``; POKE-SMC with the distinct
    resampler, a twist scale and the head's position policy is ``smc_decode`` with them;
    ``twist_multiple`` is the twist scale as a multiple of beta."""
    positions = lambda hidden, tokens: jnp.where(  # noqa: E731
        tokens[:, 4:] == 5, -jnp.arange(4.0)[None], 0.0)
    problem = PROBLEM._replace(proposal=comparison.Proposal(block_length=2),
                               position_value_fn=positions)
    keys = protocol.item_keys(jax.random.key(4), "test", np.arange(6))
    prompt, _ = comparison.item_problems(keys, TASK)
    kw = dict(mask_id=5, vocab_size=6)
    blocked = comparison.decoder("greedy_blocks", problem)
    got = jax.vmap(lambda p, k: blocked(p[None], k)[0].answer[0])(prompt, keys)
    np.testing.assert_array_equal(
        got, decoding.decode(jax.random.key(0), oracle, prompt, 4, block_length=2, **kw).answer)
    pkw = dict(num_particles=2, proposal="path", temperature=0.0, position_temperature=1.0,
               greedy_reference=True, block_length=2, **kw)
    runs = [
        (comparison.decoder("best_of_n", problem, select="value"),
         lambda k, p: path_smc.best_of_n(k, oracle, p, 4, value_fn=VALUE, select="value",
                                         **pkw)),
        (comparison.decoder("poke_smc", problem, resampler="distinct", twist_scale=0.5,
                            policy="value", policy_mix=0.5, ess_threshold=0.9),
         lambda k, p: path_smc.smc_decode(k, oracle, p, 4, value_fn=VALUE,
                                          resampler="distinct", twist_scale=0.5,
                                          policy="value", position_value_fn=positions,
                                          policy_mix=0.5, ess_threshold=0.9, **pkw)),
        (comparison.decoder("poke_smc", problem, weight_scale=2.0, twist_multiple=0.25),
         lambda k, p: path_smc.smc_decode(k, oracle, p, 4, value_fn=VALUE, weight_scale=2.0,
                                          twist_scale=0.5, **pkw)),
        (comparison.decoder("path_smc", problem, select="mix"),
         lambda k, p: path_smc.smc_decode(k, oracle, p, 4, value_fn=VALUE, twist_scale=0.0,
                                          select="mix", **pkw)),
    ]
    for fn, ref in runs:
        for i in range(3):
            np.testing.assert_array_equal(fn(prompt[i:i + 1], keys[i])[0].answer,
                                          ref(keys[i], prompt[i:i + 1])[0].answer)
    with pytest.raises(ValueError, match="problem.value_fn"):
        comparison.decoder("best_of_n", problem._replace(value_fn=None), select="mix")
    with pytest.raises(ValueError, match="problem.position_value_fn"):
        comparison.decoder("path_smc", PROBLEM, policy="value")
    with pytest.raises(ValueError, match="settings"):
        comparison.decoder("path_smc", PROBLEM, twist_scale=2.0)  # no twist without a value
    assert "greedy_blocks" not in comparison.CONTENDERS  # not run unless named


@pytest.mark.heavy
def test_greedy_accuracy_fn_is_greedy_decodings_accuracy():
    task = tasks.Addition(n_digits=2)
    cfg = model.LLaDAConfig(vocab_size=task.vocab_size, mask_token_id=task.mask_id,
                            d_model=16, n_layers=1, n_heads=2, n_kv_heads=2,
                            mlp_hidden_size=32)
    graphdef, params = model.init(cfg, seed=3)
    prompt, _ = task.sample(jax.random.key(5 + 20_000), 16)
    r = decoding.decode(jax.random.key(0), lambda t: model.apply(graphdef, params, t), prompt,
                        task.answer_len, mask_id=task.mask_id, vocab_size=task.vocab_size)
    assert float(train.greedy_accuracy_fn(task, graphdef, 16, seed=5)(params)) == \
        pytest.approx(float(np.mean(task.verify(prompt, r.answer))))
    with pytest.raises(ValueError, match="num_problems"):
        train.greedy_accuracy_fn(task, graphdef, 0)


@pytest.mark.slow  # compiles a training step
def test_greedy_accuracy_during_training_is_the_decoders_accuracy():
    """``train.train(..., greedy_problems=G)`` logs, per chunk, greedy decoding's accuracy
    on G held-out problems: the final entry equals decoding those problems with the
    returned params."""
    task = tasks.Addition(n_digits=2)
    cfg = model.LLaDAConfig(vocab_size=task.vocab_size, mask_token_id=task.mask_id,
                            d_model=16, n_layers=1, n_heads=2, n_kv_heads=2,
                            mlp_hidden_size=32)
    graphdef, params, hist = train.train(task, cfg, steps=4, batch_size=8, lr=1e-3,
                                         num_chunks=2, greedy_problems=16)
    assert len(hist["greedy_accuracy"]) == 2
    prompt, _ = task.sample(jax.random.key(20_000), 16)
    den = lambda tok: model.apply(graphdef, params, tok)  # noqa: E731
    r = decoding.decode(jax.random.key(0), den, prompt, task.answer_len,
                        mask_id=task.mask_id, vocab_size=task.vocab_size)
    assert hist["greedy_accuracy"][-1] == pytest.approx(
        float(np.mean(task.verify(prompt, r.answer))))
    with pytest.raises(ValueError, match="greedy_problems"):
        train.train(task, cfg, steps=2, batch_size=8, lr=1e-3, num_chunks=1,
                    greedy_problems=-1)


# Compiles a few SMC programs at once on a random denoiser: -m slow.
@pytest.mark.slow
def test_the_binarys_tuning_is_compares(tmp_path):
    """The study binary's staged tuning (``experiments/dllm.py`` ``_tune``: Path-LL SMC's
    beta, then its resampler, then its selection, each stage's argmax frozen) and
    ``dllm.compare`` with the same stages written out by hand on the same problem: the same
    picks and the same per-problem tuning values; and the binary's own test decoder at the
    chosen settings gives the chosen point's per-problem values on the validation
    problems."""
    from experiments import dllm as exp
    from experiments.configs import dllm as dllm_config

    cfg = dllm_config.get_config("smoke")
    cfg.particles, cfg.eval_batch, cfg.bootstrap = (2,), 4, 50
    cfg.decoders = ("smc",)
    cfg.protocol.update(validation_problems=4, tune_particles=(2,), weight_scales=(1.0, 4.0),
                        resamplers=("multinomial", "distinct"),
                        selections=("path_ll", "weight"))
    task = tasks.Addition(n_digits=2)
    mcfg = model.LLaDAConfig(vocab_size=task.vocab_size, mask_token_id=task.mask_id,
                             d_model=16, n_layers=1, n_heads=2, n_kv_heads=2,
                             mlp_hidden_size=32)
    graphdef, params = model.init(mcfg, seed=3)
    den = jax.jit(lambda tok: model.apply(graphdef, params, tok))
    out, _, _ = exp._tune(cfg, task, den, None, results_path=tmp_path / "binary.jsonl")
    tuned = out["tuned"]["smc"]

    problem = exp._problem(cfg, task, den, out["tuned"])
    base = dict(weight_scale=1.0, ess_threshold=0.5, resample_schedule="every_step",
                select="path_ll", select_mix=0.5, resampler="multinomial",
                policy="confidence", policy_mix=1.0)
    stages = protocol.Stages(([{**base, "weight_scale": 1.0}, {**base, "weight_scale": 4.0}],
                              [{"resampler": "multinomial"}, {"resampler": "distinct"}],
                              [{"select": "path_ll"}, {"select": "weight"}]))
    ref = dllm.compare(exp.comparison_key(cfg), problem,
                       contenders={"path_smc": protocol.Builtin("path_smc", stages)},
                       tuning=4, seeds=2, resamples=50, progress=False,
                       results_path=tmp_path / "compare.jsonl")
    chosen = ref.contenders["path_smc"].params
    assert {k: tuned[k] for k in ("weight_scale", "resampler", "select")} == \
        {k: chosen[k] for k in ("weight_scale", "resampler", "select")}
    assert list(out["grid"]["smc_settings_smc"].values()) + list(
        out["grid"]["resampler_smc"].values()) + list(out["grid"]["select_smc"].values()) == \
        [s for _, s in ref.contenders["path_smc"].tuning]

    def tuning_values(path):
        lines = [json.loads(x) for x in path.read_text().splitlines()[1:]]
        return [(r["params"], r["values"]) for r in lines if r.get("split") == "tuning"]

    assert tuning_values(tmp_path / "binary.jsonl") == tuning_values(tmp_path / "compare.jsonl")
    dec = exp.decoders(cfg, task, den, None, out["tuned"], names=("smc_2",))["smc_2"]
    row = exp._run_decoder(cfg, task, "smc_2", dec, exp.item_keys(cfg, "tuning", 4))
    last = [v["accuracy"] for p, v in tuning_values(tmp_path / "compare.jsonl")
            if p == chosen][-1]
    assert np.asarray(row["_correct"], float).tolist() == last
