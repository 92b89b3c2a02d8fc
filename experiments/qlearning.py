"""Periodic Q-learning: constant vs geometric target-update periods.

  python -m experiments.qlearning --config=experiments/configs/qlearning.py:quick \
      --workdir=results/qlearning
"""

from experiments import common
from jaxlab.qlearning import experiment

if __name__ == "__main__":
    common.launch(experiment.train_and_evaluate, "experiments/configs/qlearning.py:quick")
