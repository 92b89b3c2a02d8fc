"""Self-rewarding SMC (SR-SMC, arXiv 2602.01849): the particle baseline POKE-SMC must beat.

One SMC step here is one **semi-AR block**: denoiser passes on all particles until the
block has no mask left, then (maybe) resampling. Written from the official LLaDA sampler
(Algolzw/self-rewarding-smc, ``llada/generate_smc.py``, read 2026-12-04):

* **proposal** -- at every pass, x0 ~ softmax(logits / T) at each masked position
  (Gumbel-max at temperature T; T = 1 in the official eval scripts) with the *untempered*
  probability p(x0_i | x_O) as its priority (LLaDA ``low_confidence``). Commits inside the
  current block: with ``threshold`` (Fast-dLLM parallel decoding, 0.9 officially) the
  highest-priority masked position always plus every other masked position with priority
  >= threshold, so the number of passes per block adapts; with ``threshold=None`` LLaDA's
  fixed transfer schedule (``decoding.transfer_schedule``, ``steps`` split over blocks).
* **weights** -- log w += sum of the untempered log p of the tokens committed by the pass
  (the Path LL increment): no proposal correction, no twist, no scaling.
* **resampling** -- only at block ends, per problem when ESS < ``ess_threshold`` * N
  (0.5 officially), multinomial, and the log weights are reset to 0.
* **output** -- the particle with the highest summed log p of its committed tokens (its
  Path LL, ``DecodeState.path_ll``).
* **compute** -- the official code counts *batched* forward passes (N particles share one
  pass): ``Info.passes`` summed over blocks. jaxlab's convention elsewhere is per-particle
  passes (NFE = passes x N): ``DecodeResult.nfe``. Both are reported by the study.

Ours: B problems are batched, each with its own weights, ESS and resampling (the official
sampler runs one prompt); a block's ``while_loop`` runs until every problem's block is
full, and a problem's pass count only counts passes in which its own block still had a
mask (what it would cost alone: the extra passes commit nothing for it); the mask token is
excluded from the predictive distribution (as everywhere in ``jaxlab.dllm``); at most
``block_length`` passes per block (every pass commits >= 1 token per particle).

What the weighted particles target: the proposal density over (answer x, order tau) is
q_T(x, tau), the product over passes of the tempered token probabilities and of the
(deterministic, given the sampled x0) choice of committed positions; the weight is
p(x; tau) = exp(Path LL). So the weighted particles target pi(x, tau) proportional to
q_T(x, tau) p(x; tau) ("self-rewarding": the model's own likelihood as the reward; at T = 1
with a token-independent order this is p(x)^2 / Z), and block-end resampling leaves the
target unchanged. ``tests/dllm/test_sr_smc.py`` checks this by enumeration with blocks,
threshold commits and T != 1.

API (``jaxlab.core.types.Algorithm``; the key first):

* ``sr_smc(denoise_fn, *, gen_length, num_particles, mask_id, block_length, ...)`` checks
  and binds the settings; ``init(key, prompt [B, P]) -> State``; ``step(key, state) ->
  (State, Info)`` decodes one block; ``gen_length / block_length`` steps finish.
* ``sr_smc_decode(key, denoise_fn, prompt, gen_length, ...) -> (DecodeResult, Info)`` is
  the ``lax.scan`` over blocks plus the best particle; raises on non-finite weights when
  run eagerly.

Checks (eager, in ``sr_smc`` and its ``init``): ``prompt`` 2-D integer ids in
[0, vocab_size) without the mask id; ``num_particles`` a positive int; ``block_length`` a
positive int dividing ``gen_length``; ``steps`` (schedule mode) divisible by the number of
blocks and <= gen_length; ``threshold`` None or in (0, 1]; ``temperature`` >= 0;
``ess_threshold`` in [0, 1]; the vocabulary against the denoiser's logits width. Traced
values: ``Info.nonfinite_weights`` [B] flags a NaN / +inf log weight or a problem whose
particles are all at -inf, ``Info.unfinished`` [B] a block NaN priorities left with masks;
``run_particles`` / ``sr_smc_decode`` raise on either when their outputs are concrete.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import checked, validation
from jaxlab.core import smc as smc_lib
from jaxlab.core.keys import as_key
from jaxlab.core.types import Algorithm, Array, PRNGKey
from jaxlab.dllm import decoding, path_smc
from jaxlab.dllm.decoding import DecodeResult, DecodeState

__all__ = ["State", "Info", "init", "step", "sr_smc", "best_particle", "run_particles",
    "sr_smc_decode"]

checked.declare("jaxlab.dllm.sr_smc.run_particles")


class State(NamedTuple):
    """N particles for each of B problems.

    Attributes:
      decode: DecodeState over the [B * N] particles.
      log_weights: [B, N] log weights since the last resampling.
      block: scalar int32, blocks finished.
    """

    decode: DecodeState
    log_weights: Array
    block: Array


class Info(NamedTuple):
    """Per block: passes [B] (batched denoiser passes this problem needed), ess [B] at the
    block end, resampled [B] bool, ancestors [B, N], nonfinite_weights [B] bool, unfinished
    [B] bool (masks left in the block after ``block_length`` passes: only possible when the
    priorities are NaN, i.e. the denoiser's logits are not finite)."""

    passes: Array
    ess: Array
    resampled: Array
    ancestors: Array
    nonfinite_weights: Array
    unfinished: Array


def init(key: PRNGKey, prompt: Array, *, gen_length: int, num_particles: int,
         mask_id: int) -> State:
    """N all-mask particles per problem of ``prompt`` [B, P], zero log weights."""
    as_key(key)  # checked; nothing is drawn here
    del key
    validation.check_ndim("prompt", prompt, 2)
    b = prompt.shape[0]
    dec = decoding.init_state(jnp.repeat(prompt, num_particles, axis=0), gen_length, mask_id)
    return State(dec, jnp.zeros((b, num_particles)), jnp.zeros((), jnp.int32))


def _commits(key: PRNGKey, logits: Array, order: Array, block: Array, k: Array, *,
             mask_id: int, temperature: float, threshold: float | None, block_length: int):
    """One pass's proposal: sampled x0 [M, A], their untempered log p [M, A] and the
    committed positions [M, A] bool (threshold rule, or the top-k by priority)."""
    x0, _, logp_x0 = decoding.predict(key, logits, mask_id, temperature)
    priority = jnp.exp(logp_x0)
    eligible = decoding.block_eligible(order, block, block_length)
    if threshold is None:
        select = decoding.select_top_k(priority, eligible, k)
    else:
        select = (decoding.select_top_k(priority, eligible, jnp.ones((), jnp.int32))
                  | (eligible & (priority >= threshold)))
    return x0, logp_x0, select


def step(key: PRNGKey, state: State, denoise_fn: decoding.Denoiser, *, gen_length: int,
         mask_id: int, block_length: int, steps: int | None = None,
         threshold: float | None = 0.9, temperature: float = 1.0,
         ess_threshold: float = 0.5) -> tuple[State, Info]:
    """Decodes the next semi-AR block of every particle, then resamples at the block end.

    Returns:
      (State, Info [B] of this block); see the module docstring.
    """
    key = as_key(key)
    b, n = state.log_weights.shape
    prompt_len = state.decode.tokens.shape[1] - gen_length
    per_block = 0
    table = jnp.zeros(1, jnp.int32)
    if threshold is None:
        steps, _, schedule, _ = decoding.step_plan(gen_length, steps, block_length)
        per_block = steps // (gen_length // block_length)
        table = jnp.asarray(schedule, jnp.int32)
    k_loop, k_res = jax.random.split(key)
    block = state.block

    def masked_in_block(dec):  # [B] bool
        eligible = decoding.block_eligible(dec.order, block, block_length)
        return jnp.any(eligible.reshape(b, n, -1), axis=(1, 2))

    def cond(carry):
        i, dec, _, _, _ = carry
        return (i < block_length) & jnp.any(masked_in_block(dec))

    def body(carry):
        i, dec, log_w, passes, key = carry
        key, k_pass = jax.random.split(key)
        active = masked_in_block(dec)
        with checked.suspended():  # checks in a while body break under vmap (checked.py)
            logits, _ = denoise_fn(dec.tokens)
        k = table[jnp.minimum(block * per_block + i, table.shape[0] - 1)]
        x0, logp_x0, select = _commits(k_pass, logits[:, prompt_len:], dec.order, block, k,
                                       mask_id=mask_id, temperature=temperature,
                                       threshold=threshold, block_length=block_length)
        dec, inc = decoding.commit(dec, select, x0, logp_x0, decoding.steps_done(dec.order),
                                   prompt_len)
        return i + 1, dec, log_w + inc.reshape(b, n), passes + active, key

    carry = (jnp.zeros((), jnp.int32), state.decode, state.log_weights,
             jnp.zeros(b, jnp.int32), k_loop)
    _, dec, log_w, passes, _ = jax.lax.while_loop(cond, body, carry)

    unfinished = masked_in_block(dec)
    ess = jax.vmap(smc_lib.ess)(log_w)
    do = ess < ess_threshold * n
    weights = jax.nn.softmax(log_w, axis=1)
    idx = jax.vmap(lambda kk, w: smc_lib.multinomial(kk, w, n))(jax.random.split(k_res, b),
                                                                  weights)
    anc = jnp.where(do[:, None], idx, jnp.arange(n)[None])
    flat = (anc + n * jnp.arange(b)[:, None]).reshape(-1)
    dec = jax.tree.map(lambda x: x[flat], dec)
    nonfinite = (jnp.any(jnp.isnan(log_w) | jnp.isposinf(log_w), axis=1)
                 | jnp.all(jnp.isneginf(log_w), axis=1))
    log_w = jnp.where(do[:, None], 0.0, log_w)
    return State(dec, log_w, block + 1), Info(passes, ess, do, anc, nonfinite, unfinished)


def _check_settings(gen_length, num_particles, block_length, steps, threshold, temperature,
                    ess_threshold) -> None:
    if not isinstance(num_particles, int | np.integer) or num_particles < 1:
        raise ValueError(f"`num_particles` must be a positive int, got {num_particles!r}.")
    validation.check_positive_int("gen_length", gen_length)
    validation.check_positive_int("block_length", block_length)
    if gen_length % block_length:
        raise ValueError(f"`block_length`={block_length} must divide "
                         f"`gen_length`={gen_length}.")
    if threshold is None:
        decoding.step_plan(gen_length, steps, block_length)
    else:
        validation.check_in_range("threshold", threshold, 0.0, 1.0)
        validation.check_finite("threshold", threshold)
        if threshold <= 0:
            raise ValueError(f"`threshold` must lie in (0, 1] (or be None for the fixed "
                             f"schedule), got {threshold!r}.")
    decoding.check_temperature(temperature)
    validation.check_in_range("ess_threshold", ess_threshold, 0.0, 1.0)


def sr_smc(denoise_fn: decoding.Denoiser, *, gen_length: int, num_particles: int,
           mask_id: int, block_length: int, vocab_size: int | None = None,
           steps: int | None = None, threshold: float | None = 0.9,
           temperature: float = 1.0, ess_threshold: float = 0.5) -> Algorithm:
    """Self-rewarding SMC as an ``Algorithm`` (settings checked here, eagerly).

    Args:
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      gen_length: answer length A.
      num_particles: N >= 1 (4 in the official code).
      mask_id: the tokenizer's mask id.
      block_length: semi-AR block length (divides A; 32 of L = 256 officially).
      vocab_size: checked against the denoiser's logits width (None: the denoiser's).
      steps: total scheduled steps when ``threshold`` is None (default A).
      threshold: Fast-dLLM commit threshold in (0, 1], or None for the fixed schedule.
      temperature: T >= 0 of the token sampling (priorities stay untempered).
      ess_threshold: resample at a block end when ESS < ess_threshold * N.

    Returns:
      ``Algorithm(init, step)``; ``gen_length // block_length`` steps finish the decode.
    """
    _check_settings(gen_length, num_particles, block_length, steps, threshold, temperature,
                    ess_threshold)
    settings = dict(gen_length=gen_length, mask_id=mask_id, block_length=block_length,
                    steps=steps, threshold=threshold, temperature=temperature,
                    ess_threshold=ess_threshold)

    def init_fn(key: PRNGKey, prompt: Array) -> State:
        validation.check_ndim("prompt", prompt, 2)
        decoding.check_vocab(denoise_fn, prompt, gen_length, vocab_size, mask_id,
                             "jaxlab.dllm.sr_smc.run_particles")
        return init(key, prompt, gen_length=gen_length, num_particles=int(num_particles),
                    mask_id=mask_id)

    def step_fn(key: PRNGKey, state: State) -> tuple[State, Info]:
        return step(key, state, denoise_fn, **settings)

    return Algorithm(init_fn, step_fn)


def best_particle(state: State) -> DecodeResult:
    """Each problem's highest-Path-LL particle (``path_smc.best_particle``); nfe [B] left at 0
    (``sr_smc_decode`` fills it from the pass counts).

    Raises:
      TypeError: ``state`` is not an ``sr_smc.State`` (e.g. ``run_particles``' whole
        ``(state, info)`` pair).
    """
    if not isinstance(state, State):
        raise TypeError(f"`state` must be an sr_smc.State (the first element of "
                        f"run_particles' (state, info)), got {type(state).__name__}.")
    return path_smc.best_particle(state, 0)


@checked.boundary
def run_particles(key: PRNGKey, denoise_fn: decoding.Denoiser, prompt: Array,
                  gen_length: int, *, mask_id: int, num_particles: int, block_length: int,
                  vocab_size: int | None = None, steps: int | None = None,
                  threshold: float | None = 0.9, temperature: float = 1.0,
                  ess_threshold: float = 0.5) -> tuple[State, Info]:
    """``sr_smc(...)`` over every block (``lax.scan`` over ``jax.random.split(key, blocks)``).

    Args:
      key: PRNG key (typed, or a legacy ``uint32`` key).
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      prompt: [B, P] int.
      gen_length: as in ``sr_smc``, and so are ``mask_id``, ``num_particles``,
        ``block_length``, ``vocab_size``, ``steps``, ``threshold``, ``temperature`` and
        ``ess_threshold``.

    Returns:
      (final State of all B * N particles, Info stacked over blocks [blocks, B, ...]).

    Raises:
      ValueError: for bad arguments and, eagerly, for non-finite log weights.
      TypeError: ``key`` is not a PRNG key.
    """
    key = as_key(key)
    alg = sr_smc(denoise_fn, gen_length=gen_length, num_particles=num_particles,
                 mask_id=mask_id, block_length=block_length, vocab_size=vocab_size,
                 steps=steps, threshold=threshold, temperature=temperature,
                 ess_threshold=ess_threshold)
    state = alg.init(key, prompt)
    blocks = gen_length // block_length
    state, info = jax.lax.scan(lambda s, k: alg.step(k, s), state, jax.random.split(key, blocks))
    flag = info.nonfinite_weights | info.unfinished
    if not isinstance(flag, jax.core.Tracer) and np.asarray(flag).any():
        blk, probs = np.nonzero(np.asarray(flag))
        raise ValueError(f"SR-SMC failed in block {blk[0]} for {len(np.unique(probs))} "
                         "problem(s): non-finite log weights (NaN, +inf or all -inf) or a block "
                         "left unfinished by NaN priorities; check the `denoise_fn` logits.")
    return state, info


def sr_smc_decode(key: PRNGKey, denoise_fn: decoding.Denoiser, prompt: Array,
                  gen_length: int, *, mask_id: int, num_particles: int, block_length: int,
                  vocab_size: int | None = None, steps: int | None = None,
                  threshold: float | None = 0.9, temperature: float = 1.0,
                  ess_threshold: float = 0.5) -> tuple[DecodeResult, Info]:
    """``run_particles`` then each problem's highest-Path-LL particle.

    Args:
      key: as in ``run_particles``, and so are ``denoise_fn``, ``prompt``, ``gen_length``,
        ``mask_id``, ``num_particles``, ``block_length``, ``vocab_size``, ``steps``,
        ``threshold``, ``temperature`` and ``ess_threshold``.

    Returns:
      (DecodeResult [B] with nfe = batched passes x N, jaxlab's per-particle convention;
       Info stacked over blocks: ``info.passes.sum(0)`` is the official batched count).
    """
    state, info = run_particles(
        key, denoise_fn, prompt, gen_length, mask_id=mask_id, num_particles=num_particles,
        block_length=block_length, vocab_size=vocab_size, steps=steps, threshold=threshold,
        temperature=temperature, ess_threshold=ess_threshold)
    res = best_particle(state)
    return res._replace(nfe=jnp.sum(info.passes, axis=0) * num_particles), info
