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
import numpy as np

from jaxlab.core import validation

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


def validate_config(config) -> None:
    """Checks an ``experiments/configs/qlearning.py`` config before any work is done.

    The first step of ``experiments/qlearning.py``; every numeric field gets a range check,
    ``num_seeds`` >= 2 (confidence intervals) and the ``eps_rel`` are distinct.

    Raises:
      ValueError: naming ``config.<field>``, the allowed range and the value.
    """
    # imported here: a config loads without its method's package
    from jaxlab.qlearning import periodic_q

    families = FAMILIES
    if len(config.families) == 0:
        raise ValueError("`config.families` must be non-empty.")
    for i, f in enumerate(config.families):
        validation.check_one_of(f"config.families[{i}]", f, families)
    for i, f in enumerate(config.variant_families):
        validation.check_one_of(f"config.variant_families[{i}]", f, families)
    validation.check_one_of("config.sampling", config.sampling, periodic_q.SAMPLING_MODES)
    validation.check_one_of("config.inner_loop", config.inner_loop, INNER_LOOPS)
    validation.check_fields(config, {
        "num_states": validation.POSITIVE_INT, "num_actions": validation.POSITIVE_INT,
        "branching": validation.POSITIVE_INT, "record_every": validation.POSITIVE_INT,
        "num_records": validation.POSITIVE_INT, "num_chunks": validation.POSITIVE_INT,
        "chain_states": validation.POSITIVE_INT,
        "bootstrap_resamples": validation.POSITIVE_INT,
        "gamma": validation.UNIT_OPEN, "sparse_gamma": validation.UNIT_OPEN,
    })
    if config.branching > config.num_states:
        raise ValueError(f"`config.branching` must be <= config.num_states="
                         f"{config.num_states}, got {config.branching}.")
    if config.chain_states < 2:
        raise ValueError(f"`config.chain_states` must be >= 2, got {config.chain_states}.")
    for f in families:
        v = config.scale.get(f)
        if v is None:
            raise ValueError(f"`config.scale.{f}` is missing.")
        validation.check_in_range(f"config.scale.{f}", v, 0.0, low_inclusive=False)
        validation.check_finite(f"config.scale.{f}", v)
    if len(config.constant_grid) != 3:
        raise ValueError(f"`config.constant_grid` must be (K_min, K_max, points per "
                         f"doubling), got {config.constant_grid!r}.")
    lo, hi, per = config.constant_grid
    validation.check_in_range("config.constant_grid K_min", lo, 1.0)
    validation.check_finite("config.constant_grid K_max", hi)
    if hi < lo:
        raise ValueError(f"`config.constant_grid` K_max={hi} must be >= K_min={lo}.")
    validation.check_positive_int("config.constant_grid points per doubling", per)
    if len(config.growth_powers) == 0 or len(config.base_grid) == 0:
        raise ValueError("`config.growth_powers` and `config.base_grid` must be non-empty.")
    for i, p in enumerate(config.growth_powers):
        validation.check_in_range(f"config.growth_powers[{i}]", p, 0.0, low_inclusive=False)
        validation.check_finite(f"config.growth_powers[{i}]", p)
    for i, b in enumerate(config.base_grid):
        validation.check_in_range(f"config.base_grid[{i}]", b, 1.0)
        validation.check_finite(f"config.base_grid[{i}]", b)
    if len(config.eps_rel) == 0:
        raise ValueError("`config.eps_rel` must be non-empty.")
    validation.check_in_range("config.eps_rel", list(config.eps_rel), 0.0, low_inclusive=False)
    validation.check_finite("config.eps_rel", np.asarray(config.eps_rel, np.float64))
    if len(set(config.eps_rel)) != len(config.eps_rel):
        raise ValueError(f"`config.eps_rel` must hold distinct accuracies, got "
                         f"{tuple(config.eps_rel)}.")
    validation.check_min_count("config.num_seeds", config.num_seeds, 2,
                               "the summary computes confidence intervals over test seeds")
    validation.check_min_count("config.num_val_seeds", config.num_val_seeds, 1,
                               "the best constant and the bases are picked on them")
    validation.check_min_count("config.bootstrap_resamples", config.bootstrap_resamples, 2,
                               "a percentile interval")
    if config.num_records % config.num_chunks:
        raise ValueError(f"`config.num_records`={config.num_records} must be divisible by "
                         f"`config.num_chunks`={config.num_chunks}.")
