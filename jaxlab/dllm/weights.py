"""Saving and loading a trained denoiser, a POKE value head and a correctness head.

The format is the repository's weights folder (``experiments/pretrained/dllm/<task>``): one
orbax step ``<path>/<step>/`` (``StandardSave`` of the params) and ``trained_with.json``,
the record of what the weights are: ``kind`` (``"denoiser"`` or ``"poke_head"``) and the
architecture (``llada_config``: every ``model.LLaDAConfig`` field that shapes the params or
the numerics; a head: ``head`` = ``{"d_model", "hidden"}``; a correctness head, ``kind``
``"correctness_head"`` (``correctness``): ``head`` = ``{"num_features", "hidden",
"depth"}``). Shipped folders written before
this module record the architecture as ``model`` (the denoiser's widths) and
``poke_hidden``; both layouts are read.

A load never trains: a missing folder raises ``FileNotFoundError``; a folder whose record
names another kind or another architecture than the one expected raises ``ValueError``
naming the path and every differing field; so does a checkpoint that cannot be restored.
"""

import json
import os
from typing import Any, NamedTuple

import jax

from jaxlab.dllm import correctness, poke
from jaxlab.dllm import model as model_lib

__all__ = ["RECORD", "ARCHITECTURE", "SavedDenoiser", "save_denoiser", "load_denoiser",
           "save_value_head", "load_value_head", "save_correctness_head",
           "load_correctness_head", "read_record"]

RECORD = "trained_with.json"
# The LLaDAConfig fields a saved denoiser records (the params' shapes and the numerics).
ARCHITECTURE = ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads",
                "mlp_hidden_size", "mask_token_id", "rope_theta", "rms_norm_eps",
                "weight_tying")


class SavedDenoiser(NamedTuple):
    """A loaded denoiser: ``model.apply(graphdef, params, tokens)`` runs it.

    Attributes:
      config: its ``model.LLaDAConfig``.
      graphdef, params: ``model.init``'s pair.
    """

    config: model_lib.LLaDAConfig
    graphdef: Any
    params: Any


def read_record(path: str) -> dict:
    """The ``trained_with.json`` record of the weights folder ``path`` ({} if none).

    Raises:
      ValueError: the record is not a JSON object (names the file).
    """
    marker = os.path.join(os.fspath(path), RECORD)
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


def _orbax():
    """orbax.checkpoint, imported when weights are saved or loaded (``import jaxlab.dllm``
    loads no checkpointing library)."""
    import orbax.checkpoint as ocp
    return ocp


def _save(path, params, step: int, record: dict) -> None:
    ocp = _orbax()
    path = os.path.abspath(os.fspath(path))
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise ValueError(f"`step` must be a non-negative int, got {step!r}.")
    with ocp.CheckpointManager(path, options=ocp.CheckpointManagerOptions(
            max_to_keep=1, create=True)) as manager:
        if manager.latest_step() is not None:
            raise ValueError(f"`path` {path!r} already holds saved weights (step "
                             f"{manager.latest_step()}); delete it or name another folder.")
        manager.save(step, args=ocp.args.StandardSave(params))
        manager.wait_until_finished()
    with open(os.path.join(path, RECORD), "w") as f:
        json.dump(record, f, indent=2, sort_keys=True)


def _restore(path: str, template, what: str):
    ocp = _orbax()
    if not os.path.isdir(path):
        raise FileNotFoundError(f"`path` {path!r}: no saved {what} there (no such folder).")
    with ocp.CheckpointManager(path) as manager:
        step = manager.latest_step()
        if step is None:
            raise FileNotFoundError(f"`path` {path!r}: no saved {what} there (no checkpoint "
                                    "step).")
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, template)
        try:
            return manager.restore(step, args=ocp.args.StandardRestore(abstract))
        except Exception as e:  # noqa: BLE001 - orbax raises many types; one message
            text = " ".join(str(e).split())[:300]
            raise ValueError(f"the {what} in {path} (step {step}) cannot be restored into the "
                             f"expected parameters: {type(e).__name__}: {text}") from e


def _flat(record: dict) -> dict:
    """The record's fields with those of its training config (``"config"``, where the
    weights' sha256 record keeps the task, the kind and the architecture) beside them."""
    config = record.get("config")
    return {**config, **record} if isinstance(config, dict) else record


def _check_kind(path: str, record: dict, kind: str) -> None:
    if record.get("kind", kind) != kind:
        raise ValueError(f"`path` {path!r} holds a {record['kind']!r}, not a {kind!r}.")


def _differences(path: str, saved: dict, expected: dict, what: str) -> None:
    diff = {k: (saved[k], v) for k, v in expected.items() if k in saved and saved[k] != v}
    if diff:
        text = ", ".join(f"{k}: saved {a!r}, expected {b!r}" for k, (a, b) in diff.items())
        raise ValueError(f"`path` {path!r}: the saved {what} differs from the expected one in "
                         f"{sorted(diff)} ({text}).")


def _architecture(cfg: model_lib.LLaDAConfig) -> dict:
    return {f: getattr(cfg, f) for f in ARCHITECTURE}


def save_denoiser(path, model_config: model_lib.LLaDAConfig, params, *, step: int = 0,
                  record: dict | None = None) -> None:
    """Saves a denoiser's ``params`` to the folder ``path`` (module docstring).

    Args:
      path: the weights folder (created; one already holding weights raises ValueError).
      model_config: its ``model.LLaDAConfig``.
      params: ``model.init``'s (or ``train.train``'s) params.
      step: the checkpoint step (e.g. the training steps).
      record: more fields for ``trained_with.json`` (e.g. the task).

    Raises:
      TypeError: ``model_config`` is not a ``LLaDAConfig``.
    """
    if not isinstance(model_config, model_lib.LLaDAConfig):
        raise TypeError(f"`model_config` must be a dllm.model.LLaDAConfig, got "
                        f"{type(model_config).__name__}.")
    _save(path, params, step, {**(record or {}), "kind": "denoiser",
                               "llada_config": _architecture(model_config)})


def load_denoiser(path, expected_config: model_lib.LLaDAConfig | None = None
                  ) -> SavedDenoiser:
    """Loads the denoiser saved in ``path`` (``save_denoiser``, or a shipped folder).

    Args:
      path: the weights folder.
      expected_config: the ``LLaDAConfig`` the weights must have (its runtime fields, e.g.
        ``attention_impl``, are kept); None: the saved one (a folder recording only the
        widths, as the shipped ones, needs it).

    Returns:
      ``SavedDenoiser(config, graphdef, params)``.

    Raises:
      FileNotFoundError: nothing is saved at ``path``.
      ValueError: the folder holds another kind of weights, or a recorded architecture
        field differs from ``expected_config`` (naming the path and the fields), or the
        checkpoint cannot be restored.
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"`path` {path!r}: no saved denoiser there (no such folder).")
    record = _flat(read_record(path))
    _check_kind(path, record, "denoiser")
    saved = dict(record.get("model", {}), **record.get("llada_config", {}))
    if expected_config is None:
        missing = [f for f in ARCHITECTURE if f not in saved]
        if missing:
            raise ValueError(f"`expected_config` must be given: {path!r} does not record "
                             f"{missing}.")
        expected_config = model_lib.LLaDAConfig(**{f: saved[f] for f in ARCHITECTURE})
    elif not isinstance(expected_config, model_lib.LLaDAConfig):
        raise TypeError(f"`expected_config` must be a dllm.model.LLaDAConfig, got "
                        f"{type(expected_config).__name__}.")
    _differences(path, saved, _architecture(expected_config), "denoiser")
    graphdef, template = model_lib.abstract(expected_config)
    return SavedDenoiser(expected_config, graphdef, _restore(path, template, "denoiser"))


def save_value_head(path, params, *, d_model: int, hidden: int, step: int = 0,
                    record: dict | None = None) -> None:
    """Saves a POKE value head's ``params`` (``poke.fit``'s) to the folder ``path``.

    Args:
      path: the weights folder (created; one already holding weights raises ValueError).
      params: the head's params.
      d_model: the denoiser's hidden width the head reads.
      hidden: the head's hidden width.
      step: the checkpoint step.
      record: more fields for ``trained_with.json`` (e.g. the task, the proposal).
    """
    poke.abstract(d_model, hidden)  # checks the sizes
    _save(path, params, step, {**(record or {}), "kind": "poke_head",
                               "head": {"d_model": int(d_model), "hidden": int(hidden)}})


def load_value_head(path, *, d_model: int | None = None, hidden: int | None = None):
    """Loads the POKE value head saved in ``path`` (``save_value_head``, or shipped).

    Args:
      path: the weights folder.
      d_model, hidden: the sizes the head must have (None: the saved ones).

    Returns:
      (graphdef, params): ``poke.make_value_fn``'s first two arguments.

    Raises:
      FileNotFoundError: nothing is saved at ``path``.
      ValueError: another kind of weights, a recorded size differing from ``d_model`` /
        ``hidden`` (naming the path and the fields), or a checkpoint that cannot be
        restored.
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"`path` {path!r}: no saved value head there (no such "
                                "folder).")
    record = _flat(read_record(path))
    _check_kind(path, record, "poke_head")
    saved = dict(record.get("head", {}))
    if "d_model" in record.get("model", {}):
        saved.setdefault("d_model", record["model"]["d_model"])
    if "poke_hidden" in record:
        saved.setdefault("hidden", record["poke_hidden"])
    expected = {"d_model": saved.get("d_model") if d_model is None else d_model,
                "hidden": saved.get("hidden") if hidden is None else hidden}
    missing = [k for k, v in expected.items() if v is None]
    if missing:
        raise ValueError(f"`{missing[0]}` must be given: {path!r} does not record it.")
    _differences(path, saved, expected, "value head")
    graphdef, template = poke.abstract(expected["d_model"], expected["hidden"])
    return graphdef, _restore(path, template, "value head")


def save_correctness_head(path, params, *, step: int = 0, record: dict | None = None) -> None:
    """Saves a correctness head's ``params`` (``correctness.fit``'s) to the folder ``path``.

    Args:
      path: the weights folder (created; one already holding weights raises ValueError).
      params: the head's params (``correctness.init_head``'s layout).
      step: the checkpoint step.
      record: more fields for ``trained_with.json`` (e.g. the task, the proposal).

    Raises:
      ValueError: ``params`` is not a correctness head's, or ``path`` holds weights.
    """
    head = _correctness_sizes(params)
    _save(path, params, step, {**(record or {}), "kind": "correctness_head", "head": head})


def _correctness_sizes(params) -> dict:
    try:
        f = int(params["feature_mean"].shape[0])
        depth = sum(1 for k in params if k.startswith("dense_"))
        hidden = int(params["out"]["w"].shape[0])
        sizes = {"num_features": f, "hidden": hidden, "depth": depth}
        want = jax.tree.map(lambda x: tuple(x.shape), correctness.abstract_head(**sizes))
        got = jax.tree.map(lambda x: tuple(x.shape), params)
    except (TypeError, KeyError, IndexError, AttributeError, ValueError) as e:
        raise ValueError("`params` must be a correctness head's params "
                         f"(correctness.init_head's layout): {e!r}.") from None
    if want != got:
        raise ValueError(f"`params` must be a correctness head's params "
                         f"(correctness.init_head's layout), got shapes {got}.")
    return sizes


def load_correctness_head(path, *, num_features: int | None = None,
                          hidden: int | None = None, depth: int | None = None) -> dict:
    """Loads the correctness head saved in ``path`` (``save_correctness_head``).

    Args:
      path: the weights folder.
      num_features, hidden, depth: the sizes the head must have (None: the saved ones).

    Returns:
      the params (``correctness.make_twist_fn``'s first argument).

    Raises:
      FileNotFoundError: nothing is saved at ``path``.
      ValueError: another kind of weights, a recorded size differing from the one asked
        (naming the path and the fields), or a checkpoint that cannot be restored.
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"`path` {path!r}: no saved correctness head there (no such "
                                "folder).")
    record = _flat(read_record(path))
    if record.get("kind") != "correctness_head":
        raise ValueError(f"`path` {path!r} holds a {record.get('kind')!r}, not a "
                         "'correctness_head'.")
    saved = dict(record.get("head", {}))
    asked = {"num_features": num_features, "hidden": hidden, "depth": depth}
    expected = {k: saved.get(k) if v is None else v for k, v in asked.items()}
    missing = [k for k, v in expected.items() if v is None]
    if missing:
        raise ValueError(f"`{missing[0]}` must be given: {path!r} does not record it.")
    _differences(path, saved, expected, "correctness head")
    return _restore(path, correctness.abstract_head(**expected), "correctness head")
