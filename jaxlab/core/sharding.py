"""Device meshes, batch sharding and multi-host initialisation and gathering.

Every method has a batch axis (seeds, particles, images, environments); placing that
axis on a ``Mesh`` axis with a ``NamedSharding`` lets ``jit`` split the work across
devices with no change to the method code. Never ``pmap``.

Multi-host (multi-controller) runs: every process runs the same program on the same
host values. ``shard_batch`` gives each process the shards of its own devices, jitted
results are then global arrays spanning every host, ``to_host`` all-gathers them (every
process must call it), and only ``is_main_process()`` writes files (``results.write_json``,
``plots.save``); ``sync`` is the barrier that keeps the others from reading a file before
it is written.
"""

from collections.abc import Sequence

import jax
import numpy as np
from absl import logging
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxlab.core import validation
from jaxlab.core.types import PyTree

__all__ = ["initialize_distributed", "make_mesh", "shard_leading_axis", "is_prng_key", "place",
    "is_main_process", "sync", "to_host", "shard_batch"]


def initialize_distributed(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
) -> bool:
    """Calls ``jax.distributed.initialize`` for multi-host runs; a no-op for one process.

    On TPU pods and SLURM/GPU clusters all three arguments may be left ``None`` and JAX
    discovers them; pass them explicitly elsewhere. Returns True if it initialised.

    Raises:
      ValueError / TypeError naming the argument: ``num_processes`` not a positive int,
        ``process_id`` not an int in [0, num_processes), ``coordinator_address`` not a
        ``"host:port"`` string (checked before JAX is asked to connect).
    """
    if num_processes is not None:
        validation.check_positive_int("num_processes", num_processes)
    if process_id is not None:
        if not isinstance(process_id, int | np.integer) or isinstance(process_id, bool) \
                or process_id < 0:
            raise ValueError(f"`process_id` must be a non-negative integer, got "
                             f"{process_id!r}.")
        if num_processes is not None and process_id >= num_processes:
            raise ValueError(f"`process_id`={process_id} must be below `num_processes`="
                             f"{num_processes}.")
    if coordinator_address is not None and (not isinstance(coordinator_address, str)
                                            or ":" not in coordinator_address):
        raise ValueError(f"`coordinator_address` must be a 'host:port' string, got "
                         f"{coordinator_address!r}.")
    if num_processes is not None and num_processes <= 1 and coordinator_address is None:
        return False
    if num_processes is None and coordinator_address is None and process_id is None:
        return False
    jax.distributed.initialize(
        coordinator_address=coordinator_address,
        num_processes=num_processes,
        process_id=process_id,
    )
    return True


def make_mesh(shape: Sequence[int] = (-1,), axis_names: Sequence[str] = ("batch",)) -> Mesh:
    """A device mesh; one entry of ``shape`` may be -1 (all remaining devices)."""
    if isinstance(axis_names, str):
        raise TypeError(f"`axis_names` must be a sequence of names, got one string "
                        f"{axis_names!r} (write ({axis_names!r},)).")
    shape = list(shape)
    if len(shape) != len(axis_names):
        raise ValueError(f"`shape` {tuple(shape)} and `axis_names` {tuple(axis_names)} differ "
                         "in length.")
    n = jax.device_count()
    if shape.count(-1) > 1:
        raise ValueError(f"`shape` may contain at most one -1, got {tuple(shape)}.")
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1]))
        if n % known:
            raise ValueError(f"{n} devices do not split into mesh `shape` {tuple(shape)}.")
        shape[shape.index(-1)] = n // known
    if int(np.prod(shape)) != n:
        raise ValueError(f"mesh `shape` {tuple(shape)} needs {int(np.prod(shape))} devices, "
                         f"have {n}.")
    devices = np.asarray(jax.devices()).reshape(shape)
    return Mesh(devices, tuple(axis_names))


def shard_leading_axis(tree: PyTree, mesh: Mesh, axis_name: str = "batch") -> PyTree:
    """Places every array of ``tree`` with its leading axis split over ``axis_name``.

    Raises:
      ValueError: ``axis_name`` is not an axis of ``mesh``, or a leading dimension is not
        divisible by the mesh axis size.
    """
    if axis_name not in mesh.shape:
        raise ValueError(f"`axis_name`={axis_name!r} is not an axis of `mesh` (axes "
                         f"{tuple(mesh.axis_names)}).")
    size = mesh.shape[axis_name]

    def put(x):
        if np.ndim(x) and np.shape(x)[0] % size:
            raise ValueError(f"leading dimension {np.shape(x)[0]} is not divisible by mesh "
                             f"axis `{axis_name}` of size {size}.")
        spec = PartitionSpec(*([axis_name] if np.ndim(x) else []))
        return place(x, NamedSharding(mesh, spec))

    return jax.tree.map(put, tree)


def is_prng_key(x) -> bool:
    """True for a typed PRNG key array (``jax.random.key``), which NumPy cannot hold."""
    return isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def place(x, sharding: NamedSharding) -> jax.Array:
    """``x`` placed with ``sharding`` (trailing axes replicated where the spec is shorter).

    With one process this is ``jax.device_put``. When ``sharding`` spans devices of other
    processes, every process must pass the same value of ``x``; each keeps the shards of
    its own devices (``jax.make_array_from_callback``). Typed PRNG key arrays are placed
    through their key data.

    Raises:
      TypeError: ``sharding`` is not a ``jax.sharding.Sharding`` (e.g. a ``Mesh``: wrap it
        as ``NamedSharding(mesh, PartitionSpec(...))``).
    """
    if not isinstance(sharding, jax.sharding.Sharding):
        raise TypeError(f"`sharding` must be a jax.sharding.Sharding (e.g. NamedSharding(mesh, "
                        f"spec)), got {type(sharding).__name__}.")
    if sharding.is_fully_addressable or (isinstance(x, jax.Array)
                                         and not x.is_fully_addressable):
        return jax.device_put(x, sharding)
    if is_prng_key(x):
        data = place(jax.random.key_data(x), sharding)
        return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
    host = np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def is_main_process() -> bool:
    """True on the process that writes results (process 0; always True on one host)."""
    return jax.process_index() == 0


def sync(name: str) -> None:
    """Barrier across processes (a no-op on one host); ``name`` must match on every host.

    Raises:
      TypeError: ``name`` is not a non-empty string (checked on one host too).
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"`name` must be a non-empty string naming the barrier, got {name!r}.")
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)


def to_host(tree: PyTree) -> PyTree:
    """``tree`` with every array fetched as NumPy, also arrays that span other hosts.

    Arrays that are not fully addressable (results of a jit over a multi-host mesh) are
    all-gathered with ``multihost_utils.process_allgather``, so in a multi-host run every
    process must call this at the same point; elsewhere it is ``np.asarray``.

    Raises:
      TypeError: ``tree`` holds a typed PRNG key array (NumPy cannot hold one).
    """
    def get(x):
        if is_prng_key(x):
            raise TypeError("`tree` holds a PRNG key array, which NumPy cannot hold; pass "
                            "jax.random.key_data(k).")
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return np.asarray(x)

    return jax.tree.map(get, tree)


def shard_batch(tree: PyTree, mesh_shape: Sequence[int] | None = (-1,),
                axis_name: str = "batch") -> PyTree:
    """``tree`` with its leading (batch) axis split over a 1-D mesh of ``mesh_shape``.

    What every experiment calls on its batch axis (seeds, particles, images, problems,
    environments): with one device it is a plain placement; when a leading dimension does
    not divide over the mesh it logs a warning and returns ``tree`` unchanged (replicated
    work, same results), so a preset never fails on an odd device count. ``mesh_shape``
    None leaves ``tree`` where it is (single-device reference runs).
    """
    if mesh_shape is None:
        return tree
    if len(tuple(mesh_shape)) != 1:
        raise ValueError(f"`mesh_shape` must be 1-D for a batch axis, got {tuple(mesh_shape)}.")
    mesh = make_mesh(mesh_shape, (axis_name,))
    size = mesh.shape[axis_name]
    dims = [np.shape(x)[0] for x in jax.tree.leaves(tree) if np.ndim(x) > 0]
    if any(d % size for d in dims):
        logging.log_first_n(logging.WARNING, "batch sizes %s do not divide over %d devices; "
                            "running unsharded.", 1, sorted(set(dims)), size)
        return tree
    return shard_leading_axis(tree, mesh, axis_name)
