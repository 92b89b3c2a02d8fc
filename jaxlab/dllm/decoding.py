"""Unmasking policies, step schedules and greedy / sampled decoding with Path LL.

A *denoiser* is any function ``tokens [B, L] int32 -> (logits [B, L, V], hidden [B, L, D])``
(``functools.partial(model.apply, graphdef, params)`` for the LLaDA model). Sequences are
``concat(prompt [B, P], answer [B, A])``; decoding starts from an all-mask answer and
commits ``k_t`` positions per step, chosen by a policy score among the still-masked
positions of the current semi-AR block (LLaDA ``generate``):

* ``confidence``: p(x0_i) of the predicted token (LLaDA ``low_confidence``);
* ``margin``: top-1 minus top-2 probability;
* ``neg_entropy``: sum_v p_v log p_v;
* ``random``: uniform scores.

Two proposals (``PROPOSALS``) say what is random in a sampled step:

* ``"tokens"`` (LLaDA ``generate``): every masked position draws x0 ~ softmax(logits / T)
  (argmax at ``temperature=0``) and the policy commits the highest-scoring positions, scored
  on the drawn tokens; particles differ mostly in their tokens.
* ``"path"`` (ours): the positions are drawn, the tokens are not (unless a token
  temperature is set). The policy scores every eligible position on its argmax prediction
  (``position_logits``: log-confidence for ``confidence``); the step commits the k_t
  positions of a Gumbel-top-k draw over scores / ``position_temperature`` (a
  Plackett-Luce draw without replacement; ``position_temperature=0`` is the policy's own
  top-k), and writes x0 = argmax at ``temperature=0`` or x0 ~ softmax(logits / T) at those
  positions only. Particles then share greedy's token quality and differ in their
  unmasking order. ``deterministic`` rows [B] bool take the greedy step (top-k, argmax):
  ``path_smc``'s greedy reference particle.

The Path LL increment of a step is the sum of the *untempered* model log-probs of the
committed tokens, log p(x_{Q_t} | x_{O_t}) (POKE-SMC eq. for log p(x; tau)); the mask
token is excluded from the predictive distribution everywhere.

As an ``Algorithm`` (``jaxlab.core.types``): ``decoder(denoise_fn, ...)`` binds the
settings; ``init(key, prompt) -> DecodeState`` and ``step(key, state) -> (DecodeState,
DecodeInfo)`` is one denoiser pass and one commit; ``decode`` is a ``lax.scan`` of ``step``
over ``jax.random.split(key, steps)``. The step index is read off the state (``steps_done``).

Checks (eager, at the Python boundary before the ``lax.scan`` / ``while_loop``; shapes and
dtypes are static so they also hold under ``jit``, values only when concrete):

* ``prompt``: 2-D [B, P] integer array with ids in [0, vocab_size) and no mask id
  (``check_prompt``); ``path_log_likelihood`` checks ``answer`` the same way, and ``order``
  (integers in [0, A), shape of ``answer``); the vocabulary comes from the denoiser's
  abstract output shape (``jax.eval_shape``, no forward pass);
* ``mask_id`` inside the vocabulary, ``vocab_size`` equal to the denoiser's logits width
  (``decoder`` and ``path_smc.smc`` read it from the denoiser when it is None);
* ``policy`` one of ``POLICIES``; ``proposal`` one of ``PROPOSALS``; ``temperature`` and
  ``position_temperature`` >= 0 and finite; ``threshold`` in [0, 1];
* ``gen_length``, ``steps``, ``block_length`` positive ints with block_length dividing
  gen_length, steps divisible by the number of blocks and <= gen_length.

* ``denoise_fn``'s output (abstract evaluation, no forward pass): logits of shape [B, L, V]
  for tokens [B, L] with a floating dtype.

Inside the loops the denoiser's logits are flagged: ``DecodeInfo.nonfinite_logits`` [B]
marks a step where a problem's predicted token has a non-finite log-probability (NaN or
+inf logits, or every non-mask logit at -inf; single -inf logits for banned tokens are
fine). ``decode``, ``decode_threshold`` and ``path_log_likelihood`` raise a ValueError naming
``denoise_fn`` on that flag when they run eagerly; under a caller's ``jit`` the flag is
traced, and checked mode (``jaxlab.core.checks(True)``) turns it into an error.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import checked, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Algorithm, Array, PRNGKey

__all__ = ["Denoiser", "POLICIES", "PROPOSALS", "DecodeState", "DecodeInfo", "DecodeResult",
    "log_probs", "transfer_schedule", "semi_ar_block", "coarse_block", "policy_scores",
    "gumbel_top_k", "decode_step", "decoder", "decode", "decode_threshold", "path_log_likelihood"]

checked.declare("jaxlab.dllm.decode", "jaxlab.dllm.decode_threshold",
                "jaxlab.dllm.path_log_likelihood")

Denoiser = Callable[[Array], tuple[Array, Array]]
POLICIES = ("confidence", "margin", "neg_entropy", "random")
PROPOSALS = ("tokens", "path")


class DecodeState(NamedTuple):
    """Decoding state of B sequences.

    Attributes:
      tokens: [B, L] prompt + partially unmasked answer.
      order: [B, A] step at which each answer position was committed (-1: still masked).
      path_ll: [B] Path LL accumulated so far.
    """

    tokens: Array
    order: Array
    path_ll: Array


class DecodeInfo(NamedTuple):
    """Per step: path_ll_increment [B], log p of the tokens committed by the step;
    nonfinite_logits [B] bool, the denoiser's logits gave a non-finite log p of a predicted
    token (see the module docstring)."""

    path_ll_increment: Array
    nonfinite_logits: Array


class DecodeResult(NamedTuple):
    """Answer [B, A], Path LL [B], commit order [B, A], NFE [B] (denoiser passes)."""

    answer: Array
    path_ll: Array
    order: Array
    nfe: Array


def log_probs(logits: Array, mask_id: int) -> Array:
    """log softmax over the vocabulary with the mask token excluded. [..., V] -> [..., V]."""
    if not 0 <= mask_id < np.shape(logits)[-1]:
        raise ValueError(f"`mask_id`={mask_id} must lie in the vocabulary [0, "
                         f"{np.shape(logits)[-1]}) of `logits`.")
    logits = logits.at[..., mask_id].set(-jnp.inf)
    return jax.nn.log_softmax(logits, axis=-1)


def transfer_schedule(gen_length: int, steps: int, block_length: int | None = None) -> np.ndarray:
    """Tokens committed per step, LLaDA's ``get_num_transfer_tokens`` per semi-AR block.

    Each block of ``block_length`` gets ``steps / num_blocks`` steps; within a block every
    step commits ``block_length // steps_per_block`` tokens and the remainder goes to the
    first steps.

    Returns:
      [steps] int array summing to gen_length.
    """
    block_length = gen_length if block_length in (None, 0) else block_length
    validation.check_positive_int("gen_length", gen_length)
    validation.check_positive_int("steps", steps)
    validation.check_positive_int("block_length", block_length)
    if gen_length % block_length:
        raise ValueError(f"`gen_length`={gen_length} must be divisible by "
                         f"`block_length`={block_length}.")
    num_blocks = gen_length // block_length
    if steps % num_blocks:
        raise ValueError(f"`steps`={steps} must be divisible by the number of blocks "
                         f"gen_length / block_length = {num_blocks}.")
    per_block = steps // num_blocks
    if per_block > block_length:
        raise ValueError(f"`steps`={steps} exceeds gen_length={gen_length}: a step would "
                         "commit no token.")
    base, rem = divmod(block_length, per_block)
    one = np.full(per_block, base, np.int32)
    one[:rem] += 1
    return np.tile(one, num_blocks)


def step_plan(gen_length: int, steps: int | None = None,
              block_length: int | None = None) -> tuple[int, int, np.ndarray, np.ndarray]:
    """Defaults and per-step tables of a scheduled decode (validated by ``transfer_schedule``).

    Returns:
      (steps, block_length, tokens committed per step [steps], semi-AR block index of each
      step [steps]); ``steps`` None is gen_length, ``block_length`` None or 0 one block.
    """
    steps = gen_length if steps is None else steps
    block_length = gen_length if block_length in (None, 0) else block_length
    schedule = transfer_schedule(gen_length, steps, block_length)
    num_blocks = gen_length // block_length
    return steps, block_length, schedule, np.repeat(np.arange(num_blocks), steps // num_blocks)


def semi_ar_block(gen_length: int) -> int:
    """Largest proper divisor of gen_length (1 = left-to-right for prime lengths)."""
    validation.check_positive_int("gen_length", gen_length)
    return max([d for d in range(1, gen_length) if gen_length % d == 0] or [1])


def coarse_block(gen_length: int, num_blocks: int = 4) -> int:
    """Smallest divisor of gen_length that is >= max(2, gen_length / num_blocks): at most
    ``num_blocks`` semi-AR blocks, never one-token blocks (which fix the unmasking order);
    one block when no such divisor is smaller than gen_length (e.g. prime lengths).

    Example: gen_length 16 -> 4 (four blocks), 22 -> 11, 33 -> 11, 4 -> 2, 3 / 5 / 11 -> one
    block."""
    validation.check_positive_int("gen_length", gen_length)
    validation.check_positive_int("num_blocks", num_blocks)
    low = max(2, -(-gen_length // num_blocks))
    return min([d for d in range(low, gen_length + 1) if gen_length % d == 0] or [gen_length])


def steps_done(order: Array) -> Array:
    """Steps taken so far, read off the commit order [..., A] (scalar int32).

    Every scheduled step commits at least one token and marks it with its index t, and all
    sequences of a batch (all particles) move in lockstep, so this is max(order) + 1.
    """
    return jnp.max(order) + 1


def check_policy(policy: str) -> None:
    """``policy`` one of ``POLICIES``."""
    if policy not in POLICIES:
        raise ValueError(f"`policy` must be one of {POLICIES}, got {policy!r}.")


def policy_scores(key: PRNGKey, logp: Array, x0: Array, policy: str) -> Array:
    """Per-position priority (higher = unmask first).

    Args:
      key: PRNG key (``random`` policy).
      logp: [B, A, V] log-probs (mask excluded).
      x0: [B, A] predicted tokens.
      policy: one of ``POLICIES``.

    Returns:
      [B, A] float32 scores.
    """
    if policy == "confidence":
        return jnp.exp(jnp.take_along_axis(logp, x0[..., None], -1)[..., 0])
    if policy == "margin":
        top2 = jax.lax.top_k(jnp.exp(logp), 2)[0]
        return top2[..., 0] - top2[..., 1]
    if policy == "neg_entropy":
        p = jnp.exp(logp)
        return jnp.sum(jnp.where(p > 0, p * logp, 0.0), axis=-1)
    if policy == "random":
        return jax.random.uniform(key, x0.shape)
    raise ValueError(f"`policy` must be one of {POLICIES}, got {policy!r}.")


def position_logits(key: PRNGKey, logp: Array, policy: str) -> Array:
    """Plackett-Luce logits of the positions under the ``"path"`` proposal: the policy's
    score of each position's argmax prediction, on the log scale for ``confidence``
    (log max_v p_v, so the draw weights positions by p^(1 / position_temperature)).

    Args:
      key: PRNG key (``random`` policy).
      logp: [B, A, V] log-probs (mask excluded).
      policy: one of ``POLICIES``.

    Returns:
      [B, A] float32 logits (the order of ``policy_scores`` on the argmax tokens).
    """
    if policy == "confidence":
        return jnp.max(logp, axis=-1)
    return policy_scores(key, logp, jnp.argmax(logp, axis=-1), policy)


def gumbel_top_k(key: PRNGKey, logits: Array, eligible: Array, k: Array,
                 temperature: float, deterministic: Array | None = None) -> Array:
    """Boolean [B, A]: ``k`` eligible positions drawn without replacement with probabilities
    proportional to exp(logits / temperature) (Gumbel-top-k: the k largest of
    logits / temperature + Gumbel noise); ``temperature`` 0, or a ``deterministic`` row [B],
    takes the k largest logits (ties to the lower position).

    Raises:
      ValueError: ``eligible`` not of ``logits``' shape, or a negative ``temperature``
        (checked at trace time).
    """
    validation.check_shape("eligible", eligible, np.shape(logits))
    validation.check_in_range("temperature", temperature, 0.0)
    if temperature == 0.0:
        return select_top_k(logits, eligible, k)
    keys = logits / temperature + jax.random.gumbel(key, logits.shape)
    if deterministic is not None:
        keys = jnp.where(deterministic[:, None], logits, keys)
    return select_top_k(keys, eligible, k)


def check_proposal(proposal: str, position_temperature) -> None:
    """``proposal`` one of ``PROPOSALS``; ``position_temperature`` finite and >= 0."""
    if proposal not in PROPOSALS:
        raise ValueError(f"`proposal` must be one of {PROPOSALS}, got {proposal!r}.")
    validation.check_in_range("position_temperature", position_temperature, 0.0)
    validation.check_finite("position_temperature", position_temperature)


def predict(key: PRNGKey, logits: Array, mask_id: int, temperature: float):
    """x0 predictions and their log-probs. logits [B, A, V] -> (x0 [B, A], logp, logp_x0)."""
    logp = log_probs(logits, mask_id)
    if temperature == 0.0:
        x0 = jnp.argmax(logp, axis=-1)
    else:
        x0 = jax.random.categorical(key, logp / temperature, axis=-1)
    logp_x0 = jnp.take_along_axis(logp, x0[..., None], -1)[..., 0]
    return x0.astype(jnp.int32), logp, logp_x0


def select_top_k(scores: Array, eligible: Array, k: Array) -> Array:
    """Boolean [B, A]: the ``k`` highest-scoring eligible positions per row (fewer if fewer
    are eligible). ``k`` is a traced scalar or [B]."""
    scores = jnp.where(eligible, scores, -jnp.inf)
    rank = jnp.argsort(jnp.argsort(-scores, axis=-1, stable=True), axis=-1, stable=True)
    return eligible & (rank < jnp.reshape(k, (-1, 1)))


def block_eligible(order: Array, step_block: Array, block_length: int) -> Array:
    """Still-masked answer positions inside the current semi-AR block. -> [B, A] bool."""
    pos = jnp.arange(order.shape[1])
    return (order < 0) & (pos // block_length == step_block)[None]


def commit(state: DecodeState, select: Array, x0: Array, logp_x0: Array, t,
           prompt_len: int) -> tuple[DecodeState, Array]:
    """Writes the selected predictions; returns (new state, Path LL increment [B])."""
    answer = state.tokens[:, prompt_len:]
    answer = jnp.where(select, x0, answer)
    inc = jnp.sum(jnp.where(select, logp_x0, 0.0), axis=1)
    order = jnp.where(select, t, state.order)
    tokens = state.tokens.at[:, prompt_len:].set(answer)
    return DecodeState(tokens, order, state.path_ll + inc), inc


def init_state(prompt: Array, gen_length: int, mask_id: int) -> DecodeState:
    """All-mask answers after ``prompt`` [B, P]."""
    validation.check_ndim("prompt", prompt, 2)
    b = prompt.shape[0]
    tokens = jnp.concatenate([prompt.astype(jnp.int32),
                              jnp.full((b, gen_length), mask_id, jnp.int32)], axis=1)
    return DecodeState(tokens, jnp.full((b, gen_length), -1, jnp.int32), jnp.zeros(b))


def check_temperature(temperature) -> None:
    """``temperature`` >= 0 (0: argmax), finite."""
    validation.check_in_range("temperature", temperature, 0.0)
    validation.check_finite("temperature", temperature)


def _traced_prompt(prompt, *, name: str, vocab_size: int, mask_id: int) -> None:
    checked.check(jnp.all((prompt >= 0) & (prompt < vocab_size)),
                  f"`{name}` must lie in [0, {vocab_size}).")
    checked.check(jnp.all(prompt != mask_id),
                  f"`{name}` must not contain the reserved id {mask_id} (the mask id).")


def check_prompt(prompt, vocab_size: int, mask_id: int, name: str = "prompt",
                 where: str = "jaxlab.dllm.decode") -> None:
    """``prompt`` 2-D integer [B, P], B >= 1, with ids in [0, vocab_size) other than
    ``mask_id``.

    Values are checked when concrete, and in checked mode (``jaxlab.core.checks``) when
    traced, as a check of ``where``.
    """
    validation.check_ndim(name, prompt, 2)
    validation.check_nonempty(name, prompt, axis=0)
    validation.check_int_range(name, prompt, 0, vocab_size, exclude=mask_id)
    checked.guard(where, _traced_prompt, prompt, name=name, vocab_size=int(vocab_size),
                  mask_id=int(mask_id))


def check_denoiser_output(denoise_fn: Denoiser, shape: tuple[int, int]):
    """The abstract logits of ``denoise_fn`` on int32 tokens of ``shape`` [B, L], checked to
    be [B, L, V] with a floating dtype (``jax.eval_shape``: no forward pass).

    Raises:
      ValueError / TypeError: naming ``denoise_fn``, for another output structure, shape or
        dtype.
    """
    out = jax.eval_shape(denoise_fn, jax.ShapeDtypeStruct(tuple(shape), jnp.int32))
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise TypeError(f"`denoise_fn` must return (logits [B, L, V], hidden), got "
                        f"{type(out).__name__}.")
    logits = out[0]
    if len(logits.shape) != 3 or tuple(logits.shape[:2]) != tuple(shape):
        raise ValueError(f"`denoise_fn` must return logits of shape ({shape[0]}, {shape[1]}, V) "
                         f"for tokens of shape {tuple(shape)}, got {tuple(logits.shape)}.")
    if not jnp.issubdtype(logits.dtype, jnp.floating):
        raise TypeError(f"`denoise_fn` must return floating logits, got {logits.dtype}.")
    return logits


def vocab_of(denoise_fn: Denoiser, batch: int, length: int) -> int:
    """Logits width of ``denoise_fn`` on [batch, length] tokens (abstract evaluation only;
    the output is checked by ``check_denoiser_output``)."""
    return check_denoiser_output(denoise_fn, (batch, length)).shape[-1]


def nonfinite_logp(logp_x0: Array) -> Array:
    """[B] bool: a predicted token's log-prob [B, A] is NaN or +-inf (bad logits)."""
    return jnp.any(~jnp.isfinite(logp_x0), axis=-1)


def raise_if_nonfinite_logits(flag, where: str) -> None:
    """ValueError naming ``denoise_fn`` if a concrete flag ([..., B] bool) is set."""
    if isinstance(flag, jax.core.Tracer):
        return
    flag = np.asarray(flag)
    if flag.any():
        probs = np.nonzero(flag.reshape(-1, flag.shape[-1]).any(0))[0]
        raise ValueError(f"{where}: `denoise_fn` returned non-finite logits (NaN, +inf, or -inf "
                         f"for every token) at a decoded position for {len(probs)} problem(s) "
                         f"(first: {probs[0]}).")


def _check_logits_flag(flag: Array) -> None:
    checked.check(~jnp.any(flag), "`denoise_fn` returned non-finite logits (NaN, +inf, or "
                  "-inf for every token) at a decoded position.")


def check_vocab(denoise_fn: Denoiser, prompt: Array, gen_length: int, vocab_size: int | None,
                mask_id: int, where: str = "jaxlab.dllm.decode") -> None:
    """Clear errors for a denoiser/vocabulary mismatch (checked on abstract shapes) and for
    a bad ``prompt`` (see ``check_prompt``, its checked-mode checks named ``where``);
    ``vocab_size`` None: the denoiser's."""
    validation.check_ndim("prompt", prompt, 2)
    validation.check_nonempty("prompt", prompt, axis=0)
    if vocab_size is None:
        vocab_size = vocab_of(denoise_fn, prompt.shape[0], prompt.shape[1] + gen_length)
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"`mask_id`={mask_id} must lie in the vocabulary [0, {vocab_size}).")
    check_prompt(prompt, vocab_size, mask_id, where=where)
    shape = (prompt.shape[0], prompt.shape[1] + gen_length)
    logits = check_denoiser_output(denoise_fn, shape)
    if logits.shape[-1] != vocab_size:
        raise ValueError(f"denoiser returns {logits.shape[-1]} logits per position but the "
                         f"vocabulary `vocab_size` is {vocab_size}.")


def decode_step(key, state: DecodeState, logits: Array, k, step_block, t, *, mask_id: int,
                prompt_len: int, policy: str, temperature: float, block_length: int,
                proposal: str = "tokens", position_temperature: float = 1.0,
                deterministic: Array | None = None):
    """One denoising step from precomputed ``logits`` [B, L, V] (module docstring: the
    proposals; ``deterministic`` [B] bool rows take the policy's greedy step: argmax tokens and,
    under ``"path"``, the top-k positions; not meaningful for the ``random`` policy).

    Returns:
      (state, Path LL increment [B], non-finite logits flag [B] (``nonfinite_logp``)).

    Raises:
      ValueError: an unknown ``policy`` or ``proposal`` (checked at trace time).
    """
    check_policy(policy)
    check_proposal(proposal, position_temperature)
    k_pred, k_pol = jax.random.split(key)
    x0, logp, logp_x0 = predict(k_pred, logits[:, prompt_len:], mask_id, temperature)
    if deterministic is not None and temperature != 0.0:
        x0 = jnp.where(deterministic[:, None], jnp.argmax(logp, axis=-1).astype(jnp.int32), x0)
        logp_x0 = jnp.take_along_axis(logp, x0[..., None], -1)[..., 0]
    eligible = block_eligible(state.order, step_block, block_length)
    if proposal == "path":
        k_pos, k_rand = jax.random.split(k_pol)
        select = gumbel_top_k(k_pos, position_logits(k_rand, logp, policy), eligible, k,
                              position_temperature, deterministic)
    else:
        select = select_top_k(policy_scores(k_pol, logp, x0, policy), eligible, k)
    state, inc = commit(state, select, x0, logp_x0, t, prompt_len)
    return state, inc, nonfinite_logp(logp_x0)


def decoder(denoise_fn: Denoiser, *, gen_length: int, mask_id: int,
            vocab_size: int | None = None, policy: str = "confidence",
            steps: int | None = None, block_length: int | None = None,
            temperature: float = 0.0, proposal: str = "tokens",
            position_temperature: float = 0.0) -> Algorithm:
    """Policy decoding of B sequences as an ``Algorithm`` (settings checked here).

    ``init(key, prompt [B, P]) -> DecodeState``: all-mask answers (``key`` unused; checks
    ``prompt`` and the vocabulary). ``step(key, state) -> (DecodeState, DecodeInfo)``: one
    denoiser pass, then the policy commits the step's ``k_t`` tokens of the current semi-AR
    block; ``steps`` steps finish the decode. Arguments as in ``decode``.
    """
    check_policy(policy)
    check_temperature(temperature)
    check_proposal(proposal, position_temperature)
    _, block_length, schedule, blocks = step_plan(gen_length, steps, block_length)

    def init(key: PRNGKey, prompt: Array) -> DecodeState:
        del key
        check_vocab(denoise_fn, prompt, gen_length, vocab_size, mask_id)
        return init_state(prompt, gen_length, mask_id)

    def step(key: PRNGKey, state: DecodeState) -> tuple[DecodeState, DecodeInfo]:
        t = steps_done(state.order)
        logits, _ = denoise_fn(state.tokens)
        state, inc, bad = decode_step(
            key, state, logits, jnp.asarray(schedule)[t], jnp.asarray(blocks)[t], t,
            mask_id=mask_id, prompt_len=state.tokens.shape[1] - gen_length, policy=policy,
            temperature=temperature, block_length=block_length, proposal=proposal,
            position_temperature=position_temperature)
        _check_logits_flag(bad)
        return state, DecodeInfo(inc, bad)

    return Algorithm(init, step)


def decode(key: PRNGKey, denoise_fn: Denoiser, prompt: Array, gen_length: int, *,
           mask_id: int, vocab_size: int, policy: str = "confidence", steps: int | None = None,
           block_length: int | None = None, temperature: float = 0.0,
           proposal: str = "tokens", position_temperature: float = 0.0) -> DecodeResult:
    """Policy decoding of B sequences: ``lax.scan`` of ``decoder(...).step`` over the keys
    ``jax.random.split(key, steps)`` (jit it with the non-array arguments static).

    Args:
      key: PRNG key (sampling and the random policy; typed, or a legacy ``uint32`` key).
      denoise_fn: tokens [B, L] -> (logits [B, L, V], hidden).
      prompt: [B, P] int.
      gen_length: answer length A.
      mask_id, vocab_size: the tokenizer's mask id and vocabulary size.
      policy: one of ``POLICIES``.
      steps: denoising steps (default gen_length: one token per step).
      block_length: semi-AR block length (None: one block).
      temperature: 0 for argmax predictions (under ``"path"``: the token temperature).
      proposal: one of ``PROPOSALS`` (module docstring).
      position_temperature: ``"path"`` only: temperature of the position draw (0: the
        policy's top-k, i.e. greedy positions).

    Returns:
      DecodeResult with nfe = steps for every sequence.

    Raises:
      ValueError: bad arguments (module docstring) and, when run eagerly, non-finite
        logits from ``denoise_fn`` (``DecodeInfo.nonfinite_logits``).
      TypeError: ``key`` is not a PRNG key.
    """
    key = as_key(key)
    alg = decoder(denoise_fn, gen_length=gen_length, mask_id=mask_id, vocab_size=vocab_size,
                  policy=policy, steps=steps, block_length=block_length,
                  temperature=temperature, proposal=proposal,
                  position_temperature=position_temperature)
    steps = gen_length if steps is None else steps
    state = alg.init(key, prompt)

    def run(state, key):
        state, info = jax.lax.scan(lambda s, k: alg.step(k, s), state,
                                   jax.random.split(key, steps))
        return state, jnp.any(info.nonfinite_logits, axis=0)

    state, bad = checked.run("jaxlab.dllm.decode", run, state, key)
    raise_if_nonfinite_logits(bad, "jaxlab.dllm.decode")
    nfe = jnp.full(prompt.shape[0], steps, jnp.int32)
    return DecodeResult(state.tokens[:, prompt.shape[1]:], state.path_ll, state.order, nfe)


def decode_threshold(key: PRNGKey, denoise_fn: Denoiser, prompt: Array, gen_length: int, *,
                     mask_id: int, vocab_size: int, threshold: float = 0.9,
                     block_length: int | None = None) -> DecodeResult:
    """Fast-dLLM confidence-threshold decoding: each step commits every masked position of
    the current block whose confidence exceeds ``threshold`` (at least the most confident
    one), so NFE adapts per sequence. Runs a ``lax.while_loop`` until all are unmasked.

    Args:
      key: PRNG key (typed, or a legacy ``uint32`` key); unused (the decode is greedy), taken
        so every decoder is called the same way.
      denoise_fn: tokens [B, L] -> (logits [B, L, V], hidden).
      prompt: [B, P] int.
      gen_length: answer length A.
      mask_id, vocab_size: the tokenizer's mask id and vocabulary size.
      threshold: confidence in [0, 1] above which a masked position is committed.
      block_length: semi-AR block length (None: one block).

    Returns:
      DecodeResult with nfe [B] the passes each sequence took.
    """
    as_key(key)
    validation.check_in_range("threshold", threshold, 0.0, 1.0)
    block_length = gen_length if block_length in (None, 0) else block_length
    transfer_schedule(gen_length, gen_length // block_length, block_length)  # validates
    check_vocab(denoise_fn, prompt, gen_length, vocab_size, mask_id,
                "jaxlab.dllm.decode_threshold")
    del key
    prompt_len = prompt.shape[1]
    b = prompt.shape[0]

    def cond(carry):
        state, _, _, _ = carry
        return jnp.any(state.order < 0)

    def body(carry):
        state, nfe, t, bad = carry
        active = jnp.any(state.order < 0, axis=1)
        logits, _ = denoise_fn(state.tokens)
        x0, logp, logp_x0 = predict(jax.random.key(0), logits[:, prompt_len:], mask_id, 0.0)
        # NaN confidences (bad logits, flagged below) still commit a position (-1 ranks
        # below every probability but above the ineligible -inf), or the loop never ends.
        conf = jnp.where(jnp.isnan(logp_x0), -1.0, jnp.exp(logp_x0))
        pos = jnp.arange(gen_length)
        first_masked = jnp.argmax(state.order < 0, axis=1)
        blk = first_masked // block_length
        eligible = (state.order < 0) & (pos[None] // block_length == blk[:, None])
        best = select_top_k(conf, eligible, jnp.ones(b, jnp.int32))
        select = (eligible & (conf > threshold)) | best
        select = select & active[:, None]
        state, _ = commit(state, select, x0, logp_x0, t, prompt_len)
        bad = bad | (nonfinite_logp(logp_x0) & active)
        return state, nfe + active.astype(jnp.int32), t + 1, bad

    def run(state):
        state, nfe, _, bad = jax.lax.while_loop(
            cond, body, (state, jnp.zeros(b, jnp.int32), jnp.int32(0), jnp.zeros(b, bool)))
        _check_logits_flag(bad)
        return state, nfe, bad

    state, nfe, bad = checked.run("jaxlab.dllm.decode_threshold", run,
                                  init_state(prompt, gen_length, mask_id))
    raise_if_nonfinite_logits(bad, "jaxlab.dllm.decode_threshold")
    return DecodeResult(state.tokens[:, prompt_len:], state.path_ll, state.order, nfe)


def path_log_likelihood(denoise_fn: Denoiser, prompt: Array, answer: Array, order: Array,
                        *, mask_id: int) -> Array:
    """Exact Path LL of a fixed unmasking order, sum_t log p(x_{Q_t} | x_{O_t}).

    Args:
      denoise_fn: tokens -> (logits, hidden).
      prompt: [B, P]; answer: [B, A] the final tokens.
      order: [B, A] step index (0..T-1) at which each position is revealed; positions with
        the same index are revealed together.

    Returns:
      [B] Path LL. One denoiser pass per distinct step (``lax.map`` over t).
    """
    validation.check_ndim("prompt", prompt, 2)
    validation.check_ndim("answer", answer, 2)
    if np.shape(answer)[0] != np.shape(prompt)[0]:
        raise ValueError(f"`answer` must have the batch size {np.shape(prompt)[0]} of `prompt`, "
                         f"got shape {np.shape(answer)}.")
    validation.check_shape("order", order, np.shape(answer))
    vocab_size = vocab_of(denoise_fn, np.shape(prompt)[0],
                          np.shape(prompt)[1] + np.shape(answer)[1])
    check_prompt(prompt, vocab_size, mask_id, where="jaxlab.dllm.path_log_likelihood")
    check_prompt(answer, vocab_size, mask_id, name="answer",
                 where="jaxlab.dllm.path_log_likelihood")
    validation.check_int_range("order", order, 0, np.shape(answer)[1])
    prompt_len = prompt.shape[1]
    num_steps = answer.shape[1]

    def at_step(t):
        ctx = jnp.where(order < t, answer, mask_id)
        logits, _ = denoise_fn(jnp.concatenate([prompt, ctx], axis=1))
        logp = log_probs(logits[:, prompt_len:], mask_id)
        lp = jnp.take_along_axis(logp, answer[..., None], -1)[..., 0]
        return jnp.sum(jnp.where(order == t, lp, 0.0), axis=1)

    out = jnp.sum(jax.lax.map(at_step, jnp.arange(num_steps)), axis=0)
    # -inf is a legal Path LL (a token the model rules out); NaN means bad logits.
    raise_if_nonfinite_logits(jnp.isnan(out), "jaxlab.dllm.path_log_likelihood")
    return out
