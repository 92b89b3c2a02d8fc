"""The RFO study's protocol on any task: every trainer, every declared pair, paired by seed.

``compare(key, task, *, contenders, tuning, seeds, goals)`` is ``jaxlab.core.protocol.compare``
configured for RFO:

* **Items are seeds.** Seed ``i`` of a split is the key ``protocol.item_keys(key, split, i)``;
  every contender trains from the same seed keys (one half of a key draws the initial
  weights and environments, the other the updates, as ``trainers.run``), so differences are
  paired by seed. Tuning seeds and test seeds come from disjoint key streams.
* **Contenders** are the study's trainers by name (``CONTENDERS``: RFO, its chunked form and
  regulariser ablations, SHAC with a Gaussian policy, critic-free brax-style APG and PPO),
  built from one ``Settings`` at an equal budget of environment steps
  (``contender_config``); any ``TrainConfig`` / ``PPOConfig`` of the user's; or any
  ``protocol.Contender``. A named contender's grid points are fields of its config
  (e.g. ``{"lr": 1e-3}``) tuned on the tuning seeds.
* **Metric**: ``"final_return"``, the mean of the last 10% of a seed's evaluation returns,
  or ``"auc"``, the mean of all its evaluation returns (evaluations are evenly spaced in
  environment steps and the last one ends training, so this is the area under the learning
  curve per environment step). Higher is better.
* **Pairs**: the first contender against each other one (RFO minus each rival by default),
  each with a paired bootstrap CI, per-seed wins and losses, and any declared ``Goal``.

A seed's run is ``train_seeds``: all seeds of a call as one vmapped program whose updates
are a ``lax.scan`` split into ``chunks`` (``seed_program``), evaluated after every
``eval_every``-th update (``schedule``). The study binary (``experiments/rfo.py``) runs the
same programs, chunk by chunk through its resumable units, on the same item keys, and
builds its comparison rows with ``protocol.analyse``: the binary and ``compare`` give the
same summary on the same seeds.

What is ours: the whole module (the paper states its comparison in prose: equal
environment steps, returns over seeds).
"""

from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import protocol, validation
from jaxlab.core.protocol import Contender, Goal, Tuning
from jaxlab.rfo import envs, trainers
from jaxlab.rfo.ppo import PPOConfig
from jaxlab.rfo.train import TrainConfig

__all__ = ["CONTENDERS", "METRICS", "ABLATIONS", "Settings", "Curves", "SeedProgram",
           "contender_config", "contender", "contenders", "schedule", "seed_program",
           "train_seeds", "final_return", "auc", "compare"]

CONTENDERS = ("rfo", "rfo_chunked", "rfo_none", "rfo_stability", "rfo_exploration",
              "shac_gaussian", "apg", "ppo")
#: the paper's comparison: RFO against its baselines
DEFAULT_CONTENDERS = ("rfo", "shac_gaussian", "apg", "ppo")
# regulariser ablations of the flow contenders: (stability on, exploration on)
ABLATIONS = {"rfo": (True, True), "rfo_chunked": (True, True), "rfo_none": (False, False),
             "rfo_stability": (True, False), "rfo_exploration": (False, True)}
METRICS = ("final_return", "auc")


class Settings(NamedTuple):
    """The settings every named contender is built from (defaults: the ``quick`` study).

    Attributes:
      env_steps: budget of environment steps per seed, equal for every contender
        (evaluation rollouts not counted).
      num_envs, horizon, lr, hidden, eval_horizon, episode_length, critic, gamma: shared by
        RFO and SHAC (``TrainConfig``); PPO takes ``num_envs``, ``horizon`` (its rollout
        length), ``hidden``, ``eval_horizon``, ``episode_length`` and ``gamma``.
      chunk, ode_steps, stability_coef, exploration_coef, buffer_size: RFO's flow policy
        (``chunk`` only for ``rfo_chunked``; the coefficients as ``ABLATIONS`` switch them).
      apg_lr, apg_lr_decay, apg_grad_clip: brax-style APG (critic-free, whole
        ``episode_length`` rollouts, element-wise clip).
      ppo_epochs, ppo_minibatches, ppo_lr: PPO.
      chunks: the run's updates are split into this many scan chunks (the binary's resumable
        units); the update count is rounded up to a multiple of it.
      eval_every: evaluate after every ``eval_every``-th update at most (``schedule``).
    """

    env_steps: int = 49_152
    num_envs: int = 32
    horizon: int = 32
    lr: float = 3e-3
    hidden: int = 64
    eval_horizon: int = 128
    episode_length: int = 128
    critic: bool = True
    gamma: float = 0.99
    chunk: int = 4
    ode_steps: int = 4
    stability_coef: float = 0.01
    exploration_coef: float = 0.001
    buffer_size: int = 4096
    apg_lr: float = 3e-3
    apg_lr_decay: float = 0.997
    apg_grad_clip: float = 1.0
    ppo_epochs: int = 4
    ppo_minibatches: int = 4
    ppo_lr: float = 3e-4
    chunks: int = 1
    eval_every: int = 10


#: the default ``Settings`` (the ``quick`` study's)
DEFAULT_SETTINGS = Settings()


def _check_settings(settings) -> None:
    """TypeError unless ``settings`` is a ``Settings``; ValueError naming the first size of
    it that is not a positive integer (the budget arithmetic divides by them; the other
    fields are checked by the configs' own ``check_config``)."""
    if not isinstance(settings, Settings):
        raise TypeError(f"`settings` must be an rfo.Settings, got {type(settings).__name__}.")
    validation.check_fields(settings, {
        name: validation.POSITIVE_INT
        for name in ("env_steps", "num_envs", "horizon", "chunks", "eval_every")},
        prefix="settings")
    if (isinstance(settings.episode_length, bool)
            or not isinstance(settings.episode_length, int | np.integer)
            or settings.episode_length < 0):
        raise ValueError(f"`settings.episode_length` must be an integer >= 0, got "
                         f"{settings.episode_length!r}.")


def _check_cfg(cfg) -> None:
    if not isinstance(cfg, (TrainConfig, PPOConfig)):
        raise TypeError(f"`cfg` must be a TrainConfig or a PPOConfig, got "
                        f"{type(cfg).__name__}.")


def contender_config(name: str, settings: Settings = DEFAULT_SETTINGS):
    """The config of the named contender at ``settings``' budget.

    Args:
      name: one of ``CONTENDERS``.
      settings: the shared ``Settings``.

    Returns:
      (``TrainConfig`` | ``PPOConfig``, environment steps per update); the number of
      updates is ``env_steps // (num_envs * horizon)`` (at least 1), with APG's horizon a
      whole episode.

    Raises:
      ValueError: ``name`` is not a contender, or a size of ``settings`` (``env_steps``,
        ``num_envs``, ``horizon``, ``chunks``, ``eval_every``) is not a positive integer.
      TypeError: ``settings`` is not a ``Settings``.
    """
    validation.check_one_of("name", name, CONTENDERS)
    _check_settings(settings)
    s = settings
    budget = int(s.env_steps)
    num_updates = max(budget // (s.num_envs * s.horizon), 1)
    if name == "ppo":
        cfg = PPOConfig(num_envs=s.num_envs, rollout_len=s.horizon, num_updates=num_updates,
                        epochs=s.ppo_epochs, minibatches=s.ppo_minibatches, lr=s.ppo_lr,
                        hidden=s.hidden, episode_length=s.episode_length,
                        eval_horizon=s.eval_horizon, gamma=s.gamma)
        return cfg, trainers.env_steps_per_update(cfg)
    if name == "apg":
        # brax APG: each update rolls a whole episode out from fresh resets, no critic.
        horizon = s.episode_length or s.horizon
        cfg = TrainConfig(
            policy="gaussian", num_envs=s.num_envs, horizon=horizon,
            num_updates=max(budget // (s.num_envs * horizon), 1), lr=s.apg_lr,
            grad_clip=s.apg_grad_clip, grad_clip_mode="elementwise", lr_decay=s.apg_lr_decay,
            hidden=s.hidden, eval_horizon=s.eval_horizon, episode_length=0, critic=False)
        return cfg, trainers.env_steps_per_update(cfg)
    stab, expl = ABLATIONS.get(name, (False, False))
    cfg = TrainConfig(
        policy="gaussian" if name == "shac_gaussian" else "flow", num_envs=s.num_envs,
        horizon=s.horizon, num_updates=num_updates, lr=s.lr,
        chunk=s.chunk if name == "rfo_chunked" else 1, ode_steps=s.ode_steps, hidden=s.hidden,
        stability_coef=s.stability_coef if stab else 0.0,
        exploration_coef=s.exploration_coef if expl else 0.0,
        buffer_size=s.buffer_size, eval_horizon=s.eval_horizon,
        episode_length=s.episode_length, critic=s.critic, gamma=s.gamma)
    return cfg, trainers.env_steps_per_update(cfg)


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


class Curves(NamedTuple):
    """The learning curves of a set of seeds (NumPy arrays).

    Attributes:
      env_steps: [U] environment steps after each update.
      eval_env_steps: [E] environment steps at each evaluation (E = U / eval_every).
      eval_return: [n, E] evaluation returns per seed.
      train_return: [n, U] training-rollout returns per seed.
      grad_norm: [n, U] pre-clip policy gradient norms (non-finite: zeroed updates).
    """

    env_steps: np.ndarray
    eval_env_steps: np.ndarray
    eval_return: np.ndarray
    train_return: np.ndarray
    grad_norm: np.ndarray


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
        ev, tr, gn = to_host(tuple(carry[2:]))
        u = self.chunks * self.per_chunk
        e = self.eval_every
        return Curves(env_steps=self.steps_per_update * np.arange(1, u + 1),
                      eval_env_steps=self.steps_per_update * e * np.arange(1, u // e + 1),
                      eval_return=np.asarray(ev)[:, e - 1::e], train_return=np.asarray(tr),
                      grad_norm=np.asarray(gn))


def seed_program(task: envs.Task, cfg, *, chunks: int = 1, eval_every: int = 1) -> SeedProgram:
    """The init and chunk programs of ``cfg``'s trainer over a batch of seeds.

    Args:
      task: an ``envs.Task``.
      cfg: ``TrainConfig`` or ``PPOConfig``; its ``num_updates`` is rounded up to whole
        chunks (``schedule``).
      chunks: scan chunks.
      eval_every: evaluation period at most (``schedule``).

    Returns:
      ``SeedProgram`` (pure functions: jit, export or shard them as you like).

    Raises:
      TypeError: ``cfg`` is not a ``TrainConfig`` / ``PPOConfig``.
      ValueError: ``chunks`` or ``eval_every`` is not a positive integer.
    """
    _check_cfg(cfg)
    n_chunks, per_chunk, every = schedule(cfg.num_updates, chunks, eval_every)
    num_updates = n_chunks * per_chunk
    trainer = trainers.make_trainer(task, cfg._replace(num_updates=num_updates))

    def init(keys):
        ks = jax.vmap(jax.random.split)(keys)  # [n, 2]: as trainers.run splits each key
        state = jax.vmap(trainer.init)(ks[:, 0])
        buf = jnp.zeros((keys.shape[0], num_updates), jnp.float32)
        return state, ks[:, 1], buf, buf, buf

    def chunk(carry, i):
        st, ks, ev, tr, gn = carry
        start = i * per_chunk
        st, info = jax.vmap(lambda k, s: trainers.scan_steps(k, trainer, s, start, per_chunk,
                                                             every))(ks, st)
        ev = jax.lax.dynamic_update_slice_in_dim(ev, info.eval_return, start, 1)
        tr = jax.lax.dynamic_update_slice_in_dim(tr, info.train_return, start, 1)
        gn = jax.lax.dynamic_update_slice_in_dim(gn, info.grad_norm, start, 1)
        return st, ks, ev, tr, gn

    return SeedProgram(init, chunk, n_chunks, per_chunk, every,
                       trainers.env_steps_per_update(cfg))


def train_seeds(keys, task: envs.Task, cfg, *, chunks: int = 1, eval_every: int = 1) -> Curves:
    """Trains ``cfg``'s trainer on ``task`` from each of ``keys``.

    Args:
      keys: [n] typed PRNG keys, one per seed (``protocol.item_keys``).
      task: an ``envs.Task``.
      cfg: ``TrainConfig`` or ``PPOConfig``.
      chunks: scan chunks (one compiled chunk program, run ``chunks`` times).
      eval_every: evaluation period at most (``schedule``).

    Returns:
      ``Curves`` of the n seeds.
    """
    keys = jnp.asarray(keys)
    if keys.ndim != 1 or not jnp.issubdtype(keys.dtype, jax.dtypes.prng_key):
        raise ValueError(f"`keys` must be [n] typed PRNG keys, got dtype {keys.dtype} and "
                         f"shape {keys.shape}.")
    prog = seed_program(task, cfg, chunks=chunks, eval_every=eval_every)
    carry = jax.jit(prog.init)(keys)
    chunk = jax.jit(prog.chunk)
    for i in range(prog.chunks):
        carry = chunk(carry, jnp.int32(i))
    return prog.curves(carry)


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


_METRIC_FNS = {"final_return": final_return, "auc": auc}


def _task(problem) -> envs.Task:
    if isinstance(problem, envs.Task):
        return problem
    if isinstance(problem, str):
        validation.check_one_of("problem", problem, envs.task_names())
        return envs.make_task(problem)
    raise TypeError(f"`problem` must be a task name of rfo.task_names() or an rfo.Task, got "
                    f"{type(problem).__name__}.")


def _config_run(cfg, settings: Settings, metric: str, what: str):
    fields = type(cfg)._fields

    def run(items, problem, **params):
        bad = sorted(set(params) - set(fields))
        if bad:
            raise ValueError(f"the grid of {what} sets {bad}, which are not fields of "
                             f"{type(cfg).__name__}.")
        curves = train_seeds(items.keys, _task(problem), cfg._replace(**params),
                             chunks=settings.chunks, eval_every=settings.eval_every)
        if not np.all(np.isfinite(curves.eval_return)):
            raise FloatingPointError(f"{what}: non-finite evaluation returns.")
        return _METRIC_FNS[metric](curves.eval_return)

    return run


def contender(spec, settings: Settings = DEFAULT_SETTINGS, *, grid: Sequence[Mapping] = ({},),
              metric: str = "final_return") -> Contender:
    """A ``protocol.Contender`` that trains ``spec`` on the problem's task per seed.

    Args:
      spec: a name of ``CONTENDERS`` (built from ``settings`` by ``contender_config``) or a
        ``TrainConfig`` / ``PPOConfig`` of your own (its ``num_updates`` is the budget).
      settings: the shared ``Settings`` (``chunks`` and ``eval_every`` apply to configs too).
      grid: declared points, each a dict of config fields to replace (tuned on the tuning
        seeds), e.g. ``({"lr": 1e-3}, {"lr": 3e-3})``.
      metric: one of ``METRICS``.

    Returns:
      ``Contender(run, grid)`` with ``run(items, task, **fields) -> [n]`` per-seed values.

    Raises:
      ValueError: an unknown ``spec`` name or ``metric``, a ``grid`` point naming no config
        field, bad ``settings`` (``contender_config``).
      TypeError: ``grid`` is one dict rather than a sequence of them; ``spec`` or
        ``settings`` of the wrong type.
    """
    validation.check_one_of("metric", metric, METRICS)
    _check_settings(settings)
    if isinstance(grid, Mapping):
        raise TypeError(f"`grid` must be a sequence of points (dicts of config fields), got "
                        f"one dict {dict(grid)!r}: wrap it as ({dict(grid)!r},).")
    if isinstance(spec, str):
        validation.check_one_of("spec", spec, CONTENDERS)
        cfg, _ = contender_config(spec, settings)
        what = f"contender {spec!r}"
    elif isinstance(spec, (TrainConfig, PPOConfig)):
        cfg, what = spec, f"a {type(spec).__name__} contender"
    else:
        raise TypeError(f"`spec` must be a name of {CONTENDERS} or a TrainConfig / PPOConfig, "
                        f"got {type(spec).__name__}.")
    grid = tuple(dict(p) for p in grid)
    for p in grid:
        bad = sorted(set(p) - set(type(cfg)._fields))
        if bad:
            raise ValueError(f"`grid` of {what} names {bad}, which are not fields of "
                             f"{type(cfg).__name__}.")
    return Contender(_config_run(cfg, settings, metric, what), grid or ({},))


def contenders(names: Sequence[str] = DEFAULT_CONTENDERS, settings: Settings = DEFAULT_SETTINGS, *,
               metric: str = "final_return") -> dict:
    """``{name: contender(name, settings, metric=metric)}``: the named contenders with their
    declared (one-point) grids, in order; default: RFO, SHAC (Gaussian), APG, PPO."""
    if isinstance(names, str):
        raise TypeError("`names` must be a sequence of contender names, not one string.")
    for n in names:
        validation.check_one_of("names", n, CONTENDERS)
    return {n: contender(n, settings, metric=metric) for n in names}


def compare(key, problem, *, contenders=DEFAULT_CONTENDERS, tuning: Tuning | int = 0,
            seeds: int = 5, goals: Sequence[Goal] = (), pairs=None,
            settings: Settings = DEFAULT_SETTINGS, metric: str = "final_return",
            level: float = 0.95, resamples: int = 2000, batch: int | None = None,
            progress=True, results_path=None) -> protocol.Comparison:
    """The RFO study's comparison on ``problem`` (module docstring).

    Args:
      key: PRNG key: the seed keys and the bootstrap draws derive from it.
      problem: a task name of ``rfo.task_names()`` (built in, or yours through
        ``register_task``) or an ``rfo.Task``.
      contenders: names of ``CONTENDERS`` (default: RFO, SHAC with a Gaussian policy, APG,
        PPO), or a mapping name -> contender name | ``TrainConfig`` | ``PPOConfig`` |
        ``protocol.Contender`` (whose ``run(items, task, **params)`` gets the ``Task``).
      tuning: ``Tuning(items)`` or the number of tuning seeds (needed only by grids of
        several points).
      seeds: paired test seeds (>= 2).
      goals: declared ``Goal(a, b, margin)`` (margin in return units).
      pairs: declared differences (default: the first contender against each other one).
      settings: ``Settings`` of the named contenders (budget, sizes, schedule).
      metric: ``"final_return"`` or ``"auc"``.
      level: CI level.
      resamples: bootstrap resamples.
      batch: seeds per training call (None: every seed of a phase in one vmapped program).
      progress: True (lines on stderr), False, or ``progress(done, total, description)``.
      results_path: JSON-lines file each call's per-seed values are appended to.

    Returns:
      ``protocol.Comparison`` (``table()``, ``to_dict()``, ``figure()``), metric
      ``metric``, higher is better.

    Raises:
      ValueError / TypeError naming the argument.
    """
    validation.check_one_of("metric", metric, METRICS)
    if not isinstance(settings, Settings):
        raise TypeError(f"`settings` must be an rfo.Settings, got {type(settings).__name__}.")
    task = _task(problem)
    if isinstance(contenders, str):
        raise TypeError("`contenders` must be a sequence of names or a mapping, not one "
                        "string.")
    if not isinstance(contenders, Mapping):
        contenders = {n: n for n in contenders}
    built = {}
    for name, c in contenders.items():
        if isinstance(c, Contender):
            built[name] = c
        elif isinstance(c, str) and c not in CONTENDERS:
            raise ValueError(f"`contenders[{name!r}]` must name one of {CONTENDERS}, got "
                             f"{c!r}.")
        elif isinstance(c, (str, TrainConfig, PPOConfig)):
            built[name] = contender(c, settings, metric=metric)
        else:
            raise TypeError(f"`contenders[{name!r}]` must be a contender name, a TrainConfig "
                            f"/ PPOConfig or a protocol.Contender, got {type(c).__name__}.")
    return protocol.compare(key, task, contenders=built, tuning=tuning, seeds=seeds,
                            goals=goals, pairs=pairs, metric=metric, higher_is_better=True,
                            level=level, resamples=resamples, batch=batch, progress=progress,
                            results_path=results_path)
