"""results/report.html: the suite writes it beside REPORT.md, with the headline
tables, every figure inline and the provenance; headless Chromium loads every figure, the
smallest text of every figure is legible at the width the page shows it, and the page is
not blank.

Chromium is Debian's ``chromium`` (``.ci/run`` installs it); without it the browser tests
skip, unless ``JAXLAB_REQUIRE_CHROMIUM=1`` (set by ``.ci/run``) makes that a failure.
"""

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from experiments import suite
from experiments.lib import plots, registry, report


def _chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("JAXLAB_REQUIRE_CHROMIUM") == "1":
            pytest.fail("JAXLAB_REQUIRE_CHROMIUM=1 but neither `chromium` nor "
                        "`chromium-browser` is on PATH (apt-get install -y chromium).")
        pytest.skip("headless-browser check needs Debian's `chromium` (apt-get install -y "
                    "chromium); set JAXLAB_REQUIRE_CHROMIUM=1 to make its absence a failure.")
    return path


def _browser(*args, timeout=120):
    cmd = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-dev-shm-usage", "--hide-scrollbars", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "HOME": os.environ.get("HOME", "/tmp")})


def _figure(path, seed):
    fig, (ax,) = plots.figure()
    x = np.arange(1, 20)
    plots.line_with_band(ax, x, np.sqrt(x) + seed, 0.3, label=f"series {seed}")
    ax.legend()
    plots.save(fig, path, caption=plots.t_band(4))
    return str(path)


def _fake_suite_run(tmp_path, monkeypatch):
    """A results folder as the suite leaves it, for two methods with tiny summaries."""
    methods = ["qlearning", "bco"]
    prov = {"git": {"commit": "0" * 40, "dirty": False}, "packages": {"jax": "0.10.2"},
            "machine": {"machine": "x86_64", "cpu_count": 2, "platform": "Linux",
                        "backend": "cpu", "device_count": 1, "device_kind": "cpu",
                        "process_count": 1},
            "code_version": "0.1.0+src.test", "config_hash": "abc", "unit_key": "k"}
    summaries = {m: {"value": i + 0.5, "provenance": prov} for i, m in enumerate(methods)}
    for i, m in enumerate(methods):
        _figure(tmp_path / m / "a.png", i)
        _figure(tmp_path / m / "b.png", i + 1)

    class Exp:
        caption = "What the rows show <and> which way is better."

        @staticmethod
        def headline(summary):
            return [("headline <value>", f"{summary['value']:.2f}")]

    monkeypatch.setattr(registry, "experiment", lambda name: Exp)
    suite._write_report("smoke", str(tmp_path), methods, summaries, {m: 1.0 for m in methods})
    return tmp_path / "report.html"


def test_suite_writes_report_html_with_tables_figures_and_provenance(tmp_path, monkeypatch):
    page = _fake_suite_run(tmp_path, monkeypatch).read_text()
    assert (tmp_path / "REPORT.md").exists()
    assert page.count("<img ") == 4 and page.count("data:image/png;base64,") == 4
    # each method: a short headline table first, the rest folded below it
    assert page.count('<table class="short">') == 2 and page.count('<table class="full">') == 2
    assert page.count("<details>") == 2 and page.count("</details>") == 2
    for m in ("qlearning", "bco"):
        section = page.split(f'<h2 id="{m}">', 1)[1].split("<h2 ", 1)[0]
        assert section.index('<table class="short">') < section.index("<details>")
        assert section.index("<details>") < section.index("<img ")
        assert "Details: 1 headline rows, 2 figure(s)" in section
    assert "headline &lt;value&gt;" in page  # escaped, not markup
    assert page.count("What the rows show &lt;and&gt; which way is better.") == 2
    assert (tmp_path / "REPORT.md").read_text().count("What the rows show") == 2
    assert "0.1.0+src.test" in page and "x86_64" in page and "jax 0.10.2" in page
    assert "tensorboard --logdir" in page


def test_report_page_loads_every_figure_in_headless_chromium(tmp_path, monkeypatch):
    path = _fake_suite_run(tmp_path, monkeypatch)
    # One more section whose figure is missing: the page must report it as broken.
    bad = tmp_path / "bad.html"
    html = path.read_text().replace("data:image/png;base64,", "data:image/png;base64,AAAA", 1)
    bad.write_text(html)
    _check_page(path, tmp_path, 4)
    dom_bad = _browser("--virtual-time-budget=10000", "--dump-dom", bad.as_uri())
    assert 'data-images-broken="1"' in re.search(r"<body[^>]*>", dom_bad.stdout).group(0)


@pytest.mark.skipif(not os.environ.get("JAXLAB_REPORT_HTML"),
                    reason="set JAXLAB_REPORT_HTML=<results>/report.html (a real run)")
def test_a_real_runs_report_page_loads_every_figure(tmp_path):
    """Opt-in: the page a real suite run wrote (e.g. the quick preset's), same checks."""
    import pathlib

    path = pathlib.Path(os.environ["JAXLAB_REPORT_HTML"]).resolve()
    n = path.read_text().count("<img ")
    assert n > 0, f"{path} has no figure"
    _check_page(path, tmp_path, n)


def test_a_figure_too_wide_for_its_text_is_marked_illegible(tmp_path, monkeypatch):
    path = _fake_suite_run(tmp_path, monkeypatch)
    fig, axes = plots.figure(4, max_cols=None)  # four panels in one row: 2400 px wide
    for ax in axes:
        plots.line_with_band(ax, np.arange(5), np.arange(5.0), label="tiny")
        ax.legend(fontsize=6)
    wide = plots.save(fig, tmp_path / "wide.png")
    assert plots.text_px_of_png(wide) == pytest.approx(6 * plots.DPI / 72)
    page = report.render("t", [], [report.Section("m", "T", "", [], [wide])])
    bad = tmp_path / "wide.html"
    bad.write_text(page)
    body = _body(bad)
    assert 'data-images-illegible="wide.png"' in body, body
    shown = float(re.search(r'data-min-text-px="([0-9.]+)"', body).group(1))
    assert shown < plots.MIN_TEXT_PX
    _check_page(path, tmp_path, 4)  # the fake run's single-panel figures are legible


def _body(path):
    dom = _browser("--window-size=1200,1400", "--virtual-time-budget=10000", "--dump-dom",
                   path.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    return re.search(r"<body[^>]*>", dom.stdout).group(0)


def _check_page(path, tmp_path, n_images):
    """Every one of the ``n_images`` figures loads, each figure's smallest text is at least
    ``plots.MIN_TEXT_PX`` high as shown in a 1200-px window, and a screenshot is not blank."""
    body = _body(path)
    assert f'data-images="{n_images}"' in body and 'data-images-broken="0"' in body, body
    assert 'data-images-illegible=""' in body, body
    assert float(re.search(r'data-min-text-px="([0-9.]+)"', body).group(1)) >= plots.MIN_TEXT_PX

    shot = tmp_path / "shot.png"
    res = _browser("--window-size=1000,1400", f"--screenshot={shot}", path.as_uri())
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    import matplotlib.image

    img = matplotlib.image.imread(shot)[..., :3]
    assert img.shape[:2] == (1400, 1000)
    # Non-blank: many distinct colours and a good share of non-white pixels (text, figures).
    non_white = (img.min(-1) < 0.9).mean()
    assert non_white > 0.02 and img.std() > 0.05, (non_white, img.std())


def test_render_escapes_and_lists_sections():
    page = report.render("t <1>", ["p"], [report.Section("m", "T", "meta", [("a", "b")], [])])
    assert "<title>t &lt;1&gt;</title>" in page and 'href="#m"' in page and "<td>b</td>" in page
    rows = [(f"r{i}", f"{i}") for i in range(5)]
    page = report.render("t", [], [report.Section("m", "T", "meta", rows, [])])
    short = page.split('<table class="short">', 1)[1].split("</table>", 1)[0]
    assert short.count("<tr><td>") == report.SHORT_ROWS == 2 and "<td>r1</td>" in short
    full = page.split('<table class="full">', 1)[1].split("</table>", 1)[0]
    assert full.count("<tr><td>") == 5
