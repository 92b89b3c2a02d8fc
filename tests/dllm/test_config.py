"""The dLLM experiment config validator: presets pass, bad fields are named."""

import pytest

from experiments.configs import dllm as dllm_configs
from jaxlab.dllm import config as config_lib


@pytest.mark.parametrize("arg", ["smoke", "quick", "cpu", "hard", "cpu_hard", "full"])
def test_presets_are_valid(arg):
    config_lib.validate_config(dllm_configs.get_config(arg))


def test_dead_block_length_field_is_gone():
    assert "block_length" not in dllm_configs.get_config("full")


@pytest.mark.parametrize("field,value", [
    ("temperature", -0.5), ("temperature", float("nan")), ("threshold", 1.2),
    ("num_problems", 1), ("bootstrap", 0), ("eval_batch", 0), ("seed", -1),
    ("particles", (2, 0)), ("particles", ()), ("throughput_particles", ()),
    ("train.lr", 0.0), ("train.lr", float("inf")), ("train.steps", 41),
    ("train.batch_size", 0), ("poke.lr", -1e-3), ("poke.temperature", -1.0),
    ("poke.steps", 21), ("model.n_layers", 0), ("model.rope_theta", 0.0),
    ("sale.taus", (1e-3, -1.0)), ("sale.block_q", 0), ("sale.task", "chess"),
    ("tasks", ("chess",)), ("tasks", ()),
    ("resample_schedule", "often"), ("particle_blocks", "two"),
    ("protocol.schedules", ("every_step", "x")), ("protocol.temperatures", (1.0, -1.0)),
    ("protocol.temperatures", (float("nan"),)), ("protocol.rank_fractions", (0.5, 1.0)),
    ("protocol.min_headroom", 1.5), ("protocol.validation_problems", 0),
    ("proposal", "order"), ("select", "mean"), ("position_temperature", -1.0),
    ("position_temperature", float("inf")), ("sr_smc_temperature", -0.1),
    ("weight_scale", float("nan")), ("weight_scale", -2.0), ("ess_threshold", 1.5),
    ("protocol.particle_blocks", ("one", "two")), ("protocol.selections", ("weight", "x")),
    ("protocol.position_temperatures", (1.0, -0.5)), ("protocol.weight_scales", (float("inf"),)),
    ("protocol.ess_thresholds", (0.5, 1.2)), ("protocol.tune_particles", (4, 0)),
])
def test_bad_field_is_named(field, value):
    c = dllm_configs.get_config("smoke")
    *path, last = field.split(".")
    section = c
    for p in path:
        section = section[p]
    section[last] = value
    with pytest.raises(ValueError, match=f"`config.{path[0] if path else last}"):
        config_lib.validate_config(c)


def test_task_overrides_and_kwargs_are_checked():
    c = dllm_configs.get_config("full")  # countdown among the tasks
    c.task_train.countdown.steps = 4001
    with pytest.raises(ValueError, match="`config.task_train.countdown.steps`"):
        config_lib.validate_config(c)
    c = dllm_configs.get_config("full")
    c.task_kwargs.countdown.n_numbers = 5
    with pytest.raises(ValueError, match="`config.task_kwargs.countdown`.*n_numbers"):
        config_lib.validate_config(c)


def test_sale_task_outside_tasks_warns():
    c = dllm_configs.get_config("smoke")
    c.sale.task = "sudoku"
    with pytest.warns(UserWarning, match="`config.sale.task`"):
        config_lib.validate_config(c)


def test_train_and_evaluate_validates_first(tmp_path):
    from experiments.lib import registry

    c = dllm_configs.get_config("smoke")
    c.threshold = float("nan")
    with pytest.raises(ValueError, match="`config.threshold`"):
        registry.train_and_evaluate("dllm", c, str(tmp_path / "run"))
    assert not (tmp_path / "run").exists()  # failed before touching the workdir


def test_cpu_hard_and_full_share_the_hard_task_units():
    """`cpu_hard` is `full` restricted to the hard variants: same task-unit keys."""
    from experiments import dllm as exp

    hard, full = dllm_configs.get_config("cpu_hard"), dllm_configs.get_config("full")
    assert set(hard.tasks) < set(full.tasks)
    for name in hard.tasks:
        assert exp._task_spec(hard, name) == exp._task_spec(full, name)
    assert exp._task_spec(hard, "countdown_hard") != exp._task_spec(
        dllm_configs.get_config("hard"), "countdown_hard")


def test_the_quick_preset_is_one_task_with_the_declared_decoders():
    """The quick preset (a first look) runs POKE-SMC and exactly its declared rivals at each
    N, on one task whose unit the shipped models serve."""
    from experiments import dllm as exp

    c = dllm_configs.get_config("quick")
    config_lib.validate_config(c)
    assert len(c.tasks) == 1 and not c.sale.task
    want = {row.format(n=n) for n in c.particles for row in exp.CONTENDER_ROWS.values()}
    assert set(exp.decoder_names(c)) == want
    assert {r if r in config_lib.GREEDY_DECODERS else f"{r}_{n}" for r in exp.DECLARED_RIVALS
            for n in c.particles} <= want
