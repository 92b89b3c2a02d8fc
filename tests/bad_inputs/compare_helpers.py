"""Shared pieces of the ``compare`` misuse batteries: a built-in runner that must never run
and a contender of our own that counts its calls."""

import numpy as np


def never_runs(*args, **kwargs):
    """Stands in for a method's per-item runner: a built-in contender must not run."""
    raise AssertionError("a built-in contender ran before the bad argument was refused")


class Recorder:
    """A contender of our own returning ``value`` per item (or what ``make`` builds)."""

    def __init__(self, value=5.0, make=None):
        self.calls, self.value, self.make = 0, value, make

    def run(self, items, problem):
        self.calls += 1
        if self.make is not None:
            return self.make(items.index.size)
        return np.full(items.index.size, self.value)
