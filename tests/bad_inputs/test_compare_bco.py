"""Misuse of ``jaxlab.bco.compare``: every bad call raises a ValueError / TypeError
naming the argument (or the contender), and, where the input allows, before any contender
runs (the built-ins' runner is replaced by one that fails the test if called, and a
contender of our own records its calls)."""

import math
import re

import jax
import numpy as np
import pytest

from jaxlab import bco
from jaxlab.bco import comparison
from jaxlab.core.protocol import Builtin, Contender, Goal
from tests.bad_inputs.compare_helpers import Recorder, never_runs

KEY = jax.random.key(0)


@pytest.fixture(scope="module")
def prob():
    return bco.problem(lambda k: bco.losses.stochastic_quadratic(k, 10, 2, 0.1), bco.ball(2))


def _call(prob, **kwargs):
    args = {"contenders": {"gradient_variation": "gradient_variation",
                           "agarwal2010": "agarwal2010"}, "tuning": 2, "seeds": 2,
            "progress": False, **kwargs}
    problem = args.pop("problem", prob)
    return bco.compare(KEY, problem, **args)


# (case id, compare's arguments (``prob``: the tiny problem), error, text of the message)
GV, AG = "gradient_variation", "agarwal2010"
BEFORE = [
    ("unknown built-in", lambda p: {"contenders": (GV, "adam")}, ValueError, "`contenders"),
    ("duplicate names", lambda p: {"contenders": (GV, GV)}, ValueError,
     "`contenders` names must be unique"),
    ("one string", lambda p: {"contenders": AG}, TypeError, "`contenders`"),
    ("None in a mapping", lambda p: {"contenders": {GV: None}}, TypeError,
     "`contenders['gradient_variation']`"),
    ("empty mapping", lambda p: {"contenders": {}}, ValueError, "`contenders`"),
    ("empty sequence", lambda p: {"contenders": ()}, ValueError, "`contenders`"),
    ("a name that is not a string", lambda p: {"contenders": (GV, 3)}, TypeError,
     "`contenders`"),
    ("Builtin of an unknown name", lambda p: {"contenders": {"c": Builtin("adam")}},
     ValueError, "`contenders['c']`"),
    ("a number as contender", lambda p: {"contenders": {"c": 3}}, TypeError,
     "`contenders['c']`"),
    ("empty grid", lambda p: {"contenders": {AG: Builtin(AG, grid=[])}}, ValueError,
     "`contenders['agarwal2010']` grid"),
    ("grid repeats a point", lambda p: {"contenders": {AG: Builtin(
        AG, grid=[{"multiplier": 0.5}, {"multiplier": 0.5}])}}, ValueError, "repeats a point"),
    ("grid of a wrong key", lambda p: {"contenders": {AG: Builtin(
        AG, grid=[{"step": 0.5}])}}, ValueError, "`contenders['agarwal2010']`"),
    ("grid for the untuned control", lambda p: {"contenders": {"c": Builtin(
        "ogd_sqrt_d_step", grid=[{"multiplier": 0.5}])}}, ValueError, "`contenders['c']`"),
    ("grid one dict, not a sequence", lambda p: {"contenders": {AG: Builtin(
        AG, grid={"multiplier": 0.5})}}, ValueError, "`contenders['agarwal2010']` grid"),
    ("two_point_contender of multiplier 0", lambda p: {"contenders": {
        AG: bco.two_point_contender(False, (0.0, 0.5))}}, ValueError, "`multipliers[0]`"),
    ("two_point_contender of one multiplier", lambda p: {"contenders": {
        AG: bco.two_point_contender(False, 0.5)}}, TypeError, "`multipliers`"),
    ("problem a loss-sequence maker", lambda p: {"problem": p.make_seq}, TypeError,
     "`problem`"),
    ("problem a string", lambda p: {"problem": "quadratics"}, TypeError, "`problem`"),
    ("problem with delta past the radius", lambda p: {"problem": p._replace(delta=2.0)},
     ValueError, "`delta`"),
    ("problem of unknown regret", lambda p: {"problem": p._replace(regret="adaptive")},
     ValueError, "`regret`"),
    ("problem without a domain", lambda p: {"problem": p._replace(domain=None)}, ValueError,
     "`domain`"),
    ("delta as a setting", lambda p: {"settings": {"delta": 0.1}}, TypeError, "`settings`"),
    ("unknown metric", lambda p: {"metrics": ("final regret",)}, ValueError, "`metrics`"),
    ("metric one string", lambda p: {"metrics": p.metric_name}, TypeError, "`metrics`"),
    ("no metric", lambda p: {"metrics": ()}, ValueError, "`metrics`"),
    ("metric twice", lambda p: {"metrics": (p.metric_name,) * 2}, ValueError, "`metrics`"),
    ("goal of an unknown contender", lambda p: {"goals": (Goal(GV, "adam"),)}, ValueError,
     "`goals`"),
    ("goal against itself", lambda p: {"goals": (Goal(GV, GV),)}, ValueError, "`goals`"),
    ("goal a tuple, not a Goal", lambda p: {"goals": ((GV, AG),)}, TypeError, "`goals`"),
    ("goal margin inf", lambda p: {"goals": (Goal(GV, AG, math.inf),)}, ValueError,
     "`goals`"),
    ("pair against itself", lambda p: {"pairs": ((GV, GV),)}, ValueError, "`pairs`"),
    ("pair of an unknown contender", lambda p: {"pairs": ((GV, "adam"),)}, ValueError,
     "`pairs`"),
    ("pair twice", lambda p: {"pairs": ((GV, AG),) * 2}, ValueError, "`pairs`"),
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
    monkeypatch.setattr(comparison, "final_regrets", never_runs)
    with pytest.raises(error, match=re.escape(match)):
        _call(prob, **make_kwargs(prob))


def test_a_results_path_that_is_a_folder_or_unwritable_is_refused_first(prob, monkeypatch,
                                                                        tmp_path):
    monkeypatch.setattr(comparison, "final_regrets", never_runs)
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
              metrics=(prob.metric_name,))
    assert mine.calls == 0


# What a contender of our own returns: refused while running, naming the contender.
RETURNS = [
    ("NaN", lambda n: np.full(n, np.nan), ValueError, "'mine' returned NaN"),
    ("-inf (the good infinity)", lambda n: np.full(n, -np.inf), ValueError, "'mine'"),
    ("wrong shape", lambda n: np.ones((n, 2)), ValueError, "'mine'"),
    ("strings", lambda n: np.array(["fast"] * n), TypeError, "'mine'"),
    ("+inf (regret is never censored)", lambda n: np.full(n, np.inf), ValueError, "'mine'"),
    ("a dict without the metric", lambda n: {"regret": np.ones(n)}, ValueError, "'mine'"),
    ("a record without the item axis", lambda n: {"final static regret": np.ones(n),
                                                  "x": np.ones(n + 1)}, ValueError, "'mine'"),
]


@pytest.mark.parametrize("make, error, match", [c[1:] for c in RETURNS],
                         ids=[c[0] for c in RETURNS])
def test_what_an_own_contender_returns_is_checked(prob, make, error, match):
    mine = Recorder(make=make)
    with pytest.raises(error, match=re.escape(match)):
        _call(prob, contenders={"mine": Contender(mine.run), "other": Contender(
            Recorder().run)})
    assert mine.calls == 1


def test_a_builtin_grid_point_out_of_range_names_the_parameter(prob, monkeypatch):
    # A Builtin's grid values are checked by the spec before anything runs.
    monkeypatch.setattr(comparison, "final_regrets", never_runs)
    first = Recorder()
    with pytest.raises(ValueError, match=r"grid\[0\]\['multiplier'\]"):
        _call(prob, contenders={"mine": Contender(first.run),
                                AG: Builtin(AG, grid=[{"multiplier": -1.0}])}, tuning=0)
    assert first.calls == 0
