"""Benchmark: Q-updates/s of the jitted lax.scan vs a plain NumPy loop, side by side.

Rows: the NumPy reference loop; ``run_steps`` (uniforms drawn up front, the experiment's
path); a scan of ``periodic(...).step`` (one key per step, the uniform API); ``jit(vmap)``
of ``run_steps`` over seeds. Every contender is timed the same way
(``timing.best_times_interleaved``): one warm-up call each, then ``--repeats`` rounds of
one call each, best of the rounds, so a load change on the shared machine hits all of
them alike. The load average and CPU are printed with the ratios.

  python -m experiments.bench_qlearning [--numpy_steps=100000] [--jax_steps=2000000]
"""

import jax
import numpy as np
from absl import app, flags

from jaxlab import qlearning as ql
from jaxlab.qlearning.reference import periodic_q_learning_numpy

from .lib import timing

_NP_STEPS = flags.DEFINE_integer("numpy_steps", 100_000, "Steps for the NumPy loop.")
_JAX_STEPS = flags.DEFINE_integer("jax_steps", 2_000_000, "Steps per run for the jitted scan.")
_SEEDS = flags.DEFINE_integer("seeds", 32, "Runs in the vmapped measurement.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed rounds (best of) after the warm-up.")


def main(argv):
    del argv
    mdp = ql.garnet(jax.random.key(0), 10, 2, 3, 0.9)
    sched = ql.schedules.constant(400)
    us_np = np.asarray(jax.random.uniform(jax.random.key(1), (_NP_STEPS.value, 3)))
    p_np, r_np = np.asarray(mdp.transitions), np.asarray(mdp.rewards)

    n = _JAX_STEPS.value
    one = jax.jit(lambda k: ql.run_steps(ql.init(k, mdp), mdp, sched, n).q)
    alg = ql.periodic(mdp, sched)  # the uniform API: one key per step
    stepped = jax.jit(lambda k: jax.lax.scan(lambda s, kk: (alg.step(kk, s)[0], None),
                                             alg.init(k), jax.random.split(k, n))[0].q)
    keys = jax.random.split(jax.random.key(3), _SEEDS.value)
    many = jax.jit(jax.vmap(lambda k: ql.run_steps(ql.init(k, mdp), mdp, sched, n // 4).q))
    best = timing.best_times_interleaved({
        "numpy": lambda: periodic_q_learning_numpy(p_np, r_np, 0.9, lambda i: 400, us_np),
        "scan": lambda: one(jax.random.key(2)),
        "step": lambda: stepped(jax.random.key(2)),
        "vmap": lambda: many(keys),
    }, repeats=_REPEATS.value)
    np_rate = _NP_STEPS.value / best["numpy"]
    jax_rate, step_rate = n / best["scan"], n / best["step"]
    vm_rate = _SEEDS.value * (n // 4) / best["vmap"]

    print(timing.machine_line())
    print(f"timing: warm, best of {_REPEATS.value}, interleaved")
    print(f"NumPy loop              : {np_rate:12.4g} Q-updates/s")
    print(f"jit scan, 1 run         : {jax_rate:12.4g} Q-updates/s  "
          f"ratio {jax_rate / np_rate:7.1f}x")
    print(f"jit scan of alg.step    : {step_rate:12.4g} Q-updates/s  "
          f"ratio {step_rate / np_rate:7.1f}x")
    print(f"jit(vmap) {_SEEDS.value:3d} runs      : {vm_rate:12.4g} Q-updates/s  "
          f"ratio {vm_rate / np_rate:7.1f}x")


if __name__ == "__main__":
    app.run(main)
