"""Misuse of ``rfo.compare``: every call raises ValueError / TypeError naming the argument
(or the contender), and, where the input allows it, before any contender runs.

No trainer ever runs here: ``seeds.train_seeds`` is replaced by a function that fails the
test, and each call carries a recording contender listed first, so a check made after a
contender started shows as a recorded call. The task is a stand-in without physics (it is
only passed to the contenders).
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax")

from jaxlab import rfo  # noqa: E402
from jaxlab.core.protocol import Builtin, Contender, Goal, Metric  # noqa: E402
from jaxlab.rfo import seeds  # noqa: E402

TASK = rfo.new_task("misuse_stand_in", None, n_frames=1, obs_fn=lambda ps: ps,
                    reward_fn=lambda ps0, ps1, a: 0.0, obs_dim=1, act_dim=1,
                    reset_fn=lambda key: (jnp.zeros(1), jnp.zeros(1)))


@pytest.fixture
def calls(monkeypatch):
    """The items each contender was called on; the built-ins' training fails the test."""
    seen = []

    def no_training(*args, **kwargs):
        raise AssertionError("a built-in contender started training")

    monkeypatch.setattr(seeds, "train_seeds", no_training)
    return seen


def _probe(seen):
    def run(items, task):
        seen.append(items.split)
        return {m: np.zeros(items.index.size) for m in rfo.METRICS}

    return Contender(run)


def _compare(seen, problem=TASK, contenders=None, **kw):
    """``rfo.compare`` with the probe first, then ``contenders`` (default: the built-in
    RFO), two seeds, no progress lines."""
    cs = {"probe": _probe(seen), **({"rfo": "rfo"} if contenders is None else contenders)}
    return rfo.compare(jax.random.key(0), problem, contenders=cs,
                       **{"seeds": 2, "progress": False, **kw})


BEFORE = [
    # contenders
    ("unknown built-in name", dict(contenders={"sac": "sac"}), ValueError, r"contenders\['sac'\]"),
    ("Builtin of an unknown name", dict(contenders={"x": Builtin("sac")}), ValueError,
     r"contenders\['x'\]"),
    ("None for the built-in", dict(contenders={"rfo": None}), TypeError,
     r"contenders\['rfo'\]"),
    ("a TrainConfig directly (use rfo.contender)",
     dict(contenders={"mine": rfo.TrainConfig()}), TypeError, r"contenders\['mine'\]"),
    ("a number as contender", dict(contenders={"a": 1.0}), TypeError, r"contenders\['a'\]"),
    ("an empty name", dict(contenders={"": "rfo"}), TypeError, "`contenders` names"),
    ("grid field the config lacks",
     dict(contenders={"rfo": Builtin("rfo", ({"learning_rate": 1e-3},))}), ValueError,
     r"contenders\['rfo'\]"),
    ("grid one dict", dict(contenders={"rfo": Builtin("rfo", {"lr": 1e-3})}), ValueError,
     r"contenders\['rfo'\]"),
    ("grid empty", dict(contenders={"rfo": Builtin("rfo", ())}), ValueError,
     r"contenders\['rfo'\]"),
    ("grid repeats a point",
     dict(contenders={"rfo": Builtin("rfo", ({"lr": 1e-3}, {"lr": 1e-3}))}), ValueError,
     r"contenders\['rfo'\]"),
    ("grid of several points, no tuning seeds",
     dict(contenders={"rfo": Builtin("rfo", ({"lr": 1e-3}, {"lr": 3e-3}))}), ValueError,
     "`tuning`"),
    ("user run lacks a grid keyword",
     dict(contenders={"own": Contender(lambda items, task: None, ({"lr": 1.0},))}),
     ValueError, r"contenders\['own'\]"),
    ("user run needs a keyword its grid never sets",
     dict(contenders={"own": Contender(lambda items, task, lr: None)}), ValueError,
     r"contenders\['own'\]"),
    ("user run not callable", dict(contenders={"own": Contender(3)}), TypeError,
     r"contenders\['own'\]"),
    # problem
    ("unknown task name", dict(problem="walker"), ValueError, "`problem`"),
    ("problem a number", dict(problem=3), TypeError, "`problem`"),
    ("problem a TrainConfig", dict(problem=rfo.TrainConfig()), TypeError, "`problem`"),
    # settings
    ("settings a list", dict(settings=[1, 2]), TypeError, "`settings`"),
    ("settings dict with an unknown field", dict(settings={"num_env": 4}), ValueError,
     "`settings`"),
    ("settings.num_envs 0", dict(settings={"num_envs": 0}), ValueError,
     "`settings.num_envs`"),
    ("settings.env_steps a float", dict(settings={"env_steps": 2.5}), ValueError,
     "`settings.env_steps`"),
    ("settings.episode_length -1", dict(settings={"episode_length": -1}), ValueError,
     "`settings.episode_length`"),
    ("settings.chunks 0", dict(settings={"chunks": 0}), ValueError, "`settings.chunks`"),
    ("settings.lr negative (RFO's config)", dict(settings={"lr": -1.0}), ValueError,
     "`settings`.*'rfo'"),
    ("settings.ppo_minibatches not dividing a rollout",
     dict(contenders={"ppo": "ppo"}, settings={"ppo_minibatches": 7}), ValueError,
     "`settings`.*'ppo'"),
    ("settings.chunk not dividing the horizon (chunked RFO)",
     dict(contenders={"rfo_chunked": "rfo_chunked"}, settings={"chunk": 5}), ValueError,
     "`settings`.*'rfo_chunked'"),
    ("settings.gamma above one", dict(settings={"gamma": 1.5}), ValueError,
     "`settings`.*'rfo'"),
    # metrics
    ("unknown metric", dict(metrics=("median",)), ValueError, "`metrics`"),
    ("one metric as a string", dict(metrics="auc"), TypeError, "`metrics`"),
    ("a metric twice", dict(metrics=("auc", "auc")), ValueError, "`metrics`"),
    ("no metrics", dict(metrics=()), ValueError, "`metrics`"),
    ("a Metric with empty bounds", dict(metrics=(Metric("m", bounds=(1.0, 1.0)),)),
     ValueError, "bounds"),
    # goals and pairs
    ("goal naming an unknown contender", dict(goals=[Goal("rfo", "ppo")]), ValueError,
     "`goals`"),
    ("goal of a contender against itself", dict(goals=[Goal("rfo", "rfo")]), ValueError,
     "`goals`"),
    ("one Goal, not a sequence", dict(goals=Goal("rfo", "probe")), TypeError, "`goals`"),
    ("goal margin NaN", dict(goals=[Goal("rfo", "probe", math.nan)]), ValueError,
     "`goals`"),
    ("pair naming an unknown contender", dict(pairs=[("rfo", "ppo")]), ValueError,
     "`pairs`"),
    ("pair of a contender with itself", dict(pairs=[("rfo", "rfo")]), ValueError, "`pairs`"),
    ("a pair twice", dict(pairs=[("rfo", "probe"), ("rfo", "probe")]), ValueError,
     "`pairs`"),
    # counts, CI, batch, progress
    ("tuning True", dict(tuning=True), TypeError, "`tuning`"),
    ("tuning negative", dict(tuning=-1), ValueError, "`tuning"),
    ("seeds 1", dict(seeds=1), ValueError, "`seeds`"),
    ("seeds a float", dict(seeds=2.0), TypeError, "`seeds`"),
    ("resamples 1", dict(resamples=1), ValueError, "`resamples`"),
    ("level 1.5", dict(level=1.5), ValueError, "`level`"),
    ("level a bool", dict(level=True), TypeError, "`level`"),
    ("batch 0", dict(batch=0), ValueError, "`batch`"),
    ("progress a string", dict(progress="yes"), TypeError, "`progress`"),
]


@pytest.mark.parametrize("what, kwargs, error, match", BEFORE, ids=[c[0] for c in BEFORE])
def test_refused_before_any_contender_runs(calls, what, kwargs, error, match):
    with pytest.raises(error, match=match):
        _compare(calls, **kwargs)
    assert calls == [], what


def test_sequence_misuse_names_the_argument(calls):
    for contenders, error in ((("rfo", "rfo"), ValueError), ((), ValueError),
                              ("rfo", TypeError), (("rfo", 3), TypeError)):
        with pytest.raises(error, match="`contenders"):
            rfo.compare(jax.random.key(0), TASK, contenders=contenders, progress=False)


def test_results_path_refused_before_any_contender_runs(calls, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    for path in (tmp_path, blocker / "sub" / "results.jsonl", 3):
        with pytest.raises((ValueError, TypeError), match="`results_path`"):
            _compare(calls, results_path=path)
    assert calls == []


def test_contender_factory_misuse():
    cfg = rfo.TrainConfig()
    cases = [(lambda: rfo.contender("rfo"), TypeError, "`config`"),
             (lambda: rfo.contender(cfg, {"chunks": 2}), TypeError, "`settings`"),
             (lambda: rfo.contender(cfg, rfo.Settings(eval_every=0)), ValueError,
              "`settings.eval_every`"),
             (lambda: rfo.contender(cfg, grid={"lr": 1e-3}), TypeError, "`grid`"),
             (lambda: rfo.contender(cfg, grid=()), TypeError, "`grid`"),
             (lambda: rfo.contender(cfg, grid=("lr",)), TypeError, "`grid`"),
             (lambda: rfo.contender(cfg, grid=({"learning_rate": 1e-3},)), ValueError,
              "`grid`"),
             (lambda: rfo.contender(cfg, grid=({"lr": -1.0},)), ValueError, "`grid`"),
             (lambda: rfo.contender(cfg._replace(num_envs=0)), ValueError, "`config`"),
             (lambda: rfo.contender_config("sac"), ValueError, "`name`")]
    for make, error, match in cases:
        with pytest.raises(error, match=match):
            make()


def _returning(value):
    return Contender(lambda items, task: value(items.index.size))


DURING = [
    ("NaN", lambda n: {m: np.full(n, np.nan) for m in rfo.METRICS}, ValueError, "NaN"),
    ("+inf", lambda n: {m: np.full(n, np.inf) for m in rfo.METRICS}, ValueError, "inf"),
    ("-inf (no censoring)", lambda n: {m: np.full(n, -np.inf) for m in rfo.METRICS},
     ValueError, "censor"),
    ("wrong shape", lambda n: {m: np.zeros(n + 1) for m in rfo.METRICS}, ValueError,
     "shape"),
    ("strings", lambda n: {m: np.array(["a"] * n) for m in rfo.METRICS}, TypeError, "dtype"),
    ("one array for two metrics", lambda n: np.zeros(n), ValueError, "dict"),
    ("no auc", lambda n: {"final_return": np.zeros(n)}, ValueError, "auc"),
    ("a record without the item axis",
     lambda n: {**{m: np.zeros(n) for m in rfo.METRICS}, "curve": np.zeros(3)}, ValueError,
     "record"),
]


@pytest.mark.parametrize("what, value, error, match", DURING, ids=[c[0] for c in DURING])
def test_bad_values_name_the_contender(calls, what, value, error, match):
    with pytest.raises(error, match=match) as info:
        _compare(calls, contenders={"mine": _returning(value)})
    assert "'mine'" in str(info.value), what


def test_builtin_grid_value_out_of_range_names_the_contender_before_training(calls):
    """A built-in's grid of another value range is known to its ``run`` only: it is refused
    there, naming the contender and the point, before that contender trains."""
    with pytest.raises(ValueError, match=r"contender 'rfo' at grid point \{'lr': -1.0\}"):
        _compare(calls, contenders={"rfo": Builtin("rfo", ({"lr": -1.0},))})
