"""Bad-input cases for ``jaxlab.rfo.references`` and the gait task's constructor."""

import functools

import jax
import jax.numpy as jnp

from jaxlab.rfo import envs, references, softbody
from tests.bad_inputs.harness import Case

KEY = jax.random.key(0)


@functools.cache
def _task():
    return envs.make_task("soft_quadruped")


def _state():
    return envs.reset(KEY, _task())


CASES = [
    Case("references.zero_action: episode_length 0",
         lambda: references.zero_action(KEY, _task(), 0), "`episode_length`"),
    Case("references.zero_action: a task name instead of the task",
         lambda: references.zero_action(KEY, "soft_quadruped", 4), "`task`"),
    Case("references.best_constant: restarts 0",
         lambda: references.best_constant(KEY, _task(), 4, restarts=0), "`restarts`"),
    Case("references.best_constant: lr 0",
         lambda: references.best_constant(KEY, _task(), 4, lr=0.0), "`lr`"),
    Case("references.posture_switch: switch_step at the episode's end",
         lambda: references.posture_switch(KEY, _task(), 4, 4), "`switch_step`"),
    Case("references.best_sinusoid: freq_hz high below low",
         lambda: references.best_sinusoid(KEY, _task(), 4, freq_hz=(3.0, 1.0)), "`freq_hz`"),
    Case("references.best_sinusoid: candidates 0",
         lambda: references.best_sinusoid(KEY, _task(), 4, candidates=0), "`candidates`"),
    Case("references.trajectory_optimisation: init_scale negative",
         lambda: references.trajectory_optimisation(KEY, _task(), 4, init_scale=-1.0),
         "`init_scale`"),
    Case("references.trajectory_optimisation: iterations 0",
         lambda: references.trajectory_optimisation(KEY, _task(), 4, iterations=0),
         "`iterations`"),
    Case("references.episode_returns: actions of 5 muscles, not 8",
         lambda: references.episode_returns(KEY, _task(), jnp.zeros((3, 5)), 1), "`actions`"),
    Case("references.episode_returns: NaN actions",
         lambda: references.episode_returns(KEY, _task(), jnp.full((3, 8), jnp.nan), 1),
         "`actions`"),
    Case("references.sinusoid_actions: offset of another length than phase",
         lambda: references.sinusoid_actions(0.5, 1.0, jnp.zeros(8), jnp.zeros(7), 4, 0.02),
         "`offset`"),
    Case("references.sinusoid_actions: control_dt 0",
         lambda: references.sinusoid_actions(0.5, 1.0, jnp.zeros(8), jnp.zeros(8), 4, 0.0),
         "`control_dt`"),
    Case("references.trace: actions of one step without its axis",
         lambda: references.trace(_task(), _state(), jnp.zeros(8), references.com_fn()),
         "`actions`"),
    Case("references.trace: trace_fn not a function",
         lambda: references.trace(_task(), _state(), jnp.zeros((2, 8)), "com"), "`trace_fn`"),
    Case("softbody.soft_quadruped_gait: settle_steps negative",
         lambda: softbody.soft_quadruped_gait(-1), "`settle_steps`"),
    Case("softbody.soft_quadruped_gait: settle_steps a float",
         lambda: softbody.soft_quadruped_gait(64.0), "`settle_steps`"),
]
