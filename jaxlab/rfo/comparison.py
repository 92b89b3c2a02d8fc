"""The RFO study's comparison on any task: every trainer at an equal budget of environment
steps, paired by seed (``compare = protocol.bind(SPEC)``).

The paper (arXiv 2602.03501) compares RFO with its baselines by evaluation returns over
seeds at equal environment steps. ``SPEC`` declares that comparison for
``jaxlab.core.protocol``: the task is the problem, seeds are the paired items, the
study's trainers are the built-in contenders (``contender_config`` builds each from one
``Settings``), and a seed's run gives both metrics, ``final_return`` and ``auc``
(``seeds.Curves.metrics``). The study binary (``experiments/rfo.py``) runs the same
programs (``seeds.seed_program``) on the same item keys and ends with the same
``protocol.analyse``, so it and ``compare`` give the same summary on the same seeds.

What is ours: the whole module (the paper states its comparison in prose: equal
environment steps, returns over seeds).
"""

import inspect
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from jaxlab.core import protocol, validation
from jaxlab.core.protocol import Contender, Metric
from jaxlab.rfo import envs, ppo, seeds, train, trainers
from jaxlab.rfo.ppo import PPOConfig
from jaxlab.rfo.train import TrainConfig

__all__ = ["ABLATIONS", "CONTENDERS", "DEFAULT_CONTENDERS", "METRICS", "SPEC", "Settings",
           "compare", "contender", "contender_config"]

CONTENDERS = ("rfo", "rfo_chunked", "rfo_none", "rfo_stability", "rfo_exploration",
              "shac_gaussian", "apg", "ppo")
#: the paper's comparison: RFO against its baselines
DEFAULT_CONTENDERS = ("rfo", "shac_gaussian", "apg", "ppo")
#: regulariser ablations of the flow contenders: (stability on, exploration on)
ABLATIONS = {"rfo": (True, True), "rfo_chunked": (True, True), "rfo_none": (False, False),
             "rfo_stability": (True, False), "rfo_exploration": (False, True)}
METRICS = seeds.METRICS


class Settings(NamedTuple):
    """The settings every built-in contender is built from (defaults: the ``quick`` study).

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
      eval_every: evaluate after every ``eval_every``-th update at most (``seeds.schedule``).
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
    fields are checked in the configs they make, ``contender``)."""
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


def contender_config(name: str, settings: Settings = DEFAULT_SETTINGS):
    """The config of the built-in contender ``name`` at ``settings``' budget.

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


def _checked(cfg, what: str):
    """``cfg`` after its trainer's own field checks, their ValueError naming ``what``."""
    try:
        (train.check_config if isinstance(cfg, TrainConfig) else ppo.check_config)(cfg)
    except (TypeError, ValueError) as e:
        raise (TypeError if isinstance(e, TypeError) else ValueError)(f"{what}: {e}") from e
    return cfg


def _seed_run(cfg, settings: Settings, what: str):
    """``run(items, task, **fields) -> {metric: [n], "eval_return": [n, E]}``: the seeds of
    ``items`` trained by ``cfg`` with ``fields`` replaced; its signature lists ``cfg``'s
    fields, so the protocol refuses a grid naming another before anything runs."""

    def run(items, problem, **fields):
        cfg_point = _checked(cfg._replace(**fields), f"{what} at grid point {fields}")
        curves = seeds.train_seeds(items.keys, problem, cfg_point, chunks=settings.chunks,
                                   eval_every=settings.eval_every)
        return {**curves.metrics(), "eval_return": curves.eval_return}

    kind = inspect.Parameter
    run.__signature__ = inspect.Signature(
        [kind(n, kind.POSITIONAL_OR_KEYWORD) for n in ("items", "problem")]
        + [kind(f, kind.KEYWORD_ONLY, default=getattr(cfg, f)) for f in cfg._fields])
    return run


def contender(config, settings: Settings = DEFAULT_SETTINGS, *,
              grid: Sequence[Mapping] = ({},)) -> Contender:
    """Your ``TrainConfig`` / ``PPOConfig`` as a contender of ``compare``.

    Args:
      config: the trainer's config; its ``num_updates`` is the budget.
      settings: ``chunks`` and ``eval_every`` of the run (``seeds.schedule``).
      grid: declared points, each a dict of config fields to replace (tuned on the tuning
        seeds), e.g. ``({"lr": 1e-3}, {"lr": 3e-3})``.

    Returns:
      ``Contender(run, grid)``, ``run(items, task, **fields)`` returning each seed's
      ``final_return`` and ``auc`` (and its ``eval_return`` curve as a record).

    Raises:
      TypeError: ``config`` or ``settings`` of the wrong type; ``grid`` one dict rather than
        a sequence of them.
      ValueError: a field of ``config`` out of range; a ``grid`` point naming no field of
        ``config`` or making it out of range.
    """
    if not isinstance(config, (TrainConfig, PPOConfig)):
        raise TypeError(f"`config` must be a TrainConfig or a PPOConfig, got "
                        f"{type(config).__name__}.")
    _check_settings(settings)
    if isinstance(grid, Mapping) or not isinstance(grid, Sequence) or not grid:
        raise TypeError(f"`grid` must be a non-empty sequence of points (dicts of config "
                        f"fields), got {grid!r}.")
    what = f"a {type(config).__name__} contender"
    _checked(config, f"`config` of {what}")
    for p in grid:
        if not isinstance(p, Mapping):
            raise TypeError(f"`grid` points must be dicts of config fields, got {p!r}.")
        bad = sorted(set(p) - set(config._fields))
        if bad:
            raise ValueError(f"`grid` of {what} names {bad}, which are not fields of "
                             f"{type(config).__name__}.")
        _checked(config._replace(**p), f"`grid` point {dict(p)} of {what}")
    return Contender(_seed_run(config, settings, what), tuple(dict(p) for p in grid))


def _builtin(name: str):
    """The factory of the built-in ``name``: its config at the call's settings, checked
    before anything runs."""

    def make(context: protocol.Context) -> Contender:
        cfg, _ = contender_config(name, context.settings)
        what = f"contender {name!r}"
        _checked(cfg, f"`settings` give {what} a bad {type(cfg).__name__}")
        return Contender(_seed_run(cfg, context.settings, what))

    return make


def _as_task(problem, settings) -> envs.Task:
    del settings
    if isinstance(problem, envs.Task):
        return problem
    if isinstance(problem, str):
        validation.check_one_of("problem", problem, envs.task_names())
        return envs.make_task(problem)
    raise TypeError(f"`problem` must be a task name of rfo.task_names() or an rfo.Task, got "
                    f"{type(problem).__name__}.")


SPEC = protocol.Spec(
    name="rfo",
    contenders={name: _builtin(name) for name in CONTENDERS},
    defaults=DEFAULT_CONTENDERS,
    metrics=tuple(Metric(m) for m in METRICS),
    default_metrics=METRICS,
    problem=_as_task,
    settings=Settings,
    check_settings=_check_settings,
    tuning=0,
    seeds=5,
    summary="The RFO study's comparison on any task: every trainer on the same seeds at an "
            "equal budget of environment steps.",
    doc="""The problem is a task: a name of ``rfo.task_names()`` (built in, or yours through
``rfo.register_task``) or an ``rfo.Task``.

* **Items are seeds.** Seed ``i`` of a split trains from ``protocol.item_keys(key, split,
  i)`` (one half of it draws the initial weights and environments, the other the updates,
  as ``rfo.run`` splits a key); every contender trains from the same keys.
* **Contenders.** Built in (``rfo.CONTENDERS``): ``"rfo"``, ``"rfo_chunked"``, the
  regulariser ablations ``"rfo_none"``, ``"rfo_stability"``, ``"rfo_exploration"``,
  ``"shac_gaussian"`` (SHAC with a Gaussian policy), ``"apg"`` (critic-free, brax-style)
  and ``"ppo"``; default RFO, SHAC-Gaussian, APG and PPO. Each is built from ``settings``
  at the same budget of environment steps (``rfo.contender_config``); its grid points are
  fields of its config, e.g. ``protocol.Builtin("rfo", grid=({"lr": 1e-3}, {"lr":
  3e-3}))``. Your ``TrainConfig`` / ``PPOConfig``: ``rfo.contender(config, settings)``;
  your ``protocol.Contender``: ``run(items, task, **params)`` returning
  ``{"final_return": [n], "auc": [n]}``.
* **Metrics** (one run gives both; higher is better): ``"final_return"``, the mean of the
  last 10% of a seed's evaluation returns, and ``"auc"``, the mean of all of them (the
  area under the learning curve per environment step); default both, the first tuned on.
  Each seed's evaluation returns are kept as the record ``"eval_return"`` [n, E].
* **Settings**: ``rfo.Settings`` (budget, sizes, coefficients, chunks, evaluation period).
* **Pairs**: the first contender against each other one; no default goals.""")

compare = protocol.bind(SPEC)
