"""Trained-model artefacts: shipped weights, weights trained in a workdir, export.

One lookup for every method with trained networks (dLLM denoisers and POKE heads, the
GEPC score model). Shipped weights live in ``experiments/pretrained/<method>/...`` and are
part of the code version (``provenance``); weights trained in a workdir carry a
``trained_with.json`` marker holding the key of what trained them, and are used only
under the same key. ``resolve`` (a config value to a folder) and ``ROOT`` come from
``experiments.lib.paths``, which ``provenance`` also reads.
"""

import json
import os

from absl import logging

from . import checkpoint, results
from .paths import ROOT, resolve

__all__ = ["ROOT", "RECORD", "check_record", "export", "pretrained_root", "read_record",
           "resolve", "restore_first"]


RECORD = "trained_with.json"


def export(path: str, step: int, params, key: str, record: dict | None = None) -> None:
    """Saves ``params`` to ``path`` (one orbax step) with the ``trained_with.json`` marker:
    ``{"unit_key": key}`` plus ``record`` (what the weights are for, e.g. the task and the
    architecture, checked by ``restore_first``'s ``expected``)."""
    with checkpoint.Checkpointer(path, max_to_keep=1) as ck:
        ck.save(step, params)
    results.write_json(os.path.join(path, RECORD), {"unit_key": key, **(record or {})})


def read_record(path: str) -> dict:
    """The ``trained_with.json`` marker of the weights folder ``path`` ({} if it has none).

    Raises:
      ValueError: the marker is not a JSON object (names the file).
    """
    marker = os.path.join(path, RECORD)
    if not os.path.exists(marker):
        return {}
    try:
        with open(marker) as f:
            record = json.load(f)
    except ValueError as e:
        raise ValueError(f"{marker}: the weights' record is not valid JSON ({e}).") from None
    if not isinstance(record, dict):
        raise ValueError(f"{marker}: the weights' record must be a JSON object, got "
                         f"{type(record).__name__}.")
    return record


def check_record(path: str, expected: dict | None, what: str, field: str) -> None:
    """Raises ValueError when the record of the weights in ``path`` names another value for
    a key of ``expected`` (e.g. weights trained for another task put in this task's folder).

    Args:
      path: the weights folder.
      expected: {record key: the value this slot needs}; None or {} checks nothing. A key
        the record does not hold is not checked (weights shipped without a record).
      what: the weights' name for the message ("addition denoiser").
      field: where the folder came from, for the message ("config.pretrained_dir").
    """
    record = read_record(path)
    for name, want in (expected or {}).items():
        if name in record and record[name] != want:
            raise ValueError(f"`{field}`: the {what} in {path} was trained for {name} "
                             f"{record[name]!r}, but this slot needs {name} {want!r}; put the "
                             f"weights of {want!r} there (or pass --{field}='' to train).")


def restore_first(candidates, template, what: str, expected: dict | None = None,
                  field: str = "config.pretrained_dir"):
    """The params in the first candidate folder holding a checkpoint, else None.

    Args:
      candidates: ``(path, key)`` pairs tried in order. ``key`` None: shipped weights (part
        of the code version), used as found. Otherwise the folder is used only if its
        ``trained_with.json`` holds ``key`` (a model trained under other settings or code
        is skipped with a warning).
      template: pytree with the params' structure, shapes and dtypes.
      what: name for the log lines.
      expected: record fields every candidate must match (``check_record``), e.g.
        ``{"task": "addition"}``: same-shape weights of another task raise.
      field: the config field that names the shipped folder (for the messages).

    Raises:
      ValueError: a folder's record names another task / spec than ``expected``, or its
        checkpoint cannot be restored into ``template`` (names the folder and the field).
    """
    for path, key in candidates:
        if not path or not os.path.isdir(path):
            continue
        source = field if key is None else "workdir models"
        check_record(path, expected, what, source)
        if key is not None:
            found = read_record(path).get("unit_key")
            if found != key:
                logging.warning("%s in %s was trained with another config or code version "
                                "(%s); not using it", what, path, found)
                continue
        with checkpoint.Checkpointer(path) as ck:
            if ck.latest_step() is not None:
                logging.info("%s from %s", what, path)
                try:
                    return ck.restore(template)
                except Exception as e:  # noqa: BLE001 - orbax raises many types; one message
                    text = " ".join(str(e).split())[:300]
                    raise ValueError(
                        f"`{source}`: the {what} in {path} (step {ck.latest_step()}) cannot be "
                        f"restored into the expected parameters: {type(e).__name__}: "
                        f"{text}") from e
    return None


def pretrained_root(config, field: str = "pretrained_dir") -> str:
    """The folder named by ``config.<field>`` (``resolve``d), or "" when the field is "".

    An empty value asks for training a new model; any other value must name a folder.

    Raises:
      FileNotFoundError: the value names no folder (the message names the field, the
        paths tried and how to ask for training instead).
    """
    value = config.get(field, "") or ""
    if not value:
        return ""
    path = resolve(value)
    if not os.path.isdir(path):
        tried = value if path == value else f"{value!r} (cwd) and {path!r}"
        raise FileNotFoundError(f"`config.{field}`: no folder {tried}; pass "
                                f"--config.{field}='' to train a new model instead.")
    return path
