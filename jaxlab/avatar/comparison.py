"""The paper's comparison on your own graph pair: AvAtar against its baselines, paired seeds.

``compare(key, task, *, contenders, tuning, seeds, goals, **settings)`` is
``jaxlab.core.protocol.compare`` configured for active alignment:

- **Problem**: your ``task`` (``tasks.AlignmentTask``: ``tasks.graph_pair`` /
  ``task_from_adjacency``; or a whole-graph ``tasks.GraphTask``: ``tasks.graph_task``).
- **Items**: seeds. Item i's key (``protocol.item_keys``) is the key of one
  ``run_active_switch`` run: it draws the held-out test set, the initial anchors and the
  random strategy's scores, so every contender starts item i from the same anchors (paired).
  Tuning seeds and test seeds come from disjoint key streams.
- **Value**: the final-round ``metric`` (default ``"mrr"``, both directions) of the dict
  ``getattr(result, field)`` of each run's ``ActiveResult`` (default ``field="metrics"``,
  the test metrics of the run's protocol; another metrics field of ``ActiveResult`` plugs in
  by its name). Higher is better.
- **Contenders** (default ``CONTENDERS``, the study's: AvAtar against random, entropy and
  information density): names of ``loop.STRATEGIES`` or ``"avatar-<score>"`` (the AvAtar
  strategy with a fixed node score of ``scores.SCORES``), or your own
  ``protocol.Contender`` (``run(items, task, **params) -> [n]`` values). The declared grid
  of ``"avatar"`` is its node score (``default_grid``: every score defined for the task and
  aligner; ``"official"`` is the paper's), tuned on the tuning seeds; the baselines and
  ``"avatar-<score>"`` have nothing to tune.
- **One compile**: every built-in contender of a call runs through one program
  (``run_seeds``: ``run_active_switch`` vmapped over seeds, the strategy a traced index
  into the table of every (strategy, score) the call needs). Its seed axis has one length
  per call (``batch``: the tuning count when a grid is tuned and it is smaller than
  ``seeds``, else ``seeds``); a shorter chunk is padded with copies of its last key and the
  copies' values dropped.
- **Pairs and goals** (``declared_pairs``): each AvAtar contender (``"avatar"`` or
  ``"avatar-*"``) minus each other contender; with no AvAtar contender, the first minus
  each other one. The default goals are the paper's claim on those pairs: AvAtar better,
  the whole 95% CI above 0.

``settings`` are ``run_active_switch``'s keyword arguments (``rounds``, ``budget_frac``,
``init_frac``, ``test_frac``, ``protocol``, ``solver``, ``utility``, ``epsilon``, ...;
its defaults when left out). ``analyse(key, values, ...)`` is the same last step for final
values computed elsewhere (the study binary ``experiments/avatar.py`` runs ``run_seeds``
with ``protocol.item_keys`` and calls it, so its comparison equals ``compare``'s).

What is ours: the whole module (the paper reports means over seeds; the paired test seeds,
the tuning of the score on other seeds and the CIs are this library's protocol).
"""

import functools
import inspect
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import loop, scores
from jaxlab.avatar import tasks as tasks_module
from jaxlab.core import protocol, sharding, validation
from jaxlab.core.keys import as_key

__all__ = ["CONTENDERS", "FIELD", "METRIC", "default_grid", "declared_pairs", "strategy_table",
           "run_seeds", "final_values", "metric_name", "analyse", "builtin_contenders", "compare"]

CONTENDERS = ("avatar", "random", "entropy", "density")
METRIC = "mrr"  # the key of the metrics dict compared (final round)
FIELD = "metrics"  # the ActiveResult field holding that dict

# run_active_switch's settings (everything but the key, task, table and index)
_SETTINGS = tuple(p for p in inspect.signature(loop.run_active_switch).parameters
                  if p not in ("key", "task", "strategies", "strategy_index"))


def _is_builtin(name) -> bool:
    if not isinstance(name, str):
        return False
    strategy, score = loop.parse_strategy(name)
    return strategy in loop.STRATEGIES and score in scores.SCORES


def _is_avatar(name: str) -> bool:
    return name == "avatar" or name.startswith("avatar-")


def _check_builtin(arg: str, name) -> None:
    if not _is_builtin(name):
        known = (*loop.STRATEGIES, *(f"avatar-{s}" for s in scores.SCORES))
        raise ValueError(f"`{arg}` must name a built-in contender, one of {known}, got "
                         f"{name!r}.")


def default_grid(name: str, task=None, solver="ot", utility="entropy") -> tuple[dict, ...]:
    """The declared grid of built-in contender ``name``.

    ``"avatar"``: one point ``{"score": s}`` per node score ``s`` of ``scores.SCORES``
    defined for ``task`` and ``solver`` (``"gain"`` is not defined on a
    ``tasks.GraphTask`` nor for the PARROT-class aligner); ``"avatar-<score>"`` and the
    baselines: ``({},)`` (nothing tuned).

    Args:
      name: a name of ``loop.STRATEGIES`` or ``"avatar-<score>"``.
      task: the task (None: a square ``AlignmentTask``).
      solver: the aligner (``run_active``'s ``solver``).
      utility: the AvAtar utility (``run_active``'s ``utility``).

    Returns:
      A tuple of dicts of the built-in contender's keyword arguments.
    """
    _check_builtin("name", name)
    if name != "avatar":
        return ({},)
    graph = task is not None and tasks_module.is_graph_task(task)
    keep = []
    for s in scores.SCORES:
        if s == "gain" and loop.parrot_settings(solver) is not None:
            continue
        if graph and loop.graph_task_limit("avatar", s, utility, solver) is not None:
            continue
        keep.append({"score": s})
    return tuple(keep)


def declared_pairs(names: Sequence[str], ours: Sequence[str] | None = None
                   ) -> tuple[tuple[str, str], ...]:
    """The declared differences among contenders ``names`` (in order): each AvAtar
    contender minus each other contender; when none is an AvAtar contender, the first
    minus each other one.

    Args:
      names: the contenders' names, in order (at least one).
      ours: the AvAtar contenders among ``names`` (default: those named ``"avatar"`` or
        ``"avatar-*"``).

    Raises:
      ValueError: ``names`` empty, or an entry of ``ours`` not among ``names``.
    """
    if isinstance(names, str):
        raise TypeError(f"`names` must be a sequence of names, not one name ({names!r}).")
    names = list(names)
    if not names:
        raise ValueError("`names` must name at least one contender.")
    if ours is not None:
        missing = [n for n in ours if n not in names]
        if missing:
            raise ValueError(f"`ours` entries must be among `names` {names}, got {missing}.")
    ours = [n for n in names if (_is_avatar(n) if ours is None else n in ours)]
    if not ours:
        return tuple((names[0], o) for o in names[1:])
    return tuple((a, b) for a in ours for b in names if b not in ours)


def strategy_table(names: Sequence[str], task=None, solver="ot",
                   utility="entropy") -> tuple[tuple[str, str], ...]:
    """The (strategy, score) table of ``run_active_switch`` that built-in contenders
    ``names`` need: every point of each one's ``default_grid``, in order, no repeats.

    Raises:
      ValueError: a name of ``names`` that is no built-in contender.
    """
    if isinstance(names, str):
        raise TypeError(f"`names` must be a sequence of names, not one name ({names!r}).")
    table = []
    for name in names:
        _check_builtin("names", name)
        strategy, score = loop.parse_strategy(name)
        for point in default_grid(name, task, solver, utility):
            pair = (strategy, point.get("score", score))
            if pair not in table:
                table.append(pair)
    return tuple(table)


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


def _settings(settings: Mapping) -> tuple:
    unknown = sorted(set(settings) - set(_SETTINGS))
    if unknown:
        raise TypeError(f"unknown settings {unknown}: `settings` are keyword arguments of "
                        f"avatar.run_active_switch, one of {_SETTINGS}.")
    return tuple(sorted((k, _hashable(v)) for k, v in settings.items()))


@functools.lru_cache(maxsize=64)
def _program(table: tuple, settings: tuple):
    kw = dict(settings)
    # The task is an argument (a closed-over constant would be folded by XLA).
    return jax.jit(jax.vmap(lambda task, keys, index: loop.run_active_switch(
        keys, task, table, index, **kw), in_axes=(None, 0, None)))


def run_seeds(keys, task, table, index, **settings) -> loop.ActiveResult:
    """``run_active_switch`` of strategy ``table[index]`` for every key of ``keys``.

    One compiled program per (``table``, ``settings``, number of keys), kept for the
    process: every strategy of ``table`` and every call with those settings reuse it.

    Args:
      keys: [n] typed PRNG keys (one run each; e.g. ``protocol.item_keys``), possibly
        sharded over devices.
      task: an ``AlignmentTask`` or ``tasks.GraphTask`` (an argument of the program).
      table: a tuple of (strategy, score) pairs (``run_active_switch``'s ``strategies``).
      index: [] int, the entry of ``table`` to run.
      **settings: ``run_active_switch``'s keyword arguments (``rounds``, ``protocol``, ...).

    Returns:
      ``ActiveResult`` with a leading [n] axis on every array.

    Raises:
      TypeError naming an unknown setting; ValueError (``run_active_switch``'s checks) on a
      bad table, index, task or setting.
    """
    table = loop.check_strategy_table(table)
    if not isinstance(index, jax.core.Tracer):
        validation.check_int_range("index", index, 0, len(table))
    return _program(table, _settings(settings))(task, keys, jnp.int32(index))


def final_values(result: loop.ActiveResult, metric: str = METRIC,
                 field: str = FIELD) -> np.ndarray:
    """[n] the last round's ``metric`` of ``getattr(result, field)`` for a ``run_seeds``
    result (float64 on the host).

    Raises:
      ValueError naming ``field`` / ``metric`` when the result holds no such dict / key.
    """
    table = getattr(result, field, None)
    if not isinstance(table, Mapping):
        fields = [f for f in result._fields if isinstance(getattr(result, f), Mapping)]
        raise ValueError(f"`field` must name a metrics dict of ActiveResult, one of {fields}, "
                         f"got {field!r}.")
    if metric not in table:
        raise ValueError(f"`metric` must be one of {sorted(table)}, got {metric!r}.")
    return np.asarray(jax.device_get(table[metric]), np.float64)[..., -1]


def _metric_fields() -> list[str]:
    """The fields of ActiveResult that hold a metrics dict."""
    return [f for f, t in loop.ActiveResult.__annotations__.items() if t is dict]


def metric_name(metric: str = METRIC, field: str = FIELD) -> str:
    """The comparison's statistic name: ``"final <metric>"`` (the field when not
    ``"metrics"``).

    Raises:
      ValueError: ``field`` not a metrics field of ``ActiveResult``; TypeError: ``metric``
        not a non-empty str.
    """
    if not isinstance(metric, str) or not metric:
        raise TypeError(f"`metric` must be a metric name (a non-empty str), got {metric!r}.")
    if field not in _metric_fields():
        raise ValueError(f"`field` must name a metrics dict of ActiveResult, one of "
                         f"{_metric_fields()}, got {field!r}.")
    return f"final {metric}" if field == FIELD else f"final {field} {metric}"


def _declared(names, pairs, goals, ours=None):
    pairs = declared_pairs(names, ours) if pairs is None else tuple(map(tuple, pairs))
    goals = tuple(protocol.Goal(a, b, 0.0) for a, b in pairs) if goals is None else goals
    return pairs, goals


def analyse(key, values: Mapping[str, np.ndarray], *, metric: str = METRIC,
            field: str = FIELD, pairs=None, goals=None, level: float = 0.95,
            resamples: int = 2000) -> protocol.Comparison:
    """The comparison of final values already computed on the test seeds (``compare``'s
    last step: ``protocol.analyse`` with this module's pairs, goals and metric name).

    Args:
      key: PRNG key of the bootstrap draws (``compare(key, ...)`` uses
        ``fold_in(key, 2)``).
      values: a dict, contender name to its [n] final values on the test seeds.
      metric, field: the compared value (``final_values``), for the table's name.
      pairs: declared differences (default ``declared_pairs(names)``).
      goals: declared ``protocol.Goal`` objects (default: a better than b by > 0 on each pair).
      level, resamples: the bootstrap's CI level and resamples.

    Returns:
      ``protocol.Comparison``.
    """
    pairs, goals = _declared(list(values), pairs, goals)
    return protocol.analyse(key, values, pairs=pairs, goals=goals,
                            metric=metric_name(metric, field), higher_is_better=True,
                            level=level, resamples=resamples)


def _builtin_contender(name, table, grid, block, mesh_shape, metric, field, settings):
    strategy, score = loop.parse_strategy(name)

    def run(items, task, **params):
        pair = (strategy, params.get("score", score))
        keys = items.keys
        n = keys.shape[0]
        if block is not None and n < block:  # one program: pad to block, drop the copies
            keys = jnp.concatenate([keys, jnp.repeat(keys[-1:], block - n, axis=0)])
        keys = sharding.shard_batch(keys, mesh_shape)
        res = run_seeds(keys, task, table, table.index(pair), **settings)
        return final_values(res, metric, field)[:n]

    return protocol.Contender(run, grid)


def builtin_contenders(names: Sequence[str] = CONTENDERS, task=None, *,
                       block: int | None = None, mesh_shape=(-1,),
                       metric: str = METRIC, field: str = FIELD,
                       **settings) -> dict[str, protocol.Contender]:
    """``protocol.Contender`` objects of built-in contenders ``names`` sharing one program.

    Args:
      names: names of ``loop.STRATEGIES`` or ``"avatar-<score>"``.
      task: the task they will run on (selects ``default_grid``).
      block: the seed axis of the program: shorter calls are padded to it (None: each
        call's own length, one program per length).
      mesh_shape: the seeds are split over the devices of this 1-D mesh
        (``sharding.shard_batch``; None: where they are).
      metric, field: the value each run returns (``final_values``).
      **settings: ``run_active_switch``'s keyword arguments.

    Returns:
      A dict, name to ``protocol.Contender`` with its ``default_grid``.
    """
    _settings(settings)
    solver = settings.get("solver", "ot")
    utility = settings.get("utility", "entropy")
    table = strategy_table(names, task, solver, utility)
    return {n: _builtin_contender(n, table, default_grid(n, task, solver, utility), block,
                                  mesh_shape, metric, field, settings) for n in names}


def _is_task(task) -> bool:
    return isinstance(task, tasks_module.AlignmentTask | tasks_module.GraphTask)


def compare(key, task, *, contenders=CONTENDERS, tuning: protocol.Tuning | int = 4,
            seeds: int = 8, goals: Sequence[protocol.Goal] | None = None, pairs=None,
            metric: str = METRIC, field: str = FIELD, batch: int | None = None,
            mesh_shape=(-1,), level: float = 0.95, resamples: int = 2000, progress=True,
            results_path=None,
            **settings) -> protocol.Comparison:
    """AvAtar against its baselines on ``task``: the protocol of ``jaxlab.core.protocol``
    with seeds as items (this module's docstring).

    Args:
      key: PRNG key: the seeds' keys (tuning and test streams) and the bootstrap draws.
      task: your ``tasks.AlignmentTask`` (e.g. ``tasks.graph_pair(g)``) or
        ``tasks.GraphTask``; its size must fit the budget (``loop.budget_sizes``).
      contenders: a sequence of built-in names (``CONTENDERS`` by default; names of
        ``loop.STRATEGIES`` or ``"avatar-<score>"``), or a dict, display name to a
        built-in name or to your own ``protocol.Contender`` (its ``run(items, task,
        **params)`` returns [len(items.index)] values, higher better).
      tuning: ``protocol.Tuning(n)`` or n, the tuning seeds (>= 1 when a grid has several
        points, e.g. ``"avatar"``'s scores).
      seeds: the paired test seeds (>= 2).
      goals: declared ``protocol.Goal`` objects; None: the paper's claim, each declared pair's
        AvAtar contender better by > 0.
      pairs: declared differences (default ``declared_pairs``).
      metric: the key of the final-round metrics dict compared (``"mrr"``, ``"hits@1"``,
        ``"hits@10"``, ...).
      field: the ``ActiveResult`` field holding that dict (default ``"metrics"``).
      batch: seeds per program call (default: the tuning count when a grid is tuned and
        it is smaller than ``seeds``, else ``seeds``).
      mesh_shape: each call's seeds are split over the devices of this 1-D mesh
        (``sharding.shard_batch``: one device, a plain placement; a count that does not
        divide, unsharded); None leaves them where they are.
      level, resamples: the bootstrap's CI level and resamples.
      progress: True (lines on stderr), False or a callable ``(done, total, description)``.
      results_path: a JSON-lines file each call's per-seed values are appended to.
      **settings: ``run_active_switch``'s keyword arguments (``rounds``, ``budget_frac``,
        ``protocol``, ``solver``, ``utility``, ...).

    Returns:
      ``protocol.Comparison`` (``table()``, ``to_dict()``, ``figure()``): each
      contender's chosen score and final value with its CI, each pair's paired difference
      with its CI and wins / losses / ties over seeds, each goal, compile and run seconds.

    Raises:
      TypeError naming ``task``, ``contenders`` or an unknown setting; ValueError naming
      ``contenders`` (an unknown name), and the protocol's and the loop's checks.
    """
    if not _is_task(task):
        raise TypeError(f"`task` must be an avatar.AlignmentTask or tasks.GraphTask, got "
                        f"{type(task).__name__}.")
    if isinstance(contenders, str):
        raise TypeError("`contenders` must be a sequence of names or a dict, not one name "
                        f"({contenders!r}); write ({contenders!r},).")
    if isinstance(contenders, Mapping):
        entries = dict(contenders)
    else:
        entries = {}
        for n in contenders:
            if not isinstance(n, str):
                raise TypeError(f"`contenders` entries must be names (str), got "
                                f"{type(n).__name__}; pass a dict to add your own.")
            entries[n] = n
    if not entries:
        raise ValueError("`contenders` must not be empty.")
    for shown, c in entries.items():
        if isinstance(c, str):
            _check_builtin(f"contenders[{shown!r}]", c)
        elif not isinstance(c, protocol.Contender):
            raise TypeError(f"`contenders[{shown!r}]` must be a built-in name or a "
                            f"protocol.Contender, got {type(c).__name__}.")
    _settings(settings)
    dicts = _metric_fields()
    if field not in dicts:
        raise ValueError(f"`field` must name a metrics dict of ActiveResult, one of "
                         f"{dicts}, got {field!r}.")
    validation.check_min_count("seeds", seeds, 2, "paired test items")
    n_tune = int(protocol.as_tuning(tuning).items)
    solver, utility = settings.get("solver", "ot"), settings.get("utility", "entropy")
    builtin = tuple(dict.fromkeys(c for c in entries.values() if isinstance(c, str)))
    tuned = any(len(default_grid(c, task, solver, utility)) > 1 for c in builtin) or any(
        len(c.grid) > 1 for c in entries.values() if isinstance(c, protocol.Contender))
    if batch is None:
        batch = min(n_tune, seeds) if tuned and n_tune > 0 else seeds
    built = (builtin_contenders(builtin, task, block=batch, mesh_shape=mesh_shape,
                                metric=metric, field=field, **settings) if builtin else {})
    full = {shown: built[c] if isinstance(c, str) else c for shown, c in entries.items()}
    ours = [shown for shown, c in entries.items()
            if _is_avatar(shown) or (isinstance(c, str) and _is_avatar(c))]
    pairs, goals = _declared(list(full), pairs, goals, ours)
    return protocol.compare(as_key(key), task, contenders=full, tuning=tuning, seeds=seeds,
                            goals=goals, pairs=pairs, metric=metric_name(metric, field),
                            higher_is_better=True, batch=batch, level=level,
                            resamples=resamples, progress=progress,
                            results_path=results_path)
