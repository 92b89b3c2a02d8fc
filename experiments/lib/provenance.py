"""What produced a result: code version, package versions, machine and config.

Every cached or resumable artefact (orbax checkpoints, finished-unit files, the suite's
per-method summaries) is keyed by ``unit_key(config)``: a hash of the full config, the
code version, JAX's numeric settings (``numeric_settings``: x64, default matmul precision,
PRNG implementation), the versions of the numeric packages (``NUMERIC_PACKAGES``: jax,
jaxlib, numpy, scipy, flax, optax, plus a method's extras, e.g. ott-jax for AvAtar and
brax / mujoco for RFO) and the content of every model folder the config names in a
``*pretrained_dir`` field (``weights_hash``, wherever the folder is). So no changed config
field, code, numeric setting, package or weight file ever serves stale work.

The code version is ``jaxlab.__version__`` plus a hash of the source that can change a
result: every ``.py`` file of ``jaxlab/``, ``pallas_kernels/`` and ``experiments/`` and
every file of ``experiments/pretrained/`` (shipped model weights) and ``jaxlab/avatar/data/``
(shipped datasets). It is stricter than the
git commit (uncommitted edits count; a commit touching only documentation does not), and
works without git; the commit and whether the tree was dirty are recorded beside it.
"""

import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess

import jaxlab

from .. import PACKAGE_DIR, package_path
from . import locks, methods, paths

# The folder holding jaxlab/, pallas_kernels/ and experiments/ (``paths.ROOT``).
_ROOT = paths.ROOT
_SOURCE_DIRS = ("jaxlab", "pallas_kernels", "experiments")
_DATA_DIRS = (os.path.join("experiments", "pretrained"), os.path.join("jaxlab", "avatar", "data"))
_PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "chex", "ml-collections",
             "numpy", "scipy", "ott-jax", "brax", "mujoco", "mujoco-mjx")
# Packages whose version can change a number: every method's, then those of the pip extras
# (``experiments.lib.methods.Method.extras``) a method needs.
NUMERIC_PACKAGES = ("jax", "jaxlib", "numpy", "scipy", "flax", "optax")
EXTRA_NUMERIC_PACKAGES = {"ot": ("ott-jax",), "rl": ("brax", "mujoco", "mujoco-mjx"),
                          "vision": ("scikit-learn", "scikit-image", "mlxtend")}
ALL_NUMERIC_PACKAGES = NUMERIC_PACKAGES + tuple(
    p for ps in EXTRA_NUMERIC_PACKAGES.values() for p in ps)
# JAX flags that change the numbers a program computes.
_NUMERIC_FLAGS = ("jax_enable_x64", "jax_default_matmul_precision", "jax_default_prng_impl",
                  "jax_threefry_partitionable", "jax_numpy_dtype_promotion")


def _files_to_hash() -> list[str]:
    out = []
    for top in _SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(package_path(top)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            rel = _relative(dirpath)
            is_data = any(rel == d or rel.startswith(d + os.sep) for d in _DATA_DIRS)
            out += [os.path.join(dirpath, f) for f in sorted(filenames)
                    if is_data or f.endswith(".py")]
    return out



def _relative(path: str) -> str:
    """``path`` relative to a checkout's root (this package's folder named ``experiments``
    whatever it is installed as), so an installed wheel hashes as its checkout does."""
    if path == PACKAGE_DIR or path.startswith(PACKAGE_DIR + os.sep):
        return os.path.normpath(os.path.join("experiments", os.path.relpath(path, PACKAGE_DIR)))
    return os.path.relpath(path, _ROOT)


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """sha1 (12 hex digits) of the result-relevant source files, by relative path and bytes."""
    h = hashlib.sha1()
    for path in _files_to_hash():
        h.update(_relative(path).encode())
        with open(path, "rb") as f:
            h.update(hashlib.sha1(f.read()).digest())
    return h.hexdigest()[:12]


def code_version() -> str:
    """``<jaxlab version>+src.<source hash>``, the code part of every cache key."""
    version = getattr(jaxlab, "__version__", None) or importlib.metadata.version("jaxlab")
    return f"{version}+src.{source_hash()}"


@functools.lru_cache(maxsize=1)
def git_state() -> dict:
    """{"commit": HEAD or None, "dirty": bool or None} of the checkout jaxlab runs from."""
    # a directory in a plain clone, a file in a git worktree or submodule
    if not os.path.exists(os.path.join(_ROOT, ".git")):
        return {"commit": None, "dirty": None}
    try:
        run = functools.partial(subprocess.run, cwd=_ROOT, capture_output=True, text=True,
                                timeout=10, check=True)
        commit = run(["git", "rev-parse", "HEAD"]).stdout.strip()
        dirty = bool(run(["git", "status", "--porcelain", "--", *_SOURCE_DIRS]).stdout.strip())
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def config_dict(config) -> dict:
    """A JSON-ready dict of an ``ml_collections.ConfigDict``, NamedTuple or mapping."""
    if hasattr(config, "to_dict"):
        config = config.to_dict()
    elif hasattr(config, "_asdict"):
        config = config._asdict()
    return json.loads(json.dumps(dict(config), sort_keys=True, default=str))


def _digest(obj) -> str:
    return hashlib.sha1(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12]


def config_hash(config) -> str:
    """sha1 (12 hex digits) of the config alone."""
    return _digest(config_dict(config))


def numeric_settings() -> dict:
    """{flag: value} of the JAX settings that change results (``jax_enable_x64``,
    ``jax_default_matmul_precision``, the PRNG implementation, ...), read now (they may be
    changed at runtime with ``jax.config.update``)."""
    import jax

    out = {}
    for name in _NUMERIC_FLAGS:
        value = getattr(jax.config, name, None)
        value = getattr(value, "value", value)  # enum-valued flags as their string
        out[name] = value if value is None or isinstance(value, bool | int | str) else str(value)
    return out


def method_packages(method: str | None) -> tuple[str, ...]:
    """The numeric packages of ``method`` (a name in ``experiments.lib.methods``): the
    core ones plus its pip extra's; every numeric package for an unknown name or None."""
    if method not in methods.METHODS:
        return ALL_NUMERIC_PACKAGES
    return NUMERIC_PACKAGES + EXTRA_NUMERIC_PACKAGES.get(methods.METHODS[method].extras, ())


@functools.cache
def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=64)
def _tree_hash(folder: str, signature: tuple) -> str:
    del signature  # part of the cache key only: a changed file rehashes
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for f in sorted(filenames):
            if f == locks.LOCK_NAME:
                continue
            path = os.path.join(dirpath, f)
            h.update(os.path.relpath(path, folder).encode() + b"\0")
            with open(path, "rb") as fh:
                h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()[:16]


def weights_hash(path: str) -> str:
    """sha256 (16 hex digits) of every file under the folder ``path`` (resolved like
    ``paths.resolve``, as ``artifacts`` finds weights) by relative name and bytes;
    ``"absent"`` when there is none."""
    folder = paths.resolve(path)
    if not os.path.isdir(folder):
        return "absent"
    folder = os.path.realpath(folder)
    signature = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for f in sorted(filenames):
            if f == locks.LOCK_NAME:
                continue  # a writer's lock file is not part of the weights
            st = os.stat(os.path.join(dirpath, f))
            signature.append((os.path.join(dirpath, f), st.st_size, st.st_mtime_ns, st.st_ino))
    return _tree_hash(folder, tuple(signature))


def _weights(tree, prefix="") -> dict:
    """{dotted field: weights_hash} of every non-empty ``*pretrained_dir`` string field."""
    out = {}
    if isinstance(tree, dict):
        for k, v in tree.items():
            name = f"{prefix}{k}"
            if isinstance(v, str) and str(k).endswith("pretrained_dir") and v:
                out[name] = weights_hash(v)
            else:
                out.update(_weights(v, name + "."))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.update(_weights(v, f"{prefix}{i}."))
    return out


def unit_key(config, packages: tuple[str, ...] | None = None) -> str:
    """Cache key of work done under ``config`` by this code in this environment.

    Hash of the config, the code version, ``numeric_settings()``, the versions of
    ``packages`` (default: every numeric package, ``ALL_NUMERIC_PACKAGES``) and the content
    of every folder named by a ``*pretrained_dir`` field of ``config``.
    """
    cfg = config_dict(config)
    return _digest({"config": cfg, "code": code_version(), "numerics": numeric_settings(),
                    "packages": {p: _version(p) for p in sorted(
                        ALL_NUMERIC_PACKAGES if packages is None else packages)},
                    "weights": _weights(cfg)})


def package_versions() -> dict:
    """{distribution: version or None} for the packages results depend on."""
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        out[name] = _version(name)
    return out


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else ``platform.processor()``)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine() -> dict:
    """Platform, CPU model and count, and the JAX devices (initialises the backend)."""
    import jax

    devices = jax.devices()
    return {"platform": platform.platform(), "machine": platform.machine(),
            "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count(), "backend": jax.default_backend(),
            "device_kind": devices[0].device_kind, "device_count": jax.device_count(),
            "process_count": jax.process_count()}


def environment() -> dict:
    """{"git", "packages", "machine"}: where and with what a result was computed (part of
    ``record``; also the provenance of the one-off check scripts, which have no config)."""
    return {"git": git_state(), "packages": package_versions(), "machine": machine()}


def benchmark(load_before, **fields) -> dict:
    """A benchmark result's provenance: ``fields`` (e.g. the preset and config), the code
    version, the load averages before (``load_before``, ``os.getloadavg()`` taken when the
    timing started) and now, and the environment."""
    return {**fields, "code_version": code_version(), "load_avg_before": list(load_before),
            "load_avg_after": list(os.getloadavg()), **environment()}


def record(config) -> dict:
    """The provenance block written into every ``summary.json``.

    Deterministic for a given (config, code, machine): no timestamps, so an interrupted
    and resumed run writes the same bytes as an uninterrupted one.
    """
    return {"config": config_dict(config), "config_hash": config_hash(config),
            "code_version": code_version(), "unit_key": unit_key(config),
            "numerics": numeric_settings(), **environment()}


def is_current(summary: dict, config) -> bool:
    """Whether ``summary`` was written by this code under ``config`` (else it is stale)."""
    prov = summary.get("provenance") if isinstance(summary, dict) else None
    return bool(prov) and prov.get("unit_key") == unit_key(config)


def load_text(load_avg) -> str:
    """The load averages (1, 5, 15 min) recorded when a run ended, in words."""
    if not load_avg:
        return "load not recorded"
    return ("load average " + " / ".join(f"{x:.1f}" for x in load_avg)
            + " (1 / 5 / 15 min) when the run ended")


def load_range_text(ranges) -> str:
    """The 1-minute load averages recorded along a run, as ``[[lo, hi], ...]`` ranges (e.g.
    one per dataset), in words."""
    ranges = [r for r in (ranges or []) if r]
    if not ranges:
        return "load not recorded"
    lo, hi = min(r[0] for r in ranges), max(r[1] for r in ranges)
    return f"load average (1 min) {lo:.1f} to {hi:.1f} along the run"


def machine_line(machine: dict | None, load_avg=None, *, with_load: bool = True) -> str:
    """The machine by CPU model, cores and load (whatever of it the results recorded):
    one line for REPORT.md, report.html and the docs' evidence pages. ``load_avg``: the
    (1, 5, 15 min) load averages when the run ended, or the load already in words (e.g.
    ``load_range_text``); ``with_load=False`` leaves the load out (REPORT.md's first line:
    each section gives its own)."""
    machine = machine or {}
    cpu = (machine.get("cpu_model")
           or f"{machine.get('machine', 'unknown')} CPU (model not recorded)")
    parts = [f"{cpu}, {machine.get('cpu_count', '?')} cores"]
    if with_load:
        parts.append(load_avg if isinstance(load_avg, str) else load_text(load_avg))
    if "backend" in machine:
        procs = machine.get("process_count", 1)
        parts.append(f"JAX on {machine['backend']} ({machine.get('device_count', '?')} "
                     f"device(s) of kind {machine.get('device_kind', '?')}"
                     + (f", {procs} processes" if procs and procs > 1 else "") + ")")
    return "; ".join(parts)


def code_line(git: dict | None, packages: dict | None, code_version=None) -> str:
    """The code by jaxlab version, git commit and package versions, in one line."""
    git, packages = git or {}, packages or {}
    commit = git.get("commit")
    commit = ("not a git checkout" if not commit
              else commit[:12] + (" (uncommitted changes)" if git.get("dirty") else ""))
    head = f"jaxlab {code_version}, " if code_version else ""
    pk = ", ".join(f"{k} {v}" for k, v in sorted(packages.items()) if v is not None)
    return f"{head}git commit {commit}; packages: {pk}"
