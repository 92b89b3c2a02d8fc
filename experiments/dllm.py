"""POKE-SMC decoding study: every decoder on every task (accuracy vs NFE, Path LL).

  python -m experiments.dllm --config=experiments/configs/dllm.py:quick --workdir=results/dllm
"""

from experiments import common
from jaxlab.dllm import experiment

if __name__ == "__main__":
    common.launch(experiment.train_and_evaluate, "experiments/configs/dllm.py:quick")
