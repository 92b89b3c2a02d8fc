"""Particle decoders: best-of-N, Path-LL SMC without lookahead, and POKE-SMC.

Every problem carries N particles (flattened to a [B * N, L] batch for the denoiser). One
step of SMC follows blackjax's ``smc/base.py`` (reweight, resample, mutate):

1. one denoiser pass on all particles gives logits (and hidden states);
2. *twist* (POKE-SMC only): log w += V(x_t) - V(x_{t-1}), V the POKE value of the
   partial trajectory, so the weights target p(path so far) * exp(V) (twisted SMC);
3. where ESS < ``ess_threshold * N`` the problem's particles are resampled (ancestor
   indices from ``jaxlab.core.smc``; logits travel with their particle, so resampling
   costs no extra NFE) and its weights reset to their mean;
4. *mutate*: a sampled unmasking step (temperature ``T``) commits tokens; its Path LL
   increment is added to log w (self-rewarding SMC: log w += sum of committed log-probs).

At the end the last twist is removed (V = 0 once nothing is masked) and the particle with
the highest Path LL is returned. Best-of-N is the same loop with no twist and no
resampling. NFE = steps * N per problem for all three.

Checks: eagerly at the Python boundary (before the scan; see also ``decoding``'s
docstring): ``prompt`` 2-D integer ids in [0, vocab_size) without the mask id;
``num_particles`` a positive int; ``resampler`` in ``RESAMPLERS``; ``policy`` in
``decoding.POLICIES``; ``ess_threshold`` in [0, 1]; ``temperature`` >= 0;
``weight_scale`` finite and >= 0; the step / block schedule. Traced values: the log
weights are built inside the ``lax.scan`` (from the denoiser's logits, ``value_fn`` and
``weight_scale``), so each step records ``SMCInfo.nonfinite_weights`` [B] (a NaN or +inf
log weight, or all of a problem's particles at -inf). ``run_particles`` and hence
``smc_decode`` / ``best_of_n`` raise a ValueError on that flag when they run eagerly
(concrete outputs); under a caller's ``jit`` they cannot, and the caller must check
``info.nonfinite_weights`` on the returned info (``raise_if_nonfinite(info)``).
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import smc as smc_lib
from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey
from jaxlab.dllm import decoding
from jaxlab.dllm.decoding import DecodeResult, DecodeState

# value_fn(hidden [M, L, D], tokens [M, L]) -> [M] predicted remaining Path LL.
ValueFn = Callable[[Array, Array], Array]
RESAMPLERS = {"systematic": smc_lib.systematic, "stratified": smc_lib.stratified,
              "multinomial": smc_lib.multinomial, "residual": smc_lib.residual}


class SMCState(NamedTuple):
    """Particles of B problems.

    Attributes:
      decode: DecodeState over [B * N] particles.
      log_weights: [B, N] unnormalised log weights.
      value: [B, N] POKE value of the current partial trajectory (0 without lookahead).
    """

    decode: DecodeState
    log_weights: Array
    value: Array


class SMCInfo(NamedTuple):
    """Per step: ancestors [B, N], ESS before resampling [B], resampled [B] bool,
    log-likelihood increment [B] (log mean incremental weight), nonfinite_weights [B] bool
    (after the step some log weight is NaN or +inf, or all are -inf: see the module
    docstring)."""

    ancestors: Array
    ess: Array
    resampled: Array
    log_likelihood_increment: Array
    nonfinite_weights: Array | None = None


def _nonfinite(log_w: Array) -> Array:
    """[B] bool: a NaN / +inf log weight, or every particle of the problem at -inf."""
    return (jnp.any(jnp.isnan(log_w) | jnp.isposinf(log_w), axis=1)
            | jnp.all(jnp.isneginf(log_w), axis=1))


def raise_if_nonfinite(info: SMCInfo) -> None:
    """ValueError if any step flagged non-finite log weights (``info`` must be concrete)."""
    flag = info.nonfinite_weights
    if flag is None or isinstance(flag, jax.core.Tracer):
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


def resample_step(key: PRNGKey, state: SMCState, logits: Array, *, num_particles: int,
                  ess_threshold: float, resampler: str) -> tuple[SMCState, Array, SMCInfo]:
    """ESS-triggered per-problem resampling of particles (and their logits [B * N, L, V])."""
    b, n = state.log_weights.shape
    ess = _ess(state.log_weights)
    do = ess < ess_threshold * n
    weights = jax.vmap(lambda lw: smc_lib.normalize_log_weights(lw)[0])(state.log_weights)
    idx = jax.vmap(lambda k, w: RESAMPLERS[resampler](k, w, n))(jax.random.split(key, b),
                                                               weights)
    anc = jnp.where(do[:, None], idx, jnp.arange(n)[None])
    flat = (anc + n * jnp.arange(b)[:, None]).reshape(-1)
    gather = lambda x: x[flat]  # noqa: E731
    mean_lw = jax.nn.logsumexp(state.log_weights, axis=1, keepdims=True) - jnp.log(n)
    log_w = jnp.where(do[:, None], jnp.broadcast_to(mean_lw, (b, n)), state.log_weights)
    value = jnp.take_along_axis(state.value, anc, axis=1)
    dec = jax.tree.map(gather, state.decode)
    info = SMCInfo(anc, ess, do, jnp.zeros(b), jnp.zeros(b, bool))
    return SMCState(dec, log_w, value), gather(logits), info


def run_particles(denoise_fn: decoding.Denoiser, prompt: Array, gen_length: int, *,
               key: PRNGKey, mask_id: int, vocab_size: int, num_particles: int,
               value_fn: ValueFn | None = None, resample: bool = True,
               policy: str = "confidence", steps: int | None = None,
               block_length: int | None = None, temperature: float = 1.0,
               ess_threshold: float = 0.5, resampler: str = "multinomial",
               weight_scale: float = 1.0) -> tuple[SMCState, SMCInfo]:
    """SMC over unmasking paths (see module docstring); one ``lax.scan`` over steps.

    Args:
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      prompt: [B, P].
      gen_length: answer length A.
      key: PRNG key.
      mask_id, vocab_size: tokenizer facts (checked against the denoiser).
      num_particles: N >= 1.
      value_fn: POKE value (hidden, tokens) -> [M]; None = no lookahead.
      resample: False gives best-of-N (independent particles).
      policy, steps, block_length, temperature: the proposal (see ``decoding.decode``).
      ess_threshold: resample when ESS < ess_threshold * N (0.5 in the paper).
      resampler: one of ``RESAMPLERS``.
      weight_scale: beta >= 0 in log w += beta * (increment + twist).

    Returns:
      (final SMCState: all B * N particles and their log weights, the last twist removed
       (V = 0 when nothing is masked); SMCInfo stacked over steps).

    Raises:
      ValueError: for bad arguments (module docstring) and, when run eagerly, when a step
        produced non-finite log weights (``SMCInfo.nonfinite_weights``).
    """
    if not isinstance(num_particles, int | np.integer) or num_particles < 1:
        raise ValueError(f"`num_particles` must be a positive int, got {num_particles!r}.")
    if resampler not in RESAMPLERS:
        raise ValueError(f"`resampler` must be one of {sorted(RESAMPLERS)}, got {resampler!r}.")
    validation.check_in_range("ess_threshold", ess_threshold, 0.0, 1.0)
    if policy not in decoding.POLICIES:
        raise ValueError(f"`policy` must be one of {decoding.POLICIES}, got {policy!r}.")
    validation.check_ndim("prompt", prompt, 2)
    decoding.check_temperature(temperature)
    validation.check_in_range("weight_scale", weight_scale, 0.0)
    validation.check_finite("weight_scale", weight_scale)
    steps = gen_length if steps is None else steps
    block_length = gen_length if block_length in (None, 0) else block_length
    schedule = decoding.transfer_schedule(gen_length, steps, block_length)
    decoding.check_vocab(denoise_fn, prompt, gen_length, vocab_size, mask_id)
    b, prompt_len = prompt.shape
    n = num_particles
    num_blocks = gen_length // block_length
    blocks = np.repeat(np.arange(num_blocks), steps // num_blocks)
    twist = value_fn is not None

    def body(state: SMCState, xs):
        t, k, blk, key_t = xs
        k_res, k_step = jax.random.split(key_t)
        logits, hidden = denoise_fn(state.decode.tokens)
        if twist:
            v = value_fn(hidden, state.decode.tokens).reshape(b, n)
            state = state._replace(log_weights=state.log_weights
                                   + weight_scale * (v - state.value), value=v)
        if resample:
            lw_before = state.log_weights
            state, logits, info = resample_step(k_res, state, logits, num_particles=n,
                                                ess_threshold=ess_threshold,
                                                resampler=resampler)
        else:
            lw_before = state.log_weights
            info = SMCInfo(jnp.broadcast_to(jnp.arange(n), (b, n)), _ess(lw_before),
                           jnp.zeros(b, bool), jnp.zeros(b), jnp.zeros(b, bool))
        dec, inc = decoding.decode_step(
            k_step, state.decode, logits, k, blk, t, mask_id=mask_id, prompt_len=prompt_len,
            policy=policy, temperature=temperature, block_length=block_length)
        log_w = state.log_weights + weight_scale * inc.reshape(b, n)
        info = info._replace(log_likelihood_increment=(
            jax.nn.logsumexp(log_w, axis=1) - jax.nn.logsumexp(lw_before, axis=1)),
            nonfinite_weights=_nonfinite(log_w))
        return SMCState(dec, log_w, state.value), info

    dec0 = decoding.init_state(jnp.repeat(prompt, n, axis=0), gen_length, mask_id)
    state = SMCState(dec0, jnp.zeros((b, n)), jnp.zeros((b, n)))
    xs = (jnp.arange(steps), jnp.asarray(schedule), jnp.asarray(blocks),
          jax.random.split(key, steps))
    state, info = jax.lax.scan(body, state, xs)
    state = SMCState(state.decode, state.log_weights - weight_scale * state.value,
                     jnp.zeros_like(state.value))
    raise_if_nonfinite(info)
    return state, info


def smc_decode(denoise_fn: decoding.Denoiser, prompt: Array, gen_length: int, *,
               num_particles: int, steps: int | None = None,
               **kwargs) -> tuple[DecodeResult, SMCInfo]:
    """``run_particles`` then the highest-Path-LL particle per problem.

    Returns:
      (DecodeResult [B] with nfe = steps * N; SMCInfo stacked over steps).
    """
    state, info = run_particles(denoise_fn, prompt, gen_length, num_particles=num_particles,
                                steps=steps, **kwargs)
    b, prompt_len = prompt.shape
    n = num_particles
    steps = gen_length if steps is None else steps
    path_ll = state.decode.path_ll.reshape(b, n)
    best = jnp.argmax(path_ll, axis=1)
    pick = lambda x: x.reshape(b, n, *x.shape[1:])[jnp.arange(b), best]  # noqa: E731
    answer = pick(state.decode.tokens)[:, prompt_len:]
    result = DecodeResult(answer, pick(state.decode.path_ll), pick(state.decode.order),
                          jnp.full(b, steps * n, jnp.int32))
    return result, info


best_of_n = functools.partial(smc_decode, value_fn=None, resample=False)
best_of_n.__doc__ = "Best-of-N by Path LL: N independent sampled decodes, argmax Path LL."
