"""Periodic Q-learning with constant and geometric target-update periods (arXiv 2602.03911)."""

from jaxlab.qlearning import schedules
from jaxlab.qlearning.mdp import TabularMDP, chain, check_mdp, garnet, make_mdp
from jaxlab.qlearning.periodic import (
    SAMPLING_MODES,
    PeriodicQState,
    Trace,
    build_kernel,
    init,
    run_steps,
    run_uniforms,
    samples_to_accuracy,
    simulate,
    validate_config,
)
from jaxlab.qlearning.value_iteration import VIInfo, bellman_optimality, value_iteration

__all__ = [
    "SAMPLING_MODES", "PeriodicQState", "TabularMDP", "Trace", "VIInfo", "bellman_optimality",
    "build_kernel", "chain", "check_mdp", "garnet", "init", "make_mdp", "run_steps",
    "run_uniforms", "samples_to_accuracy", "schedules", "simulate", "validate_config",
    "value_iteration",
]
