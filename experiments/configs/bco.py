"""Configs for experiments/bco.py: get_config("smoke" | "quick" | "full")."""

import ml_collections


def get_config(arg: str = "quick") -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.mesh_shape = (-1,)  # batch axis over all devices (1-D mesh 'batch')
    c.num_seeds = 16
    c.delta = 0.05
    c.sigma = 0.3  # gradient noise of the stochastic quadratics
    c.num_rounds = 2000
    c.dims = [2, 4, 8, 16, 32, 64, 128, 256]
    c.dim = 16
    c.horizons = [250, 500, 1000, 2000, 4000, 8000]
    c.amplitudes = [0.0, 0.01, 0.03, 0.1, 0.3]  # alternating centres: V_T = 4 T amplitude^2
    c.curvatures = [0.03, 0.1, 0.3, 1.0]
    c.switch_periods = [50, 200, 1000]
    c.one_point_dim = 4
    c.one_point_delta = 0.1
    c.one_point_rounds = 10_000
    c.one_point_drifts = [0.0, 0.001, 0.01]
    if arg == "smoke":
        c.num_seeds = 4
        c.num_rounds = 300
        c.dims = [2, 8]
        c.dim = 4
        c.horizons = [100, 300]
        c.amplitudes = [0.0, 0.1, 0.3]
        c.curvatures = [0.1, 1.0]
        c.switch_periods = [30, 100]
        c.one_point_rounds = 500
        c.one_point_drifts = [0.0, 0.01]
    elif arg == "full":
        c.num_seeds = 64
        c.num_rounds = 10_000
        c.horizons = [1000, 2000, 4000, 8000, 16000, 32000]
        c.one_point_rounds = 100_000
    elif arg != "quick":
        raise ValueError(f"config arg must be smoke, quick or full, got {arg!r}.")
    return c
