"""experiments/check_mjx_iterations.py on tiny horizons: the solver variants it
builds, the structure of its result, exactly zero divergence between two tasks with identical
solver settings, no divergence from identical initial states at horizon 0, finiteness, and
the gradient comparison (reverse mode unavailable under the default solver, forward and
reverse mode agreeing under ours)."""

import numpy as np
import pytest

from experiments import check_mjx_iterations as cmi
from jaxlab.rfo import envs

HORIZONS = (0, 1, 4)
STAT_KEYS = ("qpos", "qvel", "torso_z", "reward_sum", "episode_return")


def test_solver_variants():
    # MuJoCo's defaults (installed version) and what make_task sets
    assert cmi.mujoco_default_solver() == {"iterations": 100, "ls_iterations": 50}
    task = envs.make_task("hopper")
    assert cmi.solver_of(task)["iterations"] == 1
    assert cmi.mjcf_solver("hopper") == {"iterations": 4, "ls_iterations": 50}
    other = cmi.with_solver(task, 100, 50)
    assert (cmi.solver_of(other)["iterations"], cmi.solver_of(other)["ls_iterations"]) == (100, 50)
    assert cmi.solver_of(task)["iterations"] == 1  # the cached task is left alone
    assert other.reward_fn is task.reward_fn and other.n_frames == task.n_frames


def _check(result, perturb):
    default = cmi.mujoco_default_solver()
    assert result["reference"]["iterations"] == default["iterations"]
    assert set(result["comparisons"]) == {"ours", "same", "noise_floor"}
    for name, comp in result["comparisons"].items():
        assert set(comp) == {"random", "zero"}
        for per_h in comp.values():
            assert list(per_h) == [str(h) for h in HORIZONS]
            for d in per_h.values():
                assert d["finite"]
                for k in STAT_KEYS:
                    assert set(d[k]) == {"max", "median"}
                    assert np.isfinite(d[k]["max"]) and d[k]["max"] >= d[k]["median"] >= 0
            if name == "same":  # identical solver settings: bit-identical trajectories
                for d in per_h.values():
                    assert all(d[k]["max"] == 0.0 for k in STAT_KEYS)
                    assert d["same_termination"] == 1.0
            if name == "ours":  # same initial states; one step apart stays small
                assert all(per_h["0"][k]["max"] == 0.0 for k in STAT_KEYS)
                assert per_h["1"]["qpos"]["max"] < 1e-2
            if name == "noise_floor":
                assert 0.0 < per_h["0"]["qpos"]["max"] <= 1.01 * perturb
    g = result["gradients"]
    assert g["compared"] == "ours" and len(g["rows"]) == 2
    assert "while_loop" in g["ref_reverse_mode_error"]
    for r in g["rows"]:
        assert r["finite"] and -1.0 - 1e-6 <= r["cosine"] <= 1.0 + 1e-6
        assert r["ours_rev_vs_fwd_rel_diff"] < 1e-3
    assert "ours (iterations 1" in cmi.format_table(result)


def _run(task_name, perturb=1e-6):
    return cmi.run_check(task_name, solvers={"ours": None, "same": cmi.mujoco_default_solver()},
                         num_states=2, horizon=4, horizons=HORIZONS, grad_horizon=2,
                         grad_seeds=1, perturb=perturb)


@pytest.mark.slow  # ~1 min: compiles of the MJX step under three solver settings
def test_tiny_run_bouncing_ball():
    _check(_run("bouncing_ball"), 1e-6)


@pytest.mark.slow  # ~3 min on a 2-core CPU: hopper MJX compiles (while_loop solver, jacfwd)
def test_tiny_run_hopper():
    _check(_run("hopper"), 1e-6)


def test_horizons_out_of_range():
    with pytest.raises(ValueError, match="horizons"):
        cmi.run_check("bouncing_ball", num_states=1, horizon=2, horizons=(3,), grad_seeds=0)
