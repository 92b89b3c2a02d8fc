"""Writing experiment results as JSON; the summary's integrity record.

Every file here is written atomically (a temporary file in the same folder, then
``os.replace``): a reader, or a run killed mid-write, sees the old file or the new one,
never half of one. ``summary.json`` is written last by a study run, after its figures, and
carries in its ``provenance`` block the sha256 of its own content (``summary_sha256``) and
the list of the figures written with it (``figures``); ``read_summary`` checks both, so a
damaged or edited summary, or one whose figures are gone, is never taken for a finished run.
"""

import contextlib
import glob
import hashlib
import json
import math
import os
import uuid

import numpy as np
from absl import logging

from jaxlab.core import sharding

from . import provenance


def _to_builtin(obj):
    if isinstance(obj, dict):
        return {str(k): _to_builtin(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_to_builtin(v) for v in obj]
    if hasattr(obj, "__array__"):
        arr = np.asarray(obj)
        return _to_builtin(arr.tolist()) if arr.ndim else _to_builtin(arr.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, np.generic):
        return _to_builtin(obj.item())
    return obj


def write_json(path: str | os.PathLike, obj) -> str:
    """Writes ``obj`` (dicts/lists of numbers, NumPy/JAX arrays) as indented JSON.

    In a multi-host run only the main process writes (arrays must already be host
    values, see ``sharding.to_host``), and every process waits until the file exists.
    """
    path = os.fspath(path)
    if sharding.is_main_process():
        atomic_write_text(path, json.dumps(_to_builtin(obj), indent=2, sort_keys=True) + "\n")
    sharding.sync(f"write_json:{os.path.abspath(path)}")
    return path


def _atomic_write(path: str | os.PathLike, write, binary: bool) -> None:
    """Calls ``write(f)`` on a uniquely named temporary file in ``path``'s folder (folders
    created), then ``os.replace``s it to ``path``: a reader, or a process killed mid-write,
    sees the old file or the new one, never half of one."""
    path = os.path.abspath(os.fspath(path))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    # A unique name (not mkstemp: its 0600 mode would ignore the umask).
    tmp = os.path.join(os.path.dirname(path),
                       f".{os.path.basename(path)}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with (open(tmp, "xb") if binary else open(tmp, "x", encoding="utf-8")) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Writes ``text`` to ``path`` atomically (``_atomic_write``); call it on the writing
    process only."""
    _atomic_write(path, lambda f: f.write(text), binary=False)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Writes ``data`` to ``path`` atomically (``_atomic_write``); call it on the writing
    process only."""
    _atomic_write(path, lambda f: f.write(data), binary=True)


def save_npz_atomic(path: str | os.PathLike, arrays: dict) -> None:
    """``np.savez`` of ``arrays`` to ``path`` atomically (``_atomic_write``): the task cache's
    and the whole-graph checkpoints' writer."""
    _atomic_write(path, lambda f: np.savez(f, **arrays), binary=True)


def content_hash(obj) -> str:
    """sha256 (hex) of the JSON tree ``obj`` in canonical form (sorted keys, no spaces);
    equal for a tree and the same tree read back from JSON."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


SUMMARY = "summary.json"
TIMING = "timing.json"


class SummaryError(ValueError):
    """A ``summary.json`` that cannot be trusted (the message names the file and why)."""


def figures_in(workdir: str | os.PathLike) -> list[str]:
    """Names of the PNG figures directly under ``workdir`` (sorted)."""
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(os.fspath(workdir),
                                                                      "*.png")))


def write_summary(workdir: str | os.PathLike, summary: dict, config,
                  figures: list[str] | None = None) -> str:
    """Writes ``workdir/summary.json`` = ``summary`` plus a ``provenance`` block (config,
    config hash, code version, git commit, package versions, numeric settings, machine; see
    ``provenance.record``), by which the suite tells a current summary from a stale one, the
    sha256 of the summary (``summary_sha256``) and ``figures`` (names of the PNGs in
    ``workdir`` that belong to it; default: those there now). Written atomically; a study
    writes it after its figures.
    """
    body = _to_builtin(summary)
    if "provenance" in body:
        raise ValueError("`summary` may not have a 'provenance' key (write_summary adds it).")
    prov = {**provenance.record(config), "summary_sha256": content_hash(body),
            "figures": sorted(figures_in(workdir) if figures is None else figures)}
    return write_json(os.path.join(os.fspath(workdir), SUMMARY), {**body, "provenance": prov})


def discard_summary(workdir: str | os.PathLike) -> None:
    """Removes ``workdir/summary.json`` if present (a study run does so before it rewrites
    units and figures, so no summary stands beside half-rewritten figures)."""
    if sharding.is_main_process():
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(os.fspath(workdir), SUMMARY))
    sharding.sync(f"discard_summary:{os.path.abspath(os.fspath(workdir))}")


def read_summary(workdir: str | os.PathLike) -> dict | None:
    """``workdir/summary.json`` as written by ``write_summary``, or None when there is none.

    Raises:
      SummaryError: naming the file, when it is not valid JSON, not a summary with a
        provenance block, its content does not match its ``summary_sha256`` (edited or
        damaged), or one of its ``figures`` is missing or empty.
    """
    path = os.path.join(os.fspath(workdir), SUMMARY)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise SummaryError(f"{path} is not valid JSON ({e})") from None
    prov = data.get("provenance") if isinstance(data, dict) else None
    if not isinstance(prov, dict) or "summary_sha256" not in prov:
        raise SummaryError(f"{path} has no provenance block with a summary_sha256")
    body = {k: v for k, v in data.items() if k != "provenance"}
    if content_hash(body) != prov["summary_sha256"]:
        raise SummaryError(f"{path} does not match its summary_sha256 (edited or damaged)")
    figures = prov.get("figures")
    if not isinstance(figures, list):
        raise SummaryError(f"{path} has no list of figures")
    for name in figures:
        fig = os.path.join(os.fspath(workdir), str(name))
        if not os.path.isfile(fig) or os.path.getsize(fig) == 0:
            raise SummaryError(f"{path} lists figure {fig}, which is missing or empty")
    return data


def read_timing(workdir: str | os.PathLike, prov: dict) -> dict | None:
    """``workdir/timing.json`` (the study runner's per-unit times, written beside the
    summary) when it belongs to the summary whose provenance block is ``prov`` (the same
    unit key); None when it is absent, unreadable (with a warning naming it) or from
    another config or code version."""
    path = os.path.join(os.fspath(workdir), TIMING)
    try:
        with open(path, encoding="utf-8") as f:
            timing = json.load(f)
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as e:
        logging.warning("%s is unreadable (%s); ignoring it", path, e)
        return None
    if not isinstance(timing, dict) or timing.get("unit_key") != (prov or {}).get("unit_key"):
        return None
    return timing
