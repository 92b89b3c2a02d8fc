"""``jaxlab.qlearning.compare``: the study binary's comparison is the public function's on the
same seeds, and the protocol's parts (per-seed runner, validation-only tuning, censoring at
the run length, argument errors) behave on a user-defined MDP."""

import json

import jax
import numpy as np
import pytest

from experiments import qlearning as qexp
from experiments.configs import qlearning as qcfg
from experiments.lib import registry
from jaxlab import qlearning as ql
from jaxlab.core import protocol

# A user's MDP (not a built-in family): 3 states, 2 actions.
P = np.array([[[0.8, 0.2, 0.0], [0.1, 0.1, 0.8]],
              [[0.3, 0.4, 0.3], [0.0, 0.9, 0.1]],
              [[0.5, 0.0, 0.5], [0.2, 0.2, 0.6]]])
R = np.array([[0.0, 1.0], [0.2, 0.0], [1.0, 0.3]])
N = 4  # tuning and test seeds: one compiled size


def _plain(d):
    return json.loads(json.dumps(d))


@pytest.mark.heavy
def test_binary_comparison_equals_the_public_compare(tmp_path):
    cfg = qcfg.get_config("smoke")
    cfg.families, cfg.variant_families = ("garnet",), ()
    summary = registry.train_and_evaluate("qlearning", cfg, str(tmp_path))
    fam = summary["families"][0]
    bases = [float(b) * cfg.scale.garnet for b in cfg.base_grid]
    contenders = {"theory": ql.growth_contender(2.0 / 3.0, bases),
                  "constant": ql.constant_contender(qexp.constant_grid(cfg, "garnet")),
                  "growth p=2": ql.growth_contender(2.0, bases)}
    assert list(fam["rows"][0]["comparison"]["contenders"]) == list(contenders)
    prob = ql.problem(qexp.build_mdp(cfg, "garnet"), eps_rel=tuple(cfg.eps_rel),
                      num_records=cfg.num_records, record_every=cfg.record_every,
                      sampling=cfg.sampling, inner_loop=cfg.inner_loop)
    for row, metric in zip(fam["rows"], prob.metric_names, strict=True):
        public = ql.compare(jax.random.key(cfg.seed), prob, contenders=contenders,
                            tuning=cfg.num_val_seeds, seeds=cfg.num_seeds, metrics=(metric,),
                            resamples=cfg.bootstrap_resamples, progress=False)
        got = _plain(qexp.comparison_dict(public))
        # the other thresholds of the same runs are declared metrics, not records
        assert "records" not in got
        assert got == _plain(row["comparison"])
        # the summary's picks are the comparison's
        assert row["best_constant_val"] == \
            f"constant K={public.contenders['constant'].params['period']}"
        assert row["theory"].endswith(f"K0={public.contenders['theory'].params['base']:g}")


@jax.jit
def _one_run(k, mdp, schedule, q_star, step_size):
    """One unbatched run of 10 records of 100 samples (trajectory sampling)."""
    return ql.simulate(ql.init(k, mdp), mdp, schedule, q_star, 10, 100, "trajectory",
                       step_size)[1]


def _reference_samples_to_eps(keys, mdp, schedule, q_star, eps, step_size):
    """One unbatched run per key, hitting time by a NumPy scan from the end."""
    out = []
    for k in keys:
        tr = _one_run(k, mdp, schedule, q_star, step_size)
        err, samples = np.asarray(tr.target_error), np.asarray(tr.samples)
        hit = np.inf
        for i in range(len(err) - 1, -1, -1):
            if err[i] > eps:
                break
            hit = float(samples[i])
        out.append(hit)
    return np.asarray(out)


@pytest.mark.heavy
def test_values_are_the_runs_on_the_item_keys_and_tuning_sees_only_tuning_seeds():
    mdp = ql.make_mdp(P, R, gamma=0.8)
    key = jax.random.key(3)
    prob = ql.problem(mdp, eps_rel=0.15, num_records=10, record_every=100)
    out = ql.compare(key, prob, contenders={"constant": ql.constant_contender((5, 20, 80))},
                     tuning=N, seeds=N, progress=False)
    r = out.contenders["constant"]
    k = r.params["period"]
    ref = _reference_samples_to_eps(protocol.item_keys(key, "test", np.arange(N)), mdp,
                                    ql.schedules.constant(k), prob.q_star, prob.eps[0],
                                    prob.step_size)
    np.testing.assert_array_equal(r.censored, np.isinf(ref))
    np.testing.assert_array_equal(r.values, np.where(np.isinf(ref), 1000.0, ref))
    # tuning rows: the mean over the tuning seeds (censored at the run length); the pick
    # is their argmin
    for params, score in r.tuning:
        v = _reference_samples_to_eps(protocol.item_keys(key, "tuning", np.arange(N)), mdp,
                                      ql.schedules.constant(params["period"]), prob.q_star,
                                      prob.eps[0], prob.step_size)
        assert score == pytest.approx(np.where(np.isinf(v), 1000.0, v).mean())
    assert k == min(r.tuning, key=lambda row: row[1])[0]["period"]
    assert out.censor_at == 1000.0 and not out.higher_is_better


@pytest.mark.heavy
def test_every_threshold_is_a_metric_of_the_same_runs_with_the_ratio():
    mdp = ql.make_mdp(P, R, gamma=0.8)
    key = jax.random.key(4)
    prob = ql.problem(mdp, eps_rel=(0.3, 0.15), num_records=10, record_every=100)
    out = ql.compare(key, prob, contenders={
        "theory": protocol.Builtin("theory", grid=[{"base": 2.0}]),
        "constant": protocol.Builtin("constant", grid=[{"period": 20}])},
        tuning=0, seeds=N, metrics=prob.metric_names, progress=False)
    assert out.metrics == prob.metric_names
    keys = protocol.item_keys(key, "test", np.arange(N))
    for metric, eps in zip(prob.metric_names, prob.eps, strict=True):
        means = {}
        for name, schedule in (("theory", ql.schedules.growth(float(mdp.gamma), 2 / 3, 2.0)),
                               ("constant", ql.schedules.constant(20))):
            ref = _reference_samples_to_eps(keys, mdp, schedule, prob.q_star, eps,
                                            prob.step_size)
            ref = np.where(np.isinf(ref), 1000.0, ref)
            np.testing.assert_array_equal(out[metric].contenders[name].values, ref)
            means[name] = ref.mean()
        d = out[metric].differences[0]
        assert d.ratio == pytest.approx(means["theory"] / means["constant"], rel=1e-12)
        assert d.ratio_low <= d.ratio <= d.ratio_high


def test_default_comparison_declares_theory_against_constant_and_censors():
    mdp = ql.make_mdp(P, R, gamma=0.8)
    # A budget far too short for eps = 1% of ||Q*||: every run is censored at 400 samples.
    prob = ql.problem(mdp, eps_rel=0.01, num_records=4, record_every=100)
    out = ql.compare(jax.random.key(0), prob, contenders={
        "theory": protocol.Builtin("theory", grid=[{"base": 2.0}]),
        "constant": protocol.Builtin("constant", grid=[{"period": 4}])},
        tuning=0, seeds=N, progress=False)
    assert list(out.contenders) == ["theory", "constant"]
    assert [(d.a, d.b) for d in out.differences] == [("theory", "constant")]
    assert [(g.goal.a, g.goal.b) for g in out.goals] == [("theory", "constant")]
    for r in out.contenders.values():
        assert r.censored.all() and (r.values == 400.0).all()
    assert not out.goals[0].met and out.differences[0].ties == N
    assert f"censored {N}/{N}" in out.table()


def test_a_goal_met_only_through_censored_constant_runs_is_marked_and_noted():
    mdp = ql.make_mdp(P, R, gamma=0.8)
    # A constant period longer than the run never updates the target (Q_target = 0 stays
    # ||Q*|| away): every constant run is censored, the theory runs reach eps.
    prob = ql.problem(mdp, eps_rel=0.5, num_records=10, record_every=100)
    with pytest.warns(RuntimeWarning, match="only through censored items"):
        out = ql.compare(jax.random.key(1), prob, contenders={
            "theory": protocol.Builtin("theory", grid=[{"base": 1.0}]),
            "constant": protocol.Builtin("constant", grid=[{"period": 5000}])},
            tuning=0, seeds=N, progress=False)
    assert out.contenders["constant"].censored.all()
    assert not out.contenders["theory"].censored.any()
    goal = out.goals[0]
    assert goal.met and goal.censored and "only through censored items" in goal.note
    assert goal.note in out.notes
    assert "met (a bound: censored items)" in out.table()
    assert f"censored {N}/{N}" in out.table()


@pytest.mark.parametrize("kwargs, error, match", [
    ({"contenders": ("theory", "greedy")}, ValueError, "contenders"),
    ({"contenders": "theory"}, TypeError, "contenders"),
    ({"contenders": ("growth p=-1",)}, ValueError, "contenders"),
    ({"metrics": ("samples to eps",)}, ValueError, "metrics"),
    ({"settings": {"eps_rel": 0.2}}, TypeError, "settings"),
])
def test_bad_arguments_name_themselves(kwargs, error, match):
    mdp = ql.make_mdp(P, R, gamma=0.8)
    with pytest.raises(error, match=match):
        ql.compare(jax.random.key(0), mdp, tuning=2, seeds=2, progress=False, **kwargs)


@pytest.mark.parametrize("build, match", [
    (lambda: ql.constant_contender((0,)), "periods"),
    (lambda: ql.growth_contender(bases=(0.5,)), "bases"),
    (lambda: ql.problem(ql.make_mdp(P, R, gamma=0.8), eps_rel=0.0), "eps_rel"),
    (lambda: ql.problem(ql.make_mdp(P, R, gamma=0.8), inner_loop="adam"), "inner_loop"),
])
def test_bad_parts_name_themselves(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_a_problem_carries_its_settings():
    mdp = ql.make_mdp(P, R, gamma=0.8)
    prob = ql.problem(mdp, eps_rel=(0.1, 0.05), num_records=4, record_every=10)
    with pytest.raises(TypeError, match="problem"):
        ql.compare(jax.random.key(0), (P, R), progress=False)
    with pytest.raises(ValueError, match="eps_rel"):
        ql.compare(jax.random.key(0), prob._replace(eps_rel=()), progress=False)
    assert prob.num_samples == 40
    scale = np.abs(np.asarray(ql.value_iteration(mdp))).max()
    np.testing.assert_allclose(prob.eps, (0.1 * scale, 0.05 * scale))
    assert prob.metric_names == (ql.metric_name(0.1), ql.metric_name(0.05))
