"""Shared figure helpers: distinguishable coinciding series, readable log-axis
tick labels, band captions, a warning for bands without a caption."""

import os

import numpy as np
import pytest
from absl import logging

from experiments.lib import plots


def test_coinciding_series_get_distinct_markers_and_line_styles(tmp_path):
    fig, (ax,) = plots.figure()
    x = np.arange(50)
    lines = [plots.line_with_band(ax, x, np.ones(50), 0.1, label=str(i)) for i in range(3)]
    styles = {(ln.get_marker(), ln.get_linestyle()) for ln in lines}
    assert len(styles) == 3
    # long series: ~10 staggered markers, not one per point
    starts = {ln.get_markevery()[0] for ln in lines}
    assert len(starts) == 3 and all(ln.get_markevery()[1] == 5 for ln in lines)
    # an explicit style is kept
    ln = plots.line_with_band(ax, x, np.ones(50), marker="x", ls="-")
    assert (ln.get_marker(), ln.get_linestyle()) == ("x", "-")
    plots.save(fig, tmp_path / "f.png", caption=plots.t_band(3))


def _labels(axis):
    """The non-empty tick labels drawn inside the axis's view."""
    lo, hi = sorted(axis.get_view_interval())
    out = []
    for locs, fmt in ((axis.get_majorticklocs(), axis.get_major_formatter()),
                      (axis.get_minorticklocs(), axis.get_minor_formatter())):
        out += [fmt(v) for v in locs if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9)]
    return [t for t in out if t]


def test_log_axis_labels_are_plain_and_uncrowded(tmp_path):
    fig, (a, b) = plots.figure(2)
    a.loglog([1, 10, 100, 1000], [0.01, 0.1, 1, 10])          # several decades
    b.semilogx([300, 500, 1000, 2000, 3000], [1, 2, 3, 4, 5])   # about one decade
    plots.save(fig, tmp_path / "g.png", caption="no bands")
    xa = _labels(a.xaxis)
    assert "1000" in xa and "100" in xa and not any("times" in t for t in xa)
    assert len(xa) <= 6, xa                                    # no minor labels
    xb = _labels(b.xaxis)
    assert "1000" in xb and set(xb) <= {"200", "500", "1000", "2000", "5000"}, xb


def test_band_captions_state_kind_level_and_count():
    assert "95% Student-t" in plots.t_band(8) and "8 seeds" in plots.t_band(8)
    cap = plots.bootstrap_band(200, "problems", level=0.9, resamples=1000)
    assert "90% percentile bootstrap" in cap and "200 problems" in cap and "1000" in cap


def test_bands_without_caption_warn(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(logging, "warning", lambda msg, *a: seen.append(msg % a))
    fig, (ax,) = plots.figure()
    plots.line_with_band(ax, [1, 2, 3], [1, 2, 3], [0.1, 0.1, 0.1])
    plots.save(fig, tmp_path / "h.png")
    assert seen and "no caption" in seen[0]


def test_narrow_log_axis_still_has_labels(tmp_path):
    fig, (c,) = plots.figure()
    c.semilogx([2.2, 3.1, 4.4], [1, 2, 3])                     # under half a decade
    plots.save(fig, tmp_path / "n.png", caption="no bands")
    assert len(_labels(c.xaxis)) >= 2, _labels(c.xaxis)


def _drawn(fig):
    """``fig`` drawn again after ``plots.save`` closed it; returns its renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _overlapping(boxes):
    return [(i, j) for i in range(len(boxes)) for j in range(i + 1, len(boxes))
            if boxes[i].x0 < boxes[j].x1 and boxes[j].x0 < boxes[i].x1
            and boxes[i].y0 < boxes[j].y1 and boxes[j].y0 < boxes[i].y1]


def test_point_labels_of_crowded_points_do_not_overlap(tmp_path):
    fig, (ax,) = plots.figure()
    x = [1.0] * 6 + [1.02, 1.04, 3.0, 3.0]
    y = [0.5] * 6 + [0.5, 0.51, 0.9, 0.9]
    ax.plot(x, y, "o", label="points")
    ax.legend(loc="upper left")
    names = [f"decoder_{i}" for i in range(len(x))]
    labels = plots.label_points(ax, x, y, names)
    plots.save(fig, tmp_path / "crowd.png", caption="no bands")
    renderer = _drawn(fig)
    boxes = [t.get_window_extent(renderer) for t in labels]
    assert [t.get_text() for t in labels] == names
    assert _overlapping(boxes) == []
    legend = ax.get_legend().get_window_extent(renderer)
    assert _overlapping([legend, *boxes])[:1] == []
    # every label stays beside its own point: within a few rows of it, leader lines for
    # the ones moved off its row
    for t, b in zip(labels, boxes, strict=True):
        px, py = ax.transData.transform(t.xy)
        assert min(abs(b.x0 - px), abs(b.x1 - px)) < 10 and abs((b.y0 + b.y1) / 2 - py) < 150
    leaders = [t for t in ax.texts if t.get_gid() == plots.LEADER_GID]
    assert 0 < len(leaders) < len(labels)


def test_label_points_needs_one_name_per_point():
    import pytest

    fig, (ax,) = plots.figure()
    with pytest.raises(ValueError, match="`names`"):
        plots.label_points(ax, [1, 2], [1, 2], ["a"])


def test_log2_ticks_give_a_narrow_axis_several_ticks(tmp_path):
    fig, (wide, narrow) = plots.figure(2)
    wide.semilogx([2, 128], [0, 1])
    narrow.semilogx([3.3, 5.8], [0, 1])     # one power of two (4) in view
    for ax in (wide, narrow):
        plots.log2_ticks(ax.xaxis)
    plots.save(fig, tmp_path / "t.png", caption="no bands")
    assert {"2", "4", "8", "16", "32", "64", "128"} <= set(_labels(wide.xaxis))
    assert len(_labels(narrow.xaxis)) >= 3, _labels(narrow.xaxis)


def _dllm_summary(tasks=("sudoku", "countdown"), ns=(2, 4, 8)):
    """A POKE-SMC summary shaped like the study's, with the crowding of a real one: the
    greedy decoders at one NFE and almost one accuracy, the particle decoders likewise."""
    rng = np.random.default_rng(0)
    out = {}
    for task in tasks:
        dec = {g: {"family": "greedy", "particles": 1, "nfe": 16.0, "nfe_batched": 16.0,
                   "accuracy": 0.96 + 0.002 * i}
               for i, g in enumerate(("confidence", "neg_entropy", "margin", "semi_ar"))}
        dec["threshold"] = {"family": "greedy", "particles": 1, "nfe": 2.0,
                            "nfe_batched": 2.0, "accuracy": 0.7}
        for n in ns:
            for fam, fam_name in (("best_of", "best_of_n"), ("smc", "smc"),
                                  ("sr_smc", "sr_smc"), ("poke_smc", "poke_smc")):
                cheap = fam == "sr_smc"
                dec[f"{fam}_{n}"] = {"family": fam_name, "particles": n,
                                     "nfe": (3.0 if cheap else 16.0) * n,
                                     "nfe_batched": 3.0 if cheap else 16.0,
                                     "accuracy": 0.975 + rng.uniform(-0.003, 0.003)}
        for v in dec.values():
            v["accuracy_ci"] = [v["accuracy"] - 0.03, min(1.0, v["accuracy"] + 0.03)]
            v["path_ll"] = -1.0 + rng.uniform(-0.01, 0.01)
        out[task] = {"decoders": dec, "path_ll_correlation": {"pearson_across_decoders": 0.5}}
    return {"tasks": out}


def test_dllm_accuracy_vs_nfe_labels_do_not_overlap(tmp_path, monkeypatch):
    """The POKE-SMC figures: no two point labels overlap; every NFE axis, the batched one
    over 2..16 included, has several x ticks."""
    import types

    from experiments import dllm

    figs = {}
    save = plots.save
    monkeypatch.setattr(dllm, "_plot_smc_diagnostics", lambda *a: None)
    monkeypatch.setattr(plots, "save", lambda fig, path, caption=None: (
        figs.__setitem__(os.path.basename(path), fig), save(fig, path, caption))[1])
    config = types.SimpleNamespace(num_problems=128, bootstrap=500)
    dllm._plot(config, _dllm_summary(), None, str(tmp_path))
    assert set(figs) == {"accuracy_vs_nfe.png", "path_ll_vs_accuracy.png"}
    for name, fig in figs.items():
        renderer = _drawn(fig)
        labels = plots.point_labels(fig)
        assert len(labels) == 2 * (2 if name == "accuracy_vs_nfe.png" else 1) * 17
        assert _overlapping([t.get_window_extent(renderer) for t in labels]) == [], name
    for ax in figs["accuracy_vs_nfe.png"].axes:
        if ax.get_visible():
            assert len(_labels(ax.xaxis)) >= 3, (ax.get_title(), _labels(ax.xaxis))


def test_gepc_maps_have_row_titles_and_space_between_rows(tmp_path):
    from experiments import gepc

    rng = np.random.default_rng(0)
    columns = [(f"(c) +digits {i}", rng.uniform(-1, 1, (8, 8)), rng.uniform(size=(8, 8)) > 0.7,
                rng.uniform(size=(8, 8)), rng.uniform(size=(8, 8))) for i in range(3)]
    fig = gepc.maps_figure(columns)
    plots.save(fig, tmp_path / "maps.png", caption="maps")
    renderer = _drawn(fig)
    first = [ax for ax in fig.axes if ax.get_visible()][::3]  # column 0, top to bottom
    assert [ax.get_ylabel() for ax in first] == list(gepc.MAP_ROWS)
    assert [ax.get_title() for ax in fig.axes[:3]] == [c[0] for c in columns]
    boxes = [ax.get_window_extent(renderer) for ax in first]
    assert all(upper.y0 - lower.y1 >= 4 for upper, lower in zip(boxes, boxes[1:], strict=False))


def _problems_at_save(monkeypatch):
    """{file name: plots.figure_problems(fig)} of every figure saved from now on."""
    seen, save = {}, plots.save

    def checked(fig, path, caption=None):
        seen[os.path.basename(path)] = plots.figure_problems(fig)
        return save(fig, path, caption)

    monkeypatch.setattr(plots, "save", checked)
    return seen


def test_figure_problems_finds_an_empty_panel_and_a_legend_over_data(tmp_path):
    fig, (a, b) = plots.figure(2)
    x = np.linspace(0, 1, 50)
    a.plot(x, x, label="diagonal")
    a.legend(loc="center")  # the centre of the diagonal is under it
    b.bar([0, 1], [0.0, 0.0])  # bars of height zero: nothing to read
    problems = plots.figure_problems(fig)
    assert len(problems) == 2, problems
    assert "its legend covers" in problems[0] and "is empty" in problems[1]
    a.get_legend().remove()
    a.legend(loc="upper left")  # the diagonal runs from lower left to upper right
    b.bar([0, 1], [1.0, 2.0])
    b.axhline(1.5, label="reference")  # axes-coordinate lines are not data points
    b.legend(loc="upper left")
    assert plots.figure_problems(fig) == []
    plots.save(fig, tmp_path / "ok.png", caption="no bands")


def test_sale_figure_is_clean(tmp_path, monkeypatch):
    from experiments import sale

    seen = _problems_at_save(monkeypatch)
    rows = [{"tau": t, "density": d, "recall_mean": r, "recall_worst_row": w, "err_rel": e,
             "kernel_max_abs_diff": 3e-6, "kernel_kept_equal": True}
            for t, d, r, w, e in [(1e-4, 0.9, 0.9998, 0.99, 8e-5), (1e-3, 0.87, 0.9994, 0.85,
                                                                     4e-4),
                                  (1e-2, 0.42, 0.956, 0.47, 7e-2), (3e-2, 0.41, 0.955, 0.47,
                                                                    7e-2)]]
    summary = {"rows": rows, "length": 1024, "heads": 4, "kv_heads": 2, "dim": 64,
               "kernel_atol": 1e-4}
    sale._plot(None, summary, None, str(tmp_path))
    assert seen == {"sale_tau.png": []}


@pytest.mark.parametrize("share", [0.0, 0.5], ids=["none_resampled", "some_resampled"])
def test_smc_diagnostics_drop_an_empty_row_and_keep_legends_off_the_data(tmp_path,
                                                                          monkeypatch, share):
    import ml_collections

    from experiments import dllm

    seen = _problems_at_save(monkeypatch)
    ns, bins = (4, 8), len(dllm.MIN_ESS_BINS) - 1
    hist = list(np.linspace(5, 1, bins))
    dec = {f"{fam}_{n}": {"resampling": {"problems_resampled_share": share * (n / 8)},
                          "min_ess_histogram": hist}
           for fam in ("smc", "poke_smc", "sr_smc") for n in ns}
    pre = {str(n): {"ranking_on_mixed": {
        str(f): {"random": 0.3 + 0.05 * i, "path_ll": 0.4 + 0.3 * f + 0.05 * i,
                 "path_ll_plus_poke": 0.5 + 0.3 * f + 0.05 * i} for f in (0.25, 0.5, 0.75)}}
        for i, n in enumerate(ns)}
    tasks = {name: {"decoders": dec, "preconditions": pre} for name in ("sudoku", "countdown")}
    config = ml_collections.ConfigDict({"particles": ns, "num_problems": 20})
    dllm._plot_smc_diagnostics(config, tasks, str(tmp_path))
    assert seen == {"smc_diagnostics.png": []}
