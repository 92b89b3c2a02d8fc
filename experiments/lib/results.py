"""Writing experiment results as JSON."""

import json
import math
import os

import numpy as np

from jaxlab.core import sharding


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
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(_to_builtin(obj), f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    sharding.sync(f"write_json:{os.path.abspath(path)}")
    return path


def write_summary(workdir: str | os.PathLike, summary: dict, config) -> str:
    """Writes ``workdir/summary.json`` = ``summary`` plus a ``provenance`` block (config,
    config hash, code version, git commit, package versions, machine; see
    ``core.provenance.record``), by which the suite tells a current summary from a stale one.
    """
    from experiments.lib import provenance

    return write_json(os.path.join(os.fspath(workdir), "summary.json"),
                      {**summary, "provenance": provenance.record(config)})
