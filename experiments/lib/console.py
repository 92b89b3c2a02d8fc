"""What a binary prints: one line per flag error and one last line naming its results.

Shared by the method binaries (``experiments.common``), the suite and the whole-graph study;
imports no module of ``experiments.lib`` but ``results``.
"""

import os
import sys

from absl import flags

from . import results


def results_line(workdir: str | os.PathLike, *extra: str) -> str:
    """The last line of a binary: the results folder (absolute) and what is in it, e.g.
    ``results: /abs/workdir (summary.json, figures: a.png, b.png)``; ``extra`` names are
    listed first (those that exist)."""
    workdir = os.path.abspath(os.fspath(workdir))
    names = [n for n in (*extra, results.SUMMARY) if os.path.exists(os.path.join(workdir, n))]
    figures = results.figures_in(workdir)
    if figures:
        names.append("figures: " + ", ".join(figures))
    return f"results: {workdir}" + (f" ({', '.join(names)})" if names else "")


def one_line(error: BaseException) -> str:
    """The first line of ``error``'s message (absl and ml_collections errors may carry a
    traceback as text)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing for ``app.run(..., flags_parser=parse_flags)``: a bad flag is one
    line on stderr, exit 2 (absl's default prints ``FATAL`` and the usage hint)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        sys.exit(2)
