"""POKE-SMC decoding study: every decoder on every task (accuracy vs NFE, Path LL).

  python -m experiments.dllm --config=experiments/configs/dllm.py:quick --workdir=results/dllm

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. Units: one per task (every decoder of ``decoders`` on
``config.num_problems`` held-out problems, and the POKE head's held-out fit; keyed by the
config without ``tasks``, ``throughput_particles`` and ``sale``, so adding a task keeps
the others);
``sale`` (greedy decoding with SALE attention in the denoiser, when ``config.sale.task`` is
a task). What N particles cost against N greedy decodes batched the same way is timed by
the benchmark ``experiments/bench_poke.py``, not by a unit. The models come from
``experiments/dllm_models.py`` (shipped, else trained in the workdir by the first unit that
needs them) and are loaded once per run.

**Protocol (declared here before any run).**

* Problems (``jaxlab.dllm.comparison``'s items): with ``key = comparison_key(config)``
  (``key(seed + 7_777)``), validation problem i is ``comparison.item_problems`` of
  ``protocol.item_keys(key, "tuning", i)`` (i < ``config.protocol.validation_problems``),
  test problem i that of ``protocol.item_keys(key, "test", i)`` (i < ``config.num_problems``):
  disjoint key streams (the training data come from the training seed's keys). Every
  decoder decodes problem i with its item's key (``comparison.decode_items``), so a
  problem's result does not depend on ``eval_batch``. Tuning reads only validation problems.
* Particle decoders: best-of-N, Path-LL SMC and POKE-SMC share N and the proposal
  (``config.proposal``; ``"path"``: argmax tokens, the unmasking order drawn by
  Gumbel-top-k over log-confidence / ``position_temperature``, so particles differ in
  their order, not in tempered tokens) and, with ``config.greedy_reference``, particle 0
  of every problem is greedy's (confidence) path, never replaced at resampling, so each of
  them holds greedy's answer among its candidates. SR-SMC keeps its official sampler
  (tokens drawn at ``sr_smc_temperature``, Fast-dLLM threshold commits at
  ``config.threshold``, block-end resampling) on the same semi-AR blocks; its NFE is at
  most the others' (both conventions reported). Blocks (``config.particle_blocks``):
  "one" (the whole answer: the order is free), "coarse" (``decoding.coarse_block``, at
  most four blocks of >= 2 tokens), "semi_ar" (the ``semi_ar`` decoder's blocks).
* Tuning (validation only; each stage's argmax frozen before the next, ties to the
  first entry; a grid with fewer than two entries keeps the config's value; every grid
  run at N in ``protocol.tune_particles``; each phase is ``jaxlab.dllm.compare`` of the
  built-in contenders with ``tuning_contenders``' ``protocol.Stages``, the validation
  problems its tuning items, so the binary's tuning is ``compare``'s; the per-problem
  values go to ``<workdir>/tuning/dllm_<task>.jsonl``):
  1. the proposal: blocks in ``protocol.particle_blocks`` x position temperature in
     ``protocol.position_temperatures`` (``"tokens"``: the token temperature in
     ``protocol.temperatures``), by the mean validation accuracy of best-of-N and Path-LL
     SMC;
  2. SR-SMC's token temperature in ``protocol.temperatures``;
  3. the POKE head: the shipped head trained on the chosen proposal, else one trained now
     on rollouts of it (``dllm_models``), with its held-out fit;
  4. for Path-LL SMC and POKE-SMC separately: beta in ``protocol.weight_scales`` x the ESS
     threshold in ``protocol.ess_thresholds`` x the schedule in ``protocol.schedules``;
     then one mechanism at a time: the resampler in ``protocol.resamplers`` (multinomial,
     or ``distinct``: every distinct partial answer keeps a slot); for POKE-SMC the twist
     scale beta_V in ``protocol.twist_scales`` (multiples of the chosen beta) and the
     unmasking policy in ``protocol.policies`` (confidence, or ``value``: the head's
     per-position values choose the positions); last the output selection in
     ``protocol.selections`` (highest Path LL, or highest final weight) plus, for POKE-SMC,
     ``protocol.value_selections`` (the value estimate over the path, or its ``mix`` with
     Path LL at each weight in ``protocol.select_mixes``).
  The quick presets tune nothing: the config's values (path proposal, one block,
  position temperature 1, argmax tokens, beta 1, ESS < N/2 at every step, Path-LL
  selection; SR-SMC at T = 1).
* Preconditions (test problems, per task and N, before reading any comparison): greedy
  (confidence) accuracy, pass@N and best-of-N of N independent particles at T, the share of
  problems whose minimum ESS under Path-LL SMC falls below N/2, and within-problem ranking
  accuracy at ``protocol.rank_fractions`` of the path on mixed problems (some particles
  right, some wrong): the top particle by random choice (expected), by Path LL so far, by
  Path LL + POKE value. A (task, N) enters the headline averages only if pass@N - best-of-N
  >= ``protocol.min_headroom`` (0.10) and greedy < ``protocol.max_greedy`` (0.9); the others
  are "ceiling" rows.
* Selectors apart from SMC: best-of-N is also run with POKE-SMC's value rules
  (``config.best_of_selections``: rows ``best_of_<N>_value`` and ``best_of_<N>_mix`` at
  POKE-SMC's tuned mix weight), the head read for the final pick only, so what SMC adds is
  measured apart from what the selector adds. With blocks (``particle_blocks`` not
  "one"), greedy under the same blocks (``greedy_blocks``, the path the reference particle
  follows) is reported and is a rival too.
* Per-problem accounting (every particle decoder against the greedy its reference
  follows): problems greedy gets right and the decoder wrong, and the reverse; the
  selection loss pass@N - accuracy. Weight diagnostics per SMC run: distinct partial paths
  after each resampling, the variance across particles of each term of the incremental
  log weight (twist, Path-LL increment) and of the proposal correction the weights do not
  hold; the preconditions add the value's ranking quality at every decoding step.
* Declared comparisons (test problems, paired bootstrap CIs of the accuracy difference,
  ``protocol.analyse`` with the bootstrap key ``fold_in(key, 2)``, as
  ``jaxlab.dllm.compare``): POKE-SMC(N) - SR-SMC(N), POKE-SMC(N) - best-of-N,
  POKE-SMC(N) - Path-LL SMC(N) and POKE-SMC(N) - greedy (confidence), for every N in
  ``config.particles`` (the summary's ``comparison``; ``declared`` reads it). "POKE-SMC minus
  the best of all other decoders on the test set" is kept only as a separately labelled
  post-hoc row (the rival is selected on the test problems, a bias against POKE-SMC).
* Against the paper (N >= 4, reported beside the table): each particle decoder minus
  greedy, and POKE-SMC minus max(greedy, best-of-N, SR-SMC), which the paper reports at +2
  points, with its paired CI, on every task, marked where it has no headroom
  (pass@N - best-of-N < ``protocol.min_headroom``). The goals (``_goals``): POKE-SMC >=
  the best on the test problems of greedy (also under the blocks), best-of-N under every
  selector and SR-SMC, + 2 points, CI above 0; POKE-SMC's selection loss at most half
  best-of-N's; greedy-right/POKE-wrong at most a quarter of the reverse. The declared
  goals of ``comparison.default_goals`` (POKE-SMC beats each of the three by more than 2
  points with the whole paired CI above it) are reported beside them.
"""

import dataclasses
import functools
import inspect
import itertools
import json
import os
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import metrics, protocol
from jaxlab.dllm import comparison, decoding, evaluation, path_smc, poke, sr_smc
from jaxlab.dllm import config as config_lib
from jaxlab.dllm import model as model_lib
from pallas_kernels.sale.reference import BlockSizes

from . import common, dllm_models
from .lib import artifacts, plots, provenance, results, study
from .lib.progress import Progress, comparison_reporter


class Decoder(NamedTuple):
    """A decoder of the study.

    Attributes:
      family: "greedy", "best_of_n", "smc", "sr_smc" or "poke_smc" (plot marker,
        comparisons).
      particles: N (1 for the greedy decoders).
      fn: jitted ``fn(prompt [B, P], key) -> (DecodeResult, flag [], ess [S, B], resampled
        [S, B], diagnostics)``; flag: the SMC log weights became non-finite on some step
        (``Info.nonfinite_weights``; False when greedy); ess: the ESS before resampling at
        each of the S steps (SR-SMC: at each block end; for best-of-N the ESS of its
        never-resampled Path-LL weights; [1, B] ones when greedy); resampled: whether the
        step resampled ([1, B] False when greedy); diagnostics: ``path_smc.Info``'s
        ``DIAGNOSTICS`` fields, each [S, B] (empty for greedy and SR-SMC).
    """

    family: str
    particles: int
    fn: Callable


def _static_key(fn: functools.partial):
    """What determines the program of a decoder built on ``fn``: the function and every
    bound argument with its type (1 and 1.0 differ), the denoiser and value functions
    themselves rather than their ids (so a key never outlives them); None when an
    argument is unhashable."""
    key = (fn.func, tuple((type(a), a) for a in fn.args),
           tuple((k, type(v), v) for k, v in sorted(fn.keywords.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _jitted(cache: dict | None, key, run: Callable) -> Callable:
    """``jax.jit(run)``, built once per ``key`` in ``cache`` (``decoders``)."""
    if cache is None or key[-1] is None:
        return jax.jit(run)
    if key not in cache:
        cache[key] = jax.jit(run)
    return cache[key]


# path_smc.Info fields each particle decoder's run reports per step and problem: distinct
# partial paths after the resampling, and the variances over the particles of the three
# terms of the incremental log weight (twist, Path-LL increment; the proposal correction,
# which the weights do not hold, for comparison).
DIAGNOSTICS = ("distinct_paths", "twist_increment_var", "path_ll_increment_var",
               "proposal_correction_var")


def _greedy(fn: functools.partial, cache: dict | None = None) -> Decoder:
    def run(prompt, key):
        return (fn(key, prompt=prompt), jnp.bool_(False), jnp.ones((1, prompt.shape[0])),
                jnp.zeros((1, prompt.shape[0]), bool), {})

    return Decoder("greedy", 1, _jitted(cache, ("greedy", _static_key(fn)), run))


def _particles(family: str, n: int, fn: functools.partial,
               cache: dict | None = None) -> Decoder:
    def run(prompt, key):
        result, info = fn(key, prompt=prompt)
        bad = jnp.any(info.nonfinite_weights)
        if hasattr(info, "unfinished"):  # SR-SMC: a block NaN priorities left unfinished
            bad = bad | jnp.any(info.unfinished)
        diag = {f: getattr(info, f) for f in DIAGNOSTICS if hasattr(info, f)}
        return result, bad, info.ess, info.resampled, diag

    return Decoder(family, n, _jitted(cache, (family, n, _static_key(fn)), run))


def decoder_names(config) -> list[str]:
    """The decoders this run evaluates: ``config.decoders`` (names or particle families;
    empty = all) picked from the four policies, semi-AR, threshold, then per N best-of-N,
    Path-LL SMC, SR-SMC and POKE-SMC (``config_lib.decoder_selection``)."""
    return config_lib.decoder_selection(config.get("decoders", ()), config.particles)


SMC_FAMILIES = ("smc", "poke_smc")


def default_tuning(config) -> dict:
    """The untuned settings (the config's): the proposal (``particle_blocks``, token
    ``temperature``, ``position_temperature``), SR-SMC's token temperature, and per SMC
    family (Path-LL SMC, POKE-SMC) the weight scale beta, the ESS threshold, the resampling
    schedule, the output selection (with the ``"mix"`` weight), the resampler, and (POKE-SMC)
    the twist scale and the unmasking policy (with the ``"value"`` policy's weight)."""
    twist = config.get("twist_scale", None)
    smc = {"weight_scale": float(config.get("weight_scale", 1.0)),
           "ess_threshold": float(config.get("ess_threshold", 0.5)),
           "schedule": config.resample_schedule, "select": config.get("select", "path_ll"),
           "select_mix": float(config.get("select_mix", 0.5)),
           "resampler": config.get("resampler", "multinomial"),
           "twist_scale": None if twist is None else float(twist),
           "policy": config.get("policy", "confidence"),
           "policy_mix": float(config.get("policy_mix", 1.0))}
    return {"particle_blocks": config.get("particle_blocks", "one"),
            "temperature": float(config.temperature),
            "position_temperature": float(config.get("position_temperature", 1.0)),
            "sr_smc_temperature": float(config.get("sr_smc_temperature", config.temperature)),
            **{fam: dict(smc) for fam in SMC_FAMILIES}}


def _smc_kwargs(settings: dict, position_value_fn=None) -> dict:
    """``path_smc.smc_decode``'s keywords for a family's settings (``default_tuning``)."""
    out = dict(weight_scale=settings["weight_scale"], ess_threshold=settings["ess_threshold"],
               resample_schedule=settings["schedule"], select=settings["select"],
               select_mix=settings.get("select_mix", 0.5),
               resampler=settings.get("resampler", "multinomial"),
               twist_scale=settings.get("twist_scale"))
    if settings.get("policy", "confidence") != "confidence":
        out.update(policy=settings["policy"], policy_mix=settings.get("policy_mix", 1.0))
        if settings["policy"] in decoding.HEAD_POLICIES:
            out["position_value_fn"] = position_value_fn
    return out


def decoders(config, task, denoise_fn, value_fn, tuned: dict | None = None,
             particles=None, names=None, cache: dict | None = None,
             position_value_fn=None) -> dict[str, Decoder]:
    """name -> Decoder, in the order of ``config_lib.all_decoders``.

    ``tuned``: the settings (``default_tuning``'s layout; default: the config's);
    ``particles``: the N to build (default ``config.particles``); ``names``: keep only
    these decoders (default: all); ``cache``: a dict owned by the caller (one task unit)
    in which each decoder's jitted function is kept under everything its program depends
    on (the decoding function, the denoiser and value functions, every static setting),
    so a decoder built again with the same settings (validation tuning, then the test
    run) reuses its compiled program instead of tracing and compiling it again; it lives
    as long as the caller keeps it (None: a new jitted function on every call).

    Best-of-N, Path-LL SMC and POKE-SMC share the proposal (``dllm_models.proposal_spec``)
    and, with ``config.greedy_reference``, greedy's path as particle 0; SR-SMC keeps its
    official sampler (tokens at ``sr_smc_temperature``, threshold commits, block-end
    resampling) on the same blocks.

    Besides ``config_lib.all_decoders``' names (``EXTRA_ROWS``): ``greedy_blocks``,
    greedy (confidence) under the particles' blocks, when they are not one block (the
    greedy reference particle follows it); ``best_of_<N>_<rule>`` for each rule of
    ``config.best_of_selections`` (best-of-N's particles picked by POKE-SMC's ``"value"``
    or ``"mix"`` rule, the head read for the pick only), when there is a ``value_fn``.
    ``position_value_fn``: the head's per-position values (the ``"value"`` policy).
    """
    tuned = tuned or default_tuning(config)
    spec = dllm_models.proposal_spec(config, task, tuned)
    kw = dict(gen_length=task.answer_len, mask_id=task.mask_id, vocab_size=task.vocab_size)
    dec = functools.partial(decoding.decode, denoise_fn=denoise_fn, **kw)
    out = {pol: _greedy(functools.partial(dec, policy=pol), cache) for pol in decoding.POLICIES}
    out["semi_ar"] = _greedy(functools.partial(
        dec, block_length=decoding.semi_ar_block(task.answer_len)), cache)
    out["threshold"] = _greedy(functools.partial(
        decoding.decode_threshold, denoise_fn=denoise_fn, threshold=config.threshold,
        **kw), cache)
    if spec["block_length"] is not None and spec["block_length"] < task.answer_len:
        out["greedy_blocks"] = _greedy(functools.partial(
            dec, block_length=spec["block_length"]), cache)
    for n in (config.particles if particles is None else particles):
        pkw = dict(num_particles=n, temperature=spec["temperature"],
                   block_length=spec["block_length"], proposal=spec["proposal"],
                   position_temperature=spec["position_temperature"],
                   greedy_reference=bool(config.get("greedy_reference", False)), **kw)
        smc = functools.partial(path_smc.smc_decode, denoise_fn=denoise_fn, **pkw)
        out[f"best_of_{n}"] = _particles("best_of_n", n, functools.partial(
            path_smc.best_of_n, denoise_fn=denoise_fn, **pkw), cache)
        for rule in (config.get("best_of_selections", ()) if value_fn is not None else ()):
            out[f"best_of_{n}_{rule}"] = _particles("best_of_n", n, functools.partial(
                path_smc.best_of_n, denoise_fn=denoise_fn, value_fn=value_fn, select=rule,
                select_mix=tuned["poke_smc"].get("select_mix", 0.5), **pkw), cache)
        out[f"smc_{n}"] = _particles("smc", n, functools.partial(
            smc, **_smc_kwargs(tuned["smc"])), cache)
        # Self-rewarding SMC as in its official sampler: the same semi-AR blocks, Fast-dLLM
        # threshold commits, block-end resampling, tokens drawn at its own temperature.
        out[f"sr_smc_{n}"] = _particles("sr_smc", n, functools.partial(
            sr_smc.sr_smc_decode, denoise_fn=denoise_fn, threshold=config.threshold,
            num_particles=n,
            temperature=tuned["sr_smc_temperature"], block_length=spec["block_length"], **kw),
            cache)
        out[f"poke_smc_{n}"] = _particles("poke_smc", n, functools.partial(
            smc, value_fn=value_fn, **_smc_kwargs(tuned["poke_smc"], position_value_fn)),
            cache)
    return out if names is None else {k: v for k, v in out.items() if k in set(names)}


def _grid(values, default) -> tuple:
    """A tuning grid: its entries, or (default,) when it has fewer than two."""
    values = tuple(values or ())
    return values if len(values) > 1 else (default,)


def _tune(config, task, denoise_fn, head_fn, step: Callable | None = None,
          results_path: str | None = None) -> tuple[dict, Callable | None, Callable | None]:
    """The declared tuning (module docstring) on the validation problems only: each phase
    is ``jaxlab.dllm.compare`` of ``tuning_contenders``' staged grids (the tuning items are
    the validation problems; ``protocol.tune``, ``compare``'s tuning without test items).

    Args:
      head_fn: proposal spec -> (``value_fn``, ``position_value_fn``) of a POKE head trained
        on that proposal (called once, after the proposal is tuned), or None for no head.
      step: ``step(label, fn)`` runs ``fn()`` or returns its kept result (the unit's
        ``study.Context.cached``, so a killed run keeps its finished validation runs, and
        a setting met again in a later stage is not decoded again); ``None``: always run.
      results_path: the JSON-lines file ``compare`` appends each call's per-problem
        values to (None: none).

    Returns:
      ({"tuned", "validation_problems", "grid", "proposal"}, value_fn, position_value_fn).
    """
    pr, tuned = config.protocol, default_tuning(config)
    out = {"tuned": tuned, "validation_problems": pr.validation_problems, "grid": {}}
    heads = (None, None)

    def phase(phase_name):
        cs = tuning_contenders(config, task, denoise_fn, tuned, phase_name, heads, step)
        if not cs:
            return
        result = protocol.tune(
            comparison_key(config), _problem(config, task, denoise_fn, tuned, heads),
            contenders={c: contender for c, (contender, _) in cs.items()},
            tuning=pr.validation_problems, batch=config.eval_batch,
            progress=comparison_reporter(), results_path=results_path,
            spec=comparison.SPEC)
        for c, (_, labels) in cs.items():
            rows = iter(result.rows[c])
            for stage, stage_labels in labels:
                out["grid"][stage] = {lab: next(rows)[1] for lab in stage_labels}
            _apply(tuned, c, result.params[c])

    phase("proposal")
    if config.get("proposal", "tokens") != "path":  # SR-SMC draws at the shared temperature
        tuned["sr_smc_temperature"] = tuned["temperature"]
    phase("sr_smc")
    out["proposal"] = dllm_models.proposal_spec(config, task, tuned)
    if head_fn is not None:
        heads = head_fn(out["proposal"])
    phase("smc")
    return out, heads[0], heads[1]


# The study's particle families under jaxlab.dllm.compare's contender names.
_BUILTIN = {"best_of": "best_of_n", "smc": "path_smc", "sr_smc": "sr_smc",
            "poke_smc": "poke_smc"}


def _problem(config, task, denoise_fn, tuned: dict, heads=(None, None),
             n: int | None = None) -> comparison.Problem:
    """The ``comparison.Problem`` of the study's decoders at ``tuned`` (N: the first of
    ``protocol.tune_particles``)."""
    spec = dllm_models.proposal_spec(config, task, tuned)
    ns = tuple(config.protocol.get("tune_particles", ()) or config.particles)
    return comparison.Problem(
        task, denoise_fn, heads[0], num_particles=n or ns[0],
        proposal=comparison.Proposal(spec["proposal"], spec["temperature"],
                                     spec["position_temperature"], spec["block_length"]),
        threshold=config.threshold, sr_smc_temperature=tuned["sr_smc_temperature"],
        greedy_reference=bool(config.get("greedy_reference", False)),
        position_value_fn=heads[1])


def family_params(fam: str, settings: dict) -> dict:
    """A SMC family's settings (``default_tuning``'s layout) as the keyword arguments of
    its built-in contender (``comparison.PARAMS``)."""
    out = dict(weight_scale=settings["weight_scale"], ess_threshold=settings["ess_threshold"],
               resample_schedule=settings["schedule"], select=settings["select"],
               select_mix=settings.get("select_mix", 0.5),
               resampler=settings.get("resampler", "multinomial"),
               policy=settings.get("policy", "confidence"),
               policy_mix=settings.get("policy_mix", 1.0))
    if fam == "poke_smc" and settings.get("twist_scale") is not None:
        out["twist_scale"] = settings["twist_scale"]
    return out


def _apply(tuned: dict, contender: str, params: dict) -> None:
    """Writes a chosen grid point of ``tuning_contenders``' contender into ``tuned``."""
    if contender == "proposal":
        tuned["particle_blocks"] = params["particle_blocks"]
        for f in ("position_temperature", "temperature"):
            if f in params:
                tuned[f] = float(params[f])
    elif contender == "sr_smc":
        tuned["sr_smc_temperature"] = float(params["temperature"])
    else:
        fam = "smc" if contender == "path_smc" else contender
        s = dict(tuned[fam])
        for k, v in params.items():
            if k == "twist_multiple":
                s["twist_scale"] = v * params["weight_scale"]
            elif k == "resample_schedule":
                s["schedule"] = v
            elif k != "twist_scale" or "twist_multiple" not in params:
                s[k] = v
        tuned[fam] = s


def _kept_run(families, ns, base_problem, step, fixed=None) -> Callable:
    """``run(items, problem, **point)``: the per-problem mean correctness over ``families``
    x ``ns`` of their built-in runs (``comparison.run_builtin``); ``particle_blocks`` and
    the proposal's temperatures in ``point`` change the proposal, ``temperature`` is
    SR-SMC's; each run is a step of ``step`` labelled by everything it reads."""
    run_step = step or (lambda label, fn: fn())

    def run(items, problem, **point):
        point = {k: v for k, v in point.items() if v is not None}
        values = []
        for fam in families:
            for n in ns:
                prob, kw = base_problem(problem, point, fam), dict(fixed(fam, point))
                prob = prob._replace(num_particles=n)
                label = json.dumps({
                    "decoder": f"{fam}_{n}", "settings": kw,
                    "proposal": prob.proposal._asdict(), "value": prob.value_fn is not None,
                    "position_value": prob.position_value_fn is not None,
                    "sr_smc_temperature": prob.sr_smc_temperature, "split": items.split,
                    "index": [int(items.index[0]), int(items.index[-1])]},
                    sort_keys=True, default=str)
                values.append(np.asarray(run_step(
                    f"validation {label}", lambda b=_BUILTIN[fam], p=prob, kw=kw: (
                        comparison.run_builtin(b, items, p, **kw)["accuracy"]))))
        return np.mean(values, axis=0)

    return run


def _with_signature(run: Callable, names) -> Callable:
    p = inspect.Parameter
    run.__signature__ = inspect.Signature(
        [p("items", p.POSITIONAL_OR_KEYWORD), p("problem", p.POSITIONAL_OR_KEYWORD)]
        + [p(k, p.KEYWORD_ONLY, default=None) for k in sorted(names)])
    return run


def tuning_contenders(config, task, denoise_fn, tuned: dict, phase: str,
                      heads=(None, None), step: Callable | None = None) -> dict:
    """The contenders of one tuning phase (module docstring): ``{name: (Contender with
    protocol.Stages, [(grid name, [labels]), ...] of its tuned stages)}``, empty when the
    phase tunes nothing. Phases: ``"proposal"`` (blocks x the proposal's temperature, by the
    mean of best-of-N and Path-LL SMC), ``"sr_smc"`` (its token temperature), ``"smc"``
    (per SMC family: beta x ESS x schedule, then ``_mechanism_grids``)."""
    pr = config.protocol
    ns = tuple(pr.get("tune_particles", ()) or config.particles)
    path = config.get("proposal", "tokens") == "path"

    def proposal_of(problem, point, fam):
        spec = dllm_models.proposal_spec(config, task, {**tuned, **{
            k: point[k] for k in ("particle_blocks", "position_temperature", "temperature")
            if k in point}})
        return problem._replace(proposal=comparison.Proposal(
            spec["proposal"], spec["temperature"], spec["position_temperature"],
            spec["block_length"]))

    if phase == "proposal":
        blocks = _grid(pr.get("particle_blocks", ()), tuned["particle_blocks"])
        field = "position_temperature" if path else "temperature"
        temps = (_grid(pr.get("position_temperatures", ()), tuned["position_temperature"])
                 if path else _grid(pr.temperatures, tuned["temperature"]))
        if len(blocks) < 2 and len(temps) < 2:
            return {}
        points = [{"particle_blocks": b, field: float(t)} for b in blocks for t in temps]
        labels = [f"{b}, {field} {float(t):g}" for b in blocks for t in temps]
        fixed = lambda fam, point: (  # noqa: E731
            family_params("smc", tuned["smc"]) if fam == "smc" else {})
        run = _kept_run(("best_of", "smc"), ns, proposal_of, step, fixed)
        return {"proposal": (protocol.Contender(_with_signature(run, points[0]),
                                                protocol.Stages((points,))),
                             [("proposal", labels)])}
    if phase == "sr_smc":
        temps = tuple(pr.temperatures)
        if not path or len(temps) < 2:
            return {}
        run = _kept_run(("sr_smc",), ns, proposal_of, step,
                        lambda fam, point: {"temperature": point["temperature"]})
        return {"sr_smc": (protocol.Contender(
            _with_signature(run, ("temperature",)),
            protocol.Stages(([{"temperature": float(t)} for t in temps],))),
            [("sr_smc_temperature", [f"{float(t):g}" for t in temps])])}
    out = {}
    combos = list(itertools.product(
        _grid(pr.get("weight_scales", ()), tuned["smc"]["weight_scale"]),
        _grid(pr.get("ess_thresholds", ()), tuned["smc"]["ess_threshold"]),
        _grid(pr.schedules, tuned["smc"]["schedule"])))
    for fam in SMC_FAMILIES:
        if fam == "poke_smc" and heads[0] is None:
            continue
        base = family_params(fam, tuned[fam])
        stages = [[{**base, "weight_scale": float(b), "ess_threshold": float(e),
                    "resample_schedule": s} for b, e, s in combos]]
        labels = ([(f"smc_settings_{fam}", [f"beta {float(b):g}, ess {float(e):g}, {s}"
                                              for b, e, s in combos])]
                  if len(combos) > 1 else [])
        for stage, options in _mechanism_grids(pr, fam):
            if len(options) > 1:
                stages.append([change for _, change in options])
                labels.append((f"{stage}_{fam}", [label for label, _ in options]))
        if len(stages) == 1 and len(stages[0]) == 1:
            continue
        names = {k for s in stages for p in s for k in p}
        run = _kept_run((fam,), ns, lambda problem, point, f: problem, step,
                        lambda f, point: point)
        out[_BUILTIN[fam]] = (protocol.Contender(_with_signature(run, names),
                                                 protocol.Stages(tuple(stages))), labels)
    return out


def _mechanism_grids(pr, fam: str) -> list[tuple[str, list[tuple[str, dict]]]]:
    """The tuning stages after beta x ESS x schedule for one SMC family, in order:
    ``[(stage, [(label, settings change), ...]), ...]``. Both families: the resampler
    (``protocol.resamplers``); POKE-SMC only (they read the head): the twist scale
    (``protocol.twist_scales``, ``twist_multiple``: a multiple of beta) and the unmasking
    policy (``protocol.policies``); last the output selection: ``protocol.selections`` and,
    for POKE-SMC, ``protocol.value_selections`` (``"mix"`` once per
    ``protocol.select_mixes`` entry)."""
    poke = fam == "poke_smc"
    sel = [(s, {"select": s}) for s in pr.get("selections", ())]
    if poke:
        for s in pr.get("value_selections", ()):
            mixes = tuple(pr.get("select_mixes", ())) if s == "mix" else ()
            sel += ([(f"mix {float(m):g}", {"select": "mix", "select_mix": float(m)})
                     for m in mixes] or [(s, {"select": s})])
    stages = [("resampler", [(r, {"resampler": r}) for r in pr.get("resamplers", ())])]
    if poke:
        stages += [("twist", [(f"twist {float(t):g} beta", {"twist_multiple": float(t)})
                              for t in pr.get("twist_scales", ())]),
                   ("policy", [(p, {"policy": p}) for p in pr.get("policies", ())])]
    return [*stages, ("select", sel)]


def _preconditions(config, task, denoise_fn, value_fn, tuned, prompt, greedy_acc,
                   min_ess) -> dict:
    """Per N: pass@N, best-of-N, ESS < N/2 share (from ``min_ess``: the Path-LL SMC
    decoder's run) and within-problem ranking accuracy over the path (module docstring),
    on N independent particles of the study's proposal (with greedy's path as particle 0
    under ``config.greedy_reference``)."""
    pr, out = config.protocol, {}
    spec = dllm_models.proposal_spec(config, task, tuned)
    steps = task.answer_len
    for n in config.particles:
        alg = path_smc.smc(denoise_fn, gen_length=task.answer_len, num_particles=n,
                           mask_id=task.mask_id, vocab_size=task.vocab_size, value_fn=value_fn,
                           resample=False, temperature=spec["temperature"],
                           block_length=spec["block_length"], proposal=spec["proposal"],
                           position_temperature=spec["position_temperature"],
                           greedy_reference=bool(config.get("greedy_reference", False)))

        @jax.jit
        def run(p, key, alg=alg):
            def body(state, k):
                # V(s_t) recomputed here (the step zeroes the stored value on its last step);
                # the same pass as the step's own on the same tokens, so XLA can share it.
                tok = state.decode.tokens
                v = value_fn(denoise_fn(tok)[1], tok).reshape(state.value.shape)
                new, _ = alg.step(k, state)
                return new, (state.decode.path_ll, v)  # L_t and V(s_t) of the same s_t
            return jax.lax.scan(body, alg.init(key, p), jax.random.split(key, steps))

        correct, ll_t, v_t, ll_final = [], [], [], []
        for i in range(0, prompt.shape[0], config.eval_batch):
            p = prompt[i:i + config.eval_batch]
            final, (ll, v) = run(p, jax.random.key(config.seed * 1000 + 500 + i))
            b = p.shape[0]
            ans = final.decode.tokens[:, -task.answer_len:]
            ok = dllm_models.verify(task, jnp.repeat(p, n, axis=0), ans)
            correct.append(np.asarray(ok).reshape(b, n))
            ll_t.append(np.asarray(ll).reshape(steps, b, n))
            v_t.append(np.asarray(v).reshape(steps, b, n))
            ll_final.append(np.asarray(final.decode.path_ll).reshape(b, n))
        correct = np.concatenate(correct).astype(bool)
        ll_t, v_t = np.concatenate(ll_t, 1), np.concatenate(v_t, 1)
        ll_final = np.concatenate(ll_final)
        rows = np.arange(correct.shape[0])
        mixed = correct.any(1) & ~correct.all(1)
        best = correct[rows, np.argmax(ll_final, 1)]
        rank = {}
        for f in pr.rank_fractions:
            at = int(min(max(round(f * steps), 1), steps - 1)) if steps > 1 else 0
            top_ll = correct[rows, np.argmax(ll_t[at], 1)]
            top_v = correct[rows, np.argmax(ll_t[at] + v_t[at], 1)]
            rank[f"{f:g}"] = {
                "step": at, "random": float(correct[mixed].mean()) if mixed.any() else None,
                "path_ll": float(top_ll[mixed].mean()) if mixed.any() else None,
                "path_ll_plus_poke": float(top_v[mixed].mean()) if mixed.any() else None,
                # how far apart siblings are: median over problems of the std over the N
                # particles of L_t and of V(s_t) (the twist can only reorder siblings, and
                # only at resampling: with none, V telescopes out of the final weights)
                "median_sibling_std_path_ll": float(np.median(ll_t[at].std(1))),
                "median_sibling_std_poke": float(np.median(v_t[at].std(1)))}
        # The value's ranking quality by decoding step (mixed problems): the top particle by
        # L_t, by L_t + V_t and by V_t alone, at every step.
        by_step = {"path_ll": [], "path_ll_plus_poke": [], "poke_only": []}
        for at in range(steps):
            for sel, score in (("path_ll", ll_t[at]), ("path_ll_plus_poke", ll_t[at] + v_t[at]),
                               ("poke_only", v_t[at])):
                top = correct[rows, np.argmax(score, 1)]
                by_step[sel].append(float(top[mixed].mean()) if mixed.any() else None)
        pass_n = float(evaluation.pass_at_n(correct).mean())
        bon = float(best.mean())
        ess = min_ess.get(f"smc_{n}")  # None when Path-LL SMC is not among config.decoders
        ess = None if ess is None else np.asarray(ess)
        out[str(n)] = {
            "greedy": greedy_acc, "pass_at_n": pass_n, "best_of_n": bon,
            "headroom": pass_n - bon, "mixed_share": float(mixed.mean()),
            "ess_below_half_share": None if ess is None else float(np.mean(ess < n / 2)),
            "median_min_ess": None if ess is None else float(np.median(ess)),
            "ranking_on_mixed": rank, "ranking_by_step": by_step,
            "final_path_ll_on_mixed": float(best[mixed].mean()) if mixed.any() else None,
            "headline": bool(pass_n - bon >= pr.min_headroom and greedy_acc < pr.max_greedy)}
    return out


# Bins of the per-problem minimum ESS / N (the ESS is in [1, N], so ESS / N in [1/N, 1]).
MIN_ESS_BINS = np.linspace(0.0, 1.0, 11)


def comparison_key(config) -> jax.Array:
    """The key of the study's problems and bootstrap (``jaxlab.dllm.compare``'s ``key``)."""
    return jax.random.key(config.seed + 7_777)


def item_keys(config, split: str, count: int) -> jax.Array:
    """[count] item keys of ``split`` ("tuning": validation problems, "test")."""
    return protocol.item_keys(comparison_key(config), split, np.arange(count))


def _run_decoder(config, task, name: str, dec: Decoder, keys, on_chunk=None) -> dict:
    """One decoder on the problems of ``keys`` (``comparison.decode_items``: each problem
    with its own item key, ``config.eval_batch`` problems per call): accuracy (bootstrap
    CI), NFE, Path LL, seconds and, for particle decoders, ``ess_trace`` (the mean over
    problems of ESS / N at each step), ``resampling`` (events per problem, share of
    problems resampled at least once, share of steps that resampled) and
    ``min_ess_histogram`` (per-problem minimum ESS / N, counts in ``MIN_ESS_BINS``).
    ``on_chunk(index, correct)`` is called after each call."""
    t0 = time.perf_counter()
    correct, (r, bad, step_ess, resampled, diag) = comparison.decode_items(
        keys, dec.fn, task, batch=config.eval_batch, mesh_shape=config.get("mesh_shape", (-1,)),
        on_chunk=on_chunk)
    if np.any(bad):
        raise FloatingPointError(
            f"dllm {name}: SMC log weights became non-finite on problems "
            f"{np.flatnonzero(bad).tolist()[:8]}; check `weight_scale`, `temperature` and the "
            "POKE head (see path_smc.raise_if_nonfinite).")
    n_problems = correct.shape[0]
    pll, nfe = r.path_ll[:, 0], r.nfe[:, 0]
    step_ess, resampled = step_ess[..., 0], resampled[..., 0]  # [n, S]
    ess_sum = step_ess.sum(axis=0)  # [S]: summed over problems
    ess, events = step_ess.min(axis=1), resampled.sum(axis=1)
    _, lo, hi = metrics.bootstrap_ci(jax.random.key(config.seed), jnp.mean, (correct,),
                                     config.bootstrap)
    particle_rows = {}
    if dec.particles > 1:
        particle_rows = {
            "ess_trace": (ess_sum / n_problems / dec.particles).tolist(),
            "resampling": {"events_per_problem": float(events.mean()),
                           "problems_resampled_share": float(np.mean(events > 0)),
                           "step_share": float(events.mean() / len(ess_sum))},
            "min_ess_histogram": np.histogram(np.clip(ess / dec.particles, 0.0, 1.0),
                                              MIN_ESS_BINS)[0].tolist(),
            **_weight_diagnostics(diag, dec.particles)}
    return {"family": dec.family, "particles": dec.particles,
            "accuracy": float(np.mean(correct)), "accuracy_ci": [lo, hi],
            "nfe": float(nfe.mean()), "nfe_batched": float(nfe.mean()) / dec.particles,
            "path_ll": float(pll.mean()), **particle_rows,
            "seconds": time.perf_counter() - t0, "_correct": correct, "_path_ll": pll,
            "_min_ess": ess}


def study_rows(config, decs) -> list[str]:
    """The rows of a task: ``decoder_names(config)``, then the extra rows ``decoders``
    built (``greedy_blocks`` when greedy (confidence) is selected, ``best_of_<N>_<rule>``
    when best-of-N is), in ``decs``' order."""
    names = decoder_names(config)
    extra = [k for k in decs if k not in names and (
        (k == "greedy_blocks" and "confidence" in names)
        or (k.startswith("best_of_") and "_".join(k.split("_")[:3]) in names))]
    return [k for k in decs if k in names or k in extra]


def _weight_diagnostics(diag: dict, n: int) -> dict:
    """The ``DIAGNOSTICS`` of a particle decoder's run ([problems, S, 1] each: the decoder's
    [S, B] per problem, B = 1, stacked by ``comparison.decode_items``) as the
    summary's ``diagnostics``: the distinct partial paths after each step's resampling
    (step 0 resamples all-mask particles, so it is left out: their mean over problems and
    steps 1.., the mean over problems of their minimum over steps 1.., the share of
    problems whose particles all held one partial answer at some step 1.., and the
    per-step mean trace; with blocks, particles that finished a block with the same
    tokens are one path there, so the minimum is often 1 and the mean says more), and the per-step
    mean over problems of each weight term's variance across particles with the term whose
    variance is largest on the most steps (``driver``: what moves the weights, hence resampling)."""
    if not diag:
        return {}
    d = {k: np.asarray(v)[..., 0] for k, v in diag.items()}  # [problems, S]
    distinct = d["distinct_paths"]
    later = distinct[:, 1:] if distinct.shape[1] > 1 else distinct
    terms = {t: d[f"{t}_var"].mean(0) for t in ("twist_increment", "path_ll_increment")}
    wins = np.argmax(np.stack(list(terms.values())), 0)
    driver = list(terms)[int(np.bincount(wins, minlength=len(terms)).argmax())]
    return {"diagnostics": {
        "mean_distinct_paths": float(later.mean()),
        "mean_min_distinct_paths": float(later.min(1).mean()),
        "one_path_share": float(np.mean(later.min(1) <= 1)) if n > 1 else 0.0,
        "distinct_paths_trace": distinct.mean(0).tolist(),
        "weight_term_var_trace": {t: v.tolist() for t, v in terms.items()},
        "proposal_correction_var_trace": d["proposal_correction_var"].mean(0).tolist(),
        "driver": driver if max(float(v.max()) for v in terms.values()) > 0 else "none"}}


def _write_partial(ctx: study.Context, name: str, rows: dict) -> None:
    """``<workdir>/partial/dllm_<task>.json``: the decoders finished so far, each with its
    per-problem ``correct`` (0/1 by test problem; a decoder still running has the problems
    of its finished calls), since the unit's result is written only when every decoder has
    run."""
    results.write_json(os.path.join(ctx.workdir, "partial", f"dllm_{name}.json"),
                       {k: {**{kk: vv for kk, vv in v.items() if not kk.startswith("_")},
                            "correct": np.asarray(v["_correct"]).astype(int).tolist()}
                        for k, v in rows.items()})


def _evaluate_task(config, models, name: str, ctx: study.Context) -> dict:
    """Unit ``<task>``: every decoder of ``decoder_names`` on ``config.num_problems``
    held-out problems; each finished decoder's row is written at once (``_write_partial``)
    and kept as a step of the unit (``study.Context.cached``), as is every validation run,
    so a killed run resumes at the decoder it was running.
    """
    m = models.denoiser(name, ctx)
    fits = {}

    def head_fn(spec):
        head = models.poke_head(name, ctx, spec)
        fits["fit"] = poke.evaluate(*head, dllm_models.rollouts(
            config, m, 2, min(512, config.poke.rollouts), spec))
        return (poke.make_value_fn(*head, m.task.prompt_len, m.task.mask_id),
                poke.make_position_value_fn(*head, m.task.prompt_len, m.task.mask_id))

    # This unit's jitted decoders: one program per decoder and settings, shared by the
    # validation tuning and the test run (``decoders``); dropped when the unit ends.
    cache = {}
    tuning, value_fn, position_value_fn = _tune(
        config, m.task, m.denoise_fn, head_fn, step=ctx.cached,
        results_path=os.path.join(ctx.workdir, "tuning", f"dllm_{name}.jsonl"))
    poke_fit = fits["fit"]
    keys = item_keys(config, "test", config.num_problems)
    prompt, _ = comparison.item_problems(keys, m.task)
    decs = decoders(config, m.task, m.denoise_fn, value_fn, tuning["tuned"], cache=cache,
                    position_value_fn=position_value_fn)
    decs = {k: v for k, v in decs.items() if k in study_rows(config, decs)}
    rows, prog = {}, Progress(len(decs), desc=f"dllm {name} decoders", unit="decoder")
    report = comparison_reporter()
    for dname, dec in decs.items():
        done = []

        def chunk(index, correct, dname=dname, done=done):  # per-problem results as they come
            done.append(correct)
            _write_partial(ctx, name, {**rows, dname: {"_correct": np.concatenate(done)}})
            report(int(index[-1]) + 1, config.num_problems, f"dllm {name} test {dname}")

        rows[dname] = ctx.cached(f"test {dname}", functools.partial(
            _run_decoder, config, m.task, f"{name} {dname}", dec, keys, chunk))
        _write_partial(ctx, name, rows)
        prog.update(1, postfix=f"{dname} acc {rows[dname]['accuracy']:.3f}")
    prog.close()
    # The preconditions' greedy accuracy: the confidence decoder's (run for it when
    # config.decoders leaves it out).
    greedy = rows.get("confidence") or ctx.cached("test confidence", lambda: _run_decoder(
        config, m.task, f"{name} confidence", decoders(
            config, m.task, m.denoise_fn, value_fn, tuning["tuned"], particles=(),
            names=("confidence",), cache=cache)["confidence"], keys))
    pre = ctx.cached("preconditions", lambda: _preconditions(
        config, m.task, m.denoise_fn, value_fn, tuning["tuned"], prompt, greedy["accuracy"],
        {k: v["_min_ess"] for k, v in rows.items() if k.startswith("smc_")}))
    return {"task": name, "answer_len": m.task.answer_len, "poke_fit": poke_fit,
            "particle_block_length": tuning["proposal"]["block_length"], "tuning": tuning,
            "preconditions": pre, "decoders": rows}


def _sale_check(config, models, ctx: study.Context) -> dict:
    """Unit ``sale``: greedy decoding of ``config.sale.task`` with SALE block-sparse
    attention vs dense: accuracy and the share of answers equal to the dense ones, per tau.

    The problems are decoded ``config.sale.batch`` at a time (one program per tau, reused
    for every chunk): greedy decoding treats each problem on its own, and on a CPU the
    Pallas interpreter's time per problem grows with the batch (about 12 ms per forward
    pass and problem at 1, 125 ms at 16 on a 2-core CPU).
    """
    sc = config.sale
    m = models.denoiser(sc.task, ctx)
    base = dllm_models.model_config(config, m.task)
    prompt, _ = dllm_models.sample(m.task, jax.random.key(config.seed + 7_777),
                                   sc.num_problems)
    batch = int(sc.get("batch", 0) or sc.num_problems)
    out, dense = {}, None
    for tau in (None, *sc.taus):
        cfg = base if tau is None else dataclasses.replace(
            base, attention_impl="sale", sale_tau=tau,
            sale_sizes=BlockSizes(sc.block_q, sc.block_k, sc.local))
        den = functools.partial(model_lib.apply, model_lib.abstract(cfg)[0], m.params)
        fn = jax.jit(functools.partial(
            decoding.decode, jax.random.key(0), den, gen_length=m.task.answer_len,
            mask_id=m.task.mask_id, vocab_size=m.task.vocab_size))
        answer = np.concatenate([np.asarray(fn(prompt[i:i + batch]).answer)
                                 for i in range(0, prompt.shape[0], batch)])
        dense = answer if tau is None else dense
        out["dense" if tau is None else f"sale_tau_{tau:g}"] = {
            "accuracy": float(np.mean(dllm_models.verify(m.task, prompt, answer))),
            "same_answer_as_dense": float(np.mean(np.all(answer == dense, 1)))}
    return {"task": sc.task, "block_sizes": [sc.block_q, sc.block_k, sc.local],
            "seq_len": m.task.prompt_len + m.task.answer_len, "results": out}


def _spec(config, drop=()) -> dict:
    """The config as a unit spec, without ``drop`` and without the user-task and decoder
    selection fields while they are empty (so adding those fields kept every unit key)."""
    spec = provenance.config_dict(config)
    for field in drop:
        spec.pop(field, None)
    for field in ("decoders", "task_refs"):
        if field in spec and not spec[field]:
            spec.pop(field)
    return spec


def _task_spec(config, name: str) -> dict:
    """What a task unit depends on: the config without the other units' fields."""
    return {**_spec(config, ("tasks", "throughput_particles", "sale")), "task": name}


def _units(config, workdir: str) -> list[study.Unit]:
    models = dllm_models.Models(config, workdir)
    units = [study.Unit(name, functools.partial(_evaluate_task, config, models, name),
                        _task_spec(config, name)) for name in config.tasks]
    if config.sale.task in config.tasks:
        units.append(study.Unit("sale", functools.partial(_sale_check, config, models),
                                _spec(config, ("decoders", "throughput_particles"))))
    return units


def _path_ll_correlation(rows) -> dict:
    acc = np.array([v["accuracy"] for v in rows.values()])
    pll = np.array([v["path_ll"] for v in rows.values()])
    correct = np.concatenate([v["_correct"] for v in rows.values()])
    per = np.concatenate([v["_path_ll"] for v in rows.values()])
    return {"pearson_across_decoders": float(np.corrcoef(pll, acc)[0, 1])
            if acc.std() > 0 else float("nan"),
            "auroc_path_ll_for_correct": float(metrics.auroc(per, correct))
            if 0 < correct.mean() < 1 else float("nan")}


def _compare(config, rows) -> dict:
    """POKE-SMC(N) minus the best other decoder with NFE <= its NFE (paired bootstrap); the
    N whose POKE-SMC or rivals are not among ``config.decoders`` are left out."""
    out = {}
    for n in config.particles:
        ours = rows.get(f"poke_smc_{n}")
        if ours is None:
            continue
        rivals = {k: v for k, v in rows.items() if not k.startswith("poke_smc")
                  and v["nfe"] <= ours["nfe"] + 1e-9}
        if not rivals:
            continue
        best = max(rivals, key=lambda k: rivals[k]["accuracy"])
        d = protocol.paired_difference(
            jax.random.key(config.seed), np.asarray(ours["_correct"], np.float64),
            np.asarray(rivals[best]["_correct"], np.float64), names=("poke_smc", best),
            resamples=config.bootstrap)
        out[str(n)] = {"best_baseline": best, "baseline_accuracy": rivals[best]["accuracy"],
                       "poke_smc_accuracy": ours["accuracy"], "gain": d.value,
                       "gain_ci": [d.low, d.high], "nfe": ours["nfe"]}
    return out


DECLARED_RIVALS = ("sr_smc", "best_of", "smc", "confidence")
# The study's decoders at N under jaxlab.dllm.compare's contender names.
CONTENDER_ROWS = {"poke_smc": "poke_smc_{n}", "greedy": "confidence",
                  "best_of_n": "best_of_{n}", "path_smc": "smc_{n}", "sr_smc": "sr_smc_{n}"}
RIVAL_CONTENDERS = {"sr_smc": "sr_smc", "best_of": "best_of_n", "smc": "path_smc",
                    "confidence": "greedy"}


def contender_params(tuned: dict) -> dict:
    """Each contender's settings (``default_tuning``'s layout) as ``jaxlab.dllm.compare``
    reports its chosen grid point; the shared proposal is the ``comparison.Problem``'s."""
    smc = lambda s: {"weight_scale": s["weight_scale"],  # noqa: E731
                     "ess_threshold": s["ess_threshold"], "select": s["select"],
                     "resample_schedule": s["schedule"]}
    return {"poke_smc": smc(tuned["poke_smc"]), "greedy": {}, "best_of_n": {},
            "path_smc": smc(tuned["smc"]), "sr_smc": {"temperature": tuned["sr_smc_temperature"]}}


def tuned_grids(config) -> bool:
    """Whether the config declares a grid of two or more entries (then the validation
    problems are the comparison's tuning items)."""
    pr = config.protocol
    return any(len(tuple(pr.get(f, ()) or ())) > 1 for f in (
        "particle_blocks", "position_temperatures", "temperatures", "weight_scales",
        "ess_thresholds", "schedules", "selections"))


def analysis(config, rows, n: int, tuned: dict | None = None) -> protocol.Comparison | None:
    """``protocol.analyse`` of the study's decoders at N (``CONTENDER_ROWS``; those among
    ``config.decoders``) over the test problems, with ``comparison.default_goals``: what
    ``jaxlab.dllm.compare`` returns for the same per-problem values. None without
    POKE-SMC(N) or without a rival."""
    present = {c: r.format(n=n) for c, r in CONTENDER_ROWS.items() if r.format(n=n) in rows}
    if "poke_smc" not in present or len(present) < 2:
        return None
    params = contender_params(tuned or default_tuning(config))
    return protocol.analyse(
        jax.random.fold_in(comparison_key(config), 2),
        {c: np.asarray(rows[r]["_correct"], np.float64) for c, r in present.items()},
        params={c: params[c] for c in present}, goals=comparison.default_goals(tuple(present)),
        metric="accuracy", resamples=config.bootstrap,
        tuning_items=config.protocol.validation_problems if tuned_grids(config) else 0)


def summary_comparison(result: protocol.Comparison) -> dict:
    """``result.to_dict()`` without the per-problem values (they are in the unit's rows)
    and without seconds (summary.json stays byte-identical across reruns)."""
    d = result.to_dict()
    for c in d["contenders"].values():
        for k in ("values", "censored", "compile_s", "run_s"):
            c.pop(k)
    return d


def _versus(config, rows, rival: str) -> dict:
    """Declared (module docstring): POKE-SMC(N) minus ``rival``(N), same N, T and blocks,
    paired over the test problems (``analysis``'s difference and CI), with both NFE
    conventions; only the N where both are among ``config.decoders``."""
    out = {}
    for n in config.particles:
        ours = rows.get(f"poke_smc_{n}")
        other = rows.get(rival if rival in config_lib.GREEDY_DECODERS else f"{rival}_{n}")
        if ours is None or other is None:
            continue
        d = next(d for d in analysis(config, rows, n).differences
                 if d.b == RIVAL_CONTENDERS[rival])
        out[str(n)] = {"poke_smc_accuracy": ours["accuracy"],
                       f"{rival}_accuracy": other["accuracy"],
                       "difference": d.value, "difference_ci": [d.low, d.high],
                       "nfe": {"poke_smc": ours["nfe"], rival: other["nfe"]},
                       "nfe_batched": {"poke_smc": ours["nfe_batched"],
                                       rival: other["nfe_batched"]}}
    return out


def _versus_sr_smc(config, rows) -> dict:
    return _versus(config, rows, "sr_smc")


GOAL_MIN_PARTICLES = 4  # the goals apply at N >= 4
GOAL_MARGIN = comparison.GOAL_MARGIN  # POKE-SMC >= max(greedy, best-of-N, SR-SMC) + 2 pts


def _greedy_row(rows) -> str | None:
    """The greedy decoder the particles' reference follows: ``greedy_blocks`` when the
    particles decode in blocks, else greedy (confidence)."""
    return next((k for k in ("greedy_blocks", "confidence") if k in rows), None)


def _accounting(config, rows, pre) -> dict:
    """Per particle decoder (module docstring, per-problem accounting): on the test
    problems, against the greedy its reference particle follows (``_greedy_row``), the
    problems greedy gets right and the decoder wrong and the reverse, and the selection
    loss pass@N - accuracy (pass@N of N independent particles of the proposal, the
    preconditions')."""
    g = _greedy_row(rows)
    if g is None:
        return {}
    right = np.asarray(rows[g]["_correct"], bool)
    out = {}
    for k, v in rows.items():
        if v["particles"] < 2:
            continue
        ok = np.asarray(v["_correct"], bool)
        p = pre.get(str(v["particles"]), {})
        out[k] = {"greedy": g, "greedy_right_decoder_wrong": int(np.sum(right & ~ok)),
                  "decoder_right_greedy_wrong": int(np.sum(ok & ~right)),
                  "selection_loss": (None if "pass_at_n" not in p
                                     else float(p["pass_at_n"] - v["accuracy"]))}
    return out


def _goals(config, rows, pre) -> dict:
    """Per N >= 4: every particle decoder minus greedy (confidence); POKE-SMC minus the
    best of greedy (confidence, and under the particles' blocks), best-of-N under every
    selection rule and SR-SMC at that N (paired bootstrap; the best rival is read off the
    test problems, a post-hoc label that can only make the goal harder), with whether the
    task has headroom (pass@N - best-of-N >= ``protocol.min_headroom``). The goals
    (``GOAL_MARGIN``): ``goal_met``: POKE-SMC >= that best rival + 2 points with the CI
    above 0; ``selection_loss_halved``: POKE-SMC's selection loss at most half best-of-N's
    (Path-LL selection; None when best-of-N loses nothing); ``greedy_losses_quarter``:
    greedy-right/POKE-wrong at most a quarter of the reverse; ``declared_goals_met``:
    ``analysis``'s goals (POKE-SMC beats each of greedy, best-of-N, SR-SMC by more than the
    margin, the whole CI above it)."""
    out = {}
    greedy = rows.get("confidence")
    acct = _accounting(config, rows, pre)
    for n in config.particles:
        ours = rows.get(f"poke_smc_{n}")
        if n < GOAL_MIN_PARTICLES or greedy is None or ours is None:
            continue
        below = {k: float(v["accuracy"] - greedy["accuracy"]) for k, v in rows.items()
                 if v["particles"] == n}
        rivals = {k: v for k, v in rows.items() if k in ("confidence", "greedy_blocks",
                                                          f"sr_smc_{n}")
                  or (k.startswith(f"best_of_{n}") and v["particles"] == n)}
        best = max(rivals, key=lambda k: rivals[k]["accuracy"])
        d = protocol.paired_difference(
            jax.random.fold_in(comparison_key(config), 3),
            np.asarray(ours["_correct"], np.float64),
            np.asarray(rows[best]["_correct"], np.float64), names=(f"poke_smc_{n}", best),
            resamples=config.bootstrap)
        result = analysis(config, rows, n)
        p = pre.get(str(n), {})
        mine, bon = acct.get(f"poke_smc_{n}", {}), acct.get(f"best_of_{n}", {})
        halved = (None if mine.get("selection_loss") is None
                  or (bon.get("selection_loss") or 0.0) <= 0  # nothing to halve
                  else bool(mine["selection_loss"] <= bon["selection_loss"] / 2))
        out[str(n)] = {
            "particle_minus_greedy": below,
            "no_particle_decoder_below_greedy": bool(min(below.values()) >= 0),
            "best_rival": best, "poke_minus_best_rival": d.value,
            "poke_minus_best_rival_ci": [d.low, d.high],
            "headroom": p.get("headroom"),
            "has_headroom": bool(p.get("headroom", 0.0) >= config.protocol.min_headroom),
            "goal_met": bool(d.value >= GOAL_MARGIN and d.low > 0),
            "selection_loss_halved": halved,
            "greedy_losses_quarter": (None if not mine else bool(
                mine["greedy_right_decoder_wrong"]
                <= mine["decoder_right_greedy_wrong"] / 4)),
            "declared_goals_met": bool(all(g.met for g in result.goals))}
    return out


def _summarize(config, out) -> dict:
    tasks = {}
    for name in config.tasks:
        # Ties in _compare go to the first decoder of ``decoders`` (registry order).
        rows = {k: out[name]["decoders"][k] for k in study_rows(config, out[name]["decoders"])}
        tasks[name] = {**{k: v for k, v in out[name].items() if k != "decoders"},
                       "path_ll_correlation": _path_ll_correlation(rows),
                       "post_hoc_poke_vs_best_on_test": _compare(config, rows),
                       "poke_vs_sr_smc": _versus_sr_smc(config, rows),
                       "declared": {r: _versus(config, rows, r) for r in DECLARED_RIVALS},
                       "goals": _goals(config, rows, out[name]["preconditions"]),
                       "accounting": _accounting(config, rows, out[name]["preconditions"]),
                       "comparison": {str(n): summary_comparison(c) for n in config.particles
                                      if (c := analysis(config, rows, n, out[name].get(
                                          "tuning", {}).get("tuned"))) is not None},
                       "decoders": {k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")}
                                    for k, v in rows.items()}}
    headline_mean = {}
    for n in config.particles:
        elig = [t for t in tasks.values() if t["preconditions"][str(n)]["headline"]]
        headline_mean[str(n)] = {
            "tasks": [t["task"] for t in elig],
            **{r: float(np.mean([t["declared"][r][str(n)]["difference"] for t in elig]))
               if elig and all(str(n) in t["declared"][r] for t in elig) else None
               for r in DECLARED_RIVALS}}
    summary = {"tasks": tasks, "protocol": dict(config.protocol),
               "declared_mean_over_headline_tasks": headline_mean,
               "post_hoc_mean_gain_over_best_on_test": {n: float(np.mean(
                   [t["post_hoc_poke_vs_best_on_test"][str(n)]["gain"]
                    for t in tasks.values()])) for n in config.particles
                   if all(str(n) in t["post_hoc_poke_vs_best_on_test"]
                          for t in tasks.values())},
               "num_problems": config.num_problems}
    if "sale" in out:
        summary["sale_attention"] = out["sale"]
    return summary


def pareto_front(points) -> list[tuple[float, float]]:
    """The (cost, accuracy) points no other point beats at lower or equal cost, by cost.

    Example:
      >>> pareto_front([(1, 0.5), (2, 0.4), (4, 0.7), (4, 0.6), (8, 0.7)])
      [(1, 0.5), (4, 0.7)]
    """
    front, best = [], -np.inf
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if y > best:
            front.append((x, y))
            best = y
    return front


def _plot_family(name: str, row: dict) -> str:
    """A row's series in the plots: its family, best-of-N under a value rule apart."""
    if row["family"] == "best_of_n" and name != f"best_of_{row['particles']}":
        return "best_of_n_selector"
    return row["family"]


def _plot(config, summary, out, workdir):
    """accuracy_vs_nfe.png: one column per task, rows = the two NFE conventions (per-particle
    passes; batched passes, N particles = 1 pass), the Pareto front of accuracy against
    NFE dashed; every decoder labelled (``plots.label_points``: labels of crowded points
    stacked beside them with leader lines, none overlapping), particle families joined over
    N, coinciding series offset (x multiplied by 1.04^j) with distinct markers; ticks at
    powers of two, and between them on a narrow axis (``plots.log2_ticks``).
    path_ll_vs_accuracy.png: mean Path LL vs accuracy, every decoder labelled."""
    del out
    tasks = summary["tasks"]
    styles = {"greedy": "o", "best_of_n": "s", "best_of_n_selector": "P", "smc": "^",
              "sr_smc": "D", "poke_smc": "*"}
    fig, axes = plots.item_grid(len(tasks), 2, width=4.4, height=3.6)
    for col, (name, t) in enumerate(tasks.items()):
        for row, (key, xlabel) in enumerate((("nfe", "NFE per problem (per-particle passes)"),
                                             ("nfe_batched", "batched denoiser passes"))):
            ax = axes[col][row]
            for j, (fam, marker) in enumerate(styles.items()):
                pts = sorted((v[key] * 1.04 ** j, v["accuracy"], v["accuracy_ci"], k)
                             for k, v in t["decoders"].items() if _plot_family(k, v) == fam)
                if not pts:
                    continue
                x, y, ci, names = zip(*pts, strict=True)
                err = np.abs(np.array(ci).T - np.array(y))
                ax.errorbar(x, y, yerr=err, marker=marker,
                            ls="none" if fam in ("greedy", "best_of_n_selector") else "-",
                            label=fam, capsize=2, ms=8 if fam == "poke_smc" else 5, alpha=0.85)
                plots.label_points(ax, x, y, names)
            front = pareto_front([(v[key], v["accuracy"]) for v in t["decoders"].values()])
            if len(front) > 1:
                ax.step(*zip(*front, strict=True), where="post", color="0.5", lw=1, ls="--",
                        zorder=0, label="Pareto front")
            ax.set_xscale("log")
            plots.log2_ticks(ax.xaxis)
            ax.set(xlabel=xlabel, ylabel="accuracy", title=name)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    plots.save(fig, os.path.join(workdir, "accuracy_vs_nfe.png"),
               caption=f"Points: accuracy on {config.num_problems} test problems per task; "
               f"bars: 95% percentile-bootstrap interval ({config.bootstrap} resamples); "
               "families offset in x by 4% steps so coinciding series stay visible.")
    fig, axes = plots.figure(len(tasks), width=4.2)
    for ax, (name, t) in zip(axes, tasks.items(), strict=True):
        for k, v in t["decoders"].items():
            ax.scatter(v["path_ll"], v["accuracy"], marker=styles[_plot_family(k, v)])
        plots.label_points(ax, [v["path_ll"] for v in t["decoders"].values()],
                           [v["accuracy"] for v in t["decoders"].values()], list(t["decoders"]))
        r = t["path_ll_correlation"]["pearson_across_decoders"]
        ax.set(xlabel="mean Path LL of the output", ylabel="accuracy", title=f"{name}: r = {r:.2f}")
    plots.save(fig, os.path.join(workdir, "path_ll_vs_accuracy.png"))
    _plot_smc_diagnostics(config, tasks, workdir)


def _plot_smc_diagnostics(config, tasks, workdir):
    """smc_diagnostics.png, one column per task: (1) share of problems that resampled at
    least once, per SMC family and N; (2) histogram of the per-problem minimum ESS / N at
    the largest N (Path-LL SMC, POKE-SMC, SR-SMC); (3) within-problem ranking accuracy on
    mixed problems over the path (line style: random, Path LL, Path LL + POKE; colour: N)."""

    fams = ("smc", "poke_smc", "sr_smc")
    ns = sorted(config.particles)
    n_max = ns[-1]
    shares = {name: {fam: [t["decoders"][f"{fam}_{n}"]["resampling"]["problems_resampled_share"]
                           if f"{fam}_{n}" in t["decoders"] else 0.0 for n in ns]
                     for fam in fams} for name, t in tasks.items()}
    # Row 1 only when some run resampled: an all-zero row is a sentence in the caption.
    first = int(any(x > 0 for by in shares.values() for v in by.values() for x in v))
    fig, axes = plots.item_grid(len(tasks), 2 + first, width=4.4, height=3.5)
    for col, (name, t) in enumerate(tasks.items()):
        dec = t["decoders"]
        if first:
            ax = axes[col][0]
            width, top = 0.8 / len(fams), 0.0
            for j, fam in enumerate(fams):
                ax.bar(np.arange(len(ns)) + (j - 1) * width, shares[name][fam], width,
                       label=fam)
                top = max(top, *shares[name][fam])
            ax.set_xticks(np.arange(len(ns)), [f"N={n}" for n in ns])
            ax.set_ylim(0, max(0.05, 1.3 * top))
            ax.set(ylabel="share of problems that resampled")
        ax = axes[col][first]
        centres = (MIN_ESS_BINS[:-1] + MIN_ESS_BINS[1:]) / 2
        width = (MIN_ESS_BINS[1] - MIN_ESS_BINS[0]) / 4
        for j, fam in enumerate(fams):
            if f"{fam}_{n_max}" in dec:
                ax.bar(centres + (j - 1) * width, dec[f"{fam}_{n_max}"]["min_ess_histogram"],
                       width, label=f"{fam}_{n_max}")
        ax.axvline(0.5, color="k", lw=0.8, ls=":", label="ESS = N/2")
        ax.set(xlabel=f"min ESS / N over the path (N = {n_max})", ylabel="problems")
        ax = axes[col][first + 1]
        for i, (n, p) in enumerate(sorted(t["preconditions"].items(), key=lambda kv: int(kv[0]))):
            fr = sorted(p["ranking_on_mixed"], key=float)
            for sel, ls in (("random", ":"), ("path_ll", "-"), ("path_ll_plus_poke", "--")):
                ys = [p["ranking_on_mixed"][f][sel] for f in fr]
                if any(y is None for y in ys):
                    continue
                ax.plot([float(f) for f in fr], ys, ls=ls, marker="o", ms=3, color=f"C{i}",
                        label=f"N={n} {sel}")
        ax.set(xlabel="fraction of the path decoded", ylim=(0, 1),
               ylabel="top particle correct (mixed problems)")
        for row, ax in enumerate(axes[col]):  # above the panel (the top one: the task's name)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2,
                          frameon=False, title=None if row else name, title_fontsize=10)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    rows = ("Row 1: share of problems that resampled. " if first else
            "No SMC run resampled on any problem (that row is left out). ")
    plots.save(fig, os.path.join(workdir, "smc_diagnostics.png"),
               caption=f"{config.num_problems} test problems per task. {rows}"
               f"Min ESS row: N = {n_max}; ranking row: problems where some of the N "
               "independent particles are right and some wrong (random = the share of right "
               "particles).")


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}"


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for results/REPORT.md: per task the decoders' accuracy at each N,
    the settings, resampling and preconditions; then the declared comparisons, the rows
    against the paper's reported gain and the post-hoc row."""
    rows = []
    for name, t in summary["tasks"].items():
        d = t["decoders"]
        for n, p in t["preconditions"].items():
            cells = [d.get(k) for k in ("confidence", "threshold", f"best_of_{n}",
                                        f"sr_smc_{n}", f"smc_{n}", f"poke_smc_{n}")]
            rows.append((f"accuracy {name} N={n} (NFE per problem): greedy / threshold / "
                         "best-of-N / SR-SMC / Path-LL SMC / POKE-SMC; pass@N",
                         " / ".join("-" if c is None else f"{c['accuracy']:.3f} "
                                    f"({c['nfe']:.3g})" for c in cells)
                         + f"; {p['pass_at_n']:.3f}"))
            sel = [k for k in ("greedy_blocks", *(f"best_of_{n}_{r}" for r in ("value", "mix")))
                   if k in d]
            if sel:
                rows.append((f"accuracy {name} N={n}: " + " / ".join(sel),
                             " / ".join(f"{d[k]['accuracy']:.3f}" for k in sel)))
            acct = t.get("accounting", {})
            got = [(k, acct[k]) for k in (f"best_of_{n}", *(f"best_of_{n}_{r}" for r in
                                                            ("value", "mix")),
                                          f"smc_{n}", f"poke_smc_{n}") if k in acct]
            if got:
                rows.append((f"per problem {name} N={n} vs {got[0][1]['greedy']}: "
                             "greedy-right/decoder-wrong : reverse, selection loss "
                             "(pass@N - accuracy)", "; ".join(
                                 f"{k} {a['greedy_right_decoder_wrong']}:"
                                 f"{a['decoder_right_greedy_wrong']}, "
                                 + ("-" if a["selection_loss"] is None
                                    else f"{a['selection_loss']:.3f}") for k, a in got)))
            diag = [(k, d[k]["diagnostics"]) for k in (f"smc_{n}", f"poke_smc_{n}")
                    if "diagnostics" in d.get(k, {})]
            if diag:
                rows.append((f"weights {name} N={n}: distinct partial paths (mean over steps "
                             "after the first), share of problems with one path at some step, "
                             "the term driving the weights' variance",
                             "; ".join(f"{k} {g['mean_distinct_paths']:.2f}, "
                                       f"{g['one_path_share']:.2f}, {g['driver']}"
                                       for k, g in diag)))
        tu = t.get("tuning", {}).get("tuned")
        if tu and "smc" in tu:
            def fam(s):
                twist = s.get("twist_scale")
                sel = s["select"] + (f" {s.get('select_mix', 0.5):g}" if s["select"] == "mix"
                                     else "")
                return (f"beta {s['weight_scale']:g}, ESS < {s['ess_threshold']:g} N, "
                        f"{s['schedule']}, {s.get('resampler', 'multinomial')}, twist "
                        f"{'beta' if twist is None else f'{twist:g}'}, policy "
                        f"{s.get('policy', 'confidence')}, by {sel}")
            rows.append((f"settings {name} (validation-tuned where the preset has a grid): "
                         "blocks, position T, SR-SMC T; Path-LL SMC; POKE-SMC",
                         f"{tu['particle_blocks']} ({t['particle_block_length']} tokens), "
                         f"{tu['position_temperature']:g}, {tu['sr_smc_temperature']:g}; "
                         f"{fam(tu['smc'])}; {fam(tu['poke_smc'])}"))
        shares = []
        for n in t["preconditions"]:
            got = [t["decoders"].get(f"{f}_{n}", {}).get("resampling") for f in
                   ("smc", "poke_smc", "sr_smc")]
            if any(got):
                shares.append(f"N={n} " + " / ".join(
                    "-" if g is None else f"{g['problems_resampled_share']:.2f}" for g in got))
        if shares:
            rows.append((f"resampled share {name}: problems with >= 1 resampling, Path-LL SMC "
                         "/ POKE-SMC / SR-SMC", "; ".join(shares)))
        for n, p in t["preconditions"].items():
            r = p["ranking_on_mixed"].get("0.5") or next(iter(p["ranking_on_mixed"].values()))
            f = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
            rows.append((f"preconditions {name} N={n}: greedy / pass@N / best-of-N / "
                         "ESS<N/2 share / mid-path top-1 on mixed (random, Path LL, +POKE)",
                         f"{p['greedy']:.3f} / {p['pass_at_n']:.3f} / {p['best_of_n']:.3f} / "
                         f"{f(p['ess_below_half_share'])} / {f(r['random'])}, "
                         f"{f(r['path_ll'])}, {f(r['path_ll_plus_poke'])} -> "
                         + ("headline" if p["headline"] else "ceiling")))
    for n, h in summary["declared_mean_over_headline_tasks"].items():
        if not h["tasks"]:
            rows.append((f"declared POKE-SMC - rivals, N={n}, mean over headline tasks",
                         "no task passes the preconditions"))
            continue
        rows.append((f"declared POKE-SMC - SR-SMC / best-of-N / Path-LL SMC / greedy, N={n}, "
                     "mean over "
                     f"headline tasks ({', '.join(h['tasks'])}), pts",
                     " / ".join("-" if h[r] is None else _pct(h[r]) for r in DECLARED_RIVALS)))
    for n in summary["declared_mean_over_headline_tasks"]:
        cells = []
        for name, t in summary["tasks"].items():
            x = t["declared"]["sr_smc"].get(n)
            if x is None:
                continue
            tag = "" if t["preconditions"][n]["headline"] else " (ceiling)"
            cells.append(f"{name}{tag} {_pct(x['difference'])} [{_pct(x['difference_ci'][0])}, "
                         f"{_pct(x['difference_ci'][1])}] at NFE {x['nfe']['poke_smc']:.0f} vs "
                         f"{x['nfe']['sr_smc']:.1f}")
        if cells:
            rows.append((f"POKE-SMC - SR-SMC, N={n}, same T and blocks (paired, pts; NFE per "
                         "problem, per-particle passes)", "; ".join(cells)))
    yes = lambda x: "-" if x is None else ("met" if x else "not met")  # noqa: E731
    for name, t in summary["tasks"].items():
        for n, g in t.get("goals", {}).items():
            worst = min(g["particle_minus_greedy"], key=g["particle_minus_greedy"].get)
            rows.append((
                f"{name} N={n}: lowest particle decoder - greedy; POKE-SMC - best of "
                "greedy (also under blocks) / best-of-N (every selector) / SR-SMC (paired, "
                "pts; the paper reports +2 to +3); goals: >= +2 with CI above 0, selection "
                "loss halved, greedy losses <= 1/4 of the reverse",
                f"{worst} {_pct(g['particle_minus_greedy'][worst])}; "
                f"{_pct(g['poke_minus_best_rival'])} vs {g['best_rival']} "
                f"[{_pct(g['poke_minus_best_rival_ci'][0])}, "
                f"{_pct(g['poke_minus_best_rival_ci'][1])}]"
                + ("" if g["has_headroom"] else " (no headroom)")
                + f"; {yes(g.get('goal_met'))} / {yes(g.get('selection_loss_halved'))} / "
                f"{yes(g.get('greedy_losses_quarter'))}"))
    for n, g in summary["post_hoc_mean_gain_over_best_on_test"].items():
        rows.append((f"post hoc (rival chosen on the test set): POKE-SMC N={n} - best other "
                     "decoder at <= NFE, mean over all tasks", f"{_pct(g)} pts"))
    return rows


# ------------------------------------------------------------------ TensorBoard series


def _history(config, unit, workdir):
    candidates = []
    try:
        shipped = dllm_models.shipped_path(config, unit) if config is not None else ""
        if shipped:
            candidates.append(shipped + "_history.json")
    except Exception:  # noqa: BLE001 - optional
        pass
    candidates.append(os.path.join(os.path.abspath(workdir), "models", f"{unit}_history.json"))
    for path in candidates:
        if os.path.exists(path):
            with open(path) as f:
                return json.load(f)
    return None


def tb_scalars(config, unit, result, workdir):
    """TensorBoard series of a unit (``study.Experiment.scalars``): accuracy, NFE and Path LL
    vs particles per decoder family, ESS traces, the POKE fit, the denoiser's losses;
    the SALE check."""
    if not isinstance(result, dict):
        return {}
    out = {}
    if "decoders" in result:
        rows = result["decoders"]
        fams: dict[str, list] = {}
        for dname, row in rows.items():
            fams.setdefault(row.get("family", dname), []).append((dname, row))
        for fam, items in fams.items():
            parts = [int(r.get("particles", 1)) for _, r in items]
            distinct = len(set(parts)) == len(parts)
            groups = [(fam, items)] if distinct else [(d, [(d, r)]) for d, r in items]
            for run, its in groups:
                its = sorted(its, key=lambda dr: int(dr[1].get("particles", 1)))
                steps = np.array([int(r.get("particles", 1)) for _, r in its])
                for field in ("accuracy", "nfe", "path_ll"):
                    if all(field in r for _, r in its):
                        out[(run, f"dllm/{field}_vs_particles")] = (
                            steps, np.array([float(r[field]) for _, r in its]))
        for dname, row in rows.items():  # SMC health along the decode, per decoder
            if "ess_trace" in row:
                trace = np.asarray(row["ess_trace"], np.float64)
                out[(dname, "dllm/mean_ess_over_n_vs_step")] = (np.arange(len(trace)), trace)
        fit = result.get("poke_fit")
        if isinstance(fit, dict):
            for k in ("mse", "r2"):
                if k in fit:
                    out[f"dllm/poke_fit_{k}"] = np.array([float(fit[k])])
        hist = _history(config, unit, workdir)
        if hist and "step" in hist:
            for k in ("train_loss", "eval_loss"):
                if k in hist:
                    out[("denoiser", f"dllm/denoiser_{k}")] = (np.asarray(hist["step"]),
                                                               np.asarray(hist[k]))
    elif unit == "sale" and isinstance(result.get("results"), dict):
        for name, r in result["results"].items():
            for k, v in r.items():
                out[(name, f"dllm/sale_{k}")] = np.array([float(v)])
    return out


def _validate(config) -> None:
    """The library's config checks, then ``config.pretrained_dir`` must name a folder (or
    be "" to train) before any unit runs."""
    config_lib.validate_config(config)
    artifacts.pretrained_root(config)


CAPTION = ("Accuracy of the decoders on held-out problems with exact verifiers (higher is "
           "better); POKE-SMC differences are POKE-SMC minus the rival in points, paired "
           "bootstrap CIs.")

EXPERIMENT = study.Experiment(name="dllm", validate=_validate, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline,
                              scalars=tb_scalars, caption=CAPTION)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/dllm.py:quick")
