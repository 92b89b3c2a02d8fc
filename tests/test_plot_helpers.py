"""Shared figure helpers: distinguishable coinciding series, readable log-axis
tick labels, band captions, a warning for bands without a caption."""

import numpy as np
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
