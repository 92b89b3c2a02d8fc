"""Configs for experiments/avatar.py: get_config("smoke" | "quick" | "full")."""

import ml_collections


def get_config(arg: str = "quick") -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.mesh_shape = (-1,)  # batch axis over all devices (1-D mesh 'batch')
    c.task_seed = 0
    c.num_seeds = 8
    c.tasks = ["synthetic_graph", "les_miserables", "point_cloud", "point_cloud_nonrigid",
               "embeddings"]
    c.strategies = ["avatar", "random", "entropy", "margin", "degree", "betweenness"]
    c.utility = "entropy"
    c.epsilon = 0.05
    c.sinkhorn_threshold = 1e-4  # L1 marginal error of every plan (see avatar.run_active)
    c.sinkhorn_max_iterations = 10000
    c.cg_tol = 1e-4  # relative residual of the adjoint CG (see avatar.run_active)
    c.rounds = 10
    c.test_frac = 0.5
    c.init_frac = 0.2
    c.budget_frac = 0.2
    c.graph_nodes = 150
    c.point_nodes = 150
    c.embedding_nodes = 150
    c.nonrigid = 0.15  # amplitude of the sinusoidal warp of point_cloud_nonrigid
    c.scaling_sizes = [100, 200, 400, 800, 1600]
    if arg == "smoke":
        c.num_seeds = 2
        c.tasks = ["karate", "point_cloud"]
        c.strategies = ["avatar", "random", "entropy"]
        c.rounds = 2
        c.point_nodes = 40
        c.scaling_sizes = [50, 100]
    elif arg == "full":
        c.num_seeds = 32
        c.graph_nodes = 500
        c.point_nodes = 400
        c.embedding_nodes = 500
        c.scaling_sizes = [250, 500, 1000, 2000, 4000]
    elif arg != "quick":
        raise ValueError(f"config arg must be smoke, quick or full, got {arg!r}.")
    return c
