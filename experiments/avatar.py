"""AvAtar active alignment: MRR vs round per strategy; CG vs dense adjoint scaling.

  python -m experiments.avatar --config=experiments/configs/avatar.py:quick --workdir=results/avatar
"""

from absl import app
from ml_collections import config_flags

from experiments import common
from jaxlab.avatar import experiment

_CONFIG = config_flags.DEFINE_config_file("config", "experiments/configs/avatar.py:quick")


def main(argv):
    del argv
    common.run(experiment.train_and_evaluate, _CONFIG.value)


if __name__ == "__main__":
    app.run(main)
