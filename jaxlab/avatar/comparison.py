"""The paper's comparison on your own graph pair: AvAtar against its baselines, paired seeds.

``compare = protocol.bind(SPEC)`` (``jaxlab.core.protocol``): the problem is your task, the
items are seeds, and one run of every contender per seed gives every metric below (the
paper's, the never-queried and the removal-only lines of the same ``ActiveResult``).
``run_seeds`` is the program every built-in contender runs; the study binary
(``experiments/avatar.py``) runs it on ``protocol.item_keys`` and passes its per-seed values
to ``protocol.analyse`` with ``METRICS`` and ``declared_pairs``, so its table is
``compare``'s.

What is ours: the whole module (the paper reports means over seeds; the paired test seeds,
the tuning of the score on other seeds and the CIs are this library's protocol).
"""

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.avatar import loop, scores
from jaxlab.avatar import tasks as tasks_module
from jaxlab.core import protocol, sharding, validation

__all__ = ["CONTENDERS", "METRICS", "DEFAULT_METRICS", "LINES", "Settings", "SPEC",
           "default_grid", "declared_pairs", "run_seeds", "final_values", "compare"]

CONTENDERS = ("avatar", "random", "entropy", "density")
# metric-name prefix -> the ActiveResult field of that line
LINES = {"": "metrics", "never-queried ": "heldout_metrics",
         "removal-only ": "removal_metrics"}
KEYS = ("mrr", "hits@1", "hits@10", "hits@30", "hits@50")  # each line's final-round keys
METRICS = tuple(protocol.Metric(prefix + k, bounds=(0.0, 1.0)) for prefix in LINES
                for k in KEYS)
DEFAULT_METRICS = ("mrr", "never-queried mrr", "removal-only mrr")
PAPER_HELDOUT = 0.2  # Settings.heldout_frac under "paper" when left None (the study's)


class Settings(NamedTuple):
    """``run_active_switch``'s keyword arguments (there), and where the seeds run.

    ``heldout_frac`` None: 0.2 under ``protocol="paper"`` (never-queried nodes, so the
    never-queried line exists), 0 under ``"fixed"`` (its test set is never queried).
    ``mesh_shape``: each call's seeds are split over this 1-D mesh
    (``sharding.shard_batch``); None leaves them where they are.
    """

    epsilon: float = 0.05
    rounds: int = 10
    test_frac: float = 0.5
    init_frac: float = 0.2
    budget_frac: float = 0.2
    utility: Any = "entropy"
    solver: Any = "ot"
    feat_weight: float = 1.0
    anchor_weight: float = 1.0
    sinkhorn_threshold: float = 1e-4
    sinkhorn_max_iterations: int = 10000
    cg_tol: float = 1e-4
    utility_weights: Any = None
    protocol: str = "paper"
    heldout_frac: float | None = None
    mesh_shape: Any = (-1,)


def _hashable(v):
    return tuple(_hashable(x) for x in v) if isinstance(v, list | tuple) else v


def _run_kwargs(settings: Settings) -> tuple:
    """``run_active_switch``'s keyword arguments of ``settings``, sorted and hashable."""
    kw = settings._asdict()
    del kw["mesh_shape"]
    if kw["heldout_frac"] is None:
        kw["heldout_frac"] = PAPER_HELDOUT if kw["protocol"] == "paper" else 0.0
    return tuple(sorted((k, _hashable(v)) for k, v in kw.items()))


def _check_settings(settings: Settings) -> None:
    mesh = settings.mesh_shape
    if mesh is not None and (isinstance(mesh, str) or not isinstance(mesh, Sequence)
                             or len(mesh) != 1 or isinstance(mesh[0], bool)
                             or not isinstance(mesh[0], int | np.integer)):
        raise ValueError(f"`settings.mesh_shape` must be None or a 1-D mesh shape such as "
                         f"(-1,), got {mesh!r}.")


def default_grid(name: str, task=None, solver="ot", utility="entropy") -> tuple[dict, ...]:
    """The declared grid of built-in contender ``name``: for ``"avatar"`` one point
    ``{"score": s}`` per node score of ``scores.SCORES`` defined for ``task`` and ``solver``
    (``"gain"`` not on a ``tasks.GraphTask`` nor for the PARROT-class aligner); for
    ``"avatar-<score>"`` and the baselines ``({},)``.

    Raises:
      ValueError: ``name`` is no built-in contender.
    """
    validation.check_one_of("name", name, tuple(SPEC.contenders))
    if name != "avatar":
        return ({},)
    graph = task is not None and tasks_module.is_graph_task(task)
    return tuple({"score": s} for s in scores.SCORES
                 if not (s == "gain" and loop.parrot_settings(solver) is not None)
                 and not (graph and loop.graph_task_limit("avatar", s, utility, solver)))


def _is_avatar(name: str) -> bool:
    return name == "avatar" or name.startswith("avatar-")


def declared_pairs(names: Sequence[str], ours: Sequence[str] | None = None
                   ) -> tuple[tuple[str, str], ...]:
    """Each AvAtar contender of ``names`` (``ours``; default: those named ``"avatar"`` or
    ``"avatar-*"``) minus each other one; with none, the first minus each other one.

    Raises:
      TypeError: ``names`` is one string; ValueError: ``names`` empty, or an entry of
        ``ours`` not among ``names``.
    """
    if isinstance(names, str):
        raise TypeError(f"`names` must be a sequence of names, not one name ({names!r}).")
    names = list(names)
    if not names:
        raise ValueError("`names` must name at least one contender.")
    missing = [n for n in ours or () if n not in names]
    if missing:
        raise ValueError(f"`ours` entries must be among `names` {names}, got {missing}.")
    ours = [n for n in names if (_is_avatar(n) if ours is None else n in ours)]
    if not ours:
        return tuple((names[0], o) for o in names[1:])
    return tuple((a, b) for a in ours for b in names if b not in ours)


@functools.lru_cache(maxsize=64)
def _program(table: tuple, kwargs: tuple, check: bool = False):
    kw = dict(kwargs)
    # The task is an argument (a closed-over constant would be folded by XLA). Unchecked
    # (``check=False``): no host callback, so the persistent compilation cache keeps the
    # program; ``run_seeds`` checks the concrete result.
    return jax.jit(jax.vmap(lambda task, keys, index: loop.run_active_switch(
        keys, task, table, index, check=check, **kw), in_axes=(None, 0, None)))


def run_seeds(keys: jax.Array, task, table, index, settings: Settings | None = None
              ) -> loop.ActiveResult:
    """``run_active_switch`` of strategy ``table[index]`` for every key of ``keys``.

    One compiled program per (``table``, settings, number of keys), kept for the process.
    The solves are checked on the concrete result (``loop.check_result``: a RuntimeWarning
    when one did not converge), so the compiled program has no host callback and JAX's
    persistent compilation cache can keep it; called under a trace, the program checks
    through a ``jax.debug.callback`` instead.

    Args:
      keys: [n] typed PRNG keys, one run each (e.g. ``protocol.item_keys``); split over the
        devices of ``settings.mesh_shape``.
      task: an ``AlignmentTask`` or ``tasks.GraphTask`` (an argument of the program).
      table: a tuple of (strategy, score) pairs (``run_active_switch``'s ``strategies``).
      index: [] int, the entry of ``table`` to run.
      settings: ``Settings`` (None: its defaults).

    Returns:
      ``ActiveResult`` with a leading [n] axis on every array.
    """
    settings = Settings() if settings is None else settings
    if not isinstance(settings, Settings):
        raise TypeError(f"`settings` must be a comparison.Settings, got "
                        f"{type(settings).__name__}.")
    table = loop.check_strategy_table(table)
    if not isinstance(index, jax.core.Tracer):
        validation.check_int_range("index", index, 0, len(table))
    keys = sharding.shard_batch(keys, settings.mesh_shape)
    traced = any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves((task, keys, index)))
    kwargs = _run_kwargs(settings)
    res = _program(table, kwargs, traced)(task, keys, jnp.int32(index))
    if not traced:
        _check_solves(res, dict(kwargs))
    return res


def _check_solves(res: loop.ActiveResult, kw: dict) -> None:
    """``loop.check_result`` of a concrete ``run_seeds`` result (its flags fetched to the
    host first: every process of a multi-host run calls this at the same point)."""
    fields = ("plan_converged", "plan_error", "cg_converged", "cg_residual")
    flags = sharding.to_host({f: getattr(res, f) for f in fields})
    loop.check_result(res._replace(**flags), loop.plan_epsilon(kw["solver"], kw["epsilon"]),
                      kw["sinkhorn_threshold"], kw["sinkhorn_max_iterations"], kw["cg_tol"],
                      solver=kw["solver"])


def final_values(result: loop.ActiveResult, metrics: Sequence[str] = DEFAULT_METRICS
                 ) -> dict[str, np.ndarray]:
    """Each metric of ``metrics`` (names of ``METRICS``) of a ``run_seeds`` result: [n]
    float64 on the host, the last round's value (the removal-only line has one value per
    run, no round axis).

    Raises:
      ValueError naming ``metrics``: a name not in ``METRICS``.
    """
    out = {}
    for name in metrics:
        prefix = next((p for p in LINES if p and name.startswith(p)), "")
        key = name[len(prefix):]
        if key not in KEYS:
            raise ValueError(f"`metrics` names {name!r}, not one of "
                             f"{tuple(m.name for m in METRICS)}.")
        v = np.asarray(jax.device_get(getattr(result, LINES[prefix])[key]), np.float64)
        out[name] = v if LINES[prefix] == "removal_metrics" else v[..., -1]
    return out


# --- the spec ----------------------------------------------------------------------------

_CALL_TABLES: dict = {}  # id(context) -> (context, the table its built-ins share)


def _call_table(ctx: protocol.Context) -> list:
    """The (strategy, score) table the built-in contenders of one call share (one program):
    each built-in adds its grid's pairs when it is made, before any of them runs."""
    entry = _CALL_TABLES.get(id(ctx))
    if entry is None or entry[0] is not ctx:
        while len(_CALL_TABLES) >= 8:
            del _CALL_TABLES[next(iter(_CALL_TABLES))]
        entry = _CALL_TABLES[id(ctx)] = (ctx, [])
    return entry[1]


def _never_queried(task, settings: Settings) -> int:
    if settings.protocol != "paper":
        return 1  # "fixed": the test set itself
    frac = dict(_run_kwargs(settings))["heldout_frac"]
    return int(round(frac * tasks_module.num_pairs(task)))


def _builtin(name: str):
    strategy, fixed_score = loop.parse_strategy(name)

    def factory(ctx: protocol.Context) -> protocol.Contender:
        task, s = ctx.problem, ctx.settings
        grid = default_grid(name, task, s.solver, s.utility)
        for point in grid:
            score = point.get("score", fixed_score)
            try:
                loop.check_switch(task, ((strategy, score),), **dict(_run_kwargs(s)))
            except ValueError as e:
                raise ValueError(f"`contenders`: {name!r} cannot run here: {e}") from None
        if not grid:
            raise ValueError(f"`contenders`: {name!r} has no node score defined here.")
        chosen = [m.name for m in ctx.metrics]
        foreign = [m for m in chosen if m not in {d.name for d in METRICS}]
        if foreign:
            raise ValueError(f"`metrics`: the built-in contender {name!r} reports AvAtar's "
                             f"metrics only, not {foreign}.")
        if any(m.startswith("never-queried ") for m in chosen) and not _never_queried(task, s):
            raise ValueError("`metrics`: the never-queried line needs never-queried nodes: "
                             "`settings.heldout_frac` > 0 under protocol 'paper' (with "
                             f"{tasks_module.num_pairs(task)} nodes it draws none).")
        table = _call_table(ctx)
        table += [p for p in ((strategy, g.get("score", fixed_score)) for g in grid)
                  if p not in table]

        def values(items, score):
            pair = (strategy, score)
            if pair not in table:  # a grid of another score than the declared ones
                try:
                    loop.check_switch(task, (pair,), **dict(_run_kwargs(s)))
                except ValueError as e:
                    raise ValueError(f"`contenders`: the built-in {name!r} cannot run "
                                     f"score={score!r} here: {e}") from None
                table.append(pair)
            keys, n = items.keys, items.index.size
            if ctx.batch and n < ctx.batch:  # one program: pad, drop the copies
                keys = jnp.concatenate([keys, jnp.repeat(keys[-1:], ctx.batch - n, axis=0)])
            res = run_seeds(keys, task, tuple(table), table.index(pair), s)
            out = {m: v[:n] for m, v in final_values(res, chosen).items()}
            out["mrr by round"] = np.asarray(res.metrics["mrr"])[:n]
            out["picked correct"] = np.asarray(res.picked_correct)[:n]
            return out

        if name == "avatar":
            def run(items, task, *, score):
                del task
                return values(items, score)
        else:
            def run(items, task):
                del task
                return values(items, fixed_score)
        return protocol.Contender(run, grid)

    return factory


def _as_problem(task, settings: Settings):
    if not isinstance(task, tasks_module.AlignmentTask | tasks_module.GraphTask):
        raise TypeError(f"`problem` must be an avatar.AlignmentTask (tasks.graph_pair, "
                        f"tasks.task_from_adjacency) or a tasks.GraphTask, got "
                        f"{type(task).__name__}.")
    try:
        loop.check_switch(task, (("random", "abs"),), **dict(_run_kwargs(settings)))
    except (TypeError, ValueError) as e:  # the loop's messages name `task` or the setting
        where = "`problem`" if str(e).startswith("`task") else "`settings`"
        raise type(e)(f"{where}: {e}") from None
    return task


def _goals(names, metrics):
    """The paper's claim on each declared pair, judged on every metric compared."""
    return tuple(protocol.Goal(a, b, metric=m) for m in metrics
                 for a, b in declared_pairs(names))


SPEC = protocol.Spec(
    name="avatar",
    contenders={n: _builtin(n) for n in (*loop.STRATEGIES,
                                         *(f"avatar-{s}" for s in scores.SCORES))},
    defaults=CONTENDERS,
    metrics=METRICS,
    default_metrics=DEFAULT_METRICS,
    goals=_goals,
    pairs=declared_pairs,
    problem=_as_problem,
    settings=Settings,
    check_settings=_check_settings,
    tuning=4,
    seeds=8,
    batch=lambda ctx: min(ctx.tuning, ctx.seeds) if ctx.tuning else ctx.seeds,
    summary="AvAtar against its baselines on your graph pair: the paper's claim (AvAtar's "
            "queries give a better final MRR) on paired seeds.",
    doc="""**Problem**: your task, a ``tasks.AlignmentTask`` (``tasks.graph_pair``,
``tasks.task_from_adjacency``) or a whole-graph ``tasks.GraphTask`` (``tasks.graph_task``);
its size must fit the budget (``loop.budget_sizes``).

**Items** are seeds: item i's key is one ``run_active_switch`` run (its test set, initial
anchors and random draws), so every contender starts item i from the same anchors.

**Metrics**, all from one run per seed and contender, higher better, in [0, 1]: the final
round's ``"mrr"``, ``"hits@1"``, ``"hits@10"``, ``"hits@30"``, ``"hits@50"`` (both
directions) on the run's test set (under ``protocol="paper"`` the paper's metric: every node
not anchored yet); the same keys prefixed ``"never-queried "`` on nodes drawn before round 0
and never queried (``ActiveResult.heldout_metrics``; under ``"fixed"`` the test set itself);
prefixed ``"removal-only "``, the round-0 plan on the final test set (what the labels give by
removing the queried nodes from the test set alone). Default: ``DEFAULT_METRICS``, the
paper's MRR, the never-queried and the removal-only MRR. Records per seed: ``"mrr by
round"`` [rounds + 1] and ``"picked correct"`` [rounds].

**Contenders**: names of ``loop.STRATEGIES`` or ``"avatar-<score>"`` (a fixed score of
``scores.SCORES``); ``"avatar"``'s grid is its node score (``default_grid``: every score
defined for the task and aligner), tuned on the tuning seeds. Every built-in of a call runs
through one compiled program (``run_seeds``).

**Settings** (``Settings``): ``run_active_switch``'s keyword arguments (``rounds``,
``budget_frac``, ``protocol``, ``solver``, ``utility``, ...; default ``protocol="paper"``
with 20% never-queried nodes) and ``mesh_shape``.

**Pairs and goals** (``declared_pairs``): each AvAtar contender (named ``"avatar"`` or
``"avatar-*"``) minus each other one; the paper's claim on each pair, AvAtar better with the
whole CI above 0.""")

compare = protocol.bind(SPEC)
