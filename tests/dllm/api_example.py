"""The dLLM method for the shared API test: POKE-SMC on a small random denoiser.

``build() -> (alg, init_args, step_args)``: ``alg = dllm.smc(...)`` over a denoiser with
fixed random weights whose predictions depend on the unmasked context (a bag-of-tokens
layer, cheap to compile, unlike the LLaDA model) and a POKE value head on its hidden
states; 2 prompts of length 2, answers of length 3, 2 particles each, sampled proposals
(temperature 1) and resampling whenever ESS < N, so the key matters at every step.
``s = alg.init(key, *init_args)``; ``s, info = alg.step(key, s, *step_args)``.
"""

import jax
import jax.numpy as jnp

from jaxlab import dllm
from jaxlab.core.types import Algorithm

VOCAB, MASK, HIDDEN, GEN_LENGTH = 6, 5, 8, 3
SETTINGS = dict(num_particles=2, mask_id=MASK, temperature=1.0, ess_threshold=1.0)


def model():
    """(denoise_fn, value_fn, prompt [2, 2]) of the example."""
    k_tok, k_ctx, k_out = jax.random.split(jax.random.key(0), 3)
    w_tok = jax.random.normal(k_tok, (VOCAB, HIDDEN))
    w_ctx = jax.random.normal(k_ctx, (VOCAB, HIDDEN))
    w_out = jax.random.normal(k_out, (HIDDEN, VOCAB))

    def denoise_fn(tokens):  # [M, L] -> (logits [M, L, V], hidden [M, L, D])
        x = jax.nn.one_hot(tokens, VOCAB)
        hidden = jnp.tanh(x @ w_tok + jnp.mean(x, axis=1, keepdims=True) @ w_ctx)
        return hidden @ w_out, hidden

    head_def, head_params = dllm.poke.init(HIDDEN, hidden=4, seed=1)
    prompt = jnp.array([[0, 1], [2, 3]], jnp.int32)
    value_fn = dllm.poke.make_value_fn(head_def, head_params, prompt.shape[1], MASK)
    return denoise_fn, value_fn, prompt


def build() -> tuple[Algorithm, tuple, tuple]:
    denoise_fn, value_fn, prompt = model()
    alg = dllm.smc(denoise_fn, gen_length=GEN_LENGTH, value_fn=value_fn, **SETTINGS)
    return alg, (prompt,), ()
