"""Benchmark: Q-updates/s of the jitted lax.scan vs a plain NumPy loop, side by side.

Rows: the NumPy reference loop; ``run_steps`` (uniforms drawn up front, the experiment's
path); a scan of ``periodic(...).step`` (one key per step, the uniform API); ``jit(vmap)``
of ``run_steps`` over seeds.

  python -m experiments.bench_qlearning [--numpy_steps=100000] [--jax_steps=2000000]
"""

import time

import jax
import numpy as np
from absl import app, flags

from experiments.lib import timing
from jaxlab import qlearning as ql
from jaxlab.qlearning.reference import periodic_q_learning_numpy

_NP_STEPS = flags.DEFINE_integer("numpy_steps", 100_000, "Steps for the NumPy loop.")
_JAX_STEPS = flags.DEFINE_integer("jax_steps", 2_000_000, "Steps per run for the jitted scan.")
_SEEDS = flags.DEFINE_integer("seeds", 32, "Runs in the vmapped measurement.")


def main(argv):
    del argv
    mdp = ql.garnet(jax.random.key(0), 10, 2, 3, 0.9)
    sched = ql.schedules.constant(400)
    us_np = np.asarray(jax.random.uniform(jax.random.key(1), (_NP_STEPS.value, 3)))
    t0 = time.perf_counter()
    periodic_q_learning_numpy(np.asarray(mdp.transitions), np.asarray(mdp.rewards), 0.9,
                              lambda n: 400, us_np)
    np_rate = _NP_STEPS.value / (time.perf_counter() - t0)

    n = _JAX_STEPS.value
    one = jax.jit(lambda k: ql.run_steps(ql.init(k, mdp), mdp, sched, n).q)
    jax_rate = n / timing.best_time(lambda: one(jax.random.key(2)))

    alg = ql.periodic(mdp, sched)  # the uniform API: one key per step
    stepped = jax.jit(lambda k: jax.lax.scan(lambda s, kk: (alg.step(kk, s)[0], None),
                                             alg.init(k), jax.random.split(k, n))[0].q)
    step_rate = n / timing.best_time(lambda: stepped(jax.random.key(2)))

    keys = jax.random.split(jax.random.key(3), _SEEDS.value)
    many = jax.jit(jax.vmap(lambda k: ql.run_steps(ql.init(k, mdp), mdp, sched, n // 4).q))
    vm_rate = _SEEDS.value * (n // 4) / timing.best_time(lambda: many(keys))

    print(f"backend: {jax.default_backend()}, devices: {jax.device_count()}")
    print(f"NumPy loop              : {np_rate:12.4g} Q-updates/s")
    print(f"jit scan, 1 run         : {jax_rate:12.4g} Q-updates/s  "
          f"ratio {jax_rate / np_rate:7.1f}x")
    print(f"jit scan of alg.step    : {step_rate:12.4g} Q-updates/s  "
          f"ratio {step_rate / np_rate:7.1f}x")
    print(f"jit(vmap) {_SEEDS.value:3d} runs      : {vm_rate:12.4g} Q-updates/s  "
          f"ratio {vm_rate / np_rate:7.1f}x")


if __name__ == "__main__":
    app.run(main)
