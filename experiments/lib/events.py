"""TensorBoard event files: the one writer of the experiment plumbing (tensorboardX).

Every study writes the per-step / per-round / per-update scalars of each unit (losses,
returns, regrets, accuracies, MRR; ``experiments.lib.scalars``) under
``<workdir>/tb/<unit>[/<series>]`` when the unit's result is computed or loaded, so

  tensorboard --logdir results

shows every method of a suite run side by side (one TensorBoard *run* per unit or per
compared series, so the series of one figure overlay in one chart). Only the main process
of a multi-host job writes. ``tensorboard`` itself is not needed to write; it comes with
the ``dev`` extra (through ``tbparse``) to browse and to read events back.

Series are ``{tag: (steps, values)}`` or ``{(run, tag): (steps, values)}``: ``steps`` are
integers (env steps, samples, rounds, particles...), ``values`` floats of the same length.

Re-export the events of finished runs (e.g. results written before this module existed,
or RFO's older ``runs/*.json``) with ``python -m experiments.lib.events_export
--workdir=results`` (``experiments.lib.events_export``). This module imports no other
module of ``experiments.lib``.
"""

import glob
import os
import re
from collections.abc import Mapping

import numpy as np

from jaxlab.core import extras, sharding

MAX_POINTS = 5000  # per tag: longer series are strided (TensorBoard samples 1000 anyway)


def run_name(name: str) -> str:
    """A folder-safe TensorBoard run name (letters, digits and ``_-.=+,`` kept)."""
    out = re.sub(r"[^A-Za-z0-9_.=+,-]+", "_", str(name)).strip("_")
    return out or "_"


def _as_series(value) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(value, tuple) and len(value) == 2:
        steps, vals = (np.asarray(v) for v in value)
    else:
        vals = np.asarray(value)
        steps = np.arange(vals.shape[0] if vals.ndim else 1)
    vals = np.asarray(vals, np.float64).reshape(-1)
    steps = np.asarray(steps).reshape(-1)
    if steps.shape != vals.shape:
        raise ValueError(f"series steps {steps.shape} and values {vals.shape} differ.")
    if vals.size > MAX_POINTS:
        idx = np.unique(np.linspace(0, vals.size - 1, MAX_POINTS).round().astype(int))
        steps, vals = steps[idx], vals[idx]
    return steps.astype(np.int64), vals


_ILLEGAL_TAG_CHARS = re.compile(r"[^-/\w.]")


def tag_name(tag) -> str:
    """A legal TensorBoard tag: every character other than letters, digits, ``_ - . /``
    becomes ``_`` (``avatar/hits@30`` -> ``avatar/hits_30``), leading ``/`` dropped.

    ``write_scalars`` applies it to every tag, so TensorBoard never renames one (and never
    logs "Summary name ... is illegal" for it).

    Example:
      >>> from experiments.lib import events
      >>> events.tag_name("avatar/hits@30"), events.tag_name("/bco/regret (T)")
      ('avatar/hits_30', 'bco/regret__T_')
    """
    return _ILLEGAL_TAG_CHARS.sub("_", str(tag)).lstrip("/")


def write_scalars(logdir: str | os.PathLike, series: Mapping) -> list[str]:
    """Writes ``series`` as TensorBoard scalars under ``logdir`` (main process only).

    Event files already in the folders written to are replaced, so a unit that is loaded
    again (a rerun) does not duplicate its points.

    Args:
      logdir: the unit's folder, e.g. ``<workdir>/tb/<unit>``.
      series: ``{tag: values}``, ``{tag: (steps, values)}`` or ``{(run, tag): ...}``; a
        ``(run, tag)`` key goes to the subfolder ``run`` (a separate TensorBoard run).

    Returns:
      The folders written (empty on other processes or for empty ``series``).
    """
    if not sharding.is_main_process() or not series:
        return []
    extras.require("tensorboardX")
    from tensorboardX import SummaryWriter

    by_run: dict[str, list] = {}
    for key, value in series.items():
        run, tag = key if isinstance(key, tuple) else ("", key)
        by_run.setdefault(run, []).append((tag_name(tag), _as_series(value)))
    written = []
    for run, items in by_run.items():
        folder = os.path.join(os.fspath(logdir), run_name(run)) if run else os.fspath(logdir)
        os.makedirs(folder, exist_ok=True)
        for old in glob.glob(os.path.join(folder, "events.out.tfevents.*")):
            os.remove(old)
        writer = SummaryWriter(folder, flush_secs=3600)
        try:
            for tag, (steps, vals) in items:
                for s, v in zip(steps.tolist(), vals.tolist(), strict=True):
                    writer.add_scalar(tag, v, s, walltime=0.0)
        finally:
            writer.close()
        written.append(folder)
    return written
