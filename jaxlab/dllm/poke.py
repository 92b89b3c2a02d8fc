"""POKE value estimator: expected remaining Path LL of a partial unmasking trajectory.

A light head on the frozen denoiser's final hidden states. For each still-masked answer
position i it predicts the (non-positive) log-prob the path will commit there,

    V(x_t) = - sum_{i masked} softplus(MLP([h_i, hbar_masked, hbar_unmasked, frac_masked])),

so V = 0 once everything is unmasked and V scales with the work left. The summands, one
predicted log-prob per masked position, are exposed as well (``make_position_value_fn``,
``ValueHead.positions``): the ``value`` position policy (``decoding``) unmasks the
positions the head expects to commit most confidently, from the hidden states of the same
denoiser pass (no extra NFE). It is regressed
(MSE) on the realised remaining Path LL, log p(x; tau) - sum_{s < t} log p(x_{Q_s} | x_{O_s}),
of rollouts of the SMC proposal from fresh prompts: every step of every rollout is one
training pair (hidden states at step t, remaining Path LL after step t - 1).

Checks (eager, at the Python boundary): ``collect_rollouts`` validates ``prompt`` (2-D
integer ids in the denoiser's vocabulary, no mask id), ``policy``, ``temperature`` >= 0 and
``gen_length`` before its jitted body; ``fit`` validates ``lr`` (finite, > 0), ``steps``,
``num_chunks``, ``batch_size``, ``hidden`` (positive ints, steps divisible by num_chunks),
``val_fraction`` in (0, 1), consistent ``rollouts`` shapes, finite ``rollouts.remaining``
and at least one training and one held-out row.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxlab.core import loops, validation
from jaxlab.core.keys import as_key
from jaxlab.core.types import Array, PRNGKey
from jaxlab.dllm import decoding

__all__ = ["ValueHead", "HeadState", "Rollouts", "init", "abstract", "make_value_fn",
    "make_position_value_fn", "collect_rollouts",
    "collect_sibling_rollouts", "sibling_loss", "fit", "evaluate"]


class ValueHead(nnx.Module):
    """Per-masked-position MLP summed into the remaining Path LL (see module docstring)."""

    def __init__(self, d_model: int, hidden: int, *, rngs: nnx.Rngs):
        self.fc1 = nnx.Linear(3 * d_model + 1, hidden, rngs=rngs)
        self.fc2 = nnx.Linear(hidden, hidden, rngs=rngs)
        self.out = nnx.Linear(hidden, 1, rngs=rngs)

    def __call__(self, h: Array, masked: Array) -> Array:
        """h: [M, A, D] answer hidden states; masked: [M, A] bool. Returns [M]."""
        return jnp.sum(self.positions(h, masked), axis=1)

    def positions(self, h: Array, masked: Array) -> Array:
        """The summands of ``__call__``: per masked position the predicted (non-positive)
        log-prob the path will commit there, 0 at unmasked positions. Returns [M, A]."""
        m = masked[..., None].astype(h.dtype)
        n_m = jnp.sum(m, axis=1)
        n_u = h.shape[1] - n_m
        hbar_m = jnp.sum(h * m, axis=1) / jnp.maximum(n_m, 1.0)
        hbar_u = jnp.sum(h * (1 - m), axis=1) / jnp.maximum(n_u, 1.0)
        frac = n_m / h.shape[1]
        ctx = jnp.concatenate([hbar_m, hbar_u, frac], axis=-1)
        feats = jnp.concatenate([h, jnp.broadcast_to(ctx[:, None], (*h.shape[:2],
                                                                    ctx.shape[-1]))], -1)
        z = jax.nn.gelu(self.fc1(feats))
        z = jax.nn.gelu(self.fc2(z))
        per_pos = -jax.nn.softplus(self.out(z)[..., 0])
        return per_pos * masked


def _check_head_sizes(d_model, hidden) -> None:
    validation.check_positive_int("d_model", d_model)
    validation.check_positive_int("hidden", hidden)


def init(d_model: int, hidden: int = 64, *, seed: int = 0):
    """(graphdef, params) of a fresh ValueHead.

    Raises:
      ValueError: ``d_model`` or ``hidden`` is not a positive int.
    """
    _check_head_sizes(d_model, hidden)
    return nnx.split(ValueHead(d_model, hidden, rngs=nnx.Rngs(seed)))


def abstract(d_model: int, hidden: int = 64):
    """(graphdef, ShapeDtypeStruct params) of a ValueHead without allocating or
    initialising weights (``nnx.eval_shape``): the template to restore a head into.

    Raises:
      ValueError: ``d_model`` or ``hidden`` is not a positive int.
    """
    _check_head_sizes(d_model, hidden)
    return nnx.split(nnx.eval_shape(lambda: ValueHead(d_model, hidden, rngs=nnx.Rngs(0))))


def make_value_fn(graphdef, params, prompt_len: int, mask_id: int):
    """value_fn(hidden [M, L, D], tokens [M, L]) -> [M] for ``path_smc.smc``.

    Raises:
      ValueError: ``prompt_len`` or ``mask_id`` is not a non-negative integer.
    """
    validation.check_min_count("prompt_len", prompt_len, 0, "the answer starts after it")
    validation.check_min_count("mask_id", mask_id, 0, "a token id")

    def value_fn(hidden, tokens):
        head = nnx.merge(graphdef, params)
        return head(jax.lax.stop_gradient(hidden[:, prompt_len:]).astype(jnp.float32),
                    tokens[:, prompt_len:] == mask_id)

    return value_fn


def make_position_value_fn(graphdef, params, prompt_len: int, mask_id: int):
    """position_value_fn(hidden [M, L, D], tokens [M, L]) -> [M, A] for the ``value``
    policy (``decoding.decode``, ``path_smc.smc``): the head's per-masked-position predicted
    log-prob (``ValueHead.positions``; 0 at unmasked positions), whose sum over the answer
    is ``make_value_fn``'s value.

    Raises:
      ValueError: ``prompt_len`` is not an int >= 0, or ``mask_id`` is negative.
    """
    for name, v in (("prompt_len", prompt_len), ("mask_id", mask_id)):
        if not isinstance(v, int | np.integer) or isinstance(v, bool) or v < 0:
            raise ValueError(f"`{name}` must be an int >= 0, got {v!r}.")

    def position_value_fn(hidden, tokens):
        head = nnx.merge(graphdef, params)
        return head.positions(
            jax.lax.stop_gradient(hidden[:, prompt_len:]).astype(jnp.float32),
            tokens[:, prompt_len:] == mask_id)

    return position_value_fn


class Rollouts(NamedTuple):
    """Training pairs from proposal rollouts, flattened over (rollout, step).

    Attributes:
      hidden: [R * T, A, D] answer hidden states at the step's denoiser pass.
      masked: [R * T, A] positions still masked before the step.
      remaining: [R * T] realised Path LL of the rest of the rollout.
    """

    hidden: Array
    masked: Array
    remaining: Array


def collect_rollouts(key: PRNGKey, denoise_fn, prompt: Array, gen_length: int, *,
                     mask_id: int, policy: str = "confidence", temperature: float = 1.0,
                     block_length: int | None = None, proposal: str = "tokens",
                     position_temperature: float = 1.0) -> Rollouts:
    """Sampled one-token-per-step rollouts of the SMC proposal from ``prompt`` [R, P].

    Args:
      key: PRNG key (typed, or a legacy ``uint32`` key).
      denoise_fn, gen_length, mask_id: as in ``decoding.decode``.
      prompt: [R, P] prompts, one rollout each.
      policy, temperature, block_length, proposal, position_temperature: the proposal
        (``decoding.decode_step``); train the head on the proposal the decoder will use.

    Returns:
      Rollouts with R * gen_length rows (rollout-major).
    """
    key = as_key(key)
    decoding.check_policy(policy)
    decoding.check_temperature(temperature)
    decoding.check_proposal(proposal, position_temperature)
    validation.check_positive_int("gen_length", gen_length)
    decoding.step_plan(gen_length, gen_length, block_length)  # validates block_length
    validation.check_ndim("prompt", prompt, 2)
    vocab_size = decoding.vocab_of(denoise_fn, prompt.shape[0], prompt.shape[1] + gen_length)
    if not 0 <= mask_id < vocab_size:
        raise ValueError(f"`mask_id`={mask_id} must lie in the vocabulary [0, {vocab_size}).")
    decoding.check_prompt(prompt, vocab_size, mask_id)
    return _collect_rollouts(key, denoise_fn, prompt, gen_length, mask_id=mask_id,
                             policy=policy, temperature=float(temperature),
                             block_length=block_length or gen_length, proposal=proposal,
                             position_temperature=float(position_temperature))


def collect_sibling_rollouts(key: PRNGKey, denoise_fn, prompt: Array, gen_length: int, *,
                             siblings: int, mask_id: int, policy: str = "confidence",
                             temperature: float = 1.0, **proposal) -> Rollouts:
    """``siblings`` rollouts of every prompt of ``prompt`` [R, P]: rollout ``r * siblings +
    k`` is prompt ``r``'s k-th (rows ``(r * siblings + k) * gen_length + t``), the layout
    ``fit(..., siblings=siblings)`` reads."""
    validation.check_positive_int("siblings", siblings)
    validation.check_ndim("prompt", prompt, 2)
    return collect_rollouts(key, denoise_fn, jnp.repeat(prompt, siblings, axis=0), gen_length,
                            mask_id=mask_id, policy=policy, temperature=temperature,
                            **proposal)


@functools.partial(jax.jit, static_argnames=("denoise_fn", "gen_length", "mask_id", "policy",
                                             "temperature", "block_length", "proposal",
                                             "position_temperature"))
def _collect_rollouts(key: PRNGKey, denoise_fn, prompt: Array, gen_length: int, *,
                      mask_id: int, policy: str, temperature: float, block_length: int,
                      proposal: str, position_temperature: float) -> Rollouts:
    prompt_len = prompt.shape[1]
    _, _, schedule, blocks = decoding.step_plan(gen_length, gen_length, block_length)

    def body(state, xs):
        t, k, blk, key_t = xs
        logits, hidden = denoise_fn(state.tokens)
        masked = state.order < 0
        before = state.path_ll
        state, _, _ = decoding.decode_step(
            key_t, state, logits, k, blk, t, mask_id=mask_id, prompt_len=prompt_len,
            policy=policy, temperature=temperature, block_length=block_length,
            proposal=proposal, position_temperature=position_temperature)
        return state, (hidden[:, prompt_len:], masked, before)

    state = decoding.init_state(prompt, gen_length, mask_id)
    xs = (jnp.arange(gen_length), jnp.asarray(schedule), jnp.asarray(blocks),
          jax.random.split(key, gen_length))
    state, (hidden, masked, before) = jax.lax.scan(body, state, xs)
    remaining = state.path_ll[None] - before  # [T, R]
    flat = lambda x: jnp.swapaxes(x, 0, 1).reshape(-1, *x.shape[2:])  # noqa: E731
    return Rollouts(flat(hidden), flat(masked), flat(remaining))


class HeadState(NamedTuple):
    params: nnx.State
    opt_state: optax.OptState
    key: PRNGKey
    losses: Array  # [num_chunks] mean train MSE per chunk
    val_losses: Array  # [num_chunks] validation MSE after each chunk
    best_params: nnx.State  # params of the lowest validation MSE so far
    best_val: Array


def _check_rollouts(rollouts: Rollouts) -> None:
    if not isinstance(rollouts, Rollouts):
        raise TypeError(f"`rollouts` must be a poke.Rollouts, got {type(rollouts).__name__}.")
    validation.check_ndim("rollouts.hidden", rollouts.hidden, 3)
    m, a, _ = rollouts.hidden.shape
    validation.check_shape("rollouts.masked", rollouts.masked, (m, a))
    validation.check_shape("rollouts.remaining", rollouts.remaining, (m,))
    validation.check_finite("rollouts.remaining", rollouts.remaining)
    validation.check_min_count("len(rollouts.remaining)", m, 2,
                               "one training and one held-out row; `rollouts`")


def sibling_loss(pred: Array, target: Array, weight: float) -> Array:
    """mean (V - y)^2 + weight * mean ((V - mean_k V) - (y - mean_k y))^2 (``fit``).

    Args:
      pred: [B, K] values V of the K siblings of each of B (group, step) rows.
      target: [B, K] their realised remaining Path LL y.
      weight: weight of the within-group term (0: the plain MSE).
    """
    validation.check_in_range("weight", weight, 0.0)
    mse = jnp.mean((pred - target) ** 2)
    if not weight:
        return mse
    within = (pred - pred.mean(1, keepdims=True)) - (target - target.mean(1, keepdims=True))
    return mse + weight * jnp.mean(within ** 2)


def fit(rollouts: Rollouts, *, val_fraction: float = 0.1, hidden: int = 64,
        steps: int = 1500, batch_size: int = 512, lr: float = 3e-3, seed: int = 0,
        num_chunks: int = 5, siblings: int = 1, sibling_weight: float = 0.0,
        runner: loops.ChunkRunner = loops.run_chunks):
    """Regresses a ValueHead on ``rollouts`` (MSE) with early stopping, resumable per chunk.

    The last ``val_fraction`` of the rollouts (whole rollouts, they are stored rollout-major)
    is held out; the params with the lowest held-out loss over the chunk ends are returned
    (single-sample remaining Path LLs are noisy and the head overfits them otherwise).

    Sibling loss (ours: the MSE head learned which problems are hard, not which
    particle will do better). With ``siblings`` = K > 1 the rollouts come in groups of K
    consecutive rollouts of the same prompt (``collect_sibling_rollouts``); a batch row is
    one (group, step) with its K sibling partial states, and the loss is

        mean_k (V_k - y_k)^2 + sibling_weight * mean_k ((V_k - mean V) - (y_k - mean y))^2,

    the plain MSE plus the within-group part of the error, which alone decides how
    L_t + V orders siblings at step t (the first term keeps V's scale, which the SMC
    weights use). ``batch_size`` then counts groups. ``sibling_weight`` 0 is the plain MSE.

    Returns:
      (graphdef, best params, per-chunk train loss [num_chunks], per-chunk val loss).
    """
    validation.check_positive_int("siblings", siblings)
    validation.check_in_range("sibling_weight", sibling_weight, 0.0)
    validation.check_finite("sibling_weight", sibling_weight)
    validation.check_in_range("val_fraction", val_fraction, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    validation.check_positive_int("steps", steps)
    validation.check_positive_int("num_chunks", num_chunks)
    validation.check_positive_int("batch_size", batch_size)
    validation.check_positive_int("hidden", hidden)
    validation.check_in_range("lr", lr, 0.0, low_inclusive=False)
    validation.check_finite("lr", lr)
    _check_rollouts(rollouts)
    if steps % num_chunks:
        raise ValueError(f"`steps`={steps} must be divisible by `num_chunks`={num_chunks}.")
    graphdef, params = init(rollouts.hidden.shape[-1], hidden, seed=seed)
    opt = optax.chain(optax.clip_by_global_norm(1.0),
                      optax.adamw(optax.cosine_decay_schedule(lr, steps), weight_decay=1e-4))
    total = rollouts.remaining.shape[0]
    steps_per = rollouts.hidden.shape[1]  # one commit per step: T = answer length
    group = siblings * steps_per  # rows of one sibling group (K rollouts x T steps)
    if total % group:
        raise ValueError(f"`rollouts` has {total} rows, not whole groups of `siblings`="
                         f"{siblings} rollouts x {steps_per} steps.")
    n_groups = total // group
    n_val = max(1, int(round(val_fraction * n_groups)))
    if siblings > 1 and n_groups - n_val < 1:
        raise ValueError(f"`rollouts` holds {n_groups} sibling groups: too few for a "
                         f"`val_fraction`={val_fraction} split.")
    n = (n_groups - n_val) * group if siblings > 1 else total - max(1, int(round(
        val_fraction * total)))
    train, val = (jax.tree.map(lambda x: x[:n], rollouts), jax.tree.map(lambda x: x[n:],
                                                                        rollouts))
    per_chunk = steps // num_chunks
    offsets = jnp.arange(siblings) * steps_per  # rows of one step's siblings, from the first

    def loss_terms(pred, y):  # [B, K] each
        return sibling_loss(pred, y, sibling_weight if siblings > 1 else 0.0)

    # The rollouts enter the jitted chunk as arguments: captured by a closure they would be
    # baked into the program as constants (several copies of a GB-sized array).
    def loss_fn(p, idx, train):  # idx [B, K] rows
        flat = idx.reshape(-1)
        pred = nnx.merge(graphdef, p)(train.hidden[flat], train.masked[flat])
        return loss_terms(pred.reshape(idx.shape), train.remaining[idx])

    def sample(k):
        if siblings == 1:
            return jax.random.randint(k, (batch_size, 1), 0, n)
        g, t = jax.random.randint(k, (2, batch_size), 0, jnp.array([[n // group], [steps_per]]))
        return (g * group + t)[:, None] + offsets[None]

    def val_mse(p, val):
        def one(carry, i):
            sl = lambda x: jax.lax.dynamic_slice_in_dim(x, i * vb, vb)  # noqa: E731
            return carry, nnx.merge(graphdef, p)(sl(val.hidden), sl(val.masked))

        vb = next(d for d in range(min(1024, total - n), 0, -1) if (total - n) % d == 0)
        _, pred = jax.lax.scan(one, 0.0, jnp.arange((total - n) // vb))
        pred = pred.reshape(-1)
        if siblings == 1:
            return jnp.mean((pred - val.remaining) ** 2)
        # [groups, K, T] -> rows (group, step) with K siblings
        to_rows = lambda x: jnp.swapaxes(x.reshape(-1, siblings, steps_per), 1, 2).reshape(  # noqa: E731
            -1, siblings)
        return loss_terms(to_rows(pred), to_rows(val.remaining))

    @jax.jit
    def chunk_on(st: HeadState, i, train, val):
        def step(carry, _):
            p, o, k = carry
            k, k_b = jax.random.split(k)
            loss, g = jax.value_and_grad(loss_fn)(p, sample(k_b), train)
            upd, o = opt.update(g, o, p)
            return (optax.apply_updates(p, upd), o, k), loss

        (p, o, k), losses = jax.lax.scan(step, (st.params, st.opt_state, st.key), None,
                                         length=per_chunk)
        v = val_mse(p, val)
        better = v < st.best_val
        best = jax.tree.map(lambda a, b: jnp.where(better, a, b), p, st.best_params)
        return HeadState(p, o, k, st.losses.at[i].set(jnp.mean(losses)),
                         st.val_losses.at[i].set(v), best, jnp.minimum(v, st.best_val))

    def chunk(st: HeadState, i):
        return chunk_on(st, i, train, val)

    state = HeadState(params, opt.init(params), jax.random.key(seed), jnp.zeros(num_chunks),
                      jnp.zeros(num_chunks), params, jnp.array(jnp.inf))
    state = runner(
        chunk, state, num_chunks, desc="POKE head",
        unit="steps", units_per_chunk=per_chunk,
        log_fn=lambda i, s: f"mse {float(s.losses[i]):.4f} val {float(s.val_losses[i]):.4f}")
    return graphdef, state.best_params, np.asarray(state.losses), np.asarray(state.val_losses)


def evaluate(graphdef, params, rollouts: Rollouts, batch: int = 4096) -> dict:
    """Held-out fit: MSE, R^2 and Pearson r of V against the realised remaining Path LL."""
    validation.check_positive_int("batch", batch)
    _check_rollouts(rollouts)
    head = jax.jit(lambda h, m: nnx.merge(graphdef, params)(h, m))
    n = rollouts.remaining.shape[0]
    pred = np.concatenate([np.asarray(head(rollouts.hidden[i:i + batch],
                                           rollouts.masked[i:i + batch]))
                           for i in range(0, n, batch)])
    y = np.asarray(rollouts.remaining)
    mse = float(np.mean((pred - y) ** 2))
    return {"mse": mse, "r2": float(1 - mse / max(np.var(y), 1e-12)),
            "pearson_r": float(np.corrcoef(pred, y)[0, 1]),
            "baseline_mse_mean_only": float(np.var(y))}
