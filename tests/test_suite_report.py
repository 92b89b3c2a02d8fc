"""The README results block is regenerated from REPORT.md."""

import re

import pytest

from experiments import suite


def test_update_readme_replaces_only_the_marked_block(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# top\n\nintro\n{suite.BEGIN}\nold table\n{suite.END}\n\n## after\n")
    report = tmp_path / "REPORT.md"
    report.write_text("# jaxlab results (quick preset)\n\n## bco\n\n| metric | value |\n")
    suite.update_readme(str(report), str(readme))
    text = readme.read_text()
    assert "old table" not in text and "intro" in text and "## after" in text
    assert "### jaxlab results (quick preset)" in text and "#### bco" in text
    readme.write_text("no markers")
    with pytest.raises(ValueError, match="markers"):
        suite.update_readme(str(report), str(readme))


class _FakeMethod:
    """A method for the suite whose config depends on the preset and whose runs are counted."""

    def __init__(self):
        self.runs = []

    def get_config(self, preset):
        import ml_collections

        return ml_collections.ConfigDict({"size": {"smoke": 1, "quick": 2}[preset], "seed": 0})

    def experiment(self):
        from experiments.lib import study

        def run(ctx, config):
            self.runs.append(config.size)
            return {"value": 10 * config.size}

        return study.Experiment(
            name="fake", validate=lambda c: None,
            units=lambda c, w: [study.Unit("value", lambda ctx: run(ctx, c))],
            summarize=lambda c, out: {"value": out["value"]["value"]},
            plot=lambda *a: None, headline=lambda s: [("value", str(s["value"]))])


def _install_fake_method(monkeypatch) -> _FakeMethod:
    """Registers a ``_FakeMethod`` as the suite's method "fake" (config, experiment, entry)."""
    import sys
    import types

    from experiments.lib import registry

    fake = _FakeMethod()
    config_mod, exp_mod = types.ModuleType("cfg"), types.ModuleType("exp")
    config_mod.get_config, exp_mod.EXPERIMENT = fake.get_config, fake.experiment()
    monkeypatch.setitem(sys.modules, "experiments.configs.fake", config_mod)
    monkeypatch.setitem(sys.modules, "experiments.fake", exp_mod)
    monkeypatch.setitem(registry.METHODS, "fake", registry.Method("fake", "Fake", "dev", "-"))
    return fake


def test_suite_never_reports_a_stale_summary(tmp_path, monkeypatch):
    """The audit's case: a smoke summary on disk was titled "quick preset". A summary from
    another config or code version is rerun; a current one is kept."""

    from experiments.lib import provenance

    fake = _install_fake_method(monkeypatch)

    suite.run_suite("smoke", str(tmp_path), ["fake"])
    suite.run_suite("smoke", str(tmp_path), ["fake"])
    assert fake.runs == [1]  # current: reused
    out = suite.run_suite("quick", str(tmp_path), ["fake"])
    assert fake.runs == [1, 2] and out["fake"]["value"] == 20  # config changed: rerun
    report = (tmp_path / "REPORT.md").read_text()
    assert "(quick preset)" in report and "| value | 20 |" in report
    assert provenance.config_hash(fake.get_config("quick")) in report
    # The compile share of the run that wrote the summary (its timing.json), and its
    # trace / lower / compile / run split per unit.
    assert re.search(r"Tracing, lowering and XLA compiles took (\d+%|n/a) of the units' \d+ "
                     r"s; (\d+%|n/a) of the method's \d+ s wall time \(\d+ programs compiled, "
                     r"\d+ loaded from the compilation cache", report)
    assert ("| unit | wall s | trace s | lower s | compile s | run s | compile share |"
            in report)
    assert re.search(r"\| value( \| \d+\.\d){5} \| (\d+%|n/a) \| \d+ \+ \d+ \| none \|",
                     report)
    assert re.search(r"\| total( \| \d+\.\d){5} \| (\d+%|n/a) \| \d+ \+ \d+ \| none \|",
                     report)
    monkeypatch.setattr(provenance, "code_version", lambda: "0.0.0+src.changed")
    suite.run_suite("quick", str(tmp_path), ["fake"])
    assert fake.runs == [1, 2, 2]  # code changed: rerun
    suite.run_suite("quick", str(tmp_path), ["fake"], force=True)
    assert fake.runs == [1, 2, 2, 2]  # --force recomputes, finished units included
    prov = provenance.record(fake.get_config("quick"))
    for key in ("config", "config_hash", "code_version", "git", "packages", "machine"):
        assert key in prov
    assert {"jax", "jaxlib", "flax", "ott-jax", "brax"} <= set(prov["packages"])
    assert {"device_kind", "device_count"} <= set(prov["machine"])


def test_report_carries_the_whole_graph_table_when_its_summary_exists(tmp_path, monkeypatch):
    """results/avatar_wholegraph/summary.json (experiments/avatar_wholegraph.py) becomes a
    REPORT.md section beside the methods' sections."""
    import json

    from experiments.lib import provenance
    from experiments.lib import wholegraph_study as ws
    from tests.test_wholegraph_study import _runs

    _install_fake_method(monkeypatch)
    suite.run_suite("smoke", str(tmp_path), ["fake"])
    assert "whole graphs" not in (tmp_path / "REPORT.md").read_text()
    summary = ws.summarize(_runs(), 3, ["random", "entropy", "avatar"], rounds=2)
    (tmp_path / ws.FOLDER).mkdir()
    (tmp_path / ws.FOLDER / "summary.json").write_text(json.dumps(
        {"summary": summary, "wall_s": 3600.0, "machine": provenance.machine(),
         "git": provenance.git_state(), "packages": provenance.package_versions()}))
    suite.run_suite("smoke", str(tmp_path), ["fake"])
    report = (tmp_path / "REPORT.md").read_text()
    assert "## avatar (whole graphs)" in report and "0.829 / 0.926 / 0.936" in report
    # its machine line names the CPU model, the cores and the load along the run
    cpu = provenance.machine()
    assert (f"{cpu['cpu_model']}, {cpu['cpu_count']} cores; load average (1 min) 2.0 to 2.0 "
            "along the run") in report
    assert "+0.0300" in report and "| value | 10 |" in report
    assert "avatar_wholegraph" in (tmp_path / "report.html").read_text()


def _ratio_row(value, ci, constant, theory):
    return {"ratio": {"value": value, "ci95": ci}, "constant_samples": {"mean": constant},
            "theory_samples": {"mean": theory}}


def test_a_ratio_resolved_only_by_the_record_grid_says_so():
    """Q-learning's ratio: a zero-width CI, or a schedule crossing at the first record
    point, is reported with the bounds the record grid allows, not as a CI."""
    from experiments import qlearning

    # both schedules crossed at the same record points on every seed; theory at the first
    text = qlearning.ratio_text(_ratio_row(5.0, [5.0, 5.0], 5000.0, 1000.0), 1000.0)
    assert "[5.00, 5.00]" not in text
    assert "resolution: record grid, every 1000 samples; ratio >= 4.00" in text
    # same record points, later than the first: the ratio lies between grid bounds
    text = qlearning.ratio_text(_ratio_row(2.0, [2.0, 2.0], 8000.0, 4000.0), 1000.0)
    assert "resolution: record grid, every 1000 samples; ratio in [1.75, 2.67]" in text
    # theory at the first record on every seed, the constant spread: still a lower bound
    text = qlearning.ratio_text(_ratio_row(4.6, [4.1, 5.2], 4600.0, 1000.0), 1000.0)
    assert "ratio >= 3.60" in text
    # a resolved ratio keeps its CI
    assert qlearning.ratio_text(_ratio_row(3.3, [2.72, 4.15], 33000.0, 10000.0),
                                1000.0) == "3.30x [2.72, 4.15]"
    # the record step from the config when the summary predates its own field
    family = {"samples_per_run": 150000.0}
    summary = {"provenance": {"config": {"num_records": 150}}}
    assert qlearning._record_step(summary, family) == 1000.0
    assert qlearning._record_step({}, family) is None
    assert "zero width" in qlearning.ratio_text(_ratio_row(5.0, [5.0, 5.0], 5.0, 1.0), None)


def test_adjoint_timing_row_gives_best_of_k_with_its_spread():
    from experiments import avatar

    sc = {"n": [100, 200, 400], "cg_s": [1e-3, 2e-3, 4e-3], "dense_s": [0.1, 0.5, 2.0],
          "dense_over_cg": [100.0, 250.0, 500.0], "cg_residual": [1e-7] * 3,
          "slope_cg": 1.0, "slope_dense": 2.2, "repeats": 3,
          "cg_quartiles_s": [[1e-3, 1.2e-3], [2e-3, 2.5e-3], [4e-3, 4.4e-3]],
          "dense_quartiles_s": [[0.1, 0.11], [0.5, 0.6], [2.0, 2.3]]}
    rows = dict(avatar.headline({"tasks": {}, "config": {}, "scaling": sc}))
    (key, value), = [(k, v) for k, v in rows.items() if "dense / CG" in k]
    assert "best of 3 warm runs" in key and "interquartile range" in key
    assert value.startswith("500x: CG 4.00e-03 s [4.00e-03, 4.40e-03], dense 2.00e+00 s "
                            "[2.00e+00, 2.30e+00]")


def test_the_timing_table_totals_programs_and_the_compile_share(tmp_path):
    """A synthetic timing.json: per-unit rows, a total row summing them, and the share of
    trace + lower + compile in the units' wall time and in the method's."""
    import json

    from experiments.lib import report, results

    units = {
        "a": {"wall_s": 10.0, "trace_s": 1.0, "lower_s": 0.5, "compile_s": 2.5, "run_s": 6.0,
              "compiles": 7, "cache_hits": 2, "duplicate_programs": {}},
        "b": {"wall_s": 30.0, "trace_s": 2.0, "lower_s": 1.0, "compile_s": 3.0, "run_s": 24.0,
              "compiles": 5, "cache_hits": 1, "duplicate_programs": {"jit_step": 2}},
    }
    (tmp_path / results.TIMING).write_text(json.dumps({"units": units, "unit_key": "k"}))
    sentence, rows = suite._timing(str(tmp_path), {"unit_key": "k"}, wall_s=50.0)
    assert all(len(r) == len(report.TIMING_HEADER) for r in rows)
    spent = {k: v["trace_s"] + v["lower_s"] + v["compile_s"] for k, v in units.items()}
    assert rows[0] == ("a", "10.0", "1.0", "0.5", "2.5", "6.0",
                       f"{spent['a'] / 10:.0%}", "7 + 2", "none")
    assert rows[1][-3:] == (f"{spent['b'] / 30:.0%}", "5 + 1", "jit_step x2")
    total = sum(spent.values())
    assert rows[2] == ("total", "40.0", "3.0", "1.5", "5.5", "30.0", f"{total / 40:.0%}",
                       "12 + 3", "jit_step x2")
    assert (f"took {total / 40:.0%} of the units' 40 s; {total / 50:.0%} of the method's "
            "50 s wall time (12 programs compiled, 3 loaded") in sentence
    sentence, _ = suite._timing(str(tmp_path), {"unit_key": "k"})
    assert "method's" not in sentence
    assert suite._timing(str(tmp_path), {"unit_key": "other"}) == ("", [])
