"""Accuracy of N sampled answers per problem: pass@N, pass@k and best-of-N.

``particle_correctness`` decodes N independent particles per problem (best-of-N's
proposal: ``path_smc`` without resampling or lookahead) and verifies every one with the
task; the reductions below turn its ``[B, N]`` correctness into per-problem scores:

* ``pass_at_n``: some particle is right (the ceiling any particle reranker can reach);
* ``pass_at_k``: the unbiased estimate of pass@k from N >= k samples (Chen et al., 2021,
  "Evaluating Large Language Models Trained on Code", eq. 1):
  ``1 - C(N - c, k) / C(N, k)`` with c right samples;
* ``best_of_n_correct``: the particle of highest Path LL is right (``path_smc.best_of_n``).

``pass_at_n(c) - best_of_n_correct(c, ll)`` averaged over problems is the headroom a
better reranker (POKE-SMC's value) can win, the study's precondition (``experiments/dllm.py``).
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation
from jaxlab.core.types import Array, PRNGKey
from jaxlab.dllm import decoding, path_smc

__all__ = ["ParticleCorrectness", "particle_correctness", "pass_at_n", "pass_at_k",
    "best_of_n_correct"]


class ParticleCorrectness(NamedTuple):
    """N decoded answers per problem, verified.

    Attributes:
      correct: [B, N] bool, ``task.verify`` of each particle's answer.
      path_ll: [B, N] Path LL of each particle (``decoding.path_log_likelihood``).
      answer: [B, N, A] int32 decoded answers.
    """

    correct: Array
    path_ll: Array
    answer: Array


def particle_correctness(key: PRNGKey, denoise_fn: decoding.Denoiser, task, prompt: Array,
                         *, num_particles: int, temperature: float = 1.0,
                         block_length: int | None = None,
                         policy: str = "confidence") -> ParticleCorrectness:
    """Decodes ``num_particles`` independent answers per problem and verifies each.

    Args:
      key: PRNG key (typed, or a legacy ``uint32`` key).
      denoise_fn: tokens [M, L] -> (logits [M, L, V], hidden [M, L, D]).
      task: any task (``tasks.Task``): ``answer_len``, ``mask_id``, ``vocab_size``,
        ``verify``.
      prompt: [B, task.prompt_len] int32.
      num_particles: N >= 1.
      temperature, block_length, policy: the proposal (``decoding.decode``).

    Returns:
      ``ParticleCorrectness`` with [B, N] fields.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxlab.dllm import evaluation, tasks
      >>> task = tasks.Addition(n_digits=2)
      >>> def uniform(tokens):  # a denoiser that knows nothing
      ...     return (jnp.zeros((*tokens.shape, task.vocab_size)),
      ...             jnp.zeros((*tokens.shape, 8)))
      >>> prompt, _ = task.sample(jax.random.key(0), 3)
      >>> pc = evaluation.particle_correctness(jax.random.key(1), uniform, task, prompt,
      ...                                      num_particles=4)
      >>> pc.correct.shape, pc.answer.shape
      ((3, 4), (3, 4, 3))
    """
    validation.check_shape("prompt", prompt, (None, task.prompt_len))
    b, n, a = np.shape(prompt)[0], int(num_particles), task.answer_len
    state, _ = path_smc.run_particles(
        key, denoise_fn, prompt, a, mask_id=task.mask_id, vocab_size=task.vocab_size,
        num_particles=n, value_fn=None, resample=False, temperature=temperature,
        block_length=block_length, policy=policy)
    answer = state.decode.tokens[:, -a:]
    correct = task.verify(jnp.repeat(prompt, n, axis=0), answer)
    return ParticleCorrectness(correct.reshape(b, n), state.decode.path_ll.reshape(b, n),
                               answer.reshape(b, n, a))


def _check_correct(correct) -> np.ndarray:
    validation.check_bool("correct", correct)
    validation.check_ndim("correct", correct, 2)
    validation.check_nonempty("correct", correct)
    return correct


def pass_at_n(correct: Array) -> Array:
    """Whether some of the N answers of each problem is right.

    Args:
      correct: [B, N] bool (``ParticleCorrectness.correct``).

    Returns:
      [B] bool; its mean is the pass@N rate.

    Example:
      >>> import numpy as np
      >>> from jaxlab.dllm import evaluation
      >>> c = np.array([[False, True], [False, False]])
      >>> evaluation.pass_at_n(c).tolist()
      [True, False]
    """
    return jnp.any(jnp.asarray(_check_correct(correct)), axis=1)


def pass_at_k(correct: Array, k: int) -> Array:
    """Unbiased pass@k per problem from N >= k samples (Chen et al., 2021, eq. 1).

    ``1 - C(N - c, k) / C(N, k)``, c = right samples of the problem, computed as the
    product ``prod_{i = N - c + 1}^{N} (1 - k / i)`` (no large binomials).

    Args:
      correct: [B, N] bool.
      k: 1 <= k <= N.

    Returns:
      [B] float32 in [0, 1]; k = N gives ``pass_at_n`` as 0/1.

    Raises:
      ValueError: ``k`` not an int in [1, N].

    Example:
      >>> import numpy as np
      >>> from jaxlab.dllm import evaluation
      >>> c = np.array([[True, False, False, False]])
      >>> float(evaluation.pass_at_k(c, 1)[0]), float(evaluation.pass_at_k(c, 2)[0])
      (0.25, 0.5)
    """
    correct = jnp.asarray(_check_correct(correct))
    n = correct.shape[1]
    validation.check_positive_int("k", k)
    if k > n:
        raise ValueError(f"`k`={k} must be <= N={n} (the samples per problem).")
    c = jnp.sum(correct, axis=1)
    i = jnp.arange(1, n + 1, dtype=jnp.float32)  # [N]
    # factor (1 - k / i) for i in (N - c, N]; 1 elsewhere
    use = i[None, :] > (n - c)[:, None]
    miss = jnp.prod(jnp.where(use, 1.0 - k / i[None, :], 1.0), axis=1)
    return (1.0 - miss).astype(jnp.float32)


def best_of_n_correct(correct: Array, path_ll: Array) -> Array:
    """Whether the highest-Path-LL answer of each problem is right (best-of-N).

    Args:
      correct: [B, N] bool.
      path_ll: [B, N] float, the reranking score (ties: the first particle).

    Returns:
      [B] bool.

    Example:
      >>> import numpy as np
      >>> from jaxlab.dllm import evaluation
      >>> c = np.array([[False, True], [True, False]])
      >>> ll = np.array([[-3.0, -1.0], [-2.0, -0.5]])
      >>> evaluation.best_of_n_correct(c, ll).tolist()
      [True, False]
    """
    correct = jnp.asarray(_check_correct(correct))
    validation.check_shape("path_ll", path_ll, np.shape(correct))
    best = jnp.argmax(jnp.asarray(path_ll), axis=1)
    return correct[jnp.arange(correct.shape[0]), best]
