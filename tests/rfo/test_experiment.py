"""The RFO study at smoke size: results on disk, equal env-step budgets, unit reuse."""

import json
import os

import numpy as np
import pytest

pytest.importorskip("brax")

from experiments import rfo as experiment  # noqa: E402
from experiments.configs import rfo as rfo_cfg  # noqa: E402
from experiments.lib import provenance, study  # noqa: E402
from tests.notebooks import run_notebook  # noqa: E402


class WouldTrain(Exception):
    pass


def _would_train(*a, **k):
    raise WouldTrain


def _with(cfg, **overrides):
    out = cfg.copy_and_resolve_references()
    for k, v in overrides.items():
        node = out
        *path, leaf = k.split(".")
        for p in path:
            node = node[p]
        node[leaf] = v
    return out


def _run_unit(cfg, workdir, name):
    units = [u for u in experiment.EXPERIMENT.units(cfg, str(workdir)) if u.name == name]
    return study.run_units(units, cfg, str(workdir))[name]


# The notebook at smoke size: 140 s at -n 2, so -m slow; the suite's quick run (the README's
# main command) runs the binary.
@pytest.mark.slow
def test_smoke_study_writes_results_and_reuses_finished_units(tmp_path, monkeypatch):
    cfg = rfo_cfg.get_config("smoke")
    cfg.methods = ("rfo_chunked", "ppo")
    s1, _ = run_notebook("rfo", tmp_path, {"methods": cfg.methods})  # colab/rfo.ipynb
    assert os.path.getsize(tmp_path / "return_vs_env_steps.png") > 1000
    with open(tmp_path / "summary.json") as f:
        on_disk = json.load(f)
    final = on_disk["final_eval_return"]["pendulum"]
    assert set(final) == {"rfo_chunked", "ppo"}
    assert final["rfo_chunked"]["env_steps"] == final["ppo"]["env_steps"] == cfg.env_steps
    assert all(v["ci95"] >= 0 and v["nonfinite_grad_updates"] >= 0 for v in final.values())
    gn = on_disk["grad_norm"]["pendulum"]
    assert set(gn) == {"rfo_chunked", "ppo"}
    assert all(0 < v["q10"] <= v["median"] <= v["q90"] for v in gn.values())
    tp = on_disk["throughput"]["env_steps_per_s"]
    assert set(tp) == {"mjx", "generalized"}
    for by_mode in tp.values():
        assert set(by_mode) == {"forward", "forward+backward"}
        assert all(set(r) == {"1", "8"} and min(r.values()) > 0 for r in by_mode.values())
    horizon, spreads = on_disk["throughput"]["horizon"], on_disk["throughput"]["spread_s"]
    for backend, by_mode in tp.items():  # rates are of the best timed run, with its spread
        for mode, rates in by_mode.items():
            for b, rate in rates.items():
                s = spreads[backend][mode][b]
                assert rate == pytest.approx(int(b) * horizon / s["min"])
                assert s["q75"] >= s["q25"] >= s["min"] > 0
    # evaluation every eval_every-th update: 4 updates in 2 chunks of 2 -> every 2nd
    [path] = [u for u in os.listdir(tmp_path / "units") if u.startswith("pendulum_ppo-")]
    unit = study.load_result(str(tmp_path / "units" / path))
    assert unit["eval_every"] == 2 and len(unit["eval_env_steps"]) == 2
    np.testing.assert_array_equal(unit["eval_env_steps"], unit["env_steps"][1::2])
    assert np.asarray(unit["eval_return"]).shape == (cfg.num_seeds, 2)
    assert np.all(np.isfinite(unit["eval_return"]))
    names = dict(experiment.headline(s1))
    assert any("pendulum" in k for k in names)
    units = sorted(os.listdir(tmp_path / "units"))
    assert [u.split("-")[0] for u in units] == ["pendulum_ppo", "pendulum_rfo_chunked",
                                                "throughput"]
    assert not os.path.exists(tmp_path / "runs")

    # A rerun reads every finished unit and trains nothing.
    monkeypatch.setattr(experiment, "run_method", _would_train)
    monkeypatch.setattr(experiment, "rollout_throughput", _would_train)
    monkeypatch.setattr(study, "run_resumable", _would_train)
    s2 = study.train_and_evaluate(experiment.EXPERIMENT, cfg, str(tmp_path))
    assert s2["final_eval_return"] == s1["final_eval_return"]
    assert s2["throughput"] == s1["throughput"]

    # The unit key is the method's spec: a setting PPO does not read keeps its unit...
    _run_unit(_with(cfg, **{"rfo.stability_coef": 0.5, "throughput.horizon": 8}), tmp_path,
              "pendulum_ppo")
    _run_unit(cfg, tmp_path, "pendulum_ppo")
    # ...one it does read (the audit's case: more seeds), or changed code, trains anew.
    with pytest.raises(WouldTrain):
        _run_unit(_with(cfg, num_seeds=cfg.num_seeds + 1), tmp_path, "pendulum_ppo")
    with pytest.raises(WouldTrain):
        _run_unit(_with(cfg, **{"rfo.stability_coef": 0.5}), tmp_path, "pendulum_rfo_chunked")
    monkeypatch.setattr(provenance, "code_version", lambda: "0.0.0+src.changed")
    with pytest.raises(WouldTrain):
        _run_unit(cfg, tmp_path, "pendulum_ppo")


def test_unknown_method_raises(tmp_path):
    cfg = rfo_cfg.get_config("smoke")
    cfg.methods = ("sac",)
    with pytest.raises(ValueError, match="unknown method"):
        study.train_and_evaluate(experiment.EXPERIMENT, cfg, str(tmp_path))


def test_seed_keys_differ_per_seed_and_task_and_ignore_task_order():
    import jax
    import numpy as np

    cfg = rfo_cfg.get_config("smoke")
    data = lambda c, t: np.asarray(jax.random.key_data(experiment.seed_keys(c, t)))  # noqa: E731
    k = data(cfg, "pendulum")
    assert k.shape[0] == cfg.num_seeds and len({tuple(r) for r in k}) == cfg.num_seeds
    assert not np.array_equal(k, data(cfg, "hopper"))
    np.testing.assert_array_equal(k, data(_with(cfg, tasks=("hopper", "pendulum")),
                                          "pendulum"))
    assert not np.array_equal(k, data(_with(cfg, seed=1), "pendulum"))


def test_methods_are_named_for_what_they_run():
    """#18: ablations switch the regularisers; `apg` is brax's critic-free APG;
    `shac_gaussian` (the old "apg") keeps the SHAC critic."""
    cfg = rfo_cfg.get_config("cpu_ablation")
    rfo_cfg.validate_config(cfg)
    assert set(cfg.methods) >= {"rfo_none", "rfo_stability", "rfo_exploration", "rfo",
                                "shac_gaussian", "apg"}
    coefs = {m: (experiment.method_config(cfg, "pendulum", m)[0].stability_coef,
                 experiment.method_config(cfg, "pendulum", m)[0].exploration_coef)
             for m in ("rfo_none", "rfo_stability", "rfo_exploration", "rfo")}
    s, e = cfg.rfo.stability_coef, cfg.rfo.exploration_coef
    assert s > 0 and e > 0
    assert coefs == {"rfo_none": (0.0, 0.0), "rfo_stability": (s, 0.0),
                     "rfo_exploration": (0.0, e), "rfo": (s, e)}
    apg, steps = experiment.method_config(cfg, "pendulum", "apg")
    assert (apg.policy, apg.critic, apg.episode_length, apg.grad_clip_mode) == (
        "gaussian", False, 0, "elementwise")
    assert apg.horizon == cfg.common.episode_length and apg.lr_decay < 1.0
    assert steps * apg.num_updates <= cfg.env_steps
    shac, _ = experiment.method_config(cfg, "pendulum", "shac_gaussian")
    assert (shac.policy, shac.critic, shac.grad_clip_mode) == ("gaussian", True, "global_norm")
    with pytest.raises(ValueError, match="rfo.buffer_size"):
        rfo_cfg.validate_config(_with(cfg, **{"rfo.buffer_size": 0}))
    with pytest.raises(ValueError, match="apg.lr_decay"):
        rfo_cfg.validate_config(_with(cfg, **{"apg.lr_decay": 1.5}))


def test_the_quick_preset_holds_rfo_the_rival_of_every_declared_ratio_and_ppo():
    cfg = rfo_cfg.get_config("quick")
    rfo_cfg.validate_config(cfg)
    assert "rfo" in cfg.methods and "ppo" in cfg.methods and not cfg.throughput.task
    assert all(a in cfg.methods and b in cfg.methods for a, b in experiment.DECLARED_RATIOS)
    assert [p for p in experiment.DECLARED if set(p) <= set(cfg.methods)]


def test_eval_every_is_the_largest_divisor_of_the_updates_per_chunk():
    cfg = rfo_cfg.get_config("quick")
    for method in ("rfo", "apg", "ppo"):
        mc, _ = experiment.method_config(cfg, "pendulum", method)
        _, per_chunk = experiment._chunking(cfg, mc)
        every = experiment.eval_every(cfg, mc)
        assert per_chunk % every == 0 and every <= cfg.eval_every
        assert not any(per_chunk % e == 0 for e in range(every + 1, cfg.eval_every + 1))
    mc, _ = experiment.method_config(cfg, "pendulum", "rfo")  # 48 updates, 12 per chunk
    assert experiment.eval_every(cfg, mc) == 6
    assert experiment.eval_every(_with(cfg, eval_every=1), mc) == 1
    for bad in (0, -2):  # (ml_collections itself refuses a float for this int field)
        with pytest.raises(ValueError, match="eval_every"):
            rfo_cfg.validate_config(_with(cfg, eval_every=bad))


def test_declared_paired_differences_are_per_seed_differences_of_final_returns():
    """The summary's paired comparisons (declared in experiment.DECLARED) against numpy:
    per seed, the mean of the last 10% of eval returns (or of all of them: the AUC),
    differenced, then the percentile bootstrap of ``metrics.bootstrap_ci`` with the key
    ``rfo.compare`` uses (``fold_in(task_key, 2)``)."""
    import jax

    from jaxlab.core import metrics

    cfg = rfo_cfg.get_config("cpu_ablation")
    rng = np.random.default_rng(0)
    out = {f"pendulum_{m}": {"eval_return": rng.normal(size=(5, 20)) + i,
                             "env_steps": np.arange(1, 21) * 512, "wall_s": 1.0,
                             "nonfinite_grad_updates": np.zeros(20)}
           for i, m in enumerate(cfg.methods)}
    s = experiment._summarize(cfg, out)
    key = jax.random.fold_in(experiment.task_key(cfg, "pendulum"), 2)
    for metric, per_seed in (("final_return", lambda ev: ev[:, -2:].mean(1)),
                             ("auc", lambda ev: ev.mean(1))):
        got = s["comparison"]["pendulum"][metric]
        assert got["test_items"] == 5 and got["metric"] == metric
        diffs = {(d["a"], d["b"]): d for d in got["differences"]}
        assert set(diffs) == {("rfo", m) for m in cfg.methods if m != "rfo"}
        for m in cfg.methods:
            if m == "rfo":
                continue
            a = per_seed(out["pendulum_rfo"]["eval_return"])
            b = per_seed(out[f"pendulum_{m}"]["eval_return"])
            point, lo, hi = metrics.bootstrap_ci(key, lambda x, y: np.mean(x - y), (a, b),
                                                 2000)
            d = diffs[("rfo", m)]
            np.testing.assert_allclose([d["value"], *d["ci"]], [point, lo, hi], rtol=1e-10)
            assert d["wins"] + d["losses"] + d["ties"] == 5
        assert "compile_s" not in got["contenders"]["rfo"]
    rows = dict(experiment.headline(s))
    assert "rfo - rfo_none" in rows["pendulum: declared paired differences of final eval "
                                    "return (5 seeds, paired bootstrap 95% CI)"]
    assert "rfo - apg" in rows["pendulum: declared paired differences of eval-return AUC "
                               "(5 seeds, paired bootstrap 95% CI)"]


def test_soft_study_is_declared_with_equal_budgets_and_paired_seeds():
    """The soft-body presets: RFO with the regularisers on and off, SHAC-Gaussian, APG and
    PPO on ``soft_quadruped`` only, >= 5 seeds in the study, the same env-step budget per
    method (within one update), no MJX throughput unit."""
    for arg, min_seeds in (("soft_study", 5), ("soft_smoke", 2)):
        cfg = rfo_cfg.get_config(arg)
        rfo_cfg.validate_config(cfg)
        assert tuple(cfg.tasks) == ("soft_quadruped",) and cfg.throughput.task == ""
        assert {"rfo", "rfo_none", "shac_gaussian", "apg", "ppo"} == set(cfg.methods)
        assert cfg.num_seeds >= min_seeds
        used = {}
        for m in cfg.methods:
            mc, per_update = experiment.method_config(cfg, "soft_quadruped", m)
            used[m] = mc.num_updates * per_update
            if m == "rfo":
                assert mc.stability_coef > 0 and mc.exploration_coef > 0
            if m == "rfo_none":
                assert mc.stability_coef == 0 and mc.exploration_coef == 0
        assert set(used.values()) == {cfg.env_steps}, used
    other_seeds = {rfo_cfg.get_config(a).seed for a in ("smoke", "quick", "cpu_long", "full")}
    assert rfo_cfg.get_config("soft_study").seed not in other_seeds


def test_paired_ratio_of_mean_final_returns():
    """``paired_ratio``: the ratio of means; an exact multiple has a zero-width CI; the CI is
    the percentile interval of the resampled ratios of means over the draws of
    ``metrics.bootstrap_indices`` (numpy); undefined when the rival's mean can reach 0; the
    summary reports RFO / SHAC-Gaussian with the paper's value and the comparison's key."""
    import jax

    from jaxlab.core import metrics

    key = jax.random.key(3)
    rng = np.random.default_rng(1)
    b = 10 + rng.normal(size=6)
    r = experiment.paired_ratio(key, 2 * b, b)
    np.testing.assert_allclose([r["ratio"], r["ci_low"], r["ci_high"]], 2.0, rtol=1e-12)
    a = 2 * b + 3.0 * rng.normal(size=6)
    r = experiment.paired_ratio(key, a, b, resamples=500)
    idx = np.asarray(metrics.bootstrap_indices(key, 6, 500))
    want = np.percentile(a[idx].mean(1) / b[idx].mean(1), [2.5, 97.5])
    np.testing.assert_allclose([r["ci_low"], r["ci_high"]], want, rtol=1e-12)
    assert r["defined"] and r["ci_low"] < r["ratio"] < r["ci_high"]
    assert r["ratio"] == pytest.approx(a.mean() / b.mean(), rel=1e-14)
    straddle = experiment.paired_ratio(key, b, np.array([-1.0, 2.0, -3.0, 4.0, 0.5, -0.5]))
    assert not straddle["defined"] and np.isnan(straddle["ci_low"])
    with pytest.raises(ValueError, match="paired"):
        experiment.paired_ratio(key, b, b[:3])
    cfg = rfo_cfg.get_config("soft_study")
    out = {f"soft_quadruped_{m}": {"eval_return": rng.normal(size=(5, 20)) + 5 + i,
                                   "env_steps": np.arange(1, 21) * 1024, "wall_s": 1.0,
                                   "nonfinite_grad_updates": np.zeros(20),
                                   "grad_norm": np.full((5, 20), 0.5 + i)}
           for i, m in enumerate(cfg.methods)}
    s = experiment._summarize(cfg, out)
    got = s["ratio_final_eval_return"]["soft_quadruped"]["rfo / shac_gaussian"]
    final = {m: out[f"soft_quadruped_{m}"]["eval_return"][:, -2:].mean(1)
             for m in ("rfo", "shac_gaussian")}
    assert got["ratio"] == pytest.approx(final["rfo"].mean() / final["shac_gaussian"].mean())
    assert got["paper"] == 2.0 and got["seeds"] == 5
    same_draws = experiment.paired_ratio(experiment.bootstrap_key(cfg, "soft_quadruped"),
                                         final["rfo"], final["shac_gaussian"])
    assert (got["ci_low"], got["ci_high"]) == (same_draws["ci_low"], same_draws["ci_high"])
    rows = dict(experiment.headline(s))
    key = ("soft_quadruped: declared ratio of mean final eval returns rfo / shac_gaussian "
           "(5 seeds, paired-bootstrap 95% CI)")
    assert rows[key].endswith("paper ~2x")
    gn_row = rows["soft_quadruped: pre-clip policy gradient norm per update, median (first / "
                  "last quarter of updates; mean per-seed std of log10 norms)"]
    for i, m in enumerate(cfg.methods):  # constant norms: every quantile is the norm
        g = f"{0.5 + i:.3g}"
        assert f"{m} {g} ({g} / {g}; 0.00)" in gn_row


def test_grad_norm_stats_against_numpy():
    """``grad_norm_stats`` on hand-made norms: quantiles over finite entries, the first and
    last quarter's medians, the per-seed spread of log10 norms, the non-finite share."""
    g = np.array([[1.0, 10.0, 100.0, 1000.0, 1.0, 10.0, 100.0, 1000.0],
                  [2.0, 2.0, np.nan, 2.0, 2.0, 2.0, 2.0, np.inf]])
    s = experiment.grad_norm_stats(g)
    fin = g[np.isfinite(g)]
    assert s["median"] == pytest.approx(np.median(fin))
    assert s["q10"] == pytest.approx(np.quantile(fin, 0.1))
    assert s["q90"] == pytest.approx(np.quantile(fin, 0.9))
    assert s["early_median"] == pytest.approx(np.median([1.0, 10.0, 2.0, 2.0]))
    assert s["late_median"] == pytest.approx(np.median([100.0, 1000.0, 2.0]))
    assert s["log10_spread"] == pytest.approx((np.std([0, 1, 2, 3] * 2) + 0.0) / 2)
    assert s["nonfinite_share"] == pytest.approx(2 / 16)
    with pytest.raises(ValueError, match="grad_norm"):
        experiment.grad_norm_stats(np.ones(4))
