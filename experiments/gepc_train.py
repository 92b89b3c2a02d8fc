"""Trains the GEPC score model (resumable) and exports it to <workdir>/score_model.

  python -m experiments.gepc_train --config=experiments/configs/gepc.py:quick \
      --workdir=/tmp/gepc_train
  # the shipped model: cp -r /tmp/gepc_train/score_model experiments/pretrained/gepc_mnist16
"""

from experiments import common, gepc

if __name__ == "__main__":
    common.launch(gepc.train, "experiments/configs/gepc.py:quick")
