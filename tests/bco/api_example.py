"""A tiny two-point bandit learner for the shared Algorithm API test (CPU-fast)."""

import jax.numpy as jnp

from jaxlab import bco
from jaxlab.core.types import Algorithm


def build() -> tuple[Algorithm, tuple, tuple]:
    """(alg, init_args, step_args): ``s = alg.init(key, *init_args)``;
    ``s, info = alg.step(key, s, *step_args)``.

    The gradient-variation learner on the unit ball in d = 3 (delta 0.1) started at x0 =
    [0.2, 0, 0], queried on the quadratic f(x) = ||x - c||^2 with c = [0.5, -0.3, 0.1].
    ``step_args`` holds the loss ``f`` (a Python callable: close over it under jit).
    """
    center = jnp.array([0.5, -0.3, 0.1], jnp.float32)

    def f(x):
        return jnp.sum((x - center) ** 2)

    alg = bco.gradient_variation(bco.ball(3), 0.1)
    return alg, (jnp.array([0.2, 0.0, 0.0], jnp.float32),), (f,)
