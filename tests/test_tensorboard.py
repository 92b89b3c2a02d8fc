"""TensorBoard event files: the writer, the per-method extractors and the study hook
. Events are read back with tbparse (TensorBoard's own event reader)."""

import json
import os

import ml_collections
import numpy as np
import pytest

from experiments.lib import events, events_export, scalars, study

tbparse = pytest.importorskip("tbparse")


def read(logdir):
    """{(run folder relative to logdir, tag): (steps, values)} of every event file."""
    df = tbparse.SummaryReader(str(logdir), extra_columns={"dir_name"}).scalars
    out = {}
    for (run, tag), g in df.groupby(["dir_name", "tag"]):
        g = g.sort_values("step")
        out[(run, tag)] = (g["step"].to_numpy(), g["value"].to_numpy())
    return out


def test_write_scalars_reads_back_tags_steps_values_and_rewrites_without_duplicates(tmp_path):
    series = {"loss": np.array([3.0, 2.0, 1.5]),
              ("run a", "ret"): (np.array([10, 20]), np.array([1.0, 2.0])),
              ("run b", "ret"): (np.array([10, 20, 30]), np.array([0.5, 0.25, 0.125]))}
    folders = events.write_scalars(tmp_path / "u", series)
    assert sorted(os.path.relpath(f, tmp_path / "u") for f in folders) == [".", "run_a", "run_b"]
    got = read(tmp_path / "u")
    assert set(got) == {("", "loss"), ("run_a", "ret"), ("run_b", "ret")}
    np.testing.assert_array_equal(got[("", "loss")][0], [0, 1, 2])
    np.testing.assert_allclose(got[("", "loss")][1], [3.0, 2.0, 1.5])
    np.testing.assert_array_equal(got[("run_b", "ret")][0], [10, 20, 30])
    np.testing.assert_allclose(got[("run_a", "ret")][1], [1.0, 2.0])
    # Writing the unit again (a resumed run loading it) replaces, never duplicates.
    events.write_scalars(tmp_path / "u", {"loss": np.array([1.0, 0.5])})
    again = read(tmp_path / "u")
    np.testing.assert_array_equal(again[("", "loss")][0], [0, 1])
    with pytest.raises(ValueError, match="differ"):
        events.write_scalars(tmp_path / "v", {"x": (np.arange(3), np.ones(2))})


def test_illegal_tag_characters_are_replaced_once_without_a_warning(tmp_path, caplog):
    """TensorBoard's own rule (letters, digits, _ - . /): an ``@`` would be renamed with a
    logged "is illegal" warning per point; the writer sanitizes it before."""
    import logging

    with caplog.at_level(logging.INFO):
        events.write_scalars(tmp_path / "u", {"avatar/hits@30": np.array([0.1, 0.2]),
                                              ("run", "a b/c(d)"): np.array([1.0])})
    assert not [r for r in caplog.records if "illegal" in r.getMessage()]
    got = read(tmp_path / "u")
    assert set(got) == {("", "avatar/hits_30"), ("run", "a_b/c_d_")}
    np.testing.assert_allclose(got[("", "avatar/hits_30")][1], [0.1, 0.2])
    assert events.tag_name("ok/tag-1.x_y") == "ok/tag-1.x_y"


def _tiny_experiment(calls):
    def units(config, workdir):
        del workdir

        def run(ctx, n=config.n):
            calls.append(ctx.name)
            return {"curve": np.arange(n, dtype=np.float32) ** 2}

        return [study.Unit("a", run), study.Unit("b", run)]

    return study.Experiment(
        name="tiny", validate=lambda c: None, units=units,
        summarize=lambda c, out: {"n": len(out)}, plot=lambda *a: None,
        headline=lambda s: [],
        scalars=lambda config, unit, result, workdir: {
            "tiny/curve": (10 * np.arange(config.n), result["curve"])})


def test_study_writes_events_per_unit_when_computed_and_when_loaded(tmp_path):
    calls = []
    exp = _tiny_experiment(calls)
    config = ml_collections.ConfigDict({"n": 4})
    study.train_and_evaluate(exp, config, tmp_path)
    got = read(tmp_path / "tb")
    assert set(got) == {("a", "tiny/curve"), ("b", "tiny/curve")}
    np.testing.assert_array_equal(got[("a", "tiny/curve")][0], [0, 10, 20, 30])
    np.testing.assert_allclose(got[("b", "tiny/curve")][1], [0, 1, 4, 9])
    # Second run: units are loaded, not recomputed; events rewritten once, not appended.
    study.train_and_evaluate(exp, config, tmp_path)
    assert calls == ["a", "b"]
    again = read(tmp_path / "tb")
    assert len(again[("a", "tiny/curve")][0]) == 4


def test_failing_extractor_is_a_warning_not_an_error(tmp_path):
    def bad(*args):
        raise KeyError("nope")

    exp = _tiny_experiment([])._replace(scalars=bad)
    study.train_and_evaluate(exp, ml_collections.ConfigDict({"n": 2}), tmp_path)
    assert not (tmp_path / "tb").exists()
    assert scalars.extract("no_such_method", None, "u", {}, str(tmp_path)) == {}


def _tags(series):
    return {k if isinstance(k, tuple) else ("", k): len(scalars_steps(v))
            for k, v in series.items()}


def scalars_steps(v):
    return events._as_series(v)[0]


def test_extractors_on_results_shaped_like_each_methods_units(tmp_path):
    wd = str(tmp_path)
    r = 5
    trace = {"samples": np.tile(100 * np.arange(1, r + 1), (2, 3, 1)),
             "q_error": np.ones((2, 3, r)), "target_error": np.ones((2, 3, r)),
             "outer_iter": np.zeros((2, 3, r), np.int32)}
    q = scalars.extract("qlearning", None, "garnet-sgd", {"trace": trace}, wd)
    assert _tags(q)[("schedule_1", "qlearning/q_error")] == r
    np.testing.assert_array_equal(scalars_steps(q[("schedule_0", "qlearning/q_error")]),
                                  100 * np.arange(1, r + 1))

    cfg = ml_collections.ConfigDict({"horizons": [100, 1000], "num_val_seeds": 1})
    b = scalars.extract("bco", cfg, "vs_rounds", np.ones((3, 2, 4), np.float32), wd)
    assert len(b) == 3 and all(k[1] == "bco/regret_vs_horizon_T" for k in b)
    np.testing.assert_array_equal(scalars_steps(next(iter(b.values()))), [100, 1000])

    cfg = ml_collections.ConfigDict({"protocols": ["paper"], "strategies": ["avatar", "random"]})
    a = scalars.extract("avatar", cfg, "synthetic_graph",
                        {"metrics": np.ones((1, 5, 2, 3, 11)),
                         "picked": np.ones((1, 2, 3, 10)), "pool": np.ones((1, 2, 3, 10))}, wd)
    assert _tags(a)[("random", "avatar/mrr")] == 11
    assert _tags(a)[("avatar", "avatar/picked_already_correct")] == 10

    g = scalars.extract("gepc", None, "score_model", {"losses": np.ones(7)}, wd)
    assert _tags(g) == {("", "gepc/score_model_loss"): 7}

    rows = {"best_of_4": {"family": "best_of_n", "particles": 4, "accuracy": 0.5, "nfe": 8.0,
                          "path_ll": -1.0, "ess_trace": [1.0, 0.75, 0.5]},
            "best_of_1": {"family": "best_of_n", "particles": 1, "accuracy": 0.25, "nfe": 2.0,
                          "path_ll": -2.0}}
    d = scalars.extract("dllm", None, "sudoku",
                        {"decoders": rows, "poke_fit": {"mse": 0.1, "r2": 0.9}}, wd)
    steps, vals = events._as_series(d[("best_of_n", "dllm/accuracy_vs_particles")])
    np.testing.assert_array_equal(steps, [1, 4])
    np.testing.assert_allclose(vals, [0.25, 0.5])
    steps, vals = events._as_series(d[("best_of_4", "dllm/mean_ess_over_n_vs_step")])
    np.testing.assert_array_equal(steps, [0, 1, 2])
    np.testing.assert_allclose(vals, [1.0, 0.75, 0.5])
    assert ("best_of_1", "dllm/mean_ess_over_n_vs_step") not in d

    f = scalars.extract("rfo", None, "pendulum_rfo",
                        {"env_steps": 512 * np.arange(1, 9), "eval_return": np.ones((3, 8)),
                         "train_reward": np.ones((3, 8))}, wd)
    assert _tags(f) == {("", "rfo/eval_return"): 8, ("", "rfo/train_reward"): 8}


def test_export_workdir_picks_up_unit_files_and_rfo_runs_json(tmp_path):
    wd = tmp_path / "rfo"
    (wd / "runs").mkdir(parents=True)
    run = {"task": "pendulum", "method": "apg", "env_steps": [512, 1024, 1536],
           "eval_return": [[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]],
           "train_reward": [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]}
    (wd / "runs" / "pendulum_apg_0123.json").write_text(json.dumps(run))
    study.save_result(str(wd / "units" / "pendulum_rfo-abcdef012345.json"),
                      {**run, "method": "rfo", "eval_return": np.zeros((2, 3))})
    events_export.export_workdir(tmp_path)  # a suite's results folder: finds rfo/
    got = read(wd / "tb")
    assert set(got) >= {("pendulum_apg", "rfo/eval_return"), ("pendulum_rfo", "rfo/eval_return")}
    steps, vals = got[("pendulum_apg", "rfo/eval_return")]
    np.testing.assert_array_equal(steps, [512, 1024, 1536])
    np.testing.assert_allclose(vals, [2.0, 3.0, 4.0])


@pytest.mark.slow
def test_qlearning_smoke_binary_writes_events(tmp_path):
    from experiments.lib import registry

    registry.train_and_evaluate("qlearning", registry.get_config("qlearning", "smoke"),
                                str(tmp_path))
    got = read(tmp_path / "tb")
    tags = {t for _, t in got}
    assert {"qlearning/q_error", "qlearning/target_error"} <= tags
    assert all(len(s) == registry.get_config("qlearning", "smoke").num_records
               for s, _ in got.values())
