"""A tiny LLaDA denoiser for the dllm tests, its weights scaled up for a less uniform
predictive law (so decoders and value heads see distinct particles)."""

import functools

import jax

from jaxlab.dllm import model as model_lib


def sharpened_denoiser(task, d_model: int, n_layers: int, mlp_hidden: int):
    """A jitted ``tokens -> (logits, hidden)`` for ``task`` (2 heads, seed 0, weights x 4)."""
    cfg = model_lib.LLaDAConfig(vocab_size=task.vocab_size, d_model=d_model, n_layers=n_layers,
                                n_heads=2, n_kv_heads=2, mlp_hidden_size=mlp_hidden,
                                mask_token_id=task.mask_id)
    graphdef, params = model_lib.init(cfg, seed=0)
    params = jax.tree.map(lambda x: 4 * x, params)
    return jax.jit(functools.partial(model_lib.apply, graphdef, params))
