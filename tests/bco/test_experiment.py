import json
import os

import jax
import numpy as np
import pytest

from experiments import bco as bco_exp
from experiments.configs import bco as bcfg
from experiments.lib import registry
from tests.notebooks import run_notebook

UNITS = ("vs_dim", "vs_rounds", "vs_variation", "families", "variation", "variants", "dynamic",
         "one_point")


# The notebook at smoke size: 148 s at -n 2 (17 compiles), so -m slow; the suite's quick
# run (the README's main command) runs the binary.
@pytest.mark.slow
def test_smoke_experiment_writes_results_and_resumes(tmp_path):
    cfg = bcfg.get_config("smoke")
    s1, _ = run_notebook("bco", tmp_path)  # colab/bco.ipynb at smoke size
    for f in ("summary.json", "regret_scaling.png", "variants.png", "variation.png"):
        assert os.path.getsize(tmp_path / f) > 500
    assert set(s1["slope_vs_rounds"]) == set(bco_exp.TWO_POINT)
    vd = s1["vs_dim"]
    assert set(vd["slope_tuned"]) == set(bco_exp.TUNED_ROWS)
    for chosen in vd["chosen_multiplier"].values():  # chosen from the grid, per d
        assert len(chosen) == len(cfg.dims) and set(chosen) <= set(cfg.step_grid)
    assert set(s1["families"]) == set(bco_exp.FAMILIES)
    # S_T is at least the worst-case-free floor 2 (d - 1) G_T order: the ratio is O(1).
    assert all(0.5 < r < 3.0 for row in s1["variation"]["S_T_over_2(d-1)G_T"] for r in row)
    assert s1["V_T"][0] == 0.0 and s1["V_T"][-1] > s1["V_T"][1] > 0
    rows = bco_exp.headline(s1)
    assert any("regret vs d" in k for k, _ in rows)
    assert any("optimistic Hedge" in k for k, _ in rows)
    assert any("MsMwC - Hedge" in k for k, _ in rows)
    assert set(bco_exp.DYNAMIC_ROWS) <= set(s1["dynamic"])
    # One unit file per study; the rerun loads them instead of recomputing.
    files = os.listdir(tmp_path / "units")
    assert sorted(f.split("-")[0] for f in files) == sorted(UNITS)
    s2 = registry.train_and_evaluate("bco", cfg, str(tmp_path))
    s1.pop("provenance")
    assert json.dumps(s2, sort_keys=True) == json.dumps(s1, sort_keys=True)


def test_units_are_the_studies():
    cfg = bcfg.get_config("smoke")
    assert registry.experiment("bco") is bco_exp.EXPERIMENT
    assert [u.name for u in bco_exp.EXPERIMENT.units(cfg, "/unused")] == list(UNITS)


@pytest.mark.heavy
def test_two_point_learners_in_one_program_match_each_constructor():
    """vs_rounds / vs_variation run TWO_POINT's three learners as one program (hint and
    step scale traced): the same regrets as each constructor's own program."""
    from jaxlab.bco import domains, losses

    dom = domains.ball(3)
    keys = jax.random.split(jax.random.key(0), 2)
    seq = lambda k, a: losses.switching_quadratic(k, 60, 3, 1, radius=a, offset=0.3)  # noqa: E731
    folded = bco_exp._two_point_regrets(dom, 0.05, seq, keys, [0.1, 0.3], horizons=[30, 60])
    for row, make in zip(folded, bco_exp.TWO_POINT.values(), strict=True):
        own = bco_exp._final_regrets(lambda make=make: make(dom, 0.05), seq, dom, keys,
                                     [0.1, 0.3], horizons=[30, 60])
        np.testing.assert_allclose(row, own, rtol=1e-5, atol=1e-6)
