"""Configs for experiments/bco.py: get_config("smoke" | "quick" | "cpu_families" | "full")."""

import ml_collections
import numpy as np

from jaxlab.core import validation


def get_config(arg: str = "quick") -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.seed = 0
    c.mesh_shape = (-1,)  # batch axis over all devices (1-D mesh 'batch')
    c.num_seeds = 16  # test problems (the protocol's test items of `seed`)
    # Validation problems of the tuned studies are the protocol's tuning items of `seed`
    # (jaxlab.core.protocol.item_keys), disjoint from its test items; `val_seed` is kept
    # (checked to differ from `seed`) but no study reads it.
    c.val_seed = 1000
    c.num_val_seeds = 8
    # Step multipliers of the vs_dim study (times the default scale D); must contain 1,
    # 2^-1/2 (matched constant) and 1/4 (d-independent control).
    c.step_grid = [1.0, 2**-0.5, 0.5, 2**-1.5, 0.25, 2**-2.5, 0.125, 2**-4, 2**-5, 2**-6]
    c.delta = 0.05
    c.sigma = 0.3  # gradient noise of the stochastic quadratics
    c.num_rounds = 2000
    c.dims = [4, 16, 64]
    c.variation_dims = [4, 16, 64]
    # The smooth-family study compiles 9 programs; it runs in `smoke` (tests) and `full`,
    # not in `quick` (suite time budget).
    c.family_dims = []
    c.comparator_iters = 300
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
        c.num_val_seeds = 2
        c.step_grid = [1.0, 2**-0.5, 0.25]
        c.dims = [2, 8]
        c.variation_dims = [2, 8]
        c.family_dims = [3]
        c.comparator_iters = 50
        c.dim = 4
        c.horizons = [100, 300]
        c.amplitudes = [0.0, 0.1, 0.3]
        c.curvatures = [0.1, 1.0]
        c.switch_periods = [30, 100]
        c.one_point_rounds = 500
        c.one_point_drifts = [0.0, 0.01]
    elif arg == "full":
        c.num_seeds = 64
        c.num_val_seeds = 16
        c.dims = [4, 8, 16, 32, 64, 128, 256]
        c.variation_dims = [4, 8, 16, 32, 64, 128]
        c.family_dims = [4, 8, 16, 32, 64, 128]
        c.comparator_iters = 1000
        c.num_rounds = 20_000  # T = 2e4 for vs_dim, families, variation, variants, dynamic
        c.horizons = [1000, 2000, 4000, 8000, 16000, 32000]
        c.one_point_rounds = 100_000
    elif arg == "cpu_families":  # quick plus the smooth-family study at d = 8
        c.family_dims = [8]
    elif arg != "quick":
        raise ValueError(f"config arg must be smoke, quick, cpu_families or full, got "
                         f"{arg!r}.")
    return c


def validate_config(config) -> None:
    """Checks a config of this module (the first step of ``experiments/bco.py``); raises
    ValueError naming ``config.<field>``. ``num_seeds`` >= 2 because 95% CIs are computed
    over seeds."""
    validation.check_fields(config, {
        "num_rounds": validation.POSITIVE_INT, "dim": validation.POSITIVE_INT,
        "sigma": validation.NON_NEGATIVE, "amplitudes": validation.NON_NEGATIVE,
        "curvatures": validation.POSITIVE, "one_point_dim": validation.POSITIVE_INT,
        "one_point_rounds": validation.POSITIVE_INT, "one_point_drifts": (None, None, True, True)})
    validation.check_min_count("config.num_seeds", config.num_seeds, 2,
                               "95% confidence intervals over seeds are computed")
    validation.check_positive_int("config.num_val_seeds", config.num_val_seeds)
    if config.val_seed == config.seed:
        raise ValueError("`config.val_seed` must differ from `config.seed` (validation "
                         "problems must be disjoint from the test problems).")
    grid = np.asarray(config.step_grid, np.float64)
    if grid.ndim != 1 or grid.size < 1 or not np.all(np.isfinite(grid)) or np.any(grid <= 0):
        raise ValueError(f"`config.step_grid` must be a non-empty list of positive finite "
                         f"multipliers, got {list(config.step_grid)}.")
    for v in (1.0, 2**-0.5, 0.25):
        if not np.any(np.isclose(grid, v)):
            raise ValueError(f"`config.step_grid` must contain {v:.4g} (formula / matched / "
                             f"d-independent rows), got {list(config.step_grid)}.")
    # Studies on the unit ball (inner radius 1) and the box [-1, 1]^d (half-width 1).
    validation.check_in_range("config.delta", config.delta, 0.0, 1.0, low_inclusive=False,
                              high_inclusive=False)
    validation.check_in_range("config.one_point_delta", config.one_point_delta, 0.0, 1.0,
                              low_inclusive=False, high_inclusive=False)
    validation.check_positive_int("config.comparator_iters", config.comparator_iters)
    for name in ("dims", "variation_dims", "horizons", "switch_periods",
                 "amplitudes", "curvatures", "one_point_drifts"):
        if name in config and len(config[name]) < 1:
            raise ValueError(f"`config.{name}` must not be empty.")
    for name in ("dims", "variation_dims", "family_dims", "horizons", "switch_periods"):
        for v in config[name]:
            validation.check_positive_int(f"config.{name}", v)
    if max(config.switch_periods) > config.num_rounds:
        raise ValueError(f"`config.switch_periods` must not exceed `config.num_rounds`="
                         f"{config.num_rounds}, got {list(config.switch_periods)}.")
    if not np.all(np.isfinite(np.asarray(config.one_point_drifts, np.float64))):
        raise ValueError(f"`config.one_point_drifts` must be finite, got "
                         f"{list(config.one_point_drifts)}.")
