"""A tiny periodic Q-learning run for the shared Algorithm API test (CPU-fast)."""

import jax

from jaxlab import qlearning as ql
from jaxlab.core.types import Algorithm


def build() -> tuple[Algorithm, tuple, tuple]:
    """(alg, init_args, step_args): ``s = alg.init(key, *init_args)``;
    ``s, info = alg.step(key, s, *step_args)``.

    A 5-state, 2-action Garnet MDP (gamma 0.9) with the theory schedule K_n = 3
    gamma^(-2n/3), generative sampling; ``State`` leaves are [5, 2] tables and scalars.
    """
    mdp = ql.garnet(jax.random.key(0), 5, 2, 2, 0.9)
    return ql.periodic(mdp, ql.schedules.theory(0.9, 3.0)), (), ()
