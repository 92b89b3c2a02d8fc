"""The one results page: ``results/report.html`` (self-contained, written by the suite).

One HTML file beside ``REPORT.md`` with the same headline tables, every figure of every
method inline (PNG as base64 data URIs, so the page can be mailed or attached as one file),
and the provenance of the run (versions, commit, machine). Each method's section opens with
one short table (its first ``SHORT_ROWS`` headline rows: the main number and its CI) and
folds the rest below it in a ``<details>`` block (wall time, config, every headline row,
time by unit, figures). A small script marks each figure that fails to load (the page says
so at the top) and each whose smallest text is under ``plots.MIN_TEXT_PX`` pixels high at
the width the browser shows it unfolded (from the height ``plots.save`` stored in the PNG);
``tests/test_report_html.py`` reads the marks in headless Chromium.
"""

import base64
import html
import os
from collections.abc import Sequence
from typing import NamedTuple

from jaxlab.core import sharding

from . import plots

_STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1100px; padding: 0 1em; color: #1b1b1b; background: #fff; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #bbb; padding-bottom: .15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #eef1f5; }
tr:nth-child(even) td { background: #fafafa; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-size: 0.85em; color: #555; }
.meta { color: #444; font-size: 0.92em; }
nav a { margin-right: 1em; }
#broken { color: #b00; font-weight: bold; }
details { margin: .5em 0 1em; }
summary { cursor: pointer; color: #245; }
"""

# Marks every <img>: loaded (naturalWidth > 0) or broken, and the height in pixels of its
# smallest text as shown (its data-text-px at natural size x shown width / natural width);
# a visible line lists broken ones.
_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images), bad = [], small = [], least = 1e9;
  // Figures in folded sections have no width until shown: unfold to measure, then refold.
  var folded = Array.prototype.slice.call(document.querySelectorAll('details:not([open])'));
  folded.forEach(function (d) { d.open = true; });
  imgs.forEach(function (im) {
    var ok = im.complete && im.naturalWidth > 0;
    im.setAttribute('data-loaded', ok ? 'yes' : 'no');
    if (!ok) bad.push(im.alt || im.src.slice(0, 80));
    var natural = parseFloat(im.getAttribute('data-text-px'));
    if (ok && isFinite(natural)) {
      var shown = natural * im.width / im.naturalWidth;
      im.setAttribute('data-shown-text-px', shown.toFixed(2));
      least = Math.min(least, shown);
      if (shown < MIN_TEXT_PX) small.push(im.alt);
    }
  });
  folded.forEach(function (d) { d.open = false; });
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-images-broken', bad.length);
  document.body.setAttribute('data-min-text-px', least.toFixed(2));
  document.body.setAttribute('data-images-illegible', small.join(' '));
  if (bad.length) document.getElementById('broken').textContent =
      bad.length + ' figure(s) failed to load: ' + bad.join(', ');
});
"""


class Section(NamedTuple):
    """One method's part of the page.

    Attributes:
      name: anchor and heading (the method's name).
      title: human title shown beside the name.
      meta: one paragraph (wall time, config hash, code version).
      rows: ``[(metric, value)]`` headline rows.
      figures: PNG paths.
      caption: one sentence above the table: what it shows and which way is better.
      timing: rows of the time-by-unit table (``TIMING_HEADER`` columns, strings), shown
        under the headline table; empty: no table.
    """

    name: str
    title: str
    meta: str
    rows: Sequence[tuple[str, str]]
    figures: Sequence[str]
    caption: str = ""
    timing: Sequence[Sequence[str]] = ()


# Headline rows in a section's short table (the rest are folded below it).
SHORT_ROWS = 2

# Columns of a section's time-by-unit table (REPORT.md and report.html).
TIMING_HEADER = ("unit", "wall s", "trace s", "lower s", "compile s", "run s",
                 "compile share", "programs compiled + loaded", "built twice")


def _img(path: str) -> str:
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    alt = html.escape(os.path.basename(path))
    text_px = plots.text_px_of_png(path)
    text = "" if text_px is None else f' data-text-px="{text_px:.2f}"'
    return (f'<figure><img alt="{alt}"{text} src="data:image/png;base64,{data}">'
            f"<figcaption>{alt}</figcaption></figure>")


def render(title: str, provenance: Sequence[str], sections: Sequence[Section],
           notes: Sequence[str] = ()) -> str:
    """The page as a string: title, provenance paragraphs, then one section per method
    (caption and short headline table, then folded: meta, every headline row, the time by
    unit, figures inline)."""
    esc = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{esc(title)}</title><style>{_STYLE}</style>",
           f"<script>{_SCRIPT.replace('MIN_TEXT_PX', str(plots.MIN_TEXT_PX))}</script>"
           "</head><body>", f"<h1>{esc(title)}</h1>",
           '<p id="broken"></p>']
    out += [f'<p class="meta">{esc(p)}</p>' for p in provenance]
    out += [f"<p>{esc(n)}</p>" for n in notes]
    if sections:
        out.append("<nav>" + "".join(f'<a href="#{esc(s.name)}">{esc(s.name)}</a>'
                                     for s in sections) + "</nav>")
    for s in sections:
        out.append(f'<h2 id="{esc(s.name)}">{esc(s.name)}: {esc(s.title)}</h2>')
        if s.caption:
            out.append(f"<p>{esc(s.caption)}</p>")
        if s.rows:
            out += _metric_table(s.rows[:SHORT_ROWS], "short")
        folded = [f"{len(s.rows)} headline rows"] + (["time by unit"] if s.timing else []) + (
            [f"{len(s.figures)} figure(s)"] if s.figures else [])
        out += [f"<details><summary>Details: {esc(', '.join(folded))}</summary>",
                f'<p class="meta">{esc(s.meta)}</p>']
        if s.rows:
            out += _metric_table(s.rows, "full")
        if s.timing:
            out.append('<table class="timing"><thead><tr>' + "".join(f"<th>{esc(h)}</th>"
                                                     for h in TIMING_HEADER)
                       + "</tr></thead><tbody>")
            out += ["<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in r) + "</tr>"
                    for r in s.timing]
            out.append("</tbody></table>")
        out += [_img(p) for p in s.figures]
        out.append("</details>")
    out.append("</body></html>")
    return "\n".join(out)


def _metric_table(rows, kind: str) -> list[str]:
    """A metric / value table (``kind``: its class, ``short`` or ``full``), escaped."""
    esc = html.escape
    return ([f'<table class="{kind}"><thead><tr><th>metric</th><th>value</th></tr></thead>'
             "<tbody>"]
            + [f"<tr><td>{esc(str(k))}</td><td>{esc(str(v))}</td></tr>" for k, v in rows]
            + ["</tbody></table>"])


def write(path: str | os.PathLike, title: str, provenance: Sequence[str],
          sections: Sequence[Section], notes: Sequence[str] = ()) -> str:
    """Writes ``render(...)`` to ``path`` (main process only; all processes wait)."""
    path = os.fspath(path)
    if sharding.is_main_process():
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            f.write(render(title, provenance, sections, notes))
        os.replace(tmp, path)
    sharding.sync(f"report:{os.path.abspath(path)}")
    return path
