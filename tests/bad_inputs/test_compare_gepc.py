"""Misuse of ``gepc.compare``: each call raises a ValueError / TypeError naming the argument or
the contender, before any contender runs where the input allows (a recording contender and
a recording ``image_features`` stand in for the runs)."""

import math

import jax
import numpy as np
import pytest

from jaxlab import gepc
from jaxlab.core.protocol import Builtin, Contender, Goal, Metric
from jaxlab.gepc import comparison

KEY = jax.random.key(0)


def _eps(x, t):
    return 0.1 * x


def _problem(n=6, **kw):
    x = np.asarray(jax.random.uniform(KEY, (n, 8, 8, 1), minval=-1, maxval=1))
    return gepc.OODProblem(**{"eps_fn": _eps, "x_fit": x, "x_id": x, "x_ood": x, **kw})


@pytest.fixture
def ran(monkeypatch):
    """The runs made: ("own", split) per call of the recording contender, ("builtin", n)
    per ``image_features`` call of a built-in (which computes nothing here)."""
    calls = []

    def fake_features(keys, eps_fn, x, settings=None, **kw):
        calls.append(("builtin", len(x)))
        raise AssertionError("a built-in contender ran")

    monkeypatch.setattr(comparison, "image_features", fake_features)
    return calls


def _recorder(calls, values=None):
    def run(items, problem):
        calls.append(("own", items.split))
        if values is not None:
            return values(items)
        return items.index % 2 + 0.25 * items.index
    return Contender(run)


def _call(calls, **overrides):
    kw = dict(contenders={"gepc": "gepc", "score_norm": "score_norm", "mine": _recorder(calls)},
              tuning=2, seeds=4, progress=False)
    kw.update(overrides)
    problem = kw.pop("problem", _problem())
    return gepc.compare(KEY, problem, **kw)


_NAN_IMAGES = np.full((4, 8, 8, 1), np.nan)

# (id, overrides, exception, the argument named)
BEFORE = [
    ("problem a tuple of images", {"problem": tuple(_problem())[1:]}, TypeError, "`problem`"),
    ("problem None", {"problem": None}, TypeError, "`problem`"),
    ("eps_fn not callable", {"problem": _problem(eps_fn=3)}, TypeError, "`problem.eps_fn`"),
    ("3-D images", {"problem": _problem(x_id=np.zeros((4, 8, 8)))}, ValueError,
     "`problem.x_id`"),
    ("NaN OOD images", {"problem": _problem(x_ood=_NAN_IMAGES)}, ValueError,
     "`problem.x_ood`"),
    ("one fit image", {"problem": _problem(x_fit=np.zeros((1, 8, 8, 1)))}, ValueError,
     "`problem.x_fit`"),
    ("images of another size", {"problem": _problem(x_ood=np.zeros((4, 4, 4, 1)))},
     ValueError, "H, W, C"),
    ("more test images than the problem holds", {"seeds": 12}, ValueError, "`seeds`"),
    ("the default counts on a small problem", {"tuning": None, "seeds": None}, ValueError,
     "`tuning`=8 and `seeds`=16"),
    ("one tuning image", {"tuning": 1}, ValueError, "`tuning`"),
    ("a bare name for the contenders", {"contenders": "gepc"}, TypeError, "`contenders`"),
    ("unknown contender", {"contenders": ("gepc", "mahalanobis")}, ValueError, "`contenders"),
    ("duplicate contender", {"contenders": ("msma", "msma")}, ValueError, "`contenders`"),
    ("no contenders", {"contenders": {}}, ValueError, "`contenders`"),
    ("None for the built-in", {"contenders": {"gepc": None}}, TypeError, "`contenders"),
    ("a bare function", {"contenders": {"x": lambda items, p: items.index}}, TypeError,
     "`contenders"),
    ("an empty grid", {"contenders": {"x": Builtin("gepc", ())}}, ValueError, "`contenders"),
    ("a grid key the run does not take", {"contenders": {"x": Builtin(
        "gepc", ({"num_tt": 1},))}}, ValueError, "`contenders"),
    ("a grid for a baseline", {"contenders": {"x": Builtin("msma", ({"num_t": 1},))}},
     ValueError, "`contenders"),
    ("a grid repeating a point", {"contenders": {"x": Builtin(
        "gepc", ({"num_t": 1}, {"num_t": 1}))}}, ValueError, "`contenders"),
    ("unknown settings field", {"settings": {"num_t": 3}}, ValueError, "`settings`"),
    ("settings of another type", {"settings": 5}, TypeError, "`settings`"),
    ("rho above 1", {"settings": {"rho": 1.5}}, ValueError, "`settings.rho`"),
    ("unknown group element", {"settings": {"group": ("rot45",)}}, ValueError,
     "`settings.group`"),
    ("a group given as one string", {"settings": {"group": "hflip"}}, ValueError,
     "`settings.group`"),
    ("unknown official feature", {"settings": {"features": ("gepc_x",)}}, ValueError,
     "`settings.features`"),
    ("unknown aggregation", {"settings": {"agg_feat": "max"}}, ValueError,
     "`settings.agg_feat`"),
    ("a candidate time above 1", {"settings": {"sqrt_abars": (0.9, 1.2)}}, ValueError,
     "`settings.sqrt_abars`"),
    ("MSMA's sigmas reversed", {"settings": {"msma_sigma_min": 3.0}}, ValueError,
     "`settings.msma_sigma_min`"),
    ("zero DiffPath steps", {"settings": {"diffpath_steps": 0}}, ValueError,
     "`settings.diffpath_steps`"),
    ("zero GMM components", {"settings": {"gmm_components": (0, 2)}}, ValueError,
     "`settings.gmm_components`"),
    ("an unknown GMM covariance", {"settings": {"gmm_covariances": ("banded",)}}, ValueError,
     "`settings.gmm_covariances`"),
    ("one GMM fold", {"settings": {"gmm_folds": 1}}, ValueError, "`settings.gmm_folds`"),
    ("a fractional seed", {"settings": {"seed": 0.5}}, TypeError, "`settings.seed`"),
    ("batch 0 in the settings", {"settings": {"batch": 0}}, ValueError, "`settings.batch`"),
    ("unknown metric", {"metrics": ("FPR@95",)}, ValueError, "`metrics`"),
    ("one metric name, not a sequence", {"metrics": "AUROC"}, TypeError, "`metrics`"),
    ("a metric twice", {"metrics": ("AUROC", "AUROC")}, ValueError, "`metrics`"),
    ("a goal naming an unknown contender", {"goals": [Goal("gepc", "oracle")]}, ValueError,
     "`goals`"),
    ("a goal of a contender against itself", {"goals": [Goal("gepc", "gepc")]}, ValueError,
     "`goals`"),
    ("a goal with an infinite margin", {"goals": [Goal("gepc", "mine", math.inf)]},
     ValueError, "`goals`"),
    ("a pair of a contender with itself", {"pairs": [("mine", "mine")]}, ValueError,
     "`pairs`"),
    ("a pair naming an unknown contender", {"pairs": [("mine", "nope")]}, ValueError,
     "`pairs`"),
    ("tuning True", {"tuning": True}, TypeError, "`tuning`"),
    ("negative tuning", {"tuning": -2}, ValueError, "`tuning"),
    ("a tuned grid without tuning items", {"tuning": 0}, ValueError, "`tuning`"),
    ("one test image", {"seeds": 1}, ValueError, "`seeds`"),
    ("a float test count", {"seeds": 4.0}, TypeError, "`seeds`"),
    ("batch 0", {"batch": 0}, ValueError, "`batch`"),
    ("one resample", {"resamples": 1}, ValueError, "`resamples`"),
    ("level 1.5", {"level": 1.5}, ValueError, "`level`"),
    ("progress neither bool nor callable", {"progress": "yes"}, TypeError, "`progress`"),
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


def test_a_grid_point_past_the_candidate_times_names_the_contender(ran):
    """A grid given with ``Builtin`` is known once the contender is made: a ``num_t`` past
    the candidate times is refused at its first run, before any image is scored."""
    grid = ({"num_t": 9}, {"num_t": 1})
    with pytest.raises(ValueError, match="`contenders`: the built-in 'gepc'.*num_t=9"):
        _call(ran, contenders={"x": Builtin("gepc", grid), "mine": _recorder(ran)})
    assert ran == []


# what a contender of the user's returns: (id, values, exception); checked when it returns
RETURNS = [
    ("NaN", lambda items: np.full(items.index.size, np.nan), ValueError),
    ("inf", lambda items: np.full(items.index.size, np.inf), ValueError),
    ("-inf", lambda items: np.full(items.index.size, -np.inf), ValueError),
    ("one value too many", lambda items: np.zeros(items.index.size + 1), ValueError),
    ("a 2-D array", lambda items: np.zeros((items.index.size, 2)), ValueError),
    ("strings", lambda items: np.array(["a"] * items.index.size), TypeError),
    ("a dict without the AUROC's values", lambda items: {"score": np.zeros(items.index.size)},
     ValueError),
]


@pytest.mark.parametrize("values,error", [c[1:] for c in RETURNS], ids=[c[0] for c in RETURNS])
def test_a_bad_value_names_the_contender(ran, values, error):
    with pytest.raises(error, match="'mine'"):
        _call(ran, contenders={"mine": _recorder(ran, values), "other": _recorder(ran)},
              tuning=0)
    assert ran == [("own", "test")]  # the first contender's call, nothing after it


def test_a_metric_of_its_own_names_the_built_in_that_lacks_it(ran):
    mine = Metric("my score", bounds=(0.0, 1.0))
    with pytest.raises(ValueError, match="`metrics`.*'score_norm'.*my score"):
        _call(ran, contenders={"score_norm": "score_norm", "mine": _recorder(ran)}, tuning=0,
              metrics=(mine,))
    assert ran == []
