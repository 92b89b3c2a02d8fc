"""Trains the GEPC score model (resumable) on the config's ID-train split only
(``gepc.id_split``: stratified, seeded) and exports it to <workdir>/score_model with a
``provenance.json`` (training spec incl. ID-train's sha1) that ``gepc.load_or_train`` checks.

  python -m experiments.gepc_train --config=experiments/configs/gepc.py:quick \
      --workdir=/tmp/gepc_train [--config.train_target=clutter]
  # the shipped model (3000 steps; 4 min on a quiet 2-core CPU, 24 min under shared load):
  #   cp -r /tmp/gepc_train/score_model experiments/pretrained/gepc_mnist16
  # the clutter model of block (c) (--config.train_target=clutter, 800 steps):
  #   cp -r /tmp/gepc_train/clutter_model experiments/pretrained/gepc_clutter16
"""

from . import common, gepc

if __name__ == "__main__":
    common.launch(gepc.train, "experiments/configs/gepc.py:quick")
