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

__all__ = ["ROOT", "export", "pretrained_root", "resolve", "restore_first"]


def export(path: str, step: int, params, key: str) -> None:
    """Saves ``params`` to ``path`` (one orbax step) with the ``trained_with.json`` marker."""
    with checkpoint.Checkpointer(path, max_to_keep=1) as ck:
        ck.save(step, params)
    results.write_json(os.path.join(path, "trained_with.json"), {"unit_key": key})


def restore_first(candidates, template, what: str):
    """The params in the first candidate folder holding a checkpoint, else None.

    Args:
      candidates: ``(path, key)`` pairs tried in order. ``key`` None: shipped weights (part
        of the code version), used as found. Otherwise the folder is used only if its
        ``trained_with.json`` holds ``key`` (a model trained under other settings or code
        is skipped with a warning).
      template: pytree with the params' structure, shapes and dtypes.
      what: name for the log lines.
    """
    for path, key in candidates:
        if not path or not os.path.isdir(path):
            continue
        if key is not None:
            marker = os.path.join(path, "trained_with.json")
            found = None
            if os.path.exists(marker):
                with open(marker) as f:
                    found = json.load(f)["unit_key"]
            if found != key:
                logging.warning("%s in %s was trained with another config or code version "
                                "(%s); not using it", what, path, found)
                continue
        with checkpoint.Checkpointer(path) as ck:
            if ck.latest_step() is not None:
                logging.info("%s from %s", what, path)
                return ck.restore(template)
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
