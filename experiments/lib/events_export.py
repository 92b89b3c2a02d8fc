"""Writes the TensorBoard events of finished runs from their unit files.

  python -m experiments.lib.events_export --workdir=results

For results written before the study runner wrote events, or copied without their
``tb/`` folder: every finished unit file (``units/*.json``) of one method's folder, or of
each method's folder in a suite's results folder, becomes ``<workdir>/tb/<unit>/`` events
(``events.write_scalars`` of the method's extractor, ``scalars.extract``) with the config
recorded in ``summary.json``; so do RFO's older ``runs/*.json``. It sits above the study
runner (it reads unit files with ``study.load_result``), which writes events as units
finish.
"""

import glob
import json
import os

import ml_collections
from absl import app, flags

from . import events, methods, scalars, study


def export_workdir(workdir: str | os.PathLike, method: str | None = None) -> list[str]:
    """Writes the events of every finished unit file in ``workdir`` (one method's folder,
    or a suite's results folder holding ``<method>/``) from ``units/*.json``, with the
    config recorded in ``summary.json``; plus RFO's ``runs/*.json``. Returns the folders."""
    workdir = os.fspath(workdir)
    if method is None and os.path.basename(os.path.normpath(workdir)) not in methods.METHODS:
        return [f for m in methods.METHODS if os.path.isdir(os.path.join(workdir, m))
                for f in export_workdir(os.path.join(workdir, m), m)]
    method = method or os.path.basename(os.path.normpath(workdir))
    config = None
    summary_path = os.path.join(workdir, "summary.json")
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            cfg = (json.load(f).get("provenance") or {}).get("config")
        if cfg is not None:
            config = ml_collections.ConfigDict(cfg)
    latest: dict[str, str] = {}
    for path in sorted(glob.glob(os.path.join(workdir, "units", "*.json")),
                       key=os.path.getmtime):
        latest[os.path.basename(path).rsplit("-", 1)[0]] = path
    written = []
    for unit, path in latest.items():
        written += _write_unit(workdir, method, config, unit, study.load_result(path))
    for path in sorted(glob.glob(os.path.join(workdir, "runs", "*.json"))):
        with open(path) as f:
            result = json.load(f)
        unit = f"{result.get('task', 'run')}_{result.get('method', 'run')}"
        written += _write_unit(workdir, method, config, unit, result)
    return written


def _write_unit(workdir: str, method: str, config, unit: str, result) -> list[str]:
    return events.write_scalars(os.path.join(workdir, "tb", events.run_name(unit)),
                                scalars.extract(method, config, unit, result, workdir))


def main(argv):
    del argv
    folders = export_workdir(flags.FLAGS.workdir)
    print(f"wrote {len(folders)} TensorBoard run folder(s) under {flags.FLAGS.workdir}; "
          f"view with: tensorboard --logdir {flags.FLAGS.workdir}")


if __name__ == "__main__":
    flags.DEFINE_string("workdir", "results", "A suite's results folder or one method's.")
    app.run(main)
