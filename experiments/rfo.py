"""RFO vs RFO-chunked vs Gaussian APG vs PPO on MJX tasks: return vs environment steps.

  python -m experiments.rfo --config=experiments/configs/rfo.py:quick --workdir=results/rfo
"""

from experiments import common
from jaxlab.rfo import experiment

if __name__ == "__main__":
    common.launch(experiment.train_and_evaluate, "experiments/configs/rfo.py:quick")
