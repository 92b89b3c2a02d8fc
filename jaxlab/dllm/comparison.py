"""The POKE-SMC paper's comparison on your own task and denoiser (``jaxlab.core.protocol``).

``compare(key, problem, *, contenders, tuning, seeds, goals)`` runs POKE-SMC against its
baselines the way the paper compares them, on any ``Problem`` (a task, a denoiser and,
for POKE-SMC, a value function):

* **Items are problems.** Item ``i`` of a split is the problem ``task.sample(fold_in(k_i,
  0), 1)`` with ``k_i = protocol.item_keys(key, split, i)``; its decoders draw their
  randomness from ``fold_in(k_i, 1)``. Tuning problems and test problems come from
  disjoint key streams, so no grid point is chosen on a test problem, and every
  contender decodes the same test problems (paired). An item's value (1 right, 0 wrong,
  ``task.verify``) does not depend on how many problems are decoded at once
  (``decode_items`` vmaps the decoder over problems).
* **Contenders** (``CONTENDERS``; the first is compared with each other one):
  ``poke_smc`` (Path-LL SMC twisted by the POKE value, ``path_smc.smc_decode(...,
  value_fn=)``), ``greedy`` (confidence-policy decoding), ``best_of_n`` (N particles of
  the proposal, highest Path LL), ``path_smc`` (the same SMC without the value) and
  ``sr_smc`` (self-rewarding SMC as in its official sampler). Best-of-N, Path-LL SMC and
  POKE-SMC share ``problem.proposal`` and N; SR-SMC keeps its own sampler (tokens drawn at
  its temperature, threshold commits) on the proposal's blocks. Built-in but not run by
  default (``EXTRA_CONTENDERS``): ``greedy_blocks``, greedy (confidence) decoding on the
  proposal's semi-AR blocks, the path of the particle decoders' greedy reference (with
  blocks, the greedy to report beside them; ``greedy`` decodes the answer as one block).
* **Declared grids** (``GRIDS``, tuned on the tuning problems only): best-of-N's position
  temperature; Path-LL SMC's and POKE-SMC's weight scale beta x ESS threshold x output
  selection; SR-SMC's token temperature. A grid of yours may also set (``decoder``) the
  twist scale, the resampler (``"distinct"``), the ``"value"`` / ``"mix"`` selections
  (best-of-N and Path-LL SMC then read ``problem.value_fn`` for the selection only) and
  the ``value`` position policy (``problem.position_value_fn``).
* **Goals** (``default_goals``): POKE-SMC beats each of greedy, best-of-N and SR-SMC by
  more than ``GOAL_MARGIN`` (2 points, the paper's claim) with the whole paired CI above
  it; together: POKE-SMC >= max(greedy, best-of-N, SR-SMC) + 2 points, with no rival
  picked on the test problems.

``fit_value_fn`` trains a POKE head on rollouts of the problem's proposal (the proposal
the particle contenders decode with), and ``train.train(..., greedy_problems=)`` reports
greedy accuracy while a denoiser trains. The study binary (``experiments/dllm.py``)
computes its per-problem values with ``decode_items`` on the same item keys and its
comparison rows with ``protocol.analyse``: one copy of the protocol.

What is ours: the protocol layer (the paper states its comparison in prose); the decoders
are ``path_smc``, ``sr_smc`` and ``decoding``'s.
"""

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import protocol, sharding, validation
from jaxlab.core.keys import as_key
from jaxlab.dllm import decoding, path_smc, poke, sr_smc
from jaxlab.dllm import tasks as tasks_lib

__all__ = ["Proposal", "Problem", "FittedHead", "CONTENDERS", "EXTRA_CONTENDERS", "GRIDS",
           "GOAL_MARGIN",
           "item_problems", "decode_items", "decoder", "contender", "default_contenders",
           "default_goals", "fit_value_fn", "compare"]

CONTENDERS = ("poke_smc", "greedy", "best_of_n", "path_smc", "sr_smc")
EXTRA_CONTENDERS = ("greedy_blocks",)  # built-in, run when named
_BUILTINS = CONTENDERS + EXTRA_CONTENDERS

_SMC_GRID = tuple({"weight_scale": b, "ess_threshold": e, "select": s}
                  for b, e, s in itertools.product((1.0, 4.0), (0.5, 0.9),
                                                   ("path_ll", "weight")))

# The declared grids (experiments/configs/dllm.py's held-out protocol, per contender).
GRIDS = {
    "poke_smc": _SMC_GRID,
    "greedy": ({},),
    "best_of_n": tuple({"position_temperature": t} for t in (0.5, 1.0, 2.0)),
    "path_smc": _SMC_GRID,
    "sr_smc": tuple({"temperature": t} for t in (0.7, 1.0, 1.5)),
    "greedy_blocks": ({},),
}

# The settings each contender's grid may set (keyword arguments of its ``run``).
_SELECT = ("select", "select_mix", "policy", "policy_mix")
_PARAMS = {
    "poke_smc": ("weight_scale", "ess_threshold", "resample_schedule", "twist_scale",
                 "resampler", *_SELECT),
    "greedy": (),
    "best_of_n": ("position_temperature", "temperature", "block_length", *_SELECT),
    "path_smc": ("weight_scale", "ess_threshold", "resample_schedule", "resampler",
                 *_SELECT),
    "sr_smc": ("temperature", "ess_threshold", "threshold", "block_length"),
    "greedy_blocks": (),
}

GOAL_MARGIN = 0.02  # POKE-SMC >= max(greedy, best-of-N, SR-SMC) + 2 points (the paper)


class Proposal(NamedTuple):
    """The particle proposal best-of-N, Path-LL SMC and POKE-SMC share.

    Attributes:
      proposal: ``"path"`` (argmax tokens, the unmasking order drawn by Gumbel-top-k over
        log-confidence / ``position_temperature``) or ``"tokens"`` (every token drawn at
        ``temperature``, the most confident committed).
      temperature: the token temperature (0: argmax).
      position_temperature: the order's temperature under ``"path"``.
      block_length: semi-AR block length (None: the whole answer is one block).
    """

    proposal: str = "path"
    temperature: float = 0.0
    position_temperature: float = 1.0
    block_length: int | None = None


class Problem(NamedTuple):
    """Your problem: a task, its denoiser and (for POKE-SMC) a value function.

    Attributes:
      task: any ``tasks.Task`` (``sample(key, n)`` and ``verify`` jittable).
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      value_fn: the POKE value ``value_fn(hidden [M, L, D], tokens [M, L]) -> [M]``
        (``fit_value_fn``, or ``poke.make_value_fn``); None when POKE-SMC is not compared.
      num_particles: N of every particle contender.
      proposal: the shared ``Proposal``.
      threshold: SR-SMC's Fast-dLLM commit threshold.
      sr_smc_temperature: SR-SMC's token temperature (its grid overrides it).
      greedy_reference: particle 0 of every problem follows greedy's path and survives
        every resampling (best-of-N, Path-LL SMC, POKE-SMC).
      position_value_fn: the value head's per-position predictions
        ``(hidden, tokens) -> [M, A]`` (``poke.make_position_value_fn``) for grids that set
        ``policy="value"``; None otherwise.
    """

    task: Any
    denoise_fn: Callable
    value_fn: Callable | None = None
    num_particles: int = 4
    proposal: Proposal = Proposal()
    threshold: float = 0.9
    sr_smc_temperature: float = 1.0
    greedy_reference: bool = True
    position_value_fn: Callable | None = None


class FittedHead(NamedTuple):
    """A POKE head fitted on rollouts of a proposal (``fit_value_fn``).

    Attributes:
      value_fn: ``value_fn(hidden [M, L, D], tokens [M, L]) -> [M]`` for ``Problem``.
      graphdef, params: the head (``poke.make_value_fn``'s arguments).
      fit: the held-out fit (``poke.evaluate``: ``mse``, ``r2``, ...).
      position_value_fn: the head's per-position predictions for ``Problem``
        (``poke.make_position_value_fn``).
    """

    value_fn: Callable
    graphdef: Any
    params: Any
    fit: dict
    position_value_fn: Callable | None = None


def _check_problem(problem) -> None:
    if not isinstance(problem, Problem):
        raise TypeError(f"`problem` must be a dllm.comparison.Problem, got "
                        f"{type(problem).__name__}.")
    tasks_lib.check_task(problem.task, "problem.task")
    if not callable(problem.denoise_fn):
        raise TypeError("`problem.denoise_fn` must be callable: tokens [M, L] -> (logits, "
                        "hidden).")
    validation.check_positive_int("problem.num_particles", problem.num_particles)
    if not isinstance(problem.proposal, Proposal):
        raise TypeError(f"`problem.proposal` must be a dllm.comparison.Proposal, got "
                        f"{type(problem.proposal).__name__}.")


def item_problems(task, keys) -> tuple[jax.Array, jax.Array]:
    """The problem of each item key: ``task.sample(fold_in(k, 0), 1)`` per key.

    Args:
      task: any ``tasks.Task`` (``sample`` jittable).
      keys: [n] typed PRNG keys (``protocol.item_keys``).

    Returns:
      (prompt [n, task.prompt_len] int32, answer [n, task.answer_len] int32).

    Raises:
      ValueError: ``task`` lacks the ``tasks.Task`` fields (e.g. a task's name:
        ``tasks.make_task(name)`` builds it).
    """
    tasks_lib.check_task(task)
    keys = as_key(keys)
    try:
        return _sampler(task)(keys)
    except TypeError:  # an unhashable task: traced on every call
        return _sampler.__wrapped__(task)(keys)


@functools.lru_cache(maxsize=64)
def _sampler(task):
    def one(k):
        p, a = task.sample(jax.random.fold_in(k, 0), 1)
        return p[0], a[0]

    return jax.jit(jax.vmap(one))


@functools.lru_cache(maxsize=256)
def _vmapped(decode_fn, task):
    verify = task.verify

    def run(keys, prompt):
        out = jax.vmap(lambda k, p: decode_fn(p[None], jax.random.fold_in(k, 1)))(keys,
                                                                                   prompt)
        result = out[0] if isinstance(out, tuple) else out
        ok = verify(prompt, result.answer[:, 0])
        return ok, out

    return jax.jit(run)


def _vmapped_any(decode_fn, task):
    try:
        return _vmapped(decode_fn, task)
    except TypeError:  # an unhashable function or task: a fresh program
        return _vmapped.__wrapped__(decode_fn, task)


def decode_items(decode_fn: Callable, task, keys, *, batch: int | None = None,
                 mesh_shape=None, on_chunk: Callable | None = None):
    """Decodes the problem of every item key and verifies the answer (one value per item).

    The decoder is vmapped over problems (one problem, its own key ``fold_in(k, 1)``, per
    item), so an item's value does not depend on ``batch``; the vmapped program is built
    once per ``(decode_fn, task)``.

    Args:
      decode_fn: ``decode_fn(prompt [1, P], key) -> DecodeResult`` or a tuple whose first
        element is the ``DecodeResult`` (``decoder``'s functions).
      task: any ``tasks.Task``.
      keys: [n] typed item keys (``protocol.item_keys``).
      batch: problems per call (None: all at once).
      mesh_shape: a 1-D mesh the prompts of a call are split over
        (``sharding.shard_batch``; None: where they are).
      on_chunk: called after each call as ``on_chunk(index [b], correct [b])``.

    Returns:
      (correct [n] bool numpy, outputs): ``outputs`` is ``decode_fn``'s output stacked
      over items (a leading [n] axis before its own batch axis of 1), as numpy.
    """
    keys = as_key(keys)
    n = keys.shape[0]
    if batch is not None:
        validation.check_positive_int("batch", batch)
    step = n if not batch else batch
    run = _vmapped_any(decode_fn, task)
    prompt, _ = item_problems(task, keys)
    correct, outs = [], []
    for start in range(0, n, max(step, 1)):
        p = prompt[start:start + step]
        if mesh_shape is not None:
            p = sharding.shard_batch(p, mesh_shape)
        ok, out = sharding.to_host(run(keys[start:start + step], p))
        correct.append(np.asarray(ok, bool))
        outs.append(out)
        if on_chunk is not None:
            on_chunk(np.arange(start, start + ok.shape[0]), correct[-1])
    if not outs:
        raise ValueError("`keys` must hold at least one item key.")
    return np.concatenate(correct), jax.tree.map(lambda *x: np.concatenate(x), *outs)


def decoder(name: str, problem: Problem, **params) -> Callable:
    """The decode function of a built-in contender at a grid point.

    Args:
      name: one of ``CONTENDERS`` or ``EXTRA_CONTENDERS``.
      problem: the ``Problem``.
      **params: settings of the contender's grid (``GRIDS``): ``poke_smc``:
        ``weight_scale``, ``ess_threshold``, ``resample_schedule``, ``twist_scale``,
        ``resampler``, ``select``, ``select_mix``, ``policy``, ``policy_mix``; ``path_smc``:
        the same but ``twist_scale``; ``best_of_n``: ``position_temperature``,
        ``temperature``, ``block_length``, ``select``, ``select_mix``, ``policy``,
        ``policy_mix``; ``sr_smc``: ``temperature``, ``ess_threshold``, ``threshold``,
        ``block_length``. ``select`` ``"value"`` / ``"mix"`` read ``problem.value_fn``
        (for best-of-N and Path-LL SMC, for the selection only: no twist), ``policy``
        ``"value"`` reads ``problem.position_value_fn``.

    Returns:
      ``fn(prompt [B, P], key) -> (DecodeResult [B], nonfinite [] bool)`` (jitted; the flag:
      SMC weights turned non-finite on some step, or an SR-SMC block was left unfinished).
    """
    validation.check_one_of("name", name, _BUILTINS)
    unknown = sorted(set(params) - set(_PARAMS[name]))
    if unknown:
        raise ValueError(f"contender {name!r} takes the settings {_PARAMS[name]}, got "
                         f"{unknown}.")
    t, pr = problem.task, problem.proposal
    kw = dict(gen_length=t.answer_len, mask_id=t.mask_id, vocab_size=t.vocab_size)
    if name in ("greedy", "greedy_blocks"):
        blocks = dict(block_length=pr.block_length) if name == "greedy_blocks" else {}
        fn = functools.partial(decoding.decode, denoise_fn=problem.denoise_fn, **blocks, **kw)
        return jax.jit(lambda prompt, key: (fn(key, prompt=prompt), jnp.bool_(False)))
    if name == "poke_smc" and problem.value_fn is None:
        raise ValueError("`problem.value_fn` is None: POKE-SMC needs a value function "
                         "(dllm.comparison.fit_value_fn, or poke.make_value_fn).")
    block = params.pop("block_length", pr.block_length) or t.answer_len
    n = problem.num_particles
    if name == "sr_smc":
        fn = functools.partial(
            sr_smc.sr_smc_decode, denoise_fn=problem.denoise_fn, num_particles=n,
            threshold=params.pop("threshold", problem.threshold),
            temperature=params.pop("temperature", problem.sr_smc_temperature),
            block_length=block, **params, **kw)
    else:
        select = {k: params.pop(k) for k in _SELECT if k in params}
        if select.get("select") in path_smc.VALUE_SELECTIONS and problem.value_fn is None:
            raise ValueError(f"`problem.value_fn` is None: select={select['select']!r} ranks "
                             "particles by the value head.")
        if select.get("policy") in decoding.HEAD_POLICIES:
            if problem.position_value_fn is None:
                raise ValueError("`problem.position_value_fn` is None: policy='value' ranks "
                                 "positions by the value head (poke.make_position_value_fn).")
            select["position_value_fn"] = problem.position_value_fn
        pkw = dict(num_particles=n, temperature=params.pop("temperature", pr.temperature),
                   block_length=block, proposal=pr.proposal,
                   position_temperature=params.pop("position_temperature",
                                                   pr.position_temperature),
                   greedy_reference=bool(problem.greedy_reference), **select, **kw)
        # The value head for the selection only (no twist) in best-of-N and Path-LL SMC.
        reads_value = select.get("select") in path_smc.VALUE_SELECTIONS
        if name == "best_of_n":
            fn = functools.partial(path_smc.best_of_n, denoise_fn=problem.denoise_fn,
                                   **(dict(value_fn=problem.value_fn) if reads_value else {}),
                                   **pkw)
        else:
            smc = dict(weight_scale=params.pop("weight_scale", 1.0),
                       ess_threshold=params.pop("ess_threshold", 0.5),
                       resample_schedule=params.pop("resample_schedule", "every_step"),
                       **{k: params.pop(k) for k in ("twist_scale", "resampler") if k in params})
            if name == "path_smc" and reads_value:
                smc.update(value_fn=problem.value_fn, twist_scale=0.0)
            else:
                smc.update(value_fn=problem.value_fn if name == "poke_smc" else None)
            if "select" not in pkw:
                smc["select"] = "path_ll"
            fn = functools.partial(path_smc.smc_decode, denoise_fn=problem.denoise_fn,
                                   **pkw, **smc)

    def run(prompt, key):
        result, info = fn(key, prompt=prompt)
        bad = jnp.any(info.nonfinite_weights)
        if hasattr(info, "unfinished"):
            bad = bad | jnp.any(info.unfinished)
        return result, bad

    return jax.jit(run)


@functools.lru_cache(maxsize=256)
def _cached_decoder(name, problem, frozen):
    return decoder(name, problem, **dict(frozen))


def _run_builtin(name: str, batch: int | None, items: protocol.Items, problem: Problem,
                 **params) -> np.ndarray:
    frozen = tuple(sorted(params.items()))
    try:
        fn = _cached_decoder(name, problem, frozen)
    except TypeError:  # unhashable problem fields
        fn = decoder(name, problem, **params)
    correct, (_, bad) = decode_items(fn, problem.task, items.keys, batch=batch)
    if np.any(bad):
        raise FloatingPointError(
            f"contender {name!r} ({params}): SMC log weights became non-finite (or an "
            f"SR-SMC block was left unfinished) on {int(np.sum(bad))} {items.split} "
            "problems; check `weight_scale`, the proposal's temperatures and the value "
            "function.")
    return correct.astype(np.float64)


def contender(name: str, grid: Sequence[Mapping] | None = None, *,
              batch: int | None = None) -> protocol.Contender:
    """A built-in contender (``CONTENDERS``, ``EXTRA_CONTENDERS``) with its declared grid
    or yours.

    Args:
      name: one of ``CONTENDERS`` or ``EXTRA_CONTENDERS``.
      grid: the settings tried on the tuning problems (dicts of ``decoder``'s ``params``);
        None: ``GRIDS[name]``.
      batch: problems per decode call inside a ``run`` (None: all of them).

    Returns:
      ``protocol.Contender`` whose ``run(items, problem, **params)`` returns [n] 0/1
      correctness of the items' problems.
    """
    validation.check_one_of("name", name, _BUILTINS)
    grid = GRIDS[name] if grid is None else tuple(dict(p) for p in grid)
    for p in grid:
        unknown = sorted(set(p) - set(_PARAMS[name]))
        if unknown:
            raise ValueError(f"`grid` of {name!r} may set {_PARAMS[name]}, got {unknown}.")
    return protocol.Contender(functools.partial(_run_builtin, name, batch), grid)


def default_contenders(names: Sequence[str] = CONTENDERS, *,
                       batch: int | None = None) -> dict:
    """``{name: contender(name)}`` for ``names`` (default: all five, POKE-SMC first).

    Raises:
      TypeError / ValueError: ``names`` is one string, or names an unknown contender.
    """
    _check_names(names)
    return {n: contender(n, batch=batch) for n in names}


def default_goals(names: Sequence[str] = CONTENDERS) -> list[protocol.Goal]:
    """POKE-SMC better than each of greedy, best-of-N and SR-SMC (those in ``names``) by
    more than ``GOAL_MARGIN``: the paper's POKE-SMC >= max(greedy, best-of-N, SR-SMC) + 2
    points, each CI above the margin. Empty when ``poke_smc`` is not in ``names`` (names of
    your own contenders are allowed and get no goal).

    Raises:
      TypeError: ``names`` is one string.
    """
    _check_names(names, builtin_only=False)
    if "poke_smc" not in names:
        return []
    return [protocol.Goal("poke_smc", r, GOAL_MARGIN) for r in ("greedy", "best_of_n",
                                                                "sr_smc") if r in names]


def _check_names(names, builtin_only: bool = True) -> None:
    if isinstance(names, str):
        raise TypeError(f"`names` must be a sequence of contender names, got one string "
                        f"{names!r} (write ({names!r},)).")
    for n in names if builtin_only else ():
        validation.check_one_of("names", n, CONTENDERS)


def _contenders(contenders, batch) -> dict:
    if isinstance(contenders, str):
        contenders = (contenders,)
    if isinstance(contenders, Mapping):
        out = {}
        for name, c in contenders.items():
            if c is None:
                if name not in _BUILTINS:
                    raise ValueError(f"`contenders[{name!r}]` is None but {name!r} is not a "
                                     f"built-in contender {_BUILTINS}.")
                c = contender(name, batch=batch)
            out[name] = c
        return out
    out = {}
    for c in contenders:
        if not isinstance(c, str) or c not in _BUILTINS:
            raise ValueError(f"`contenders` entries must be names among {_BUILTINS} (or "
                             f"pass a {{name: protocol.Contender}} mapping), got {c!r}.")
        out[c] = contender(c, batch=batch)
    return out


def compare(key, problem: Problem, *, contenders=CONTENDERS,
            tuning: protocol.Tuning | int = 64, seeds: int = 256, goals=None, pairs=None,
            batch: int | None = None, level: float = 0.95, resamples: int = 1000,
            progress=True, results_path=None) -> protocol.Comparison:
    """POKE-SMC against its baselines on your problem (module docstring;
    ``protocol.compare``).

    Args:
      key: PRNG key: the problems (item keys), the decoders' randomness and the bootstrap
        derive from it.
      problem: a ``Problem``.
      contenders: names among ``CONTENDERS`` and ``EXTRA_CONTENDERS`` (built-ins with their
        declared ``GRIDS``), or a mapping name -> ``protocol.Contender`` (yours;
        ``contender(name, grid)`` for a built-in with another grid; None for a built-in's
        default). The first is compared with each other one.
      tuning: the tuning problems (``protocol.Tuning`` or a count), disjoint from the test
        problems.
      seeds: the number of paired test problems (>= 2).
      goals: ``protocol.Goal`` list; None: ``default_goals`` of the contenders.
      pairs: declared differences (default: the first contender against each other one).
      batch: problems per decode call (None: all of a phase at once).
      level, resamples: the bootstrap CIs.
      progress: True (stderr lines), False, or ``progress(done, total, description)``
        (``experiments.lib.progress.comparison_reporter`` in the binaries).
      results_path: a JSON-lines file each call's per-problem correctness is appended to.

    Returns:
      ``protocol.Comparison`` of the accuracy (higher is better): per-problem 0/1 values,
      the chosen grid points, paired differences with CIs, the goals, compile and run
      seconds apart; ``table()`` prints it.

    Raises:
      ValueError / TypeError naming the argument: ``problem`` not a ``Problem`` or its task
        missing ``Task`` fields, POKE-SMC without ``problem.value_fn``, an unknown
        contender or grid setting, and ``protocol.compare``'s checks.
    """
    _check_problem(problem)
    cs = _contenders(contenders, batch)
    if "poke_smc" in cs and problem.value_fn is None and cs["poke_smc"].run.func is \
            _run_builtin:
        raise ValueError("`problem.value_fn` is None: POKE-SMC needs a value function "
                         "(dllm.comparison.fit_value_fn, or poke.make_value_fn).")
    goals = default_goals(tuple(cs)) if goals is None else goals
    return protocol.compare(key, problem, contenders=cs, tuning=tuning, seeds=seeds,
                            goals=goals, pairs=pairs, metric="accuracy",
                            higher_is_better=True, batch=batch, level=level,
                            resamples=resamples, progress=progress,
                            results_path=results_path)


def fit_value_fn(key, problem: Problem, *, rollouts: int = 4096, hidden: int = 32,
                 steps: int = 1000, batch_size: int = 512, lr: float = 1e-3,
                 num_chunks: int = 10, seed: int = 0) -> FittedHead:
    """Trains a POKE head on rollouts of ``problem.proposal`` (the proposal the particle
    contenders decode with; the head learns the remaining Path LL of that proposal).

    Args:
      key: PRNG key of the rollout prompts and the rollouts (use one of its own, not the
        comparison's).
      problem: a ``Problem`` (its ``value_fn`` is ignored).
      rollouts: R one-problem rollouts (R * answer_len rows); 512 more are held out for
        ``fit``.
      hidden, steps, batch_size, lr, num_chunks, seed: ``poke.fit``'s.

    Returns:
      ``FittedHead`` (``problem._replace(value_fn=head.value_fn)`` compares POKE-SMC;
      ``position_value_fn=head.position_value_fn`` enables ``policy="value"`` grids).
    """
    _check_problem(problem)
    validation.check_positive_int("rollouts", rollouts)
    t, pr = problem.task, problem.proposal
    k_train, k_roll, k_held, k_roll_held = jax.random.split(as_key(key), 4)
    spec = dict(mask_id=t.mask_id, temperature=pr.temperature,
                block_length=pr.block_length or t.answer_len, proposal=pr.proposal,
                position_temperature=pr.position_temperature)

    def collect(k_prompt, k, n):
        prompt, _ = t.sample(k_prompt, n)
        return poke.collect_rollouts(k, problem.denoise_fn, prompt, t.answer_len, **spec)

    graphdef, params, _, _ = poke.fit(collect(k_train, k_roll, rollouts), hidden=hidden,
                                      steps=steps, batch_size=batch_size, lr=lr, seed=seed,
                                      num_chunks=num_chunks)
    fit = poke.evaluate(graphdef, params, collect(k_held, k_roll_held, min(512, rollouts)))
    return FittedHead(poke.make_value_fn(graphdef, params, t.prompt_len, t.mask_id),
                      graphdef, params, fit,
                      poke.make_position_value_fn(graphdef, params, t.prompt_len, t.mask_id))
