"""A tiny RFO trainer for the shared API test (``build()``; CPU, seconds)."""

from jaxlab.core.types import Algorithm


def build() -> tuple[Algorithm, tuple, tuple]:
    """(alg, init_args, step_args): RFO (flow policy, critic, both regularisers) on pendulum
    with 2 environments, a 4-step horizon and width-8 networks.

    ``s = alg.init(key, *init_args)`` and ``s, info = alg.step(key, s, *step_args)`` are
    deterministic in the key, jit with the (empty) args closed over, and vmap over keys.
    """
    from jaxlab import rfo

    cfg = rfo.TrainConfig(policy="flow", num_envs=2, horizon=4, num_updates=2, chunk=2,
                          ode_steps=2, hidden=8, eval_horizon=4, episode_length=8, critic=True,
                          critic_iters=2, stability_coef=0.01, exploration_coef=0.001)
    return rfo.make_trainer(rfo.make_task("pendulum"), cfg), (), ()
