"""Policies kept by the study binary: weights saved and restored bit for bit, a plot of
their centre-of-mass trajectories, the modes' evaluation beside the stochastic one."""

import os

import jax
import numpy as np
import pytest

from experiments import rfo as rfo_exp
from experiments import rfo_policies
from experiments.configs import rfo as rfo_cfg
from jaxlab.rfo import envs, references


def test_soft_gait_smoke_is_a_valid_config():
    config = rfo_cfg.get_config("soft_gait_smoke")
    rfo_cfg.validate_config(config)
    assert config.tasks == ("soft_quadruped_gait",)
    assert config.deterministic_eval and config.keep_policies
    assert config.common.episode_length > 64  # past the gait task's settle window
    spec = rfo_exp.run_spec(config, "soft_quadruped_gait", "rfo")
    assert spec["deterministic_eval"] and spec["keep_policies"]
    assert "deterministic_eval" not in rfo_exp.run_spec(rfo_cfg.get_config("soft_study"),
                                                        "soft_quadruped", "rfo")


@pytest.mark.heavy
def test_a_unit_keeps_its_policies_and_their_modes_returns(tmp_path):
    config = rfo_cfg.get_config("soft_gait_smoke")
    config.common.update(horizon=8, eval_horizon=16, episode_length=16)
    config.env_steps = 4 * 8 * 2
    out = rfo_exp.run_method(config, "soft_quadruped", "shac_gaussian",
                             keep_dir=str(tmp_path))
    ev, mode = out["eval_return"], out["eval_mode_return"]
    assert ev.shape == mode.shape and np.all(np.isfinite(mode))
    kept = out["policies"]
    assert os.path.exists(kept["plot"])
    cfg, _ = rfo_exp.method_config(config, "soft_quadruped", "shac_gaussian")
    spec = rfo_exp.run_spec(config, "soft_quadruped", "shac_gaussian")
    params = rfo_policies.restore(os.path.dirname(kept["weights"]), "soft_quadruped", cfg,
                                  config.num_seeds, str(spec), spec)
    assert params is not None
    # the restored weights' mode, rolled out open loop from the plotted reset state, earns
    # the plotted return of seed 0
    task = envs.make_task("soft_quadruped")
    k_reset, k_act = jax.random.split(jax.random.fold_in(
        rfo_exp.task_key(config, "soft_quadruped"), 3))
    state = envs.reset(k_reset, task)
    p0 = jax.tree.map(lambda x: x[0], params)
    r, com = rfo_policies.policy_trace(k_act, task, cfg, p0, state, cfg.eval_horizon, True)
    assert float(np.sum(r)) == pytest.approx(float(kept["return_mode"][0]), rel=1e-5,
                                             abs=1e-6)
    # the trace's COM is the references' COM function of the same states
    actions = []
    s = state
    _, _, mode_fn = rfo_policies.policy_fns(task, cfg)
    for _ in range(cfg.eval_horizon):
        a = mode_fn(p0, s.obs[None])[0, 0]
        actions.append(a)
        s, _ = envs.step(task, s, a)
    r2, com2 = references.trace(task, state, np.stack(actions), references.com_fn())
    np.testing.assert_allclose(com, com2, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(r, r2, rtol=1e-5, atol=1e-6)


def test_summary_reports_the_modes_final_returns():
    """With ``deterministic_eval`` the summary has each method's final return of the
    policies' modes: the mean over seeds of the mean of their last 10% of evaluations."""
    config = rfo_cfg.get_config("soft_gait_smoke")
    rng = np.random.default_rng(0)
    out = {}
    for m in config.methods:
        ev, mode = rng.normal(size=(2, 20)), rng.normal(size=(2, 20))
        out[f"soft_quadruped_gait_{m}"] = {
            "eval_return": ev, "eval_mode_return": mode, "env_steps": np.arange(1, 21),
            "wall_s": 1.0, "nonfinite_grad_updates": np.zeros(2)}
    summary = rfo_exp._summarize(config, out)
    for m in config.methods:
        mode = out[f"soft_quadruped_gait_{m}"]["eval_mode_return"]
        want = mode[:, -2:].mean(axis=1).mean()
        got = summary["final_eval_mode_return"]["soft_quadruped_gait"][m]["mean"]
        assert got == pytest.approx(want, rel=1e-12)
