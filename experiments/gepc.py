"""GEPC OOD benchmark (AUROC table vs baselines, maps).

  python -m experiments.gepc --config=experiments/configs/gepc.py:quick --workdir=results/gepc
"""

from experiments import common
from jaxlab.gepc import experiment

if __name__ == "__main__":
    common.launch(experiment.train_and_evaluate, "experiments/configs/gepc.py:quick")
