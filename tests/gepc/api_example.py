"""A tiny GEPC ``Algorithm`` for the shared API test (CPU, seconds)."""

import jax

from jaxlab import gepc
from jaxlab.core.types import Algorithm


def build() -> tuple[Algorithm, tuple, tuple]:
    """(alg, init_args, step_args): ``alg.init(key, x_fit)``, ``alg.step(key, state, x)``.

    The eps-model is closed-form, eps(x, t) = 0.1 w * x with a fixed non-symmetric
    per-pixel weight w (the score of a diagonal Gaussian: flips and shifts break its
    equivariance, so the residuals are positive); 16 ID images fit the KDEs, a batch of 4
    is scored, 8x8 grayscale."""
    k_w, k_fit, k_x = jax.random.split(jax.random.key(42), 3)
    w = 1.0 + 3.0 * jax.random.uniform(k_w, (1, 8, 8, 1))
    alg = gepc.detector(lambda x, t: 0.1 * w * x)
    x_fit = jax.random.uniform(k_fit, (16, 8, 8, 1), minval=-1.0, maxval=1.0)
    x = jax.random.uniform(k_x, (4, 8, 8, 1), minval=-1.0, maxval=1.0)
    return alg, (x_fit,), (x,)
