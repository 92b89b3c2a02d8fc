"""Config for experiments/correctness_probe.py: the ``quick`` study preset of
experiments/configs/dllm.py (the untuned path proposal: one block, position temperature 1,
argmax tokens, greedy's path as particle 0) on one task, plus the probe's sizes."""

import ml_collections

from experiments.configs import dllm


def get_config(arg: str = "countdown") -> ml_collections.ConfigDict:
    c = dllm.get_config("quick")
    c.tasks = (arg,)
    c.correctness = ml_collections.ConfigDict(dict(
        # Training problems: task.sample(key(seed + train_seed_offset), train_problems), a
        # key used by no other binary; any equal to a validation problem is dropped.
        train_problems=1024, train_seed_offset=90_001,
        # Validation problems: the study's (experiments/dllm.py item_keys(config, "tuning")).
        val_problems=256,
        particles=8, rollout_batch=64,
        hidden=64, depth=2, steps=3000, batch_size=512, lr=1e-3, weight_decay=1e-4,
        val_fraction=0.2, eval_every=25, patience=8,
        num_bins=10, fractions=(0.25, 0.5, 0.75),
        # Twisted SMC on the validation problems (beta = config.weight_scale).
        twist_scale=1.0))
    return c
