"""A tiny GEPC score model and smoke config shared by the study tests."""

import jax
import jax.numpy as jnp

W = jax.random.normal(jax.random.key(1), (3, 3, 1, 1)) * 0.3


def eps_fn(x, t):
    """A tiny conv 'network': cheap, batch-independent, not equivariant."""
    y = jax.lax.conv_general_dilated(x, W, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jnp.tanh(y + x[:, ::-1] * 0.1) * (1.0 + t[:, None, None, None])


def smoke_config():
    """The GEPC smoke config with small evaluation batches and baselines."""
    from experiments.configs.gepc import get_config

    c = get_config("smoke")
    c.eval_batch = 4
    c.msma_levels, c.diffpath_steps = 3, 2
    return c
