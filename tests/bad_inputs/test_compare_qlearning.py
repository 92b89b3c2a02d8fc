"""Misuse of ``jaxlab.qlearning.compare``: every bad call raises a ValueError / TypeError
naming the argument (or the contender), and, where the input allows, before any contender
runs (the built-ins' runner is replaced by one that fails the test if called, and a
contender of our own records its calls)."""

import math
import re

import jax
import numpy as np
import pytest

from jaxlab import qlearning as ql
from jaxlab.core.protocol import Builtin, Contender, Goal
from jaxlab.qlearning import comparison
from tests.bad_inputs.compare_helpers import Recorder, never_runs

KEY = jax.random.key(0)


@pytest.fixture(scope="module")
def prob():
    mdp = ql.garnet(jax.random.key(0), 4, 2, 2, 0.9)
    return ql.problem(mdp, eps_rel=(0.2, 0.1), num_records=2, record_every=5)


def _call(prob, **kwargs):
    args = {"contenders": {"theory": "theory", "constant": "constant"}, "tuning": 2,
            "seeds": 2, "progress": False, **kwargs}
    problem = args.pop("problem", prob)
    return ql.compare(KEY, problem, **args)


# (case id, compare's arguments (``prob``: the tiny problem), error, text of the message)
BEFORE = [
    ("unknown built-in", lambda p: {"contenders": ("theory", "greedy")}, ValueError,
     "`contenders"),
    ("duplicate names", lambda p: {"contenders": ("theory", "theory")}, ValueError,
     "`contenders` names must be unique"),
    ("one string", lambda p: {"contenders": "theory"}, TypeError, "`contenders`"),
    ("None in a mapping", lambda p: {"contenders": {"theory": None}}, TypeError,
     "`contenders['theory']`"),
    ("empty mapping", lambda p: {"contenders": {}}, ValueError, "`contenders`"),
    ("growth without a number", lambda p: {"contenders": ("growth p=abc",)}, ValueError,
     "`contenders"),
    ("growth power 0", lambda p: {"contenders": ("growth p=0",)}, ValueError, "`contenders"),
    ("growth power inf", lambda p: {"contenders": ("growth p=inf",)}, ValueError,
     "`contenders"),
    ("Builtin of an unknown name", lambda p: {"contenders": {"c": Builtin("adam")}},
     ValueError, "`contenders['c']`"),
    ("a number as contender", lambda p: {"contenders": {"c": 3}}, TypeError,
     "`contenders['c']`"),
    ("empty grid", lambda p: {"contenders": {"constant": Builtin("constant", grid=[])}},
     ValueError, "`contenders['constant']` grid"),
    ("grid repeats a point", lambda p: {"contenders": {"constant": Builtin(
        "constant", grid=[{"period": 5}, {"period": 5}])}}, ValueError, "repeats a point"),
    ("grid of a wrong key", lambda p: {"contenders": {"constant": Builtin(
        "constant", grid=[{"periods": 5}])}}, ValueError, "`contenders['constant']`"),
    ("grid one dict, not a sequence", lambda p: {"contenders": {"constant": Builtin(
        "constant", grid={"period": 5})}}, ValueError, "`contenders['constant']` grid"),
    ("constant_contender of period 0", lambda p: {"contenders": {
        "constant": ql.constant_contender((0, 5))}}, ValueError, "`periods[0]`"),
    ("growth_contender of base 0.5", lambda p: {"contenders": {
        "theory": ql.growth_contender(bases=(0.5,))}}, ValueError, "`bases[0]`"),
    ("problem a tuple of arrays", lambda p: {"problem": (np.ones((4, 2, 4)), np.ones((4, 2)))},
     TypeError, "`problem`"),
    ("problem without accuracies", lambda p: {"problem": p._replace(eps_rel=())}, ValueError,
     "`eps_rel`"),
    ("problem with 0 records", lambda p: {"problem": p._replace(num_records=0)}, ValueError,
     "`problem.num_records`"),
    ("problem of unknown sampling", lambda p: {"problem": p._replace(sampling="online")},
     ValueError, "`problem.sampling`"),
    ("eps_rel as a setting", lambda p: {"settings": {"eps_rel": 0.2}}, TypeError,
     "`settings`"),
    ("unknown metric", lambda p: {"metrics": ("samples to eps",)}, ValueError, "`metrics`"),
    ("metric one string", lambda p: {"metrics": p.metric_names[0]}, TypeError, "`metrics`"),
    ("no metric", lambda p: {"metrics": ()}, ValueError, "`metrics`"),
    ("metric twice", lambda p: {"metrics": (p.metric_names[0],) * 2}, ValueError,
     "`metrics`"),
    ("goal of an unknown contender", lambda p: {"goals": (Goal("theory", "greedy"),)},
     ValueError, "`goals`"),
    ("goal against itself", lambda p: {"goals": (Goal("theory", "theory"),)}, ValueError,
     "`goals`"),
    ("goal a tuple, not a Goal", lambda p: {"goals": (("theory", "constant"),)}, TypeError,
     "`goals`"),
    ("goal margin NaN", lambda p: {"goals": (Goal("theory", "constant", math.nan),)},
     ValueError, "`goals`"),
    ("pair against itself", lambda p: {"pairs": (("theory", "theory"),)}, ValueError,
     "`pairs`"),
    ("pair of an unknown contender", lambda p: {"pairs": (("theory", "greedy"),)},
     ValueError, "`pairs`"),
    ("pair twice", lambda p: {"pairs": (("theory", "constant"),) * 2}, ValueError, "`pairs`"),
    ("tuning True", lambda p: {"tuning": True}, TypeError, "`tuning`"),
    ("tuning negative", lambda p: {"tuning": -1}, ValueError, "`tuning"),
    ("no tuning items for tuned grids", lambda p: {"tuning": 0}, ValueError, "`tuning`"),
    ("one test seed", lambda p: {"seeds": 1}, ValueError, "`seeds`"),
    ("seeds a float", lambda p: {"seeds": 2.5}, TypeError, "`seeds`"),
    ("one resample", lambda p: {"resamples": 1}, ValueError, "`resamples`"),
    ("level 1.5", lambda p: {"level": 1.5}, ValueError, "`level`"),
    ("level a bool", lambda p: {"level": True}, TypeError, "`level`"),
    ("batch 0", lambda p: {"batch": 0}, ValueError, "`batch`"),
    ("progress a string", lambda p: {"progress": "yes"}, TypeError, "`progress`"),
]


@pytest.mark.parametrize("make_kwargs, error, match", [c[1:] for c in BEFORE],
                         ids=[c[0] for c in BEFORE])
def test_refused_before_any_contender_runs(prob, monkeypatch, make_kwargs, error, match):
    monkeypatch.setattr(comparison, "samples_to_eps", never_runs)
    with pytest.raises(error, match=re.escape(match)):
        _call(prob, **make_kwargs(prob))


def test_a_results_path_that_is_a_folder_or_unwritable_is_refused_first(prob, monkeypatch,
                                                                        tmp_path):
    monkeypatch.setattr(comparison, "samples_to_eps", never_runs)
    with pytest.raises(ValueError, match="`results_path`"):
        _call(prob, results_path=tmp_path)
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="`results_path`"):
        _call(prob, results_path=tmp_path / "file" / "log.jsonl")
    with pytest.raises(TypeError, match="`results_path`"):
        _call(prob, results_path=3)


def test_own_contender_is_not_run_when_a_later_argument_is_bad(prob):
    mine = Recorder()
    with pytest.raises(ValueError, match="`level`"):
        _call(prob, contenders={"mine": Contender(mine.run)}, level=0.0,
              metrics=(prob.metric_names[0],))
    assert mine.calls == 0


# What a contender of our own returns: refused while running, naming the contender.
RETURNS = [
    ("NaN", lambda n: np.full(n, np.nan), ValueError, "'mine' returned NaN"),
    ("-inf (the good infinity)", lambda n: np.full(n, -np.inf), ValueError, "'mine'"),
    ("wrong shape", lambda n: np.ones((n, 2)), ValueError, "'mine'"),
    ("strings", lambda n: np.array(["fast"] * n), TypeError, "'mine'"),
    ("negative samples", lambda n: np.full(n, -5.0), ValueError, "'mine'"),
    ("past the run length", lambda n: np.full(n, 1e9), ValueError, "'mine'"),
    ("a dict without the metric", lambda n: {"samples": np.ones(n)}, ValueError, "'mine'"),
]


@pytest.mark.parametrize("make, error, match", [c[1:] for c in RETURNS],
                         ids=[c[0] for c in RETURNS])
def test_what_an_own_contender_returns_is_checked(prob, make, error, match):
    mine = Recorder(make=make)
    with pytest.raises(error, match=re.escape(match)):
        _call(prob, contenders={"mine": Contender(mine.run), "other": Contender(
            Recorder().run)})
    assert mine.calls == 1


def test_inf_is_a_censored_run_not_an_error(prob):
    out = _call(prob, contenders={"mine": Contender(Recorder(np.inf).run),
                                  "other": Contender(Recorder(5.0).run)}, goals=())
    r = out.contenders["mine"]
    assert r.censored.all() and (r.values == prob.num_samples).all()


def test_a_builtin_grid_point_out_of_range_names_the_parameter(prob, monkeypatch):
    # A Builtin's grid values are checked by the spec before anything runs.
    monkeypatch.setattr(comparison, "samples_to_eps", never_runs)
    first = Recorder()
    with pytest.raises(ValueError, match=r"grid\[0\]\['period'\]"):
        _call(prob, contenders={"mine": Contender(first.run),
                                "constant": Builtin("constant", grid=[{"period": 0}])},
              tuning=0)
    assert first.calls == 0
