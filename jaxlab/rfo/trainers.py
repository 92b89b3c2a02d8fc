"""One constructor for the three methods of the RFO study (blackjax/optax style).

``make_trainer(task, cfg)`` dispatches on the config type:

* ``train.TrainConfig(policy="flow")``: RFO, the flow policy trained through the Euler
  ODE and the MJX dynamics (optionally chunked, regularised, with a SHAC critic);
* ``train.TrainConfig(policy="gaussian")``: the Gaussian baselines (SHAC with a Gaussian
  policy when ``critic``; critic-free brax-style APG with ``critic=False``,
  ``grad_clip_mode="elementwise"``, ``lr_decay`` < 1);
* ``ppo.PPOConfig``: the PPO baseline.

Each returns an ``Algorithm(init, step)`` with ``init(key) -> State`` (every network and the
first environments drawn from ``key``) and ``step(key, state, do_eval=True) -> (State,
Info)`` (one update; ``do_eval`` false skips the evaluation rollout and reports NaN).
``init`` / ``step`` here are the same functions with the static ``(task, cfg)`` passed
last, and ``run`` / ``scan_steps`` drive a whole run as one ``lax.scan``: update
``u`` uses the key ``fold_in(key, u)``, so a run split into chunks (``scan_steps`` from
``start``) draws exactly the keys of the unsplit run.

Checks: ``make_trainer`` runs the config's ``check_config`` (ValueError naming the field)
and rejects other config types (TypeError), as ``env_steps_per_update`` does;
``scan_steps`` needs positive int ``length`` and ``eval_every``. Nothing is checked inside
compiled code.
"""

import functools
from typing import TypeAlias

import jax

from jaxlab.core import validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Algorithm, PRNGKey
from jaxlab.rfo import envs, ppo, train
from jaxlab.rfo.ppo import PPOConfig, PPOState
from jaxlab.rfo.train import Info, RFOState, TrainConfig

State: TypeAlias = RFOState | PPOState
Config: TypeAlias = TrainConfig | PPOConfig


def make_trainer(task: envs.Task, cfg: Config, *, deterministic_eval: bool = False) -> Algorithm:
    """``Algorithm(init, step)`` of the method ``cfg`` configures (module doc).

    Args:
      task: an ``envs.make_task`` task.
      cfg: ``TrainConfig`` (RFO flow policy or Gaussian APG) or ``PPOConfig``.
      deterministic_eval: each evaluation also runs the policy's mode (the Gaussian's
        mean, the flow from zero base noise, PPO's mean) from the same resets, into
        ``Info.eval_mode_return``; the stochastic ``Info.eval_return`` is unchanged.

    Raises:
      TypeError: ``cfg`` is neither config type.
      ValueError: a field of ``cfg`` is out of range.
    """
    if isinstance(cfg, TrainConfig):
        return train.make_trainer(task, cfg, deterministic_eval=deterministic_eval)
    if isinstance(cfg, PPOConfig):
        return ppo.make_trainer(task, cfg, deterministic_eval=deterministic_eval)
    raise TypeError(f"`cfg` must be a TrainConfig or a PPOConfig, got {type(cfg).__name__}.")


@functools.lru_cache(maxsize=64)
def _cached(task: envs.Task, cfg: Config) -> Algorithm:
    return make_trainer(task, cfg)


def init(key: PRNGKey, task: envs.Task, cfg: Config) -> State:
    """``make_trainer(task, cfg).init(key)``: the state at update 0."""
    key = as_key(key)
    return _cached(task, cfg).init(key)


def step(key: PRNGKey, state: State, task: envs.Task, cfg: Config) -> tuple[State, Info]:
    """``make_trainer(task, cfg).step(key, state)``: one update."""
    key = as_key(key)
    return _cached(task, cfg).step(key, state)


def env_steps_per_update(cfg: Config) -> int:
    """Environment steps one update consumes (evaluation rollouts not counted).

    Raises:
      TypeError: ``cfg`` is neither a ``TrainConfig`` nor a ``PPOConfig``.
    """
    if isinstance(cfg, PPOConfig):
        return ppo.env_steps_per_update(cfg)
    if isinstance(cfg, TrainConfig):
        return train.env_steps_per_update(cfg)
    raise TypeError(f"`cfg` must be a TrainConfig or a PPOConfig, got {type(cfg).__name__}.")


def scan_steps(key: PRNGKey, trainer: Algorithm, state: State, start, length: int,
               eval_every: int = 1):
    """Updates ``start`` .. ``start + length - 1`` (update ``u`` uses ``fold_in(key, u)``).

    Args:
      key: the run's step key.
      trainer: from ``make_trainer``.
      state: the state before update ``start``.
      start: index of the first update (int or traced int32; keep it unbatched under a vmap
        so that skipped evaluations are skipped, not computed and discarded).
      length: number of updates (a static positive int).
      eval_every: evaluate after update ``u`` only when ``(u + 1) % eval_every == 0``
        (a positive int); the other updates report ``eval_return`` NaN and run no
        evaluation rollout. 1 (default) evaluates every update, exactly as before.

    Returns:
      (state after the last update, ``Info`` with a leading [length] axis).
    """
    validation.check_positive_int("length", length)
    validation.check_positive_int("eval_every", eval_every)
    us = start + jax.numpy.arange(length, dtype=jax.numpy.int32)
    if eval_every == 1:
        return jax.lax.scan(lambda s, u: trainer.step(jax.random.fold_in(key, u), s), state, us)
    return jax.lax.scan(lambda s, u: trainer.step(jax.random.fold_in(key, u), s,
                                                  (u + 1) % eval_every == 0), state, us)


def run(key: PRNGKey, trainer: Algorithm, num_updates: int) -> tuple[State, Info]:
    """A whole run: ``init`` from one half of ``key``, ``num_updates`` steps from the other.

    Returns:
      (final state, ``Info`` [num_updates]). Jit it; vmap it over keys for seeds.
    """
    k_init, k_steps = jax.random.split(key)
    return scan_steps(k_steps, trainer, trainer.init(k_init), 0, num_updates)
