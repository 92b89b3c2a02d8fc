"""The POKE-SMC study end to end at smoke size, resumable; the shipped models."""

import os

import jax
import numpy as np
import pytest

from experiments.configs import dllm as dllm_config
from jaxlab.dllm import decoding
from jaxlab.dllm import experiment as exp
from tests.notebooks import run_notebook


def test_smoke_study_end_to_end_and_resume(tmp_path, monkeypatch):
    cfg = dllm_config.get_config("smoke")
    summary, _ = run_notebook("dllm", tmp_path)  # colab/dllm.ipynb at smoke size
    for f in ("summary.json", "accuracy_vs_nfe.png", "path_ll_vs_accuracy.png"):
        assert os.path.exists(tmp_path / f)
    for name in cfg.tasks:
        t = summary["tasks"][name]
        a = t["answer_len"]
        d = t["decoders"]
        assert d["confidence"]["nfe"] == a and d["best_of_2"]["nfe"] == 2 * a
        assert d["poke_smc_2"]["nfe"] == d["smc_2"]["nfe"] == 2 * a
        assert d["threshold"]["nfe"] <= a
        for row in d.values():
            lo, hi = row["accuracy_ci"]
            assert 0 <= lo <= row["accuracy"] <= hi <= 1
    assert set(summary["throughput"]) == {"1", "2"}
    assert exp.headline(summary)
    # Rerun: finished tasks come from their JSON, nothing is recomputed.
    monkeypatch.setattr(exp, "evaluate_task", lambda *a: pytest.fail("recomputed a task"))
    again = exp.train_and_evaluate(cfg, str(tmp_path))
    for name in cfg.tasks:
        for k, row in summary["tasks"][name]["decoders"].items():
            got = again["tasks"][name]["decoders"][k]
            assert (got["accuracy"], got["nfe"]) == (row["accuracy"], row["nfe"])
            np.testing.assert_allclose(got["path_ll"], row["path_ll"], rtol=1e-6)


@pytest.mark.parametrize("name,min_acc", [("sudoku", 0.8), ("addition", 0.3),
                                          ("countdown", 0.05), ("star_graph", 0.3)])
def test_shipped_denoisers_solve_problems(name, min_acc, tmp_path):
    """The checkpoints in experiments/pretrained/dllm load and decode (no retraining)."""
    cfg = dllm_config.get_config("quick")
    path = exp._pretrained(cfg, name)
    assert os.path.isdir(path), f"shipped model missing: {path}"
    task, graphdef, params = exp.load_or_train_denoiser(cfg, str(tmp_path), name)
    assert not os.path.exists(tmp_path / "models")  # loaded, not trained
    den = jax.jit(lambda t: exp.model_lib.apply(graphdef, params, t))
    prompt, _ = task.sample(jax.random.key(99), 128)
    r = decoding.decode(den, prompt, task.answer_len, key=jax.random.key(0),
                        mask_id=task.mask_id, vocab_size=task.vocab_size)
    assert float(np.mean(task.verify(prompt, r.answer))) >= min_acc
