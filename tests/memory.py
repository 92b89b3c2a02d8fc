"""Resident memory of a test process, and giving it back between tests."""

import gc
import os
import sys

RELEASE_ABOVE_GB = 2.0


def rss_gb() -> float:
    """This process's resident memory in GB (Linux ``/proc``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**30


def release_if_above(limit_gb: float = RELEASE_ABOVE_GB) -> bool:
    """Above ``limit_gb`` resident: drops JAX's in-memory caches of compiled programs,
    collects garbage and trims the C heap. Returns whether it did."""
    if rss_gb() < limit_gb:
        return False
    if "jax" in sys.modules:
        sys.modules["jax"].clear_caches()
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
    return True
