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
    # The compile share of the run that wrote the summary (its timing.json), per unit.
    assert re.search(r"Compile share \(XLA compile \+ tracing\): \d+% of \d+ s, \d+ XLA "
                     r"compiles, \d+ programs loaded .*value \d+% of \d+ s \(\d+\)", report)
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
    assert "+0.0300" in report and "| value | 10 |" in report
    assert "avatar_wholegraph" in (tmp_path / "report.html").read_text()
