"""Benchmark: rounds/s of the jitted two-point learner vs a plain NumPy loop, side by side,
and where the jitted round's time goes (the same scan with only the direction sampling,
only the loss queries, and the full learner). "pre-drawn" is ``bco.run(...,
predraw=True)`` (all T directions drawn before the scan, ``learners.PredrawnStep``);
"per-round draws" scans ``learner.step`` with one key per round (``predraw=False``),
measured in the same process. The NumPy loop and the jitted runs are timed the same way
(``timing.best_times_interleaved``: one warm-up call each, then ``--repeats`` rounds of
one call each, best of the rounds). The CPU and load average are printed: the machine is
shared, so ratios move with the load.

  python -m experiments.bench_bco [--dim=16] [--rounds=20000] [--seeds=64]
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from jaxlab import bco
from jaxlab.bco import losses
from jaxlab.bco.reference import two_point_ogd_numpy

from .lib import timing

_DIM = flags.DEFINE_integer("dim", 16, "Dimension.")
_ROUNDS = flags.DEFINE_integer("rounds", 20_000, "Rounds per run.")
_NP_ROUNDS = flags.DEFINE_integer("numpy_rounds", 5_000, "Rounds for the NumPy loop.")
_SEEDS = flags.DEFINE_integer("seeds", 64, "Runs in the vmapped measurement.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed rounds (best of) after the warm-up.")


def main(argv):
    del argv
    d, t = _DIM.value, _ROUNDS.value
    dom = bco.ball(d)
    learner = bco.gradient_variation(dom, 0.05)
    seq = losses.stochastic_quadratic(jax.random.key(0), t, d, sigma=0.3)

    tn = _NP_ROUNDS.value
    us = np.asarray(jax.vmap(lambda k: bco.estimators.sphere(k, d))(
        jax.random.split(jax.random.key(1), tn)))
    centers = np.asarray(seq.centers[:tn])

    one = jax.jit(lambda k: bco.run(k, learner, seq, jnp.zeros(d), predraw=True).loss)
    keys = jax.random.split(jax.random.key(3), _SEEDS.value)
    many = jax.jit(jax.vmap(lambda k: bco.run(k, learner, seq, jnp.zeros(d),
                                              predraw=True).loss))
    params, f = losses.round_params(seq)

    def per_round(k):  # the earlier run(): the direction drawn inside the scan
        def body(state, inp):
            p, kk = inp
            return learner.step(kk, state, functools.partial(f, p))
        return jax.lax.scan(body, learner.init(k, jnp.zeros(d)),
                            (params, jax.random.split(k, t)))[1].loss

    old1, old_v = jax.jit(per_round), jax.jit(jax.vmap(per_round))
    best = timing.best_times_interleaved({
        "numpy": lambda: two_point_ogd_numpy(centers, 1.0, 1.0, 0.05, 2.0, us),
        "one": lambda: one(jax.random.key(2)),
        "many": lambda: many(keys),
        "old1": lambda: old1(jax.random.key(2)),
        "old_v": lambda: old_v(keys),
    }, repeats=_REPEATS.value)
    np_rate = tn / best["numpy"]
    rate1, rate1_old = t / best["one"], t / best["old1"]
    rate_v, rate_v_old = _SEEDS.value * t / best["many"], _SEEDS.value * t / best["old_v"]

    # Where the time goes: scans doing only part of the round, same T and d.
    def only_dirs(k):
        def body(c, kk):
            return c + bco.estimators.sphere(kk, d), None
        return jax.lax.scan(body, jnp.zeros(d), jax.random.split(k, t))[0]

    def only_queries(k):
        u = bco.estimators.sphere(k, d)

        def body(x, p):
            g = (f(p, x + 0.05 * u) - f(p, x - 0.05 * u)) * u
            return x - 1e-3 * g, None
        return jax.lax.scan(body, jnp.zeros(d), params)[0]

    parts = {}
    for name, fn in (("directions only", only_dirs), ("loss queries only", only_queries)):
        jf = jax.jit(fn)
        parts[name] = t / timing.best_time(lambda jf=jf: jf(jax.random.key(4)),
                                           _REPEATS.value)

    print(timing.machine_line())
    print(f"d={d}, T={t}, NumPy T={tn}; timing: warm, best of {_REPEATS.value}, interleaved")
    for name, rate in parts.items():
        print(f"scan, {name:17s}: {rate:11.4g} rounds/s  ({rate1 / rate:5.2f} of a full round)")
    print(f"NumPy loop           : {np_rate:11.4g} rounds/s")
    print(f"jit scan, 1 run, per-round draws : {rate1_old:11.4g} rounds/s  "
          f"ratio {rate1_old / np_rate:7.1f}x")
    print(f"jit scan, 1 run, pre-drawn       : {rate1:11.4g} rounds/s  "
          f"ratio {rate1 / np_rate:7.1f}x")
    print(f"jit(vmap) {_SEEDS.value:3d} runs, per-round draws: {rate_v_old:11.4g} rounds/s  "
          f"ratio {rate_v_old / np_rate:7.1f}x")
    print(f"jit(vmap) {_SEEDS.value:3d} runs, pre-drawn       : {rate_v:11.4g} rounds/s  "
          f"ratio {rate_v / np_rate:7.1f}x")


if __name__ == "__main__":
    app.run(main)
