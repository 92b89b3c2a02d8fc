"""Periodic Q-learning: samples to reach ||Q - Q*||_inf <= eps for constant vs geometric
target-update periods.

  python -m experiments.qlearning --config=experiments/configs/qlearning.py:quick \
      --workdir=results/qlearning

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. One unit: all (schedule, seed) runs vmapped in one jitted program, split
into chunks through the unit's resumable runner, so an interrupted run resumes.
"""

import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from experiments import common
from experiments.lib import plots, study
from jaxlab.core import metrics, sharding
from jaxlab.qlearning import periodic_q, schedules
from jaxlab.qlearning.mdp import TabularMDP, chain, garnet
from jaxlab.qlearning.value_iteration import value_iteration


class _Carry(NamedTuple):
    states: periodic_q.PeriodicQState
    trace: periodic_q.Trace  # [runs, R] buffers filled chunk by chunk


def build_mdp(config: ml_collections.ConfigDict) -> TabularMDP:
    """The MDP named by ``config.mdp`` ("garnet" or "chain")."""
    if config.mdp == "garnet":
        return garnet(jax.random.key(config.mdp_seed), config.num_states, config.num_actions,
                      config.branching, config.gamma)
    if config.mdp == "chain":
        return chain(config.num_states, config.gamma)
    raise ValueError(f"`config.mdp` must be 'garnet' or 'chain', got {config.mdp!r}.")


def build_schedules(config: ml_collections.ConfigDict):
    """(names, stacked GeometricPeriod) for the constant grid, theory and shrinking runs."""
    names, scheds = [], []
    for k in config.constant_periods:
        names.append(f"constant K={k}")
        scheds.append(schedules.constant(int(k)))
    for b in config.theory_bases:
        names.append(f"theory K0={b:g}")
        scheds.append(schedules.theory(config.gamma, b))
    for b, r in config.shrinking:
        names.append(f"shrinking K0={b:g} r={r:g}")
        scheds.append(schedules.geometric(b, r))
    return names, schedules.stack(scheds)


def _step_size(config):
    if config.step_size == "inverse_count":
        return schedules.inverse_count_step()
    return schedules.constant_step(float(config.step_size))


def _validate(config: ml_collections.ConfigDict) -> None:
    periodic_q.validate_config(config)
    if config.num_records % config.num_chunks:
        raise ValueError(f"`num_records`={config.num_records} must be divisible by "
                         f"`num_chunks`={config.num_chunks}.")


def _runs(config: ml_collections.ConfigDict, ctx: study.Context) -> dict:
    """Every (schedule, seed) run, vmapped; returns the host trace and Q*."""
    mdp = build_mdp(config)
    q_star = value_iteration(mdp)
    names, scheds = build_schedules(config)
    n_sched, n_seeds = len(names), config.num_seeds
    step_size = _step_size(config)
    # Flatten (schedule, seed) into one batch axis of runs.
    run_scheds = jax.tree.map(lambda x: jnp.repeat(x, n_seeds, axis=0), scheds)
    keys = jax.random.split(jax.random.key(config.seed), n_seeds)
    keys = jnp.tile(keys, n_sched)
    states = jax.vmap(lambda k: periodic_q.init(k, mdp))(keys)
    num_runs = n_sched * n_seeds
    r = config.num_records
    empty = periodic_q.Trace(*(jnp.zeros((num_runs, r), d)
                               for d in (jnp.int32, jnp.float32, jnp.float32, jnp.int32)))
    carry = _Carry(states, empty)
    carry, run_scheds = sharding.shard_batch((carry, run_scheds), config.mesh_shape)
    per_chunk = r // config.num_chunks

    sim = jax.vmap(lambda st, sc: periodic_q.simulate(
        st, mdp, sc, q_star, per_chunk, config.record_every, config.sampling, step_size))

    @jax.jit
    def chunk(c: _Carry, i, run_scheds) -> _Carry:
        st, tr = sim(c.states, run_scheds)
        trace = jax.tree.map(
            lambda buf, new: jax.lax.dynamic_update_slice_in_dim(buf, new, i * per_chunk, 1),
            c.trace, tr)
        return _Carry(st, trace)

    carry = ctx.run_chunks(
        lambda c, i: chunk(c, jnp.int32(i), run_scheds), carry, config.num_chunks,
        desc="periodic Q-learning",
        unit="updates", units_per_chunk=num_runs * per_chunk * config.record_every)
    trace = jax.tree.map(lambda x: x.reshape(n_sched, n_seeds, r),
                         sharding.to_host(carry.trace))
    return {"trace": trace._asdict(), "q_star": q_star}


def _units(config: ml_collections.ConfigDict, workdir: str) -> list[study.Unit]:
    del workdir
    return [study.Unit("runs", lambda ctx: _runs(config, ctx))]


def _trace(out) -> periodic_q.Trace:
    return periodic_q.Trace(**out["runs"]["trace"])


def _summarize(config, out) -> dict:
    names, _ = build_schedules(config)
    trace, q_star = _trace(out), out["runs"]["q_star"]
    samples = trace.samples[0, 0].astype(np.float64)
    is_const = np.array([n.startswith("constant") for n in names])
    is_theory = np.array([n.startswith("theory") for n in names])
    table = {}
    best_const, best_theory = [], []
    for eps in config.eps_list:
        need = np.asarray(periodic_q.samples_to_accuracy(samples, trace.target_error, eps))
        reached = np.isfinite(need).all(axis=1)
        rows = {}
        for j, name in enumerate(names):
            row = {"fraction_reached": float(np.isfinite(need[j]).mean()),
                   "median": float(np.median(need[j]))}
            if reached[j]:
                m, hw = metrics.mean_and_ci(need[j])
                row.update(mean=float(m), ci95=float(hw))
            rows[name] = row
        table[f"{eps:g}"] = rows

        def best(mask, rows=rows, reached=reached):
            cands = [(rows[n]["mean"], n) for j, n in enumerate(names) if mask[j] and reached[j]]
            return min(cands) if cands else (float("nan"), None)

        best_const.append(best(is_const))
        best_theory.append(best(is_theory))

    eps = np.asarray(config.eps_list, np.float64)
    bc = np.array([b[0] for b in best_const])
    bt = np.array([b[0] for b in best_theory])
    ok = np.isfinite(bc) & np.isfinite(bt)
    slope = lambda y: (metrics.loglog_slope(1.0 / eps[ok], y[ok])  # noqa: E731
                       if ok.sum() >= 2 else float("nan"))
    summary = {
        "config": config.to_dict(),
        "q_star_range": [float(q_star.min()), float(q_star.max())],
        "schedules": names,
        "samples_to_eps": table,
        "best_constant": [{"eps": float(e), "samples": float(b[0]), "schedule": b[1]}
                          for e, b in zip(eps, best_const, strict=True)],
        "best_theory": [{"eps": float(e), "samples": float(b[0]), "schedule": b[1]}
                        for e, b in zip(eps, best_theory, strict=True)],
        "ratio_best_constant_over_theory": (bc / bt).tolist(),
        "slope_samples_vs_inv_eps": {"best_constant": slope(bc), "theory": slope(bt)},
        "final_target_error_mean": {n: float(trace.target_error[j, :, -1].mean())
                                    for j, n in enumerate(names)},
    }
    for e, c, t in zip(eps, bc, bt, strict=True):
        logging.info("eps=%g best constant %.4g samples, theory %.4g (ratio %.2f)", e, c, t, c / t)
    return summary


def _plot(config, summary, out, workdir):
    names, trace = summary["schedules"], _trace(out)
    samples = trace.samples[0, 0].astype(np.float64)
    eps = np.asarray(config.eps_list, np.float64)
    bc = np.array([b["samples"] for b in summary["best_constant"]])
    bt = np.array([b["samples"] for b in summary["best_theory"]])
    fig, (ax0, ax1) = plots.figure(2)
    for j, name in enumerate(names):
        m, hw = metrics.mean_and_ci(trace.target_error[j])
        plots.line_with_band(ax0, samples, m, hw, label=name,
                             ls="-" if name.startswith("constant") else "--")
    ax0.set(xlabel="samples", ylabel=r"$\|Q_{target} - Q^*\|_\infty$", yscale="log",
            title="error vs samples (mean, 95% CI)")
    ax0.legend(fontsize=7)
    ax1.loglog(1.0 / eps, bc, "o-", label="best constant K (per eps)")
    ax1.loglog(1.0 / eps, bt, "s--", label="theory K_n ~ gamma^(-2n/3)")
    ax1.set(xlabel="1 / eps", ylabel="samples to reach eps", title="sample complexity")
    ax1.legend(fontsize=8)
    plots.save(fig, os.path.join(workdir, "error_vs_samples.png"),
               caption=plots.t_band(trace.target_error.shape[1], "runs (seeds)")
               + " Right: samples at which the mean error first reaches eps.")


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for results/REPORT.md."""
    rows = []
    for c, t in zip(summary["best_constant"], summary["best_theory"], strict=True):
        rows.append((f"samples to eps={c['eps']:g}: best constant K vs theory schedule",
                     f"{c['samples']:.4g} ({c['schedule']}) vs {t['samples']:.4g} "
                     f"(ratio {c['samples'] / t['samples']:.2f}x)"))
    sl = summary["slope_samples_vs_inv_eps"]
    rows.append(("log-log slope of samples vs 1/eps (best constant, theory)",
                 f"{sl['best_constant']:.2f}, {sl['theory']:.2f}"))
    return rows


EXPERIMENT = study.Experiment(name="qlearning", validate=_validate, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/qlearning.py:quick")
