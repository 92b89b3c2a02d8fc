"""Reference lines of the soft quadruped tasks: what open-loop action sequences earn.

Per task (``--tasks``, default ``soft_quadruped`` and ``soft_quadruped_gait``) and the
study's episode length (``--episode_length``, 128 steps = 2.56 s), the reference lines of
``jaxlab.rfo.references``: the zero action, the best constant posture (gradient ascent,
``--restarts`` x ``--iterations``), the best of ``--candidates`` random sinusoid gaits,
trajectory optimisation (``--traj_iterations`` Adam steps on the whole [T, 8] sequence)
and, on tasks listed in ``--switch_tasks``, the posture switch at ``--switch_step``
(zero action, then the best constant posture: what a single timed posture change earns
on the gait task). Every optimiser runs on ``--num_envs`` reset states; every reported
return is measured on as many held-out ones (``references`` module doc).

Writes ``<workdir>/summary.json`` (returns, the optimisers' sizes and histories' ends,
seconds per line, the constant postures, provenance: code, packages, machine, load
before and after), ``<workdir>/actions.npz`` (every line's [T, 8] action sequence) and
``<workdir>/com_trajectories.png`` (the centre of mass's forward position and height
along each line on one held-out environment).

  python -m experiments.rfo_references --workdir=results/rfo_references
      [--tasks=soft_quadruped,soft_quadruped_gait] [--episode_length=128] [--num_envs=2]
      [--restarts=2] [--iterations=25] [--candidates=100] [--traj_iterations=60]
"""

import os
import time

import jax
import numpy as np
from absl import app, flags

from jaxlab.rfo import envs, references

from .lib import compile_cache, plots, provenance, results, timing

FLAGS = flags.FLAGS
LINES = ("zero_action", "best_constant", "best_sinusoid", "trajectory_optimisation",
         "posture_switch")
CONTROL_DT = 0.02  # the soft quadruped's control period [s]


def define_flags() -> None:
    """The command-line flags (defined only when run as a script)."""
    flags.DEFINE_string("workdir", "results/rfo_references", "Output folder.")
    flags.DEFINE_list("tasks", ["soft_quadruped", "soft_quadruped_gait"], "Tasks.")
    flags.DEFINE_integer("episode_length", 128, "Steps per episode (the study's: 128).")
    flags.DEFINE_integer("num_envs", 2, "Reset states optimised on (and as many held out).")
    flags.DEFINE_integer("restarts", 2, "Starts of the constant-posture ascent.")
    flags.DEFINE_integer("posture_candidates", 32,
                         "Random constant postures scored to pick the ascent's starts.")
    flags.DEFINE_integer("iterations", 25, "Adam steps of the constant-posture ascent.")
    flags.DEFINE_float("lr", 0.3, "Adam learning rate of the constant-posture ascent.")
    flags.DEFINE_integer("candidates", 100, "Random sinusoid gaits.")
    flags.DEFINE_integer("traj_iterations", 60, "Adam steps of trajectory optimisation.")
    flags.DEFINE_float("traj_lr", 0.1, "Adam learning rate of trajectory optimisation.")
    flags.DEFINE_list("switch_tasks", ["soft_quadruped_gait"],
                      "Tasks that also get the posture switch.")
    flags.DEFINE_integer("switch_step", 64, "Step of the posture switch.")
    flags.DEFINE_integer("seed", 0, "Seed of the environments and the optimisers' starts.")


def sizes() -> dict:
    """The flags that size the run (recorded in the summary)."""
    return {name: getattr(FLAGS, name) for name in (
        "tasks", "episode_length", "num_envs", "restarts", "posture_candidates",
        "iterations", "lr", "candidates",
        "traj_iterations", "traj_lr", "switch_tasks", "switch_step", "seed")}


def measure(key, task_name: str, *, episode_length: int, num_envs: int, restarts: int,
            posture_candidates: int, iterations: int, lr: float, candidates: int,
            traj_iterations: int, traj_lr: float,
            switch_step: int | None) -> dict[str, references.Reference]:
    """{line: Reference} of one task (``references``; each line its own key)."""
    task = envs.make_task(task_name)
    keys = {line: jax.random.fold_in(key, i) for i, line in enumerate(LINES)}
    runs = {
        "zero_action": lambda: references.zero_action(
            keys["zero_action"], task, episode_length, num_envs),
        "best_constant": lambda: references.best_constant(
            keys["best_constant"], task, episode_length, num_envs=num_envs,
            restarts=restarts, iterations=iterations, lr=lr, candidates=posture_candidates),
        "best_sinusoid": lambda: references.best_sinusoid(
            keys["best_sinusoid"], task, episode_length, candidates=candidates,
            num_envs=num_envs, control_dt=CONTROL_DT),
        "trajectory_optimisation": lambda: references.trajectory_optimisation(
            keys["trajectory_optimisation"], task, episode_length, num_envs=num_envs,
            iterations=traj_iterations, lr=traj_lr),
    }
    if switch_step is not None:
        runs["posture_switch"] = lambda: references.posture_switch(
            keys["posture_switch"], task, episode_length, switch_step, num_envs=num_envs,
            restarts=restarts, iterations=iterations, lr=lr, candidates=posture_candidates)
    out, seconds = {}, {}
    for line, run in runs.items():
        t0 = time.perf_counter()
        out[line] = jax.device_get(jax.block_until_ready(run()))
        seconds[line] = time.perf_counter() - t0
        print(f"{task_name:>20} {line:>24}: return {float(out[line].ret):8.3f} (held out), "
              f"{float(out[line].fit_ret):8.3f} (optimised on); {seconds[line]:.0f} s "
              f"(compile included); load {os.getloadavg()[0]:.1f}", flush=True)
    return out, seconds


def row(line: str, ref: references.Reference, seconds: float) -> dict:
    """The summary's entry of one line: its returns, seconds (compile included), and the
    optimisation's first and last return (the random search's median and best
    candidate)."""
    h = np.asarray(ref.history, np.float64)
    entry = {"return": float(ref.ret), "return_optimised_on": float(ref.fit_ret),
             "seconds": seconds, "nonfinite_steps": int(ref.nonfinite_steps)}
    if line == "best_sinusoid":
        entry["candidates_median_best"] = [float(np.median(h)), float(h.max())]
    elif h.size:
        entry["ascent_first_last"] = [float(h[0]), float(h[-1])]
    return entry


def com_traces(key, task_name: str, lines: dict, num_envs: int) -> dict:
    """{line: [T + 1, 3] centre of mass} on the first held-out environment of each line
    (of those ``references`` holds out: ``split(fold_in(line key, 1), num_envs)``)."""
    task = envs.make_task(task_name)
    out = {}
    for i, line in enumerate(LINES):
        if line not in lines:
            continue
        k = jax.random.split(jax.random.fold_in(jax.random.fold_in(key, i), 1), num_envs)[0]
        _, com = references.trace(task, envs.reset(k, task), lines[line].actions,
                                  references.com_fn())
        out[line] = np.asarray(com)
    return out


def plot(traces: dict, summary: dict, path: str) -> str:
    """Forward position and height of the centre of mass along every line, per task."""
    tasks = list(traces)
    fig, axes = plots.figure(2 * len(tasks))
    for j, t in enumerate(tasks):
        ax_x, ax_z = axes[2 * j], axes[2 * j + 1]
        for line, com in traces[t].items():
            time_s = CONTROL_DT * np.arange(com.shape[0])
            ret = summary["tasks"][t][line]["return"]
            label = f"{line.replace('_', ' ')} ({ret:.1f})"
            ax_x.plot(time_s, 100 * (com[:, 0] - com[0, 0]), label=label)
            ax_z.plot(time_s, 100 * com[:, 2], label=label)
        ax_x.set(xlabel="time [s]", ylabel="forward COM displacement [cm]", title=t)
        ax_z.set(xlabel="time [s]", ylabel="COM height [cm]", title=t)
        ax_x.legend(fontsize=7)
    return plots.save(fig, path, caption="One held-out reset state per line; the legend "
                      "gives each line's mean return over the held-out states.")


def main(argv):
    del argv
    compile_cache.enable()
    load_before = os.getloadavg()
    print(timing.machine_line())
    key = jax.random.key(FLAGS.seed)
    summary = {"sizes": sizes(), "tasks": {}, "constant_postures": {}}
    arrays, traces = {}, {}
    t_all = time.perf_counter()
    for t in FLAGS.tasks:
        k = jax.random.fold_in(key, envs.task_names().index(t))
        lines, seconds = measure(
            k, t, episode_length=FLAGS.episode_length, num_envs=FLAGS.num_envs,
            restarts=FLAGS.restarts, posture_candidates=FLAGS.posture_candidates,
            iterations=FLAGS.iterations, lr=FLAGS.lr,
            candidates=FLAGS.candidates, traj_iterations=FLAGS.traj_iterations,
            traj_lr=FLAGS.traj_lr,
            switch_step=FLAGS.switch_step if t in FLAGS.switch_tasks else None)
        summary["tasks"][t] = {line: row(line, ref, seconds[line])
                               for line, ref in lines.items()}
        summary["constant_postures"][t] = {
            line: [round(float(a), 3) for a in np.asarray(lines[line].actions)[-1]]
            for line in ("best_constant", "posture_switch") if line in lines}
        arrays.update({f"{t}/{line}": np.asarray(ref.actions) for line, ref in lines.items()})
        traces[t] = com_traces(k, t, lines, FLAGS.num_envs)
    summary["total_seconds"] = time.perf_counter() - t_all
    summary["provenance"] = provenance.benchmark(load_before, sizes=sizes())
    os.makedirs(FLAGS.workdir, exist_ok=True)
    np.savez(os.path.join(FLAGS.workdir, "actions.npz"), **arrays)
    print(f"wrote {results.write_json(os.path.join(FLAGS.workdir, 'summary.json'), summary)}")
    print(f"wrote {plot(traces, summary, os.path.join(FLAGS.workdir, 'com_trajectories.png'))}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
