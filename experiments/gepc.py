"""GEPC OOD benchmark (AUROC table vs baselines, maps).

  python -m experiments.gepc --config=experiments/configs/gepc.py:quick --workdir=results/gepc
"""

from absl import app
from ml_collections import config_flags

from experiments import common
from jaxlab.gepc import experiment

_CONFIG = config_flags.DEFINE_config_file("config", "experiments/configs/gepc.py:quick")


def main(argv):
    del argv
    common.run(experiment.train_and_evaluate, _CONFIG.value)


if __name__ == "__main__":
    app.run(main)
