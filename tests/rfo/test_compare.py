"""``rfo.compare``: the study's protocol on any task, and the binary's summary through it.

The default run replaces the trainers by a cheap stand-in (an ``Algorithm`` whose returns
are random walks of the update keys, drifting by the config's learning rate), so the
seed keys, chunking, evaluation schedule, metrics and the paired analysis are checked in
seconds against numpy; the ``slow`` test trains the real trainers through the binary and
through ``rfo.compare`` and asserts identical comparisons of both metrics.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pytest.importorskip("brax")

from experiments import rfo as experiment  # noqa: E402
from experiments.configs import rfo as rfo_cfg  # noqa: E402
from experiments.lib import exported, study  # noqa: E402
from jaxlab import rfo  # noqa: E402
from jaxlab.core import metrics, protocol  # noqa: E402
from jaxlab.core.types import Algorithm  # noqa: E402
from jaxlab.rfo import trainers  # noqa: E402
from jaxlab.rfo.train import Info  # noqa: E402

DRIFT = {"rfo": 3.0, "shac_gaussian": 1.0, "apg": 0.0, "ppo": 2.0}


def _fake_make_trainer(task, cfg):
    """Return after update u: the walk of N(0, 1) steps drawn from the update keys plus
    ``cfg.lr * 1000`` per update; evaluations see the same value, skipped ones NaN."""
    del task
    drift = float(cfg.lr) * 1000.0

    def init(key):
        return jax.random.normal(key, ())

    def step(key, state, do_eval=True):
        state = state + drift + jax.random.normal(key, ())
        ev = jnp.where(do_eval, state, jnp.nan)
        return state, Info(state, ev, jnp.float32(1.0), jnp.float32(0.0))

    return Algorithm(init, step)


def _fake_walk(keys, cfg, num_updates):
    """numpy reference of the stand-in's eval returns [n, num_updates]."""
    out = []
    for k in keys:
        k_init, k_steps = jax.random.split(k)
        s = float(jax.random.normal(k_init, ()))
        row = []
        for u in range(num_updates):
            s = np.float32(s + np.float32(cfg.lr * 1000.0)
                           + np.float32(jax.random.normal(jax.random.fold_in(k_steps, u), ())))
            row.append(s)
        out.append(row)
    return np.asarray(out, np.float64)


def _settings(**kw):
    base = dict(env_steps=8 * 4 * 6, num_envs=8, horizon=4, hidden=8, eval_horizon=4,
                episode_length=8, chunks=2, eval_every=2)
    return rfo.Settings(**{**base, **kw})


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(trainers, "make_trainer", _fake_make_trainer)
    monkeypatch.setattr(exported, "folder", lambda: None)  # keep stand-ins out of the cache


def _smoke(methods):
    cfg = rfo_cfg.get_config("smoke")
    cfg.methods = methods
    cfg.throughput.task = ""
    cfg.num_seeds = 3
    return cfg


def _row(public, metric):
    """The summary's comparison row of ``metric`` from a ``Comparison``: its dict without
    seconds, the other metrics or the per-seed records."""
    out = public[metric].to_dict(seconds=False)
    return {k: v for k, v in out.items() if k not in ("others", "records")}


@pytest.mark.heavy
def test_binary_summary_equals_public_compare(fake, tmp_path):
    """The binary's comparison rows (units, resumable chunks, exported programs) are
    ``rfo.compare`` on the same task key, contenders and settings, number for number."""
    cfg = _smoke(("rfo", "ppo"))
    summary = study.train_and_evaluate(experiment.EXPERIMENT, cfg, str(tmp_path))
    public = rfo.compare(experiment.task_key(cfg, "pendulum"), "pendulum",
                         contenders=cfg.methods, seeds=cfg.num_seeds,
                         settings=experiment.settings(cfg, "pendulum"), progress=False)
    assert public.metrics == rfo.METRICS
    for metric in rfo.METRICS:
        assert summary["comparison"]["pendulum"][metric] == _row(public, metric)
    rows = dict(experiment.headline(summary))
    text = rows["pendulum: declared paired differences of final eval return (3 seeds, "
                "paired bootstrap 95% CI)"]
    assert "rfo - ppo" in text


def test_compare_values_are_the_metrics_of_each_seeds_run(fake):
    """Per-seed values of both metrics (one run) and the kept curves against a numpy walk
    from the item keys; the difference and CI against ``metrics.bootstrap_ci`` of the
    paired differences."""
    key = jax.random.key(5)
    s = _settings()
    out = rfo.compare(key, "pendulum", contenders=("rfo", "ppo"), seeds=4, settings=s,
                      resamples=300, progress=False)
    keys = protocol.item_keys(key, "test", np.arange(4))
    for name in ("rfo", "ppo"):
        cfg, _ = rfo.contender_config(name, s)
        n_chunks, per, every = rfo.schedule(cfg.num_updates, s.chunks, s.eval_every)
        walk = _fake_walk(keys, cfg, n_chunks * per)[:, every - 1::every]
        np.testing.assert_allclose(out.contenders[name].values,
                                   walk[:, -max(1, walk.shape[1] // 10):].mean(1), rtol=1e-5)
        np.testing.assert_allclose(out["auc"].contenders[name].values, walk.mean(1),
                                   rtol=1e-5)
        np.testing.assert_allclose(out.records[name]["eval_return"], walk, rtol=1e-5)
    for metric in rfo.METRICS:
        a, b = (out[metric].contenders[n].values for n in ("rfo", "ppo"))
        point, lo, hi = metrics.bootstrap_ci(jax.random.fold_in(key, 2),
                                             lambda x, y: np.mean(x - y), (a, b), 300)
        d = out[metric].differences[0]
        np.testing.assert_allclose([d.value, d.low, d.high], [point, lo, hi], rtol=1e-12)
    assert out.metric == "final_return" and out.higher_is_better
    assert "rfo - ppo" in out.table()


def test_user_config_and_contender_and_tuning(fake, tmp_path):
    """A TrainConfig of the user's (``rfo.contender``), a hand-written Contender and a
    built-in with another grid, by mapping: the grid point with the larger drift wins on
    the tuning seeds; a declared goal with a large drift difference is met; per-seed values
    are written to the results file."""
    own = rfo.TrainConfig(policy="gaussian", num_envs=4, horizon=4, num_updates=6, lr=5e-3,
                          eval_horizon=4)
    seen = []

    def flat(items, task):
        seen.append((items.split, tuple(items.index), task.name))
        return {m: np.zeros(items.index.size) for m in rfo.METRICS}

    path = tmp_path / "seeds.jsonl"
    out = rfo.compare(jax.random.key(0), "pendulum",
                      contenders={"rfo": protocol.Builtin("rfo", ({"lr": 1e-3}, {"lr": 4e-3})),
                                  "mine": rfo.contender(own, _settings()),
                                  "flat": protocol.Contender(flat)},
                      tuning=2, seeds=3, settings=_settings(), metrics=("auc", "final_return"),
                      goals=[protocol.Goal("rfo", "flat", 1.0)], progress=False,
                      results_path=path)
    assert out.metrics == ("auc", "final_return")
    assert out.contenders["rfo"].params == {"lr": 4e-3}
    assert [p for p, _ in out.contenders["rfo"].tuning] == [{"lr": 1e-3}, {"lr": 4e-3}]
    assert seen == [("test", (0, 1, 2), "pendulum")]
    assert out.goals[0].met and out["final_return"].goals == ()  # a goal on the tuned metric
    assert [d.b for d in out.differences] == ["mine", "flat"]
    assert "flat" not in out.records and out.records["mine"]["eval_return"].shape[0] == 3
    # a start line, two tuning calls, three test calls
    assert len(path.read_text().splitlines()) == 1 + 2 + 3


def test_settings_as_a_dict_and_one_metric(fake):
    """``settings`` as a dict of its fields is the ``Settings``; one metric by name."""
    args = dict(contenders=("rfo", "ppo"), seeds=2, metrics=("auc",), progress=False)
    by_dict = rfo.compare(jax.random.key(1), "pendulum", settings=_settings()._asdict(), **args)
    by_tuple = rfo.compare(jax.random.key(1), "pendulum", settings=_settings(), **args)
    assert by_dict.metrics == ("auc",)
    assert by_dict.to_dict(seconds=False) == by_tuple.to_dict(seconds=False)


@pytest.mark.parametrize("kwargs, match", [
    ({"problem": "no_such_task"}, "problem"),
    ({"problem": 3}, "problem"),
    ({"contenders": "rfo"}, "contenders"),
    ({"contenders": ("rfo", "sac")}, "contenders\\['sac'\\]"),
    ({"contenders": {"a": 1.0}}, "contenders\\['a'\\]"),
    ({"metrics": ("median",)}, "metrics"),
    ({"settings": {"num_env": 4}}, "settings"),
    ({"seeds": 1}, "seeds"),
])
def test_bad_calls_name_the_argument(kwargs, match):
    args = {"problem": "pendulum", "contenders": ("rfo", "ppo"), "seeds": 2,
            "progress": False, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        rfo.compare(jax.random.key(0), args.pop("problem"), **args)


def test_contender_rejects_unknown_grid_fields_and_configs():
    with pytest.raises(ValueError, match="grid"):
        rfo.contender(rfo.TrainConfig(), grid=({"learning_rate": 1e-3},))
    with pytest.raises(ValueError, match="grid"):
        rfo.contender(rfo.TrainConfig(), grid=({"lr": -1.0},))
    with pytest.raises(TypeError, match="config"):
        rfo.contender("rfo")
    with pytest.raises(ValueError, match="name"):
        rfo.contender_config("sac")


def test_contender_configs_share_the_budget():
    s = rfo.Settings()
    steps = {}
    for name in rfo.CONTENDERS:
        cfg, per_update = rfo.contender_config(name, s)
        steps[name] = cfg.num_updates * per_update
    assert all(v == s.env_steps for v in steps.values()), steps
    apg, _ = rfo.contender_config("apg", s)
    assert (apg.critic, apg.episode_length, apg.grad_clip_mode) == (False, 0, "elementwise")


def test_schedule_rounds_up_and_evaluates_the_last_update():
    assert rfo.schedule(10, 4, 3) == (4, 3, 3)
    assert rfo.schedule(12, 4, 2) == (4, 3, 1)
    assert rfo.schedule(2, 5, 10) == (2, 1, 1)
    for bad in ({"num_updates": 0}, {"chunks": 0}, {"eval_every": 0}):
        args = {"num_updates": 4, "chunks": 2, "eval_every": 1, **bad}
        with pytest.raises(ValueError, match=next(iter(bad))):
            rfo.schedule(**args)


def test_metrics_against_numpy():
    ev = np.arange(40.0).reshape(2, 20)
    np.testing.assert_allclose(rfo.final_return(ev), ev[:, -2:].mean(1))
    np.testing.assert_allclose(rfo.auc(ev), ev.mean(1))
    np.testing.assert_allclose(rfo.final_return(ev[:, :3]), ev[:, 2])
    curves = rfo.Curves(np.arange(20), np.arange(20), ev, ev, ev)
    got = curves.metrics()
    assert tuple(got) == rfo.METRICS
    np.testing.assert_allclose(got["final_return"], ev[:, -2:].mean(1))
    np.testing.assert_allclose(got["auc"], ev.mean(1))


@pytest.mark.slow
def test_binary_summary_equals_public_compare_real_trainers(tmp_path):
    """As the first test, with the real trainers (the binary through its exported
    programs, ``rfo.compare`` through jit): minutes of MJX compiling on a CPU."""
    cfg = _smoke(("rfo", "ppo"))
    cfg.num_seeds = 2
    summary = study.train_and_evaluate(experiment.EXPERIMENT, cfg, str(tmp_path))
    public = rfo.compare(experiment.task_key(cfg, "pendulum"), "pendulum",
                         contenders=cfg.methods, seeds=cfg.num_seeds,
                         settings=experiment.settings(cfg, "pendulum"), progress=False)
    for metric in rfo.METRICS:
        assert summary["comparison"]["pendulum"][metric] == _row(public, metric)


def _guide_block():
    """The root and the text of the guide's protocol block (docs/_protocol/rfo.rst, which
    docs/rfo.rst includes under "The paper's protocol on your problem")."""
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(root, "docs", "rfo.rst")) as f:
        guide = f.read()
    head = guide.index("The paper's protocol on your problem\n")
    assert guide.index(".. include:: _protocol/rfo.rst", head) < guide.index("\nAPI\n", head)
    with open(os.path.join(root, "docs", "_protocol", "rfo.rst")) as f:
        return root, f.read()


def test_guide_protocol_block_is_short_and_imports_no_private_name():
    """The guide's protocol block: at most 15 lines of code beyond defining the task (its
    XML and ``new_task``), a user-defined task (no built-in name), and no name that starts
    with ``_`` imported by it or by the quickstart."""
    import doctest
    import os
    import re

    root, section = _guide_block()
    examples = doctest.DocTestParser().get_examples(section)
    code = [ln for e in examples for ln in e.source.splitlines()]
    problem = [ln for e in examples if e.source.startswith(("XML", "swing"))
               for ln in e.source.splitlines()]
    assert 0 < len(code) - len(problem) <= 15
    assert any("rfo.compare(" in ln for ln in code)
    assert not any(f'"{t}"' in section for t in rfo.TASK_NAMES)
    with open(os.path.join(root, "docs", "_quickstart", "rfo.rst")) as f:
        quick = [ln for e in doctest.DocTestParser().get_examples(f.read())
                 for ln in e.source.splitlines()]
    for ln in code + quick:
        for m in re.finditer(r"\bimport\s+([\w., ]+)|\bfrom\s+\S+\s+import\s+([\w., ]+)", ln):
            names = [n.strip().split(" as ")[0] for g in m.groups() if g for n in g.split(",")]
            assert not any(n.split(".")[-1].startswith("_") for n in names), ln


@pytest.mark.slow
def test_guide_protocol_block_runs_whole():
    """The guide's block with its skipped lines run: every default contender trains on the
    user's task and the table prints (several minutes of MJX compiling on a CPU)."""
    import doctest

    _, section = _guide_block()
    text = section.replace("  # doctest: +SKIP", "")
    test = doctest.DocTestParser().get_doctest(text, {}, "rfo protocol", "rfo.rst", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_guide_protocol_block_runs_whole_with_stand_in_trainers(fake):
    """The guide's block with its skipped lines run, the trainers replaced by the stand-in:
    the call as written is accepted and the table prints as shown (seconds)."""
    import doctest

    _, section = _guide_block()
    text = section.replace("  # doctest: +SKIP", "")
    test = doctest.DocTestParser().get_doctest(text, {}, "rfo protocol", "rfo.rst", 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
