"""Diagnostic: the policy gradient through the physics, and how it grows with the horizon.

What RFO, SHAC and APG all differentiate is the return of a rollout with respect to the
policy's parameters, through the simulator. This script measures that gradient on a task's
reset distribution, for a fixed policy and a range of horizons, so that a comparison of the
trainers can say whether the physics hands them a usable gradient:

- policy (ours, the same for every task): a = tanh(W o + b + sigma eps_t), W [obs_dim,
  act_dim] drawn from N(0, scale^2 / obs_dim) with the run's key, b = 0, not trained;
  eps_t ~ N(0, I) drawn per environment and step and held fixed (the reparameterised
  exploration noise of a Gaussian policy: ``--action_noise`` sigma; SHAC-Gaussian and APG
  start at sigma = exp(-0.5) = 0.61; 0: deterministic);
- per environment b (``--batch`` of them from the task's reset distribution) and horizon H:
  g_b = d/d(W, b) sum_{t < H} r_t, by reverse mode through ``envs.step``;
- per H (``gradient_stats``): the mean over environments of ||g_b||; the norm of their mean
  ||g||; the relative variance E_b ||g_b - g||^2 / ||g||^2 (a B-environment average has
  that / B as its noise-to-signal ratio: above B, its direction is mostly noise); the mean
  return; the share of environments whose gradient is non-finite (left out of the rest).

A gradient whose relative variance grows quickly with H (contacts, chaos) is what SHAC's
short horizons and critic are built to avoid; one that is smooth and small says the
physics is not what stands between a trainer and a good policy.

  python -m experiments.rfo_gradients [--tasks=soft_quadruped,pendulum]
      [--horizons=1,2,4,8,16,32,64] [--batch=32] [--scale=1.0] [--action_noise=0]
      [--seed=0]
      [--out=results/rfo_gradients.json]
"""

import functools
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags
from jax.flatten_util import ravel_pytree

from jaxlab.core import validation
from jaxlab.rfo import envs

from .lib import compile_cache, provenance, results, timing

FLAGS = flags.FLAGS


def define_flags() -> None:
    """The command-line flags (defined only when run as a script)."""
    flags.DEFINE_list("tasks", ["soft_quadruped", "pendulum"], "Tasks (rfo.task_names()).")
    flags.DEFINE_list("horizons", ["1", "2", "4", "8", "16", "32", "64"],
                      "Rollout lengths H (environment steps).")
    flags.DEFINE_integer("batch", 32, "Environments from the reset distribution.")
    flags.DEFINE_float("scale", 1.0, "Scale of the policy's initial weights.")
    flags.DEFINE_float("action_noise", 0.0, "sigma of the held Gaussian action noise.")
    flags.DEFINE_integer("seed", 0, "Seed of the policy and the reset states.")
    flags.DEFINE_string("out", "results/rfo_gradients.json", "JSON output ('' = none).")


def linear_policy(key, obs_dim: int, act_dim: int, scale: float = 1.0) -> dict:
    """{"w": [obs_dim, act_dim] ~ N(0, scale^2 / obs_dim), "b": zeros [act_dim]}."""
    validation.check_in_range("scale", scale, 0.0, None, low_inclusive=False)
    w = scale * jax.random.normal(key, (obs_dim, act_dim)) / np.sqrt(obs_dim)
    return {"w": w, "b": jnp.zeros(act_dim)}


def rollout_return(params: dict, task: envs.Task, state: envs.EnvState, noise):
    """sum_t r_t of one environment from ``state`` under a_t = tanh(W o_t + b + noise_t),
    for t < H with ``noise`` [H, act_dim] (the held exploration noise, sigma eps_t)."""
    def one(s, n):
        s1, r = envs.step(task, s, jnp.tanh(s.obs @ params["w"] + params["b"] + n))
        return s1, r
    return jax.lax.scan(one, state, noise)[1].sum()


@functools.partial(jax.jit, static_argnums=(1,))
def per_env_gradients(params: dict, task: envs.Task, states: envs.EnvState, noise):
    """(returns [B], flat gradients [B, P]) of ``rollout_return`` per environment of the
    batched ``states``, each with its own ``noise`` [B, H, act_dim]."""
    def one(state, n):
        ret, g = jax.value_and_grad(rollout_return)(params, task, state, n)
        return ret, ravel_pytree(g)[0]
    return jax.vmap(one)(states, noise)


def gradient_stats(returns, grads) -> dict:
    """Module doc's statistics of per-environment gradients.

    Args:
      returns: [B] rollout returns.
      grads: [B, P] flat gradients (rows with a non-finite entry are counted, then left
        out).

    Returns:
      {"mean_grad_norm", "norm_of_mean", "relative_variance", "mean_return",
      "nonfinite_share", "environments"} ("environments": the finite rows used).
    """
    g = np.asarray(grads, np.float64)
    r = np.asarray(returns, np.float64)
    if g.ndim != 2 or r.shape != g.shape[:1]:
        raise ValueError(f"`grads` must be [B, P] and `returns` [B]; got {g.shape} and "
                         f"{r.shape}.")
    ok = np.all(np.isfinite(g), axis=1) & np.isfinite(r)
    g, r = g[ok], r[ok]
    if len(g) < 2:
        nan = float("nan")
        return {"mean_grad_norm": nan, "norm_of_mean": nan, "relative_variance": nan,
                "mean_return": nan, "nonfinite_share": float(1 - ok.mean()),
                "environments": int(len(g))}
    mean = g.mean(0)
    m2 = float(mean @ mean)
    return {"mean_grad_norm": float(np.linalg.norm(g, axis=1).mean()),
            "norm_of_mean": float(np.sqrt(m2)),
            "relative_variance": float(np.mean(np.sum((g - mean) ** 2, axis=1)) / m2)
            if m2 > 0 else float("inf"),
            "mean_return": float(r.mean()), "nonfinite_share": float(1 - ok.mean()),
            "environments": int(len(g))}


def measure(task_name: str, horizons, batch: int, scale: float, seed: int,
            action_noise: float = 0.0) -> dict:
    """{"task", "batch", "scale", "action_noise", "seed", "rows": [gradient_stats +
    "horizon", "seconds" per H]} for one task; the noise of horizon H is the first H steps
    of the longest horizon's.

    Raises:
      ValueError: a horizon or ``batch`` not a positive integer, ``scale`` <= 0 or
        ``action_noise`` < 0 (before any work).
    """
    for h in horizons:
        validation.check_positive_int("horizons", h)
    validation.check_positive_int("batch", batch)
    validation.check_in_range("scale", scale, 0.0, None, low_inclusive=False)
    validation.check_in_range("action_noise", action_noise, 0.0, None)
    task = envs.make_task(task_name)
    kp, ks, kn = jax.random.split(jax.random.key(seed), 3)
    params = linear_policy(kp, task.obs_dim, task.act_dim, scale)
    states = jax.vmap(lambda k: envs.reset(k, task))(jax.random.split(ks, batch))
    noise = action_noise * jax.random.normal(kn, (batch, max(horizons), task.act_dim))
    rows = []
    for h in horizons:
        t0 = time.perf_counter()
        ret, g = jax.block_until_ready(per_env_gradients(params, task, states,
                                                         noise[:, :int(h)]))
        rows.append({"horizon": int(h), **gradient_stats(ret, g),
                     "seconds": time.perf_counter() - t0})
        r = rows[-1]
        print(f"{task_name:>16} H={int(h):3d}: |g_b| {r['mean_grad_norm']:.3g}  |mean g| "
              f"{r['norm_of_mean']:.3g}  relative variance {r['relative_variance']:.3g}  "
              f"return {r['mean_return']:.3g}  non-finite {r['nonfinite_share']:.2f}  "
              f"({r['seconds']:.0f} s)", flush=True)
    return {"task": task_name, "batch": batch, "scale": scale,
            "action_noise": action_noise, "seed": seed, "rows": rows}


def main(argv):
    del argv
    compile_cache.enable()
    load_before = os.getloadavg()
    horizons = [int(h) for h in FLAGS.horizons]
    print(timing.machine_line())
    out = [measure(t, horizons, FLAGS.batch, FLAGS.scale, FLAGS.seed, FLAGS.action_noise)
           for t in FLAGS.tasks]
    if FLAGS.out:
        res = {"tasks": out, "provenance": provenance.benchmark(load_before)}
        print(f"wrote {results.write_json(FLAGS.out, res)}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
