"""A task defined outside jaxlab (what a user writes): reverse a string of digits.

Used by tests/dllm/test_own_task.py through ``config.task_refs`` and ``register_task``.
"""

import dataclasses

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class Reverse:
    """Prompt: ``length`` tokens in 0..3; answer: the prompt reversed; token 4 = mask."""

    length: int = 4
    name: str = "reverse"
    vocab_size: int = 5

    @property
    def mask_id(self) -> int:
        return self.vocab_size - 1

    @property
    def prompt_len(self) -> int:
        return self.length

    @property
    def answer_len(self) -> int:
        return self.length

    def sample(self, key, n):
        prompt = jax.random.randint(key, (n, self.length), 0, 4, jnp.int32)
        return prompt, prompt[:, ::-1]

    def verify(self, prompt, answer):
        return jnp.all(answer == prompt[:, ::-1], axis=1)


READY = Reverse(length=3)  # a task object (not a factory)
NOT_A_TASK = 42
