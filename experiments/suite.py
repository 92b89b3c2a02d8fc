"""Runs every method's experiment at one preset and writes results/<method>/ + REPORT.md.

  python -m experiments.suite --preset=quick --workdir=results

Every method of ``registry.METHODS`` runs, then ``sale`` (``experiments/sale.py``: SALE's
reference and Pallas kernels on a small head, with their accuracy check). Each writes
``summary.json``, PNG plots and TensorBoard events (``tb/``) in ``<workdir>/<method>/``;
the suite writes ``<workdir>/REPORT.md`` and the one results page ``<workdir>/report.html``
(the same tables, every figure inline, provenance). A method whose summary was written by
this code under this preset's config (its ``provenance``
block) is not rerun (pass --force to redo it); a summary from another config or code
version is rerun, never reported; a method interrupted midway keeps its finished units and
resumes the running one from its last chunk checkpoint (``experiments.lib.study``).

A method's summary is reused only when ``results.read_summary`` trusts it (valid JSON,
content matching its sha256, every figure it lists on disk); otherwise the suite logs a
warning naming the file and reruns the method (its finished units are reused). The suite
holds ``<workdir>``'s lock while it runs; a second suite on the same workdir fails at once.

The console shows one line when each method starts (``[1/7] qlearning: running preset
quick ...``), the method's own result lines, one line when it is done (its wall time and
first headline row), and last the line naming the results folder and what is in it
(``results: /abs/results (REPORT.md, report.html, qlearning/, ...)``); REPORT.md holds the
tables. Progress is one line redrawn in place on a terminal and an occasional log line
otherwise (``experiments.lib.progress``). A bad flag value (``--preset=smok``,
``--methods=qlearnin``) or a mistyped flag (``--workdr``, answered with the closest flag) is
one line naming it, exit 2.

Compiled programs are kept in JAX's persistent compilation cache
(``experiments.lib.compile_cache``), so a second run compiles little.
"""

import glob
import importlib.util
import json
import os
import sys
import time
import warnings

from absl import app, flags, logging

from jaxlab.core import extras, sharding

from . import common
from .lib import compile_cache, console, locks, provenance, registry, report, results

METHODS = registry.METHODS
# What the suite runs by default: every method, then SALE's kernels (``methods.SUITE_EXTRAS``
# says why SALE is kept out of ``METHODS``).
SUITE_METHODS = tuple(registry.suite_methods())
# The whole-graph AvAtar study's folder in a results folder (``wholegraph_study.FOLDER``; that
# module, which needs the [ot] extra, is imported only when the folder holds a summary).
WHOLEGRAPH_FOLDER = "avatar_wholegraph"

_PRESET = flags.DEFINE_enum("preset", "quick", ["smoke", "quick", "full"], "Size of every run.")
_METHODS = flags.DEFINE_list("methods", list(SUITE_METHODS), "Methods to run.")
_FORCE = flags.DEFINE_bool("force", False, "Recompute methods (and all their units) whose "
                            "summary.json is current.")
_UPDATE_README = flags.DEFINE_string(
    "update_readme", None, "Path of a README whose results block (between the markers "
    "<!-- REPORT:BEGIN --> and <!-- REPORT:END -->) is replaced by REPORT.md.")

BEGIN, END = "<!-- REPORT:BEGIN -->", "<!-- REPORT:END -->"


def run_suite(preset: str, workdir: str, methods, force: bool = False) -> dict:
    """Runs ``methods`` at ``preset`` under ``workdir``; returns {method: summary}.

    A method's package (and its pip extra) is imported only when that method is selected.

    Raises:
      locks.Busy: another process is writing ``workdir`` (or a method's folder in it).
      extras.MissingExtraError: a selected method's extra is not installed (raised before
        any method runs; the one-line message names ``pip install 'jaxlab[<extra>]'``).
    """
    known = registry.suite_methods()
    unknown = sorted(set(methods) - set(known))
    if unknown:
        raise ValueError(f"unknown `methods` {unknown}; choose from {sorted(known)}.")
    _require_extras(methods)
    with locks.hold(workdir):
        return _run_suite(preset, workdir, methods, force)


def _require_extras(methods) -> None:
    """Raises ``extras.MissingExtraError`` if a package of a selected method's optional
    extra (``ot``, ``rl``, ``vision``) is missing, then imports each method's experiment
    (and so its package)."""
    for name in methods:
        extra = registry.method(name).extras
        for module in sorted(m for m, (x, _) in extras.EXTRAS.items() if x == extra != "dev"):
            try:
                found = importlib.util.find_spec(module) is not None
            except ImportError:
                found = False
            if not found:
                raise extras.MissingExtraError(extras.message(module), name=module)
    for name in methods:
        registry.experiment(name)


def _run_suite(preset: str, workdir: str, methods, force: bool) -> dict:
    summaries, timings = {}, {}
    for i, name in enumerate(methods, 1):
        step = f"[{i}/{len(methods)}] {name}"
        config = registry.get_config(name, preset)
        out = os.path.join(workdir, name)
        path = os.path.join(out, "summary.json")
        wall_path = os.path.join(out, "suite_wall_time.json")
        old = _trusted_summary(name, out)
        if old is not None and not force and provenance.is_current(old, config):
            _say(f"{step}: summary exists for this config and code, skipping (--force "
                 "reruns it)")
            summaries[name] = old
            wall = _read_json(wall_path)
            timings[name] = (wall.get("wall_s") if isinstance(wall, dict)
                             and wall.get("unit_key") == _key(old) else None)
            continue
        if old is not None and not force:
            logging.warning("%s: %s was written by another config, code version or numeric "
                            "environment (%s); rerunning", name, path, _key(old) or "no provenance")
        _say(f"{step}: running preset {preset} ({registry.method(name).title})")
        t0 = time.perf_counter()
        registry.train_and_evaluate(name, config, out, force=force)
        timings[name] = time.perf_counter() - t0
        # The report reads what is on disk, so a rerun that skips this method writes
        # the same rows in the same order.
        summaries[name] = results.read_summary(out)
        # The load averages (1, 5, 15 min) when the method finished: how busy the machine
        # was while its wall time was measured.
        results.write_json(wall_path, {"wall_s": timings[name], "preset": preset,
                                       "unit_key": _key(summaries[name]),
                                       "load_avg": list(os.getloadavg())})
        _say(f"{step}: done in {timings[name]:.0f} s"
             + "".join(f"; {k}: {v}" for k, v in _first_row(name, summaries[name])))
    _write_report(preset, workdir, methods, summaries, timings)
    return summaries


def _say(line: str) -> None:
    """Prints one line of the suite's console (main process only)."""
    if sharding.is_main_process():
        print(line, flush=True)


def _first_row(name: str, summary: dict) -> list[tuple[str, str]]:
    """The first headline row of ``name``'s summary (the method's main number), or none."""
    try:
        return list(registry.experiment(name).headline(summary))[:1]
    except Exception as e:  # noqa: BLE001 - the console line only; REPORT.md has them all
        logging.warning("%s: no headline row (%s: %s)", name, type(e).__name__, e)
        return []


def _trusted_summary(name: str, out: str):
    """``out/summary.json`` if ``results.read_summary`` trusts it, else None (with a warning
    naming the file and why: the method is rerun)."""
    try:
        return results.read_summary(out)
    except results.SummaryError as e:
        msg = f"{name}: {e}; rerunning"
        logging.warning(msg)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
        return None


def _read_json(path):
    """The JSON in ``path``, or None when it is absent or unreadable."""
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        logging.warning("%s is unreadable (%s); ignoring it", path, e)
        return None


def _key(summary):
    return (summary.get("provenance") or {}).get("unit_key")


def _write_report(preset, workdir, methods, summaries, timings):
    prov = summaries[methods[0]]["provenance"] if methods else provenance.record({})
    title = f"jaxlab results ({preset} preset)"
    prov_lines = [
        "Machine: " + provenance.machine_line(prov["machine"], with_load=False)
        + " (each method's load average is in its section).",
        "Code: " + provenance.code_line(prov["git"], prov["packages"], prov["code_version"])
        + "."]
    lines = [f"# {title}", "", prov_lines[0], "", prov_lines[1], ""]
    sections = []
    for name in methods:
        wall = ("not recorded" if timings[name] is None else f"{timings[name]:.0f} s")
        p = summaries[name]["provenance"]
        load = provenance.load_text((_read_json(os.path.join(
            workdir, name, "suite_wall_time.json")) or {}).get("load_avg"))
        meta = (f"Wall time of the run that wrote this summary: {wall}; {load}. Config hash "
                f"{p['config_hash']} (full config in {name}/summary.json), code "
                f"{p['code_version']}.")
        share, timing = _timing(os.path.join(workdir, name), p, timings[name])
        experiment = registry.experiment(name)
        _add_section(lines, sections, name, name, registry.method(name).title, meta + share,
                     experiment.headline(summaries[name]), experiment.caption,
                     os.path.join(workdir, name), timing)
    for run in registry.LARGER_RUNS:  # written by the method's binary, not by this preset
        folder = os.path.join(workdir, run.folder)
        summary = _trusted_summary(run.folder, folder)
        if summary is None:
            continue
        p = summary["provenance"]
        meta = (f"From {run.command.replace('results/' + run.folder, folder)}: "
                + provenance.machine_line(p["machine"], (results.read_timing(folder, p) or {})
                                          .get("load_avg")) + "; code "
                + provenance.code_line(p["git"], p["packages"], p["code_version"])
                + f"; config hash {p['config_hash']}.")
        share, timing = _timing(folder, p)
        experiment = registry.experiment(run.method)
        _add_section(lines, sections, run.folder, f"{run.method} ({run.preset} preset)",
                     f"{registry.METHODS[run.method].title} ({run.preset} preset)",
                     meta + share, experiment.headline(summary), experiment.caption, folder,
                     timing)
    whole = _read_json(os.path.join(workdir, WHOLEGRAPH_FOLDER, "summary.json"))
    avatar_wholegraph = _wholegraph_study() if whole is not None else None
    if avatar_wholegraph is not None:  # written by experiments/avatar_wholegraph.py
        folder = os.path.join(workdir, WHOLEGRAPH_FOLDER)
        meta = ("From python -m experiments.avatar_wholegraph --workdir=" + folder + ": "
                + provenance.machine_line(whole.get("machine"),
                                          avatar_wholegraph.load_ranges(whole))
                + "; code "
                + provenance.code_line(whole.get("git"), whole.get("packages")) + ".")
        _add_section(lines, sections, WHOLEGRAPH_FOLDER, "avatar (whole graphs)",
                     "AvAtar (whole graphs)", meta, avatar_wholegraph.headline(whole),
                     avatar_wholegraph.CAPTION, folder)
    if sharding.is_main_process():
        os.makedirs(workdir, exist_ok=True)
        with open(os.path.join(workdir, "REPORT.md"), "w") as f:
            f.write("\n".join(lines))
    sharding.sync("suite:REPORT.md")
    report.write(os.path.join(workdir, "report.html"), title, prov_lines, sections, notes=[
        "Per-step scalars of every unit: tensorboard --logdir " + workdir
        + " (event files under <method>/tb/)."])


def _wholegraph_study():
    """``experiments.lib.wholegraph_study``, or None (with a warning) without the [ot] extra."""
    try:
        from .lib import wholegraph_study
    except extras.MissingExtraError as e:
        logging.warning("%s: section left out of the report (%s)", WHOLEGRAPH_FOLDER, e)
        return None
    return wholegraph_study


def _add_section(lines: list, sections: list, key: str, heading: str, title: str,
                 meta: str, rows, caption: str | None, folder: str, timing=()) -> None:
    """Appends one result to REPORT.md's ``lines`` (a ``## heading``, ``meta``, the caption,
    the rows as a table and the time-by-unit table ``timing``) and to report.html's
    ``sections`` (with the PNGs of ``folder``)."""
    rows, timing = list(rows), list(timing)
    lines += [f"## {heading}", "", meta, ""]
    lines += [caption, ""] if caption else []
    lines += ["| metric | value |", "| --- | --- |"]
    lines += [f"| {k} | {v} |" for k, v in rows] + [""]
    if timing:
        lines += ["| " + " | ".join(report.TIMING_HEADER) + " |",
                  "| " + " | ".join("---" for _ in report.TIMING_HEADER) + " |"]
        lines += ["| " + " | ".join(r) + " |" for r in timing] + [""]
    sections.append(report.Section(key, title, meta, rows,
                                   sorted(glob.glob(os.path.join(folder, "*.png"))), caption,
                                   timing))


def _timing(out: str, prov: dict, wall_s: float | None = None
            ) -> tuple[str, list[tuple[str, ...]]]:
    """(REPORT sentence, time-by-unit rows) from ``out/timing.json`` (written by the study
    runner); ("", []) when that file is missing or from another config or code version.
    ``wall_s``: the method's whole wall time (the suite's clock), when known."""
    timing = results.read_timing(out, prov)
    if not timing or not timing.get("units"):
        return "", []
    return timing_table(timing["units"], wall_s)


def timing_table(units: dict, wall_s: float | None = None
                 ) -> tuple[str, list[tuple[str, ...]]]:
    """(REPORT sentence, rows of ``report.TIMING_HEADER``) of ``units`` = {unit: timing.json
    row}.

    Each row: unit, wall, trace (Python to jaxpr), lower (jaxpr to StableHLO), XLA compile
    (a program loaded from the persistent cache counts its load), run (the rest: execution
    and Python) seconds, the compile share ((trace + lower + compile) / wall), programs
    compiled + loaded from the persistent cache, and the programs built more than once in
    the unit (none expected); then a ``total`` row over the units. The sentence gives the
    total's compile share and programs, and the share of the method's ``wall_s`` (which
    also counts imports and the suite's own work) when it is given.
    """
    seconds = ("wall_s", "trace_s", "lower_s", "compile_s", "run_s")
    rows, tot = [], dict.fromkeys((*seconds, "compiles", "cache_hits"), 0)
    twice_total: dict[str, int] = {}

    def row(name, r, twice):
        spent = r["trace_s"] + r["lower_s"] + r["compile_s"]
        return (name, *(f"{r[k]:.1f}" for k in seconds), _share(spent, r["wall_s"]),
                f"{r['compiles']} + {r['cache_hits']}", twice)

    for name, r in units.items():
        r = {k: r.get(k, 0) for k in tot} | {"twice": r.get("duplicate_programs") or {}}
        for k in tot:
            tot[k] += r[k]
        for n, c in r["twice"].items():
            twice_total[n] = twice_total.get(n, 0) + c
        rows.append(row(name, r, _builds(r["twice"])))
    rows.append(row("total", tot, _builds(twice_total)))
    spent = tot["trace_s"] + tot["lower_s"] + tot["compile_s"]
    whole = ("" if wall_s is None or wall_s <= 0 else
             f"; {_share(spent, wall_s)} of the method's {wall_s:.0f} s wall time")
    return (f" Tracing, lowering and XLA compiles took {_share(spent, tot['wall_s'])} "
            f"of the units' {tot['wall_s']:.0f} s{whole} ({tot['compiles']} programs "
            f"compiled, {tot['cache_hits']} loaded from the compilation cache; by unit "
            "below)."), rows


def _builds(twice: dict) -> str:
    """``{program: times built}`` as ``"a x2, b x3"`` (``none`` when empty)."""
    return ", ".join(f"{n} x{c}" for n, c in sorted(twice.items())) or "none"


def _share(part: float, whole: float) -> str:
    """``part / whole`` as a percentage (``n/a`` for a zero ``whole``)."""
    return f"{part / whole:.0%}" if whole > 0 else "n/a"


def update_readme(report_path: str, readme_path: str) -> None:
    """Replaces the text between ``BEGIN`` and ``END`` in ``readme_path`` with the report
    (its headings demoted two levels so they nest under the README's section)."""
    with open(readme_path) as f:
        readme = f.read()
    if BEGIN not in readme or END not in readme:
        raise ValueError(f"`update_readme`: {readme_path} lacks the {BEGIN} / {END} markers.")
    with open(report_path) as f:
        report = f.read().strip()
    report = "\n".join("##" + ln if ln.startswith("#") else ln for ln in report.splitlines())
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    with open(readme_path, "w") as f:
        f.write(f"{head}{BEGIN}\n{report}\n{END}{tail}")


def main(argv):
    del argv
    workdir = common.WORKDIR.value or "results"
    known = registry.suite_methods()
    unknown = sorted(set(_METHODS.value) - set(known))
    if unknown:
        print(f"error: --methods: unknown {', '.join(unknown)}; choose from "
              f"{', '.join(known)}", file=sys.stderr)
        sys.exit(2)
    console.quiet_other_libraries()
    common.sharding.initialize_distributed(common.COORDINATOR.value, common.NUM_PROCESSES.value,
                                           common.PROCESS_ID.value)
    try:
        run_suite(_PRESET.value, workdir, _METHODS.value, _FORCE.value)
    except locks.Busy as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except extras.MissingExtraError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if not sharding.is_main_process():
        return
    report = os.path.join(workdir, "REPORT.md")
    if _UPDATE_README.value:
        update_readme(report, _UPDATE_README.value)
    print(common.results_line(workdir, "REPORT.md", "report.html",
                              *(f"{m}/" for m in _METHODS.value)), flush=True)


def cli() -> None:
    """The binary's body: ``--help`` prints the docstring and the flags and exits 0."""
    common.quiet_backend_probe()
    if any(a in ("--help", "-h", "--helpshort", "-?") for a in sys.argv[1:]):
        flags.FLAGS(sys.argv[:1])
        app.usage(shorthelp=True, writeto_stdout=True, exitcode=0)
    compile_cache.enable()
    app.run(main, flags_parser=common.parse_flags)


if __name__ == "__main__":
    cli()
