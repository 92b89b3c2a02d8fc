"""Wall-clock timing for benchmarks (never for asserts in tests)."""

import os
import platform
import time
from collections.abc import Callable

import jax
import numpy as np


def best_time(fn: Callable[[], object], repeats: int = 3, warmup: bool = True) -> float:
    """Best-of-``repeats`` seconds of ``fn()`` (results blocked on), after one warm-up call."""
    return best_times_interleaved({"fn": fn}, repeats, warmup)["fn"]


def best_times_interleaved(fns: dict[str, Callable[[], object]], repeats: int = 3,
                           warmup: bool = True) -> dict[str, float]:
    """Best-of-``repeats`` seconds of each ``fns[k]()`` (results blocked on), timed in turn
    (one call of each per round, after one warm-up call of each), so a load change on the
    machine hits every contender alike; for ratios measured side by side."""
    return {k: min(v) for k, v in times_interleaved(fns, repeats, warmup).items()}


def times_interleaved(fns: dict[str, Callable[[], object]], repeats: int = 3,
                      warmup: bool = True) -> dict[str, list[float]]:
    """The ``repeats`` seconds of each ``fns[k]()``, timed in turn as
    ``best_times_interleaved`` does (their minimum is its result): for a best-of-k time
    with its spread (``spread``)."""
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"`repeats` must be a positive int, got {repeats!r}.")
    if warmup:
        for fn in fns.values():
            jax.block_until_ready(fn())
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            times[k].append(time.perf_counter() - t0)
    return times


def spread(times) -> dict[str, float]:
    """Best-of-k summary of repeated timings: {"min", "q25", "q75", "iqr"} seconds
    (quartiles linearly interpolated)."""
    t = np.asarray(times, np.float64)
    if t.ndim != 1 or t.size < 1:
        raise ValueError(f"`times` must be a non-empty list of seconds, got {times!r}.")
    q25, q75 = np.percentile(t, [25, 75])
    return {"min": float(t.min()), "q25": float(q25), "q75": float(q75),
            "iqr": float(q75 - q25)}


def machine_line() -> str:
    """Backend, device count, CPU model, core count and load average (1/5/15 min): the
    line every benchmark prints with its ratios (the machine may be shared)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (f"backend: {jax.default_backend()}, devices: {jax.device_count()}, CPU: {cpu}, "
            f"{os.cpu_count()} cores, load average (1/5/15 min): "
            + " ".join(f"{x:.1f}" for x in os.getloadavg()))
