"""Configs for experiments/qlearning.py: get_config("smoke" | "quick" | "full")."""

import ml_collections


def get_config(arg: str = "quick") -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.mdp = "garnet"  # or "chain"
    c.mdp_seed = 0
    c.num_states, c.num_actions, c.branching = 10, 2, 3
    c.gamma = 0.9
    c.sampling = "generative"  # or "trajectory"
    c.step_size = "inverse_count"  # or a float constant step
    c.constant_periods = [100, 200, 400, 800, 1600, 3200, 6400]
    c.theory_bases = [50.0, 200.0]
    c.shrinking = [(6400.0, 0.9 ** (2.0 / 3.0))]  # period shrinking geometrically, for contrast
    c.eps_list = [1.0, 0.5, 0.25, 0.125, 0.0625]
    c.num_seeds = 32
    c.seed = 1
    c.record_every = 1000
    c.num_records = 500  # 5e5 samples per run
    c.num_chunks = 5
    c.mesh_shape = (-1,)
    if arg == "smoke":
        c.num_states, c.num_actions = 5, 2
        c.constant_periods = [20, 80]
        c.theory_bases = [10.0]
        c.shrinking = [(80.0, 0.9)]
        c.eps_list = [1.0, 0.5]
        c.num_seeds = 4
        c.record_every = 200
        c.num_records = 40
        c.num_chunks = 2
    elif arg == "full":
        c.num_states, c.num_actions, c.branching = 50, 5, 5
        c.gamma = 0.95
        c.constant_periods = [1000, 2000, 4000, 8000, 16000, 32000, 64000]
        c.theory_bases = [250.0, 1000.0]
        c.shrinking = [(64000.0, 0.95 ** (2.0 / 3.0))]
        c.eps_list = [2.0, 1.0, 0.5, 0.25, 0.125]
        c.num_seeds = 64
        c.record_every = 10_000
        c.num_records = 1000
        c.num_chunks = 20
    elif arg != "quick":
        raise ValueError(f"config arg must be smoke, quick or full, got {arg!r}.")
    return c
