"""``jaxlab.bco.compare``: the study binary's tuned comparison is the public function's on the
same seeds, and the protocol's parts (per-seed runner, validation-only tuning, dynamic
regret, argument errors) behave on a user-defined loss sequence."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import bco as bexp
from experiments.configs import bco as bcfg
from jaxlab import bco
from jaxlab.core import protocol

N = 4  # tuning and test seeds: one compiled size
T, D = 60, 2


def _make_seq(key):
    """A user's family: f_t(x) = sqrt(1 + ||x - c_t||^2), c_t a slow circle plus
    heavy-tailed (Student-t) jitter; the per-round minimiser is c_t projected."""
    c = 0.4 * jnp.sin(jnp.arange(T)[:, None] / 15.0 + jnp.arange(D)) \
        + 0.05 * jax.random.t(key, 3.0, (T, D))
    return bco.loss_sequence(c, lambda c, x: jnp.sqrt(1 + jnp.sum((x - c) ** 2)),
                             minimiser=lambda c, dom: dom.project(c))


def _plain(d):
    return json.loads(json.dumps(d))


@pytest.mark.heavy
def test_binary_comparison_equals_the_public_compare():
    cfg = bcfg.get_config("smoke")
    cfg.dims = [2]
    unit = {u.name: u for u in bexp.EXPERIMENT.units(cfg, "/unused")}["vs_dim"]
    summary = bexp._summarize_vs_dim(cfg, np.asarray(unit.run(None), np.float32))
    quad = lambda k: bco.losses.stochastic_quadratic(k, cfg.num_rounds, 2, cfg.sigma)  # noqa: E731
    public = bco.compare(jax.random.key(cfg.seed),
                         bco.problem(quad, bco.ball(2), delta=cfg.delta), contenders={
                             "gradient_variation": bco.two_point_contender(True, cfg.step_grid),
                             "agarwal2010": bco.two_point_contender(False, cfg.step_grid),
                             "ogd_sqrt_d_step": "ogd_sqrt_d_step"},
                         tuning=cfg.num_val_seeds, seeds=cfg.num_seeds, progress=False)
    assert _plain(bexp.comparison_dict(public)) == _plain(summary["comparison"][0])
    assert summary["chosen_multiplier"][bexp.TUNED_ROWS[0]] == \
        [public.contenders["gradient_variation"].params["multiplier"]]
    d = public.differences[0]
    tuned = summary["paired_difference"]["tuned ours - tuned plain"]
    assert [tuned["mean"][0], tuned["low"][0], tuned["high"][0]] == [d.value, d.low, d.high]


@pytest.mark.heavy
def test_numerical_comparator_regret_is_the_loss_minus_the_best_fixed_point():
    """``comparator_iters``: final static regret against ``fixed_comparator_loss`` of the
    same sequence, for families without a closed-form comparator."""
    make = lambda k: bco.losses.stochastic_family(k, "huber", T, D, 0.3, param=0.2)  # noqa: E731
    prob = bco.problem(make, bco.ball(D), comparator_iters=30)
    keys = protocol.item_keys(jax.random.key(2), "test", np.arange(3))
    got = np.asarray(bco.final_regrets(keys, prob, [1.0, 0.25], [True, False]))
    for i, k in enumerate(keys):
        k_seq, k_run = jax.random.split(k)
        seq = make(k_seq)
        best = float(bco.losses.fixed_comparator_loss(seq, prob.domain, 30))
        for o, optimistic in enumerate((True, False)):
            for j, m in enumerate((1.0, 0.25)):
                rule = bco.step_rule(float(prob.domain.diameter) * m)
                learner = (bco.gradient_variation if optimistic else bco.agarwal2010)(
                    prob.domain, prob.delta, rule)
                loss = np.asarray(bco.run(k_run, learner, seq, prob.domain.center).loss,
                                  np.float64)
                np.testing.assert_allclose(got[o, j, i], loss.sum() - best, rtol=2e-4,
                                           atol=1e-3)


def _reference_final_regret(key, domain, multiplier, optimistic, dynamic):
    """One learner built by its public constructor, one run, regret by NumPy."""
    k_seq, k_run = jax.random.split(key)
    seq = _make_seq(k_seq)
    rule = bco.step_rule(float(domain.diameter) * multiplier)
    learner = (bco.gradient_variation if optimistic else bco.agarwal2010)(domain, 0.05, rule)
    info = bco.run(k_run, learner, seq, domain.center)
    if dynamic:
        best = np.asarray([np.sqrt(1.0) for _ in range(T)])  # c_t inside the ball: min is 1
        return float(np.sum(np.asarray(info.loss, np.float64) - best))
    return float(bco.regret(info, seq, domain)[-1])


@pytest.mark.heavy
def test_values_are_the_runs_on_the_item_keys_and_tuning_sees_only_tuning_seeds():
    key = jax.random.key(5)
    dom = bco.ball(D)
    grid = [{"multiplier": 1.0}, {"multiplier": 0.25}]
    out = bco.compare(key, bco.problem(_make_seq, dom, regret="dynamic"), contenders={
        "gradient_variation": protocol.Builtin("gradient_variation", grid=grid),
        "agarwal2010": protocol.Builtin("agarwal2010", grid=grid)},
        tuning=N, seeds=N, progress=False)
    for name, optimistic in (("gradient_variation", True), ("agarwal2010", False)):
        r = out.contenders[name]
        m = r.params["multiplier"]
        ref = [_reference_final_regret(k, dom, m, optimistic, True)
               for k in protocol.item_keys(key, "test", np.arange(N))]
        np.testing.assert_allclose(r.values, ref, rtol=2e-4, atol=1e-3)
        for params, score in r.tuning:
            v = [_reference_final_regret(k, dom, params["multiplier"], optimistic, True)
                 for k in protocol.item_keys(key, "tuning", np.arange(N))]
            assert score == pytest.approx(np.mean(v), rel=2e-4, abs=1e-3)
        assert m == min(r.tuning, key=lambda row: row[1])[0]["multiplier"]
    assert [(d.a, d.b) for d in out.differences] == [("gradient_variation", "agarwal2010")]
    assert [(g.goal.a, g.goal.b) for g in out.goals] == [("gradient_variation", "agarwal2010")]
    assert out.metric == "final dynamic regret" and not out.higher_is_better


@pytest.mark.parametrize("kwargs, error, match", [
    ({"contenders": ("gradient_variation", "adam")}, ValueError, "contenders"),
    ({"contenders": "agarwal2010"}, TypeError, "contenders"),
    ({"contenders": {"agarwal2010": protocol.Builtin(
        "agarwal2010", grid=[{"step": 1.0}])}}, ValueError, "contenders"),
    ({"settings": {"delta": 0.1}}, TypeError, "settings"),
    ({"metrics": ("final regret",)}, ValueError, "metrics"),
])
def test_bad_arguments_name_themselves(kwargs, error, match):
    args = {"tuning": 2, "seeds": 2, "progress": False, **kwargs}
    with pytest.raises(error, match=match):
        bco.compare(jax.random.key(0), bco.problem(_make_seq, bco.ball(D)), **args)


@pytest.mark.parametrize("build, match", [
    (lambda: bco.two_point_contender(True, (0.0,)), "multipliers"),
    (lambda: bco.problem(_make_seq, bco.ball(D), delta=2.0), "delta"),
    (lambda: bco.problem(_make_seq, bco.ball(D), regret="adaptive"), "regret"),
    (lambda: bco.problem(_make_seq, None), "domain"),
    (lambda: bco.problem(_make_seq, bco.ball(D), regret="dynamic", comparator_iters=5),
     "comparator_iters"),
])
def test_bad_parts_name_themselves(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_a_problem_carries_its_settings():
    prob = bco.problem(_make_seq, bco.ball(D), delta=0.1, regret="dynamic")
    assert prob.metric_name == "final dynamic regret"
    with pytest.raises(TypeError, match="problem"):
        bco.compare(jax.random.key(0), _make_seq, progress=False)
    with pytest.raises(ValueError, match="delta"):
        bco.compare(jax.random.key(0), prob._replace(delta=5.0), progress=False)
    with pytest.raises(TypeError, match="problem"):
        bco.compare(jax.random.key(0), "quadratics", progress=False)
    with pytest.raises(TypeError, match="make_seq"):
        bco.problem(3, bco.ball(D))
