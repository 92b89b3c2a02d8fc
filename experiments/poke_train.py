"""Fits the POKE value heads on the (shipped) task denoisers into <workdir>/models/.

  python -m experiments.poke_train --config=experiments/configs/dllm.py:quick \
      --workdir=/tmp/dllm_train
  # the shipped heads: cp -r /tmp/dllm_train/models/<task>_poke experiments/pretrained/dllm/
"""

from experiments import common, dllm_models

if __name__ == "__main__":
    common.launch(dllm_models.train_poke_heads, "experiments/configs/dllm.py:quick")
