"""Gradient-variation bandit convex optimization: regret vs T, d, V_T and variants.

  python -m experiments.bco --config=experiments/configs/bco.py:quick --workdir=results/bco
"""

from experiments import common
from jaxlab.bco import experiment

if __name__ == "__main__":
    common.launch(experiment.train_and_evaluate, "experiments/configs/bco.py:quick")
