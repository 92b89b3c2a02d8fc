"""Periodic Q-learning: constant vs geometric target-update periods.

  python -m experiments.qlearning --config=experiments/configs/qlearning.py:quick \
      --workdir=results/qlearning
"""

from absl import app
from ml_collections import config_flags

from experiments import common
from jaxlab.qlearning import experiment

_CONFIG = config_flags.DEFINE_config_file("config", "experiments/configs/qlearning.py:quick")


def main(argv):
    del argv
    common.run(experiment.train_and_evaluate, _CONFIG.value)


if __name__ == "__main__":
    app.run(main)
