"""Particle decoders: best-of-N, Path-LL SMC without lookahead, and POKE-SMC.

Every problem carries N particles (flattened to a [B * N, L] batch for the denoiser). One
step of SMC follows blackjax's ``smc/base.py`` (reweight, resample, mutate):

1. one denoiser pass on all particles gives logits (and hidden states);
2. *twist* (POKE-SMC only): log w += beta_V (V(s_t) - V(s_{t-1})), V the POKE value of
   the partial trajectory (twisted SMC), beta_V = ``twist_scale`` (default: beta);
3. where the resampling schedule allows it at this step and ESS < ``ess_threshold * N``
   the problem's particles are resampled (ancestor indices from ``jaxlab.core.smc``;
   logits travel with their particle, so resampling costs no extra NFE) and its weights
   reset to their mean (the ``"distinct"`` resampler: below);
4. *mutate*: a sampled unmasking step (temperature ``T``) commits tokens; beta times its
   Path LL increment is added to log w.

**POKE-SMC as twisted SMC (what the weighted particles target).** A path is s_0 -> s_1 ->
... -> s_S (S = ``steps``); s_t is the answer after t steps (committed tokens and their
order). Everything below is per problem, beta = ``weight_scale``, beta_V =
``twist_scale`` (None: beta, the paper's single scale; a separate beta_V lets a declared
grid search the twist's temperature on its own, continuously).

* Proposal M_t(s_t | s_{t-1}) (policy + temperature + blocks): at every masked position
  i, x0_i ~ softmax(log p(. | s_{t-1}) / T) independently (mask token excluded); the
  policy scores the positions (``confidence``: the *untempered* p(x0_i | s_{t-1})); the
  k_t highest-scoring still-masked positions of step t's semi-AR block are committed
  (k_t from ``decoding.transfer_schedule``; ties go to the lower position). q(s_{0:t}) =
  prod_{u <= t} M_u, a sum over the unused x0 of the uncommitted positions.
* Path LL increment l_t = sum_{i in Q_t} log p(x_i | s_{t-1}) (untempered); L_t = sum_{u
  <= t} l_u, so L_S = log p(x; tau), the Path LL of the order tau.
* Twist V_t = V(s_t) from the hidden states of the pass on s_t (step t + 1's pass, so no
  extra NFE); V(s_0) is the same for all particles of a problem and V(s_S) := 0 (the last
  step removes it).
* Incremental weight log G_t = beta l_t + beta_V (V_t - V_{t-1}). **No proposal
  correction** p / q: the paper's weights (and the official self-rewarding SMC's) are
  Path-LL increments, a self-reward, not an importance ratio (``Info.proposal_correction``
  reports l_t - log q of each commit beside them).
* Intermediate targets (weighted particles just before the resampling of step t, i.e.
  after t commits): gamma_t(s_{0:t}) proportional to q(s_{0:t}) exp(beta L_t + beta_V V_t).
* Final target: pi(s_{0:S}) proportional to q(s_{0:S}) p(x; tau)^beta; its marginal on
  answers is pi(x) proportional to sum_tau q(x, tau) p(x; tau)^beta (at T = 1, beta = 1
  and a token-independent order: p(x)^2 / Z). The twist telescopes out of the final
  weights, so it changes only *which* particles survive resampling, never pi; resampling
  (any schedule, any resampler) leaves every gamma_t unchanged.

**The path proposal** (``proposal="path"``, ours; ``decoding`` docstring). M_t draws the
k_t committed positions Q_t as a Gumbel-top-k (Plackett-Luce, without replacement) over
log max_v p(v | s_{t-1}) / tau_pos among the eligible positions, and writes the argmax
token there (or a draw from softmax(log p / T) at token temperature T > 0). So q(s_t |
s_{t-1}) = PL(Q_t) * prod_{i in Q_t} q_T(x_i), the targets above hold with this q, and
particles differ in their order rather than in tempered tokens.

``tests/dllm/test_smc.py`` checks gamma_t (with the twist) and pi by enumeration on a
context-dependent toy denoiser with two blocks, T != 1, beta != 1, with and without
resampling and for each resampling schedule, for both proposals (the path proposal with
two positions per step, so the Plackett-Luce set law is exercised).

**Greedy reference** (``greedy_reference=True``, ours): particle 0 of every problem takes
the policy's deterministic step (top-k positions of ``decoding.policy_scores`` on the
argmax tokens, the very scores ``decoding.decode`` ranks) and is its own ancestor at every
resampling, while the other N - 1 are drawn from all N by weight, as the reference path
of conditional SMC (Andrieu, Doucet and Holenstein 2010). Greedy's answer is then always
among the candidates: the decoders cannot lose greedy's path by resampling it away. With
semi-AR blocks the reference is ``decoding.decode``'s path under the *same* blocks, steps
and policy (tested with coarse blocks): the greedy decoder to report beside the particle
decoders is that blocked one, not an unblocked greedy. The weighted particles no longer
follow gamma_t exactly (one path is fixed); this is a search device, tested for what it
promises (the reference equals ``decoding.decode``'s path and survives), not against the
targets.

**Distinct-path resampling** (``resampler="distinct"``, ours; ``distinct_resample``).
Particles whose partial answers agree at every position (``Info.distinct_paths``) form a
group; the group's weight is the sum of its members' and its representative the member
with the highest Path LL (particle 0 under the greedy reference). Every representative
keeps its slot, so no distinct path is dropped and the problem holds min(N, U) = U
distinct paths after a resampling (U distinct before: never more than N); each of the
N - U duplicates' slots draws a representative independently with probability
proportional to the group weight, and every copy of a group carries the group weight
divided by its number of copies. What it keeps: the weighted measure on the current
partial answers exactly (every partial answer keeps its total weight), hence gamma_t's
marginal on s_t and, as the proposal and all later weights depend on the partial answer
only, pi's marginal on answers (tested by enumeration like the other resamplers). What it
does not: gamma_t on histories (a merged group carries one representative's order and
Path LL) nor the equal weights of ordinary resampling (the weights are not reset). It is
a search device against path collapse, like the greedy reference: with all N paths
distinct a resampling is the identity, and only duplicates are redirected.

**Output** (``select``; ``selection_scores``): the highest Path LL (``"path_ll"``, the
paper's), the highest final log weight (``"weight"``: after a resampling every weight is
reset to the mean, so this ranks by the Path LL gained since the problem's last
resampling), the value estimate (``"value"``, ours), a mix (``"mix"``, ours) or the last
pass's value (``"last_value"``, ours). V(s_S) = 0, so the twist enters ``"path_ll"`` and
``"weight"`` only through which particles survived.

* ``"value"``: the mean over the steps t = 1 .. S of L_t + V(s_t) along the particle's
  path (``State.value_sum`` / S; L_S + V(s_S) = L_S closes it). Each L_t + V(s_t) is the
  head's prediction, made at step t, of the final Path LL; siblings' mid-path predictions
  rank their correctness better than the Path LL so far can, and averaging over every
  step needs no tuned fraction, uses every pass the decoder makes anyway (no extra NFE)
  and damps the head's per-step noise, while the last term keeps the realised Path LL in.
* ``"mix"``: ``select_mix`` * z(value estimate) + (1 - ``select_mix``) * z(Path LL), z
  standardised over the problem's N particles (0 when they all agree); a declared convex
  mix, ``select_mix`` in [0, 1].
* ``"last_value"``: V(s_{S-1}) along the particle's path, the value of the last pass
  (``State.last_value``; the head's most informed reading, one step before the end, no
  extra NFE). It leaves the Path LL out, so a head that predicts something other than the
  Path LL (``correctness.make_twist_fn``: log P(correct | s_t)) selects on its own.

Every rule runs in ``best_of_n`` as well (a ``value_fn`` there serves the selection only:
no twist, no resampling), so what SMC adds is measured apart from what the selector adds.
Ties go to the lowest particle (the greedy reference).

**The value choosing positions** (``policy="value"``, ours; ``decoding`` docstring): the
head's per-masked-position predictions (``position_value_fn``,
``poke.make_position_value_fn``) from the same pass rank the positions, mixed with the
log-confidence by ``policy_mix``. The targets above hold with that policy's q.

**Diagnostics** (``Info``, every step, every problem; no extra NFE): ``distinct_paths``
after the resampling, ``resampled``, the weight terms split (``twist_increment`` beta_V
(V_t - V_{t-1}), ``path_ll_increment`` beta l_t, and, reported only,
``proposal_correction`` l_t - log q of the commit), each with its variance across the N
particles, and per particle V(s_t) and L_t (``value``, ``path_ll``): with ``ancestry``
(the slot each final particle descends from at every step) a caller ranks siblings by
L_t + V(s_t) at any step against the final particles' correctness.

**Resampling schedule** (``resample_schedule``; the ESS test applies at every allowed
step; step t resamples the particles after t commits):

* ``"every_step"`` (default; the paper's ESS < N/2 at every step): t = 1 .. S - 1;
* ``"block_ends"`` (SR-SMC's rule): the first step of every semi-AR block after the first
  (never with one block);
* ``"fractions"``: t = round(f * S) for f in ``resample_fractions`` (each in (0, 1);
  steps that round to 0 or S are dropped).

The last step removes the last twist, so the final log weights are beta * Path LL plus the
resampling resets. ``best_particle`` then returns the particle ``select`` ranks first.
Best-of-N is the same loop with no twist and no resampling. NFE = steps * N per problem
for all three.

What follows what: the paper (arXiv 2602.03496): Path LL increments plus the change of the
POKE value as the weight, ESS < N/2 resampling, best-particle output by Path LL; its
algorithm box is not in our corpora, so the target above is ours, written down and tested.
The official self-rewarding SMC code (Algolzw/self-rewarding-smc, ``sr_smc``): untempered
Path-LL increments as the weight with no proposal correction, multinomial resampling with
the weights reset, the highest-Path-LL output. The token proposal is LLaDA's ``generate``
(low-confidence remasking, semi-AR blocks). Ours: the path proposal, the greedy reference,
beta and a separate twist scale, the schedule options, the distinct-path resampler, the
``"weight"``, ``"value"`` and ``"mix"`` selections, the ``value`` position policy, the
diagnostics, per-problem batching, the twist read from the same pass.

API (``jaxlab.core.types.Algorithm``; the key always first):

* ``SMCConfig``: every option of the decoders below in one NamedTuple (the proposal, the
  policy, the weights, resampling, the output selection); each function takes
  ``config=SMCConfig(...)`` and, as a shorthand, its fields by name (``smc_config``);
* ``smc(denoise_fn, *, gen_length, num_particles, mask_id, value_fn=None, config=None,
  **options) -> Algorithm``: checks and binds the settings;
* ``init(key, prompt [B, P], *, gen_length, num_particles, mask_id) -> State``: N all-mask
  particles per problem (the key is unused: nothing is random before the first step);
* ``step(key, state, denoise_fn, *, gen_length, mask_id, ...) -> (State, Info)``: steps
  1-4 above for every particle; ``steps`` calls finish the decode (the step index is read
  off the state, ``decoding.steps_done``);
* ``run_particles(key, denoise_fn, prompt, gen_length, ...)`` is ``lax.scan`` of ``step``
  over ``jax.random.split(key, steps)``;
  ``smc_decode`` = ``run_particles`` + ``best_particle``; ``best_of_n`` without resampling
  and without the twist; ``ancestry(info.ancestors)`` the genealogy of the final particles.

Checks: eagerly at the Python boundary (``smc`` and its ``init``, hence ``run_particles``,
``smc_decode`` and ``best_of_n``; see also ``decoding``'s docstring): ``prompt`` 2-D
integer ids in [0, vocab_size) without the mask id; ``num_particles`` a positive int;
``resampler`` in ``RESAMPLERS`` or ``"distinct"``; ``resample_schedule`` in ``SCHEDULES``
(and ``resample_fractions`` in (0, 1)); ``policy`` in ``decoding.POLICIES``, or
``"value"`` with a ``position_value_fn`` returning [M, A] floats; ``policy_mix`` and
``select_mix`` in [0, 1]; ``ess_threshold`` in [0, 1]; ``temperature`` and
``position_temperature`` finite and >= 0; ``proposal`` in ``decoding.PROPOSALS``;
``select`` in ``SELECTIONS`` (``"value"`` and ``"mix"`` with a ``value_fn``);
``greedy_reference`` with a deterministic policy; ``weight_scale`` and ``twist_scale``
finite and >= 0; the step / block schedule.
The module-level ``step`` assumes checked settings. Traced values: the log weights are
built inside the step (from the denoiser's logits, ``value_fn`` and ``weight_scale``), so
each step records ``Info.nonfinite_weights`` [B] (a NaN or +inf log weight, or all of a
problem's particles at -inf). ``run_particles`` and hence ``smc_decode`` / ``best_of_n``
raise a ValueError on that flag when they run eagerly (concrete outputs); under a caller's
``jit`` they cannot, and the caller must check ``info.nonfinite_weights`` on the returned
info (``raise_if_nonfinite(info)``).
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import checked, validation
from jaxlab.core import smc as smc_lib
from jaxlab.core.keys import as_key
from jaxlab.core.types import Algorithm, Array, PRNGKey
from jaxlab.dllm import decoding
from jaxlab.dllm.decoding import DecodeResult, DecodeState

__all__ = ["ValueFn", "RESAMPLERS", "SCHEDULES", "SELECTIONS", "SMCConfig", "smc_config",
    "State", "Info", "init", "step",
    "smc", "run_particles", "best_particle", "smc_decode", "best_of_n", "ancestry"]

checked.declare("jaxlab.dllm.path_smc.run_particles")

# value_fn(hidden [M, L, D], tokens [M, L]) -> [M] predicted remaining Path LL.
ValueFn = Callable[[Array, Array], Array]
RESAMPLERS = {"systematic": smc_lib.systematic, "stratified": smc_lib.stratified,
              "multinomial": smc_lib.multinomial, "residual": smc_lib.residual}
DISTINCT = "distinct"  # the distinct-path resampler (module docstring); not a core resampler
SCHEDULES = ("every_step", "block_ends", "fractions")


_OPTION_FIELDS = ("steps", "block_length", "policy", "policy_mix", "temperature", "proposal",
                  "position_temperature", "greedy_reference", "resample", "ess_threshold",
                  "resampler", "resample_schedule", "resample_fractions", "weight_scale",
                  "twist_scale")


class SMCConfig(NamedTuple):
    """The options of the particle decoders (module docstring), one object for ``smc``,
    ``step``, ``run_particles``, ``smc_decode`` and ``best_of_n``.

    Attributes:
      steps: denoising steps (None: ``gen_length``).
      block_length: semi-AR block length (None: the whole answer).
      policy, policy_mix: the unmasking policy (``decoding.POLICIES``, or ``"value"``: the
        head's per-position values mixed with the log-confidence by ``policy_mix``).
      temperature: the token temperature T (0: argmax).
      proposal: ``"tokens"`` or ``"path"`` (``decoding.PROPOSALS``).
      position_temperature: the order's temperature under ``"path"``.
      greedy_reference: particle 0 follows the policy's deterministic path and survives
        every resampling.
      resample: False gives best-of-N (independent particles).
      ess_threshold: resample when ESS < ess_threshold * N.
      resampler: one of ``RESAMPLERS`` or ``"distinct"``.
      resample_schedule, resample_fractions: when the ESS test may resample
        (``SCHEDULES``).
      weight_scale: beta >= 0 of the Path-LL term.
      twist_scale: beta_V >= 0 of the twist (None: ``weight_scale``).
      select, select_mix: the output rule (``SELECTIONS``; ``smc_decode`` and
        ``best_of_n`` only).
    """

    steps: int | None = None
    block_length: int | None = None
    policy: str = "confidence"
    policy_mix: float = 1.0
    temperature: float = 1.0
    proposal: str = "tokens"
    position_temperature: float = 1.0
    greedy_reference: bool = False
    resample: bool = True
    ess_threshold: float = 0.5
    resampler: str = "multinomial"
    resample_schedule: str = "every_step"
    resample_fractions: tuple = (0.5,)
    weight_scale: float = 1.0
    twist_scale: float | None = None
    select: str = "path_ll"
    select_mix: float = 0.5


def smc_config(config: SMCConfig | None = None, **options) -> SMCConfig:
    """``config`` (default ``SMCConfig()``) with the fields named in ``options`` replaced.

    Raises:
      TypeError: ``config`` is not an ``SMCConfig``, or an option is not one of its fields.
    """
    if config is None:
        config = SMCConfig()
    elif not isinstance(config, SMCConfig):
        raise TypeError(f"`config` must be a path_smc.SMCConfig, got {type(config).__name__}.")
    unknown = sorted(set(options) - set(SMCConfig._fields))
    if unknown:
        raise TypeError(f"unexpected options {unknown}: the particle decoders take "
                        f"SMCConfig's fields {SMCConfig._fields}.")
    return config._replace(**options) if options else config


def _options(config: SMCConfig) -> dict:
    return {f: getattr(config, f) for f in _OPTION_FIELDS}



def resample_steps(gen_length: int, steps: int | None = None, block_length: int | None = None,
                   schedule: str = "every_step",
                   fractions: tuple[float, ...] = (0.5,)) -> np.ndarray:
    """Steps at which the ESS test may resample (module docstring, resampling schedule).

    Args:
      gen_length, steps, block_length: the step plan (``decoding.step_plan``).
      schedule: one of ``SCHEDULES``.
      fractions: for ``"fractions"``: path fractions, each in (0, 1).

    Returns:
      [steps] bool; entry t: resampling allowed before step t's commit (after t commits).

    Raises:
      ValueError: naming ``resample_schedule`` or ``resample_fractions``.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"`resample_schedule` must be one of {SCHEDULES}, got {schedule!r}.")
    steps, _, _, blocks = decoding.step_plan(gen_length, steps, block_length)
    t = np.arange(steps)
    if schedule == "every_step":
        return t >= 1
    if schedule == "block_ends":
        return np.concatenate([[False], blocks[1:] != blocks[:-1]])
    try:
        fr = np.asarray(tuple(fractions), np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"`resample_fractions` must be numbers in (0, 1), got "
                         f"{fractions!r}.") from e
    if fr.ndim != 1 or fr.size == 0 or not np.all((fr > 0) & (fr < 1)):
        raise ValueError(f"`resample_fractions` must be a non-empty tuple of numbers in "
                         f"(0, 1), got {fractions!r}.")
    at = np.rint(fr * steps).astype(int)
    return np.isin(t, at[(at >= 1) & (at <= steps - 1)])


class State(NamedTuple):
    """Particles of B problems.

    Attributes:
      decode: DecodeState over [B * N] particles.
      log_weights: [B, N] unnormalised log weights.
      value: [B, N] POKE value of the current partial trajectory (0 without lookahead).
      value_sum: [B, N] sum over the steps so far of L_t + V(s_t) (t >= 1; plus L_S once
        the decode is done) along each particle's path: the ``"value"`` selection's estimate
        (module docstring). None in a State built by hand (selections by Path LL and weight
        only).
      last_value: [B, N] V of the latest pass along each particle's path, kept after the
        last step (where ``value`` is zeroed): V(s_{S-1}) once the decode is done, the
        ``"last_value"`` selection's score. None in a State built by hand.
    """

    decode: DecodeState
    log_weights: Array
    value: Array
    value_sum: Array | None = None
    last_value: Array | None = None


class Info(NamedTuple):
    """What one step did, per problem ([B]) and per particle ([B, N]); stacked over the
    steps by ``run_particles`` ([steps, B, ...]). Step t (t commits done) makes the pass on
    s_t, adds the twist, may resample, then commits (module docstring, 1-4).

    Attributes:
      ancestors: [B, N] the slot (before this step's resampling) each particle continues.
      ess: [B] ESS before resampling.
      resampled: [B] bool, this step resampled the problem's particles.
      log_likelihood_increment: [B] log mean incremental weight.
      nonfinite_weights: [B] bool, after the step some log weight is NaN or +inf, or all
        are -inf (module docstring).
      distinct_paths: [B] int32, distinct partial paths after this step's resampling:
        particles count as one when their answers agree at every position (the same
        positions committed, the same tokens there, the rest masked), whatever order and
        Path LL brought them there.
      value: [B, N] V(s_t) of each particle before the resampling (0 without
        ``value_fn``).
      path_ll: [B, N] L_t of each particle before the resampling.
      twist_increment: [B, N] twist_scale * (V(s_t) - V(s_{t-1})) added before the
        resampling (0 without ``value_fn``); the last step also removes twist_scale *
        V(s_{S-1}) after its commit, which is not included.
      path_ll_increment: [B, N] weight_scale * l_{t+1}, the weight term of this step's
        commit, per particle after the resampling (slot i continues ``ancestors[i]``).
      proposal_correction: [B, N] l_{t+1} - log q(s_{t+1} | s_t) of this step's commit:
        the model's log-prob of the committed tokens minus the proposal's log-prob of the
        commit (``decoding`` docstring; log q = 0 for the greedy reference's deterministic
        step). Reported only: the weights hold no proposal correction.
      twist_increment_var, path_ll_increment_var, proposal_correction_var: [B] their
        variances across the N particles of each problem.
    """

    ancestors: Array
    ess: Array
    resampled: Array
    log_likelihood_increment: Array
    nonfinite_weights: Array
    distinct_paths: Array
    value: Array
    path_ll: Array
    twist_increment: Array
    path_ll_increment: Array
    proposal_correction: Array
    twist_increment_var: Array
    path_ll_increment_var: Array
    proposal_correction_var: Array


def _info(ancestors, ess, resampled, distinct, **terms) -> Info:
    """An Info with the step-level fields; the per-particle terms default to zeros."""
    b, n = ancestors.shape
    per = {f: terms.get(f, jnp.zeros((b, n))) for f in (
        "value", "path_ll", "twist_increment", "path_ll_increment", "proposal_correction")}
    var = {f"{f}_var": jnp.var(per[f], axis=1) for f in (
        "twist_increment", "path_ll_increment", "proposal_correction")}
    return Info(ancestors, ess, resampled, terms.get("log_likelihood_increment", jnp.zeros(b)),
                terms.get("nonfinite_weights", jnp.zeros(b, bool)), distinct, **per, **var)


def _nonfinite(log_w: Array) -> Array:
    """[B] bool: a NaN / +inf log weight, or every particle of the problem at -inf."""
    return (jnp.any(jnp.isnan(log_w) | jnp.isposinf(log_w), axis=1)
            | jnp.all(jnp.isneginf(log_w), axis=1))


def check_value_fn(value_fn, denoise_fn, shape: tuple[int, int]) -> None:
    """``value_fn(hidden, tokens)`` returns [M] floats for tokens [M, L] (abstract
    evaluation, no forward pass); raises ValueError / TypeError naming ``value_fn``."""
    tokens = jax.ShapeDtypeStruct(tuple(shape), jnp.int32)
    _, hidden = jax.eval_shape(denoise_fn, tokens)
    out = jax.eval_shape(value_fn, hidden, tokens)
    if not hasattr(out, "shape") or tuple(out.shape) not in ((shape[0],), (shape[0], 1)):
        raise ValueError(f"`value_fn` must return one value per sequence, shape ({shape[0]},), "
                         f"for tokens of shape {tuple(shape)}, got "
                         f"{getattr(out, 'shape', type(out).__name__)}.")
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise TypeError(f"`value_fn` must return floating values, got {out.dtype}.")


def raise_if_nonfinite(info: Info) -> None:
    """ValueError if any step flagged non-finite log weights (``info`` must be concrete)."""
    flag = info.nonfinite_weights
    if isinstance(flag, jax.core.Tracer):
        return
    flag = np.asarray(flag)  # [steps, B]
    if flag.any():
        steps, probs = np.nonzero(flag)
        raise ValueError(
            f"SMC log weights became non-finite (NaN, +inf or all -inf) at step {steps[0]} for "
            f"{len(np.unique(probs))} problem(s) (first: {probs[0]}); check the `value_fn` "
            "outputs, the `denoise_fn` logits and `weight_scale`.")


def _ess(log_w: Array) -> Array:
    return jax.vmap(smc_lib.ess)(log_w)


def same_paths(decode: DecodeState, b: int, n: int) -> Array:
    """[B, N, N] bool: particles i and j of a problem hold the same partial answer (the
    ``Info.distinct_paths`` sense of "the same path")."""
    ans = decode.order.shape[1]
    tok = decode.tokens[:, -ans:].reshape(b, n, ans)
    return jnp.all(tok[:, :, None] == tok[:, None, :], axis=-1)


def _count_distinct(same: Array) -> Array:
    """[B] int32: the particles that are the first of their kind (``same`` [B, N, N])."""
    n = same.shape[-1]
    return jnp.sum(jnp.argmax(same, axis=-1) == jnp.arange(n), axis=-1).astype(jnp.int32)


def distinct_resample(key: PRNGKey, log_w: Array, same: Array, path_ll: Array,
                      keep_first: bool = False) -> tuple[Array, Array]:
    """The distinct-path resampler of one problem (module docstring).

    Particles with the same partial answer form a group; its weight W_g is the sum of its
    members' and its representative is the member with the highest Path LL (ties: the
    lowest slot; particle 0 under ``keep_first``). Every representative keeps its slot;
    each other slot (the duplicates', N - U of them for U groups) draws a representative
    independently with probability W_g / sum W; every copy of group g then carries
    W_g / c_g (c_g its copies), so each partial answer keeps its total weight exactly.

    Args:
      key: PRNG key.
      log_w: [N] log weights.
      same: [N, N] bool, ``same_paths`` of the problem.
      path_ll: [N] Path LL so far (the representative's choice).
      keep_first: particle 0 represents its group (the greedy reference's slot).

    Returns:
      (ancestors [N] int32, new log weights [N]).
    """
    n = log_w.shape[0]
    slots = jnp.arange(n)
    priority = path_ll.astype(jnp.float32)
    if keep_first:
        priority = priority.at[0].set(jnp.inf)
    rep = jnp.argmax(jnp.where(same, priority[None], -jnp.inf), axis=1)  # [N]
    is_rep = rep == slots
    merged = jax.nn.logsumexp(jnp.where(same, log_w[None], -jnp.inf), axis=1)  # [N]
    draw = jax.random.categorical(key, jnp.where(is_rep, merged, -jnp.inf), shape=(n,))
    anc = jnp.where(is_rep, slots, draw).astype(jnp.int32)
    copies = jnp.sum(anc[None, :] == slots[:, None], axis=1)  # [N] copies of each slot
    return anc, merged[anc] - jnp.log(copies[anc].astype(jnp.float32))


def resample_step(key: PRNGKey, state: State, logits: Array, *, ess_threshold: float,
                  resampler: str, allowed=True,
                  keep_first: bool = False) -> tuple[State, Array, Info]:
    """ESS-triggered per-problem resampling of particles (and their logits [B * N, L, V]);
    ``allowed`` (bool scalar, may be traced): the schedule permits resampling now;
    ``keep_first``: particle 0 of every problem keeps itself as its ancestor (the reference
    path of conditional SMC; the others are drawn from all N by weight); ``resampler`` one
    of ``RESAMPLERS`` or ``"distinct"`` (``distinct_resample``)."""
    b, n = state.log_weights.shape
    ess = _ess(state.log_weights)
    do = (ess < ess_threshold * n) & allowed
    same = same_paths(state.decode, b, n)
    if resampler == DISTINCT:
        idx, new_lw = jax.vmap(functools.partial(distinct_resample, keep_first=keep_first))(
            jax.random.split(key, b), state.log_weights, same,
            state.decode.path_ll.reshape(b, n))
    else:
        weights = jax.vmap(lambda lw: smc_lib.normalize_log_weights(lw)[0])(state.log_weights)
        idx = jax.vmap(lambda k, w: RESAMPLERS[resampler](k, w, n))(jax.random.split(key, b),
                                                                   weights)
        if keep_first:
            idx = idx.at[:, 0].set(0)
        mean_lw = jax.nn.logsumexp(state.log_weights, axis=1, keepdims=True) - jnp.log(n)
        new_lw = jnp.broadcast_to(mean_lw, (b, n))
    anc = jnp.where(do[:, None], idx, jnp.arange(n)[None])
    flat = (anc + n * jnp.arange(b)[:, None]).reshape(-1)
    gather = lambda x: x[flat]  # noqa: E731
    log_w = jnp.where(do[:, None], new_lw, state.log_weights)
    take = lambda x: None if x is None else jnp.take_along_axis(x, anc, axis=1)  # noqa: E731
    dec = jax.tree.map(gather, state.decode)
    after = jax.vmap(lambda s, a: s[a][:, a])(same, anc)
    info = _info(anc, ess, do, _count_distinct(after))
    return (State(dec, log_w, take(state.value), take(state.value_sum),
                  take(state.last_value)), gather(logits), info)


def init(key: PRNGKey, prompt: Array, *, gen_length: int, num_particles: int,
         mask_id: int) -> State:
    """N all-mask particles per problem of ``prompt`` [B, P], zero log weights and value."""
    as_key(key)  # checked; nothing is drawn here
    del key
    validation.check_ndim("prompt", prompt, 2)
    b = prompt.shape[0]
    dec = decoding.init_state(jnp.repeat(prompt, num_particles, axis=0), gen_length, mask_id)
    zeros = jnp.zeros((b, num_particles))
    return State(dec, zeros, zeros, zeros, zeros)


def _is_zero(x) -> bool:
    """``x`` is a concrete 0 (a traced scale is never skipped)."""
    try:
        return float(x) == 0.0
    except Exception:  # noqa: BLE001 - a tracer
        return False


def step(key: PRNGKey, state: State, denoise_fn: decoding.Denoiser, *, gen_length: int,
         mask_id: int, value_fn: ValueFn | None = None,
         position_value_fn: decoding.PositionValueFn | None = None,
         config: SMCConfig | None = None, **options) -> tuple[State, Info]:
    """One SMC step of every particle (module docstring, 1-4); arguments as in ``smc``
    (``options``: fields of ``config`` replaced).

    Returns:
      (State, Info [B] of this step). After the last of the ``steps`` steps the twist is
      removed: log w -= twist_scale * V and V = 0.
    """
    c = smc_config(config, **options)
    (steps, block_length, policy, policy_mix, temperature, proposal, position_temperature,
     greedy_reference, resample, ess_threshold, resampler, resample_schedule,
     resample_fractions, weight_scale, twist_scale) = (getattr(c, f) for f in _OPTION_FIELDS)
    key = as_key(key)
    tw = weight_scale if twist_scale is None else twist_scale
    b, n = state.log_weights.shape
    steps, block_length, schedule, blocks = decoding.step_plan(gen_length, steps, block_length)
    t = decoding.steps_done(state.decode.order)
    k_res, k_step = jax.random.split(key)
    logits, hidden = denoise_fn(state.decode.tokens)
    ll_t = state.decode.path_ll.reshape(b, n)
    twist = jnp.zeros((b, n))
    if value_fn is not None:
        v = value_fn(hidden, state.decode.tokens).reshape(b, n)
        checked.check(jnp.all(jnp.isfinite(v)), "`value_fn` returned non-finite values "
                      "(NaN or inf).")
        if not _is_zero(tw):
            twist = tw * (v - state.value)
            state = state._replace(log_weights=state.log_weights + twist)
        state = state._replace(value=v, last_value=None if state.last_value is None else v)
    if state.value_sum is not None:
        state = state._replace(value_sum=state.value_sum
                               + jnp.where(t >= 1, ll_t + state.value, 0.0))
    v_t = state.value
    pv = (position_value_fn(hidden, state.decode.tokens)
          if policy in decoding.HEAD_POLICIES else None)
    lw_before = state.log_weights
    if resample:
        allowed = jnp.asarray(resample_steps(gen_length, steps, block_length,
                                             resample_schedule, resample_fractions))[t]
        state, logits, info = resample_step(k_res, state, logits, ess_threshold=ess_threshold,
                                            resampler=resampler, allowed=allowed,
                                            keep_first=greedy_reference)
        if pv is not None:
            pv = pv[(info.ancestors + n * jnp.arange(b)[:, None]).reshape(-1)]
    else:
        info = _info(jnp.broadcast_to(jnp.arange(n), (b, n)), _ess(lw_before),
                     jnp.zeros(b, bool), _count_distinct(same_paths(state.decode, b, n)))
    dec, inc, _, log_q = decoding.decode_step(
        k_step, state.decode, logits, jnp.asarray(schedule)[t], jnp.asarray(blocks)[t], t,
        mask_id=mask_id, prompt_len=state.decode.tokens.shape[1] - gen_length, policy=policy,
        temperature=temperature, block_length=block_length, proposal=proposal,
        position_temperature=position_temperature,
        deterministic=(jnp.tile(jnp.arange(n) == 0, b) if greedy_reference else None),
        position_values=pv, policy_mix=policy_mix, log_q=True,
        max_commit=int(np.max(schedule)))
    ll_inc = weight_scale * inc.reshape(b, n)
    log_w = state.log_weights + ll_inc
    info = _info(info.ancestors, info.ess, info.resampled, info.distinct_paths,
                 log_likelihood_increment=(jax.nn.logsumexp(log_w, axis=1)
                                           - jax.nn.logsumexp(lw_before, axis=1)),
                 nonfinite_weights=_nonfinite(log_w), value=v_t, path_ll=ll_t,
                 twist_increment=twist, path_ll_increment=ll_inc,
                 proposal_correction=(inc - log_q).reshape(b, n))
    last = t == steps - 1
    if not _is_zero(tw):
        log_w = jnp.where(last, log_w - tw * state.value, log_w)
    value_sum = state.value_sum
    if value_sum is not None:
        value_sum = jnp.where(last, value_sum + dec.path_ll.reshape(b, n), value_sum)
    return State(dec, log_w, jnp.where(last, 0.0, state.value), value_sum,
                 state.last_value), info


def _check_resampler(resampler) -> None:
    if resampler not in RESAMPLERS and resampler != DISTINCT:
        raise ValueError(f"`resampler` must be one of {sorted(RESAMPLERS) + [DISTINCT]}, got "
                         f"{resampler!r}.")


def _check_scale(name: str, value) -> None:
    validation.check_in_range(name, value, 0.0)
    validation.check_finite(name, value)


def smc(denoise_fn: decoding.Denoiser, *, gen_length: int, num_particles: int, mask_id: int,
        vocab_size: int | None = None, value_fn: ValueFn | None = None,
        position_value_fn: decoding.PositionValueFn | None = None,
        config: SMCConfig | None = None, **options) -> Algorithm:
    """SMC over unmasking paths as an ``Algorithm`` (settings checked here, eagerly).

    Args:
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      gen_length: answer length A.
      num_particles: N >= 1.
      mask_id: the tokenizer's mask id.
      vocab_size: checked against the denoiser's logits width (None: the denoiser's).
      value_fn: POKE value (hidden, tokens) -> [M]; None = no lookahead.
      position_value_fn: the head's per-position values for ``policy="value"``.
      config: the options (``SMCConfig``; None: its defaults); ``**options`` replace its
        fields by name (``smc(..., weight_scale=4.0)``). The fields:
      resample: False gives best-of-N (independent particles).
      policy, steps, block_length, temperature, proposal, position_temperature: the
        proposal (``decoding.decode``; ``"tokens"`` samples tokens at ``temperature``,
        ``"path"`` samples the unmasking order at ``position_temperature`` and takes
        argmax tokens at ``temperature`` 0). ``policy="value"`` ranks positions by the
        value head's per-position predictions (``position_value_fn``, mixed with the
        log-confidence by ``policy_mix``; ``decoding`` docstring), read from the same pass.
      greedy_reference: particle 0 of every problem follows the policy's deterministic
        path (argmax tokens, top-k positions) and is never replaced at resampling
        (conditional SMC with greedy's path as the reference), so greedy's answer is
        always among the candidates. With semi-AR blocks the reference is
        ``decoding.decode``'s path under the same ``block_length``, ``steps`` and
        ``policy``: report that blocked greedy decode beside the particle decoders (an
        unblocked greedy is another decoder).
      ess_threshold: resample when ESS < ess_threshold * N (0.5 in the paper).
      resampler: one of ``RESAMPLERS``, or ``"distinct"`` (module docstring: keeps every
        distinct partial path and refills only the duplicates' slots).
      weight_scale: beta >= 0 in log w += beta * l_t (the Path-LL term).
      twist_scale: the twist's scale >= 0 in log w += twist_scale * (V_t - V_{t-1}) (None:
        ``weight_scale``, the paper's single beta).
      resample_schedule: when the ESS test may resample: one of ``SCHEDULES`` (module
        docstring); ``resample_fractions`` for ``"fractions"``.

    Returns:
      ``Algorithm(init, step)``: ``init(key, prompt [B, P]) -> State`` (checks ``prompt``
      and the vocabulary) and ``step(key, state) -> (State, Info)``; ``steps`` (default
      gen_length) steps finish the decode.
    """
    if not isinstance(num_particles, int | np.integer) or num_particles < 1:
        raise ValueError(f"`num_particles` must be a positive int, got {num_particles!r}.")
    c = smc_config(config, **options)
    (steps, block_length, policy, policy_mix, temperature, proposal, position_temperature,
     greedy_reference, resample, ess_threshold, resampler, resample_schedule,
     resample_fractions, weight_scale, twist_scale) = (getattr(c, f) for f in _OPTION_FIELDS)
    _check_resampler(resampler)
    validation.check_in_range("ess_threshold", ess_threshold, 0.0, 1.0)
    decoding.check_policy(policy, position_value_fn, policy_mix)
    decoding.check_temperature(temperature)
    _check_scale("weight_scale", weight_scale)
    if twist_scale is not None:
        _check_scale("twist_scale", twist_scale)
    decoding.check_proposal(proposal, position_temperature)
    if greedy_reference and policy == "random":
        raise ValueError("`greedy_reference` needs a deterministic `policy` (not 'random').")
    resample_steps(gen_length, steps, block_length, resample_schedule, resample_fractions)
    resample_fractions = tuple(float(f) for f in resample_fractions)
    settings = dict(gen_length=gen_length, mask_id=mask_id, value_fn=value_fn,
                    position_value_fn=position_value_fn, config=c._replace(
                        resample_fractions=resample_fractions,
                        position_temperature=float(position_temperature),
                        greedy_reference=bool(greedy_reference),
                        twist_scale=None if twist_scale is None else float(twist_scale),
                        policy_mix=float(policy_mix)))

    def init_fn(key: PRNGKey, prompt: Array) -> State:
        validation.check_ndim("prompt", prompt, 2)
        decoding.check_vocab(denoise_fn, prompt, gen_length, vocab_size, mask_id,
                             "jaxlab.dllm.path_smc.run_particles")
        rows, length = prompt.shape[0] * int(num_particles), prompt.shape[1] + gen_length
        width = vocab_size or decoding.vocab_of(denoise_fn, 1, length)
        validation.check_memory("num_particles", num_particles, 4.0 * rows * length * (2 + width),
                                f"the tokens and [{rows}, {length}, {width}] float32 logits of "
                                f"B * N particles")
        if value_fn is not None:
            check_value_fn(value_fn, denoise_fn, (rows, length))
        if policy in decoding.HEAD_POLICIES:
            decoding.check_position_value_fn(position_value_fn, denoise_fn, (rows, length),
                                             gen_length)
        return init(key, prompt, gen_length=gen_length, num_particles=int(num_particles),
                    mask_id=mask_id)

    def step_fn(key: PRNGKey, state: State) -> tuple[State, Info]:
        return step(key, state, denoise_fn, **settings)

    return Algorithm(init_fn, step_fn)


@checked.boundary
def run_particles(key: PRNGKey, denoise_fn: decoding.Denoiser, prompt: Array,
                  gen_length: int, *, mask_id: int, vocab_size: int, num_particles: int,
                  value_fn: ValueFn | None = None,
                  position_value_fn: decoding.PositionValueFn | None = None,
                  config: SMCConfig | None = None, **options) -> tuple[State, Info]:
    """``smc(...)`` run to the end: ``lax.scan`` of its ``step`` over the keys
    ``jax.random.split(key, steps)``.

    Args:
      key: PRNG key (typed, or a legacy ``uint32`` key).
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      prompt: [B, P].
      gen_length: as in ``smc``, and so are ``mask_id``, ``vocab_size``,
        ``num_particles``, ``value_fn``, ``position_value_fn``, ``config`` and
        ``**options`` (``SMCConfig``'s fields).

    Returns:
      (final State: all B * N particles and their log weights, the last twist removed
       (V = 0 when nothing is masked); Info stacked over steps, [steps, B, ...]).

    Raises:
      ValueError: for bad arguments (module docstring) and, when run eagerly, when a step
        produced non-finite log weights (``Info.nonfinite_weights``).
      TypeError: ``key`` is not a PRNG key.
    """
    key = as_key(key)
    c = smc_config(config, **options)
    alg = smc(denoise_fn, gen_length=gen_length, num_particles=num_particles, mask_id=mask_id,
              vocab_size=vocab_size, value_fn=value_fn, position_value_fn=position_value_fn,
              config=c)
    steps = gen_length if c.steps is None else c.steps
    state = alg.init(key, prompt)

    def run(state, key):
        state, info = jax.lax.scan(lambda s, k: alg.step(k, s), state,
                                   jax.random.split(key, steps))
        checked.check(~jnp.any(info.nonfinite_weights), "SMC log weights became non-finite "
                      "(NaN, +inf or all -inf); check the `value_fn` outputs, the `denoise_fn` "
                      "logits and `weight_scale`.")
        return state, info

    state, info = checked.run("jaxlab.dllm.path_smc.run_particles", run, state, key)
    raise_if_nonfinite(info)
    return state, info


SELECTIONS = ("path_ll", "weight", "value", "mix", "last_value")
VALUE_SELECTIONS = ("value", "mix", "last_value")  # the selections that read the value head


def check_select(select: str, select_mix: float = 0.5) -> None:
    """``select`` one of ``SELECTIONS``; ``select_mix`` in [0, 1]."""
    if select not in SELECTIONS:
        raise ValueError(f"`select` must be one of {SELECTIONS}, got {select!r}.")
    validation.check_in_range("select_mix", select_mix, 0.0, 1.0)


def _standardize(x: Array) -> Array:
    """(x - mean) / std over the particles of each problem ([B, N]); 0 where std is 0."""
    c = x - jnp.mean(x, axis=1, keepdims=True)
    sd = jnp.sqrt(jnp.mean(c ** 2, axis=1, keepdims=True))
    return jnp.where(sd > 0, c / jnp.where(sd > 0, sd, 1.0), 0.0)


def selection_scores(state: State, select: str = "path_ll", select_mix: float = 0.5) -> Array:
    """[B, N] the score ``best_particle`` maximises (module docstring, output): Path LL,
    final log weight, the value estimate sum_t (L_t + V(s_t)) (``State.value_sum``; its
    mean over the S steps ranks the same), or ``select_mix`` * z(value estimate) + (1 -
    ``select_mix``) * z(Path LL), z standardised over each problem's N particles, or the
    last pass's value V(s_{S-1}) (``"last_value"``, ``State.last_value``)."""
    check_select(select, select_mix)
    b, n = state.log_weights.shape
    path_ll = state.decode.path_ll.reshape(b, n)
    if select == "path_ll":
        return path_ll
    if select == "weight":
        return state.log_weights
    if select == "last_value":
        last = getattr(state, "last_value", None)
        if last is None:
            raise ValueError("`select`='last_value' needs the last pass's value of a "
                             "path_smc.State (State.last_value), which this state does not "
                             "carry.")
        return last
    est = getattr(state, "value_sum", None)
    if est is None:
        raise ValueError(f"`select`={select!r} needs the value estimate of a path_smc.State "
                         "(State.value_sum), which this state does not carry.")
    if select == "value":
        return est
    return select_mix * _standardize(est) + (1.0 - select_mix) * _standardize(path_ll)


def best_particle(state: State, num_steps: int, select: str = "path_ll",
                  select_mix: float = 0.5) -> DecodeResult:
    """Each problem's output particle, with nfe = num_steps * N. -> [B].

    ``select``: ``"path_ll"`` the highest Path LL; ``"weight"`` the highest final log weight
    (beta times the Path LL gained since the problem's last resampling, plus the reset
    mean: among survivors of a resampling, the best continuation); ``"value"`` the highest
    mean over the steps of L_t + V(s_t); ``"mix"`` the highest ``select_mix`` * z(value
    estimate) + (1 - ``select_mix``) * z(Path LL) (``selection_scores``; module docstring);
    ``"last_value"`` the highest value of the last pass, V(s_{S-1}).
    Ties go to the lowest particle (the greedy reference, when there is one).
    """
    b, n = state.log_weights.shape
    score = selection_scores(state, select, select_mix)
    best = jnp.argmax(score, axis=1)
    pick = lambda x: x.reshape(b, n, *x.shape[1:])[jnp.arange(b), best]  # noqa: E731
    answer_len = state.decode.order.shape[1]
    answer = pick(state.decode.tokens)[:, -answer_len:]
    return DecodeResult(answer, pick(state.decode.path_ll), pick(state.decode.order),
                        jnp.full(b, num_steps * n, jnp.int32))


def _check_value_selection(select: str, value_fn) -> None:
    if select in VALUE_SELECTIONS and value_fn is None:
        raise ValueError(f"`select`={select!r} ranks particles by the value head: pass a "
                         "`value_fn`.")


def smc_decode(key: PRNGKey, denoise_fn: decoding.Denoiser, prompt: Array,
               gen_length: int, *, mask_id: int, vocab_size: int, num_particles: int,
               value_fn: ValueFn | None = None,
               position_value_fn: decoding.PositionValueFn | None = None,
               config: SMCConfig | None = None, **options) -> tuple[DecodeResult, Info]:
    """``run_particles`` then each problem's output particle (``best_particle``).

    Args:
      key: PRNG key (typed, or a legacy ``uint32`` key).
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      prompt: [B, P] int.
      gen_length: answer length A.
      mask_id, vocab_size: the tokenizer's mask id and vocabulary size.
      num_particles: N >= 1.
      value_fn: as in ``smc``, and so are ``position_value_fn``, ``config`` and
        ``**options``; ``config.select`` is one of ``SELECTIONS`` (``"value"`` and
        ``"mix"`` need a ``value_fn``), ``config.select_mix`` ``"mix"``'s weight of the
        standardised value estimate, in [0, 1].

    Returns:
      (DecodeResult [B] with nfe = steps * N; Info stacked over steps).
    """
    c = smc_config(config, **options)
    check_select(c.select, c.select_mix)
    _check_value_selection(c.select, value_fn)
    state, info = run_particles(
        key, denoise_fn, prompt, gen_length, mask_id=mask_id, vocab_size=vocab_size,
        num_particles=num_particles, value_fn=value_fn, position_value_fn=position_value_fn,
        config=c)
    return (best_particle(state, gen_length if c.steps is None else c.steps, c.select,
                          c.select_mix), info)


def best_of_n(key: PRNGKey, denoise_fn: decoding.Denoiser, prompt: Array, gen_length: int,
              *, mask_id: int, vocab_size: int, num_particles: int,
              value_fn: ValueFn | None = None,
              position_value_fn: decoding.PositionValueFn | None = None,
              config: SMCConfig | None = None, **options) -> tuple[DecodeResult, Info]:
    """Best-of-N: N independent decodes of the proposal, the output chosen by ``select``.

    ``smc_decode`` without resampling and without the twist: a ``value_fn`` serves the
    selection only (``"value"``, ``"mix"``; its V(s_t) read from the passes the particles
    make anyway, so NFE = steps * N as without it), and the log weights are ``weight_scale``
    times the Path LL. Every ``SELECTIONS`` rule thus runs here too, so what SMC adds can
    be told apart from what the selector adds. Arguments as in ``smc_decode``; the
    resampling fields of ``config`` are not read (``resample=False``, ``twist_scale=0``).

    Returns:
      (DecodeResult [B] with nfe = steps * N; Info stacked over steps).
    """
    c = smc_config(config, **options)
    return smc_decode(key, denoise_fn, prompt, gen_length, mask_id=mask_id,
                      vocab_size=vocab_size, num_particles=num_particles, value_fn=value_fn,
                      position_value_fn=position_value_fn,
                      config=c._replace(resample=False, twist_scale=0.0))


def ancestry(ancestors: Array) -> Array:
    """Each final particle's ancestor at every step (``Info.ancestors`` stacked over steps).

    Args:
      ancestors: [S, B, N] int (``run_particles``' ``info.ancestors``).

    Returns:
      [S, B, N] int32: entry [t, b, i] is the slot, before step t's resampling, of the
      particle final particle i of problem b descends from. So ``info.value[t]`` and
      ``info.path_ll[t]`` taken at it give V(s_t) and L_t along each final particle's path
      (best-of-N: the identity).

    Raises:
      ValueError: ``ancestors`` is not a 3-D integer array with entries in [0, N).
    """
    validation.check_ndim("ancestors", ancestors, 3)
    validation.check_int_range("ancestors", ancestors, 0, np.shape(ancestors)[-1])

    def back(cur, anc_t):
        prev = jnp.take_along_axis(anc_t, cur, axis=1)
        return prev, prev

    s, b, n = np.shape(ancestors)
    cur = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (b, n))
    _, out = jax.lax.scan(back, cur, jnp.asarray(ancestors, jnp.int32), reverse=True)
    return out
