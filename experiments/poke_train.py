"""Fits the POKE value heads on the (shipped) task denoisers and the study's untuned
proposal (``dllm_models.default_proposal``) into <workdir>/models/<task>_poke_<hash>/ (with
its proposal.json).

  python -m experiments.poke_train --config=experiments/configs/dllm.py:quick \
      --workdir=/tmp/dllm_train
  # ship them: cp -r /tmp/dllm_train/models/<task>_poke_<hash> \
  #     experiments/pretrained/dllm/<task>_poke_path
"""

from . import common, dllm_models

if __name__ == "__main__":
    common.launch(dllm_models.train_poke_heads, "experiments/configs/dllm.py:quick")
