"""Benchmark: environment steps per second of the soft-body simulator, forward and
forward + backward, and how they grow with the number of tetrahedra.

Per mesh size (``--sizes``: torso cells x leg cells of ``mesh.quadruped`` at the task's
5 cm voxel, default 264, 480 and 1920 tets) a jitted rollout of ``--batch`` vmapped
environments (default 32, the study's) and ``--horizon`` environment steps (10 substeps
of 2 ms each) with random actions is timed: ``forward`` sums the task's reward,
``forward+backward`` also takes its gradient with respect to every action (what one RFO
/ SHAC update differentiates). Timing: ``timing.times_interleaved`` (one warm-up call,
then ``--repeats`` rounds; best of the rounds, with their spread). Printed per size:
tets, nodes, env steps/s both ways, the backward's cost ratio and microseconds per tet
per env step; the machine line (CPU, cores, load) first. The JSON (``--out``) holds every
number with its provenance.

  python -m experiments.bench_softbody [--batch=32] [--horizon=32] [--repeats=3]
      [--sizes=6x3x2:1x1x2,12x3x2:1x1x2,12x6x4:2x2x2] [--out=results/bench_softbody.json]
"""

import os

import jax
from absl import app, flags

from jaxlab.rfo.softbody import quadruped

from .lib import compile_cache, provenance, results, timing

FLAGS = flags.FLAGS
DEFAULT_SIZES = ("6x3x2:1x1x2", "12x3x2:1x1x2", "12x6x4:2x2x2")


def define_flags() -> None:
    """The command-line flags (defined only when run as a script)."""
    flags.DEFINE_integer("batch", 32, "Environments per rollout (vmapped).")
    flags.DEFINE_integer("horizon", 32, "Environment steps per rollout.")
    flags.DEFINE_integer("repeats", 3, "Timed rounds (best of) after the warm-up.")
    flags.DEFINE_list("sizes", list(DEFAULT_SIZES),
                      "Mesh sizes: torso nx x ny x nz : leg lx x ly x lz (voxels).")
    flags.DEFINE_string("out", "results/bench_softbody.json", "JSON output ('' = none).")


def parse_size(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """'6x3x2:1x1x2' -> ((6, 3, 2), (1, 1, 2))."""
    try:
        torso, legs = (tuple(int(c) for c in part.split("x")) for part in text.split(":"))
    except ValueError as e:
        raise ValueError(f"`sizes` entry {text!r} must look like 6x3x2:1x1x2.") from e
    if len(torso) != 3 or len(legs) != 3:
        raise ValueError(f"`sizes` entry {text!r} must give 3 torso and 3 leg counts.")
    return torso, legs


def rollout_fns(soft: quadruped.SoftTask, batch: int, horizon: int):
    """{"forward", "forward+backward"}: jitted functions of a key."""

    def total_reward(acts, s0):  # acts [H, B, A]
        def one(s, a):
            s1 = jax.vmap(soft.step)(s, a)
            return s1, jax.vmap(soft.reward)(s, s1, a)
        return jax.lax.scan(one, s0, acts)[1].sum()

    def inputs(key):
        k0, k1 = jax.random.split(key)
        s0 = jax.vmap(soft.init)(jax.random.split(k0, batch))
        acts = jax.random.uniform(k1, (horizon, batch, soft.act_dim), minval=-1, maxval=1)
        return acts, s0

    fwd = jax.jit(lambda key: total_reward(*inputs(key)))
    bwd = jax.jit(lambda key: jax.grad(total_reward)(*inputs(key)))
    return {"forward": fwd, "forward+backward": bwd}


def measure(sizes, batch: int, horizon: int, repeats: int) -> list[dict]:
    """One row per mesh size (module doc)."""
    rows = []
    for text in sizes:
        torso, legs = parse_size(text)
        soft = quadruped.soft_quadruped(torso_cells=torso, leg_cells=legs)
        fns = rollout_fns(soft, batch, horizon)
        key = jax.random.key(0)
        times = timing.times_interleaved({k: (lambda f=f, key=key: f(key)) for k, f in fns.items()},
                                         repeats)
        steps = batch * horizon
        spread = {k: timing.spread(t) for k, t in times.items()}
        rate = {k: steps / s["min"] for k, s in spread.items()}
        tets = int(soft.body.tets.shape[0])
        rows.append({"size": text, "tets": tets, "nodes": int(soft.body.rest.shape[0]),
                     "env_steps_per_s": rate, "spread_s": spread,
                     "backward_cost": rate["forward"] / rate["forward+backward"],
                     "us_per_tet_step": {k: 1e6 / (r * tets) for k, r in rate.items()}})
    return rows


def main(argv):
    del argv
    compile_cache.enable()
    load_before = os.getloadavg()
    rows = measure(FLAGS.sizes, FLAGS.batch, FLAGS.horizon, FLAGS.repeats)
    print(timing.machine_line())
    print(f"batch {FLAGS.batch} envs x {FLAGS.horizon} env steps (10 substeps each); best "
          f"of {FLAGS.repeats}")
    for r in rows:
        f, b = r["env_steps_per_s"]["forward"], r["env_steps_per_s"]["forward+backward"]
        print(f"{r['size']:>14}: {r['tets']:5d} tets {r['nodes']:5d} nodes  forward "
              f"{f:8.0f} env steps/s  forward+backward {b:8.0f} env steps/s  (x"
              f"{r['backward_cost']:.1f})  {r['us_per_tet_step']['forward']:.2f} us/tet/step "
              "forward")
    if FLAGS.out:
        res = {"rows": rows, "batch": FLAGS.batch, "horizon": FLAGS.horizon,
               "repeats": FLAGS.repeats,
               "provenance": provenance.benchmark(load_before)}
        print(f"wrote {results.write_json(FLAGS.out, res)}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
