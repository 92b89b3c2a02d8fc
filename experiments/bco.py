"""Gradient-variation bandit convex optimization: regret vs T, d, V_T and variants.

  python -m experiments.bco --config=experiments/configs/bco.py:quick --workdir=results/bco
"""

from absl import app
from ml_collections import config_flags

from experiments import common
from jaxlab.bco import experiment

_CONFIG = config_flags.DEFINE_config_file("config", "experiments/configs/bco.py:quick")


def main(argv):
    del argv
    common.run(experiment.train_and_evaluate, _CONFIG.value)


if __name__ == "__main__":
    app.run(main)
