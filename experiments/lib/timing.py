"""Wall-clock timing for benchmarks (never for asserts in tests)."""

import time
from collections.abc import Callable

import jax


def best_time(fn: Callable[[], object], repeats: int = 3, warmup: bool = True) -> float:
    """Best-of-``repeats`` seconds of ``fn()`` (results blocked on), after one warm-up call."""
    if warmup:
        jax.block_until_ready(fn())
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best
