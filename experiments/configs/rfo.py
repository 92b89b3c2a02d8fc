"""Configs for experiments/rfo.py: get_config("smoke" | "quick" | "cpu_ablation" | "full").

``cpu_ablation``: pendulum only, the four regulariser settings (``rfo_none``,
``rfo_stability``, ``rfo_exploration``, ``rfo`` = both) and the two baselines named for
what they are (``shac_gaussian``, critic-free ``apg``), 5 seeds, on a CPU budget.
"""

import ml_collections


def get_config(arg: str = "quick") -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.tasks = ("pendulum", "hopper")
    c.methods = ("rfo", "rfo_chunked", "shac_gaussian", "ppo")
    # per-task subsets (each hopper method costs ~100 s, mostly compile, on a 2-core CPU;
    # the quick preset keeps the whole suite near 15 min; full runs every method)
    c.task_methods = ml_collections.ConfigDict({"hopper": ("rfo", "ppo")})
    c.num_seeds = 3
    c.seed = 0
    c.env_steps = 49_152  # budget per method and task (equal across methods)
    c.task_env_steps = ml_collections.ConfigDict({"hopper": 16_384})
    c.num_chunks = 4
    c.mesh_shape = (-1,)
    c.common = ml_collections.ConfigDict(dict(
        num_envs=16, horizon=32, lr=3e-3, hidden=64, eval_horizon=128, episode_length=128,
        critic=True, gamma=0.99))
    c.rfo = ml_collections.ConfigDict(dict(chunk=4, ode_steps=4, stability_coef=0.01,
                                           exploration_coef=0.001, buffer_size=4096))
    # critic-free brax-style APG (brax/training/agents/apg): element-wise clip 1.0,
    # Adam(0.7, 0.95), lr * lr_decay^update; the decay rate is our choice
    c.apg = ml_collections.ConfigDict(dict(lr=3e-3, lr_decay=0.997, grad_clip=1.0))
    c.ppo = ml_collections.ConfigDict(dict(epochs=4, minibatches=4, lr=3e-4))
    c.throughput = ml_collections.ConfigDict(dict(task="hopper", batch_sizes=(1, 8, 32),
                                                  horizon=64))
    if arg == "smoke":
        c.tasks = ("pendulum",)
        c.task_methods = ml_collections.ConfigDict()
        c.num_seeds = 2
        c.env_steps = 4 * 8 * 16
        c.task_env_steps = ml_collections.ConfigDict({"pendulum": 4 * 8 * 16})
        c.num_chunks = 2
        c.common.update(num_envs=8, horizon=16, eval_horizon=32, episode_length=32,
                        hidden=32)
        c.throughput.update(task="pendulum", batch_sizes=(1, 8), horizon=16)
    elif arg == "cpu_ablation":
        c.tasks = ("pendulum",)
        c.methods = ("rfo_none", "rfo_stability", "rfo_exploration", "rfo", "shac_gaussian",
                     "apg")
        c.task_methods = ml_collections.ConfigDict()
        c.num_seeds = 5
        c.task_env_steps = ml_collections.ConfigDict()
        c.throughput.task = ""
    elif arg == "full":
        c.tasks = ("pendulum", "cartpole", "reacher", "hopper")
        c.methods = ("rfo", "rfo_chunked", "rfo_none", "rfo_stability", "rfo_exploration",
                     "shac_gaussian", "apg", "ppo")
        c.task_methods = ml_collections.ConfigDict()
        c.num_seeds = 8
        c.env_steps = 1_048_576
        c.task_env_steps = ml_collections.ConfigDict({"hopper": 4_194_304})
        c.num_chunks = 16
        c.common.update(num_envs=256, eval_horizon=256, episode_length=256)
        c.throughput.update(batch_sizes=(1, 64, 1024, 4096))
    elif arg != "quick":
        raise ValueError(f"config arg must be smoke, quick, cpu_ablation or full, got "
                         f"{arg!r}.")
    return c
