"""Orbax storage of pytrees: save, restore-latest, fall back past corrupt steps.

The resumable loops that use it are in ``experiments.lib.study``.
"""

import logging as pylogging
import os
import shutil
import warnings

import jax
import numpy as np
import orbax.checkpoint as ocp
from absl import logging

from jaxlab.core import sharding, validation
from jaxlab.core.types import PyTree

from . import locks, provenance


class _DropOrbaxInfo(pylogging.Filter):
    """Orbax logs every save step at INFO; keep its warnings, drop the chatter."""

    def filter(self, record):
        return record.levelno >= pylogging.WARNING or "orbax" not in record.pathname


logging.get_absl_logger().addFilter(_DropOrbaxInfo())


class Checkpointer:
    """Saves and restores pytrees (NamedTuple states included) under ``directory``.

    A Checkpointer that writes (``save``, or setting a corrupt step aside) first takes the
    exclusive lock of ``directory`` (``experiments.lib.locks``) and keeps it until ``close``,
    so two processes never share the folder, its orbax temporary step folders included; the
    second raises ``locks.Busy`` naming the folder and the holder's pid. Reading only (the
    shipped weights) takes no lock and writes nothing.

    Args:
      directory: folder for the checkpoints; created if missing.
      max_to_keep: how many recent steps to keep on disk.
    """

    def __init__(self, directory: str | os.PathLike, max_to_keep: int = 2):
        validation.check_positive_int("max_to_keep", max_to_keep)
        self.directory = os.path.abspath(os.fspath(directory))
        self._max_to_keep = max_to_keep
        self._release = None
        self._manager = self._new_manager()

    def _lock(self) -> None:
        if self._release is None:
            self._release = locks.acquire(self.directory, "checkpoint folder")

    def _new_manager(self) -> ocp.CheckpointManager:
        return ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=self._max_to_keep, create=True),
        )

    def latest_step(self) -> int | None:
        """The last saved step, or None when the directory holds no checkpoint."""
        return self._manager.latest_step()

    def save(self, step: int, tree: PyTree) -> None:
        """Saves ``tree`` as ``step`` and waits until it is on disk."""
        self._lock()
        self._manager.save(step, args=ocp.args.StandardSave(_storable(tree)))
        self._manager.wait_until_finished()

    def restore(self, template: PyTree, step: int | None = None) -> PyTree:
        """Restores the tree saved at ``step`` (default: latest) into ``template``'s structure.

        Raises:
          FileNotFoundError: if no checkpoint exists.
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"No checkpoint in {self.directory}.")
        multi_host = jax.process_count() > 1
        # Host-local leaves stored as NumPy (multi-host, see ``_storable``) restore as NumPy.
        abstract = jax.tree.map(
            lambda x: x if multi_host and isinstance(x, np.ndarray)
            else ocp.utils.to_shape_dtype_struct(x), _storable(template))
        restored = self._manager.restore(step, args=ocp.args.StandardRestore(abstract))
        if _needs_flat(template):
            leaves, treedef = jax.tree.flatten(template)
            restored = jax.tree.unflatten(treedef, [restored.get(str(i), x)
                                                    for i, x in enumerate(leaves)])
        if not multi_host:
            return restored
        return jax.tree.map(_from_host_local, template, restored)

    def restore_or_init(self, template: PyTree) -> tuple[int, PyTree]:
        """(step, restored tree) of the newest step that restores, or (0, template) when
        nothing was saved.

        A step that cannot be restored (truncated data file, garbage metadata, empty step
        folder) is reported with its path (a ``RuntimeWarning`` and a log line), moved aside
        to ``<directory>/corrupt-<step>`` (kept for inspection, never read again) and the
        previous kept step is tried; when none restores the run starts from ``template``.
        """
        for step in sorted(self._manager.all_steps(), reverse=True):
            try:
                return step, self.restore(template, step)
            except Exception as e:  # noqa: BLE001 - any unreadable step falls back the same way
                path = os.path.join(self.directory, str(step))
                aside = os.path.join(self.directory, f"corrupt-{step}")
                msg = (f"checkpoint step {step} at {path} cannot be restored "
                       f"({type(e).__name__}: {str(e)[:200]}); moved to {aside}, falling back "
                       "to the previous kept step")
                logging.warning(msg)
                warnings.warn(msg, RuntimeWarning, stacklevel=2)
                self._set_aside(path, aside)
        return 0, template

    def _set_aside(self, path: str, aside: str) -> None:
        self._lock()
        if sharding.is_main_process() and os.path.exists(path):
            if os.path.exists(aside):
                shutil.rmtree(aside)
            os.replace(path, aside)
        sharding.sync(f"checkpoint:set_aside:{path}")
        # A manager that failed on a step keeps state from it: start a fresh one.
        self._manager.close()
        self._manager = self._new_manager()

    def close(self) -> None:
        self._manager.close()
        if self._release is not None:
            self._release()
            self._release = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _to_host_local(x):
    """A host-local ``jax.Array`` as NumPy (typed PRNG keys as their key data)."""
    if not (isinstance(x, jax.Array) and x.is_fully_addressable):
        return x
    return np.asarray(jax.random.key_data(x) if sharding.is_prng_key(x) else x)


def _from_host_local(template, restored):
    """Inverse of ``_to_host_local`` given the template leaf."""
    if not (isinstance(template, jax.Array) and isinstance(restored, np.ndarray)):
        return restored
    if sharding.is_prng_key(template):
        return jax.random.wrap_key_data(restored, impl=jax.random.key_impl(template))
    return jax.numpy.asarray(restored)


def _has_empty_leaves(tree: PyTree) -> bool:
    return any(getattr(x, "size", 1) == 0 for x in jax.tree.leaves(tree))


def _needs_flat(tree: PyTree) -> bool:
    return _has_empty_leaves(tree) or jax.tree_util.treedef_is_leaf(jax.tree.structure(tree))


def _storable(tree: PyTree) -> PyTree:
    """``tree`` itself, or, when it holds zero-size arrays (which orbax refuses, e.g. empty
    fields of an MJX ``Data``) or is a single array (which orbax's standard handler refuses),
    a flat {leaf index: leaf} dict of its non-empty leaves; ``restore`` refills the empty
    leaves from the template.

    In a multi-host run orbax saves global arrays shard by shard but refuses arrays that
    live on one host's devices; those (the same value on every host) are saved as NumPy
    by the primary host and turned back into ``jax.Array`` on restore.
    """
    if jax.process_count() > 1:
        tree = jax.tree.map(_to_host_local, tree)
    if not _needs_flat(tree):
        return tree
    return {str(i): x for i, x in enumerate(jax.tree.leaves(tree)) if x.size}


def checkpoint_dir_for(workdir: str | os.PathLike, config) -> str:
    """``workdir/checkpoints/<key>``, key = hash of (config, code version) (see
    ``core.provenance.unit_key``): a changed config or changed code never restores a stale run.
    """
    return os.path.join(os.fspath(workdir), "checkpoints", provenance.unit_key(config))
