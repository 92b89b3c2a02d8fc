"""The one study runner: every experiment is a list of resumable units.

An experiment (``Experiment``) says which units it runs, how their results become a
summary, which plots it draws and which rows go to REPORT.md. ``train_and_evaluate(exp,
config, workdir)`` runs it:

1. ``exp.validate(config)``: loud failure before any work.
2. Each ``Unit`` is looked up in ``workdir/units/<name>-<key>.json``; key = hash of what
   determines the unit (``Unit.spec``, by default the whole config), the unit's name, the
   code version, JAX's numeric settings, the versions of the experiment's numeric
   packages and the content of any ``*pretrained_dir`` folder (``provenance.unit_key``).
   A finished unit is never recomputed, and a unit from another config, code version or
   numeric environment is never served. Each unit file carries the sha256 of its content
   (and file name); a file that fails it, or is not valid JSON, or does not decode, is
   recomputed with a ``RuntimeWarning`` naming it.
3. A unit that is missing runs. A long unit splits its work into chunks through
   ``ctx.run_chunks`` (``run_resumable`` with orbax checkpoints after every chunk under
   ``workdir/checkpoints/<key>``), so a crash loses at most one chunk; a unit made of
   separate steps keeps each finished step with ``ctx.cached(label, fn)``. The chunk
   checkpoints and steps are deleted once the unit's result is on disk.
4. When a unit's result is computed or loaded, its per-step scalars (``exp.scalars``,
   declared by each study) are written as TensorBoard event files under
   ``workdir/tb/<unit>`` (``experiments.lib.events``; main process only).
5. ``exp.summarize`` turns the results into the summary; ``exp.plot`` draws the PNGs;
   then, last, ``results.write_summary`` writes ``summary.json`` atomically with the
   provenance block, its own sha256 and the list of figures. An old ``summary.json`` is
   removed when the run starts, so a run killed anywhere before the end leaves no summary
   (the suite reruns the method, reusing its finished units) and a summary on disk always
   has its figures (``results.read_summary`` checks them).

The whole run holds the workdir's exclusive lock (``experiments.lib.locks``): a second
process on the same workdir fails at once with one line naming the workdir and the pid of
the first.

``workdir/timing.json`` (written before the summary): per unit computed in this run (and for
summary + plots), wall seconds, XLA compile seconds, trace/lowering seconds, the rest
("run"), programs compiled and loaded from JAX's persistent compilation cache
(``compile_cache``, turned on here), and the load averages (1, 5, 15 min) when the run
ended. Kept out of summary.json, which stays byte-identical across reruns.

This is the only resume mechanism: finished work is a unit file, unfinished work is the
chunk checkpoints and cached steps of the unit that was running. Units run in the order given, every
process of a multi-host job computes every unit (SPMD) and only the main process writes.
Unit results are pytrees of dicts, lists, numbers, strings and arrays; arrays are stored
bit-exactly (dtype, shape, raw bytes), so a resumed run summarizes the same numbers as an
uninterrupted one.
"""

import base64
import functools
import json
import os
import shutil
import time
import types
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from absl import logging

from jaxlab.core import loops, sharding, validation
from jaxlab.core.types import PyTree

from . import compile_cache, events, locks, provenance, results, scalars
from .checkpoint import Checkpointer
from .progress import Progress


class Context(NamedTuple):
    """What a running unit may use.

    Attributes:
      name: the unit's name.
      key: the unit's cache key.
      workdir: the experiment's output folder.
      checkpoint_dir: the folder of this unit's chunk checkpoints.
      results: read-only ``{name: result}`` of the units before this one in this run
        (computed or loaded), for a unit that builds on an earlier unit's result.
    """

    name: str
    key: str
    workdir: str
    checkpoint_dir: str
    results: Mapping[str, Any] = types.MappingProxyType({})

    @property
    def run_chunks(self) -> loops.ChunkRunner:
        """``run_resumable`` bound to this unit's checkpoint folder (a ``loops.ChunkRunner``,
        so it can be handed to the library trainers)."""
        return functools.partial(run_resumable, checkpoint_dir=self.checkpoint_dir)

    def cached(self, label: str, fn: Callable[[], Any]) -> Any:
        """``fn()``, kept under this unit's checkpoint folder so that a unit killed part way
        through reuses the steps it had finished (e.g. each decoder of an evaluation).

        ``label`` names the step uniquely within the unit (the file is
        ``checkpoint_dir/steps/<sha256 of label>.json``, holding the label too); the unit's
        key already covers the config, the code and the environment. The value is stored
        like a unit result (bit-exact arrays, sha256-checked); a damaged file is recomputed
        with a ``RuntimeWarning``. The value returned is the one read back from disk, so a
        first run and a resumed run see the same types. The files go with the chunk
        checkpoints once the unit's result is on disk.
        """
        path = os.path.join(self.checkpoint_dir, "steps",
                            results.content_hash(label)[:24] + ".json")
        if os.path.exists(path):
            try:
                saved = load_result(path)
                if isinstance(saved, dict) and saved.get("label") == label:
                    return saved["value"]
                _warn(f"step file {path} holds another label; recomputing {label!r}")
            except UnitFileError as e:
                _warn(f"{e}; recomputing step {label!r}")
        value = _to_host(jax.block_until_ready(fn()))
        save_result(path, {"label": label, "value": value})
        return load_result(path)["value"]

    def sub(self, name: str) -> "Context":
        """A context whose chunk checkpoints live in a subfolder (several resumable loops
        inside one unit, e.g. training then fitting a head)."""
        return self._replace(checkpoint_dir=os.path.join(self.checkpoint_dir, name))


class Unit(NamedTuple):
    """One resumable piece of a study.

    Attributes:
      name: unique within the experiment; letters, digits, ``_-.=`` only (a file name).
      run: ``run(ctx) -> result`` (a pytree of dicts, lists, numbers, strings, arrays).
      spec: what determines the result besides the code (``None``: the whole config).
        A narrower spec lets a unit survive changes to config fields it does not read.
    """

    name: str
    run: Callable[[Context], Any]
    spec: Any = None


class Experiment(NamedTuple):
    """An experiment: units, summary, plots and REPORT rows (big_vision-style spec).

    Attributes:
      name: the method's name (``experiments.lib.registry``).
      validate: ``validate(config)`` raises on a bad config.
      units: ``units(config, workdir) -> [Unit]``.
      summarize: ``summarize(config, results) -> summary`` with ``results = {unit name:
        result}``; the summary must be JSON-able (``results.write_json``).
      plot: ``plot(config, summary, results, workdir)`` writes the PNGs.
      headline: ``headline(summary) -> [(metric, value)]`` rows for REPORT.md.
      caption: one sentence printed above the headline table (REPORT.md, report.html, the
        docs' evidence): what the rows show and which way is better.
      scalars: optional ``scalars(config, unit, result, workdir) -> {tag: (steps,
        values)}``, the unit's TensorBoard series (each study declares its own; ``None``:
        no series).
    """

    name: str
    validate: Callable[[Any], None]
    units: Callable[[Any, str], Sequence[Unit]]
    summarize: Callable[[Any, dict], dict]
    plot: Callable[[Any, dict, dict, str], None]
    headline: Callable[[dict], list[tuple[str, str]]]
    scalars: Callable[[Any, str, Any, str], dict] | None = None
    caption: str = ""


def train_and_evaluate(experiment: Experiment, config, workdir: str | os.PathLike, *,
                       force: bool = False) -> dict:
    """Runs ``experiment`` at ``config``: validate, units, summary.json, plots.

    ``force`` recomputes every unit even if its result file is current.

    Returns:
      The summary written to ``workdir/summary.json`` (without its provenance block).
    """
    workdir = os.fspath(workdir)
    cache_dir = compile_cache.enable()
    experiment.validate(config)
    timing = {}
    with locks.hold(workdir):
        results.discard_summary(workdir)
        out = run_units(experiment.units(config, workdir), config, workdir,
                        desc=experiment.name, force=force,
                        on_result=event_logger(experiment, config, workdir),
                        packages=provenance.method_packages(experiment.name), timing=timing)
        t0, c0 = time.perf_counter(), compile_cache.tally()
        summary = experiment.summarize(config, out)
        experiment.plot(config, summary, out, workdir)
        timing["(summary and plots)"] = compile_cache.timing_row(time.perf_counter() - t0,
                                                                 compile_cache.tally() - c0)
        results.write_json(os.path.join(workdir, results.TIMING),
                           {"units": timing, "compile_cache": cache_dir,
                            "unit_key": provenance.unit_key(config),
                            "load_avg": list(os.getloadavg())})
        results.write_summary(workdir, summary, config)  # last: the run is complete
    return summary


def event_logger(experiment: Experiment, config, workdir: str) -> Callable[[str, Any], None]:
    """``on_result`` for ``run_units``: writes a unit's TensorBoard scalars under
    ``workdir/tb/<unit>`` (a failure is a warning: metrics never stop a run)."""

    def log(unit_name: str, result: Any) -> None:
        if not sharding.is_main_process():
            return
        series = scalars.extract(experiment.name, config, unit_name, result, workdir,
                                 experiment.scalars)
        try:
            events.write_scalars(os.path.join(workdir, "tb", events.run_name(unit_name)),
                                 series)
        except Exception as e:  # noqa: BLE001 - metrics never stop a run
            logging.warning("%s: TensorBoard events of unit %s not written (%s: %s)",
                            experiment.name, unit_name, type(e).__name__, e)

    return log


def unit_path(workdir: str, unit: Unit, config,
              packages: tuple[str, ...] | None = None) -> tuple[str, str]:
    """(key, path of the unit's result file); ``packages``: the numeric packages whose
    versions enter the key (default: all, ``provenance.ALL_NUMERIC_PACKAGES``)."""
    key = provenance.unit_key({"unit": unit.name,
                               "spec": provenance.config_dict(config) if unit.spec is None
                               else unit.spec}, packages)
    return key, os.path.join(workdir, "units", f"{unit.name}-{key}.json")


def run_units(units: Sequence[Unit], config, workdir: str, *, desc: str = "study",
              force: bool = False,
              on_result: Callable[[str, Any], None] | None = None,
              packages: tuple[str, ...] | None = None,
              timing: dict | None = None) -> dict:
    """Runs (or loads) every unit; returns ``{name: result}`` in the order given.

    ``force`` recomputes units whose result file exists (their chunk checkpoints too).
    ``on_result(name, result)`` is called once per unit, as soon as its result is computed
    or loaded (``train_and_evaluate`` writes TensorBoard events with it). ``packages``: the
    numeric packages whose versions key the units (``unit_path``). ``timing``, if given,
    receives ``{name: compile_cache.timing_row(...)}`` for every unit computed. After a
    computed unit, clears JAX's in-memory caches if the process holds more than
    ``MAP_SHARE`` of its memory-map limit (``_release_programs_near_map_limit``). Holds the
    workdir's lock.

    Raises:
      locks.Busy: another process is writing ``workdir``.
    """
    names = [u.name for u in units]
    if len(set(names)) != len(names):
        raise ValueError(f"`units` names must be unique, got {names}.")
    for n in names:
        if not n or any(not (ch.isalnum() or ch in "_-.=") for ch in n):
            raise ValueError(f"unit name {n!r} must be letters, digits and '_-.=' only.")
    out = {}
    release = locks.acquire(workdir)
    progress = Progress(len(units), desc=f"{desc} units", unit="units")
    try:
        for unit in units:
            key, path = unit_path(workdir, unit, config, packages)
            ckdir = os.path.join(workdir, "checkpoints", key)
            if force and sharding.is_main_process() and os.path.isdir(ckdir):
                shutil.rmtree(ckdir, ignore_errors=True)
            if os.path.exists(path) and not force:
                try:
                    out[unit.name] = load_result(path)
                    logging.info("%s: unit %s done earlier (%s)", desc, unit.name, path)
                    if on_result is not None:
                        on_result(unit.name, out[unit.name])
                    progress.update(1)
                    continue
                except UnitFileError as e:
                    _warn(f"{desc}: {e}; recomputing unit {unit.name}")
            t0, c0 = time.perf_counter(), compile_cache.tally()
            result = unit.run(Context(unit.name, key, workdir, ckdir,
                                      types.MappingProxyType(out)))
            result = _to_host(jax.block_until_ready(result))
            if timing is not None:
                timing[unit.name] = compile_cache.timing_row(time.perf_counter() - t0,
                                                             compile_cache.tally() - c0)
            save_result(path, result)
            if sharding.is_main_process() and os.path.isdir(ckdir):
                shutil.rmtree(ckdir, ignore_errors=True)
            out[unit.name] = load_result(path)  # exactly what a resumed run would see
            _release_programs_near_map_limit(unit.name)
            if on_result is not None:
                on_result(unit.name, out[unit.name])
            progress.update(1)
    finally:
        progress.close()
        release()
    return out


# Share of Linux's per-process memory-map limit (vm.max_map_count) above which a study drops
# its compiled programs after a unit.
MAP_SHARE = 0.5


def _memory_maps() -> tuple[int, int] | None:
    """(maps in use, limit) of this process, or None where /proc does not tell."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            limit = int(f.read())
        with open("/proc/self/maps", "rb") as f:
            used = sum(1 for _ in f)
    except (OSError, ValueError):
        return None
    return used, limit


def _release_programs_near_map_limit(unit_name: str) -> bool:
    """Clears JAX's in-memory caches when the process holds more than ``MAP_SHARE`` of its
    memory-map limit; returns whether it did.

    Every compiled XLA:CPU program keeps memory maps; a long study (the POKE-SMC full preset:
    about 20,000 maps per task) passes Linux's default limit of 65,530, where LLVM fails with
    "Cannot allocate memory". Clearing after every unit would recompile the small programs
    units share (the persistent cache keeps only slow compiles), so it is done only near the
    limit."""
    maps = _memory_maps()
    if maps is None or maps[0] <= MAP_SHARE * maps[1]:
        return False
    logging.info("study: %d of %d memory maps in use after unit %s; clearing JAX's caches",
                 maps[0], maps[1], unit_name)
    jax.clear_caches()
    return True


def _warn(msg: str) -> None:
    logging.warning(msg)
    warnings.warn(msg, RuntimeWarning, stacklevel=3)


def _to_host(obj):
    """``obj`` with every ``jax.Array`` as NumPy (``sharding.to_host``: arrays spanning
    other hosts are gathered); dict order, Python numbers and strings kept as they are."""
    if isinstance(obj, dict):
        return {k: _to_host(v) for k, v in obj.items()}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_to_host(v) for v in obj))
    if isinstance(obj, list | tuple):
        return type(obj)(_to_host(v) for v in obj)
    if isinstance(obj, jax.Array):
        return sharding.to_host(obj)
    return obj


def _encode(obj):
    if isinstance(obj, dict):
        return {"__dict__": [[_encode(k), _encode(v)] for k, v in obj.items()]}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return {"__dict__": [[k, _encode(v)] for k, v in obj._asdict().items()]}
    if isinstance(obj, list | tuple):
        return [_encode(v) for v in obj]
    if isinstance(obj, np.ndarray | np.generic | jax.Array):
        a = np.asarray(obj)
        if a.dtype == object:
            raise TypeError("unit results may not hold object arrays.")
        return {"__ndarray__": base64.b64encode(np.ascontiguousarray(a).tobytes()).decode(),
                "dtype": a.dtype.str, "shape": list(a.shape)}
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    raise TypeError(f"unit results may hold dicts, lists, numbers, strings and arrays; got "
                    f"{type(obj).__name__}.")


def _decode(obj):
    if isinstance(obj, dict) and "__ndarray__" in obj:
        a = np.frombuffer(base64.b64decode(obj["__ndarray__"]), np.dtype(obj["dtype"]))
        return a.reshape(obj["shape"]).copy()
    if isinstance(obj, dict):
        return {_decode(k): _decode(v) for k, v in obj["__dict__"]}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


class UnitFileError(ValueError):
    """A unit file that cannot be trusted (the message names the file and why)."""


def _unit_hash(path: str, encoded) -> str:
    """sha256 of a unit file's content and name (a file copied to another unit's name
    fails it too)."""
    return results.content_hash({"file": os.path.basename(path), "result": encoded})


def save_result(path: str, result: Any) -> None:
    """Writes a unit result bit-exactly with its sha256, atomically (main process only;
    all processes wait)."""
    encoded = _encode(result)
    if sharding.is_main_process():
        results.atomic_write_text(path, json.dumps(
            {"result": encoded, "sha256": _unit_hash(path, encoded)}))
    sharding.sync(f"unit:{os.path.abspath(path)}")


def load_result(path: str) -> Any:
    """Reads what ``save_result`` wrote (dicts, lists, numbers, strings, NumPy arrays).

    Raises:
      UnitFileError: naming ``path``, when it is not valid JSON, has no content hash, its
        content does not match the hash (edited or damaged), or it does not decode.
    """
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (ValueError, UnicodeDecodeError) as e:
        raise UnitFileError(f"unit file {path} is not valid JSON ({e})") from None
    if not isinstance(data, dict) or "result" not in data or "sha256" not in data:
        raise UnitFileError(f"unit file {path} is not a unit result with a sha256")
    if _unit_hash(path, data["result"]) != data["sha256"]:
        raise UnitFileError(f"unit file {path} does not match its sha256 (edited or damaged)")
    try:
        return _decode(data["result"])
    except Exception as e:  # noqa: BLE001 - any malformed tree is the same failure
        raise UnitFileError(f"unit file {path} does not decode ({type(e).__name__}: "
                            f"{e})") from None


def run_resumable(
    chunk_fn: Callable[[PyTree, int], PyTree],
    init_carry: PyTree,
    num_chunks: int,
    *,
    checkpoint_dir: str | os.PathLike | None = None,
    desc: str = "run",
    unit: str = "chunk",
    units_per_chunk: int = 1,
    log_fn: Callable[[int, PyTree], str] | None = None,
) -> PyTree:
    """Runs ``carry = chunk_fn(carry, i)`` for i in [start, num_chunks), checkpointing each.

    Args:
      chunk_fn: pure (usually jitted) function of the carry and the chunk index.
      init_carry: carry before chunk 0; also the template for restoring.
      num_chunks: total number of chunks.
      checkpoint_dir: where to save after each chunk; ``None`` disables checkpointing.
      desc: progress-bar label.
      unit: name of the unit counted by the progress rate (e.g. "updates").
      units_per_chunk: how many ``unit`` one chunk performs (for the rate).
      log_fn: optional ``(i, carry) -> str`` shown as the progress postfix.

    Returns:
      The carry after the last chunk.
    """
    validation.check_positive_int("num_chunks", num_chunks)
    ckpt = Checkpointer(checkpoint_dir) if checkpoint_dir is not None else None
    start, carry = (0, init_carry) if ckpt is None else ckpt.restore_or_init(init_carry)
    start = min(start, num_chunks)
    progress = Progress(num_chunks * units_per_chunk, desc=desc, unit=unit,
                        initial=start * units_per_chunk)
    try:
        for i in range(start, num_chunks):
            carry = chunk_fn(carry, i)
            jax.block_until_ready(carry)
            if ckpt is not None:
                ckpt.save(i + 1, carry)
            progress.update(units_per_chunk, postfix=None if log_fn is None else log_fn(i, carry))
    finally:
        progress.close()
        if ckpt is not None:
            ckpt.close()
    return carry
