"""DDPM training of the UNet eps-model (cosine VP schedule) in chunks.

``train_score_model`` runs its chunks through a ``core.loops.ChunkRunner``: a plain loop
by default; the experiment passes a resumable one (orbax checkpoints of the
``ScoreTrainState`` after every chunk). The library itself never touches disk.

Checks (eager, before any compile): ``images`` [N, S, S, C] finite with S divisible by
2^(len(channels) - 1); ``steps``, ``batch_size``, ``num_chunks`` positive integers with
``steps`` divisible by ``num_chunks``; ``learning_rate`` > 0. The training loss is not
checked per step (it is logged per chunk).
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxlab.core import loops, validation
from jaxlab.core.types import Array, PRNGKey, PyTree
from jaxlab.gepc import schedule
from jaxlab.gepc.model import UNet

__all__ = ["ScoreTrainState", "diffusion_loss", "make_eps_fn", "train_score_model"]


class ScoreTrainState(NamedTuple):
    """Carry of ``train_score_model``'s chunks (what a resumable runner checkpoints)."""

    params: PyTree
    opt_state: PyTree
    key: PRNGKey
    step: Array
    losses: Array  # [num_chunks] mean loss of each chunk


def _check_model(model) -> None:
    if not callable(getattr(model, "apply", None)):
        raise TypeError(f"`model` must be a flax model with `apply` (gepc.model.UNet), got "
                        f"{type(model).__name__}; the order is (model, params).")


def diffusion_loss(params, model: UNet, x0: Array, key: PRNGKey) -> Array:
    """E_{t ~ U(1e-3, 1), eps} ||eps_theta(x_t, t) - eps||^2 (simple DDPM loss).

    Raises:
      TypeError / ValueError: ``model`` without ``apply``, or ``x0`` not [B, H, W, C]
        (static checks: a jitted caller pays nothing).
    """
    _check_model(model)
    validation.check_ndim("x0", x0, 4)
    k_t, k_e = jax.random.split(key)
    t = jax.random.uniform(k_t, (x0.shape[0],), minval=1e-3, maxval=1.0)
    eps = jax.random.normal(k_e, x0.shape)
    xt, _ = schedule.noise(x0, eps, t)
    return jnp.mean((model.apply(params, xt, t) - eps) ** 2)


def make_eps_fn(model: UNet, params):
    """(x, t) -> eps_theta(x, t), jitted.

    Raises:
      TypeError: ``model`` has no ``apply`` (e.g. the arguments swapped).
    """
    _check_model(model)
    return jax.jit(lambda x, t: model.apply(params, x, t))


def train_score_model(images: np.ndarray, *, steps: int = 3000,
                      batch_size: int = 64, learning_rate: float = 2e-3, num_chunks: int = 10,
                      channels=(32, 64, 64), seed: int = 0,
                      runner: loops.ChunkRunner = loops.run_chunks):
    """Trains the eps-model on ``images`` [N, S, S, C] in [-1, 1] in ``num_chunks`` chunks
    driven by ``runner`` (the experiment passes a resumable, checkpointing runner).

    Returns:
      (model, params, per-chunk mean losses).
    """
    validation.check_ndim("images", images, 4)
    validation.check_finite("images", images)
    down = 2 ** (len(channels) - 1)
    if images.shape[1] % down or images.shape[2] % down:
        raise ValueError(f"`images` height and width must be divisible by {down} (the UNet "
                         f"halves them {len(channels) - 1} times), got {images.shape[1:3]}.")
    validation.check_positive_int("steps", steps)
    validation.check_positive_int("batch_size", batch_size)
    validation.check_positive_int("num_chunks", num_chunks)
    validation.check_in_range("learning_rate", learning_rate, 0.0, low_inclusive=False)
    if steps % num_chunks:
        raise ValueError(f"`steps`={steps} must be divisible by `num_chunks`={num_chunks}.")
    model = UNet(tuple(channels))
    data = jnp.asarray(images, jnp.float32)
    k_init, k_train = jax.random.split(jax.random.key(seed))
    # One jitted program (the same values as the eager init, which compiles each of its
    # ~170 small ops separately).
    params = jax.jit(model.init)(k_init, data[:2], jnp.zeros(2))
    sched = optax.cosine_onecycle_schedule(steps, learning_rate)
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(sched, weight_decay=1e-4))
    state = ScoreTrainState(params, opt.init(params), k_train, jnp.int32(0),
                       jnp.zeros(num_chunks, jnp.float32))
    per_chunk = steps // num_chunks

    @functools.partial(jax.jit, donate_argnums=(0, 1))
    def step(p, o, k):
        k, k_b, k_l = jax.random.split(k, 3)
        x0 = data[jax.random.randint(k_b, (batch_size,), 0, data.shape[0])]
        loss, g = jax.value_and_grad(diffusion_loss)(p, model, x0, k_l)
        upd, o = opt.update(g, o, p)
        return optax.apply_updates(p, upd), o, k, loss

    def chunk(st: ScoreTrainState, i: int) -> ScoreTrainState:
        # A Python loop of jitted steps: on XLA:CPU a lax.scan around this conv-heavy step
        # ran ~14x slower than the same steps dispatched one by one (measured).
        p, o, k = st.params, st.opt_state, st.key
        total = 0.0
        for _ in range(per_chunk):
            p, o, k, loss = step(p, o, k)
            total += loss
        return ScoreTrainState(p, o, k, st.step + per_chunk,
                               st.losses.at[i].set(total / per_chunk))

    state = runner(
        chunk, state, num_chunks,
        desc="GEPC score model",
        unit="steps", units_per_chunk=per_chunk,
        log_fn=lambda i, s: f"loss {float(s.losses[i]):.4f}")
    return model, state.params, np.asarray(state.losses)
