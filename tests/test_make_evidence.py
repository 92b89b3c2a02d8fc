"""experiments/make_evidence.py: the guides' evidence pages from a results folder."""

import json
import sys
import types

import pytest

from experiments import make_evidence
from experiments.lib import provenance, registry


def _fake_method(monkeypatch, rows):
    exp = types.ModuleType("exp")
    exp.EXPERIMENT = types.SimpleNamespace(headline=lambda summary: rows(summary),
                                           caption="What the fake rows show.")
    monkeypatch.setitem(sys.modules, "experiments.fake", exp)
    monkeypatch.setattr(registry, "METHODS",
                        {"fake": registry.Method("fake", "Fake", "dev", "-")})


def test_pages_carry_table_provenance_and_figures(tmp_path, monkeypatch):
    _fake_method(monkeypatch, lambda s: [("ratio |a|* [x]_y", f"{s['value']:.2f}"),
                                         ("- starts a list", "1. enumerated")])
    res, out = tmp_path / "results", tmp_path / "evidence"
    (res / "fake").mkdir(parents=True)
    prov = provenance.record({"seed": 0})
    (res / "fake" / "summary.json").write_text(json.dumps({"value": 2.5, "provenance": prov}))
    (res / "fake" / "suite_wall_time.json").write_text(json.dumps(
        {"wall_s": 12.3, "preset": "quick", "load_avg": [1.5, 1.0, 0.5]}))
    (res / "fake" / "curve.png").write_bytes(b"\x89PNG fake")
    assert make_evidence.write_all(str(res), str(out)) == []
    page = (out / "fake.rst").read_text()
    assert "2.50" in page and "Preset ``quick``" in page and "Wall time 12 s" in page
    assert prov["machine"]["cpu_model"].split()[0] in page and "load average 1.5" in page
    assert prov["config_hash"] in page and "What the fake rows show." in page
    assert r"ratio \|a\|\* \[x\]\_y" in page and r"\- starts a list" in page
    assert ".. figure:: evidence/fake/curve.png" in page and (out / "fake" / "curve.png").exists()
    sale = (out / "sale.rst").read_text()  # no SALE results: says so and how to make them
    assert "No results" in sale and "experiments.sale_accuracy" in sale


def test_a_summary_that_cannot_render_is_reported_not_hidden(tmp_path, monkeypatch):
    _fake_method(monkeypatch, lambda s: [("v", s["missing_key"])])
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "summary.json").write_text("{}")
    assert make_evidence.write_all(str(tmp_path), str(tmp_path / "out")) == ["fake"]
    assert "could not be rendered" in (tmp_path / "out" / "fake.rst").read_text()


def test_the_generated_pages_build_as_rst(tmp_path):
    """Escaped cells parse without docutils errors (the Sphinx build is -W in CI)."""
    import docutils.core
    import docutils.utils

    lines = make_evidence.list_table("caption |x|", ("metric", "value"),
                                     [("a |b| *c* `d` _e_ [f] <g>:", "+1 #2")])
    doc = docutils.core.publish_doctree("\n".join(lines), settings_overrides={
        "report_level": docutils.utils.Reporter.WARNING_LEVEL, "halt_level": 2})
    assert "a |b| *c* `d` _e_ [f] <g>:" in doc.astext()


def test_only_the_named_pages_are_written(tmp_path):
    import pytest

    assert make_evidence.write_all(str(tmp_path), str(tmp_path / "out"),
                                   only=["avatar_wholegraph"]) == []
    assert sorted(p.name for p in (tmp_path / "out").glob("*.rst")) == ["avatar_wholegraph.rst"]
    with pytest.raises(ValueError, match="pages"):
        make_evidence.write_all(str(tmp_path), str(tmp_path / "out"), only=["nope"])


def test_a_larger_run_has_its_own_page_and_report_section(tmp_path, monkeypatch):
    """``registry.LARGER_RUNS``: the binary's folder ``<results>/<method>_<preset>/`` gets
    a page (with the command that writes it when it is missing) and a REPORT.md section."""
    import ml_collections
    import pytest
    from PIL import Image

    from experiments import suite
    from experiments.lib import results

    _fake_method(monkeypatch, lambda s: [("accuracy", f"{s['value']:.3f}")])
    monkeypatch.setattr(registry, "LARGER_RUNS", (registry.LargerRun("fake", "full"),))
    monkeypatch.setattr(suite, "METHODS", registry.METHODS)
    res, out = tmp_path / "results", tmp_path / "evidence"
    assert make_evidence.write_all(str(res), str(out), only=["fake_full"]) == []
    missing = (out / "fake_full.rst").read_text()
    assert "No results" in missing
    assert "experiments.fake --config=experiments/configs/fake.py:full" in missing
    folder = res / "fake_full"
    folder.mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(folder / "curve.png")
    config = ml_collections.ConfigDict({"seed": 0})
    results.write_summary(folder, {"value": 0.8125}, config)
    (folder / "timing.json").write_text(json.dumps({
        "units": {u: {"wall_s": w, "compile_s": 1.0, "trace_s": 1.0, "compiles": 2,
                      "cache_hits": 0} for u, w in (("a", 100.0), ("b", 23.0))},
        "unit_key": provenance.unit_key(config), "load_avg": [3.25, 2.0, 1.0]}))
    assert make_evidence.write_all(str(res), str(out), only=["fake_full"]) == []
    page = (out / "fake_full.rst").read_text()
    assert "0.812" in page and "Preset ``full``" in page and "load average 3.2" in page
    assert "sitting that finished it: 123 s" in page
    assert ".. figure:: evidence/fake_full/curve.png" in page
    # The suite's REPORT.md carries it after the preset's own methods.
    summaries = {"fake": {"value": 0.5, "provenance": provenance.record(config)}}
    (res / "fake").mkdir()
    suite._write_report("quick", str(res), ["fake"], summaries, {"fake": 1.0})
    report = (res / "REPORT.md").read_text()
    assert "## fake (full preset)" in report and "| accuracy | 0.812 |" in report
    assert "cores; load average 3.2 / 2.0 / 1.0 (1 / 5 / 15 min)" in report  # timing.json's
    assert report.index("## fake\n") < report.index("## fake (full preset)")
    assert "<title>jaxlab results (quick preset)</title>" in (res / "report.html").read_text()
    (folder / "summary.json").write_text("{}")  # damaged: left out, with a warning
    with pytest.warns(RuntimeWarning, match="fake_full"):
        suite._write_report("quick", str(res), ["fake"], summaries, {"fake": 1.0})
    assert "full preset" not in (res / "REPORT.md").read_text()


@pytest.mark.heavy
def test_the_avatar_variant_search_has_its_page(tmp_path):
    """A tiny search of the declared grid (one pair, two rounds) gives a page with the pick
    and every strategy's row; its summary names the pick by the declared rule."""
    from experiments.lib import avatar_variants_study as study

    runs = study.run_all(["holme_kim"], ["foursquare_twitter"], 1, 120, 2)
    summary = study.summarize(runs)
    best = max(summary["table"][study.label(s, t)]["heldout_mrr"] for s, t in study.GRID)
    assert summary["table"][summary["pick"]["label"]]["heldout_mrr"] == best
    record = {"config": {"families": ["holme_kim"], "settings": ["foursquare_twitter"],
                         "seeds": 1, "num_nodes": 120, "rounds": 2, "cg_tol": 1e-5},
              "summary": summary, "runs": runs, "load_avg_1min": [1.0, 2.0],
              "machine": provenance.machine()}
    folder = tmp_path / study.FOLDER
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps(record))
    assert make_evidence.write_all(str(tmp_path), str(tmp_path / "out"),
                                   [study.FOLDER]) == []
    page = (tmp_path / "out" / f"{study.FOLDER}.rst").read_text()
    assert make_evidence.rst_text(summary["pick"]["label"]) in page
    assert "load average (1 min) 1.0 to 2.0" in page
    for s, t in (*study.BASELINES, *study.GRID):
        assert make_evidence.rst_text(study.label(s, t)) in page
