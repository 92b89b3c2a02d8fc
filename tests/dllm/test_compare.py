"""``jaxlab.dllm.compare`` (the paper's comparison on a user's problem) and the study
binary: one protocol, the same per-problem values and comparison rows."""

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
    prompt, answer = comparison.item_problems(TASK, keys)
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
    correct, (result, bad) = comparison.decode_items(fn, TASK, keys)
    again, _ = comparison.decode_items(fn, TASK, keys, batch=2)
    np.testing.assert_array_equal(correct, again)
    assert not bad.any() and result.answer.shape == (4, 1, 4)
    prompt, _ = comparison.item_problems(TASK, keys)
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
                       contenders={"poke_smc": comparison.contender("poke_smc", grid),
                                   "greedy": None, "best_of_n": comparison.contender(
                                       "best_of_n", [{}])},
                       tuning=4, seeds=12, batch=4, resamples=200, progress=False,
                       results_path=path)
    assert list(out.contenders) == ["poke_smc", "greedy", "best_of_n"]
    assert [(d.a, d.b) for d in out.differences] == [("poke_smc", "greedy"),
                                                      ("poke_smc", "best_of_n")]
    # The default goals: POKE-SMC beats greedy and best-of-N (SR-SMC absent) by 2 points.
    assert [(g.goal.b, g.goal.margin) for g in out.goals] == [("greedy", 0.02),
                                                              ("best_of_n", 0.02)]
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["split"] for r in lines] == ["tuning"] * 2 + ["test"] * 9
    # Tuning kept the better grid point on the tuning problems (first on a tie).
    rows = out.contenders["poke_smc"].tuning
    best = max(range(2), key=lambda i: rows[i][1])
    assert out.contenders["poke_smc"].params == grid[best]
    # Greedy's test values recomputed from the test item keys (one batched decode).
    keys = protocol.item_keys(jax.random.key(2), "test", np.arange(12))
    prompt, _ = comparison.item_problems(TASK, keys)
    r = decoding.decode(jax.random.key(0), oracle, prompt, 4, mask_id=5, vocab_size=6)
    np.testing.assert_array_equal(out.contenders["greedy"].values,
                                  np.asarray(TASK.verify(prompt, r.answer), float))
    test = [r for r in lines if r["split"] == "test"]
    for n in out.contenders:
        assert sum((r["values"] for r in test if r["contender"] == n), []) == \
            out.contenders[n].values.tolist()
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
    ({"contenders": {"mine": None}}, "contenders\\['mine'\\]"),
])
def test_bad_calls_name_the_argument(kwargs, match):
    args = {"problem": PROBLEM, "contenders": ("poke_smc", "greedy"), **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        dllm.compare(jax.random.key(0), args.pop("problem"), tuning=0, seeds=2,
                     progress=False, **args)


def test_grids_name_only_the_contenders_settings():
    with pytest.raises(ValueError, match="grid"):
        comparison.contender("sr_smc", [{"weight_scale": 2.0}])
    with pytest.raises(ValueError, match="name"):
        comparison.contender("beam")
    with pytest.raises(ValueError, match="settings"):
        comparison.decoder("greedy", PROBLEM, temperature=1.0)
    assert comparison.contender("best_of_n").grid == comparison.GRIDS["best_of_n"]
    assert comparison.default_goals(("greedy", "sr_smc")) == []


@pytest.mark.heavy
def test_contender_settings_reach_the_decoders():
    """The new grid settings reach the library decoders: blocked greedy is greedy on the
    proposal's blocks (the particles' reference path); best-of-N with ``select="value"`` is
    ``path_smc.best_of_n`` reading ``problem.value_fn``; POKE-SMC with the distinct
    resampler, a twist scale and the head's position policy is ``smc_decode`` with them."""
    positions = lambda hidden, tokens: jnp.where(  # noqa: E731
        tokens[:, 4:] == 5, -jnp.arange(4.0)[None], 0.0)
    problem = PROBLEM._replace(proposal=comparison.Proposal(block_length=2),
                               position_value_fn=positions)
    keys = protocol.item_keys(jax.random.key(4), "test", np.arange(6))
    prompt, _ = comparison.item_problems(TASK, keys)
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


# Trains two tiny models and compiles every contender twice (binary, compare): -m slow,
# as the study's end-to-end test.
@pytest.mark.slow
def test_the_binary_and_compare_give_the_same_comparison(tmp_path):
    """The study binary (smoke preset, one task, the five contenders, 2 problems per call)
    and ``dllm.compare`` on the same problem (the binary's models, its settings as one-point
    grids, all problems in one call): the same per-problem correctness (the binary's
    partial file) and the same comparison rows, CIs and goals (summary.json)."""
    from experiments import dllm as exp
    from experiments import dllm_models
    from experiments.configs import dllm as dllm_config
    from experiments.lib import study
    from jaxlab.dllm import poke

    cfg = dllm_config.get_config("smoke")
    cfg.tasks = ("addition",)
    cfg.task_kwargs.addition = {"n_digits": 2}
    cfg.decoders = ("confidence", "best_of", "smc", "sr_smc", "poke_smc")
    cfg.num_problems, cfg.eval_batch = 6, 4
    cfg.train.update(steps=8, num_chunks=1)
    cfg.poke.update(rollouts=32, steps=4, num_chunks=1)
    cfg.protocol.rank_fractions = (0.5,)
    summary = study.train_and_evaluate(exp.EXPERIMENT, cfg, str(tmp_path))
    binary = json.loads(json.dumps(summary["tasks"]["addition"]["comparison"]["2"]))

    models = dllm_models.Models(cfg, str(tmp_path))
    m = models.denoiser("addition")
    spec = dllm_models.default_proposal(cfg, m.task)
    head = models.poke_head("addition", proposal=spec)
    problem = comparison.Problem(
        m.task, m.denoise_fn, poke.make_value_fn(*head, m.task.prompt_len, m.task.mask_id),
        num_particles=2, proposal=comparison.Proposal(
            spec["proposal"], spec["temperature"], spec["position_temperature"],
            spec["block_length"]),
        threshold=cfg.threshold, sr_smc_temperature=cfg.sr_smc_temperature,
        greedy_reference=cfg.greedy_reference)
    params = exp.contender_params(exp.default_tuning(cfg))
    out = dllm.compare(exp.comparison_key(cfg), problem,
                       contenders={c: comparison.contender(c, [params[c]])
                                   for c in comparison.CONTENDERS},
                       tuning=0, seeds=cfg.num_problems, resamples=cfg.bootstrap,
                       progress=False)
    partial = json.loads((tmp_path / "partial" / "dllm_addition.json").read_text())
    for c, row in exp.CONTENDER_ROWS.items():
        assert out.contenders[c].values.tolist() == partial[row.format(n=2)]["correct"], c
    assert json.loads(json.dumps(exp.summary_comparison(out))) == binary
    assert binary["test_items"] == 6 and len(binary["goals"]) == 3
