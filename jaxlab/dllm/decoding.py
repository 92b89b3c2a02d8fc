"""Unmasking policies, step schedules and greedy / sampled decoding with Path LL.

A *denoiser* is any function ``tokens [B, L] int32 -> (logits [B, L, V], hidden [B, L, D])``
(``functools.partial(model.apply, graphdef, params)`` for the LLaDA model). Sequences are
``concat(prompt [B, P], answer [B, A])``; decoding starts from an all-mask answer and
commits ``k_t`` positions per step, chosen by a policy score among the still-masked
positions of the current semi-AR block (LLaDA ``generate``):

* ``confidence``: p(x0_i) of the predicted token (LLaDA ``low_confidence``);
* ``margin``: top-1 minus top-2 probability;
* ``neg_entropy``: sum_v p_v log p_v;
* ``random``: uniform scores;
* ``value`` (ours, ``HEAD_POLICIES``): the POKE value head's per-position prediction u_i of
  the log-prob the path will commit at masked position i (``poke.make_position_value_fn``,
  read from the hidden states of the same denoiser pass: no extra NFE), mixed with the
  log-confidence by ``policy_mix`` = w in [0, 1]: score_i = (1 - w) log p(x0_i) + w u_i
  (w = 1: highest predicted log-prob first; w = 0: the ``confidence`` order). It needs a
  ``position_value_fn``, so it is not among ``POLICIES`` (the policies every greedy decoder
  runs without a head).

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
  unmasking order. ``deterministic`` rows [B] bool take the greedy step (argmax tokens and
  the top-k of the very scores ``decode`` ranks, ``policy_scores`` of the argmax tokens, so
  ties are broken as greedy breaks them): ``path_smc``'s greedy reference particle.

**The proposal's log-probability of a step** (``decode_step(..., log_q=True)``; ours,
reported by ``path_smc`` beside the weights): log q(s_{t+1} | s_t) of the committed
positions Q_t and tokens x_{Q_t}. Under ``"path"``: the Plackett-Luce probability of the
*set* Q_t (``set_log_prob``; for the ``random`` policy, given the step's uniform scores)
plus sum_{i in Q_t} log softmax(log p_i / T)(x_i) (0 at T = 0). Under ``"tokens"``: sum_{i
in Q_t} log q_T(x_i) plus, for every eligible position j left masked, the log-probability
that j's drawn token scores below the committed ones (ties to the lower position, as
``select_top_k``), so the sum over the unused x0 is exact; for the ``random`` policy
-log C(n_eligible, k). A zero token (position) temperature adds 0 for the tokens
(positions); deterministic rows have log q = 0.

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
* ``policy`` one of ``POLICIES`` (or ``"value"`` with a ``position_value_fn`` whose
  abstract output is [B, A] floats); ``policy_mix`` in [0, 1]; ``proposal`` one of
  ``PROPOSALS``; ``temperature`` and
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
from jax.scipy.special import gammaln

from jaxlab.core import checked, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Algorithm, Array, PRNGKey

__all__ = ["Denoiser", "PositionValueFn", "POLICIES", "HEAD_POLICIES", "PROPOSALS",
    "DecodeState", "DecodeInfo", "DecodeResult",
    "log_probs", "transfer_schedule", "semi_ar_block", "coarse_block", "policy_scores",
    "gumbel_top_k", "decode_step", "decoder", "decode", "decode_threshold", "path_log_likelihood"]

checked.declare("jaxlab.dllm.decode", "jaxlab.dllm.decode_threshold",
                "jaxlab.dllm.path_log_likelihood")

Denoiser = Callable[[Array], tuple[Array, Array]]
# position_value_fn(hidden [M, L, D], tokens [M, L]) -> [M, A]: the predicted log-prob the
# path will commit at each masked answer position (``poke.make_position_value_fn``).
PositionValueFn = Callable[[Array, Array], Array]
POLICIES = ("confidence", "margin", "neg_entropy", "random")
HEAD_POLICIES = ("value",)  # policies that need a ``position_value_fn``
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


def check_policy(policy: str, position_value_fn=None, policy_mix: float = 1.0) -> None:
    """``policy`` one of ``POLICIES``, or ``"value"`` with a ``position_value_fn``;
    ``policy_mix`` in [0, 1]."""
    validation.check_in_range("policy_mix", policy_mix, 0.0, 1.0)
    if policy in HEAD_POLICIES:
        if position_value_fn is None:
            raise ValueError(f"`policy`={policy!r} needs a `position_value_fn` (the value "
                             "head's per-position predictions, poke.make_position_value_fn).")
        if not callable(position_value_fn):
            raise TypeError("`position_value_fn` must be callable: (hidden [M, L, D], tokens "
                            "[M, L]) -> [M, A].")
        return
    if policy not in POLICIES:
        raise ValueError(f"`policy` must be one of {POLICIES + HEAD_POLICIES}, got "
                         f"{policy!r}.")


def check_position_value_fn(position_value_fn, denoise_fn: "Denoiser",
                            shape: tuple[int, int], gen_length: int) -> None:
    """``position_value_fn(hidden, tokens)`` returns [M, A] floats for tokens [M, L] (abstract
    evaluation, no forward pass); raises ValueError / TypeError naming it."""
    tokens = jax.ShapeDtypeStruct(tuple(shape), jnp.int32)
    _, hidden = jax.eval_shape(denoise_fn, tokens)
    out = jax.eval_shape(position_value_fn, hidden, tokens)
    if not hasattr(out, "shape") or tuple(out.shape) != (shape[0], gen_length):
        raise ValueError(f"`position_value_fn` must return one value per answer position, "
                         f"shape ({shape[0]}, {gen_length}), for tokens of shape "
                         f"{tuple(shape)}, got {getattr(out, 'shape', type(out).__name__)}.")
    if not jnp.issubdtype(out.dtype, jnp.floating):
        raise TypeError(f"`position_value_fn` must return floating values, got {out.dtype}.")


def _value_score(logp_x: Array, position_values: Array | None, policy_mix: float) -> Array:
    """(1 - w) log p + w u (module docstring, the ``value`` policy); [B, A] (or [B, A, V]
    with u broadcast over the last axis)."""
    if position_values is None:
        raise ValueError("`policy`='value' needs `position_values` (the value head's "
                         "per-position predictions).")
    u = position_values if logp_x.ndim == position_values.ndim else position_values[..., None]
    if policy_mix == 1.0:
        return jnp.broadcast_to(u, logp_x.shape).astype(jnp.float32)
    return (1.0 - policy_mix) * logp_x + policy_mix * u


def policy_scores(key: PRNGKey, logp: Array, x0: Array, policy: str,
                  position_values: Array | None = None, policy_mix: float = 1.0) -> Array:
    """Per-position priority (higher = unmask first).

    Args:
      key: PRNG key (``random`` policy).
      logp: [B, A, V] log-probs (mask excluded).
      x0: [B, A] predicted tokens.
      policy: one of ``POLICIES`` or ``HEAD_POLICIES``.
      position_values: [B, A] the value head's per-position predicted log-probs (``value``).
      policy_mix: the ``value`` policy's weight w of the head (module docstring).

    Returns:
      [B, A] float32 scores.
    """
    if policy == "value":
        return _value_score(jnp.take_along_axis(logp, x0[..., None], -1)[..., 0],
                            position_values, policy_mix)
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
    raise ValueError(f"`policy` must be one of {POLICIES + HEAD_POLICIES}, got {policy!r}.")


def position_logits(key: PRNGKey, logp: Array, policy: str,
                    position_values: Array | None = None, policy_mix: float = 1.0) -> Array:
    """Plackett-Luce logits of the positions under the ``"path"`` proposal: the policy's
    score of each position's argmax prediction, on the log scale for ``confidence``
    (log max_v p_v, so the draw weights positions by p^(1 / position_temperature)) and
    ``value`` ((1 - w) log max_v p_v + w u).

    Args:
      key: PRNG key (``random`` policy).
      logp: [B, A, V] log-probs (mask excluded).
      policy: one of ``POLICIES`` or ``HEAD_POLICIES``.
      position_values, policy_mix: the ``value`` policy's (``policy_scores``).

    Returns:
      [B, A] float32 logits (the order of ``policy_scores`` on the argmax tokens).
    """
    if policy == "confidence":
        return jnp.max(logp, axis=-1)
    if policy == "value":
        return _value_score(jnp.max(logp, axis=-1), position_values, policy_mix)
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


# Trapezoid grid of ``set_log_prob``'s integral over t = log of the Gumbel scale: the
# integrand exp(t - e^t) prod_i (1 - exp(-r_i e^t)) is below e^t for t < 0 (relative
# truncation error < e^-20 at the lower end) and below exp(4 - e^4) ~ 1e-22 at the upper;
# it is analytic in the strip |Im t| < pi / 2, so the rule's error is ~exp(-2 pi 1.4 / h).
_SET_GRID = np.linspace(-20.0, 4.0, 257)


def _log1mexp_exp(x: Array) -> Array:
    """log(1 - exp(-e^x)), stable for every x (x - e^x / 2 below -15)."""
    y = jnp.exp(jnp.minimum(x, 30.0))
    return jnp.where(x < -15.0, x - 0.5 * y, jnp.log(-jnp.expm1(-y)))


def set_log_prob(logits: Array, chosen: Array, eligible: Array, max_k: int | None = None) -> Array:
    """log-probability that a Gumbel-top-k draw over ``logits`` among the ``eligible``
    positions picks exactly the set ``chosen`` (a Plackett-Luce set law: the sum over the
    orders of ``chosen``).

    With w_i = exp(logits_i), W = the summed w of the eligible positions not chosen and
    r_i = w_i / W, P(chosen) = integral over t of exp(t - e^t) prod_{i chosen} (1 - exp(-r_i
    e^t)) dt (the largest Gumbel outside is Gumbel(log W)), evaluated by the trapezoid rule
    on ``_SET_GRID``; one chosen position (``max_k`` 1) is the softmax, every eligible
    position chosen has probability 1.

    Args:
      logits: [B, A] Plackett-Luce logits (scores / temperature).
      chosen: [B, A] bool, a subset of ``eligible`` (at least one position per row).
      eligible: [B, A] bool.
      max_k: the most positions any row chooses, when known (1: the exact softmax).

    Returns:
      [B] float32 log P(chosen).
    """
    z = jnp.where(eligible, logits, -jnp.inf)
    out = eligible & ~chosen
    log_w_out = jax.nn.logsumexp(jnp.where(out, z, -jnp.inf), axis=-1)  # [B]; -inf: none
    none_out = ~jnp.any(out, axis=-1)
    if max_k == 1:
        lp = jnp.sum(jnp.where(chosen, z, 0.0), -1) - jax.nn.logsumexp(z, axis=-1)
        return jnp.where(none_out, 0.0, lp)
    log_r = jnp.where(chosen, z - jnp.where(none_out, 0.0, log_w_out)[:, None], 0.0)
    grid = jnp.asarray(_SET_GRID, jnp.float32)
    fac = _log1mexp_exp(log_r[..., None] + grid)  # [B, A, G]
    log_f = grid - jnp.exp(grid) + jnp.sum(jnp.where(chosen[..., None], fac, 0.0), axis=1)
    lp = jax.nn.logsumexp(log_f, axis=-1) + np.log(_SET_GRID[1] - _SET_GRID[0])
    return jnp.where(none_out, 0.0, lp)


def _tokens_log_q(logp, x0, select, eligible, *, policy, temperature, position_values,
                  policy_mix):
    """log q of a ``"tokens"`` step (module docstring). [B]."""
    b, a = select.shape
    if policy == "random":
        n_e = jnp.sum(eligible, -1).astype(jnp.float32)
        k = jnp.sum(select, -1).astype(jnp.float32)
        log_sets = gammaln(n_e + 1) - gammaln(k + 1) - gammaln(n_e - k + 1)
    else:
        log_sets = jnp.zeros(b)
    if temperature == 0.0:
        return -log_sets
    logq_tok = jax.nn.log_softmax(logp / temperature, axis=-1)  # [B, A, V]
    chosen = jnp.sum(jnp.where(select, jnp.take_along_axis(logq_tok, x0[..., None], -1)[..., 0],
                               0.0), axis=-1)
    if not (policy == "confidence" or (policy == "value" and policy_mix != 1.0)):
        return chosen - log_sets  # the scores do not depend on the drawn tokens
    table = jnp.exp(logp) if policy == "confidence" else _value_score(logp, position_values,
                                                                     policy_mix)
    s_sel = jnp.take_along_axis(table, x0[..., None], -1)[..., 0]  # the policy's scores
    s_min = jnp.min(jnp.where(select, s_sel, jnp.inf), axis=-1)  # [B]
    pos = jnp.arange(a)
    i_tie = jnp.max(jnp.where(select & (s_sel == s_min[:, None]), pos, -1), axis=-1)  # [B]
    below = ((table < s_min[:, None, None])
             | ((table == s_min[:, None, None]) & (pos[None, :, None] > i_tie[:, None, None])))
    p_below = jnp.sum(jnp.where(below, jnp.exp(logq_tok), 0.0), axis=-1)  # [B, A]
    left = eligible & ~select
    return chosen + jnp.sum(jnp.where(left, jnp.log(jnp.where(left, p_below, 1.0)), 0.0), -1)


def decode_step(key, state: DecodeState, logits: Array, k, step_block, t, *, mask_id: int,
                prompt_len: int, policy: str, temperature: float, block_length: int,
                proposal: str = "tokens", position_temperature: float = 1.0,
                deterministic: Array | None = None, position_values: Array | None = None,
                policy_mix: float = 1.0, log_q: bool = False, max_commit: int | None = None):
    """One denoising step from precomputed ``logits`` [B, L, V] (module docstring: the
    proposals; ``deterministic`` [B] bool rows take the policy's greedy step: argmax tokens and
    the top-k of ``policy_scores``, exactly ``decode``'s; not meaningful for the ``random``
    policy).

    Args:
      position_values: [B, A] the value head's per-position predictions (``value`` policy).
      policy_mix: the ``value`` policy's weight of the head.
      log_q: also return the proposal's log-probability of the step (module docstring).
      max_commit: the most tokens a step commits (static), when known; 1 makes the
        ``"path"`` log q an exact softmax instead of a quadrature.

    Returns:
      (state, Path LL increment [B], non-finite logits flag [B] (``nonfinite_logp``)) and,
      with ``log_q``, log q of the step [B] last.

    Raises:
      ValueError: an unknown ``policy`` or ``proposal``, or the ``value`` policy without
        ``position_values`` (checked at trace time).
    """
    if policy in HEAD_POLICIES:
        if position_values is None:
            raise ValueError(f"`policy`={policy!r} needs `position_values` (the value head's "
                             "per-position predictions).")
        validation.check_in_range("policy_mix", policy_mix, 0.0, 1.0)
    else:
        check_policy(policy)
    check_proposal(proposal, position_temperature)
    k_pred, k_pol = jax.random.split(key)
    x0, logp, logp_x0 = predict(k_pred, logits[:, prompt_len:], mask_id, temperature)
    if deterministic is not None and temperature != 0.0:
        x0 = jnp.where(deterministic[:, None], jnp.argmax(logp, axis=-1).astype(jnp.int32), x0)
        logp_x0 = jnp.take_along_axis(logp, x0[..., None], -1)[..., 0]
    eligible = block_eligible(state.order, step_block, block_length)
    pv = dict(position_values=position_values, policy_mix=policy_mix)
    if proposal == "path":
        k_pos, k_rand = jax.random.split(k_pol)
        pos_logits = position_logits(k_rand, logp, policy, **pv)
        select = gumbel_top_k(k_pos, pos_logits, eligible, k, position_temperature,
                              deterministic)
        if deterministic is not None:
            greedy = select_top_k(policy_scores(k_rand, logp, jnp.argmax(logp, axis=-1),
                                                policy, **pv), eligible, k)
            select = jnp.where(deterministic[:, None], greedy, select)
    else:
        select = select_top_k(policy_scores(k_pol, logp, x0, policy, **pv), eligible, k)
    new, inc = commit(state, select, x0, logp_x0, t, prompt_len)
    if not log_q:
        return new, inc, nonfinite_logp(logp_x0)
    if proposal == "path":
        lq = jnp.zeros(inc.shape)
        if position_temperature != 0.0:
            lq = set_log_prob(pos_logits / position_temperature, select, eligible, max_commit)
        if temperature != 0.0:
            logq_tok = jax.nn.log_softmax(logp / temperature, axis=-1)
            lq = lq + jnp.sum(jnp.where(select, jnp.take_along_axis(
                logq_tok, x0[..., None], -1)[..., 0], 0.0), axis=-1)
    else:
        lq = _tokens_log_q(logp, x0, select, eligible, policy=policy, temperature=temperature,
                           **pv)
    if deterministic is not None:
        lq = jnp.where(deterministic, 0.0, lq)
    return new, inc, nonfinite_logp(logp_x0), lq


def decoder(denoise_fn: Denoiser, *, gen_length: int, mask_id: int,
            vocab_size: int | None = None, policy: str = "confidence",
            steps: int | None = None, block_length: int | None = None,
            temperature: float = 0.0, proposal: str = "tokens",
            position_temperature: float = 0.0,
            position_value_fn: PositionValueFn | None = None,
            policy_mix: float = 1.0) -> Algorithm:
    """Policy decoding of B sequences as an ``Algorithm`` (settings checked here).

    ``init(key, prompt [B, P]) -> DecodeState``: all-mask answers (``key`` unused; checks
    ``prompt`` and the vocabulary). ``step(key, state) -> (DecodeState, DecodeInfo)``: one
    denoiser pass, then the policy commits the step's ``k_t`` tokens of the current semi-AR
    block; ``steps`` steps finish the decode. Arguments as in ``decode``.
    """
    check_policy(policy, position_value_fn, policy_mix)
    check_temperature(temperature)
    check_proposal(proposal, position_temperature)
    _, block_length, schedule, blocks = step_plan(gen_length, steps, block_length)
    head = policy in HEAD_POLICIES

    def init(key: PRNGKey, prompt: Array) -> DecodeState:
        del key
        check_vocab(denoise_fn, prompt, gen_length, vocab_size, mask_id)
        if head:
            check_position_value_fn(position_value_fn, denoise_fn,
                                    (prompt.shape[0], prompt.shape[1] + gen_length), gen_length)
        return init_state(prompt, gen_length, mask_id)

    def step(key: PRNGKey, state: DecodeState) -> tuple[DecodeState, DecodeInfo]:
        t = steps_done(state.order)
        logits, hidden = denoise_fn(state.tokens)
        pv = position_value_fn(hidden, state.tokens) if head else None
        state, inc, bad = decode_step(
            key, state, logits, jnp.asarray(schedule)[t], jnp.asarray(blocks)[t], t,
            mask_id=mask_id, prompt_len=state.tokens.shape[1] - gen_length, policy=policy,
            temperature=temperature, block_length=block_length, proposal=proposal,
            position_temperature=position_temperature, position_values=pv,
            policy_mix=policy_mix)
        _check_logits_flag(bad)
        return state, DecodeInfo(inc, bad)

    return Algorithm(init, step)


@checked.boundary
def decode(key: PRNGKey, denoise_fn: Denoiser, prompt: Array, gen_length: int, *,
           mask_id: int, vocab_size: int, policy: str = "confidence", steps: int | None = None,
           block_length: int | None = None, temperature: float = 0.0,
           proposal: str = "tokens", position_temperature: float = 0.0,
           position_value_fn: PositionValueFn | None = None,
           policy_mix: float = 1.0) -> DecodeResult:
    """Policy decoding of B sequences: ``lax.scan`` of ``decoder(...).step`` over the keys
    ``jax.random.split(key, steps)`` (jit it with the non-array arguments static).

    Args:
      key: PRNG key (sampling and the random policy; typed, or a legacy ``uint32`` key).
      denoise_fn: tokens [B, L] -> (logits [B, L, V], hidden).
      prompt: [B, P] int.
      gen_length: answer length A.
      mask_id, vocab_size: the tokenizer's mask id and vocabulary size.
      policy: one of ``POLICIES``, or ``"value"`` (``HEAD_POLICIES``) with a
        ``position_value_fn``.
      steps: denoising steps (default gen_length: one token per step).
      block_length: semi-AR block length (None: one block).
      temperature: 0 for argmax predictions (under ``"path"``: the token temperature).
      proposal: one of ``PROPOSALS`` (module docstring).
      position_temperature: ``"path"`` only: temperature of the position draw (0: the
        policy's top-k, i.e. greedy positions).
      position_value_fn: ``(hidden [B, L, D], tokens [B, L]) -> [B, A]`` per-position
        predicted log-probs (``poke.make_position_value_fn``), read from each step's own
        denoiser pass (no extra NFE); used by the ``value`` policy only.
      policy_mix: the ``value`` policy's weight w of the head in [0, 1] (module docstring).

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
                  position_temperature=position_temperature,
                  position_value_fn=position_value_fn, policy_mix=policy_mix)
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


@checked.boundary
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
        with checked.suspended():  # checks in a while body break under vmap (checked.py)
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

    def flag(bad):
        _check_logits_flag(bad)
        return bad

    # The loop runs outside the checked body: checkify of a while loop fails under vmap
    # (checked.suspended); its result flag is checked after it.
    state, nfe, _, bad = jax.lax.while_loop(
        cond, body, (init_state(prompt, gen_length, mask_id), jnp.zeros(b, jnp.int32),
                     jnp.int32(0), jnp.zeros(b, bool)))
    bad = checked.run("jaxlab.dllm.decode_threshold", flag, bad)
    raise_if_nonfinite_logits(bad, "jaxlab.dllm.decode_threshold")
    return DecodeResult(state.tokens[:, prompt_len:], state.path_ll, state.order, nfe)


@checked.boundary
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
