"""The suite's console on two tiny methods: ``python -m tests.console_program WORKDIR``.

Registers methods "toy_a" and "toy_b" (each unit reports a comparison over many grid
points through ``progress.comparison_reporter``, runs a chunked loop and logs one result
line), then runs the suite's binary at the smoke preset into WORKDIR
(tests/test_suite_console.py reads what it prints).
"""

import sys

import ml_collections
import numpy as np
from absl import logging

from experiments.lib import progress, study

GRID = 6  # grid points of each toy comparison


def get_config(preset: str = "smoke"):
    return ml_collections.ConfigDict({"n": {"smoke": 3, "quick": 4}[preset], "seed": 0})


def _unit(name, config):
    report = progress.comparison_reporter()
    for g in range(GRID):
        for done in range(1, 5):
            report(done, 4, f"tuning {name} grid point={g}")
    study.run_resumable(lambda c, i: c + 1, np.zeros(()), 3, desc=f"{name} loop",
                        unit="updates")
    logging.info("%s result: mean %.3f", name, (config.n - 1) / 2)
    return {"x": np.arange(config.n, dtype=np.float32)}


def experiment(name: str) -> study.Experiment:
    return study.Experiment(
        name=name, validate=lambda c: None,
        units=lambda c, w: [study.Unit("values", lambda ctx: _unit(name, c))],
        summarize=lambda c, out: {"mean": float(np.mean(out["values"]["x"]))},
        plot=lambda *a: None, headline=lambda s: [("mean", f"{s['mean']:.3f}")])


def register() -> None:
    """Registers "toy_a" and "toy_b" as methods of the suite."""
    import types

    from experiments.lib import registry

    for name in ("toy_a", "toy_b"):
        config, exp = types.ModuleType("cfg"), types.ModuleType("exp")
        config.get_config, exp.EXPERIMENT = get_config, experiment(name)
        sys.modules[f"experiments.configs.{name}"] = config
        sys.modules[f"experiments.{name}"] = exp
        registry.METHODS[name] = registry.Method(name, f"Toy {name[-1]}", "dev", "-")


if __name__ == "__main__":
    from experiments import suite

    register()
    sys.argv = ["suite", "--preset=smoke", "--methods=toy_a,toy_b", f"--workdir={sys.argv[1]}"]
    suite.cli()
