"""The POKE-SMC study end to end at smoke size, resumable; the shipped models."""

import os

import jax
import numpy as np
import pytest

from experiments import dllm as exp
from experiments import dllm_models
from experiments.configs import dllm as dllm_config
from experiments.lib import provenance, study
from jaxlab.dllm import decoding, poke
from tests.notebooks import run_notebook


# The notebook at smoke size: 184 s at -n 2, so -m slow; the suite's quick run (the
# README's main command) runs the binary.
@pytest.mark.slow
def test_smoke_study_end_to_end_and_resume(tmp_path, monkeypatch):
    cfg = dllm_config.get_config("smoke")
    summary, _ = run_notebook("dllm", tmp_path)  # colab/dllm.ipynb at smoke size
    for f in ("summary.json", "accuracy_vs_nfe.png", "path_ll_vs_accuracy.png",
              "smc_diagnostics.png"):
        assert os.path.exists(tmp_path / f)
    for name in cfg.tasks:
        t = summary["tasks"][name]
        a = t["answer_len"]
        d = t["decoders"]
        assert d["confidence"]["nfe"] == a and d["best_of_2"]["nfe"] == 2 * a
        assert d["poke_smc_2"]["nfe"] == d["smc_2"]["nfe"] == 2 * a
        assert d["threshold"]["nfe"] <= a
        # SR-SMC: adaptive threshold passes, at most one per answer token, N per pass.
        assert 2 <= d["sr_smc_2"]["nfe"] <= 2 * a
        assert d["sr_smc_2"]["nfe_batched"] == d["sr_smc_2"]["nfe"] / 2
        v = t["poke_vs_sr_smc"]["2"]
        assert v["difference"] == pytest.approx(v["poke_smc_accuracy"] - v["sr_smc_accuracy"])
        assert v["difference_ci"][0] <= v["difference"] <= v["difference_ci"][1]
        # ESS / N per step (TensorBoard's dllm/mean_ess_over_n_vs_step): 1/N <= . <= 1;
        # one entry per unmasking step (one token each) for the token-level decoders.
        assert "ess_trace" not in d["confidence"]
        for k in ("best_of_2", "smc_2", "poke_smc_2", "sr_smc_2"):
            trace = np.asarray(d[k]["ess_trace"])
            assert np.all((trace >= 0.5 - 1e-6) & (trace <= 1 + 1e-6)), k
        assert len(d["smc_2"]["ess_trace"]) == len(d["poke_smc_2"]["ess_trace"]) == a
        # Resampling and min-ESS diagnostics: best-of-N never resamples; one histogram
        # count per problem; Path-LL SMC resamples exactly where its min ESS fell below N/2
        # under the every-step schedule (smoke: T = 1, every step).
        assert d["best_of_2"]["resampling"]["events_per_problem"] == 0
        for k in ("best_of_2", "smc_2", "poke_smc_2", "sr_smc_2"):
            assert sum(d[k]["min_ess_histogram"]) == cfg.num_problems, k
            r = d[k]["resampling"]
            assert 0 <= r["step_share"] <= r["problems_resampled_share"] <= 1, k
        p2 = t["preconditions"]["2"]
        assert d["smc_2"]["resampling"]["problems_resampled_share"] == pytest.approx(
            p2["ess_below_half_share"])
        for row in d.values():
            lo, hi = row["accuracy_ci"]
            assert 0 <= lo <= row["accuracy"] <= hi <= 1
        # Preconditions: pass@N >= best-of-N >= 0, eligibility as declared, ranking on mixed.
        p = t["preconditions"]["2"]
        assert 0 <= p["best_of_n"] <= p["pass_at_n"] <= 1
        assert p["headline"] == (p["pass_at_n"] - p["best_of_n"] >= 0.1 and p["greedy"] < 0.9)
        assert p["greedy"] == d["confidence"]["accuracy"]
        assert set(p["ranking_on_mixed"]) == {"0.25", "0.5", "0.75"}
        assert t["tuning"]["tuned"]["temperature"] == cfg.temperature  # no grid at smoke size
        for rival in exp.DECLARED_RIVALS:
            x = t["declared"][rival]["2"]
            assert x["difference"] == pytest.approx(x["poke_smc_accuracy"]
                                                    - x[f"{rival}_accuracy"])
    assert "throughput" not in summary  # timed by experiments/bench_poke.py, not a unit
    rows = dict(exp.headline(summary))
    acc = next(v for k, v in rows.items() if k.startswith(f"accuracy {name} N=2 "))
    want = [d[k]["accuracy"] for k in ("confidence", "threshold", "best_of_2", "sr_smc_2",
                                       "smc_2", "poke_smc_2")]
    got = [float(c.split(" (")[0]) for c in acc.split("; ")[0].split(" / ")]
    assert got == pytest.approx(want, abs=5e-4)
    assert float(acc.split("; ")[1]) == pytest.approx(t["preconditions"]["2"]["pass_at_n"],
                                                      abs=5e-4)
    # Rerun: every unit comes from its file; no model is loaded, nothing is recomputed.
    # (Under the notebook's code version: files edited meanwhile must not change the keys.)
    monkeypatch.setattr(provenance, "code_version",
                        lambda: summary["provenance"]["code_version"])
    monkeypatch.setattr(exp, "_evaluate_task", lambda *a: pytest.fail("recomputed a task"))
    monkeypatch.setattr(dllm_models.Models, "denoiser", lambda *a: pytest.fail("loaded"))
    again = study.train_and_evaluate(exp.EXPERIMENT, cfg, str(tmp_path))
    for name in cfg.tasks:
        for k, row in summary["tasks"][name]["decoders"].items():
            got = again["tasks"][name]["decoders"][k]
            assert (got["accuracy"], got["nfe"]) == (row["accuracy"], row["nfe"])
            np.testing.assert_allclose(got["path_ll"], row["path_ll"], rtol=1e-6)


def test_each_model_is_loaded_once_per_run(tmp_path, monkeypatch):
    """The task and SALE units of one run share one load of each model."""
    cfg = dllm_config.get_config("quick")
    loads = []
    for f in ("load_denoiser", "load_value_head"):
        load = getattr(dllm_models.weights, f)
        monkeypatch.setattr(dllm_models.weights, f, lambda *a, load=load, f=f, **kw: (
            loads.append(f) or load(*a, **kw)))
    models = dllm_models.Models(cfg, str(tmp_path))
    for _ in range(3):
        assert models.denoiser("sudoku") is models.denoiser("sudoku")
    spec = dllm_models.default_proposal(cfg, models.denoiser("sudoku").task)
    assert models.poke_head("sudoku", proposal=spec) is models.poke_head("sudoku",
                                                                          proposal=spec)
    assert loads == ["load_denoiser", "load_value_head"]
    assert not os.path.exists(tmp_path / "models")  # shipped for the study's proposal


@pytest.mark.parametrize("name,min_acc", [("sudoku", 0.8), ("addition", 0.3),
                                          ("countdown", 0.05), ("star_graph", 0.3),
                                          ("addition_hard", 0.5), ("countdown_hard", 0.05)])
@pytest.mark.heavy
def test_shipped_denoisers_and_heads_load_and_solve_problems(name, min_acc, tmp_path):
    """The checkpoints in experiments/pretrained/dllm (every task of the `full` preset)
    load and decode, and their POKE heads load and give finite values <= 0 (no training)."""
    cfg = dllm_config.get_config("full")
    path = dllm_models.shipped_path(cfg, name)
    assert os.path.isdir(path), f"shipped model missing: {path}"
    models = dllm_models.Models(cfg, str(tmp_path))
    m = models.denoiser(name)
    prompt, _ = m.task.sample(jax.random.key(99), 128)
    r = decoding.decode(jax.random.key(0), m.denoise_fn, prompt, m.task.answer_len,
                        mask_id=m.task.mask_id, vocab_size=m.task.vocab_size)
    assert float(np.mean(m.task.verify(prompt, r.answer))) >= min_acc
    tokens = decoding.init_state(prompt[:8], m.task.answer_len, m.task.mask_id).tokens
    # Heads on the token proposal (legacy) and on the study's path proposal.
    for spec in (None, dllm_models.default_proposal(cfg, m.task)):
        head = models.poke_head(name, proposal=spec)
        value_fn = poke.make_value_fn(*head, m.task.prompt_len, m.task.mask_id)
        v = np.asarray(value_fn(m.denoise_fn(tokens)[1], tokens))
        assert v.shape == (8,) and np.all(np.isfinite(v)) and np.all(v <= 0)
    assert not os.path.exists(tmp_path / "models")  # loaded, not trained


def test_every_full_preset_task_is_shipped():
    """A denoiser and a head on the study's untuned proposal for every task, so the quick
    presets train nothing."""
    cfg = dllm_config.get_config("full")
    for name in cfg.tasks:
        assert os.path.isdir(dllm_models.shipped_path(cfg, name)), name
        spec = dllm_models.default_proposal(cfg, dllm_models.make_task(cfg, name))
        assert dllm_models.shipped_head_path(cfg, name, spec), (name, spec)


def test_tuning_reads_only_validation_problems_and_freezes_the_argmax(monkeypatch):
    """``_tune`` with stubbed decoders (``comparison.run_builtin``): every grid entry is run
    on the validation problems (the "tuning" item keys) at ``protocol.tune_particles``, in
    the declared order (proposal, SR-SMC's temperature, the head on the chosen proposal,
    then per SMC family beta x ESS threshold, the resampler, POKE-SMC's twist scale and
    policy, and the selection, POKE-SMC's with the value rules); each argmax is frozen
    before the next stage and ties go to the first entry."""
    from jaxlab.dllm import comparison
    from jaxlab.dllm import tasks as tasks_lib

    cfg = dllm_config.get_config("smoke")
    cfg.particles = (2, 4)
    cfg.protocol.update(validation_problems=4, tune_particles=(2,),
                        particle_blocks=("one", "coarse"), position_temperatures=(),
                        temperatures=(1.0, 1.5), weight_scales=(1.0, 4.0), ess_thresholds=(),
                        schedules=(), selections=("path_ll", "weight"),
                        resamplers=("multinomial", "distinct"), twist_scales=(0.5, 2.0),
                        policies=("confidence", "value"), value_selections=("value", "mix"),
                        select_mixes=(0.25, 0.75))
    task = tasks_lib.make_task("addition", n_digits=3)
    assert decoding.coarse_block(task.answer_len) < task.answer_len
    val = np.asarray(jax.random.key_data(exp.item_keys(cfg, "tuning", 4)))
    calls = []

    def score(name, problem, kw):
        """Known accuracies: coarse blocks win the proposal; SR-SMC ties; Path-LL SMC picks
        beta 4, distinct, weight; POKE-SMC ties on beta (1), picks multinomial, twist 2 x
        beta, ties on the policy (confidence) and picks mix 0.25."""
        if name == "sr_smc":
            return 0.4
        coarse = problem.proposal.block_length < task.answer_len
        if name == "best_of_n":
            return 0.5 if coarse else 0.2
        if name == "path_smc" and problem.value_fn is None:  # the proposal stage
            return 0.5 if coarse else 0.2
        if name == "path_smc":
            return (0.2 + 0.4 * (kw["weight_scale"] == 4.0)
                    + 0.05 * (kw["resampler"] == "distinct") + 0.1 * (kw["select"] == "weight"))
        sel = {"path_ll": 0.0, "weight": 0.0, "value": 0.05,
               "mix": 0.2 if kw.get("select_mix") == 0.25 else 0.0}[kw["select"]]
        return (0.5 + 0.1 * (kw["resampler"] == "multinomial")
                + 0.1 * (kw.get("twist_multiple") == 2.0) + sel)

    def fake_run(name, items, problem, **kw):
        calls.append((name, items.split, np.asarray(jax.random.key_data(items.keys)),
                      problem.num_particles))
        return {"accuracy": np.full(items.index.size, score(name, problem, kw))}

    specs = []

    def head_fn(spec):
        specs.append(spec)
        return (lambda hidden, tokens: jax.numpy.zeros(tokens.shape[0]),
                lambda hidden, tokens: jax.numpy.zeros(tokens.shape))

    monkeypatch.setattr(comparison, "run_builtin", fake_run)
    den = lambda tok: (jax.numpy.zeros(tok.shape + (task.vocab_size,)),  # noqa: E731
                       jax.numpy.zeros(tok.shape + (2,)))
    out, value_fn, position_value_fn = exp._tune(cfg, task, den, head_fn)
    tuned = out["tuned"]
    assert out["grid"]["proposal"] == pytest.approx({"one, position_temperature 1": 0.2,
                                                     "coarse, position_temperature 1": 0.5})
    assert tuned["particle_blocks"] == "coarse" and tuned["sr_smc_temperature"] == 1.0
    assert {k: tuned["smc"][k] for k in ("weight_scale", "resampler", "select", "twist_scale",
                                         "policy")} == {
        "weight_scale": 4.0, "resampler": "distinct", "select": "weight", "twist_scale": None,
        "policy": "confidence"}
    assert {k: tuned["poke_smc"][k] for k in ("weight_scale", "resampler", "twist_scale",
                                              "policy", "select", "select_mix")} == {
        "weight_scale": 1.0, "resampler": "multinomial", "twist_scale": 2.0,
        "policy": "confidence", "select": "mix", "select_mix": 0.25}
    assert list(out["grid"]["select_poke_smc"]) == ["path_ll", "weight", "value", "mix 0.25",
                                                    "mix 0.75"]
    assert list(out["grid"]) == ["proposal", "sr_smc_temperature", "smc_settings_smc",
                                 "resampler_smc", "select_smc", "smc_settings_poke_smc",
                                 "resampler_poke_smc", "twist_poke_smc", "policy_poke_smc",
                                 "select_poke_smc"]
    # The head is trained once, on the proposal chosen in the first stage.
    assert len(specs) == 1 and specs[0] == out["proposal"]
    assert specs[0]["block_length"] == decoding.coarse_block(task.answer_len)
    assert value_fn is not None and position_value_fn is not None
    # Every run at N = 2; every tuning run on the validation problems (the comparison's
    # two test items of each phase are decoded but never read).
    tuning = [c for c in calls if c[1] == "tuning"]
    assert {c[3] for c in calls} == {2}
    assert all(np.array_equal(c[2], val) for c in tuning)
    assert [c[0] for c in tuning] == ["best_of_n", "path_smc"] * 2 + ["sr_smc"] * 2 + [
        "path_smc"] * 6 + ["poke_smc"] * 13
    # Kept steps (``study.Context.cached``): a validation run is labelled by its decoder
    # and every setting, so a setting met again in a later stage is not decoded again and
    # a resumed tuning decodes nothing.
    kept = {}

    def step(label, fn):
        if label not in kept:
            kept[label] = fn()
        return kept[label]

    calls.clear()
    first, _, _ = exp._tune(cfg, task, den, head_fn, step=step)
    assert len(calls) == len(kept) < 25 + 3 * 2
    runs = len(calls)
    again, _, _ = exp._tune(cfg, task, den, head_fn, step=step)
    assert len(calls) == runs and again == first == out


def _row(family, n, correct):
    correct = np.asarray(correct, bool)
    return {"family": family, "particles": n, "accuracy": float(correct.mean()),
            "_correct": correct}


def test_per_problem_accounting_and_goals_from_rows():
    """``_accounting`` and ``_goals`` on hand-made per-problem results: counts against the
    greedy the reference follows (``greedy_blocks`` when present), selection loss from the
    preconditions' pass@N, and the best rival taken over every best-of-N selector."""
    cfg = dllm_config.get_config("smoke")
    cfg.particles, cfg.bootstrap = (4,), 200
    rng = np.random.default_rng(0)
    g, gb = rng.random(200) < 0.4, rng.random(200) < 0.5
    poke_ok = gb | (rng.random(200) < 0.3)
    poke_ok[np.flatnonzero(gb)[:3]] = False  # three greedy-right / POKE-wrong problems
    bon_value = gb | (rng.random(200) < 0.1)
    rows = {"confidence": _row("greedy", 1, g), "greedy_blocks": _row("greedy", 1, gb),
            "best_of_4": _row("best_of_n", 4, gb),
            "best_of_4_value": _row("best_of_n", 4, bon_value),
            "sr_smc_4": _row("sr_smc", 4, rng.random(200) < 0.3),
            "smc_4": _row("smc", 4, gb), "poke_smc_4": _row("poke_smc", 4, poke_ok)}
    pre = {"4": {"pass_at_n": 0.9, "headroom": 0.3}}
    acct = exp._accounting(cfg, rows, pre)
    assert set(acct) == {"best_of_4", "best_of_4_value", "sr_smc_4", "smc_4", "poke_smc_4"}
    a = acct["poke_smc_4"]
    assert a["greedy"] == "greedy_blocks"
    assert a["greedy_right_decoder_wrong"] == int(np.sum(gb & ~poke_ok)) == 3
    assert a["decoder_right_greedy_wrong"] == int(np.sum(poke_ok & ~gb))
    assert a["selection_loss"] == pytest.approx(0.9 - poke_ok.mean())
    goal = exp._goals(cfg, rows, pre)["4"]
    rivals = ("confidence", "greedy_blocks", "best_of_4", "best_of_4_value", "sr_smc_4")
    best = max(rivals, key=lambda k: rows[k]["accuracy"])
    assert goal["best_rival"] == best
    assert goal["poke_minus_best_rival"] == pytest.approx(
        poke_ok.mean() - rows[best]["accuracy"])
    lo, hi = goal["poke_minus_best_rival_ci"]
    assert lo <= goal["poke_minus_best_rival"] <= hi
    assert goal["goal_met"] == (goal["poke_minus_best_rival"] >= 0.02 and lo > 0)
    assert goal["selection_loss_halved"] == (
        a["selection_loss"] <= acct["best_of_4"]["selection_loss"] / 2)
    assert goal["greedy_losses_quarter"] == (3 <= a["decoder_right_greedy_wrong"] / 4)


def test_weight_diagnostics_summarise_the_info_fields():
    """``_weight_diagnostics``: the minimum of distinct paths leaves out step 0 (all-mask
    particles), and the driver is the term with the larger variance on most steps."""
    distinct = np.array([[1, 4, 3, 2], [1, 2, 1, 1]])  # [problems, S]
    twist = np.array([[0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 1.0, 0.0]])
    ll = np.array([[0.0, 0.5, 0.5, 2.0], [0.0, 0.1, 0.1, 2.0]])
    diag = {"distinct_paths": distinct[..., None], "twist_increment_var": twist[..., None],
            "path_ll_increment_var": ll[..., None],
            "proposal_correction_var": np.zeros((2, 4, 1))}  # [problems, S, B = 1]
    d = exp._weight_diagnostics(diag, 4)["diagnostics"]
    assert d["mean_min_distinct_paths"] == pytest.approx((2 + 1) / 2)
    assert d["mean_distinct_paths"] == pytest.approx((4 + 3 + 2 + 2 + 1 + 1) / 6)
    assert d["one_path_share"] == pytest.approx(0.5)
    assert d["distinct_paths_trace"] == pytest.approx([1.0, 3.0, 2.0, 1.5])
    assert d["driver"] == "twist_increment"  # larger on steps 1 and 2, ll only on step 3
    assert exp._weight_diagnostics({}, 4) == {}


def test_study_rows_add_the_selector_and_blocked_greedy_rows():
    cfg = dllm_config.get_config("smoke")
    cfg.particles = (4,)
    names = exp.decoder_names(cfg)
    decs = dict.fromkeys([*names[:1], "greedy_blocks", *names[1:], "best_of_4_value"])
    assert exp.study_rows(cfg, decs) == list(decs)
    cfg.decoders = ("poke_smc",)
    assert exp.study_rows(cfg, decs) == ["poke_smc_4"]


def test_a_particle_run_reports_its_diagnostics_per_step():
    """``_run_decoder`` on a real Path-LL SMC decoder (a fixed random denoiser): one trace
    entry per unmasking step, distinct paths between 1 and N, the twist term zero without a
    head."""
    from jaxlab.dllm import tasks as tasks_lib

    cfg = dllm_config.get_config("smoke")
    cfg.particles, cfg.eval_batch = (2,), 4
    task = tasks_lib.make_task("addition", n_digits=3)
    table = jax.random.normal(jax.random.key(5), (task.vocab_size, task.vocab_size)) * 3

    def den(tok):
        return table[tok], jax.numpy.zeros(tok.shape + (2,))

    dec = exp.decoders(cfg, task, den, None, names=["smc_2"])["smc_2"]
    row = exp._run_decoder(cfg, task, "smc_2", dec, exp.item_keys(cfg, "test", 4))
    d = row["diagnostics"]
    assert len(d["distinct_paths_trace"]) == task.answer_len == len(row["ess_trace"])
    assert all(1 <= x <= 2 for x in d["distinct_paths_trace"])
    assert max(d["distinct_paths_trace"][1:]) > 1  # the particles' orders differ
    assert not any(d["weight_term_var_trace"]["twist_increment"])
    assert len(d["weight_term_var_trace"]["path_ll_increment"]) == task.answer_len
