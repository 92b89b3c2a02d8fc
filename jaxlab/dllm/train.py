"""Masked-diffusion training of a denoiser on a task's generator (LLaDA SFT loss).

For a (prompt, answer) pair draw t ~ U(0, 1) (stratified over the batch), mask each
answer token independently with probability t and minimise

    L = E_t [ (1 / t) * sum_{i masked} -log p(x_i | x_masked) ] / answer_len,

the negative ELBO of the masked diffusion model (LLaDA eq. 3, prompt never masked).
Data are fresh draws from the task's jittable generator at every step (no epochs).

Checks (eager, before anything is compiled): ``train`` validates ``steps``, ``batch_size``,
``num_chunks`` (positive ints, steps divisible by num_chunks), ``lr`` (finite, > 0) and that
the model's vocabulary / mask id match the task; ``make_optimizer`` validates ``lr``,
``steps``, ``warmup`` and ``weight_decay``; ``mask_answers`` validates ``t_min`` in (0, 1].
The training loss itself is not checked inside the jitted step (a diverged run shows up
as a NaN loss in the history).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxlab.core import loops, validation
from jaxlab.core.types import Array, PRNGKey
from jaxlab.dllm import decoding
from jaxlab.dllm import model as model_lib
from jaxlab.dllm import tasks as tasks_lib

__all__ = ["DenoiserTrainState", "mask_answers", "diffusion_loss", "make_train_step",
    "make_optimizer", "evaluate_loss", "greedy_accuracy_fn", "train"]


class DenoiserTrainState(NamedTuple):
    """Carry of ``train``: params, optimizer state, data key, step, per-chunk losses."""

    params: nnx.State
    opt_state: optax.OptState
    key: PRNGKey
    step: Array
    losses: Array  # [num_chunks] mean train loss per chunk
    eval_losses: Array  # [num_chunks] held-out loss after each chunk


def mask_answers(key: PRNGKey, answer: Array, mask_id: int,
                 t_min: float = 1e-3) -> tuple[Array, Array, Array]:
    """Forward process on the answer block.

    Args:
      key: PRNG key.
      answer: [B, A] clean answer tokens.
      mask_id: mask token.
      t_min: smallest masking level (bounds the 1/t weight).

    Returns:
      (noisy [B, A], is_masked [B, A] bool, t [B]); t is stratified: (i + U_i) / B.
    """
    validation.check_in_range("t_min", t_min, 0.0, 1.0, low_inclusive=False)
    b = answer.shape[0]
    k_t, k_m = jax.random.split(key)
    t = (jnp.arange(b) + jax.random.uniform(k_t, (b,))) / b
    t = t_min + (1.0 - t_min) * jax.random.permutation(k_m, t)
    is_masked = jax.random.uniform(jax.random.fold_in(k_m, 1), answer.shape) < t[:, None]
    return jnp.where(is_masked, mask_id, answer), is_masked, t


def diffusion_loss(logits: Array, answer: Array, is_masked: Array, t: Array) -> Array:
    """1/t-weighted cross entropy on masked answer positions, per answer token.

    Args:
      logits: [B, A, V] at the answer positions.
      answer: [B, A] targets.
      is_masked: [B, A].
      t: [B] masking levels.

    Raises:
      ValueError / TypeError: shapes that do not fit (e.g. ``logits`` of the whole
        sequence instead of the answer positions), or a non-integer ``answer`` (static
        checks: a jitted caller pays nothing).
    """
    validation.check_ndim("logits", logits, 3)
    b, a = np.shape(logits)[:2]
    if np.shape(answer) != (b, a):
        raise ValueError(f"`logits` [B, A, V] must be those of the answer positions of "
                         f"`answer` {tuple(np.shape(answer))}, got {tuple(np.shape(logits))}.")
    validation.check_int_range("answer", answer, 0, np.shape(logits)[2])
    validation.check_shape("is_masked", is_masked, (b, a))
    validation.check_shape("t", t, (b,))
    nll = optax.softmax_cross_entropy_with_integer_labels(logits, answer)
    return jnp.mean(jnp.sum(nll * is_masked, axis=1) / t) / answer.shape[1]


def make_train_step(task, graphdef, optimizer, batch_size: int):
    """Returns a jitted ``step(state) -> (state, loss)`` drawing its own batch.

    Raises:
      ValueError: ``task`` lacks the ``tasks.Task`` fields, or ``batch_size`` is not a
        positive integer.
    """
    tasks_lib.check_task(task)
    validation.check_positive_int("batch_size", batch_size)

    @jax.jit
    def step(state: DenoiserTrainState):
        key, k_data, k_mask = jax.random.split(state.key, 3)
        prompt, answer = task.sample(k_data, batch_size)
        noisy, is_masked, t = mask_answers(k_mask, answer, task.mask_id)
        tokens = jnp.concatenate([prompt, noisy], axis=1)

        def loss_fn(params):
            logits, _ = model_lib.apply(graphdef, params, tokens)
            return diffusion_loss(logits[:, task.prompt_len:], answer, is_masked, t)

        loss, grads = jax.value_and_grad(loss_fn)(state.params)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return state._replace(params=params, opt_state=opt_state, key=key,
                              step=state.step + 1), loss

    return step


def make_optimizer(lr: float, steps: int, warmup: int = 100, weight_decay: float = 0.01):
    """Warmup-cosine AdamW with global-norm clipping 1.0."""
    validation.check_in_range("lr", lr, 0.0, low_inclusive=False)
    validation.check_finite("lr", lr)
    validation.check_positive_int("steps", steps)
    validation.check_in_range("warmup", warmup, 0.0)
    validation.check_in_range("weight_decay", weight_decay, 0.0)
    validation.check_finite("weight_decay", weight_decay)
    schedule = optax.warmup_cosine_decay_schedule(0.0, lr, warmup, max(steps, warmup + 1),
                                                  lr * 0.05)
    return optax.chain(optax.clip_by_global_norm(1.0),
                       optax.adamw(schedule, b2=0.98, weight_decay=weight_decay))


@functools.partial(jax.jit, static_argnums=(0, 1, 3), static_argnames=("seed",))
def evaluate_loss(task, graphdef, params, batch_size: int, *, seed: int) -> Array:
    """Held-out diffusion loss on fresh problems (a fixed key per ``seed``)."""
    k_data, k_mask = jax.random.split(jax.random.key(seed + 10_000))
    prompt, answer = task.sample(k_data, batch_size)
    noisy, is_masked, t = mask_answers(k_mask, answer, task.mask_id)
    logits, _ = model_lib.apply(graphdef, params, jnp.concatenate([prompt, noisy], 1))
    return diffusion_loss(logits[:, task.prompt_len:], answer, is_masked, t)


def greedy_accuracy_fn(task, graphdef, num_problems: int, *, seed: int = 0):
    """A jitted ``params -> accuracy []`` of greedy (confidence-policy) decoding on
    ``num_problems`` held-out problems ``task.sample(key(seed + 20_000), num_problems)``
    (a key stream apart from the training data's and ``evaluate_loss``'s).

    Example:
      >>> import jax
      >>> from jaxlab.dllm import model, tasks, train
      >>> task = tasks.Addition(n_digits=2)
      >>> cfg = model.LLaDAConfig(vocab_size=task.vocab_size, mask_token_id=task.mask_id,
      ...                         d_model=16, n_layers=1, n_heads=2, n_kv_heads=2,
      ...                         mlp_hidden_size=32)
      >>> graphdef, params = model.init(cfg)
      >>> acc = train.greedy_accuracy_fn(task, graphdef, 8)(params)
      >>> 0.0 <= float(acc) <= 1.0
      True
    """
    validation.check_positive_int("num_problems", num_problems)
    prompt, _ = task.sample(jax.random.key(seed + 20_000), num_problems)

    @jax.jit
    def accuracy(params):
        result = decoding.decode(jax.random.key(0),
                                 functools.partial(model_lib.apply, graphdef, params), prompt,
                                 task.answer_len, mask_id=task.mask_id,
                                 vocab_size=task.vocab_size)
        return jnp.mean(task.verify(prompt, result.answer).astype(jnp.float32))

    return accuracy


def train(task, cfg: model_lib.LLaDAConfig, *, steps: int, batch_size: int, lr: float,
          seed: int = 0, runner: loops.ChunkRunner = loops.run_chunks,
          num_chunks: int = 10,
          greedy_problems: int = 0) -> tuple[nnx.GraphDef, nnx.State, dict]:
    """Trains a denoiser on ``task`` in ``num_chunks`` chunks driven by ``runner``
    (``loops.run_chunks``; the experiments pass a resumable, checkpointing runner).

    A Python loop of jitted steps (on XLA:CPU faster than a scan around a network step,
    see WORKSPACE_NOTES.md); the whole DenoiserTrainState is checkpointed after each chunk.

    Args:
      greedy_problems: with G > 0, after every chunk (every ``steps / num_chunks`` steps)
        the greedy (confidence-policy) accuracy on G held-out problems
        (``greedy_accuracy_fn``) is measured and logged beside the losses, to choose the
        training length by what decoding needs rather than by the loss. Chunks restored
        from a checkpoint (a resumed run) report NaN.

    Returns:
      (graphdef, params, history) with history = {"step", "train_loss", "eval_loss"} lists
      (and ``"greedy_accuracy"`` with ``greedy_problems`` > 0).
    """
    if cfg.vocab_size != task.vocab_size:
        raise ValueError(f"model `vocab_size`={cfg.vocab_size} != task vocab "
                         f"{task.vocab_size} ({task.name}).")
    if cfg.mask_id != task.mask_id:
        raise ValueError(f"model `mask_token_id`={cfg.mask_id} != task mask id {task.mask_id}.")
    validation.check_positive_int("steps", steps)
    validation.check_positive_int("batch_size", batch_size)
    validation.check_positive_int("num_chunks", num_chunks)
    validation.check_in_range("lr", lr, 0.0, low_inclusive=False)
    validation.check_finite("lr", lr)
    if steps % num_chunks:
        raise ValueError(f"`steps`={steps} must be divisible by `num_chunks`={num_chunks}.")
    if greedy_problems:
        validation.check_positive_int("greedy_problems", greedy_problems)
    graphdef, params = model_lib.init(cfg, seed=seed)
    greedy = greedy_accuracy_fn(task, graphdef, greedy_problems, seed=seed) \
        if greedy_problems else None
    greedy_acc = [float("nan")] * num_chunks
    optimizer = make_optimizer(lr, steps)
    state = DenoiserTrainState(params, optimizer.init(params), jax.random.key(seed),
                               jnp.int32(0), jnp.zeros(num_chunks), jnp.zeros(num_chunks))
    step_fn = make_train_step(task, graphdef, optimizer, batch_size)
    per_chunk = steps // num_chunks

    def chunk(st: DenoiserTrainState, i: int) -> DenoiserTrainState:
        total = 0.0
        for _ in range(per_chunk):
            st, loss = step_fn(st)
            total += loss
        ev = evaluate_loss(task, graphdef, st.params, 512, seed=0)
        if greedy is not None:
            greedy_acc[i] = float(greedy(st.params))
        return st._replace(losses=st.losses.at[i].set(total / per_chunk),
                           eval_losses=st.eval_losses.at[i].set(ev))

    state = runner(
        chunk, state, num_chunks,
        desc=f"{task.name} denoiser", unit="steps", units_per_chunk=per_chunk,
        log_fn=lambda i, s: f"loss {float(s.losses[i]):.4f} eval {float(s.eval_losses[i]):.4f}"
        + ("" if greedy is None else f" greedy accuracy {greedy_acc[i]:.3f}"))
    history = {"step": [per_chunk * (i + 1) for i in range(num_chunks)],
               "train_loss": [float(x) for x in state.losses],
               "eval_loss": [float(x) for x in state.eval_losses]}
    if greedy is not None:
        history["greedy_accuracy"] = greedy_acc
    return graphdef, state.params, history
