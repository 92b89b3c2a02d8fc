"""The one comparison contract (``jaxlab.core.protocol``): staged tuning, several metrics and
records from one run, and what is refused, warned about or marked."""

import json
import math
import warnings

import jax
import numpy as np
import pytest

from jaxlab.core import protocol
from jaxlab.core.protocol import Builtin, Contender, Goal, Metric, Spec, Stages

K = jax.random.key


def _const(value):
    return lambda items, problem, **_: np.full(items.index.size, float(value))


def test_stages_freeze_each_pick_before_the_next_stage():
    seen = []

    def run(items, problem, *, a, b):
        seen.append((a, b))
        # the first stage prefers a=2 whatever b is; the second then prefers b=1 given a=2
        return np.full(items.index.size, -abs(a - 2) + (1.0 if (a, b) == (2, 1) else 0.0))

    grid = Stages((({"a": 1, "b": 0}, {"a": 2, "b": 0}, {"a": 3, "b": 0}),
                   ({"b": 0}, {"b": 1})))
    out = protocol.compare(K(0), None, contenders={"x": Contender(run, grid)}, tuning=2,
                           seeds=2, progress=False)
    r = out.contenders["x"]
    assert r.params == {"a": 2, "b": 1}
    assert r.stages == (3, 2)
    assert seen[:5] == [(1, 0), (2, 0), (3, 0), (2, 0), (2, 1)]
    assert seen[5:] == [(2, 1)]  # the test run


def test_a_nan_point_never_wins_and_an_all_nan_grid_is_an_error():
    def run(items, problem, *, x):
        return np.full(items.index.size, np.nan if x == 0 else float(x))

    with pytest.warns(RuntimeWarning, match="NaN tuning statistic"):
        out = protocol.compare(K(0), None, contenders={"c": Contender(run, ({"x": 0},
                                                                        {"x": 1}))},
                               tuning=2, seeds=2, progress=False)
    assert out.contenders["c"].params == {"x": 1}
    assert any("NaN" in n for n in out.notes)
    with pytest.raises(ValueError, match="'c'.*every point"):
        protocol.compare(K(0), None, contenders={"c": Contender(run, ({"x": 0},))._replace(
            grid=({"x": 0}, {"x": 0.0 * 2}))}, tuning=2, seeds=2, progress=False)


def test_a_grid_tied_everywhere_is_noted():
    with pytest.warns(RuntimeWarning, match="tied across"):
        out = protocol.compare(K(0), None, contenders={"c": Contender(
            lambda i, p, *, x: np.zeros(i.index.size), ({"x": 1}, {"x": 2}))},
            tuning=2, seeds=2, progress=False)
    assert out.contenders["c"].params == {"x": 1}
    assert "tied across" in out.table()


def test_several_metrics_and_records_from_one_run():
    calls = []

    def run(items, problem):
        calls.append(items.split)
        return {"acc": (items.index % 2).astype(float), "cost": items.index + 1.0,
                "answer": np.stack([items.index, items.index * 10], axis=1)}

    ms = (Metric("acc", bounds=(0, 1)), Metric("cost", higher_is_better=False, ratio=True))
    out = protocol.compare(K(0), None, contenders={"a": Contender(run), "b": Contender(run)},
                           seeds=4, metrics=ms, progress=False)
    assert calls == ["test", "test"]  # one run each, both metrics
    assert out.metrics == ("acc", "cost")
    assert out["cost"].contenders["a"].statistic == 2.5
    assert out["cost"].differences[0].ratio == 1.0
    np.testing.assert_array_equal(out.records["a"]["answer"][:, 1], [0, 10, 20, 30])
    d = json.loads(json.dumps(out.to_dict()))
    assert d["others"]["cost"]["differences"][0]["ratio"] == 1.0
    assert d["records"]["a"]["answer"][3] == [3, 30]
    with pytest.raises(KeyError, match="no metric"):
        out["nope"]


def test_ratio_ci_is_the_percentile_interval_of_the_resampled_ratio():
    a = lambda i, p: 2.0 + (i.index % 3)
    b = lambda i, p: 1.0 + (i.index % 3)
    out = protocol.compare(K(1), None, contenders={"a": Contender(a), "b": Contender(b)},
                           seeds=9, metrics=(Metric("m", ratio=True),), resamples=400,
                           progress=False)
    d = out.differences[0]
    assert d.ratio == pytest.approx(3.0 / 2.0)
    assert d.ratio_low < d.ratio < d.ratio_high
    assert "ratio 1.5" in out.table()


def test_a_goal_that_holds_only_through_censored_items_is_marked_and_noted():
    # "a" reaches its target on every item; "b" never does: censored everywhere.
    a = lambda i, p: np.full(i.index.size, 10.0)
    b = lambda i, p: np.full(i.index.size, np.inf)
    m = Metric("samples", higher_is_better=False, bounds=(0, 100), censor_at=100.0)
    with pytest.warns(RuntimeWarning, match="only through censored items"):
        out = protocol.compare(K(0), None, contenders={"a": Contender(a), "b": Contender(b)},
                               seeds=6, goals=[Goal("a", "b")], metrics=(m,), progress=False)
    g = out.goals[0]
    assert g.met and g.censored and "only through censored" in g.note
    assert "met (a bound: censored items)" in out.table()


def test_a_goal_that_also_holds_on_uncensored_items_has_no_note():
    a = lambda i, p: 10.0 + i.index
    b = lambda i, p: np.where(i.index == 0, np.inf, 50.0 + i.index)
    m = Metric("samples", higher_is_better=False, censor_at=100.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = protocol.compare(K(0), None, contenders={"a": Contender(a), "b": Contender(b)},
                               seeds=8, goals=[Goal("a", "b")], metrics=(m,), progress=False)
    assert out.goals[0].met and out.goals[0].censored and out.goals[0].note == ""


@pytest.mark.parametrize("values, match", [
    (lambda n: np.full(n, 2.0), "outside 'acc'"),
    (lambda n: np.full(n, np.inf), "only a censored item"),
    (lambda n: np.full(n, -np.inf), "declares no censoring"),
    (lambda n: np.array(["x"] * n), "dtype"),
    (lambda n: np.zeros((n, 2)), "shape"),
    (lambda n: np.full(n, np.nan), "NaN"),
])
def test_values_a_metric_does_not_allow_raise_naming_the_contender(values, match):
    with pytest.raises((ValueError, TypeError), match=f"'mine'.*{match}|{match}.*'mine'"):
        protocol.compare(K(0), None, contenders={"mine": Contender(
            lambda i, p: values(i.index.size))}, seeds=3,
            metrics=(Metric("acc", bounds=(0.0, 1.0)),), progress=False)


def test_censor_at_better_than_a_real_value_is_refused():
    run = lambda i, p: np.where(i.index == 0, np.inf, 500.0)
    with pytest.raises(ValueError, match="worse than `censor_at`"):
        protocol.compare(K(0), None, contenders={"a": Contender(run)}, seeds=3,
                         metrics=(Metric("samples", False, censor_at=100.0),), progress=False)


def _recording():
    calls = []
    return calls, Contender(lambda i, p: calls.append(1) or np.zeros(i.index.size))


@pytest.mark.parametrize("kwargs, match", [
    ({"tuning": True}, "bool"),
    ({"seeds": True}, "seeds"),
    ({"seeds": 2.0}, "seeds"),
    ({"resamples": 1}, "resamples"),
    ({"level": 1.5}, "level"),
    ({"level": True}, "level"),
    ({"goals": [Goal("a", "a")]}, "itself"),
    ({"goals": [Goal("a", "b"), Goal("a", "b")]}, "twice"),
    ({"goals": [Goal("a", "b", float("nan"))]}, "margin"),
    ({"goals": Goal("a", "b")}, "goals"),
    ({"pairs": [("a", "a")]}, "itself"),
    ({"pairs": [("a", "b"), ("a", "b")]}, "twice"),
    ({"pairs": [("a", "zz")]}, "pairs"),
    ({"metrics": "value"}, "metrics"),
    ({"metrics": ("value", "value")}, "twice"),
    ({"metrics": ("nope",)}, "nope"),
    ({"metrics": (Metric("m", bounds=(1, 0)),)}, "bounds"),
    ({"settings": {"x": 1}}, "settings"),
    ({"contenders": "a"}, "one str"),
    ({"contenders": ["a", "a"]}, "unique"),
    ({"contenders": {"a": None}}, "None"),
    ({"contenders": {"a": Builtin("zz")}}, "built-in"),
    ({"contenders": {"a": Contender(lambda i, p, *, x: 0, ({"y": 1},))}}, "does not take"),
    ({"contenders": {"a": Contender(lambda i, p, *, x: 0)}}, "never sets"),
    ({"contenders": {"a": Contender(lambda i, p, *, x: 0, ({"x": 1}, {"x": 1}))}},
     "repeats"),
    ({"contenders": {"a": Contender(lambda i, p, *, x: 0, Stages(((),)))}}, "Stages\\[0\\]"),
    ({"batch": True}, "batch"),
])
def test_refused_before_any_contender_runs(kwargs, match):
    calls, rec = _recording()
    args = {"contenders": {"a": rec, "b": rec}, "seeds": 3, "progress": False, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        protocol.compare(K(0), None, **args)
    assert calls == []


def test_an_unwritable_results_path_is_refused_before_running(tmp_path):
    calls, rec = _recording()
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="results_path"):
        protocol.compare(K(0), None, contenders={"a": rec}, seeds=2, progress=False,
                         results_path=blocker / "sub" / "r.jsonl")
    with pytest.raises(ValueError, match="folder"):
        protocol.compare(K(0), None, contenders={"a": rec}, seeds=2, progress=False,
                         results_path=tmp_path)
    assert calls == []
    path = tmp_path / "new" / "deeper" / "r.jsonl"  # created
    first = protocol.compare(K(0), None, contenders={"a": rec}, seeds=2, progress=False,
                             results_path=path)
    second = protocol.compare(K(0), None, contenders={"a": rec}, seeds=2, progress=False,
                              results_path=path)
    runs = [json.loads(x)["run"] for x in path.read_text().splitlines()]
    assert first.run_id != second.run_id
    assert runs == [first.run_id] * 2 + [second.run_id] * 2


def test_no_compile_listener_is_left_behind():
    from jax._src import monitoring
    before = len(monitoring.get_event_duration_listeners())
    protocol.compare(K(0), None, contenders={"a": Contender(_const(1.0))}, seeds=2,
                     progress=False)
    assert len(monitoring.get_event_duration_listeners()) == before


def _spec(calls):
    def maker(ctx):
        return Contender(lambda i, p, *, x: calls.append(x) or np.full(i.index.size, float(x)),
                         ({"x": 1}, {"x": 2}))

    return Spec("toy", {"mine": maker, "other": lambda ctx: Contender(_const(0.0))},
                ("mine", "other"), (Metric("score", bounds=(0, 10)),),
                goals=lambda names, metrics: (Goal("mine", "other"),), tuning=2, seeds=3)


def test_a_bound_spec_has_the_common_signature_and_its_defaults():
    import inspect
    calls = []
    compare = protocol.bind(_spec(calls))
    params = inspect.signature(compare).parameters
    assert [(n, p.default) for n, p in params.items()] == list(protocol.ARGUMENTS)
    out = compare(K(0), None, progress=False)
    assert out.contenders["mine"].params == {"x": 2} and out.goals[0].met
    assert calls == [1, 2, 2]
    one = compare(K(0), None, contenders={"m": Builtin("mine", grid=({"x": 3},)),
                                         "o": "other"}, goals=(), progress=False)
    assert one.contenders["m"].params == {"x": 3} and one.goals == ()
    assert "mine" in compare.__doc__ and "Args:" in compare.__doc__


def test_the_settings_of_a_spec_are_its_class_or_a_dict_of_its_fields():
    from typing import NamedTuple

    class Settings(NamedTuple):
        size: int = 3

    seen = []
    spec = _spec([])._replace(settings=Settings, contenders={
        "s": lambda ctx: seen.append(ctx.settings) or Contender(_const(1.0))}, defaults=("s",),
        goals=lambda names, metrics: ())
    compare = protocol.bind(spec)
    compare(K(0), None, settings={"size": 5}, progress=False)
    compare(K(0), None, progress=False)
    assert seen == [Settings(5), Settings(3)]
    with pytest.raises(ValueError, match="no fields \\['sz'\\]"):
        compare(K(0), None, settings={"sz": 5}, progress=False)
    with pytest.raises(TypeError, match="settings"):
        compare(K(0), None, settings=5, progress=False)


def test_items_positions_place_test_items_after_the_tuning_items():
    seen = {}

    def run(items, problem, *, x=0):
        seen.setdefault(items.split, []).extend(items.positions.tolist())
        return np.zeros(items.index.size)

    with pytest.warns(RuntimeWarning, match="tied"):
        protocol.compare(K(0), None, contenders={"a": Contender(run, ({"x": 0}, {"x": 1}))},
                         tuning=3, seeds=2, progress=False)
    assert seen == {"tuning": [0, 1, 2, 0, 1, 2], "test": [3, 4]}


def test_compile_seconds_go_to_the_contender_that_compiled():
    @jax.jit
    def f(k):
        return jax.random.normal(k, (32, 32)).sum()

    run = lambda i, p: np.asarray(jax.vmap(f)(i.keys))
    out = protocol.compare(K(5), None, contenders={"first": Contender(run),
                                                   "again": Contender(run)},
                           seeds=3, progress=False)
    assert out.contenders["first"].compile_s > 0.0
    assert out.contenders["again"].compile_s == 0.0
    assert math.isfinite(out.contenders["again"].run_s)


def test_a_builtin_grid_is_checked_by_the_spec_before_anything_runs():
    calls = []

    def check_grid(name, points):
        for p in points:
            if p["x"] < 1:
                raise ValueError(f"`contenders` grid of {name!r}: x must be >= 1, got {p}.")

    compare = protocol.bind(_spec(calls)._replace(check_grid=check_grid))
    with pytest.raises(ValueError, match="x must be >= 1"):
        compare(K(0), None, contenders={"other": "other", "m": Builtin("mine", ({"x": 0},))},
                progress=False)
    assert calls == []


def test_default_metrics_may_follow_the_problem_and_unselected_metrics_are_not_records():
    ms = (Metric("a"), Metric("b"))
    run = lambda i, p: {"a": np.zeros(i.index.size), "b": np.ones(i.index.size),
                        "extra": np.arange(i.index.size)}
    spec = Spec("toy", {"c": lambda ctx: Contender(run)}, ("c",), ms,
                default_metrics=lambda problem, settings: (problem,), seeds=2)
    out = protocol.bind(spec)(K(0), "b", progress=False)
    assert out.metrics == ("b",)
    assert set(out.records["c"]) == {"extra"}


def test_a_goal_is_judged_on_its_metric_only():
    run = lambda i, p: {"up": np.full(i.index.size, 1.0), "down": np.full(i.index.size, 1.0)}
    low = lambda i, p: {"up": np.zeros(i.index.size), "down": np.zeros(i.index.size)}
    ms = (Metric("up"), Metric("down", higher_is_better=False))
    out = protocol.compare(K(0), None, contenders={"a": Contender(run), "b": Contender(low)},
                           seeds=3, metrics=ms, goals=[Goal("a", "b"),
                                                       Goal("b", "a", metric="down")],
                           progress=False)
    assert [g.goal for g in out.goals] == [Goal("a", "b")] and out.goals[0].met
    assert [g.goal.b for g in out["down"].goals] == ["a"] and out["down"].goals[0].met
    with pytest.raises(ValueError, match="not compared"):
        protocol.compare(K(0), None, contenders={"a": Contender(run), "b": Contender(low)},
                         seeds=3, metrics=ms[:1], goals=[Goal("a", "b", metric="down")],
                         progress=False)


def test_a_metric_a_builtin_cannot_report_is_refused_before_running():
    calls = []
    with pytest.raises(ValueError, match="cannot report"):
        protocol.bind(_spec(calls))(K(0), None, metrics=(Metric("mine"),), progress=False)
    assert calls == []


def test_tune_is_compares_tuning_without_test_items():
    seen = []

    def run(items, problem, *, x):
        seen.append(items.split)
        return np.full(items.index.size, -abs(x - 2.0))

    c = {"a": Contender(run, Stages((({"x": 1}, {"x": 2}), ({"x": 2}, {"x": 3}))))}
    t = protocol.tune(K(0), None, contenders=c, tuning=3, progress=False)
    assert set(seen) == {"tuning"} and t.params == {"a": {"x": 2}} and t.stages["a"] == (2, 2)
    full = protocol.compare(K(0), None, contenders=c, tuning=3, seeds=2, progress=False)
    assert full.contenders["a"].params == t.params["a"]
    assert full.contenders["a"].tuning == t.rows["a"]


def test_contenders_given_as_an_iterator_are_read_once():
    calls = []
    compare = protocol.bind(_spec(calls))
    with pytest.raises(ValueError, match="cannot report"):
        compare(K(0), None, contenders=iter(("mine", "other")), metrics=(Metric("mine"),),
                progress=False)
    out = compare(K(0), None, contenders=iter(("mine", "other")), progress=False)
    assert list(out.contenders) == ["mine", "other"] and calls == [1, 2, 2]
