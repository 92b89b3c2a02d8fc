"""What produced a result: code version, package versions, machine and config.

Every cached or resumable artefact (orbax checkpoints, finished-unit files, the suite's
per-method summaries) is keyed by ``unit_key(config)``: a hash of the full config AND the
code version, so neither a changed config field nor changed code ever serves stale work.

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

# The folder holding jaxlab/, pallas_kernels/ and experiments/ (a checkout's root, or
# site-packages), found from this file: ``jaxlab.__file__`` is None where a folder named
# jaxlab in the working directory (e.g. the clone itself) shadows the package.
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SOURCE_DIRS = ("jaxlab", "pallas_kernels", "experiments")
_DATA_DIRS = (os.path.join("experiments", "pretrained"), os.path.join("jaxlab", "avatar", "data"))
_PACKAGES = ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "chex", "ml-collections",
             "numpy", "scipy", "ott-jax", "brax", "mujoco", "mujoco-mjx")


def _files_to_hash() -> list[str]:
    out = []
    for top in _SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(_ROOT, top)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            rel = os.path.relpath(dirpath, _ROOT)
            is_data = any(rel == d or rel.startswith(d + os.sep) for d in _DATA_DIRS)
            out += [os.path.join(dirpath, f) for f in sorted(filenames)
                    if is_data or f.endswith(".py")]
    return out


@functools.lru_cache(maxsize=1)
def source_hash() -> str:
    """sha1 (12 hex digits) of the result-relevant source files, by relative path and bytes."""
    h = hashlib.sha1()
    for path in _files_to_hash():
        h.update(os.path.relpath(path, _ROOT).encode())
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


def unit_key(config) -> str:
    """Cache key of work done under ``config`` by this code: hash of (config, code version)."""
    return _digest({"config": config_dict(config), "code": code_version()})


def package_versions() -> dict:
    """{distribution: version or None} for the packages results depend on."""
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
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


def record(config) -> dict:
    """The provenance block written into every ``summary.json``.

    Deterministic for a given (config, code, machine): no timestamps, so an interrupted
    and resumed run writes the same bytes as an uninterrupted one.
    """
    return {"config": config_dict(config), "config_hash": config_hash(config),
            "code_version": code_version(), "unit_key": unit_key(config), **environment()}


def is_current(summary: dict, config) -> bool:
    """Whether ``summary`` was written by this code under ``config`` (else it is stale)."""
    prov = summary.get("provenance") if isinstance(summary, dict) else None
    return bool(prov) and prov.get("unit_key") == unit_key(config)
