"""Check: MJX with our solver settings (``opt.iterations == 1``) against the
default MuJoCo solver on hopper trajectories, before trusting contact gradients.

``envs.make_task`` loads every MJCF with ``opt.iterations = 1, opt.ls_iterations = 4``
(``envs._load``): reverse-mode gradients through ``mjx.step`` need one solver iteration
(otherwise the constraint solver is a ``lax.while_loop``). This script builds the same
hopper task (same MJCF, reward, reset, 4 frames per step) under other solver settings:

* ``ours``: the task as ``make_task("hopper")`` builds it;
* ``default``: MuJoCo's default ``opt.iterations`` / ``opt.ls_iterations`` (read from
  ``mujoco.MjOption`` of the installed MuJoCo: 100 / 50 in 3.17; the tolerances of the
  hopper MJCF are the defaults already), the reference;
* ``mjcf``: the hopper MJCF's own ``<option iterations="4"/>`` (ls_iterations default);
* ``noise floor``: ``default`` from initial positions perturbed by ``--perturb`` (1e-6): how
  fast two runs of the *same* solver separate, i.e. how chaotic the dynamics are.

From ``--num_states`` reset states (``envs.reset``, seeded) and two action sets per state
(uniform in [-1, 1] per step, and all zeros), each solver rolls ``--horizon`` env steps.
Per horizon h (state after h env steps; per trajectory the largest entry over coordinates,
then max / median over trajectories): |qpos diff|, |qvel diff|, |torso height diff|
(``x.pos[0, 2]``), |difference of the reward sums over the first h steps| (the task's own
``reward_fn``, summed without termination), |difference of the episode returns up to h|
(stopping at the first ``done``, as our trainers do) and the fraction of trajectories whose
first termination step (or none) agrees.

Gradients: d(sum of the 32-step rewards)/d(actions) from a reset state, for ``--grad_seeds``
seeds, random and zero actions. ``ours`` uses ``jax.grad`` (reverse mode, what our
trainers use). The default solver's ``while_loop`` has no reverse-mode derivative
(``jax.grad`` raises; the error is recorded), so its derivative is ``jax.jacfwd`` (forward
mode, the same mathematical derivative); ``ours`` is also taken with ``jax.jacfwd`` to show
that the two modes agree for one solver. Reported: cosine similarity, relative norm
difference ||g_ours - g_ref|| / ||g_ref|| and both norms (hopper's actuators clamp the
control to their ctrlrange [-1, 1], so actions in [-1, 1] are never clamped).

  python -m experiments.check_mjx_iterations [--out=results/check_mjx_iterations.json]
"""

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from jaxlab.rfo import envs

from .lib import provenance as prov
from .lib import results

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The command-line flags (defined only when run as a script, so that importing this
    module for its functions defines none)."""
    flags.DEFINE_string("out", "results/check_mjx_iterations.json", "JSON output path.")
    flags.DEFINE_string("task", "hopper", "Task (make_task name).")
    flags.DEFINE_integer("num_states", 8, "Reset states.")
    flags.DEFINE_integer("horizon", 128, "Env steps rolled out.")
    flags.DEFINE_list("horizons", ["1", "8", "32", "64", "128"], "Reported horizons.")
    flags.DEFINE_integer("grad_horizon", 32, "Env steps of the gradient check.")
    flags.DEFINE_integer("grad_seeds", 4, "Seeds of the gradient check.")
    flags.DEFINE_float("perturb", 1e-6, "qpos perturbation of the noise floor.")
    flags.DEFINE_integer("seed", 0, "Seed.")

def mujoco_default_solver() -> dict:
    """MuJoCo's default ``opt.iterations`` / ``opt.ls_iterations`` (installed version)."""
    import mujoco

    opt = mujoco.MjModel.from_xml_string("<mujoco/>").opt
    return {"iterations": int(opt.iterations), "ls_iterations": int(opt.ls_iterations)}


def mjcf_solver(task_name: str) -> dict | None:
    """The solver iterations the task's MJCF file sets itself (None for inline XML)."""
    import mujoco
    from etils import epath

    files = {"hopper": "hopper.xml", "reacher": "reacher.xml"}
    if task_name not in files:
        return None
    opt = mujoco.MjModel.from_xml_path(
        str(epath.resource_path("brax") / "envs/assets" / files[task_name])).opt
    return {"iterations": int(opt.iterations), "ls_iterations": int(opt.ls_iterations)}


def solver_of(task: envs.Task) -> dict:
    o = task.sys.opt
    return {"iterations": int(o.iterations), "ls_iterations": int(o.ls_iterations),
            "solver": int(o.solver), "tolerance": float(o.tolerance),
            "ls_tolerance": float(o.ls_tolerance)}


def with_solver(task: envs.Task, iterations: int, ls_iterations: int) -> envs.Task:
    """``task`` (same MJCF, reward, reset, frames) with other solver iterations."""
    sys = task.sys.tree_replace({"opt.iterations": int(iterations),
                                 "opt.ls_iterations": int(ls_iterations)})
    return dataclasses.replace(task, sys=sys)


@functools.cache
def _rollout_fn(task: envs.Task):
    """jit(states [B], actions [B, T, A]) -> dict of [B, T + 1, ...] / [B, T] arrays
    (one per task object: a ``Task`` hashes by identity)."""

    def one(state, actions):
        def body(s, a):
            s1, r = envs.step(task, s, a)
            ps = s1.pipeline_state
            return s1, (ps.q, ps.qd, ps.x.pos[0, 2], r, s1.done)

        _, (q, qd, z, r, d) = jax.lax.scan(body, state, actions)
        ps0 = state.pipeline_state
        cat = lambda x0, xs: jnp.concatenate([x0[None], xs], 0)  # noqa: E731
        return {"qpos": cat(ps0.q, q), "qvel": cat(ps0.qd, qd),
                "torso_z": cat(ps0.x.pos[0, 2], z), "reward": r, "done": d}

    return jax.jit(jax.vmap(one))


def _first_done(done: np.ndarray, h: int) -> np.ndarray:
    """[B] index of the first done among the first h steps, h if none."""
    d = done[:, :h] > 0
    if h == 0:
        return np.zeros(done.shape[0], int)
    return np.where(d.any(1), d.argmax(1), h)


def _stats(x: np.ndarray) -> dict:
    return {"max": float(np.max(x)), "median": float(np.median(x))}


def divergence(ref: dict, other: dict, horizons) -> dict:
    """Per horizon h, how far ``other``'s trajectories are from ``ref``'s (module doc)."""
    out = {}
    for h in horizons:
        dq = np.abs(ref["qpos"][:, h] - other["qpos"][:, h]).max(-1)
        dqd = np.abs(ref["qvel"][:, h] - other["qvel"][:, h]).max(-1)
        dz = np.abs(ref["torso_z"][:, h] - other["torso_z"][:, h])
        dr = np.abs(ref["reward"][:, :h].sum(1) - other["reward"][:, :h].sum(1))
        fd_ref, fd_oth = _first_done(ref["done"], h), _first_done(other["done"], h)
        steps = np.arange(h)[None]
        ep_ref = np.where(steps <= fd_ref[:, None], ref["reward"][:, :h], 0.0).sum(1)
        ep_oth = np.where(steps <= fd_oth[:, None], other["reward"][:, :h], 0.0).sum(1)
        out[str(h)] = {"qpos": _stats(dq), "qvel": _stats(dqd), "torso_z": _stats(dz),
                       "reward_sum": _stats(dr), "episode_return": _stats(np.abs(ep_ref - ep_oth)),
                       "same_termination": float(np.mean(fd_ref == fd_oth)),
                       "ref_reward_sum_mean": float(ref["reward"][:, :h].sum(1).mean()),
                       "finite": bool(all(np.isfinite(other[k]).all() and np.isfinite(ref[k]).all()
                                          for k in ("qpos", "qvel", "torso_z", "reward")))}
    return out


def _return_fn(task: envs.Task):
    """(state, actions [T, A]) -> sum of the T rewards (no termination)."""

    def ret(state, actions):
        def body(s, a):
            s1, r = envs.step(task, s, a)
            return s1, r

        return jnp.sum(jax.lax.scan(body, state, actions)[1])

    return ret


def gradient_check(task: envs.Task, ref_task: envs.Task, key, horizon: int, seeds: int) -> dict:
    """d(sum of ``horizon`` rewards)/d(actions): ``task`` (reverse and forward mode) vs
    ``ref_task`` (forward mode; its reverse mode is attempted and the error recorded)."""
    f_ours, f_ref = _return_fn(task), _return_fn(ref_task)
    rev = jax.jit(jax.value_and_grad(f_ours, argnums=1))
    fwd = jax.jit(jax.jacfwd(f_ours, argnums=1))
    ref_val = jax.jit(f_ref)
    ref_fwd = jax.jit(jax.jacfwd(f_ref, argnums=1))
    reverse_error = None
    rows = []
    for i in range(seeds):
        k_reset, k_act = jax.random.split(jax.random.fold_in(key, i))
        state = envs.reset(k_reset, task)
        for kind in ("random", "zero"):
            a = (jax.random.uniform(k_act, (horizon, task.act_dim), minval=-1.0, maxval=1.0)
                 if kind == "random" else jnp.zeros((horizon, task.act_dim)))
            if reverse_error is None and ref_task.sys.opt.iterations > 1:
                try:
                    jax.jit(jax.grad(f_ref, argnums=1)).lower(state, a)
                    reverse_error = ""
                except Exception as e:  # noqa: BLE001 - the failure is the finding
                    reverse_error = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
            r_ours, g_rev = rev(state, a)
            g_fwd, g_ref, r_ref = fwd(state, a), ref_fwd(state, a), ref_val(state, a)
            g_rev, g_fwd, g_ref = (np.asarray(g, np.float64).ravel()
                                   for g in (g_rev, g_fwd, g_ref))
            n_ours, n_ref = float(np.linalg.norm(g_rev)), float(np.linalg.norm(g_ref))
            rows.append({
                "seed": i, "actions": kind,
                "return_ours": float(r_ours), "return_ref": float(r_ref),
                "norm_ours": n_ours, "norm_ref": n_ref,
                "cosine": float(g_rev @ g_ref / max(n_ours * n_ref, 1e-30)),
                "rel_norm_diff": float(np.linalg.norm(g_rev - g_ref) / max(n_ref, 1e-30)),
                "ours_rev_vs_fwd_rel_diff": float(np.linalg.norm(g_rev - g_fwd)
                                                  / max(np.linalg.norm(g_fwd), 1e-30)),
                "zero_entries_ours": int(np.sum(g_rev == 0)), "entries": int(g_rev.size),
                "finite": bool(np.isfinite(g_rev).all() and np.isfinite(g_ref).all())})
    return {"horizon": horizon, "rows": rows, "ref_reverse_mode_error": reverse_error}


def run_check(task_name: str = "hopper", ref_solver: dict | None = None,
              solvers: dict | None = None, num_states: int = 8, horizon: int = 128,
              horizons=(1, 8, 32, 64, 128), grad_horizon: int = 32, grad_seeds: int = 4,
              perturb: float = 1e-6, seed: int = 0) -> dict:
    """Divergence and gradient agreement of solver settings against ``ref_solver``.

    Args:
      task_name: an ``envs.make_task`` task.
      ref_solver: {"iterations", "ls_iterations"} of the reference (default: MuJoCo's).
      solvers: {name: {"iterations", "ls_iterations"} or None (the task as built)} compared
        with the reference (default: ``ours`` and the MJCF's own setting when there is one).
        The first one is also compared in the gradient check.
      num_states: reset states; each is rolled with random and with zero actions.
      horizon: env steps rolled out; horizons: the steps reported (each <= horizon).
      grad_horizon, grad_seeds: the gradient check (grad_seeds = 0 skips it).
      perturb: qpos perturbation of the noise-floor rollout of the reference (0 skips it).
      seed: seed of the reset states and actions.

    Returns:
      JSON-ready dict: solver settings, per comparison and action set the per-horizon
      ``divergence``, the gradient rows, and timings.
    """
    horizons = tuple(int(h) for h in horizons)
    if any(h < 0 or h > horizon for h in horizons):
        raise ValueError(f"`horizons` {horizons} must lie in [0, horizon={horizon}].")
    task = envs.make_task(task_name)
    ref_solver = ref_solver or mujoco_default_solver()
    ref_task = with_solver(task, ref_solver["iterations"], ref_solver["ls_iterations"])
    if solvers is None:
        solvers = {"ours": None}
        own = mjcf_solver(task_name)
        if own is not None:
            solvers["mjcf"] = own
    tasks = {name: task if s is None else with_solver(task, s["iterations"], s["ls_iterations"])
             for name, s in solvers.items()}

    key = jax.random.key(seed)
    k_reset, k_act, k_grad = jax.random.split(key, 3)
    states = jax.vmap(lambda k: envs.reset(k, task))(jax.random.split(k_reset, num_states))
    acts = {"random": jax.random.uniform(k_act, (num_states, horizon, task.act_dim),
                                         minval=-1.0, maxval=1.0),
            "zero": jnp.zeros((num_states, horizon, task.act_dim))}

    timings = {}

    def roll(t, name, s0):
        fn = _rollout_fn(t)
        t0 = time.perf_counter()
        out = {kind: jax.tree.map(np.asarray, fn(s0, a)) for kind, a in acts.items()}
        timings[name] = time.perf_counter() - t0
        return out

    ref = roll(ref_task, "reference", states)
    comparisons = {}
    for name, t in tasks.items():
        other = roll(t, name, states)
        comparisons[name] = {kind: divergence(ref[kind], other[kind], horizons) for kind in acts}
    if perturb:
        from brax.mjx import pipeline

        def perturbed(s, k):
            ps = s.pipeline_state
            q = ps.q + perturb * jax.random.uniform(k, ps.q.shape, minval=-1.0, maxval=1.0)
            ps = pipeline.init(task.sys, q, ps.qd)
            return envs.EnvState(ps, task.obs_fn(ps), s.t, s.done)

        s_pert = jax.vmap(perturbed)(states, jax.random.split(jax.random.fold_in(key, 7),
                                                              num_states))
        other = roll(ref_task, "noise_floor", s_pert)
        comparisons["noise_floor"] = {kind: divergence(ref[kind], other[kind], horizons)
                                      for kind in acts}
    grads = None
    if grad_seeds:
        t0 = time.perf_counter()
        first = next(iter(tasks.values()))
        grads = gradient_check(first, ref_task, k_grad, grad_horizon, grad_seeds)
        grads["compared"] = next(iter(tasks))
        timings["gradients"] = time.perf_counter() - t0
    return {"task": task_name, "reference": {"name": "default", **solver_of(ref_task)},
            "solvers": {name: solver_of(t) for name, t in tasks.items()},
            "num_states": num_states, "horizon": horizon, "horizons": list(horizons),
            "perturb": perturb, "seed": seed, "frames_per_step": task.n_frames,
            "timestep": float(task.sys.opt.timestep), "comparisons": comparisons,
            "gradients": grads, "timings_s": timings}


def format_table(result: dict) -> str:
    ref = result["reference"]
    lines = [f"task {result['task']}: {result['num_states']} reset states x (random, zero) "
             f"actions, {result['frames_per_step']} frames of {result['timestep']} s per step; "
             f"reference = default solver (iterations {ref['iterations']}, ls_iterations "
             f"{ref['ls_iterations']})"]
    head = (f"{'actions':7s} {'h':>4s} | {'|dqpos| max':>11s} {'med':>8s} | {'|dqvel| max':>11s}"
            f" {'med':>8s} | {'|dz| max':>9s} {'med':>8s} | {'|dRsum| max':>11s} {'med':>8s} |"
            f" {'|dEpRet| max':>12s} | same-term | ref Rsum")
    for name, comp in result["comparisons"].items():
        s = result["solvers"].get(name)
        desc = (f"iterations {s['iterations']}, ls_iterations {s['ls_iterations']}" if s else
                f"default solver, qpos perturbed by {result['perturb']:g}")
        lines += ["", f"{name} ({desc}) vs reference:", head, "-" * len(head)]
        for kind, per_h in comp.items():
            for h, d in per_h.items():
                lines.append(
                    f"{kind:7s} {h:>4s} | {d['qpos']['max']:11.3g} {d['qpos']['median']:8.2g} |"
                    f" {d['qvel']['max']:11.3g} {d['qvel']['median']:8.2g} |"
                    f" {d['torso_z']['max']:9.3g} {d['torso_z']['median']:8.2g} |"
                    f" {d['reward_sum']['max']:11.3g} {d['reward_sum']['median']:8.2g} |"
                    f" {d['episode_return']['max']:12.3g} | {d['same_termination']:9.2f} |"
                    f" {d['ref_reward_sum_mean']:8.3g}")
    g = result["gradients"]
    if g:
        lines += ["", f"gradient of the {g['horizon']}-step "
                  f"reward sum w.r.t. actions: {g['compared']} (jax.grad) vs reference "
                  f"(jax.jacfwd; jax.grad: {g['ref_reverse_mode_error'] or 'ok'})"]
        head = (f"{'seed':>4s} {'actions':7s} | {'cosine':>7s} | {'rel diff':>8s} | "
                f"{'|g| ours':>9s} {'|g| ref':>9s} | {'R ours':>8s} {'R ref':>8s} | "
                f"{'rev/fwd':>8s} | zero entries")
        lines += [head, "-" * len(head)]
        for r in g["rows"]:
            lines.append(f"{r['seed']:4d} {r['actions']:7s} | {r['cosine']:7.3f} | "
                         f"{r['rel_norm_diff']:8.3f} | {r['norm_ours']:9.3g} {r['norm_ref']:9.3g} |"
                         f" {r['return_ours']:8.3f} {r['return_ref']:8.3f} | "
                         f"{r['ours_rev_vs_fwd_rel_diff']:8.1e} | {r['zero_entries_ours']}/"
                         f"{r['entries']}")
    return "\n".join(lines)


def main(argv):
    del argv
    t0 = time.perf_counter()
    result = run_check(FLAGS.task, num_states=FLAGS.num_states, horizon=FLAGS.horizon,
                       horizons=[int(h) for h in FLAGS.horizons],
                       grad_horizon=FLAGS.grad_horizon, grad_seeds=FLAGS.grad_seeds,
                       perturb=FLAGS.perturb, seed=FLAGS.seed)
    result["wall_s"] = time.perf_counter() - t0
    result["provenance"] = prov.environment()
    print(format_table(result))
    print(f"\nwall time {result['wall_s']:.0f} s")
    print(f"wrote {results.write_json(FLAGS.out, result)}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
