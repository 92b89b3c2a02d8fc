"""Matplotlib (Agg) helpers for result figures.

Conventions every figure follows, enforced here where a helper can:

- the caption says what a band or error bar is (CI level and kind: Student-t or
  bootstrap) and over how many seeds / problems / images: ``t_band``, ``bootstrap_band``;
  ``save`` logs a warning for a figure with bands or error bars and no caption;
- series that coincide stay distinguishable: ``line_with_band`` gives each new line of an
  axes its own marker and line style (unless the caller sets them) and staggers the
  markers of long series;
- log axes have readable tick labels: ``save`` (through ``readable_log_axes``) drops
  minor-tick labels when an axis shows two or more decades, labels every minor tick of a
  narrow axis (at most 6 in view) and only the 2 and 5 multiples otherwise, writes plain
  numbers between 1e-3 and 1e5, and tilts x labels that would overlap;
- every figure is legible at the results page's width: ``figure`` wraps panels into rows
  of at most ``MAX_COLS``; ``save`` measures the smallest text (``min_text_px``: its height
  in pixels once the PNG is shrunk to ``PAGE_WIDTH_PX``) and warns below ``MIN_TEXT_PX``;
  it stores that text's height at the PNG's own size in the PNG (``PNG_TEXT_KEY``), from
  which ``report.html`` computes it at the width the browser shows;
- point labels never overlap: ``label_points`` marks them and ``save`` places them (after
  the final layout) beside their points, stacked with a leader line where points crowd;
- a log axis over a narrow range still has several ticks: ``log2_ticks``.
"""

import itertools
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from absl import logging  # noqa: E402
from matplotlib import collections as mcollections  # noqa: E402
from matplotlib import container as mcontainer  # noqa: E402
from matplotlib import text as mtext  # noqa: E402
from matplotlib import ticker  # noqa: E402

from jaxlab.core import sharding  # noqa: E402

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":")
DPI = 120
MAX_COLS = 2
PAGE_WIDTH_PX = 1100  # report.html's content width (its ``max-width``)
MIN_TEXT_PX = 8.0  # smallest legible text height once shrunk to the page, in pixels
PNG_TEXT_KEY = "jaxlab-min-text-px"


def figure(ncols: int = 1, width: float = 5.0, height: float = 3.8,
           max_cols: int | None = MAX_COLS):
    """A new figure with ``ncols`` panels of ``width`` x ``height`` inches each.

    Args:
      ncols: number of panels.
      width, height: one panel's size in inches.
      max_cols: panels per row (more wrap onto further rows, spare axes hidden), so a
        figure stays legible at the page's width; None: one row (image strips).

    Returns:
      (fig, list of the ``ncols`` axes in reading order).
    """
    fig, axes = item_grid(ncols, 1, width, height, ncols if max_cols is None else max_cols)
    return fig, [panels[0] for panels in axes]


def item_grid(num_items: int, panels_per_item: int, width: float = 4.4, height: float = 3.6,
              max_cols: int = MAX_COLS):
    """A figure of ``num_items`` items (e.g. tasks), each a column of ``panels_per_item``
    panels, at most ``max_cols`` items side by side (more wrap below).

    Returns:
      (fig, axes) with ``axes[item][panel]``.
    """
    cols = max(1, min(num_items, max_cols))
    blocks = -(-num_items // cols)
    rows = blocks * panels_per_item
    fig, grid = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    axes = [[grid[(i // cols) * panels_per_item + r][i % cols] for r in range(panels_per_item)]
            for i in range(num_items)]
    used = {id(ax) for item in axes for ax in item}
    for ax in grid.ravel():
        if id(ax) not in used:
            ax.set_visible(False)
    return fig, axes


def min_text_px(fig, page_width_px: int | None = PAGE_WIDTH_PX, dpi: int = DPI) -> float:
    """Height in pixels of the smallest visible text of ``fig`` (tick labels, legends,
    titles, captions) once its PNG at ``dpi`` is shown at most ``page_width_px`` wide
    (None: at its natural size)."""
    sizes = [t.get_fontsize() for t in fig.findobj(mtext.Text)
             if t.get_visible() and t.get_text().strip() and _shown(t)]
    if not sizes:
        return float("inf")
    return min(sizes) * dpi / 72.0 * _shrink(fig, page_width_px, dpi)


def _shrink(fig, page_width_px: int | None = PAGE_WIDTH_PX, dpi: int = DPI) -> float:
    """The factor by which a page ``page_width_px`` wide shrinks ``fig``'s PNG (<= 1)."""
    return 1.0 if page_width_px is None else min(1.0, page_width_px / (fig.get_figwidth() * dpi))


def _shown(text) -> bool:
    """False for text inside a hidden axes (``figure``'s spare panels)."""
    ax = text.axes
    return ax is None or ax.get_visible()


def line_with_band(ax, x, mean, half_width=None, label=None, **kwargs):
    """Plots ``mean`` against ``x`` with a shaded +- ``half_width`` band.

    The i-th line of ``ax`` gets ``MARKERS[i]`` and ``LINESTYLES[i]`` unless ``marker`` /
    ``ls`` / ``linestyle`` are given, so series that coincide stay distinguishable; a long
    series shows about 10 markers, staggered from one line to the next.
    """
    x, mean = np.asarray(x), np.asarray(mean)
    i = len(ax.get_lines())
    kwargs.setdefault("marker", MARKERS[i % len(MARKERS)])
    if "ls" not in kwargs and "linestyle" not in kwargs:
        kwargs["ls"] = LINESTYLES[i % len(LINESTYLES)]
    if x.size > 20 and "markevery" not in kwargs:
        step = max(1, x.size // 10)
        kwargs["markevery"] = ((i * max(1, step // 4)) % step, step)
    kwargs.setdefault("markersize", 4)
    (line,) = ax.plot(x, mean, label=label, **kwargs)
    if half_width is not None:
        hw = np.asarray(half_width)
        ax.fill_between(x, mean - hw, mean + hw, color=line.get_color(), alpha=0.2, lw=0)
    return line


def t_band(n: int, what: str = "seeds", level: float = 0.95) -> str:
    """Caption for ``line_with_band`` bands from ``core.metrics.mean_and_ci``."""
    return (f"Line: mean over {n} {what}; band: {level:.0%} Student-t confidence interval of "
            "the mean.")


def bootstrap_band(n: int, what: str = "problems", level: float = 0.95,
                   resamples: int | None = None, statistic: str = "mean",
                   shape: str = "band") -> str:
    """Caption for bands / error bars from ``core.metrics.bootstrap_ci`` (percentile)."""
    r = f", {resamples} resamples" if resamples else ""
    return (f"Line: {statistic} over {n} {what}; {shape}: {level:.0%} percentile bootstrap "
            f"interval{r}.")


def _log_label(value, pos=None):
    del pos
    if value <= 0:
        return ""
    if 1e-3 <= value < 1e5:
        return f"{value:g}"
    exp = np.floor(np.log10(value))
    mant = value / 10 ** exp
    return (f"$10^{{{int(exp)}}}$" if np.isclose(mant, 1) else
            f"${mant:g}\\times10^{{{int(exp)}}}$")


def _minor_2_5(value, pos=None):
    if value <= 0:
        return ""
    mant = value / 10 ** np.floor(np.log10(value))
    return _log_label(value, pos) if np.isclose(mant, 2) or np.isclose(mant, 5) else ""


def _overlaps(labels, renderer) -> bool:
    boxes = [t.get_window_extent(renderer) for t in labels if t.get_visible() and t.get_text()]
    boxes.sort(key=lambda b: b.x0)
    return any(a.x1 > b.x0 - 2 for a, b in zip(boxes, boxes[1:], strict=False))


def readable_log_axes(fig) -> None:
    """Readable tick labels on every log axis of ``fig`` that uses matplotlib's default
    log formatters (an axis with a formatter set by the caller is left alone)."""
    defaults = (ticker.LogFormatterSciNotation, ticker.LogFormatterMathtext)
    for ax in fig.axes:
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log" or type(axis.get_major_formatter()) not in defaults:
                continue
            lo, hi = sorted(lim)
            majors = [t for t in axis.get_majorticklocs() if lo <= t <= hi]
            axis.set_major_formatter(ticker.FuncFormatter(_log_label))
            if type(axis.get_minor_formatter()) in defaults:
                minors = [t for t in axis.get_minorticklocs() if lo <= t <= hi]
                axis.set_minor_formatter(
                    ticker.NullFormatter() if len(majors) >= 2
                    else ticker.FuncFormatter(_log_label) if len(minors) <= 6
                    else ticker.FuncFormatter(_minor_2_5))
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels = ax.get_xticklabels(which="both")
        if ax.get_xscale() == "log" and _overlaps(labels, renderer):
            for t in labels:
                t.set_rotation(35)
                t.set_horizontalalignment("right")


LABEL_GID = "jaxlab-point-label"
LEADER_GID = "jaxlab-label-leader"


def label_points(ax, x, y, names, fontsize: float = 7) -> list:
    """Labels the points (``x[i]``, ``y[i]``) of ``ax`` with ``names[i]``; ``save`` (or
    ``place_labels``) moves each label, once the layout is final, to the first free spot
    beside its point (right, then left, then stacked below / above with a leader line), so
    no two labels, nor a label and the legend, overlap.

    Returns:
      the label annotations.
    """
    if not len(x) == len(y) == len(names):
        raise ValueError(f"`x`, `y` and `names` must have one entry per point, got "
                         f"{len(x)}, {len(y)} and {len(names)}.")
    out = []
    for xi, yi, nm in zip(x, y, names, strict=True):
        a = ax.annotate(str(nm), (xi, yi), xytext=(4, 0), textcoords="offset points",
                        fontsize=fontsize, ha="left", va="center", gid=LABEL_GID)
        a.set_in_layout(False)  # placed after the layout, inside the axes where it fits
        out.append(a)
    return out


def point_labels(fig) -> list:
    """The labels ``label_points`` added to ``fig``."""
    return [t for ax in fig.axes for t in ax.texts if t.get_gid() == LABEL_GID]


def _free(box, placed, pad: float = 1.0) -> bool:
    x0, y0, x1, y1 = box
    return all(x1 + pad <= b[0] or b[2] + pad <= x0 or y1 + pad <= b[1] or b[3] + pad <= y0
               for b in placed)


def place_labels(fig) -> None:
    """Places every ``label_points`` label of ``fig`` so none overlaps another label or a
    legend: for each label (by its point, left to right), the first free spot among right
    / left of the point at vertical offsets 0, -h, +h, -2h, ... (h: the tallest label's height),
    inside the axes while one is free there, outside otherwise; a label moved off its
    point's row gets a thin leader line."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    to_pt = 72.0 / fig.dpi
    for ax in fig.axes:
        for old in [t for t in ax.texts if t.get_gid() == LEADER_GID]:
            old.remove()
        labels = [t for t in ax.texts if t.get_gid() == LABEL_GID]
        if not labels:
            continue
        frame = ax.get_window_extent(renderer)
        legend = ax.get_legend()
        placed = ([tuple(legend.get_window_extent(renderer).extents)]
                  if legend is not None and legend.get_visible() else [])
        anchors = [ax.transData.transform(t.xy) for t in labels]
        h = max(t.get_window_extent(renderer).height for t in labels)  # one row height
        for i in sorted(range(len(labels)), key=lambda k: (anchors[k][0], -anchors[k][1])):
            t, (px, py) = labels[i], anchors[i]
            w, gap = t.get_window_extent(renderer).width, 4.0 / to_pt

            def spots(w=w, h=h, px=px, py=py, gap=gap):
                for step in itertools.count():
                    dy = (-1) ** step * ((step + 1) // 2) * (h + 1)
                    for side in (1, -1):
                        x0 = px + gap if side > 0 else px - gap - w
                        yield side, dy, (x0, py + dy - h / 2, x0 + w, py + dy + h / 2)

            inside = [s for s in itertools.islice(spots(), 8 * len(labels) + 8)
                      if frame.x0 <= s[2][0] and s[2][2] <= frame.x1
                      and frame.y0 <= s[2][1] and s[2][3] <= frame.y1]
            side, dy, box = next(s for s in itertools.chain(inside, spots())
                                 if _free(s[2], placed))
            placed.append(box)
            t.set_horizontalalignment("left" if side > 0 else "right")
            t.set_verticalalignment("center")
            t.xyann = (side * gap * to_pt, dy * to_pt)
            t.set_annotation_clip(False)
            if abs(dy) > h / 2:  # off its point's row: a leader line from the label
                leader = ax.annotate("", t.xy, xytext=(side * gap * to_pt, dy * to_pt),
                                     textcoords="offset points", gid=LEADER_GID,
                                     annotation_clip=False,
                                     arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "0.5",
                                                 "shrinkA": 0, "shrinkB": 2})
                leader.set_in_layout(False)


def log2_ticks(axis, min_ticks: int = 3) -> None:
    """Ticks at 2^k (and, where fewer than ``min_ticks`` of those are in view, at 1.5 2^k,
    then at 1.25 / 1.5 / 1.75 2^k) on a log ``axis`` (e.g. ``ax.xaxis``), plain numbers, no
    minor labels: costs that double read as such, and a narrow axis still has several
    ticks. Call it once the data are plotted (it reads the view limits)."""
    lo, hi = sorted(axis.get_view_interval())
    for subs in ((1.0,), (1.0, 1.5), (1.0, 1.25, 1.5, 1.75)):
        ticks = [m * 2.0 ** k for k in range(int(np.floor(np.log2(max(lo, 1e-300)))) - 1,
                                             int(np.ceil(np.log2(max(hi, 1e-300)))) + 2)
                 for m in subs]
        if sum(lo <= v <= hi for v in ticks) >= min_ticks:
            break
    axis.set_major_locator(ticker.LogLocator(base=2, subs=subs))
    axis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_locator(ticker.NullLocator())
    axis.set_minor_formatter(ticker.NullFormatter())


def _rows(fig) -> int:
    """Rows of panels (``figure``'s grid), for the caption's share of the height."""
    spec = next((ax.get_subplotspec() for ax in fig.axes if ax.get_subplotspec()), None)
    return spec.get_gridspec().nrows if spec is not None else 1


def text_px_of_png(path: str | os.PathLike) -> float | None:
    """The smallest text's height in pixels at the PNG's own size, as ``save`` stored it;
    None for a PNG without it."""
    from PIL import Image

    with Image.open(path) as im:
        value = im.info.get(PNG_TEXT_KEY)
    return None if value is None else float(value)


def _has_intervals(fig) -> bool:
    for ax in fig.axes:
        if any(isinstance(c, mcontainer.ErrorbarContainer) for c in ax.containers):
            return True
        if any(isinstance(c, mcollections.PolyCollection) for c in ax.collections):
            return True
    return False


def save(fig, path: str | os.PathLike, caption: str | None = None) -> str:
    """Saves ``fig`` as PNG at ``path`` (folders created) and closes it; in a multi-host
    run only the main process writes.

    Args:
      fig: the figure.
      path: PNG path.
      caption: text under the axes; every figure with bands or error bars states what they
        are (CI kind and level) and over how many seeds / problems / images (see ``t_band``).
    """
    path = os.fspath(path)
    if caption:
        fig.text(0.5, 0.005, caption, ha="center", va="bottom", fontsize=8, wrap=True)
    elif _has_intervals(fig):
        logging.warning("figure %s has bands or error bars but no caption saying what they "
                        "are (plots.t_band / plots.bootstrap_band) and over how many "
                        "seeds / problems", os.path.basename(path))
    if sharding.is_main_process():
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.canvas.draw()
        readable_log_axes(fig)
        fig.tight_layout(rect=(0, 0.05 / _rows(fig) if caption else 0, 1, 1))
        place_labels(fig)
        natural = min_text_px(fig, page_width_px=None)
        small = natural * _shrink(fig)
        if small < MIN_TEXT_PX:
            logging.warning("figure %s: its smallest text is %.1f px high at the results "
                            "page's width (%d px); legible needs >= %.0f px",
                            os.path.basename(path), small, PAGE_WIDTH_PX, MIN_TEXT_PX)
        # Atomic: a run killed while saving leaves no truncated PNG under ``path``.
        tmp = f"{path}.tmp"
        fig.savefig(tmp, dpi=DPI, format="png", metadata={PNG_TEXT_KEY: f"{natural:.2f}"})
        os.replace(tmp, path)
    plt.close(fig)
    return path


def _data_points(ax, samples: int = 16) -> np.ndarray:
    """Display coordinates [P, 2] of the data drawn in ``ax``: the vertices of every line in
    data coordinates (and ``samples`` points along each of its segments), scatter offsets,
    and the corners and centre of every bar of nonzero height. Reference lines drawn in
    axes coordinates (``axhline``, ``axvline``) and bands are not data points."""
    pts = []
    for line in ax.get_lines():
        if not line.get_visible() or line.get_transform() != ax.transData:
            continue
        xy = np.asarray(line.get_xydata(), np.float64).reshape(-1, 2)
        xy = line.get_transform().transform(xy[np.isfinite(xy).all(1)])
        xy = xy[np.isfinite(xy).all(1)]
        if len(xy) > 1 and line.get_linestyle() not in ("None", "", " "):
            t = np.linspace(0, 1, samples)[None, :, None]
            xy = (xy[:-1, None] * (1 - t) + xy[1:, None] * t).reshape(-1, 2)
        pts.append(xy)
    for coll in ax.collections:
        if coll.get_visible() and isinstance(coll, mcollections.PathCollection):
            off = np.asarray(coll.get_offsets(), np.float64).reshape(-1, 2)
            pts.append(ax.transData.transform(off[np.isfinite(off).all(1)]))
    for patch in ax.patches:
        if patch.get_visible() and getattr(patch, "get_height", None) and patch.get_height():
            box = patch.get_window_extent()
            pts.append(np.array([[box.x0, box.y0], [box.x1, box.y1], [box.x0, box.y1],
                                 [box.x1, box.y0], [(box.x0 + box.x1) / 2, box.y1]]))
    return np.concatenate(pts) if pts else np.zeros((0, 2))


def figure_problems(fig) -> list[str]:
    """What makes ``fig`` hard to read, one sentence each (empty: none found).

    * a visible panel with its axis on and no data (no line, marker, band, image or bar of
      nonzero height): an empty panel;
    * a legend inside a panel whose box covers a data point of that panel
      (``_data_points``).

    Hidden panels and panels with their axis off (e.g. one holding only a legend) are not
    checked.
    """
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out = []
    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        name = f"panel {i} ({ax.get_title() or ax.get_ylabel() or 'untitled'!r})"
        pts = _data_points(ax)
        bands = [c for c in ax.collections if c.get_visible() and len(c.get_paths())
                 and not isinstance(c, mcollections.PathCollection)]
        if not len(pts) and not bands and not ax.images:
            out.append(f"{name} is empty: it draws no data")
        legend = ax.get_legend()
        if legend is None or not legend.get_visible() or not len(pts):
            continue
        box = legend.get_window_extent(renderer)
        covered = ((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1)
                   & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1))
        if covered.any():
            out.append(f"{name}: its legend covers {int(covered.sum())} data point(s)")
    return out
