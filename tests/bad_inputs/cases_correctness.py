"""Bad-input cases for ``jaxlab.dllm.correctness`` and the correctness head's weights."""

import os
import tempfile

import numpy as np

from jaxlab.dllm import correctness, weights
from tests.bad_inputs.cases_dllm import KEY, MASK, toy
from tests.bad_inputs.harness import Case

HEAD = correctness.init_head(KEY, 9, 4, 1)
FEATS = np.zeros((3, 9), np.float32)


def _verify(prompt, answer):
    return np.ones(prompt.shape[0], bool)


def _rollouts(p=4):
    z = np.zeros((p, 2, 2), np.float32)
    return correctness.Rollouts(np.zeros((p, 2, 2, 9), np.float32), z, z,
                                np.zeros((p, 2), bool), np.zeros((p, 2, 2), np.int32),
                                np.zeros((p, 2), np.float32))


CASES = [
    Case("correctness.num_features: d_model 0", lambda: correctness.num_features(0),
         "`d_model`"),
    Case("correctness.features: 2-D hidden", lambda: correctness.features(
        np.zeros((2, 3)), np.zeros((2, 3), bool)), "`hidden`"),
    Case("correctness.features: masked of another shape", lambda: correctness.features(
        np.zeros((2, 3, 4)), np.zeros((2, 2), bool)), "`masked`"),
    Case("correctness.collect_rollouts: num_particles 0", lambda: correctness.collect_rollouts(
        KEY, toy, np.zeros((2, 1), np.int32), 2, num_particles=0, mask_id=MASK,
        verify_fn=_verify), "`num_particles`"),
    Case("correctness.collect_rollouts: policy value", lambda: correctness.collect_rollouts(
        KEY, toy, np.zeros((2, 1), np.int32), 2, num_particles=2, mask_id=MASK,
        verify_fn=_verify, policy="value"), "`policy`"),
    Case("correctness.init_head: hidden 0", lambda: correctness.init_head(KEY, 9, 0),
         "`hidden`"),
    Case("correctness.abstract_head: depth 0", lambda: correctness.abstract_head(9, 4, 0),
         "`depth`"),
    Case("correctness.head_logits: feats of another width", lambda: correctness.head_logits(
        HEAD, np.zeros((3, 8), np.float32)), "`feats`"),
    Case("correctness.head_flops: answer_len 0", lambda: correctness.head_flops(HEAD, 0),
         "`answer_len`"),
    Case("correctness.make_twist_fn: prompt_len -1", lambda: correctness.make_twist_fn(
        HEAD, -1, MASK), "`prompt_len`"),
    Case("correctness.bce: labels of another shape", lambda: correctness.bce(
        HEAD, FEATS, np.zeros(2)), "`labels`"),
    Case("correctness.fit: lr 0", lambda: correctness.fit(KEY, _rollouts(), lr=0.0), "`lr`"),
    Case("correctness.fit: one problem", lambda: correctness.fit(KEY, _rollouts(1)),
         "`rollouts`"),
    Case("correctness.fit: NaN features", lambda: correctness.fit(KEY, _rollouts()._replace(
        features=np.full((4, 2, 2, 9), np.nan, np.float32))), "`rollouts.features`"),
    Case("correctness.brier: label of another shape", lambda: correctness.brier(
        np.zeros(3), np.zeros(2)), "`label`"),
    Case("correctness.reliability: num_bins 0", lambda: correctness.reliability(
        np.zeros(3), np.zeros(3), 0), "`num_bins`"),
    Case("correctness.auroc_within: 1-D scores", lambda: correctness.auroc_within(
        np.zeros(3), np.zeros(3, bool)), "`scores`"),
    Case("correctness.top1_on_mixed: correct of another shape",
         lambda: correctness.top1_on_mixed(np.zeros((2, 3)), np.zeros((2, 2), bool)),
         "`correct`"),
    Case("correctness.rank_step: fraction 2", lambda: correctness.rank_step(2.0, 10),
         "`fraction`"),
    Case("correctness.ranking_table: no scores", lambda: correctness.ranking_table(
        {}, np.zeros((2, 3), bool)), "`scores`"),
    Case("weights.save_correctness_head: not a head's params",
         lambda: weights.save_correctness_head(os.path.join(tempfile.mkdtemp(), "h"),
                                               {"w": np.zeros(3)}), "`params`"),
    Case("weights.load_correctness_head: no folder", lambda: weights.load_correctness_head(
        os.path.join(tempfile.mkdtemp(), "none")), "`path`"),
    Case("weights.load_correctness_head: a denoiser's folder",
         lambda: weights.load_correctness_head(os.path.join(
             os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
             "experiments", "pretrained", "dllm", "addition")), "`path`"),
]
