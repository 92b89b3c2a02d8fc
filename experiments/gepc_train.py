"""Trains the GEPC score model (resumable) and exports it to <workdir>/score_model.

  python -m experiments.gepc_train --config=experiments/configs/gepc.py:quick \
      --workdir=/tmp/gepc_train
  # the shipped model: cp -r /tmp/gepc_train/score_model experiments/pretrained/gepc_mnist16
"""

from absl import app
from ml_collections import config_flags

from experiments import common
from jaxlab.gepc import experiment

_CONFIG = config_flags.DEFINE_config_file("config", "experiments/configs/gepc.py:quick")


def main(argv):
    del argv
    common.run(experiment.train, _CONFIG.value)


if __name__ == "__main__":
    app.run(main)
