"""Every page of the built documentation in headless Chromium: it renders (a screenshot
that is not blank), every figure loads, and every evidence figure's smallest text is
legible at the width the page shows it.

The pages come from ``JAXLAB_DOCS_HTML=<folder>`` (``.ci/run`` builds the docs with
``sphinx -W`` and then runs this file on them); without it the test builds the docs itself,
which is why it is ``slow``. Chromium as in ``test_report_html.py``.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from experiments.lib import plots, registry
from tests.test_report_html import _browser

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
PAGES = ("index", *registry.METHODS, "sale", "core", "api", "examples", "results")


@pytest.fixture(scope="module")
def html_dir(tmp_path_factory):
    given = os.environ.get("JAXLAB_DOCS_HTML")
    if given:
        return pathlib.Path(given).resolve()
    out = tmp_path_factory.mktemp("docs_html")
    res = subprocess.run([sys.executable, "-m", "sphinx", "-E", "-W", "--keep-going", "-q",
                          "-b", "html", str(DOCS), str(out)], capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    return out


def _attrs(tag: str) -> dict:
    return dict(re.findall(r'([\w-]+)="([^"]*)"', tag))


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_docs_page_renders_with_loaded_legible_figures(html_dir, page, tmp_path):
    path = html_dir / f"{page}.html"
    assert path.exists(), f"{path} was not built"
    dom = _browser("--window-size=1600,1600", "--virtual-time-budget=10000", "--dump-dom",
                   path.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    body = _attrs(re.search(r"<body[^>]*>", dom.stdout).group(0))
    assert body.get("data-images-broken") == "0", (page, body)
    illegible = []
    for tag in re.findall(r"<img [^>]*>", dom.stdout):
        img = _attrs(tag)
        assert img.get("data-loaded") == "yes", (page, img.get("src"))
        if not img["src"].startswith("_images/"):  # not an evidence figure (theme icons)
            continue
        natural = plots.text_px_of_png(html_dir / img["src"])
        assert natural is not None, (page, img["src"], "not written by plots.save: "
                                     "regenerate with experiments.make_evidence")
        shown = natural * int(img["data-shown-width"]) / int(img["data-natural-width"])
        if shown < plots.MIN_TEXT_PX:
            illegible.append(f"{img['src']}: {shown:.1f} px")
    assert not illegible, (page, illegible)

    shot = tmp_path / "shot.png"
    res = _browser("--window-size=1600,1600", f"--screenshot={shot}", path.as_uri())
    assert res.returncode == 0 and shot.exists(), res.stderr[-2000:]
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    non_white = (pixels.min(-1) < 0.9).mean()
    assert non_white > 0.02 and pixels.std() > 0.05, (page, non_white, pixels.std())
