"""Chunked training loops without side effects beyond logging.

Library trainers (``dllm.train.train``, ``dllm.poke.fit``, ``gepc.train.train``)
run ``carry = chunk_fn(carry, i)`` for ``num_chunks`` chunks through a *chunk runner*.
The default, ``run_chunks``, is a plain loop; the experiment layer passes
``experiments.lib.study.run_resumable`` (orbax checkpoints after every chunk, resume after
a crash, progress bar) with the same signature. The library itself never touches disk.
"""

from collections.abc import Callable
from typing import Protocol

import jax
from absl import logging

from jaxlab.core import validation
from jaxlab.core.types import PyTree

__all__ = ["ChunkRunner", "run_chunks"]


class ChunkRunner(Protocol):
    """``runner(chunk_fn, init_carry, num_chunks, *, desc, unit, units_per_chunk, log_fn)``."""

    def __call__(self, chunk_fn: Callable[[PyTree, int], PyTree], init_carry: PyTree,
                 num_chunks: int, *, desc: str = ..., unit: str = ...,
                 units_per_chunk: int = ...,
                 log_fn: Callable[[int, PyTree], str] | None = ...) -> PyTree: ...


def run_chunks(chunk_fn: Callable[[PyTree, int], PyTree], init_carry: PyTree,
               num_chunks: int, *, desc: str = "run", unit: str = "chunk",
               units_per_chunk: int = 1,
               log_fn: Callable[[int, PyTree], str] | None = None) -> PyTree:
    """Runs ``carry = chunk_fn(carry, i)`` for i in [0, num_chunks); logs each chunk.

    Args:
      chunk_fn: pure (usually jitted) function of the carry and the chunk index.
      init_carry: carry before chunk 0.
      num_chunks: number of chunks (positive int).
      desc: label of the log lines.
      unit: what one chunk counts (for the log line).
      units_per_chunk: how many ``unit`` one chunk performs.
      log_fn: optional ``(i, carry) -> str`` appended to the log line.

    Returns:
      The carry after the last chunk.
    """
    validation.check_positive_int("num_chunks", num_chunks)
    carry = init_carry
    for i in range(num_chunks):
        carry = jax.block_until_ready(chunk_fn(carry, i))
        logging.info("%s: chunk %d/%d (%d %s)%s", desc, i + 1, num_chunks,
                     (i + 1) * units_per_chunk, unit,
                     "" if log_fn is None else " " + log_fn(i, carry))
    return carry
