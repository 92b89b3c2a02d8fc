"""Misuse of ``attention.compare``: each call raises a ValueError / TypeError naming the
argument or the contender, before any contender runs where the input allows (a recording
contender and a recording ``item_slices`` stand in for the runs)."""

import math

import jax
import numpy as np
import pytest

from jaxlab import attention
from jaxlab.attention import comparison
from jaxlab.core.protocol import Builtin, Contender, Goal, Metric
from pallas_kernels.sale import reference as R

KEY = jax.random.key(0)
SIZES = R.BlockSizes(16, 8, 16)


def _x(b=2, h=2, n=32, d=8, seed=0):
    return np.asarray(jax.random.normal(jax.random.key(seed), (b, h, n, d)), np.float32)


def _problem(**kw):
    return attention.AttentionProblem(**{"q": _x(), "k": _x(seed=1), "v": _x(seed=2),
                                         "sizes": SIZES, **kw})


@pytest.fixture
def ran(monkeypatch):
    """The runs made: ("own", split) per call of the recording contender, ("builtin", split)
    per ``item_slices`` call of a built-in (which computes nothing here)."""
    calls = []

    def fake_slices(problem, items):
        calls.append(("builtin", items.split))
        raise AssertionError("a built-in contender ran")

    monkeypatch.setattr(comparison, "item_slices", fake_slices)
    return calls


def _recorder(calls, values=None):
    def run(items, problem):
        calls.append(("own", items.split))
        if values is not None:
            return values(items)
        v = np.full(items.index.size, 0.5)
        return {"density": v, "error": v, "recall": v}
    return Contender(run)


def _call(calls, **overrides):
    kw = dict(contenders={"sale": "sale", "dense": "dense", "mine": _recorder(calls)},
              tuning=1, seeds=2, progress=False)
    kw.update(overrides)
    problem = kw.pop("problem", _problem())
    return attention.compare(KEY, problem, **kw)


# (id, overrides, exception, the argument named)
BEFORE = [
    ("problem a (q, k, v) tuple", {"problem": (_x(), _x(), _x())}, TypeError, "`problem`"),
    ("problem None", {"problem": None}, TypeError, "`problem`"),
    ("3-D queries", {"problem": _problem(q=_x()[0])}, ValueError, "`problem.q`"),
    ("NaN values", {"problem": _problem(v=np.full((2, 2, 32, 8), np.nan, np.float32))},
     ValueError, "`problem.v`"),
    ("query heads not a multiple of the key heads", {"problem": _problem(q=_x(h=3))},
     ValueError, "Hq a multiple"),
    ("keys of another length", {"problem": _problem(k=_x(n=16), v=_x(n=16))}, ValueError,
     "`problem`"),
    ("sizes a tuple", {"problem": _problem(sizes=(16, 8, 16))}, TypeError, "`problem.sizes`"),
    ("2 estimation bits", {"problem": _problem(bits=2)}, ValueError, "`problem.bits`"),
    ("more slices than the problem holds", {"seeds": 4}, ValueError, "`seeds`"),
    ("the default counts on a small problem", {"tuning": None, "seeds": None}, ValueError,
     "`tuning`=4 \\+ `seeds`=8"),
    ("a bare name for the contenders", {"contenders": "sale"}, TypeError, "`contenders`"),
    ("unknown contender", {"contenders": ("sale", "flash")}, ValueError, "`contenders"),
    ("duplicate contender", {"contenders": ("dense", "dense")}, ValueError, "`contenders`"),
    ("no contenders", {"contenders": {}}, ValueError, "`contenders`"),
    ("None for the built-in", {"contenders": {"sale": None}}, TypeError, "`contenders"),
    ("a bare function", {"contenders": {"x": lambda items, p: items.index}}, TypeError,
     "`contenders"),
    ("an empty grid", {"contenders": {"x": Builtin("sale", ())}}, ValueError, "`contenders"),
    ("a grid key the run does not take", {"contenders": {"x": Builtin(
        "sale", ({"theta": 1e-3},))}}, ValueError, "`contenders"),
    ("a grid for the static pattern", {"contenders": {"x": Builtin("static", (
        {"tau": 1e-3},))}}, ValueError, "`contenders"),
    ("a grid repeating a point", {"contenders": {"x": Builtin(
        "sale", ({"tau": 1e-3}, {"tau": 1e-3}))}}, ValueError, "`contenders"),
    ("unknown settings field", {"settings": {"tau": 1e-3}}, ValueError, "`settings`"),
    ("settings of another type", {"settings": 0.05}, TypeError, "`settings`"),
    ("tolerance 0", {"settings": {"tolerance": 0.0}}, ValueError, "`settings.tolerance`"),
    ("tolerance inf", {"settings": {"tolerance": math.inf}}, ValueError,
     "`settings.tolerance`"),
    ("unknown metric", {"metrics": ("speed",)}, ValueError, "`metrics`"),
    ("one metric name, not a sequence", {"metrics": "density"}, TypeError, "`metrics`"),
    ("a metric twice", {"metrics": ("error", "error")}, ValueError, "`metrics`"),
    ("no metric", {"metrics": ()}, ValueError, "`metrics`"),
    ("a metric the built-ins do not report", {"metrics": (Metric("speed"),)}, ValueError,
     "`metrics`: the built-in contender 'sale'"),
    ("a goal naming an unknown contender", {"goals": [Goal("sale", "flash")]}, ValueError,
     "`goals`"),
    ("a goal of a contender against itself", {"goals": [Goal("sale", "sale")]}, ValueError,
     "`goals`"),
    ("a goal with a NaN margin", {"goals": [Goal("sale", "dense", math.nan)]}, ValueError,
     "`goals`"),
    ("a pair of a contender with itself", {"pairs": [("dense", "dense")]}, ValueError,
     "`pairs`"),
    ("a pair naming an unknown contender", {"pairs": [("sale", "static")]}, ValueError,
     "`pairs`"),
    ("tuning True", {"tuning": True}, TypeError, "`tuning`"),
    ("negative tuning", {"tuning": -1}, ValueError, "`tuning"),
    ("a tuned grid without tuning slices", {"tuning": 0}, ValueError, "`tuning`"),
    ("one test slice", {"seeds": 1}, ValueError, "`seeds`"),
    ("a float slice count", {"seeds": 2.0}, TypeError, "`seeds`"),
    ("batch 0", {"batch": 0}, ValueError, "`batch`"),
    ("one resample", {"resamples": 1}, ValueError, "`resamples`"),
    ("level 1.5", {"level": 1.5}, ValueError, "`level`"),
    ("progress neither bool nor callable", {"progress": 1}, TypeError, "`progress`"),
    ("results_path a folder", {"results_path": "/"}, ValueError, "`results_path`"),
    ("results_path unwritable", {"results_path": "/proc/no/such/file.jsonl"}, ValueError,
     "`results_path`"),
]


@pytest.mark.parametrize("overrides,error,named", [c[1:] for c in BEFORE],
                         ids=[c[0] for c in BEFORE])
def test_refused_before_anything_runs(ran, overrides, error, named):
    with pytest.raises(error, match=named):
        _call(ran, **overrides)
    assert ran == []


@pytest.mark.parametrize("tau", [-1e-3, math.nan])
def test_a_bad_tau_of_a_grid_names_the_contender(ran, tau):
    """A grid given with ``Builtin`` is known once the contender is made: a bad tau is
    refused at its first run, before any slice is taken."""
    with pytest.raises(ValueError, match="`contenders`: the built-in 'sale'.*`tau`"):
        _call(ran, contenders={"x": Builtin("sale", ({"tau": tau}, {"tau": 1e-3})),
                               "mine": _recorder(ran)})
    assert ran == []


def _each(v):
    return lambda items: {m: v(items) for m in ("density", "error", "recall")}


# what a contender of the user's returns: (id, values, exception); checked when it returns
RETURNS = [
    ("NaN", _each(lambda items: np.full(items.index.size, np.nan)), ValueError),
    ("-inf densities", _each(lambda items: np.full(items.index.size, -np.inf)), ValueError),
    ("one value too many", _each(lambda items: np.full(items.index.size + 1, 0.5)),
     ValueError),
    ("a 2-D array", _each(lambda items: np.full((items.index.size, 2), 0.5)), ValueError),
    ("strings", _each(lambda items: np.array(["a"] * items.index.size)), TypeError),
    ("a density above 1", _each(lambda items: np.full(items.index.size, 1.5)), ValueError),
    ("a negative density", _each(lambda items: np.full(items.index.size, -0.1)), ValueError),
    ("one array for three metrics", lambda items: np.full(items.index.size, 0.5), ValueError),
    ("no recall", lambda items: {"density": np.full(items.index.size, 0.5),
                                 "error": np.zeros(items.index.size)}, ValueError),
]


@pytest.mark.parametrize("values,error", [c[1:] for c in RETURNS], ids=[c[0] for c in RETURNS])
def test_a_bad_value_names_the_contender(ran, values, error):
    with pytest.raises(error, match="'mine'"):
        _call(ran, contenders={"mine": _recorder(ran, values), "other": _recorder(ran)},
              tuning=0, metrics=("density", "error", "recall"))
    assert ran == [("own", "test")]  # the first contender's call, nothing after it
