"""What a binary prints: one line per flag error and one last line naming its results.

Shared by the method binaries (``experiments.common``), the suite and the whole-graph study;
imports no module of ``experiments.lib`` but ``results``.
"""

import difflib
import functools
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


def require_workdir(workdir: str | None) -> None:
    """Exits with ``error: --workdir is required.`` on stderr (status 2) when ``workdir`` is
    empty: the check of the study binaries whose ``--workdir`` has no default."""
    if not workdir:
        print("error: --workdir is required.", file=sys.stderr)
        sys.exit(2)


def one_line(error: BaseException) -> str:
    """The first line of ``error``'s message (absl and ml_collections errors may carry a
    traceback as text)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def unknown_flag_message(name: str, known) -> str:
    """``error: unknown flag --name (did you mean --closest?)``: the closest of ``known``
    flag names, or none."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    hint = f" (did you mean --{close[0]}?)" if close else ""
    return f"error: unknown flag --{name}{hint}"


def flag_names(argv) -> list[str]:
    """The names of the ``--name[=value]`` / ``-name`` flags in ``argv`` (a ``--noname``
    of a boolean flag as ``name``; nothing after a bare ``--``)."""
    out = []
    for a in argv:
        if a == "--":
            break
        if a.startswith("-") and len(a) > 1 and not a[1:2].isdigit():
            name = a.lstrip("-").split("=", 1)[0]
            if name.startswith("no") and name[2:] in flags.FLAGS and name not in flags.FLAGS:
                name = name[2:]
            out.append(name)
    return out


def parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing for ``app.run(..., flags_parser=parse_flags)``: a bad flag is one
    line on stderr, exit 2 (absl's default prints ``FATAL`` and the usage hint); a mistyped
    flag name is ``error: unknown flag --workdr (did you mean --workdir?)``."""
    try:
        return flags.FLAGS(argv)
    except flags.UnrecognizedFlagError as e:
        print(unknown_flag_message(e.flagname, flags.FLAGS), file=sys.stderr)
        sys.exit(2)
    except flags.Error as e:
        print(f"error: {one_line(e)}", file=sys.stderr)
        sys.exit(2)


@functools.cache
def _our_folders() -> tuple[str, ...]:
    """The folders of this project's packages, wherever installed (a checkout or a wheel,
    where ``experiments`` is ``jaxlab_experiments``)."""
    import jaxlab

    return tuple(os.path.dirname(os.path.abspath(f)) + os.sep for f in (
        os.path.dirname(os.path.abspath(__file__)), jaxlab.__file__))


def ours_or_warning(record) -> bool:
    """A logging filter: keep a record at WARNING or above, or one logged by this project's
    packages or by code that is not an installed library (a user's script); drop installed
    libraries' INFO lines (e.g. orbax's device notes), which say nothing about the run."""
    import logging

    path = os.path.abspath(record.pathname)
    installed = any(d in path.split(os.sep) for d in ("site-packages", "dist-packages"))
    return (record.levelno >= logging.WARNING or path.startswith(_our_folders())
            or not installed)


def quiet_other_libraries() -> None:
    """Adds ``ours_or_warning`` to absl's handler (idempotent): the console keeps the
    methods' result lines and every warning, not other libraries' INFO lines."""
    from absl import logging as absl_logging

    handler = absl_logging.get_absl_handler()
    if not any(getattr(f, "__name__", "") == "ours_or_warning" for f in handler.filters):
        handler.addFilter(ours_or_warning)
