"""Trains the task denoisers of the POKE-SMC study (resumable) into <workdir>/models/.

  python -m experiments.dllm_train --config=experiments/configs/dllm.py:quick \
      --workdir=/tmp/dllm_train
  # the shipped models: cp -r /tmp/dllm_train/models/<task> experiments/pretrained/dllm/
"""

from . import common, dllm_models

if __name__ == "__main__":
    common.launch(dllm_models.train_denoisers, "experiments/configs/dllm.py:quick")
