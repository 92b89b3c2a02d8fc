"""Wall-clock timing for benchmarks (never for asserts in tests)."""

import os
import platform
import time
from collections.abc import Callable

import jax


def best_time(fn: Callable[[], object], repeats: int = 3, warmup: bool = True) -> float:
    """Best-of-``repeats`` seconds of ``fn()`` (results blocked on), after one warm-up call."""
    return best_times_interleaved({"fn": fn}, repeats, warmup)["fn"]


def best_times_interleaved(fns: dict[str, Callable[[], object]], repeats: int = 3,
                           warmup: bool = True) -> dict[str, float]:
    """Best-of-``repeats`` seconds of each ``fns[k]()`` (results blocked on), timed in turn
    (one call of each per round, after one warm-up call of each), so a load change on the
    machine hits every contender alike; for ratios measured side by side."""
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"`repeats` must be a positive int, got {repeats!r}.")
    if warmup:
        for fn in fns.values():
            jax.block_until_ready(fn())
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


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
