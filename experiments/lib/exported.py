"""Exported-program cache: a jitted program's StableHLO kept on disk, so a later run skips
tracing and lowering it.

JAX's persistent compilation cache (``compile_cache``) stores compiled XLA programs, but
every run still traces the Python function to a jaxpr and lowers it to StableHLO before it
can look the program up; for a large program (an MJX training chunk: ~21k jaxpr
equations) that is most of a warm run. ``load_or_export(fun, *args, name=..., key=...)``
exports ``fun`` at ``args`` with ``jax.export``, writes the serialised program to
``<XLA cache folder>/exported/<name>-<digest>.jaxexport`` and, on the next run with the
same digest, loads it instead of tracing (tracing + lowering a call to the loaded program
takes seconds).

The program is exported over flat arrays: the pytree structures of the inputs and outputs
stay in Python (``nnx`` states, NamedTuples, optax states need no serialisation rule), PRNG
key arrays travel as their raw key data and are wrapped again on the way out. Both a
freshly exported program and a loaded one are called through ``jax.export``'s ``call``, so
a cold run and a warm run compile the same StableHLO (identical results); with the cache
off, or when ``jax.export`` cannot express the program, ``fun`` is jitted as usual.

The digest (``provenance.unit_key``) covers what determines the program: the caller's
``name`` and ``key`` (e.g. a unit's spec), the code version, JAX's numeric settings (x64,
matmul precision, PRNG), the numeric packages' versions (jax, jaxlib, brax, ...), the
platform, device kind and device / process counts, every input's shape, dtype and
sharding, and whether checked mode (``jaxlab.core.checked``) is on. A stale artefact is
therefore never found (another digest), and a missing or unreadable one is traced again
with one log line and written anew.

Where: the folder of JAX's persistent compilation cache (set by ``compile_cache.enable``,
or JAX's ``jax_compilation_cache_dir``) plus ``exported/``; no XLA cache folder (e.g.
``JAXLAB_COMPILATION_CACHE=0``) means no exported cache either. Files are written
atomically by the main process only. Its size is not bounded (a few hundred KB per program
and code version; delete it at any time).

An artefact holds data only: ``MAGIC``, the sha256 of the rest, then a JSON header (the
structures as text, the PRNG implementations of the outputs) and ``jax.export``'s own
serialised program. Loading checks the sha256 before it parses anything (neither the JSON
nor the program is read from a file that does not match it) and never unpickles: the
input structure comes from the caller's ``args``; the output structure is rebuilt from a
JSON description whose containers are tuples, lists, dicts, None and subtrees of the
inputs (``nnx`` states, NamedTuples, optax states passed through, e.g. a carry); an output
with other node types is described as ``null`` and its structure is found again with
``jax.eval_shape`` (tracing without lowering). The sha256 catches torn writes and disk
errors; it is no signature (``docs/core.rst``, "What the workdir and caches protect
against").
"""

import hashlib
import json
import os
import re
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import jax
from absl import logging

from jaxlab.core import checked
from jaxlab.core import sharding as sharding_lib

from . import provenance, results

SUFFIX = ".jaxexport"
SUBDIR = "exported"
FORMAT = 2  # of the artefact file; part of the digest
MAGIC = b"jaxlab exported program 2\n"
_warned: set[str] = set()
_lock = threading.Lock()


def folder() -> str | None:
    """``<XLA cache folder>/exported``, or None when JAX's persistent compilation cache is
    off (then programs are traced as usual)."""
    xla = jax.config.jax_compilation_cache_dir
    return os.path.join(os.fspath(xla), SUBDIR) if xla else None


def _is_key(x) -> bool:
    return jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.prng_key)


def _describe(x) -> dict:
    """Shape, dtype and sharding of one input leaf (for the digest)."""
    s = getattr(x, "sharding", None)
    return {"shape": list(x.shape), "dtype": str(x.dtype),
            "sharding": None if s is None else repr(s)}


def _backend() -> dict:
    dev = jax.devices()[0]
    return {"platform": dev.platform, "device_kind": dev.device_kind,
            "devices": jax.device_count(), "processes": jax.process_count()}


def _structure(treedef) -> str:
    """``str(treedef)`` without object addresses (some nodes' auxiliary data, e.g. MJX's
    contact fields, print as ``<... object at 0x...>``, which differs between processes)."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", str(treedef))


def digest(name: str, key: Any, leaves: Sequence, in_tree) -> str:
    """The artefact key of program ``name`` at the flat inputs ``leaves`` (module doc)."""
    return provenance.unit_key({
        "format": FORMAT, "program": name, "key": key, "in_tree": _structure(in_tree),
        "inputs": [_describe(x) for x in leaves], "backend": _backend(),
        "checked": checked.enabled(),
        "export": jax.export.maximum_supported_calling_convention_version})


def _spec(x) -> jax.ShapeDtypeStruct:
    """``x`` as the flat array the exported program takes (key arrays as key data)."""
    shape, dtype = x.shape, x.dtype
    if _is_key(x):
        data = jax.eval_shape(jax.random.key_data, jax.ShapeDtypeStruct(shape, dtype))
        shape, dtype = data.shape, data.dtype
    s = getattr(x, "sharding", None)  # a mesh placement is exported; one device is not
    return jax.ShapeDtypeStruct(shape, dtype,
                                sharding=s if isinstance(s, jax.sharding.NamedSharding) else None)


class Program:
    """A pytree function served by a (loaded or freshly exported) ``jax.export`` program,
    or by plain ``jax.jit`` when the cache is off or the export failed.

    Attributes:
      name: the program's name.
      source: "loaded" (from the artefact), "exported" (traced and written now) or
        "traced" (plain ``jax.jit``: cache off, or export impossible).
      path: the artefact's file (None when ``source == "traced"``).
    """

    def __init__(self, name: str, source: str, path: str | None, call: Callable, in_tree,
                 in_keys: Sequence[str | None], out: dict):
        self.name, self.source, self.path = name, source, path
        self._call, self._in_tree, self._in_keys = call, in_tree, tuple(in_keys)
        self._out = out  # {"out_tree", "out_keys"}; a traced program fills it when traced

    def __call__(self, *args):
        leaves, in_tree = jax.tree.flatten(args)
        if in_tree != self._in_tree:
            raise ValueError(f"program {self.name!r}: `args` have the structure {in_tree}, "
                             f"not the exported {self._in_tree}.")
        flat = [jax.random.key_data(x) if k else x
                for x, k in zip(leaves, self._in_keys, strict=True)]
        out = self._call(*flat)
        out = [jax.random.wrap_key_data(x, impl=k) if k else x
               for x, k in zip(out, self._out["out_keys"], strict=True)]
        return jax.tree.unflatten(self._out["out_tree"], out)

    def __repr__(self) -> str:
        return f"Program({self.name!r}, source={self.source!r}, path={self.path!r})"


def _flat_fun(fun: Callable, in_tree, in_keys, box: dict) -> Callable:
    """``fun`` over the flat (key-data) leaves; records the output structure in ``box``."""

    def flat(*leaves):
        args = [jax.random.wrap_key_data(x, impl=k) if k else x
                for x, k in zip(leaves, in_keys, strict=True)]
        out = fun(*jax.tree.unflatten(in_tree, args))
        out_leaves, box["out_tree"] = jax.tree.flatten(out)
        box["out_keys"] = [str(jax.random.key_impl(x)) if _is_key(x) else None
                           for x in out_leaves]
        return [jax.random.key_data(x) if _is_key(x) else x for x in out_leaves]

    return flat


def _flat_out_shardings(out_shardings, n_out: int | None):
    if out_shardings is None:
        return None
    flat = jax.tree.leaves(out_shardings, is_leaf=lambda s: isinstance(s, jax.sharding.Sharding))
    if n_out is not None and len(flat) != n_out:
        raise ValueError(f"`out_shardings` has {len(flat)} leaves for {n_out} outputs.")
    return flat


def _jit_call(exp: jax.export.Exported, out_shardings) -> Callable:
    return jax.jit(lambda *xs: exp.call(*xs), out_shardings=out_shardings)


class _NotDescribable(Exception):
    """An output node that ``_tree_json`` cannot write as JSON."""


def _subtrees(treedef, path=()):
    """(path of child indices, subtree) of every node of ``treedef``, preorder."""
    yield list(path), treedef
    for i, child in enumerate(treedef.children()):
        yield from _subtrees(child, (*path, i))


def _tree_json(treedef, in_tree):
    """``treedef`` as JSON: "*" a leaf, null None, {"tuple" | "list": [children]},
    {"dict": [keys], "children": [...]}, {"in": path} the input subtree at ``path``.

    Raises:
      _NotDescribable: a node of another type that is no subtree of the inputs.
    """
    inputs = [(path, t) for path, t in _subtrees(in_tree) if t.num_nodes > 1]

    def describe(t):
        if t.num_nodes == 1 and t.num_leaves == 1:
            return "*"
        for path, sub in inputs:
            if sub == t:
                return {"in": path}
        kind, aux = t.node_data()
        children = [describe(c) for c in t.children()]
        if kind is type(None):
            return None
        if kind in (tuple, list):
            return {kind.__name__: children}
        if kind is dict and all(isinstance(k, str | int) for k in aux):
            return {"dict": list(aux), "children": children}
        raise _NotDescribable(f"node {kind.__name__}")

    return describe(treedef)


def _tree_from_json(desc, in_tree):
    """The treedef ``_tree_json`` described (``in_tree``: the caller's input structure)."""
    registry = jax.tree_util.default_registry
    if desc == "*":
        return jax.tree.structure(0)
    if desc is None:
        return jax.tree.structure(None)
    if not isinstance(desc, dict):
        raise ValueError(f"bad structure description {desc!r}")
    if "in" in desc:
        t = in_tree
        for i in desc["in"]:
            t = t.children()[i]
        return t
    if "dict" in desc:
        children = [_tree_from_json(c, in_tree) for c in desc["children"]]
        return jax.tree_util.PyTreeDef.from_node_data_and_children(
            registry, (dict, list(desc["dict"])), children)
    for kind in (tuple, list):
        if kind.__name__ in desc:
            children = [_tree_from_json(c, in_tree) for c in desc[kind.__name__]]
            return jax.tree_util.PyTreeDef.from_node_data_and_children(
                registry, (kind, None), children)
    raise ValueError(f"bad structure description {desc!r}")


def _pack(header: dict, blob: bytes) -> bytes:
    """The artefact file: ``MAGIC``, the sha256 (hex) of the rest, a newline, then the
    JSON header's length (8 bytes, big-endian), the header and the serialised program."""
    text = json.dumps(header, sort_keys=True).encode()
    payload = len(text).to_bytes(8, "big") + text + blob
    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def _read(path: str) -> tuple[dict, bytes]:
    """(header, serialised program) of the artefact ``path``; nothing is parsed before
    the bytes match their sha256.

    Raises:
      ValueError: not an artefact of this format, or damaged (the sha256 differs).
    """
    with open(path, "rb") as f:
        raw = f.read()
    n = len(MAGIC)
    if not raw.startswith(MAGIC) or raw[n + 64:n + 65] != b"\n":
        raise ValueError("not an exported-program artefact of this format")
    want, payload = raw[n:n + 64], raw[n + 65:]
    if hashlib.sha256(payload).hexdigest().encode() != want:
        raise ValueError("the artefact does not match its sha256 (damaged); not parsed")
    size = int.from_bytes(payload[:8], "big")
    header = json.loads(payload[8:8 + size])
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError("not an exported-program artefact of this format")
    return header, payload[8 + size:]


def _warn_once(name: str, msg: str) -> None:
    with _lock:
        if name in _warned:
            return
        _warned.add(name)
    logging.warning(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


def load_or_export(fun: Callable, *args, name: str, key: Any,
                   out_shardings: Any = None, cache_dir: str | None | bool = True) -> Program:
    """``fun`` jitted at ``args``, its StableHLO loaded from / written to the cache.

    Args:
      fun: a pure function of ``args`` (pytrees of arrays; not already jitted).
      *args: example inputs: arrays (their shardings are kept) or ``jax.ShapeDtypeStruct``s.
        The returned program takes inputs of the same structure, shapes, dtypes and
        shardings.
      name: the program's name (a file-name prefix: letters, digits, ``_-.=``).
      key: JSON-able; everything besides the code and the input shapes that determines
        the program (e.g. the unit's spec).
      out_shardings: a pytree of shardings matching ``fun``'s outputs (or None).
      cache_dir: the artefact folder; True (default) for ``folder()``; None / False for no
        cache (plain ``jax.jit``).

    Returns:
      A ``Program``: call it as ``fun`` (same pytree structures).

    Raises:
      ValueError: ``name`` is not a file name.
    """
    if not name or any(not (ch.isalnum() or ch in "_-.=") for ch in name):
        raise ValueError(f"`name` {name!r} must be letters, digits and '_-.=' only.")
    leaves, in_tree = jax.tree.flatten(args)
    in_keys = [str(jax.random.key_impl(x)) if _is_key(x) else None for x in leaves]
    specs = [_spec(x) for x in leaves]
    if cache_dir is True:
        cache_dir = folder()
    box: dict = {}
    flat = _flat_fun(fun, in_tree, in_keys, box)

    def traced(why: str | None = None) -> Program:
        if why:
            _warn_once(name, why)
        call = jax.jit(flat, out_shardings=_flat_out_shardings(out_shardings, None))
        return Program(name, "traced", None, call, in_tree, in_keys, box)

    if not cache_dir:
        return traced()
    path = os.path.join(cache_dir, f"{name}-{digest(name, key, leaves, in_tree)}{SUFFIX}")
    if os.path.exists(path):
        try:
            header, blob = _read(path)
            if header["in_tree"] != _structure(in_tree):
                raise ValueError("its input structure differs")
            exp = jax.export.deserialize(bytearray(blob))
            if header["out_tree"] is None:  # not describable: traced again, not lowered
                jax.eval_shape(flat, *specs)  # fills box["out_tree"]
                out_tree = box["out_tree"]
            else:
                out_tree = _tree_from_json(header["out_tree"], in_tree)
            if _structure(out_tree) != header["out_structure"]:
                raise ValueError("its output structure differs")
            call = _jit_call(exp, _flat_out_shardings(out_shardings, len(exp.out_avals)))
            return Program(name, "loaded", path, call, in_tree, in_keys,
                           {"out_tree": out_tree, "out_keys": header["out_keys"]})
        except Exception as e:  # noqa: BLE001 - any unreadable artefact is traced again
            logging.warning("exported: %s unreadable (%s: %s); tracing %s again", path,
                            type(e).__name__, e, name)
    else:
        logging.debug("exported: no artefact for %s at %s; tracing it", name, path)
    try:
        jitted = jax.jit(flat, out_shardings=_flat_out_shardings(out_shardings, None))
        exp = jax.export.export(jitted)(*specs)
        blob = bytes(exp.serialize())
    except Exception as e:  # noqa: BLE001 - whatever export cannot express is traced
        return traced(f"exported: {name} cannot be exported ({type(e).__name__}: {e}); "
                      "traced with jax.jit")
    if sharding_lib.is_main_process():
        try:
            try:
                out_desc = _tree_json(box["out_tree"], in_tree)
            except _NotDescribable:
                out_desc = None
            header = {"format": FORMAT, "name": name, "in_tree": _structure(in_tree),
                      "out_tree": out_desc, "out_structure": _structure(box["out_tree"]),
                      "out_keys": box["out_keys"]}
            results.atomic_write_bytes(path, _pack(header, blob))
        except Exception as e:  # noqa: BLE001 - a cache that cannot be written is no error
            _warn_once(name + ":write", f"exported: {path} not written ({type(e).__name__}: "
                                        f"{e})")
    call = _jit_call(exp, _flat_out_shardings(out_shardings, len(exp.out_avals)))
    return Program(name, "exported", path, call, in_tree, in_keys, box)
