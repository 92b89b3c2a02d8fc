"""``avatar.compare``: the study's comparison on a user's graph pair, every metric line from
one run, and the binary's comparison section equal to it on the smoke problem."""

import jax
import networkx as nx
import numpy as np
import pytest

from jaxlab import avatar
from jaxlab.avatar import comparison, tasks
from jaxlab.core import protocol
from jaxlab.core.protocol import Builtin, Contender, Goal


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


def _without_records(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "records"}


@pytest.mark.heavy
def test_binary_and_compare_give_the_same_comparison():
    """The binary's smoke unit (``task_study``) and its summary's comparison section (the
    paper's, never-queried and removal-only lines) equal ``avatar.compare`` on the same task,
    keys and settings (seconds and per-seed records apart)."""
    avatar_experiment, c = _smoke()
    result = avatar_experiment.task_study(c, "karate")
    task = avatar_experiment.build_task("karate", c)
    for p, pr in enumerate(c.protocols):
        binary = avatar_experiment.comparison_dict(avatar_experiment.task_comparison(c, result, p))
        public = avatar.compare(jax.random.key(c.seed), task, contenders=c.strategies,
                                tuning=0, seeds=c.num_seeds, progress=False,
                                settings=avatar_experiment.run_settings(c, "karate", pr))
        assert _without_records(avatar_experiment.comparison_dict(public)) == binary, pr
        assert binary["metric"] == "mrr"
        assert set(binary["others"]) == {"never-queried mrr", "removal-only mrr"}
        assert [(d["a"], d["b"]) for d in binary["differences"]] == [("avatar-gain", "random")]
        # the unit's own per-seed values are the compared values, line by line
        np.testing.assert_array_equal(binary["contenders"]["random"]["values"],
                                      result["metrics"][p, 0, 1, :, -1].astype(np.float64))
        np.testing.assert_array_equal(
            binary["others"]["never-queried mrr"]["contenders"]["random"]["values"],
            result["heldout"][p, 0, 1, :, -1].astype(np.float64))
        np.testing.assert_array_equal(
            binary["others"]["removal-only mrr"]["contenders"]["random"]["values"],
            result["removal"][p, 0, 1].astype(np.float64))


def test_compare_on_a_user_graph(user_task, tmp_path):
    """Built-in and own contenders on the user's task: the own contender's grid is tuned on
    the tuning seeds only; each built-in value is the run of its item's key (the padded
    third seed included), every metric line from that one run; pairs, goals, one compile,
    per-seed lines on disk."""
    avatar_experiment, c = _smoke()
    settings = avatar_experiment.run_settings(c, "user", "paper")
    seen = []

    def own(items, task, *, w):
        seen.append((items.split, items.index.tolist(), w))
        v = np.full(items.index.size, 0.5 - abs(w - 0.2) if items.split == "tuning" else w)
        return {"mrr": v, "never-queried mrr": v, "removal-only mrr": v}

    key = jax.random.key(7)
    path = tmp_path / "seeds.jsonl"
    out = avatar.compare(key, user_task,
                         contenders={"avatar-gain": "avatar-gain", "random": "random",
                                     "mine": Contender(own, ({"w": 0.0}, {"w": 0.2}))},
                         tuning=2, seeds=3, progress=False, results_path=path,
                         settings=settings)
    # tuning: only the grid of several points runs on the tuning seeds; batch = 2 seeds
    assert seen == [("tuning", [0, 1], 0.0), ("tuning", [0, 1], 0.2), ("test", [0, 1], 0.2),
                    ("test", [2], 0.2)]
    assert out.contenders["mine"].params == {"w": 0.2}
    assert out.contenders["avatar-gain"].tuning == ()
    assert out.metrics == comparison.DEFAULT_METRICS
    # each built-in value: the item's key through the program (padding dropped)
    table = (("avatar", "gain"), ("random", "abs"))
    keys = protocol.item_keys(key, "test", np.arange(3))
    for j, name in enumerate(("avatar-gain", "random")):
        def run(k, j=j):
            return comparison.final_values(comparison.run_seeds(k, user_task, table, j,
                                                                settings))
        first, last = run(keys[:2]), run(keys[np.array([2, 2])])
        for metric in comparison.DEFAULT_METRICS:
            np.testing.assert_array_equal(out[metric].contenders[name].values,
                                          [*first[metric], last[metric][0]])
            assert all(0.0 <= v <= 1.0 for v in out[metric].contenders[name].values)
        assert out.records[name]["mrr by round"].shape == (3, c.rounds + 1)
        np.testing.assert_array_equal(out.records[name]["mrr by round"][:, -1],
                                      out.contenders[name].values)
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
    assert len(lines) == 9  # the header, 2 tuning calls, 3 contenders x 2 test calls
    text = out.table()
    assert "never-queried mrr" in text and "3 paired test items, tuned on 2" in text


def test_removal_only_and_other_metrics_of_one_run(user_task):
    """Any declared metric by name (the removal-only line has no round axis), from the same
    runs: the removal-only MRR is the round-0 plan's, so it is the first round's MRR under
    the "fixed" protocol (its test set never changes)."""
    out = avatar.compare(jax.random.key(3), user_task,
                         contenders={"official": Builtin("avatar", ({"score": "official"},)),
                                     "random": "random"},
                         tuning=0, seeds=2, progress=False,
                         metrics=("removal-only mrr", "hits@10", "never-queried hits@1"),
                         settings={"rounds": 2, "protocol": "fixed"})
    assert out.metrics == ("removal-only mrr", "hits@10", "never-queried hits@1")
    assert out.contenders["official"].params == {"score": "official"}
    for name in ("official", "random"):
        by_round = out.records[name]["mrr by round"]
        # one float32 mean in two programs (inside and after the rounds' scan)
        np.testing.assert_allclose(out.contenders[name].values, by_round[:, 0], rtol=1e-6)


def test_final_values_of_every_line():
    """``final_values``: the last round of the round-indexed lines, the removal-only line
    as it is (one value per run)."""
    res = avatar.ActiveResult(*([None] * len(avatar.ActiveResult._fields)))._replace(
        metrics={"mrr": np.array([[0.1, 0.3], [0.2, 0.4]])},
        heldout_metrics={"hits@1": np.array([[0.0, 0.5], [0.5, 1.0]])},
        removal_metrics={"mrr": np.array([0.25, 0.75])})
    got = comparison.final_values(res, ("mrr", "never-queried hits@1", "removal-only mrr"))
    np.testing.assert_array_equal(got["mrr"], [0.3, 0.4])
    np.testing.assert_array_equal(got["never-queried hits@1"], [0.5, 1.0])
    np.testing.assert_array_equal(got["removal-only mrr"], [0.25, 0.75])
    with pytest.raises(ValueError, match="metrics"):
        comparison.final_values(res, ("hits@7",))


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
                         tuning=0, seeds=4, metrics=("mrr",), settings={"rounds": 2},
                         progress=False)
    assert seen == [("test", [0, 1, 2, 3], 34)] * 3
    assert [(d.a, d.b) for d in out.differences] == [("avatar-mine", "a"), ("avatar-mine", "b")]
    np.testing.assert_allclose([d.value for d in out.differences], [0.1, 0.4], atol=1e-9)
    assert all(g.met for g in out.goals)
    out = avatar.compare(jax.random.key(5), user_task,
                         contenders={"a": Contender(own(0.5)), "b": Contender(own(0.2)),
                                     "c": Contender(own(0.9))},
                         tuning=0, seeds=4, metrics=("mrr",), goals=[Goal("c", "a", 0.3)],
                         settings={"rounds": 2}, progress=False)
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
    # the built-in's declared grid on the task (a GraphTask: without gain)
    made = comparison.SPEC.contenders["avatar"](protocol.Context(
        graph, comparison.Settings(rounds=2), 1, 2, 2, comparison.METRICS[:1]))
    assert made.grid == ({"score": "abs"}, {"score": "official"})
