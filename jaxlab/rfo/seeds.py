"""Many seeds of one trainer as one program: learning curves and their per-seed metrics.

``train_seeds(keys, task, cfg)`` trains ``cfg``'s trainer from each of ``keys`` as one
vmapped program whose updates are a ``lax.scan`` split into ``chunks``
(``seed_program``: the init and chunk programs, for a caller that drives the chunks
itself, as the study binary does through its resumable units), evaluated after every
``eval_every``-th update (``schedule``). Each key is split as ``trainers.run`` splits it:
one half draws the initial weights and environments, the other the updates.

The ``Curves`` hold every update's returns; a seed's metrics are ``final_return`` (the
mean of the last 10% of its evaluation returns) and ``auc`` (the mean of all of them: the
evaluations are evenly spaced in environment steps and the last one ends training, so this
is the area under the learning curve per environment step). ``Curves.metrics()`` gives
both from one run.

What is ours: the whole module (the paper reports returns over seeds in prose).
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import PRNGKey
from jaxlab.rfo import envs, trainers
from jaxlab.rfo.ppo import PPOConfig
from jaxlab.rfo.train import TrainConfig

__all__ = ["METRICS", "Curves", "SeedProgram", "auc", "final_return", "schedule",
           "seed_program", "train_seeds"]

#: the per-seed metrics of a run, both from its evaluation returns (higher is better)
METRICS = ("final_return", "auc")


def _check_cfg(cfg) -> None:
    if not isinstance(cfg, (TrainConfig, PPOConfig)):
        raise TypeError(f"`cfg` must be a TrainConfig or a PPOConfig, got "
                        f"{type(cfg).__name__}.")


def schedule(num_updates: int, chunks: int = 1, eval_every: int = 1) -> tuple[int, int, int]:
    """(chunks, updates per chunk, evaluation period) of a run of ``num_updates`` updates.

    The chunk count is at most ``num_updates``; the run has ``chunks * per_chunk`` updates
    (``num_updates`` rounded up). The period is the largest divisor of ``per_chunk`` that is
    at most ``eval_every``, so the last update is evaluated and the evaluations are evenly
    spaced.
    """
    validation.check_positive_int("num_updates", num_updates)
    validation.check_positive_int("chunks", chunks)
    validation.check_positive_int("eval_every", eval_every)
    n = min(chunks, num_updates)
    per = -(-num_updates // n)
    return n, per, max(e for e in range(1, min(eval_every, per) + 1) if per % e == 0)


def _eval_returns(eval_return) -> np.ndarray:
    """``eval_return`` as float64 [n, E], E >= 1 (ValueError naming it otherwise)."""
    ev = np.asarray(eval_return, np.float64)
    validation.check_ndim("eval_return", ev, 2)
    validation.check_nonempty("eval_return", ev, axis=1)
    return ev


def final_return(eval_return) -> np.ndarray:
    """[n] per seed: the mean of the last 10% (at least one) of [n, E] evaluation returns.

    Raises:
      ValueError: ``eval_return`` is not [n, E] with E >= 1 (one seed's curve: ``[None]``).
    """
    ev = _eval_returns(eval_return)
    return ev[:, -max(1, ev.shape[1] // 10):].mean(axis=1)


def auc(eval_return) -> np.ndarray:
    """[n] per seed: the mean of [n, E] evaluation returns (the area under the learning
    curve per environment step, the evaluations being evenly spaced).

    Raises:
      ValueError: ``eval_return`` is not [n, E] with E >= 1.
    """
    return _eval_returns(eval_return).mean(axis=1)


class Curves(NamedTuple):
    """The learning curves of a set of seeds (NumPy arrays).

    Attributes:
      env_steps: [U] environment steps after each update.
      eval_env_steps: [E] environment steps at each evaluation (E = U / eval_every).
      eval_return: [n, E] evaluation returns per seed.
      train_return: [n, U] training-rollout returns per seed.
      grad_norm: [n, U] pre-clip policy gradient norms (non-finite: zeroed updates).
      eval_mode_return: [n, E] evaluation returns of each policy's mode (deterministic
        actions, the same resets), or None without ``deterministic_eval``.
    """

    env_steps: np.ndarray
    eval_env_steps: np.ndarray
    eval_return: np.ndarray
    train_return: np.ndarray
    grad_norm: np.ndarray
    eval_mode_return: np.ndarray | None = None

    def metrics(self) -> dict:
        """``{"final_return": [n], "auc": [n]}``: both metrics of ``METRICS`` per seed."""
        return {"final_return": final_return(self.eval_return),
                "auc": auc(self.eval_return)}


class SeedProgram(NamedTuple):
    """The programs of ``train_seeds``, for a caller that drives the chunks itself.

    Attributes:
      init: ``init(keys [n]) -> carry``: each seed's key split as ``trainers.run`` does, the
        states initialised from the first halves.
      chunk: ``chunk(carry, i) -> carry`` (``i`` an int32 scalar): updates
        ``i * per_chunk`` .. ``(i + 1) * per_chunk - 1`` of every seed.
      chunks, per_chunk, eval_every: from ``schedule``.
      steps_per_update: environment steps of one update.
    """

    init: Callable
    chunk: Callable
    chunks: int
    per_chunk: int
    eval_every: int
    steps_per_update: int

    def curves(self, carry, to_host: Callable = jax.device_get) -> Curves:
        """The ``Curves`` of a carry after the last chunk; ``to_host`` brings its [n, U]
        buffers to NumPy (e.g. a multi-host gather)."""
        ev, tr, gn, *mode = to_host(tuple(carry[2:]))
        u = self.chunks * self.per_chunk
        e = self.eval_every
        return Curves(env_steps=self.steps_per_update * np.arange(1, u + 1),
                      eval_env_steps=self.steps_per_update * e * np.arange(1, u // e + 1),
                      eval_return=np.asarray(ev)[:, e - 1::e], train_return=np.asarray(tr),
                      grad_norm=np.asarray(gn),
                      eval_mode_return=np.asarray(mode[0])[:, e - 1::e] if mode else None)


def seed_program(task: envs.Task, cfg, *, chunks: int = 1, eval_every: int = 1,
                 deterministic_eval: bool = False) -> SeedProgram:
    """The init and chunk programs of ``cfg``'s trainer over a batch of seeds.

    Args:
      task: an ``envs.Task``.
      cfg: ``TrainConfig`` or ``PPOConfig``; its ``num_updates`` is rounded up to whole
        chunks (``schedule``).
      chunks: scan chunks.
      eval_every: evaluation period at most (``schedule``).
      deterministic_eval: also evaluate each policy's mode (``trainers.make_trainer``);
        the carry then holds one more [n, U] buffer (``Curves.eval_mode_return``).

    Returns:
      ``SeedProgram`` (pure functions: jit, export or shard them as you like).

    Raises:
      TypeError: ``cfg`` is not a ``TrainConfig`` / ``PPOConfig``.
      ValueError: ``chunks`` or ``eval_every`` is not a positive integer.
    """
    _check_cfg(cfg)
    n_chunks, per_chunk, every = schedule(cfg.num_updates, chunks, eval_every)
    num_updates = n_chunks * per_chunk
    cfg = cfg._replace(num_updates=num_updates)
    trainer = (trainers.make_trainer(task, cfg, deterministic_eval=True) if deterministic_eval
               else trainers.make_trainer(task, cfg))
    fields = ("eval_return", "train_return", "grad_norm") + (
        ("eval_mode_return",) if deterministic_eval else ())

    def init(keys):
        ks = jax.vmap(jax.random.split)(keys)  # [n, 2]: as trainers.run splits each key
        state = jax.vmap(trainer.init)(ks[:, 0])
        buf = jnp.zeros((keys.shape[0], num_updates), jnp.float32)
        return (state, ks[:, 1]) + (buf,) * len(fields)

    def chunk(carry, i):
        st, ks, *bufs = carry
        start = i * per_chunk
        st, info = jax.vmap(lambda k, s: trainers.scan_steps(k, trainer, s, start, per_chunk,
                                                             every))(ks, st)
        bufs = [jax.lax.dynamic_update_slice_in_dim(b, getattr(info, f), start, 1)
                for b, f in zip(bufs, fields, strict=True)]
        return (st, ks, *bufs)

    return SeedProgram(init, chunk, n_chunks, per_chunk, every,
                       trainers.env_steps_per_update(cfg))


def train_seeds(keys: PRNGKey, task: envs.Task, cfg, *, chunks: int = 1,
                eval_every: int = 1, deterministic_eval: bool = False) -> Curves:
    """Trains ``cfg``'s trainer on ``task`` from each of ``keys``.

    Args:
      keys: [n] typed PRNG keys, one per seed (``protocol.item_keys``).
      task: an ``envs.Task``.
      cfg: ``TrainConfig`` or ``PPOConfig``.
      chunks: scan chunks (one compiled chunk program, run ``chunks`` times).
      eval_every: evaluation period at most (``schedule``).
      deterministic_eval: also evaluate each policy's mode (``Curves.eval_mode_return``).

    Returns:
      ``Curves`` of the n seeds.
    """
    keys = jnp.asarray(keys)
    if keys.ndim != 1 or not jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
        raise ValueError(f"`keys` must be [n] typed PRNG keys, got dtype {keys.dtype} and "
                         f"shape {keys.shape}.")
    prog = seed_program(task, cfg, chunks=chunks, eval_every=eval_every,
                        deterministic_eval=deterministic_eval)
    carry = jax.jit(prog.init)(keys)
    chunk = jax.jit(prog.chunk)
    for i in range(prog.chunks):
        carry = chunk(carry, jnp.int32(i))
    return prog.curves(carry)
