"""The comparison protocol (``jaxlab.core.protocol``): tuning sees only tuning items, the test
items are paired, the CIs are ``metrics.bootstrap_ci``'s, censoring and goals behave as
declared."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.core import metrics, protocol
from jaxlab.core.protocol import Contender, Goal, Metric, Tuning

K = jax.random.key


def _noisy(offset):
    """A contender whose item value is offset + a standard normal of the item's key."""
    def run(items, problem, *, shift=0.0):
        noise = jax.vmap(lambda k: jax.random.normal(k))(items.keys)
        return np.asarray(noise) + offset + problem * shift
    return run


def test_item_keys_are_disjoint_between_splits_and_fixed_by_index():
    key = jax.random.key(0)
    a = protocol.item_keys(key, "tuning", np.arange(4))
    b = protocol.item_keys(key, "test", np.arange(4))
    data = lambda k: np.asarray(jax.random.key_data(k)).tolist()
    assert not set(map(tuple, data(a))) & set(map(tuple, data(b)))
    np.testing.assert_array_equal(data(protocol.item_keys(key, "test", np.array([2])))[0],
                                  data(b)[2])


def test_tuning_uses_only_tuning_items_and_picks_the_best_point():
    seen = []

    def run(items, problem, *, shift):
        seen.append((items.split, shift, tuple(items.index)))
        return np.full(items.index.size, -abs(shift - 2.0))

    out = protocol.compare(K(0), None, contenders={"a": Contender(run, ({"shift": 0.0},
                                                                     {"shift": 2.0},
                                                                     {"shift": 5.0})),
                                                "b": Contender(lambda i, p: np.zeros(
                                                    i.index.size))},
                           tuning=Tuning(3), seeds=4, progress=False)
    assert out.contenders["a"].params == {"shift": 2.0}
    assert [s for s, _, _ in seen] == ["tuning"] * 3 + ["test"]
    assert seen[-1] == ("test", 2.0, (0, 1, 2, 3))
    assert [p["shift"] for p, _ in out.contenders["a"].tuning] == [0.0, 2.0, 5.0]
    assert out.contenders["b"].tuning == ()


def test_lower_is_better_tuning_keeps_the_smallest():
    run = lambda items, problem, *, x: np.full(items.index.size, float(x))
    out = protocol.compare(K(1), None, contenders={"a": Contender(run, ({"x": 3}, {"x": 1},
                                                                     {"x": 2}))},
                           tuning=2, seeds=2, metrics=(Metric("x", higher_is_better=False),),
                           progress=False)
    assert out.contenders["a"].params == {"x": 1}


def test_difference_and_ci_equal_the_bootstrap_of_the_paired_differences():
    key = jax.random.key(3)
    out = protocol.compare(key, 1.0, contenders={"good": Contender(_noisy(0.5)),
                                                 "base": Contender(_noisy(0.0))},
                           tuning=0, seeds=40, resamples=500, progress=False)
    a, b = out.contenders["good"].values, out.contenders["base"].values
    d = out.differences[0]
    assert (d.a, d.b) == ("good", "base")
    # same item keys -> the same noise: the paired difference is exactly the offset
    np.testing.assert_allclose(a - b, 0.5, atol=1e-6)
    point, lo, hi = metrics.bootstrap_ci(jax.random.fold_in(key, 2),
                                         lambda x, y: np.mean(x - y), (a, b), 500)
    np.testing.assert_allclose([d.value, d.low, d.high], [point, lo, hi], rtol=1e-12)
    assert (d.wins, d.losses, d.ties) == (40, 0, 0)
    _, lo_a, hi_a = metrics.bootstrap_ci(jax.random.fold_in(key, 2), np.mean, (a,), 500)
    np.testing.assert_allclose([out.contenders["good"].low, out.contenders["good"].high],
                               [lo_a, hi_a], rtol=1e-12)


def test_goal_is_met_only_when_the_ci_clears_the_margin():
    out = protocol.compare(K(0), 1.0, contenders={"good": Contender(_noisy(0.5)),
                                               "base": Contender(_noisy(0.0))},
                           tuning=0, seeds=10, goals=[Goal("good", "base", 0.4),
                                                      Goal("good", "base", 0.6),
                                                      Goal("base", "good")],
                           progress=False)
    assert [g.met for g in out.goals] == [True, False, False]
    # lower-is-better flips the orientation
    low = protocol.compare(K(0), 1.0, contenders={"good": Contender(_noisy(-0.5)),
                                               "base": Contender(_noisy(0.0))},
                           tuning=0, seeds=10, goals=[Goal("good", "base", 0.4)],
                           metrics=(Metric("x", higher_is_better=False),), progress=False)
    assert low.goals[0].met and low.goals[0].difference == pytest.approx(0.5)
    assert low.differences[0].wins == 10


def test_censored_items_count_as_censor_at_and_are_reported():
    def run(items, problem):
        v = items.index.astype(float) + 1.0
        return np.where(items.index % 2 == 0, np.inf, v)

    with pytest.raises(ValueError, match="censor_at"):
        protocol.compare(K(0), None, contenders={"a": Contender(run)}, tuning=0, seeds=4,
                         metrics=(Metric("x", higher_is_better=False),), progress=False)
    out = protocol.compare(K(0), None, contenders={"a": Contender(run)}, tuning=0, seeds=4,
                           metrics=(Metric("x", False, censor_at=10.0),), progress=False)
    r = out.contenders["a"]
    np.testing.assert_array_equal(r.values, [10.0, 2.0, 10.0, 4.0])
    np.testing.assert_array_equal(r.censored, [True, False, True, False])
    assert r.statistic == pytest.approx(6.5)
    assert "censored 2/4" in out.table()


def test_custom_statistic_sees_the_resampled_item_indices():
    labels = np.array([0, 1] * 10)

    def scores(items, problem):
        return labels[items.index] + 0.01 * items.index  # separable

    out = protocol.compare(K(0), None, contenders={"s": Contender(scores),
                                                "r": Contender(lambda i, p: -scores(i, p))},
                           tuning=0, seeds=20, resamples=200, progress=False,
                           metrics=(Metric("AUROC", statistic=lambda v, idx: float(
                               metrics.auroc(v, labels[idx]))),))
    assert out.contenders["s"].statistic == 1.0
    assert out.contenders["r"].statistic == 0.0
    assert out.differences[0].value == 1.0


def test_results_written_per_chunk_and_progress_reported(tmp_path):
    calls = []
    path = tmp_path / "items.jsonl"
    out = protocol.compare(K(0), 1.0, contenders={"a": Contender(_noisy(0.0))}, tuning=0,
                           seeds=5, batch=2, results_path=path,
                           progress=lambda d, t, desc: calls.append((d, t, desc)))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["start"]["contenders"] == ["a"] and {r["run"] for r in lines} == {
        out.run_id}
    assert [r["index"] for r in lines[1:]] == [[0, 1], [2, 3], [4]]
    np.testing.assert_allclose(sum((r["values"]["value"] for r in lines[1:]), []),
                               out.contenders["a"].values)
    assert [(d, t) for d, t, _ in calls] == [(2, 5), (4, 5), (5, 5)]
    assert json.loads(json.dumps(out.to_dict()))["contenders"]["a"]["statistic"] == \
        out.contenders["a"].statistic


def test_compile_seconds_are_apart_from_run_seconds():
    @jax.jit
    def f(k):
        return jnp.sum(jnp.sin(jax.random.normal(k, (64, 64)) @ jnp.ones((64, 64))))

    run = lambda items, problem: np.asarray(jax.vmap(f)(items.keys))
    out = protocol.compare(K(0), None, contenders={"a": Contender(run)}, tuning=0, seeds=3,
                           progress=False)
    assert out.contenders["a"].compile_s > 0.0
    assert out.contenders["a"].run_s >= 0.0


@pytest.mark.parametrize("kwargs, match", [
    ({"contenders": {}}, "contenders"),
    ({"contenders": {"a": (lambda i, p: 0)}}, "contenders\\['a'\\]"),
    ({"contenders": {"a": Contender(lambda i, p: 0, ())}}, "grid"),
    ({"contenders": {"a": Contender(lambda i, p, x: 0, ({"x": 1}, {"x": 2}))}},
     "tuning"),
    ({"seeds": 1}, "seeds"),
    ({"tuning": -1}, "tuning"),
    ({"batch": 0}, "batch"),
    ({"metrics": (Metric("x", censor_at=float("inf")),)}, "censor_at"),
    ({"contenders": {"a": Contender(lambda i, p: np.zeros(3))}}, "shape"),
    ({"contenders": {"a": Contender(lambda i, p: np.full(i.index.size, np.nan))}}, "NaN"),
    ({"goals": [Goal("a", "zz")]}, "goals"),
    ({"pairs": [("a", "zz")]}, "pairs"),
    ({"progress": "yes"}, "progress"),
])
def test_bad_calls_name_the_argument(kwargs, match):
    args = {"contenders": {"a": Contender(lambda i, p: np.zeros(i.index.size)),
                           "b": Contender(lambda i, p: np.ones(i.index.size))},
            "tuning": 0, "seeds": 4, "progress": False, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        protocol.compare(K(0), None, **args)


def test_paired_difference_matches_analyse():
    a, b = np.arange(6.0), np.array([0, 2, 1, 3, 5, 4.0])
    d = protocol.paired_difference(jax.random.key(7), a, b, names=("x", "y"), resamples=300)
    c = protocol.analyse(jax.random.key(7), {"x": a, "y": b}, resamples=300)
    assert d == c.differences[0]
    assert (d.wins, d.losses, d.ties) == (2, 2, 2)


def test_as_tuning_takes_a_count_or_a_tuning_and_names_the_argument():
    assert protocol.as_tuning(3) == Tuning(3) == protocol.as_tuning(Tuning(3))
    assert protocol.as_tuning(np.int64(2)).items == 2
    with pytest.raises(TypeError, match="tuning"):
        protocol.as_tuning(2.5)
    with pytest.raises(ValueError, match="tuning.items"):
        protocol.as_tuning(Tuning(-1))
