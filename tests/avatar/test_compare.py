"""``avatar.compare``: the study's comparison on a user's graph pair, and the binary's
comparison section equal to it on the smoke problem."""

import jax
import networkx as nx
import numpy as np
import pytest

from jaxlab import avatar
from jaxlab.avatar import comparison, tasks
from jaxlab.core import protocol, sharding
from jaxlab.core.protocol import Contender, Goal


def _smoke():
    from experiments import avatar as avatar_experiment
    from experiments.configs import avatar as cfg

    return avatar_experiment, cfg.get_config("smoke")


@pytest.fixture(scope="module")
def user_task():
    """A graph of the user's (not a built-in task) with its noisy permuted copy, at the
    smoke problem's shapes (34 nodes, 8 features), so its runs reuse the smoke program."""
    g = nx.connected_watts_strogatz_graph(34, 4, 0.3, seed=1)
    return tasks.graph_pair(g, seed=0, edge_noise=0.2, feat_dim=8, feat_noise=2.0)


@pytest.mark.heavy
def test_binary_and_compare_give_the_same_comparison():
    """The binary's smoke unit (``task_study``) and its summary's comparison section equal
    ``avatar.compare`` on the same task, keys and settings (seconds apart)."""
    avatar_experiment, c = _smoke()
    result = avatar_experiment.task_study(c, "karate")
    task = avatar_experiment.build_task("karate", c)
    for p, pr in enumerate(c.protocols):
        binary = avatar_experiment.comparison_dict(avatar_experiment.task_comparison(c, result, p))
        public = avatar.compare(jax.random.key(c.seed), task, contenders=c.strategies,
                                tuning=0, seeds=c.num_seeds, progress=False,
                                **avatar_experiment.run_settings(c, "karate", pr))
        assert avatar_experiment.comparison_dict(public) == binary, pr
        assert [(d["a"], d["b"]) for d in binary["differences"]] == [("avatar-gain", "random")]
        # the unit's own per-seed final MRRs are the compared values
        np.testing.assert_array_equal(binary["contenders"]["random"]["values"],
                                      result["metrics"][p, 0, 1, :, -1].astype(np.float64))


def test_compare_on_a_user_graph(user_task, tmp_path):
    """Built-in and own contenders on the user's task: the own contender's grid is tuned on
    the tuning seeds only; each built-in value is the run of its item's key (the padded
    third seed included); pairs, goals, one compile, per-seed lines on disk."""
    avatar_experiment, c = _smoke()
    settings = avatar_experiment.run_settings(c, "user", "paper")
    seen = []

    def own(items, task, *, w):
        seen.append((items.split, items.index.tolist(), w))
        return np.full(items.index.size, 0.5 - abs(w - 0.2) if items.split == "tuning" else w)

    key = jax.random.key(7)
    path = tmp_path / "seeds.jsonl"
    out = avatar.compare(key, user_task,
                         contenders={"avatar-gain": "avatar-gain", "random": "random",
                                     "mine": Contender(own, ({"w": 0.0}, {"w": 0.2}))},
                         tuning=2, seeds=3, progress=False, results_path=path, **settings)
    # tuning: only the grid of several points runs on the tuning seeds; batch = 2 seeds
    assert seen == [("tuning", [0, 1], 0.0), ("tuning", [0, 1], 0.2), ("test", [0, 1], 0.2),
                    ("test", [2], 0.2)]
    assert out.contenders["mine"].params == {"w": 0.2}
    assert out.contenders["avatar-gain"].tuning == ()
    # each built-in value: the item's key through the program (padding dropped)
    table = comparison.strategy_table(["avatar-gain", "random"])
    keys = protocol.item_keys(key, "test", np.arange(3))
    for j, name in enumerate(("avatar-gain", "random")):
        def run(k, j=j):  # the keys placed as the binary places them
            return comparison.final_values(comparison.run_seeds(
                sharding.shard_batch(k, c.mesh_shape), user_task, table, j, **settings))
        first, last = run(keys[:2]), run(keys[np.array([2, 2])])
        np.testing.assert_array_equal(out.contenders[name].values, [*first, last[0]])
        assert all(0.0 <= v <= 1.0 for v in out.contenders[name].values)
    pairs = [(d.a, d.b) for d in out.differences]
    assert pairs == [("avatar-gain", "random"), ("avatar-gain", "mine")]
    for d in out.differences:  # paired: the mean of the per-seed differences
        diff = out.contenders[d.a].values - out.contenders[d.b].values
        np.testing.assert_allclose(d.value, diff.mean(), atol=1e-12)
        assert d.wins == int((diff > 0).sum()) and d.losses == int((diff < 0).sum())
        assert d.low - 1e-12 <= d.value <= d.high + 1e-12
    assert [(g.goal.a, g.goal.b, g.goal.margin) for g in out.goals] == [
        (a, b, 0.0) for a, b in pairs]
    assert all(g.met == (g.low > 0) for g in out.goals)
    # one program for both built-ins: whatever the first call compiled, the second reuses
    assert out.contenders["random"].compile_s <= max(0.25 * out.contenders[
        "avatar-gain"].compile_s, 0.5)
    lines = path.read_text().splitlines()
    assert len(lines) == 8  # 2 tuning calls + 3 contenders x 2 test calls, as they finished
    text = out.table()
    assert "final mrr" in text and "3 paired test items, tuned on 2" in text


def test_own_contenders_and_declared_pairs(user_task):
    """Contenders of the user's own run with the task and the items' keys; the declared
    pairs are AvAtar's against the others, else the first against each other one."""
    seen = []

    def own(shift):
        def run(items, task, **params):
            seen.append((items.split, items.index.tolist(), tasks.num_pairs(task)))
            noise = jax.vmap(lambda k: jax.random.uniform(k))(items.keys)
            return np.asarray(noise, np.float64) * 0.1 + shift
        return run

    out = avatar.compare(jax.random.key(5), user_task,
                         contenders={"avatar-mine": Contender(own(0.6)),
                                     "a": Contender(own(0.5)), "b": Contender(own(0.2))},
                         tuning=0, seeds=4, progress=False)
    assert seen == [("test", [0, 1, 2, 3], 34)] * 3
    assert [(d.a, d.b) for d in out.differences] == [("avatar-mine", "a"), ("avatar-mine", "b")]
    np.testing.assert_allclose([d.value for d in out.differences], [0.1, 0.4], atol=1e-9)
    assert all(g.met for g in out.goals)
    out = avatar.compare(jax.random.key(5), user_task,
                         contenders={"a": Contender(own(0.5)), "b": Contender(own(0.2)),
                                     "c": Contender(own(0.9))},
                         tuning=0, seeds=4, goals=[Goal("c", "a", 0.3)], progress=False)
    assert [(d.a, d.b) for d in out.differences] == [("a", "b"), ("a", "c")]
    assert [g.met for g in out.goals] == [True]
    assert comparison.declared_pairs(["AvAtar", "random", "entropy"], ours=["AvAtar"]) == (
        ("AvAtar", "random"), ("AvAtar", "entropy"))
    assert comparison.declared_pairs(["avatar-official", "avatar-gain", "random"]) == (
        ("avatar-official", "random"), ("avatar-gain", "random"))


def test_declared_grids_follow_the_task_and_aligner(user_task):
    assert comparison.default_grid("avatar") == tuple({"score": s} for s in avatar.SCORES)
    assert comparison.default_grid("avatar-official") == ({},)
    assert comparison.default_grid("density") == ({},)
    graph = tasks.as_graph_task(user_task)  # gain is not defined on a GraphTask
    assert {"score": "gain"} not in comparison.default_grid("avatar", graph)
    assert {"score": "gain"} not in comparison.default_grid("avatar", solver="parrot")
    table = comparison.strategy_table(["avatar", "avatar-official", "random"])
    assert table == (*(("avatar", s) for s in avatar.SCORES), ("random", "abs"))


def test_bad_input_names_the_argument(user_task):
    key = jax.random.key(0)
    kw = dict(tuning=0, seeds=2, progress=False)
    with pytest.raises(TypeError, match="task"):
        avatar.compare(key, np.eye(4), **kw)
    with pytest.raises(ValueError, match="contenders"):
        avatar.compare(key, user_task, contenders=("avatar-nope", "random"), **kw)
    with pytest.raises(TypeError, match="contenders"):
        avatar.compare(key, user_task, contenders="random", **kw)
    with pytest.raises(TypeError, match="contenders"):
        avatar.compare(key, user_task, contenders={"x": lambda i, t: i.index}, **kw)
    with pytest.raises(TypeError, match="settings.*roundz"):
        avatar.compare(key, user_task, contenders=("random",), roundz=3, **kw)
    with pytest.raises(ValueError, match="field"):
        avatar.compare(key, user_task, contenders=("random",), field="queried", **kw)
    with pytest.raises(ValueError, match="seeds"):
        avatar.compare(key, user_task, contenders=("random",), tuning=0, seeds=1)
    with pytest.raises(ValueError, match="tuning"):  # avatar's score grid needs tuning seeds
        avatar.compare(key, user_task, **kw)
    with pytest.raises(ValueError, match="name"):
        comparison.default_grid("nope")
    res = avatar.ActiveResult(*([None] * len(avatar.ActiveResult._fields)))._replace(
        metrics={"mrr": np.ones((2, 3))})
    np.testing.assert_array_equal(comparison.final_values(res), [1.0, 1.0])
    with pytest.raises(ValueError, match="metric"):
        comparison.final_values(res, "hits@7")
    with pytest.raises(ValueError, match="field"):
        comparison.final_values(res, field="anchors")
