"""The POKE-SMC paper's comparison on your own task and denoiser: ``compare`` is
``protocol.bind(SPEC)`` (``jaxlab.core.protocol``), its built-in contenders the decoders.

Items are problems: item ``i`` is ``task.sample(fold_in(k_i, 0), 1)`` with ``k_i =
protocol.item_keys(key, split, i)``, decoded with ``fold_in(k_i, 1)`` (``decode_items``
vmaps the decoder over problems, so a value does not depend on ``batch``). The study
binary (``experiments/dllm.py``) tunes with this ``compare`` and decodes its test problems
on the same item keys.

What is ours: the protocol layer (the paper states its comparison in prose); the decoders
are ``path_smc``, ``sr_smc`` and ``decoding``'s.
"""

import functools
import inspect
import itertools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import protocol, sharding, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import PRNGKey
from jaxlab.dllm import decoding, path_smc, poke, sr_smc
from jaxlab.dllm import tasks as tasks_lib

__all__ = ["Proposal", "Problem", "FittedHead", "CONTENDERS", "EXTRA_CONTENDERS", "GRIDS",
           "PARAMS", "GOAL_MARGIN", "SPEC", "item_problems", "decode_items", "decoder",
           "run_builtin", "default_goals", "fit_value_fn", "compare"]

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

# The settings a grid of each contender may set (keyword arguments of its ``run``).
_SELECT = ("select", "select_mix", "policy", "policy_mix")
_PROPOSAL = ("position_temperature", "temperature", "block_length")
PARAMS = {
    "poke_smc": ("weight_scale", "ess_threshold", "resample_schedule", "twist_scale",
                 "twist_multiple", "resampler", *_PROPOSAL, *_SELECT),
    "greedy": (),
    "best_of_n": (*_PROPOSAL, *_SELECT),
    "path_smc": ("weight_scale", "ess_threshold", "resample_schedule", "resampler",
                 *_PROPOSAL, *_SELECT),
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


def _check_problem(problem, settings=None) -> Problem:
    del settings
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
    return problem


def item_problems(keys: jax.Array, task) -> tuple[jax.Array, jax.Array]:
    """The problem of each item key: ``task.sample(fold_in(k, 0), 1)`` per key.

    Args:
      keys: [n] typed PRNG keys (``protocol.item_keys``).
      task: any ``tasks.Task`` (``sample`` jittable).

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


def _cached(build, *args):
    try:
        return build(*args)
    except TypeError:  # an unhashable function or task: a fresh program
        return build.__wrapped__(*args)


def decode_items(keys: jax.Array, decode_fn: Callable, task, *, batch: int | None = None,
                 mesh_shape=None, on_chunk: Callable | None = None):
    """Decodes the problem of every item key and verifies the answer (one value per item).

    The decoder is vmapped over problems (one problem, its own key ``fold_in(k, 1)``, per
    item), so an item's value does not depend on ``batch``; the vmapped program is built
    once per ``(decode_fn, task)``.

    Args:
      keys: [n] typed item keys (``protocol.item_keys``).
      decode_fn: ``decode_fn(prompt [1, P], key) -> DecodeResult`` or a tuple whose first
        element is the ``DecodeResult`` (``decoder``'s functions).
      task: any ``tasks.Task``.
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
    run = _cached(_vmapped, decode_fn, task)
    prompt, _ = item_problems(keys, task)
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


def _particle_records(state, info, n: int, value: bool) -> dict:
    """[B, ...] per-problem records of a particle run: the final particles' answers, the
    resampling count, the distinct final answers, the minimum ESS and, along each final
    particle's path (``path_smc.ancestry``), L_t (and L_t + V(s_t) when a value is read)."""
    answer_len = state.decode.order.shape[1]
    b = state.log_weights.shape[0]
    same = path_smc.same_paths(state.decode, b, n)
    out = {"particle_answers": state.decode.tokens[:, -answer_len:].reshape(b, n, answer_len),
           "resampling_events": jnp.sum(info.resampled, axis=0).astype(jnp.int32),
           "distinct_paths": jnp.sum(jnp.argmax(same, axis=-1) == jnp.arange(n),
                                     axis=-1).astype(jnp.int32),
           "min_ess": jnp.min(info.ess, axis=0)}
    if hasattr(info, "path_ll"):
        anc = path_smc.ancestry(info.ancestors)  # [S, B, N]
        along = lambda x: jnp.moveaxis(jnp.take_along_axis(x, anc, axis=2), 0, 1)  # noqa: E731
        out.update({f"{f}_trace": getattr(info, f).T for f in (
            "distinct_paths", "twist_increment_var", "path_ll_increment_var",
            "proposal_correction_var")})
        out["path_ll_trace"] = along(info.path_ll)
        if value:
            out["path_ll_plus_value_trace"] = along(info.path_ll + info.value)
    return out


def decoder(name: str, problem: Problem, **params) -> Callable:
    """The decode function of a built-in contender at a grid point.

    Args:
      name: one of ``CONTENDERS`` or ``EXTRA_CONTENDERS``.
      problem: the ``Problem``.
      **params: settings of the contender's grid (``PARAMS[name]``). ``twist_multiple``
        (POKE-SMC) sets the twist scale to that multiple of ``weight_scale``;
        ``block_length`` replaces the proposal's blocks. ``select`` ``"value"`` /
        ``"mix"`` read ``problem.value_fn`` (for best-of-N and Path-LL SMC, for the
        selection only: no twist), ``policy`` ``"value"`` reads
        ``problem.position_value_fn``.

    Returns:
      ``fn(prompt [B, P], key) -> (DecodeResult [B], nonfinite [] bool, records)``
      (jitted; the flag: SMC weights turned non-finite on some step, or an SR-SMC block was
      left unfinished; records: per-problem [B, ...] arrays, empty for greedy).
    """
    validation.check_one_of("name", name, _BUILTINS)
    unknown = sorted(set(params) - set(PARAMS[name]))
    if unknown:
        raise ValueError(f"contender {name!r} takes the settings {PARAMS[name]}, got "
                         f"{unknown}.")
    t, pr = problem.task, problem.proposal
    kw = dict(gen_length=t.answer_len, mask_id=t.mask_id, vocab_size=t.vocab_size)
    if name in ("greedy", "greedy_blocks"):
        blocks = dict(block_length=pr.block_length) if name == "greedy_blocks" else {}
        fn = functools.partial(decoding.decode, denoise_fn=problem.denoise_fn, **blocks, **kw)
        return jax.jit(lambda prompt, key: (fn(key, prompt=prompt), jnp.bool_(False), {}))
    if name == "poke_smc" and problem.value_fn is None:
        raise ValueError("`problem.value_fn` is None: POKE-SMC needs a value function "
                         "(dllm.comparison.fit_value_fn, or poke.make_value_fn).")
    block = params.pop("block_length", pr.block_length) or t.answer_len
    n = problem.num_particles
    if name == "sr_smc":
        run_kw = dict(threshold=params.pop("threshold", problem.threshold),
                      temperature=params.pop("temperature", problem.sr_smc_temperature),
                      block_length=block, **params, **kw)

        def run(prompt, key):
            state, info = sr_smc.run_particles(key, problem.denoise_fn, prompt,
                                               num_particles=n, **run_kw)
            res = sr_smc.best_particle(state)
            res = res._replace(nfe=jnp.sum(info.passes, axis=0) * n)
            bad = jnp.any(info.nonfinite_weights) | jnp.any(info.unfinished)
            return res, bad, _particle_records(state, info, n, False)

        return jax.jit(run)
    select = {k: params.pop(k) for k in _SELECT if k in params}
    reads_value = select.get("select") in path_smc.VALUE_SELECTIONS
    if reads_value and problem.value_fn is None:
        raise ValueError(f"`problem.value_fn` is None: select={select['select']!r} ranks "
                         "particles by the value head.")
    heads = {}
    if select.get("policy") in decoding.HEAD_POLICIES:
        if problem.position_value_fn is None:
            raise ValueError("`problem.position_value_fn` is None: policy='value' ranks "
                             "positions by the value head (poke.make_position_value_fn).")
        heads["position_value_fn"] = problem.position_value_fn
    config = path_smc.SMCConfig(
        block_length=block, proposal=pr.proposal,
        temperature=params.pop("temperature", pr.temperature),
        position_temperature=params.pop("position_temperature", pr.position_temperature),
        greedy_reference=bool(problem.greedy_reference), **select)
    path_smc.check_select(config.select, config.select_mix)
    if name == "best_of_n":  # the value head for the selection only (no twist)
        config = config._replace(resample=False, twist_scale=0.0)
        heads["value_fn"] = problem.value_fn if reads_value else None
    else:
        config = config._replace(**{k: params.pop(k) for k in (
            "weight_scale", "ess_threshold", "resample_schedule", "twist_scale", "resampler")
            if k in params})
        if "twist_multiple" in params:
            config = config._replace(
                twist_scale=params.pop("twist_multiple") * config.weight_scale)
        if name == "path_smc" and reads_value:
            heads["value_fn"] = problem.value_fn
            config = config._replace(twist_scale=0.0)
        else:
            heads["value_fn"] = problem.value_fn if name == "poke_smc" else None
    value = heads["value_fn"] is not None
    steps = t.answer_len

    def run(prompt, key):
        state, info = path_smc.run_particles(key, problem.denoise_fn, prompt, **kw,
                                             num_particles=n, config=config, **heads)
        res = path_smc.best_particle(state, steps, config.select, config.select_mix)
        return res, jnp.any(info.nonfinite_weights), _particle_records(state, info, n, value)

    return jax.jit(run)


@functools.lru_cache(maxsize=256)
def _cached_decoder(name, problem, frozen):
    return decoder(name, problem, **dict(frozen))


@functools.lru_cache(maxsize=64)
def _particle_verifier(task):
    return jax.jit(lambda prompt, answers: task.verify(
        jnp.repeat(prompt, answers.shape[1], axis=0),
        answers.reshape(-1, answers.shape[-1])).reshape(answers.shape[:2]))


def run_builtin(name: str, items: protocol.Items, problem: Problem, **params) -> dict:
    """Per-item accuracy and records of a built-in contender (``SPEC``'s ``run``)."""
    params = {k: v for k, v in params.items() if v is not None}
    try:
        fn = _cached_decoder(name, problem, tuple(sorted(params.items())))
    except TypeError:  # unhashable problem fields
        fn = decoder(name, problem, **params)
    correct, (result, bad, extra) = decode_items(items.keys, fn, problem.task)
    if np.any(bad):
        raise ValueError(
            f"contender {name!r} ({params}): SMC log weights became non-finite (or an "
            f"SR-SMC block was left unfinished) on {int(np.sum(bad))} {items.split} "
            "problems; check `weight_scale`, the proposal's temperatures and the value "
            "function.")
    out = {"accuracy": correct.astype(np.float64), "answer": result.answer[:, 0],
           "path_ll": result.path_ll[:, 0], "nfe": result.nfe[:, 0]}
    extra = {f: v[:, 0] for f, v in extra.items()}
    answers = extra.pop("particle_answers", None)
    if answers is not None:
        prompt, _ = item_problems(items.keys, problem.task)
        right = np.asarray(_cached(_particle_verifier, problem.task)(prompt, answers), bool)
        out.update(particles_correct=right, pass_at_n=right.any(axis=1))
        rows = np.arange(right.shape[0])[:, None]
        for trace, field in (("path_ll_trace", "top_path_ll_correct"),
                             ("path_ll_plus_value_trace", "top_path_ll_plus_value_correct")):
            if trace in extra:  # [n, S]: the top particle by the score at step t is right
                out[field] = right[rows, np.argmax(extra.pop(trace), axis=-1)]
    return {**out, **extra}


def _runner(name: str) -> Callable:
    """``run(items, problem, **params)`` of a built-in, its settings named in its
    signature (the core checks a grid's keys against it)."""
    def run(items, problem, **params):
        return run_builtin(name, items, problem, **params)

    p = inspect.Parameter
    run.__signature__ = inspect.Signature(
        [p("items", p.POSITIONAL_OR_KEYWORD), p("problem", p.POSITIONAL_OR_KEYWORD)]
        + [p(k, p.KEYWORD_ONLY, default=None) for k in PARAMS[name]])
    run.__name__ = run.__qualname__ = f"run_{name}"
    return run


def _builtin(name: str, context: protocol.Context) -> protocol.Contender:
    if name == "poke_smc" and context.problem.value_fn is None:
        raise ValueError("`problem.value_fn` is None: POKE-SMC needs a value function "
                         "(dllm.comparison.fit_value_fn, or poke.make_value_fn).")
    return protocol.Contender(_runner(name), GRIDS[name])


def default_goals(names: Sequence[str] = CONTENDERS) -> list[protocol.Goal]:
    """POKE-SMC better than each of greedy, best-of-N and SR-SMC (those in ``names``) by
    more than ``GOAL_MARGIN``: the paper's POKE-SMC >= max(greedy, best-of-N, SR-SMC) + 2
    points, each CI above the margin. Empty when ``poke_smc`` is not in ``names``.

    Raises:
      TypeError: ``names`` is one string.
    """
    if isinstance(names, str):
        raise TypeError(f"`names` must be a sequence of contender names, got one string "
                        f"{names!r} (write ({names!r},)).")
    if "poke_smc" not in names:
        return []
    return [protocol.Goal("poke_smc", r, GOAL_MARGIN) for r in ("greedy", "best_of_n",
                                                                "sr_smc") if r in names]


SPEC = protocol.Spec(
    name="dllm",
    contenders={n: functools.partial(_builtin, n) for n in _BUILTINS},
    defaults=CONTENDERS,
    metrics=(protocol.Metric("accuracy", higher_is_better=True, bounds=(0.0, 1.0)),),
    goals=lambda names, metrics: default_goals(names),
    problem=_check_problem,
    tuning=64, seeds=256,
    summary="The POKE-SMC paper's comparison on your task and denoiser: POKE-SMC against "
            "greedy, best-of-N, Path-LL SMC and SR-SMC (arXiv 2602.03496).",
    doc="""The problem is a ``dllm.Problem`` (a task, its denoiser, the POKE value for
POKE-SMC, N and the shared proposal). Items are problems: item ``i`` of a split is
``task.sample(fold_in(k_i, 0), 1)``, decoded with ``fold_in(k_i, 1)``; tuning and test
problems come from disjoint key streams and every contender decodes the same test problems.
The metric is ``"accuracy"`` (1 right, 0 wrong, ``task.verify``).

Contenders (the first is compared with each other one): ``poke_smc`` (Path-LL SMC twisted
by the POKE value), ``greedy`` (confidence-policy decoding), ``best_of_n`` (N particles of
the proposal, highest Path LL), ``path_smc`` (the same SMC without the value) and
``sr_smc`` (self-rewarding SMC as in its official sampler, on the proposal's blocks);
``greedy_blocks`` (greedy on the proposal's semi-AR blocks, the particles' reference path)
runs when named. Declared grids (``comparison.GRIDS``): best-of-N's position temperature;
Path-LL SMC's and POKE-SMC's weight scale x ESS threshold x output selection; SR-SMC's token
temperature. ``protocol.Builtin(name, grid)`` sets another grid (or ``protocol.Stages``) of
the settings in ``comparison.PARAMS[name]``.

Records (``Comparison.records``): every built-in keeps each test problem's decoded
``answer``, ``path_ll`` and ``nfe``; the particle decoders also ``particles_correct``
[n, N], ``pass_at_n`` (some particle right), ``resampling_events``, ``distinct_paths``
(distinct final answers), ``min_ess`` and, for best-of-N and the two SMCs, per step the
distinct partial paths, the variance across particles of each weight term and whether the
top particle by L_t (and by L_t + V(s_t) where a value is read) along the final paths is
right (``top_path_ll_correct``, ``top_path_ll_plus_value_correct``).

Goals (``default_goals``): POKE-SMC beats each of greedy, best-of-N and SR-SMC by more than
2 points (``GOAL_MARGIN``, the paper's claim), the whole paired CI above it.""")

compare = protocol.bind(SPEC)


def fit_value_fn(key: PRNGKey, problem: Problem, *, rollouts: int = 4096, hidden: int = 32,
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
