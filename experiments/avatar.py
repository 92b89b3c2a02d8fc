"""AvAtar active alignment: MRR vs round per strategy; CG vs dense adjoint scaling.

  python -m experiments.avatar --config=experiments/configs/avatar.py:quick --workdir=results/avatar
"""

from experiments import common
from jaxlab.avatar import experiment

if __name__ == "__main__":
    common.launch(experiment.train_and_evaluate, "experiments/configs/avatar.py:quick")
