"""Configs for experiments/qlearning.py: get_config("smoke" | "quick" | "full" | "cpu_long").

Headline setting: the paper's SGD inner loop (``inner_loop="sgd"``) under
asynchronous trajectory sampling on several MDP families. Per family: a geometric grid
of constant periods K (``constant_grid`` = (K_min, K_max, points per doubling), times
the family's ``scale``) and the growth family K_n = base gamma^(-p n) for every p in
``growth_powers`` (p = 2/3 is the theory schedule) with bases from ``base_grid`` (times
``scale``). The best constant K and each p's base (per eps) are picked on
``num_val_seeds`` validation seeds, then evaluated on ``num_seeds`` disjoint test seeds.
``variant_families`` rerun those families with the other inner loop (labelled variant).
eps = ``eps_rel`` * ||Q*||_inf; every run uses ``num_records * record_every * scale``
samples.
"""

import ml_collections

FAMILIES = ("garnet", "chain", "sparse", "bernoulli")
INNER_LOOPS = ("sgd", "running_mean")


def get_config(arg: str = "quick") -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.families = ("garnet", "chain", "sparse", "bernoulli")
    c.sampling = "trajectory"  # or "generative"
    c.inner_loop = "sgd"  # the paper's; "running_mean" (alpha = 1 / visits) is the variant
    c.variant_families = ("garnet",)  # rerun with the other inner loop, labelled
    c.mdp_seed = 0
    c.num_states, c.num_actions, c.branching = 10, 2, 3  # garnet / sparse / bernoulli
    c.chain_states = 6
    c.gamma = 0.9  # garnet, chain, bernoulli
    c.sparse_gamma = 0.99
    # Per-family multiplier of the periods, the bases and the samples per run.
    c.scale = ml_collections.ConfigDict(
        {"garnet": 1.0, "chain": 1.0, "sparse": 4.0, "bernoulli": 1.0})
    c.constant_grid = (25.0, 25600.0, 2)  # K_min, K_max, points per doubling (21 values)
    c.growth_powers = (1.0 / 3.0, 2.0 / 3.0, 1.0, 2.0)
    c.base_grid = (10.0, 40.0, 160.0)
    c.eps_rel = (0.2, 0.1, 0.05, 0.025)
    c.num_val_seeds = 16
    c.num_seeds = 32  # test seeds
    c.seed = 1
    c.record_every = 2000
    c.num_records = 200  # 4e5 samples per run (times the family's scale)
    c.num_chunks = 4
    c.bootstrap_resamples = 2000
    c.mesh_shape = (-1,)
    if arg == "smoke":
        c.families = ("garnet", "bernoulli")
        c.variant_families = ("garnet",)
        c.num_states, c.num_actions = 5, 2
        c.constant_grid = (20.0, 160.0, 1)
        c.growth_powers = (2.0 / 3.0, 2.0)
        c.base_grid = (10.0, 40.0)
        c.eps_rel = (0.3, 0.15)
        c.num_val_seeds = 4
        c.num_seeds = 4
        c.record_every = 200
        c.num_records = 40
        c.num_chunks = 2
        c.bootstrap_resamples = 200
    elif arg == "quick":  # the suite's run: 3 families, the theory schedule only
        c.families = ("garnet", "chain", "bernoulli")
        c.variant_families = ()
        c.constant_grid = (25.0, 12800.0, 1)  # 10 values; picks must be interior (checked)
        c.growth_powers = (2.0 / 3.0,)
        c.base_grid = (1.0, 4.0, 16.0, 64.0)  # (2.5, 10, 40) put K_0 at both ends
        c.eps_rel = (0.1, 0.05, 0.025)
        c.num_val_seeds = 4
        c.num_seeds = 12
        c.record_every = 1000
        c.num_records = 150
        c.num_chunks = 2
        c.bootstrap_resamples = 1000
    elif arg == "cpu_long":  # the README's figures (2-core CPU, ~20 min)
        c.scale.sparse = 2.0
        c.constant_grid = (25.0, 12800.0, 2)  # 19 values, sqrt(2) apart
        c.base_grid = (2.5, 10.0, 40.0)
        c.eps_rel = (0.1, 0.05, 0.025, 0.0125)
        c.num_val_seeds = 8
        c.num_seeds = 32
        c.record_every = 1000
        c.num_records = 300
        c.num_chunks = 3
    elif arg == "full":  # accelerator: finer grid, more seeds, longer runs
        c.num_val_seeds = 32
        c.num_seeds = 64
        c.num_records = 500
        c.num_chunks = 10
        c.eps_rel = (0.1, 0.05, 0.025, 0.0125, 0.00625)
    else:
        raise ValueError(f"config arg must be smoke, quick, cpu_long or full, got {arg!r}.")
    return c
