"""Misuse of ``avatar.compare``: each call raises a ValueError / TypeError naming the argument
or the contender, before any contender runs where the input allows (a recording contender
and a recording ``run_seeds`` stand in for the runs)."""

import math

import jax
import numpy as np
import pytest

from jaxlab import avatar
from jaxlab.avatar import comparison, tasks
from jaxlab.core.protocol import Builtin, Contender, Goal, Metric

KEY = jax.random.key(0)


@pytest.fixture(scope="module")
def task():
    return tasks.real_graph_pair("karate", seed=0)


@pytest.fixture
def ran(monkeypatch):
    """The runs made: ("own", split) per call of the recording contender, ("builtin", index)
    per ``run_seeds`` call (which never runs a program here)."""
    calls = []

    def fake_run_seeds(keys, task, table, index, settings=None):
        calls.append(("builtin", index))
        raise AssertionError("a built-in contender ran")

    monkeypatch.setattr(comparison, "run_seeds", fake_run_seeds)
    return calls


def _recorder(calls, value=0.5):
    def run(items, task):
        calls.append(("own", items.split))
        v = np.full(items.index.size, value) if not callable(value) else value(items)
        return {"mrr": v, "never-queried mrr": v, "removal-only mrr": v}
    return Contender(run)


def _call(task, calls, **overrides):
    kw = dict(contenders={"avatar": "avatar", "random": "random", "mine": _recorder(calls)},
              tuning=1, seeds=2, settings={"rounds": 2}, progress=False)
    kw.update(overrides)
    problem = kw.pop("problem", task)
    return avatar.compare(KEY, problem, **kw)


# (id, overrides given the task, exception, the argument named)
BEFORE = [
    ("problem an array", lambda t: {"problem": np.eye(4)}, TypeError, "`problem`"),
    ("problem None", lambda t: {"problem": None}, TypeError, "`problem`"),
    ("problem too small for the budget", lambda t: {"settings": {"rounds": 10}}, ValueError,
     "`problem`"),
    ("a bare name for the contenders", lambda t: {"contenders": "random"}, TypeError,
     "`contenders`"),
    ("unknown contender", lambda t: {"contenders": ("avatar-nope", "random")}, ValueError,
     "`contenders"),
    ("duplicate contender", lambda t: {"contenders": ("random", "random")}, ValueError,
     "`contenders`"),
    ("no contenders", lambda t: {"contenders": {}}, ValueError, "`contenders`"),
    ("None for the built-in", lambda t: {"contenders": {"x": None}}, TypeError,
     "`contenders"),
    ("a bare function", lambda t: {"contenders": {"x": lambda i, p: i.index}}, TypeError,
     "`contenders"),
    ("an empty grid", lambda t: {"contenders": {"x": Builtin("avatar", ())}}, ValueError,
     "`contenders"),
    ("a grid key the run does not take", lambda t: {
        "contenders": {"x": Builtin("avatar", ({"scor": "abs"},))}}, ValueError,
     "`contenders"),
    ("a grid for a baseline", lambda t: {
        "contenders": {"x": Builtin("random", ({"score": "abs"},))}}, ValueError,
     "`contenders"),
    ("a grid repeating a point", lambda t: {
        "contenders": {"x": Builtin("avatar", ({"score": "abs"}, {"score": "abs"}))}},
     ValueError, "`contenders"),
    ("gain on a whole-graph task", lambda t: {
        "problem": tasks.as_graph_task(t), "contenders": ("avatar-gain", "random")},
     ValueError, "`contenders`"),
    ("gain with the PARROT aligner", lambda t: {
        "contenders": ("avatar-gain", "random"), "settings": {"rounds": 2, "solver": "parrot"}},
     ValueError, "`contenders`"),
    ("unknown settings field", lambda t: {"settings": {"roundz": 3}}, ValueError,
     "`settings`"),
    ("settings of another type", lambda t: {"settings": 5}, TypeError, "`settings`"),
    ("negative epsilon", lambda t: {"settings": {"rounds": 2, "epsilon": -1.0}}, ValueError,
     "`epsilon`"),
    ("unknown protocol", lambda t: {"settings": {"rounds": 2, "protocol": "mine"}},
     ValueError, "`protocol`"),
    ("unknown solver", lambda t: {"settings": {"rounds": 2, "solver": "emd"}}, ValueError,
     "`solver`"),
    ("unknown utility", lambda t: {"settings": {"rounds": 2, "utility": "l3"}}, ValueError,
     "`utility`"),
    ("heldout under fixed", lambda t: {
        "settings": {"rounds": 2, "protocol": "fixed", "heldout_frac": 0.2}}, ValueError,
     "`heldout_frac`"),
    ("a 2-D mesh", lambda t: {"settings": {"rounds": 2, "mesh_shape": (2, 2)}}, ValueError,
     "`settings.mesh_shape`"),
    ("zero rounds", lambda t: {"settings": {"rounds": 0}}, ValueError, "`rounds`"),
    ("unknown metric", lambda t: {"metrics": ("hits@7",)}, ValueError, "`metrics`"),
    ("one metric name, not a sequence", lambda t: {"metrics": "mrr"}, TypeError,
     "`metrics`"),
    ("a metric twice", lambda t: {"metrics": ("mrr", "mrr")}, ValueError, "`metrics`"),
    ("no metric", lambda t: {"metrics": ()}, ValueError, "`metrics`"),
    ("never-queried line without never-queried nodes", lambda t: {
        "settings": {"rounds": 2, "heldout_frac": 0.0}}, ValueError, "`metrics`"),
    ("a goal naming an unknown contender", lambda t: {"goals": [Goal("avatar", "oracle")]},
     ValueError, "`goals`"),
    ("a goal of a contender against itself", lambda t: {"goals": [Goal("random", "random")]},
     ValueError, "`goals`"),
    ("a goal with an infinite margin", lambda t: {
        "goals": [Goal("avatar", "random", math.inf)]}, ValueError, "`goals`"),
    ("a pair of a contender with itself", lambda t: {"pairs": [("random", "random")]},
     ValueError, "`pairs`"),
    ("a pair naming an unknown contender", lambda t: {"pairs": [("random", "nope")]},
     ValueError, "`pairs`"),
    ("tuning True", lambda t: {"tuning": True}, TypeError, "`tuning`"),
    ("negative tuning", lambda t: {"tuning": -1}, ValueError, "`tuning"),
    ("a tuned grid without tuning items", lambda t: {"tuning": 0}, ValueError, "`tuning`"),
    ("one seed", lambda t: {"seeds": 1}, ValueError, "`seeds`"),
    ("a float seed count", lambda t: {"seeds": 2.5}, TypeError, "`seeds`"),
    ("batch 0", lambda t: {"batch": 0}, ValueError, "`batch`"),
    ("one resample", lambda t: {"resamples": 1}, ValueError, "`resamples`"),
    ("level 1.5", lambda t: {"level": 1.5}, ValueError, "`level`"),
    ("progress neither bool nor callable", lambda t: {"progress": "yes"}, TypeError,
     "`progress`"),
    ("results_path a folder", lambda t: {"results_path": "/"}, ValueError, "`results_path`"),
    ("results_path unwritable", lambda t: {"results_path": "/proc/no/such/file.jsonl"},
     ValueError, "`results_path`"),
]


@pytest.mark.parametrize("overrides,error,named", [c[1:] for c in BEFORE],
                         ids=[c[0] for c in BEFORE])
def test_refused_before_anything_runs(task, ran, overrides, error, named):
    with pytest.raises(error, match=named):
        _call(task, ran, **overrides(task))
    assert ran == []


# what a contender of the user's returns: (id, values, exception); checked when it returns
RETURNS = [
    ("NaN", lambda items: np.full(items.index.size, np.nan), ValueError),
    ("inf", lambda items: np.full(items.index.size, np.inf), ValueError),
    ("-inf", lambda items: np.full(items.index.size, -np.inf), ValueError),
    ("one value too many", lambda items: np.full(items.index.size + 1, 0.5), ValueError),
    ("a 2-D array", lambda items: np.full((items.index.size, 2), 0.5), ValueError),
    ("strings", lambda items: np.array(["a"] * items.index.size), TypeError),
    ("an MRR above 1", lambda items: np.full(items.index.size, 1.5), ValueError),
    ("a negative MRR", lambda items: np.full(items.index.size, -0.1), ValueError),
]


def test_a_grid_point_of_an_unknown_score_names_the_contender(task, ran):
    """A grid given with ``Builtin`` is known once the contender is made: its unknown score
    is refused at its first run, before a program runs."""
    grid = ({"score": "bogus"}, {"score": "abs"})
    with pytest.raises(ValueError, match="`contenders`: the built-in 'avatar'.*bogus"):
        _call(task, ran, contenders={"x": Builtin("avatar", grid), "mine": _recorder(ran)})
    assert ran == []


@pytest.mark.parametrize("values,error", [c[1:] for c in RETURNS], ids=[c[0] for c in RETURNS])
def test_a_bad_value_names_the_contender(task, ran, values, error):
    with pytest.raises(error, match="'mine'"):
        _call(task, ran, contenders={"mine": _recorder(ran, values), "other": _recorder(ran)},
              tuning=0)
    assert ran == [("own", "test")]  # the first contender's call, nothing after it


def test_a_missing_metric_and_an_undeclared_one_name_the_contender(task, ran):
    def run(items, task):
        ran.append(("own", items.split))
        return {"mrr": np.full(items.index.size, 0.5)}

    with pytest.raises(ValueError, match="'mine'.*never-queried mrr"):
        _call(task, ran, contenders={"mine": Contender(run), "other": _recorder(ran)},
              tuning=0)
    ran.clear()
    mine = Metric("my score", bounds=(0.0, 1.0))
    with pytest.raises(ValueError, match="`metrics`.*'avatar-official'.*my score"):
        _call(task, ran, contenders={"avatar-official": "avatar-official",
                                     "mine": _recorder(ran)},
              tuning=0, metrics=(mine,))
    assert ran == []
