"""Trained-model artefacts: shipped weights, weights trained in a workdir, export.

One lookup for every method with trained networks (dLLM denoisers and POKE heads, the
GEPC score model). Shipped weights live in ``experiments/pretrained/<method>/...`` and are
part of the code version (``provenance``); weights trained in a workdir carry a
``trained_with.json`` record holding the key of what trained them, and are used only
under the same key. ``resolve`` (a config value to a folder) and ``ROOT`` come from
``experiments.lib.paths``, which ``provenance`` also reads.

Every weights folder has a record (``trained_with.json``; the GEPC models'
``provenance.json``) that ties it to its bytes and to what trained it (``stamp``): the
training config the loader checks (``config``, or GEPC's ``spec``), its
``config_sha256``, the sha256 of every checkpoint file (``weight_files``) and of their
list (``weights_sha256``). ``restore_first`` restores nothing before ``verify`` passes: a
folder without its record, with files that do not hash to it, or trained for another
config raises. The sha256s catch accidents (a torn copy, another folder's files or record
put there by mistake); they are no signature (``docs/core.rst``, "What the workdir and
caches protect against").
"""

import hashlib
import json
import os

from absl import logging

from . import checkpoint, results
from .paths import ROOT, resolve

__all__ = ["ROOT", "RECORD", "config_sha256", "export", "pretrained_root", "read_record",
           "resolve", "restore_first", "stamp", "verify", "weight_files", "weights_sha256"]


RECORD = "trained_with.json"
# The records of a weights folder (top level): never part of the weights' bytes.
RECORD_FILES = (RECORD, "provenance.json", "proposal.json")


def _plain(config: dict) -> dict:
    """``config`` as JSON sees it (tuples as lists, keys as strings)."""
    return json.loads(json.dumps(config, sort_keys=True))


def config_sha256(config: dict) -> str:
    """sha256 of ``config``'s canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(_plain(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def weight_files(path: str) -> dict[str, str]:
    """{file path relative to ``path`` ("/"-separated): its sha256} of every file in the
    weights folder ``path`` except the records (``RECORD_FILES`` at the top level)."""
    files = {}
    for folder, dirs, names in os.walk(path):
        dirs.sort()
        for name in sorted(names):
            rel = os.path.relpath(os.path.join(folder, name), path).replace(os.sep, "/")
            if rel in RECORD_FILES:
                continue
            digest = hashlib.sha256()
            with open(os.path.join(folder, name), "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            files[rel] = digest.hexdigest()
    return files


def weights_sha256(files: dict[str, str]) -> str:
    """sha256 of ``weight_files``' listing ("<sha256>  <path>" lines, sorted by path)."""
    text = "".join(f"{files[rel]}  {rel}\n" for rel in sorted(files))
    return hashlib.sha256(text.encode()).hexdigest()


def stamp(path: str, config: dict, config_field: str = "config") -> dict:
    """The record fields that tie the weights folder ``path`` to its bytes and to the
    training ``config``: {config_field: config, "config_sha256", "weights_sha256",
    "weight_files"}."""
    files = weight_files(path)
    return {config_field: _plain(config), "config_sha256": config_sha256(config),
            "weights_sha256": weights_sha256(files), "weight_files": files}


def export(path: str, step: int, params, key: str, config: dict) -> None:
    """Saves ``params`` to ``path`` (one orbax step) with its ``trained_with.json`` record:
    ``{"unit_key": key}`` plus ``stamp(path, config)`` (``config``: what the weights were
    trained for, checked by ``restore_first``'s ``expected``)."""
    with checkpoint.Checkpointer(path, max_to_keep=1) as ck:
        ck.save(step, params)
    results.write_json(os.path.join(path, RECORD), {"unit_key": key, **stamp(path, config)})


def read_record(path: str, name: str = RECORD) -> dict:
    """The record ``name`` of the weights folder ``path`` ({} if it has none).

    Raises:
      ValueError: the record is not a JSON object (names the file).
    """
    marker = os.path.join(path, name)
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


def _differing(found: dict, want: dict) -> list[str]:
    found, want = _plain(found), _plain(want)
    return sorted(k for k in set(found) | set(want) if found.get(k) != want.get(k))


def verify(path: str, what: str, field: str, expected: dict | None = None,
           record_name: str = RECORD, config_field: str = "config") -> dict:
    """Checks the weights folder ``path`` against its record before anything is restored;
    returns the record.

    Args:
      path: the weights folder.
      what: the weights' name for the messages ("addition denoiser").
      field: where the folder came from ("config.pretrained_dir", "workdir models").
      expected: the training config this slot needs; None checks the bytes only.
      record_name: the record's file name.
      config_field: the record's field holding the training config.

    Raises:
      ValueError: the record is missing, not JSON or lacks a digest; a file's sha256
        differs from the record's (names the file and both digests); the config does not
        match its ``config_sha256``; or it differs from ``expected`` (names the fields
        with both values).
    """
    marker = os.path.join(path, record_name)
    record = read_record(path, record_name)
    if not record:
        raise ValueError(f"`{field}`: the {what} in {path} has no record {marker}: weights "
                         "are loaded only with the sha256 of their files and of their "
                         "training config; export them again (or pass "
                         f"--{field}='' to train).")
    missing = [k for k in (config_field, "config_sha256", "weights_sha256", "weight_files")
               if k not in record]
    if missing:
        raise ValueError(f"`{field}`: the record {marker} lacks {missing}; export the "
                         f"{what} again (or pass --{field}='' to train).")
    files, recorded = weight_files(path), record["weight_files"]
    found = weights_sha256(files)
    if found != record["weights_sha256"] or files != recorded:
        bad = sorted(rel for rel in set(files) | set(recorded)
                     if files.get(rel) != recorded.get(rel))
        detail = "; ".join(f"{os.path.join(path, rel)}: sha256 {files.get(rel, 'missing')}, "
                           f"recorded {recorded.get(rel, 'none')}" for rel in bad[:3])
        raise ValueError(f"`{field}`: the {what} in {path} do not match their record "
                         f"{marker} (weights sha256 {found}, recorded "
                         f"{record['weights_sha256']}): {detail}"
                         f"{f' (and {len(bad) - 3} more files)' if len(bad) > 3 else ''}.")
    config = record[config_field]
    if not isinstance(config, dict) or config_sha256(config) != record["config_sha256"]:
        raise ValueError(f"`{field}`: the {config_field!r} of {marker} does not match its "
                         f"config_sha256 {record['config_sha256']} (edited or damaged).")
    if expected:
        diff = _differing(config, expected)
        if diff:
            found_cfg, want_cfg = _plain(config), _plain(expected)
            pairs = "; ".join(f"{k}: trained for {found_cfg.get(k)!r}, this slot needs "
                              f"{want_cfg.get(k)!r}" for k in diff)
            raise ValueError(f"`{field}`: the {what} in {path} was trained for another config "
                             f"(differs in {diff}: {pairs}); put the matching weights there "
                             f"(or pass --{field}='' to train).")
    return record


def restore_first(candidates, template, what: str, expected: dict | None = None,
                  field: str = "config.pretrained_dir", record_name: str = RECORD,
                  config_field: str = "config"):
    """The params in the first candidate folder holding a checkpoint, else None.

    Args:
      candidates: ``(path, key)`` pairs tried in order. ``key`` None: shipped weights (part
        of the code version), used if they pass ``verify``. Otherwise the folder is used
        only if its ``trained_with.json`` holds ``key`` (a model trained under other
        settings or code, or without a record, is skipped with a warning) and passes
        ``verify``.
      template: pytree with the params' structure, shapes and dtypes.
      what: name for the log lines.
      expected: the training config every candidate must match (``verify``), e.g.
        ``dllm_models.weights_record``: same-shape weights of another task raise.
      field: the config field that names the shipped folder (for the messages).
      record_name, config_field: the shipped folders' record and its config field
        (``verify``); workdir folders use ``trained_with.json`` and "config".

    Raises:
      ValueError: a folder fails ``verify``, or its checkpoint cannot be restored into
        ``template`` (names the folder and the field).
    """
    for path, key in candidates:
        if not path or not os.path.isdir(path):
            continue
        with checkpoint.Checkpointer(path) as ck:
            if ck.latest_step() is None:
                continue
        source = field if key is None else "workdir models"
        if key is None:
            verify(path, what, source, expected, record_name, config_field)
        else:
            found = read_record(path).get("unit_key")
            if found != key:
                logging.warning("%s in %s was trained with another config or code version "
                                "(%s); not using it", what, path, found)
                continue
            verify(path, what, source, expected)
        with checkpoint.Checkpointer(path) as ck:
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
