import functools
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import avatar as avatar_experiment
from jaxlab import avatar
from jaxlab.avatar import alignment, tasks
from tests.notebooks import run_notebook


@pytest.fixture(scope="module")
def karate():
    return tasks.real_graph_pair("karate", seed=0)


def test_tasks_truth_is_a_permutation_and_positions_align():
    for task in (tasks.synthetic_graph_pair(40, seed=1), tasks.point_cloud_pair(30, seed=1),
                 tasks.embedding_pair(30, seed=1)):
        n = task.num_nodes
        assert sorted(task.truth.tolist()) == list(range(n))
        assert task.pos1.shape == task.pos2.shape == (n, n)
    # Rigid motion, no noise: distance coordinates agree exactly under the true matching.
    pc = tasks.point_cloud_pair(30, seed=2, noise=0.0)
    np.testing.assert_allclose(pc.pos2[np.ix_(pc.truth, pc.truth)], pc.pos1, atol=1e-9)


def test_anchor_cost_pins_anchors(karate):
    n = karate.num_nodes
    mask = np.zeros(n, bool)
    mask[[0, 5]] = True
    c = np.asarray(jax.jit(alignment.anchor_cost)(karate, mask))
    for k in (0, 5):
        j = karate.truth[k]
        assert c[k, j] == 0.0
        assert np.all(np.delete(c[k], j) == c.max())
        assert np.all(np.delete(c[:, j], k) == c.max())


def test_metrics_against_brute_force():
    rng = np.random.default_rng(0)
    plan = rng.random((20, 20))
    truth = rng.permutation(20)
    ev = np.ones(20, bool)
    m = alignment.alignment_metrics(plan, truth, ev)
    r_st = [(plan[i] > plan[i, truth[i]]).sum() for i in range(20)]
    r_ts = [(plan[:, truth[i]] > plan[i, truth[i]]).sum() for i in range(20)]
    mrr = 0.5 * (np.mean(1 / (np.array(r_st) + 1)) + np.mean(1 / (np.array(r_ts) + 1)))
    np.testing.assert_allclose(m["mrr"], mrr, rtol=1e-6)
    h10 = 0.5 * (np.mean(np.array(r_st) < 10) + np.mean(np.array(r_ts) < 10))
    np.testing.assert_allclose(m["hits@10"], h10, rtol=1e-6)


# Every strategy (default score) as one table of ``run_active_switch``: the strategy is data
# (a traced index), so the loop tests below share one compiled program instead of one per
# strategy (``test_switch_run_equals_per_strategy_runs`` checks a table run against
# ``run_active``).
_TABLE = tuple((s, "abs") for s in avatar.STRATEGIES)
_LOOP = dict(rounds=3, test_frac=0.3, init_frac=0.2, budget_frac=0.3)


@pytest.mark.heavy
@pytest.mark.parametrize("strategy", avatar.STRATEGIES)
def test_queries_are_new_test_nodes_never_queried(karate, strategy):
    res = avatar.run_active_switch(jax.random.key(0), karate, _TABLE,
                                   avatar.STRATEGIES.index(strategy), **_LOOP)
    q = np.asarray(res.queried).ravel()
    test = np.asarray(res.test)
    assert len(set(q.tolist())) == q.size  # never queried twice
    assert not test[q].any()
    n = karate.num_nodes
    n_init = round(0.2 * n)
    assert int(res.anchors.sum()) == n_init + q.size
    assert not (res.anchors & res.test).any()
    assert res.metrics["mrr"].shape == (4,)


@pytest.mark.heavy
def test_more_anchors_improve_alignment_and_vmap_over_seeds():
    task = tasks.synthetic_graph_pair(60, seed=3)
    keys = jax.random.split(jax.random.key(1), 3)
    res = jax.vmap(lambda k: avatar.run_active(k, task, "avatar", rounds=4))(keys)
    mrr = np.asarray(res.metrics["mrr"])
    assert mrr.shape == (3, 5)
    assert np.all(mrr[:, -1] > mrr[:, 0])
    one = avatar.run_active(keys[1], task, "avatar", rounds=4)
    np.testing.assert_allclose(one.metrics["mrr"], mrr[1], rtol=1e-5)


@pytest.mark.heavy
def test_loop_returns_solver_flags_and_warns(karate):
    # The settings of the other loop tests (their compiled programs), epsilon traced.
    res = avatar.run_active(jax.random.key(0), karate, "avatar", **_LOOP)
    assert res.plan_converged.shape == res.plan_error.shape == (4,)
    assert res.cg_converged.shape == res.cg_residual.shape == (3,)
    assert np.all(np.asarray(res.cg_converged)) and np.all(np.asarray(res.cg_residual) < 1e-4)
    assert np.all(np.asarray(res.plan_error) < 1e-4)
    assert np.all(np.asarray(res.plan_converged))  # the defaults converge: no warning
    with pytest.warns(RuntimeWarning, match="epsilon"):
        bad = avatar.run_active(jax.random.key(0), karate, "random", epsilon=1e-5, **_LOOP)
    assert not np.any(np.asarray(bad.plan_converged))
    keys = jax.random.split(jax.random.key(0), 2)
    with pytest.warns(RuntimeWarning, match="did not converge"):  # under vmap: a callback
        jax.block_until_ready(jax.vmap(lambda k: avatar.run_active(
            k, karate, "random", rounds=1, budget_frac=0.1, epsilon=1e-5))(keys))


@pytest.mark.heavy
def test_fgw_solver_runs_in_the_loop(karate):
    res = avatar.run_active(jax.random.key(0), karate, "avatar", solver="fgw", rounds=2,
                            budget_frac=0.1)
    assert np.all(np.isfinite(res.metrics["mrr"]))


def test_bad_input(karate):
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="exceeds"):
        avatar.run_active(key, karate, budget_frac=0.5, test_frac=0.5, init_frac=0.2)
    with pytest.raises(ValueError, match="epsilon"):
        avatar.run_active(key, karate, epsilon=0.0)
    with pytest.raises(ValueError, match="strategy"):
        avatar.run_active(key, karate, "oracle")
    with pytest.raises(ValueError, match="task.pos2"):
        avatar.run_active(key, karate._replace(pos2=karate.pos2[:-1]))
    with pytest.raises(ValueError, match="rounds"):
        avatar.run_active(key, karate, rounds=0)
    with pytest.raises(ValueError, match="name"):
        tasks.real_graph_pair("facebook")


@pytest.mark.heavy
def test_smoke_experiment_writes_results(tmp_path):
    s, _ = run_notebook("avatar", tmp_path)  # colab/avatar.ipynb at smoke size
    assert os.path.getsize(tmp_path / "mrr_vs_round.png") > 1000
    assert set(s["tasks"]) == {"karate"}
    t = s["tasks"]["karate"]["protocols"]
    assert set(t) == {"paper", "fixed"}
    lines = {"avatar-gain - random" + label
             for label in ("", ", never queried", ", removal only")}
    assert set(t["paper"]["paired_final_mrr"]) == lines  # the three lines, paper protocol
    for pr in t.values():
        assert "avatar-gain - random" in pr["paired_final_mrr"]
        assert set(pr["paired_final_mrr"]) <= lines
        d = pr["paired_final_mrr"]["avatar-gain - random"]
        assert d["lo"] <= d["mean"] <= d["hi"]
        # the comparison section: protocol.analyse of the per-seed final MRRs, the
        # never-queried and removal-only lines beside the paper's
        cmp = pr["comparison"]
        assert cmp["metric"] == "mrr" and cmp["test_items"] == 2
        assert set(cmp.get("others", {})) <= {"never-queried mrr", "removal-only mrr"}
        for other, label in (("never-queried mrr", ", never queried"),
                             ("removal-only mrr", ", removal only")):
            if other in cmp.get("others", {}):
                assert cmp["others"][other]["differences"][0]["value"] == pr[
                    "paired_final_mrr"]["avatar-gain - random" + label]["mean"]
        assert [(g["a"], g["b"], g["margin"]) for g in cmp["goals"]] == [
            ("avatar-gain", "random", 0.0)]
        assert cmp["differences"][0]["value"] == d["mean"]
        assert "compile_s" not in cmp["contenders"]["random"]  # no timing in summary.json
        assert all(0.0 <= v <= 1.0 for v in pr["round0_picked_correct"].values())
    assert s["scaling"]["dense_over_cg"][0] > 0 and s["scaling"]["cholesky_over_cg"][0] > 0
    assert max(s["scaling"]["cholesky_residual"]) < 1e-4
    hard = s["scaling_hard"]  # non-uniform marginals, eps 0.01
    assert hard["epsilon"] == [0.01] and hard["cholesky_over_cg"][0] > 0
    assert max(hard["cholesky_residual"]) < 1e-3
    assert max(s["scaling"]["cg_residual"]) < 1e-5  # entropic_plan's CG tol is 1e-6
    rows = avatar_experiment.headline(s)
    assert any("picks already top-1 correct" in k for k, _ in rows)


@pytest.mark.heavy
def test_run_active_is_init_then_a_scan_of_step_then_evaluate(karate):
    """The public Algorithm reproduces run_active bit for bit (same keys, same ops)."""
    kw = _LOOP
    for strategy in ("avatar", "random"):
        key = jax.random.key(5)
        ref = avatar.run_active(key, karate, strategy, **kw)
        alg = avatar.active(karate, strategy, **kw)
        k_init, k_loop = jax.random.split(key)
        state = jax.jit(alg.init)(k_init)
        step = jax.jit(alg.step)
        infos = []
        for k in jax.random.split(k_loop, kw["rounds"]):
            state, info = step(k, state)
            assert avatar.loop.check_result(info)
            infos.append(info)
        last, res = jax.jit(avatar.evaluate)(state, karate)
        np.testing.assert_array_equal(state.anchors, ref.anchors)
        np.testing.assert_array_equal(state.test, ref.test)
        np.testing.assert_array_equal(np.stack([i.queried for i in infos]), ref.queried)
        for m in ref.metrics:
            got = np.array([float(i.metrics[m]) for i in infos] + [float(last[m])])
            np.testing.assert_allclose(got, ref.metrics[m], rtol=1e-6, atol=1e-7, err_msg=m)
        # The CG residuals are float32 round-off (the closed-over task is constant-folded
        # differently): both below the tolerance, not bit-equal.
        assert max(float(i.cg_residual) for i in infos) < 1e-4
        assert bool(res.converged) == bool(ref.plan_converged[-1])


@pytest.mark.heavy
def test_step_labels_the_best_unanchored_non_test_nodes(karate):
    # Compiled (op by op, the plan's solver alone is ~100 small programs).
    init = jax.jit(functools.partial(avatar.init, test_frac=0.3, init_frac=0.2))
    state = init(jax.random.key(0), karate)
    n = karate.num_nodes
    assert int(state.test.sum()) == round(0.3 * n) and int(state.anchors.sum()) == round(0.2 * n)
    assert not np.any(np.asarray(state.anchors & state.test))
    step = jax.jit(functools.partial(avatar.step, strategy="degree", num_queries=3))
    new, info = step(jax.random.key(1), state, karate)
    q = np.asarray(info.queried)
    free = ~np.asarray(state.anchors | state.test)
    best = np.argsort(-np.where(free, karate.degree, -np.inf), kind="stable")[:3]
    assert sorted(q.tolist()) == sorted(best.tolist())
    np.testing.assert_array_equal(np.asarray(new.anchors),
                                  np.asarray(state.anchors) | np.isin(np.arange(n), q))
    np.testing.assert_array_equal(new.test, state.test)
    assert set(info.metrics) == {"mrr", "hits@1", "hits@10", "hits@30", "hits@50"}


@pytest.mark.heavy
def test_algorithm_vmaps_over_seeds():
    from tests.avatar import api_example

    alg, init_args, step_args = api_example.build()
    keys = jax.random.split(jax.random.key(0), 3)
    # Compiled (eager vmap runs the solvers op by op: ~300 small programs instead of 3).
    states = jax.jit(jax.vmap(lambda k: alg.init(k, *init_args)))(keys)
    states, infos = jax.jit(jax.vmap(lambda k, s: alg.step(k, s, *step_args)))(keys, states)
    one, info = jax.jit(lambda k: alg.step(k, alg.init(k, *init_args), *step_args))(keys[2])
    np.testing.assert_array_equal(states.anchors[2], one.anchors)
    np.testing.assert_allclose(infos.metrics["mrr"][2], info.metrics["mrr"], rtol=1e-6)


@pytest.mark.heavy
def test_switch_run_equals_per_strategy_runs(karate):
    # One compiled program (traced strategy index) must reproduce each separate compiled
    # run. (Against eager op-by-op execution, two nodes with near-equal scores in karate
    # swap places within a round's top-k on jax 0.12: same set, same MRR.)
    table = (("avatar", "official"), ("random", "abs"), ("entropy", "abs"))
    kw = dict(rounds=2, init_frac=0.2, budget_frac=0.3, utility="sq_l2", protocol="paper")
    run = jax.jit(lambda k, i: avatar.run_active_switch(k, karate, table, i, **kw))
    key = jax.random.key(3)
    for i, (strat, score) in enumerate(table):
        got = run(key, np.int32(i))
        ref = jax.jit(lambda k, s=strat, sc=score: avatar.run_active(
            k, karate, s, score=sc, **kw))(key)
        np.testing.assert_array_equal(np.asarray(got.queried), np.asarray(ref.queried))
        np.testing.assert_allclose(np.asarray(got.metrics["mrr"]),
                                   np.asarray(ref.metrics["mrr"]), rtol=1e-6)
    with pytest.raises(ValueError, match="strategy_index"):
        avatar.run_active_switch(key, karate, table, 3, **kw)
    with pytest.raises(ValueError, match="strategies"):
        avatar.run_active_switch(key, karate, (("avatar", "nope"),), 0, **kw)


def _ring_task(n):
    """An n-node task from a networkx ring with chords (no features), truth the identity."""
    import networkx as nx

    adj = nx.to_numpy_array(nx.circulant_graph(n, [1, 3]), weight=None)
    return tasks.task_from_adjacency(adj, adj, np.zeros((n, 0)), np.zeros((n, 0)),
                                     truth=np.arange(n))


def test_the_smallest_graph_is_named_and_a_floored_budget_warns():
    import warnings

    from jaxlab.avatar import loop

    # defaults: half the nodes held out, 20% anchors, a 20% budget over 10 rounds
    assert loop.smallest_task(0.5, 0.2, 0.2, 10) == 48
    with pytest.raises(ValueError, match=r"`task` has 34 nodes.*has 48 nodes"):
        avatar.active(_ring_task(34), "random")
    with pytest.raises(ValueError, match="`task` has 47 nodes"):
        loop.budget_sizes(47, 0.5, 0.2, 0.2, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # 10 queries, one per round: nothing floored
        assert loop.budget_sizes(48, 0.5, 0.2, 0.2, 10) == (24, 10, 1)
        avatar.active(_ring_task(48), "random")
    with pytest.warns(UserWarning, match="asks for 15 queries.*10 rounds of 1.*spend 10"):
        alg = avatar.active(_ring_task(77), "random")
    state, info = jax.jit(alg.step)(jax.random.key(1), jax.jit(alg.init)(jax.random.key(0)))
    assert info.queried.shape == (1,) and int(state.anchors.sum()) == 15 + 1
    # the paper protocol has no held-out set: smaller graphs fit
    assert loop.smallest_task(0.0, 0.2, 0.2, 10) == 48
    with pytest.raises(ValueError, match="no task size fits"):
        loop.budget_sizes(34, 0.5, 0.4, 0.2, 10)


@pytest.mark.heavy
def test_heldout_nodes_are_never_queried_and_the_three_lines_are_reported(karate):
    """protocol="paper" with heldout_frac: the held-out nodes are never queried, their
    metrics are those of the final plan on them, and the removal-only line is the round-0
    plan on the final test set."""
    key = jax.random.key(3)
    kw = dict(rounds=3, init_frac=0.2, budget_frac=0.1, protocol="paper", heldout_frac=0.25)
    res = avatar.run_active(key, karate, "entropy", **kw)  # 3 queries: 1 per round
    k_init, _ = jax.random.split(key)
    s0 = avatar.init(k_init, karate, init_frac=0.2, protocol="paper", heldout_frac=0.25)
    held = np.asarray(s0.heldout)
    assert held.sum() == round(0.25 * 34) and not (held & np.asarray(s0.anchors)).any()
    assert not np.isin(np.asarray(res.queried), np.flatnonzero(held)).any()
    plan_kw = dict(epsilon=0.05, solver="ot")
    final, _ = avatar.evaluate(avatar.State(res.anchors, jnp.asarray(held), s0.heldout),
                               karate, **plan_kw)
    round0, _ = avatar.evaluate(avatar.State(s0.anchors, res.test, s0.heldout), karate,
                                **plan_kw)
    for m in res.metrics:
        np.testing.assert_allclose(res.heldout_metrics[m][-1], final[m], rtol=1e-5, err_msg=m)
        np.testing.assert_allclose(res.removal_metrics[m], round0[m], rtol=1e-5, err_msg=m)
    with pytest.raises(ValueError, match="heldout_frac"):
        avatar.run_active(key, karate, "entropy", protocol="fixed", heldout_frac=0.2)
    # without a held-out set the never-queried line is undefined, the paper's is unchanged
    plain = avatar.run_active(key, karate, "entropy", **{**kw, "heldout_frac": 0.0})
    assert np.all(np.isnan(np.asarray(plain.heldout_metrics["mrr"])))
