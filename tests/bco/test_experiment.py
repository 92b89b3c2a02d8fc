import os

import numpy as np

from experiments.configs import bco as bcfg
from jaxlab.bco import experiment
from tests.notebooks import run_notebook


def test_smoke_experiment_writes_results_and_resumes(tmp_path):
    cfg = bcfg.get_config("smoke")
    s1, _ = run_notebook("bco", tmp_path)  # colab/bco.ipynb at smoke size
    for f in ("summary.json", "regret_scaling.png", "variants.png"):
        assert os.path.getsize(tmp_path / f) > 500
    assert set(s1["slope_vs_dim"]) == set(experiment.TWO_POINT)
    assert s1["V_T"][0] == 0.0 and s1["V_T"][-1] > s1["V_T"][1] > 0
    rows = experiment.headline(s1)
    assert any("regret vs d" in k for k, _ in rows)
    s2 = experiment.train_and_evaluate(cfg, str(tmp_path))  # restored from the checkpoint
    for n in experiment.TWO_POINT:
        np.testing.assert_allclose(s2["regret_vs_dim"][n]["mean"], s1["regret_vs_dim"][n]["mean"])
