"""Particle decoders: best-of-N, Path-LL SMC without lookahead, and POKE-SMC.

Every problem carries N particles (flattened to a [B * N, L] batch for the denoiser). One
step of SMC follows blackjax's ``smc/base.py`` (reweight, resample, mutate):

1. one denoiser pass on all particles gives logits (and hidden states);
2. *twist* (POKE-SMC only): log w += beta (V(s_t) - V(s_{t-1})), V the POKE value of the
   partial trajectory (twisted SMC);
3. where the resampling schedule allows it at this step and ESS < ``ess_threshold * N``
   the problem's particles are resampled (ancestor indices from ``jaxlab.core.smc``;
   logits travel with their particle, so resampling costs no extra NFE) and its weights
   reset to their mean;
4. *mutate*: a sampled unmasking step (temperature ``T``) commits tokens; beta times its
   Path LL increment is added to log w.

**POKE-SMC as twisted SMC (what the weighted particles target).** A path is s_0 -> s_1 ->
... -> s_S (S = ``steps``); s_t is the answer after t steps (committed tokens and their
order). Everything below is per problem, beta = ``weight_scale``.

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
* Incremental weight log G_t = beta (l_t + V_t - V_{t-1}). **No proposal correction**
  p / q: the paper's weights (and the official self-rewarding SMC's) are Path-LL
  increments, a self-reward, not an importance ratio.
* Intermediate targets (weighted particles just before the resampling of step t, i.e.
  after t commits): gamma_t(s_{0:t}) proportional to q(s_{0:t}) exp(beta (L_t + V_t)).
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
the policy's deterministic step (top-k positions, argmax tokens) and is its own ancestor at
every resampling, while the other N - 1 are drawn from all N by weight, as the reference
path of conditional SMC (Andrieu, Doucet and Holenstein 2010). Greedy's answer is then
always among the candidates: the decoders cannot lose greedy's path by resampling it
away. The weighted particles no longer follow gamma_t exactly (one path is fixed); this is
a search device, tested for what it promises (the reference equals ``decoding.decode``'s
path and survives), not against the targets.

**Output** (``select``): the highest Path LL (``"path_ll"``, the paper's) or the highest
final log weight (``"weight"``: after a resampling every weight is reset to the mean, so
this ranks by the Path LL gained since the problem's last resampling). V(s_S) = 0, so the
twist enters the output only through which particles survived.

**Resampling schedule** (``resample_schedule``; the ESS test applies at every allowed
step; step t resamples the particles after t commits):

* ``"every_step"`` (default; the paper's ESS < N/2 at every step): t = 1 .. S - 1;
* ``"block_ends"`` (SR-SMC's rule): the first step of every semi-AR block after the first
  (never with one block);
* ``"fractions"``: t = round(f * S) for f in ``resample_fractions`` (each in (0, 1);
  steps that round to 0 or S are dropped).

The last step removes the last twist, so the final log weights are beta * Path LL plus the
resampling resets. ``best_particle`` then returns the particle with the highest Path LL.
Best-of-N is the same loop with no twist and no resampling. NFE = steps * N per problem
for all three.

What follows what: the paper (arXiv 2602.03496): Path LL increments plus the change of the
POKE value as the weight, ESS < N/2 resampling, best-particle output; its algorithm box is
not in our corpora, so the target above is ours, written down and tested. The token proposal is
LLaDA's ``generate`` (low-confidence remasking, semi-AR blocks). Ours: the path proposal,
the greedy reference, beta, the schedule and selection options, per-problem batching, the
twist read from the same pass.

API (``jaxlab.core.types.Algorithm``; the key always first):

* ``smc(denoise_fn, *, gen_length, num_particles, mask_id, value_fn=None, ...) ->
  Algorithm``: checks and binds the settings;
* ``init(key, prompt [B, P], *, gen_length, num_particles, mask_id) -> State``: N all-mask
  particles per problem (the key is unused: nothing is random before the first step);
* ``step(key, state, denoise_fn, *, gen_length, mask_id, ...) -> (State, Info)``: steps
  1-4 above for every particle; ``steps`` calls finish the decode (the step index is read
  off the state, ``decoding.steps_done``);
* ``run_particles(key, denoise_fn, prompt, gen_length, ...)`` is ``lax.scan`` of ``step``
  over ``jax.random.split(key, steps)``;
  ``smc_decode`` = ``run_particles`` + ``best_particle``; ``best_of_n`` without resampling.

Checks: eagerly at the Python boundary (``smc`` and its ``init``, hence ``run_particles``,
``smc_decode`` and ``best_of_n``; see also ``decoding``'s docstring): ``prompt`` 2-D
integer ids in [0, vocab_size) without the mask id; ``num_particles`` a positive int;
``resampler`` in ``RESAMPLERS``; ``resample_schedule`` in ``SCHEDULES`` (and
``resample_fractions`` in (0, 1)); ``policy`` in ``decoding.POLICIES``; ``ess_threshold`` in
[0, 1]; ``temperature`` and ``position_temperature`` finite and >= 0; ``proposal`` in
``decoding.PROPOSALS``; ``select`` in ``SELECTIONS``; ``greedy_reference`` with a
deterministic policy; ``weight_scale`` finite and >= 0; the step / block schedule.
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

__all__ = ["ValueFn", "RESAMPLERS", "SCHEDULES", "SELECTIONS", "State", "Info", "init", "step",
    "smc", "run_particles", "best_particle", "smc_decode", "best_of_n"]

checked.declare("jaxlab.dllm.path_smc.run_particles")

# value_fn(hidden [M, L, D], tokens [M, L]) -> [M] predicted remaining Path LL.
ValueFn = Callable[[Array, Array], Array]
RESAMPLERS = {"systematic": smc_lib.systematic, "stratified": smc_lib.stratified,
              "multinomial": smc_lib.multinomial, "residual": smc_lib.residual}
SCHEDULES = ("every_step", "block_ends", "fractions")


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
    """

    decode: DecodeState
    log_weights: Array
    value: Array


class Info(NamedTuple):
    """Per step: ancestors [B, N], ESS before resampling [B], resampled [B] bool,
    log-likelihood increment [B] (log mean incremental weight), nonfinite_weights [B] bool
    (after the step some log weight is NaN or +inf, or all are -inf: see the module
    docstring)."""

    ancestors: Array
    ess: Array
    resampled: Array
    log_likelihood_increment: Array
    nonfinite_weights: Array


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


def resample_step(key: PRNGKey, state: State, logits: Array, *, ess_threshold: float,
                  resampler: str, allowed=True,
                  keep_first: bool = False) -> tuple[State, Array, Info]:
    """ESS-triggered per-problem resampling of particles (and their logits [B * N, L, V]);
    ``allowed`` (bool scalar, may be traced): the schedule permits resampling now;
    ``keep_first``: particle 0 of every problem keeps itself as its ancestor (the reference
    path of conditional SMC; the others are drawn from all N by weight)."""
    b, n = state.log_weights.shape
    ess = _ess(state.log_weights)
    do = (ess < ess_threshold * n) & allowed
    weights = jax.vmap(lambda lw: smc_lib.normalize_log_weights(lw)[0])(state.log_weights)
    idx = jax.vmap(lambda k, w: RESAMPLERS[resampler](k, w, n))(jax.random.split(key, b),
                                                               weights)
    if keep_first:
        idx = idx.at[:, 0].set(0)
    anc = jnp.where(do[:, None], idx, jnp.arange(n)[None])
    flat = (anc + n * jnp.arange(b)[:, None]).reshape(-1)
    gather = lambda x: x[flat]  # noqa: E731
    mean_lw = jax.nn.logsumexp(state.log_weights, axis=1, keepdims=True) - jnp.log(n)
    log_w = jnp.where(do[:, None], jnp.broadcast_to(mean_lw, (b, n)), state.log_weights)
    value = jnp.take_along_axis(state.value, anc, axis=1)
    dec = jax.tree.map(gather, state.decode)
    info = Info(anc, ess, do, jnp.zeros(b), jnp.zeros(b, bool))
    return State(dec, log_w, value), gather(logits), info


def init(key: PRNGKey, prompt: Array, *, gen_length: int, num_particles: int,
         mask_id: int) -> State:
    """N all-mask particles per problem of ``prompt`` [B, P], zero log weights and value."""
    as_key(key)  # checked; nothing is drawn here
    del key
    validation.check_ndim("prompt", prompt, 2)
    b = prompt.shape[0]
    dec = decoding.init_state(jnp.repeat(prompt, num_particles, axis=0), gen_length, mask_id)
    return State(dec, jnp.zeros((b, num_particles)), jnp.zeros((b, num_particles)))


def step(key: PRNGKey, state: State, denoise_fn: decoding.Denoiser, *, gen_length: int,
         mask_id: int, value_fn: ValueFn | None = None, resample: bool = True,
         policy: str = "confidence", steps: int | None = None,
         block_length: int | None = None, temperature: float = 1.0,
         ess_threshold: float = 0.5, resampler: str = "multinomial",
         weight_scale: float = 1.0, resample_schedule: str = "every_step",
         resample_fractions: tuple[float, ...] = (0.5,), proposal: str = "tokens",
         position_temperature: float = 1.0,
         greedy_reference: bool = False) -> tuple[State, Info]:
    """One SMC step of every particle (module docstring, 1-4); arguments as in ``smc``.

    Returns:
      (State, Info [B] of this step). After the last of the ``steps`` steps the twist is
      removed: log w -= weight_scale * V and V = 0.
    """
    key = as_key(key)
    b, n = state.log_weights.shape
    steps, block_length, schedule, blocks = decoding.step_plan(gen_length, steps, block_length)
    t = decoding.steps_done(state.decode.order)
    k_res, k_step = jax.random.split(key)
    logits, hidden = denoise_fn(state.decode.tokens)
    if value_fn is not None:
        v = value_fn(hidden, state.decode.tokens).reshape(b, n)
        checked.check(jnp.all(jnp.isfinite(v)), "`value_fn` returned non-finite values "
                      "(NaN or inf).")
        state = state._replace(log_weights=state.log_weights
                               + weight_scale * (v - state.value), value=v)
    lw_before = state.log_weights
    if resample:
        allowed = jnp.asarray(resample_steps(gen_length, steps, block_length,
                                             resample_schedule, resample_fractions))[t]
        state, logits, info = resample_step(k_res, state, logits, ess_threshold=ess_threshold,
                                            resampler=resampler, allowed=allowed,
                                            keep_first=greedy_reference)
    else:
        info = Info(jnp.broadcast_to(jnp.arange(n), (b, n)), _ess(lw_before),
                    jnp.zeros(b, bool), jnp.zeros(b), jnp.zeros(b, bool))
    dec, inc, _ = decoding.decode_step(
        k_step, state.decode, logits, jnp.asarray(schedule)[t], jnp.asarray(blocks)[t], t,
        mask_id=mask_id, prompt_len=state.decode.tokens.shape[1] - gen_length, policy=policy,
        temperature=temperature, block_length=block_length, proposal=proposal,
        position_temperature=position_temperature,
        deterministic=(jnp.tile(jnp.arange(n) == 0, b) if greedy_reference else None))
    log_w = state.log_weights + weight_scale * inc.reshape(b, n)
    info = info._replace(log_likelihood_increment=(
        jax.nn.logsumexp(log_w, axis=1) - jax.nn.logsumexp(lw_before, axis=1)),
        nonfinite_weights=_nonfinite(log_w))
    last = t == steps - 1
    log_w = jnp.where(last, log_w - weight_scale * state.value, log_w)
    return State(dec, log_w, jnp.where(last, 0.0, state.value)), info


def smc(denoise_fn: decoding.Denoiser, *, gen_length: int, num_particles: int, mask_id: int,
        vocab_size: int | None = None, value_fn: ValueFn | None = None, resample: bool = True,
        policy: str = "confidence", steps: int | None = None,
        block_length: int | None = None, temperature: float = 1.0,
        ess_threshold: float = 0.5, resampler: str = "multinomial",
        weight_scale: float = 1.0, resample_schedule: str = "every_step",
        resample_fractions: tuple[float, ...] = (0.5,), proposal: str = "tokens",
        position_temperature: float = 1.0, greedy_reference: bool = False) -> Algorithm:
    """SMC over unmasking paths as an ``Algorithm`` (settings checked here, eagerly).

    Args:
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      gen_length: answer length A.
      num_particles: N >= 1.
      mask_id: the tokenizer's mask id.
      vocab_size: checked against the denoiser's logits width (None: the denoiser's).
      value_fn: POKE value (hidden, tokens) -> [M]; None = no lookahead.
      resample: False gives best-of-N (independent particles).
      policy, steps, block_length, temperature, proposal, position_temperature: the
        proposal (``decoding.decode``; ``"tokens"`` samples tokens at ``temperature``,
        ``"path"`` samples the unmasking order at ``position_temperature`` and takes
        argmax tokens at ``temperature`` 0).
      greedy_reference: particle 0 of every problem follows the policy's deterministic
        path (argmax tokens, top-k positions) and is never replaced at resampling
        (conditional SMC with greedy's path as the reference), so greedy's answer is
        always among the candidates.
      ess_threshold: resample when ESS < ess_threshold * N (0.5 in the paper).
      resampler: one of ``RESAMPLERS``.
      weight_scale: beta >= 0 in log w += beta * (increment + twist).
      resample_schedule: when the ESS test may resample: one of ``SCHEDULES`` (module
        docstring); ``resample_fractions`` for ``"fractions"``.

    Returns:
      ``Algorithm(init, step)``: ``init(key, prompt [B, P]) -> State`` (checks ``prompt``
      and the vocabulary) and ``step(key, state) -> (State, Info)``; ``steps`` (default
      gen_length) steps finish the decode.
    """
    if not isinstance(num_particles, int | np.integer) or num_particles < 1:
        raise ValueError(f"`num_particles` must be a positive int, got {num_particles!r}.")
    if resampler not in RESAMPLERS:
        raise ValueError(f"`resampler` must be one of {sorted(RESAMPLERS)}, got {resampler!r}.")
    validation.check_in_range("ess_threshold", ess_threshold, 0.0, 1.0)
    decoding.check_policy(policy)
    decoding.check_temperature(temperature)
    validation.check_in_range("weight_scale", weight_scale, 0.0)
    validation.check_finite("weight_scale", weight_scale)
    decoding.check_proposal(proposal, position_temperature)
    if greedy_reference and policy == "random":
        raise ValueError("`greedy_reference` needs a deterministic `policy` (not 'random').")
    resample_steps(gen_length, steps, block_length, resample_schedule, resample_fractions)
    resample_fractions = tuple(float(f) for f in resample_fractions)
    settings = dict(resample_schedule=resample_schedule, resample_fractions=resample_fractions,
                    gen_length=gen_length, mask_id=mask_id, value_fn=value_fn,
                    resample=resample, policy=policy, steps=steps, block_length=block_length,
                    temperature=temperature, ess_threshold=ess_threshold, resampler=resampler,
                    weight_scale=weight_scale, proposal=proposal,
                    position_temperature=float(position_temperature),
                    greedy_reference=bool(greedy_reference))

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
            check_value_fn(value_fn, denoise_fn,
                           (prompt.shape[0] * int(num_particles), prompt.shape[1] + gen_length))
        return init(key, prompt, gen_length=gen_length, num_particles=int(num_particles),
                    mask_id=mask_id)

    def step_fn(key: PRNGKey, state: State) -> tuple[State, Info]:
        return step(key, state, denoise_fn, **settings)

    return Algorithm(init_fn, step_fn)


def run_particles(key: PRNGKey, denoise_fn: decoding.Denoiser, prompt: Array,
                  gen_length: int, *, mask_id: int, vocab_size: int, num_particles: int,
                  steps: int | None = None, value_fn: ValueFn | None = None,
                  resample: bool = True, policy: str = "confidence",
                  block_length: int | None = None, temperature: float = 1.0,
                  ess_threshold: float = 0.5, resampler: str = "multinomial",
                  weight_scale: float = 1.0, resample_schedule: str = "every_step",
                  resample_fractions: tuple[float, ...] = (0.5,), proposal: str = "tokens",
                  position_temperature: float = 1.0,
                  greedy_reference: bool = False) -> tuple[State, Info]:
    """``smc(...)`` run to the end: ``lax.scan`` of its ``step`` over the keys
    ``jax.random.split(key, steps)``.

    Args:
      key: PRNG key (typed, or a legacy ``uint32`` key).
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      prompt: [B, P].
      gen_length: as in ``smc``, and so are ``mask_id``, ``vocab_size``,
        ``num_particles``, ``steps``, ``value_fn``, ``resample``, ``policy``,
        ``block_length``, ``temperature``, ``ess_threshold``, ``resampler``,
        ``weight_scale``, ``resample_schedule``, ``resample_fractions``, ``proposal``,
        ``position_temperature`` and ``greedy_reference``.

    Returns:
      (final State: all B * N particles and their log weights, the last twist removed
       (V = 0 when nothing is masked); Info stacked over steps, [steps, B, ...]).

    Raises:
      ValueError: for bad arguments (module docstring) and, when run eagerly, when a step
        produced non-finite log weights (``Info.nonfinite_weights``).
      TypeError: ``key`` is not a PRNG key.
    """
    key = as_key(key)
    alg = smc(denoise_fn, gen_length=gen_length, num_particles=num_particles, mask_id=mask_id,
              vocab_size=vocab_size, value_fn=value_fn, resample=resample, policy=policy,
              steps=steps, block_length=block_length, temperature=temperature,
              ess_threshold=ess_threshold, resampler=resampler, weight_scale=weight_scale,
              resample_schedule=resample_schedule, resample_fractions=resample_fractions,
              proposal=proposal, position_temperature=position_temperature,
              greedy_reference=greedy_reference)
    steps = gen_length if steps is None else steps
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


SELECTIONS = ("path_ll", "weight")


def check_select(select: str) -> None:
    """``select`` one of ``SELECTIONS``."""
    if select not in SELECTIONS:
        raise ValueError(f"`select` must be one of {SELECTIONS}, got {select!r}.")


def best_particle(state: State, num_steps: int, select: str = "path_ll") -> DecodeResult:
    """Each problem's output particle, with nfe = num_steps * N. -> [B].

    ``select``: ``"path_ll"`` the highest Path LL; ``"weight"`` the highest final log weight
    (beta times the Path LL gained since the problem's last resampling, plus the reset
    mean: among survivors of a resampling, the best continuation).
    """
    check_select(select)
    b, n = state.log_weights.shape
    score = (state.decode.path_ll.reshape(b, n) if select == "path_ll"
             else state.log_weights)
    best = jnp.argmax(score, axis=1)
    pick = lambda x: x.reshape(b, n, *x.shape[1:])[jnp.arange(b), best]  # noqa: E731
    answer_len = state.decode.order.shape[1]
    answer = pick(state.decode.tokens)[:, -answer_len:]
    return DecodeResult(answer, pick(state.decode.path_ll), pick(state.decode.order),
                        jnp.full(b, num_steps * n, jnp.int32))


def smc_decode(key: PRNGKey, denoise_fn: decoding.Denoiser, prompt: Array,
               gen_length: int, *, mask_id: int, vocab_size: int, num_particles: int,
               steps: int | None = None, select: str = "path_ll",
               value_fn: ValueFn | None = None, resample: bool = True,
               policy: str = "confidence", block_length: int | None = None,
               temperature: float = 1.0, ess_threshold: float = 0.5,
               resampler: str = "multinomial", weight_scale: float = 1.0,
               resample_schedule: str = "every_step",
               resample_fractions: tuple[float, ...] = (0.5,), proposal: str = "tokens",
               position_temperature: float = 1.0,
               greedy_reference: bool = False) -> tuple[DecodeResult, Info]:
    """``run_particles`` then each problem's output particle (``best_particle``: by Path LL
    or, ``select="weight"``, by final log weight).

    Args:
      key: PRNG key (typed, or a legacy ``uint32`` key).
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      prompt: [B, P] int.
      gen_length: answer length A.
      mask_id, vocab_size: the tokenizer's mask id and vocabulary size.
      num_particles: N >= 1.
      steps: denoising steps (default ``gen_length``).
      select: one of ``SELECTIONS``.
      value_fn: as in ``smc``, and so are ``resample``, ``policy``, ``block_length``,
        ``temperature``, ``ess_threshold``, ``resampler``, ``weight_scale``,
        ``resample_schedule``, ``resample_fractions``, ``proposal``,
        ``position_temperature`` and ``greedy_reference``.

    Returns:
      (DecodeResult [B] with nfe = steps * N; Info stacked over steps).
    """
    check_select(select)
    state, info = run_particles(
        key, denoise_fn, prompt, gen_length, mask_id=mask_id, vocab_size=vocab_size,
        num_particles=num_particles, steps=steps, value_fn=value_fn, resample=resample,
        policy=policy, block_length=block_length, temperature=temperature,
        ess_threshold=ess_threshold, resampler=resampler, weight_scale=weight_scale,
        resample_schedule=resample_schedule, resample_fractions=resample_fractions,
        proposal=proposal, position_temperature=position_temperature,
        greedy_reference=greedy_reference)
    return best_particle(state, gen_length if steps is None else steps, select), info


best_of_n = functools.partial(smc_decode, value_fn=None, resample=False)
best_of_n.__doc__ = "Best-of-N by Path LL: N independent sampled decodes, argmax Path LL."
