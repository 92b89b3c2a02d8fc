"""Periodic Q-learning: samples to reach ||Q_target - Q*||_inf <= eps for the best constant
period vs the theory schedule K_n ~ gamma^(-2n/3), on several MDP families.

  python -m experiments.qlearning --config=experiments/configs/qlearning.py:quick \
      --workdir=results/qlearning

Declared before any run (the protocol):
  * Headline: the paper's SGD inner loop (``periodic_q.paper_sgd_step``) under
    asynchronous trajectory sampling; the running-mean inner loop is a labelled variant.
  * Per family, every schedule runs on ``num_val_seeds`` validation seeds and
    ``num_seeds`` disjoint test seeds (same keys for every schedule: paired).
  * Per family and eps, the comparison is ``jaxlab.qlearning.compare``'s protocol on the
    unit's per-seed samples to eps (``compare_precomputed``; seeds are the protocol's
    tuning and test items of ``key(config.seed)``): on validation seeds only, the best
    constant K and, per growth power p, the base K_0 (smallest mean samples, runs that
    never reach eps counted at the run length). The grid check flags a best constant at
    either edge of the grid. The summary row's ``comparison`` is that comparison
    (``Comparison.to_dict()`` without seconds): theory - constant and theory - each other
    power with paired bootstrap CIs, and the goal theory < constant.
  * On test seeds: samples to eps of the picked constant and the picked theory
    schedule; ratio = mean(constant) / mean(theory) with a paired percentile bootstrap
    CI (runs that never reach eps are censored at the run length and counted). Also
    reported: the test-oracle constant (picked on the test seeds: optimistic for the
    baseline), log-log slopes of samples vs 1/eps, the growth-exponent sweep, the
    ratio's growth against log((1 - gamma)^-1 eps^-1), and the regime: the share
    ||T^n Q_0 - Q*||_inf / eps of the outer-loop contraction bias at the outer iteration
    n where each run first reaches eps (near 1: bias-dominated; near 0: the
    inner-loop noise (variance) is what the run still has to average out).

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. One unit per (family, inner loop): all (schedule, seed) runs vmapped in
one jitted program, split into chunks through the unit's resumable runner.
"""

import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from jaxlab.core import metrics, protocol, sharding
from jaxlab.qlearning import comparison, periodic_q, runs, schedules
from jaxlab.qlearning import mdp as mdp_lib
from jaxlab.qlearning.value_iteration import value_iteration

from . import common
from .configs import qlearning as configs
from .lib import plots, progress, study
from .lib import scalars as S

_CENSOR_PENALTY = 2.0  # test-oracle ranking: never reached = twice the run length
THEORY = "theory"
CONSTANT = "constant"


class _Carry(NamedTuple):
    states: periodic_q.PeriodicQState
    trace: periodic_q.Trace  # [runs, R] buffers filled chunk by chunk


def family_gamma(config, family: str) -> float:
    return float(config.sparse_gamma if family == "sparse" else config.gamma)


def build_mdp(config: ml_collections.ConfigDict, family: str) -> mdp_lib.TabularMDP:
    """The MDP of ``family`` (garnet, chain, sparse, bernoulli)."""
    key = jax.random.key(config.mdp_seed)
    dims = (config.num_states, config.num_actions, config.branching)
    if family == "garnet":
        return mdp_lib.garnet(key, *dims, config.gamma)
    if family == "chain":
        return mdp_lib.chain(config.chain_states, config.gamma)
    if family == "sparse":
        return mdp_lib.sparse_reward(key, *dims, config.sparse_gamma)
    if family == "bernoulli":
        return mdp_lib.with_bernoulli_rewards(mdp_lib.garnet(key, *dims, config.gamma))
    raise ValueError(f"`family` must be one of garnet, chain, sparse, bernoulli, got {family!r}.")


def constant_grid(config, family: str) -> list[int]:
    """Geometric grid of constant periods (``constant_grid`` times the family's scale)."""
    lo, hi, per = config.constant_grid
    sc = float(config.scale[family])
    n = int(np.floor(np.log2(hi / lo) * per + 1e-9)) + 1
    ks = np.round(lo * sc * 2.0 ** (np.arange(n) / per)).astype(int)
    return sorted(set(int(max(k, 1)) for k in ks))


def seed_keys(config) -> jax.Array:
    """[num_val_seeds + num_seeds] run keys: the protocol's tuning items, then its test
    items (``protocol.item_keys`` of ``key(config.seed)``), so ``jaxlab.qlearning.compare``
    with that key runs the same seeds."""
    key = jax.random.key(config.seed)
    return jnp.concatenate([protocol.item_keys(key, "tuning", np.arange(config.num_val_seeds)),
                            protocol.item_keys(key, "test", np.arange(config.num_seeds))])


def contender_name(power: float) -> str:
    """The comparison's name of the growth schedule with exponent ``power``."""
    return THEORY if abs(power - 2.0 / 3.0) < 1e-9 else f"growth p={power:.3g}"


def build_schedules(config, family: str):
    """(names, kinds, stacked GeometricPeriod): constants, then (p, base) growth runs."""
    # The MDP's float32 discount, as jaxlab.qlearning.growth_contender reads it.
    gamma = float(jnp.float32(family_gamma(config, family)))
    names, kinds, scheds = [], [], []
    for k in constant_grid(config, family):
        names.append(f"constant K={k}")
        kinds.append(("constant", float(k)))
        scheds.append(schedules.constant(k))
    for p in config.growth_powers:
        for b in config.base_grid:
            base = float(b) * float(config.scale[family])
            names.append(f"growth p={p:.3g} K0={base:g}")
            kinds.append((f"p={p:.3g}", base))
            scheds.append(schedules.growth(gamma, p, base))
    return names, kinds, schedules.stack(scheds)


def _step_size(mdp, config, inner_loop: str):
    if inner_loop == "sgd":
        return periodic_q.paper_sgd_step(mdp, config.sampling)
    return schedules.inverse_count_step()


def _validate(config: ml_collections.ConfigDict) -> None:
    configs.validate_config(config)


def _num_samples(config, family):
    return int(round(config.record_every * float(config.scale[family]))) * config.num_records


def _runs(config, family: str, inner_loop: str, ctx: study.Context) -> dict:
    """Every (schedule, seed) run of one family, vmapped; returns the host trace."""
    mdp = build_mdp(config, family)
    q_star = value_iteration(mdp)
    xi = float(periodic_q.sampling_distribution(mdp, config.sampling).min())
    names, _, scheds = build_schedules(config, family)
    n_seeds = config.num_val_seeds + config.num_seeds
    n_sched = len(names)
    step_size = _step_size(mdp, config, inner_loop)
    record_every = int(round(config.record_every * float(config.scale[family])))
    num_runs = n_sched * n_seeds
    r = config.num_records

    @jax.jit
    def setup(mdp, scheds, keys):  # one program, not one per eager op
        run_scheds = jax.tree.map(lambda x: jnp.repeat(x, n_seeds, axis=0), scheds)
        states = jax.vmap(lambda k: periodic_q.init(k, mdp))(jnp.tile(keys, n_sched))
        empty = periodic_q.Trace(*(jnp.zeros((num_runs, r), d)
                                   for d in (jnp.int32, jnp.float32, jnp.float32, jnp.int32)))
        return _Carry(states, empty), run_scheds

    carry, run_scheds = sharding.shard_batch(setup(mdp, scheds, seed_keys(config)),
                                             config.mesh_shape)
    per_chunk = r // config.num_chunks

    @jax.jit
    def chunk(c: _Carry, i, run_scheds, mdp, q_star, step_size) -> _Carry:
        # The public per-seed runner's program (jaxlab.qlearning.simulate_runs), so the
        # per-seed values are the ones jaxlab.qlearning.compare computes for the same keys.
        st, tr = runs.simulate_runs(c.states, mdp, run_scheds, q_star, step_size,
                                          num_records=per_chunk, record_every=record_every,
                                          sampling=config.sampling)
        trace = jax.tree.map(
            lambda buf, new: jax.lax.dynamic_update_slice_in_dim(buf, new, i * per_chunk, 1),
            c.trace, tr)
        return _Carry(st, trace)

    carry = ctx.run_chunks(
        lambda c, i: chunk(c, jnp.int32(i), run_scheds, mdp, q_star, step_size), carry,
        config.num_chunks,
        desc=f"periodic Q-learning {family} {inner_loop}",
        unit="updates", units_per_chunk=num_runs * per_chunk * record_every)
    trace = jax.tree.map(lambda x: x.reshape(n_sched, n_seeds, r), sharding.to_host(carry.trace))
    return {"trace": trace._asdict(), "q_star": q_star, "xi": xi,
            "contraction_bias": _contraction_bias(mdp, q_star, trace.outer_iter.max())}


def _contraction_bias(mdp, q_star, n_max) -> np.ndarray:
    """[n_max + 1] ||T^n Q_0 - Q*||_inf, Q_0 = 0 (the exact outer loop's remaining error;
    the Bellman operator of ``value_iteration.bellman_optimality`` in NumPy, float32 as
    the MDP, so nothing is compiled)."""
    mdp_lib.check_mdp(mdp)
    p, rew, gamma = (np.asarray(x) for x in (mdp.transitions, mdp.rewards, mdp.gamma))
    q_star = np.asarray(q_star)
    q = np.zeros_like(q_star)
    out = [float(np.max(np.abs(q - q_star)))]
    floor = 1e-6 * max(out[0], 1e-12)
    for _ in range(int(n_max)):
        q = rew + gamma * np.einsum("sat,t->sa", p, q.max(-1))
        out.append(float(np.max(np.abs(q - q_star))))
        if out[-1] < floor:
            break
    b = np.zeros(int(n_max) + 1)
    b[:len(out)] = out
    return b


def _unit_list(config):
    units = [(f, config.inner_loop, True) for f in config.families]
    other = "running_mean" if config.inner_loop == "sgd" else "sgd"
    units += [(f, other, False) for f in config.variant_families]
    return units


def _units(config: ml_collections.ConfigDict, workdir: str) -> list[study.Unit]:
    del workdir
    return [study.Unit(f"{f}-{il}", lambda ctx, f=f, il=il: _runs(config, f, il, ctx))
            for f, il, _ in _unit_list(config)]


# ---------------------------------------------------------------- summary

def _hitting(samples, errors, outer, eps):
    """Per run: samples after which errors stay <= eps (inf if never) and the outer
    iteration at that record (-1 if never)."""
    need = np.asarray(periodic_q.samples_to_accuracy(samples, errors, eps), np.float64)
    above = errors > eps
    r = errors.shape[-1]
    last_above = np.where(above.any(-1), r - 1 - np.argmax(above[..., ::-1], axis=-1), -1)
    first_ok = last_above + 1
    n = np.where(first_ok < r, np.take_along_axis(
        outer, np.minimum(first_ok, r - 1)[..., None], -1)[..., 0], -1)
    return need, n


def _censored(x, t_max):
    return np.where(np.isfinite(x), x, t_max)


def comparison_dict(cmp: protocol.Comparison) -> dict:
    """``cmp.to_dict()`` without the compile / run seconds (summary.json stays
    byte-identical across reruns)."""
    return cmp.to_dict(seconds=False)


def compare_precomputed(config, problem, grids, need, schedule_index, metric):
    """``jaxlab.qlearning.compare`` on the unit's runs, for ``metric`` (one of
    ``problem.metric_names``): each contender's ``run`` returns the samples to that eps its
    schedule reached on the requested seeds (``need``: [schedules, num_val_seeds +
    num_seeds], tuning seeds first), so the tuning, the censoring, the CIs and the goal are
    the public function's on the same per-seed values."""

    def contender(name, grid):
        def run(items, problem, **params):
            del problem
            return need[schedule_index(name, params), items.positions]
        return protocol.Contender(run, grid)

    return comparison.compare(
        jax.random.key(config.seed), problem,
        contenders={n: contender(n, g) for n, g in grids.items()},
        tuning=config.num_val_seeds, seeds=config.num_seeds, metrics=(metric,),
        resamples=config.bootstrap_resamples, progress=progress.comparison_reporter())


def _family_summary(config, family, inner_loop, res, key) -> dict:
    names, kinds, _ = build_schedules(config, family)
    tr = periodic_q.Trace(**res["trace"])
    q_star = np.asarray(res["q_star"])
    gamma = family_gamma(config, family)
    scale = float(np.abs(q_star).max())
    samples = tr.samples[0, 0].astype(np.float64)
    t_max = float(samples[-1])
    n_val = config.num_val_seeds
    is_const = np.array([k[0] == "constant" for k in kinds])
    const_idx = np.flatnonzero(is_const)
    powers = list(dict.fromkeys(k[0] for k in kinds if k[0] != "constant"))
    theory_kind = f"p={2.0 / 3.0:.3g}"
    bias = np.asarray(res["contraction_bias"])
    eps_abs = [float(e) * scale for e in config.eps_rel]

    need_all, outer_all = [], []
    for eps in eps_abs:
        need, n = _hitting(samples, tr.target_error, tr.outer_iter, eps)
        need_all.append(need)
        outer_all.append(n)
    need_all = np.stack(need_all)  # [E, sched, seeds]
    outer_all = np.stack(outer_all)
    test = need_all[..., n_val:]
    # The runs' record grid (samples[-1] = num_records * record_every samples): censored
    # runs count as the run length.
    problem = runs.problem(build_mdp(config, family), eps_rel=tuple(config.eps_rel),
                           num_records=samples.size,
                           record_every=int(round(t_max / samples.size)),
                           sampling=config.sampling, inner_loop=inner_loop, q_star=q_star)
    # The comparison's contenders: the theory schedule, the constant periods, the other
    # growth exponents, each with the declared grid of jaxlab.qlearning's public contenders.
    grids = {contender_name(p): comparison.growth_contender(
        p, [float(b) * float(config.scale[family]) for b in config.base_grid]).grid
        for p in config.growth_powers}
    grids[CONSTANT] = comparison.constant_contender(constant_grid(config, family)).grid
    order = [n for n in (THEORY, CONSTANT) if n in grids] + [
        n for n in grids if n not in (THEORY, CONSTANT)]
    grids = {n: grids[n] for n in order}
    power_kind = {contender_name(p): f"p={p:.3g}" for p in config.growth_powers}

    def schedule_index(name, params):
        kind = (("constant", float(params["period"])) if name == CONSTANT
                else (power_kind[name], float(params["base"])))
        return kinds.index(kind)

    comparisons = [compare_precomputed(config, problem, grids, need_all[e], schedule_index,
                                       metric)
                   for e, metric in enumerate(problem.metric_names)]

    picked = {power_kind[n]: [schedule_index(n, c.contenders[n].params) for c in comparisons]
              for n in grids if n != CONSTANT}
    theory_j = picked.get(theory_kind)
    # A picked K_0 at either end of base_grid (with > 1 base) is flagged like the constant.
    base_edge = [pk for pk in powers if len(config.base_grid) > 1 and any(
        kinds[j][1] in (min(k[1] for k in kinds if k[0] == pk),
                        max(k[1] for k in kinds if k[0] == pk)) for j in picked[pk])]

    rows, bc_test, th_test = [], [], []
    for e, eps in enumerate(eps_abs):
        cmp = comparisons[e]
        jc = schedule_index(CONSTANT, cmp.contenders[CONSTANT].params)
        pos = int(np.flatnonzero(const_idx == jc)[0])
        oracle_scores = np.where(np.isfinite(test[e, const_idx]), test[e, const_idx],
                                 _CENSOR_PENALTY * t_max).mean(-1)
        jo = int(const_idx[np.argmin(oracle_scores)])
        row = {"eps_rel": float(config.eps_rel[e]), "eps": eps,
               "best_constant_val": names[jc],
               "best_constant_at_grid_edge": pos in (0, len(const_idx) - 1),
               "best_constant_test_oracle": names[jo]}
        c = _censored(test[e, jc], t_max)
        row["constant_samples"] = _mean_ci(c)
        row["constant_reached"] = float(np.isfinite(test[e, jc]).mean())
        bc_test.append(c.mean())
        if theory_j is not None:
            tj = theory_j[e]
            t = _censored(test[e, tj], t_max)
            row["theory"] = names[tj]
            row["theory_samples"] = _mean_ci(t)
            row["theory_reached"] = float(np.isfinite(test[e, tj]).mean())
            th_test.append(t.mean())
            k = jax.random.fold_in(key, e)
            pt, lo, hi = metrics.bootstrap_ci(k, lambda a, b: a.mean() / b.mean(),
                                              (c, t), config.bootstrap_resamples)
            row["ratio"] = {"value": pt, "ci95": [lo, hi]}
            o = _censored(test[e, jo], t_max)
            pt, lo, hi = metrics.bootstrap_ci(jax.random.fold_in(k, 1),
                                              lambda a, b: a.mean() / b.mean(),
                                              (o, t), config.bootstrap_resamples)
            row["ratio_test_oracle_constant"] = {"value": pt, "ci95": [lo, hi]}
            row["log_factor"] = float(np.log(1.0 / ((1.0 - gamma) * eps)))
            row["bias_share"] = {nm: _bias_share(bias, outer_all[e, j, n_val:], eps)
                                 for nm, j in (("theory", tj), ("constant", jc))}
        row["growth_sweep"] = {
            pk: {"schedule": names[js[e]], **_mean_ci(_censored(test[e, js[e]], t_max)),
                 "reached": float(np.isfinite(test[e, js[e]]).mean())}
            for pk, js in picked.items()}
        row["comparison"] = comparison_dict(cmp)
        rows.append(row)

    inv_eps = 1.0 / np.asarray(eps_abs)
    out = {"family": family, "inner_loop": inner_loop, "gamma": gamma, "xi": res["xi"],
           "q_star_max": scale, "samples_per_run": t_max,
           "samples_per_record": t_max / config.num_records, "schedules": names, "rows": rows,
           "final_target_error_mean": {n: float(tr.target_error[j, :, -1].mean())
                                       for j, n in enumerate(names)}}
    ok_c = np.asarray([r["constant_reached"] == 1.0 for r in rows])
    out["slope_samples_vs_inv_eps"] = {
        "best_constant": _slope(inv_eps[ok_c], np.asarray(bc_test)[ok_c]),
        **{pk: _slope(inv_eps[np.asarray([r["growth_sweep"][pk]["reached"] == 1.0
                                          for r in rows])],
                      np.asarray([r["growth_sweep"][pk]["mean"] for r in rows])[np.asarray(
                          [r["growth_sweep"][pk]["reached"] == 1.0 for r in rows])])
           for pk in powers}}
    if theory_j is not None:
        # Fitted on the eps where the picked constant and the theory schedule reached eps
        # on every test seed (censored ratios are bounded by the run length, not measured).
        full = np.asarray([r["constant_reached"] == 1.0 and r["theory_reached"] == 1.0
                           for r in rows])
        ratio = np.asarray([r["ratio"]["value"] for r in rows])[full]
        lf = np.asarray([r["log_factor"] for r in rows])[full]
        n_ok = int(full.sum())
        out["ratio_growth"] = {
            "eps_rel_used": [r["eps_rel"] for r, f in zip(rows, full, strict=True) if f],
            "ratio_slope_vs_inv_eps": _slope(inv_eps[full], ratio),
            "log_factor_slope_vs_inv_eps": _slope(inv_eps[full], lf),
            "ratio_last_over_first": float(ratio[-1] / ratio[0]) if n_ok else float("nan"),
            "log_factor_last_over_first": float(lf[-1] / lf[0]) if n_ok else float("nan"),
        }
    out["grid_edge_flags"] = [r["eps_rel"] for r in rows if r["best_constant_at_grid_edge"]]
    out["base_grid_edge_flags"] = base_edge
    return out


def _mean_ci(x):
    m, hw = metrics.mean_and_ci(np.asarray(x, np.float64))
    return {"mean": float(m), "ci95": float(hw)}


def _slope(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    good = np.isfinite(y) & (y > 0)
    return metrics.loglog_slope(x[good], y[good]) if good.sum() >= 2 else float("nan")


def _bias_share(bias, outer, eps):
    """Median over runs that reached eps of ||T^n Q_0 - Q*||_inf / eps at their hitting n."""
    n = outer[outer >= 0]
    if n.size == 0:
        return float("nan")
    return float(np.median(bias[np.minimum(n, bias.size - 1)] / eps))


def _summarize(config, out) -> dict:
    key = jax.random.key(config.seed + 7)
    fams = []
    for i, (f, il, headline) in enumerate(_unit_list(config)):
        s = _family_summary(config, f, il, out[f"{f}-{il}"], jax.random.fold_in(key, i))
        s["headline"] = headline
        fams.append(s)
        for r in s["rows"]:
            if "ratio" in r:
                logging.info("%s/%s eps=%.3g: %s %.4g vs %s %.4g, ratio %.2f [%.2f, %.2f]%s",
                             f, il, r["eps"], r["best_constant_val"],
                             r["constant_samples"]["mean"], r["theory"],
                             r["theory_samples"]["mean"], r["ratio"]["value"],
                             *r["ratio"]["ci95"],
                             " (best constant at the grid edge)"
                             if r["best_constant_at_grid_edge"] else "")
    return {"config": config.to_dict(), "families": fams}


# ---------------------------------------------------------------- plots

def _plot(config, summary, out, workdir):
    fams = summary["families"]
    fig, axes = plots.figure(len(fams), width=4.2)
    for ax, s in zip(axes, fams, strict=True):
        inv = 1.0 / np.asarray([r["eps"] for r in s["rows"]])
        m = np.asarray([r["constant_samples"]["mean"] for r in s["rows"]])
        hw = np.asarray([r["constant_samples"]["ci95"] for r in s["rows"]])
        plots.line_with_band(ax, inv, m, hw, label="best constant (val-picked)", marker="o")
        for pk in s["rows"][0]["growth_sweep"]:
            g = [r["growth_sweep"][pk] for r in s["rows"]]
            plots.line_with_band(ax, inv, [x["mean"] for x in g], [x["ci95"] for x in g],
                                 label=f"growth {pk}" + (" (theory)" if pk == "p=0.667"
                                                         else ""), ls="--", marker="s")
        ax.set(xscale="log", yscale="log", xlabel="1 / eps", ylabel="samples to eps",
               title=f"{s['family']} ({s['inner_loop']}, gamma={s['gamma']:g})")
        ax.legend(fontsize=7)
    n_test = config.num_seeds
    plots.save(fig, os.path.join(workdir, "samples_to_eps.png"),
               caption=plots.t_band(n_test, "test seeds") + " Runs that never reach eps "
               f"count as the run length. Picks made on {config.num_val_seeds} validation seeds.")

    fig, axes = plots.figure(len(fams), width=4.2)
    for ax, s in zip(axes, fams, strict=True):
        if "ratio_growth" not in s:
            continue
        inv = 1.0 / np.asarray([r["eps"] for r in s["rows"]])
        ratio = np.asarray([r["ratio"]["value"] for r in s["rows"]])
        ci = np.asarray([r["ratio"]["ci95"] for r in s["rows"]])
        ax.errorbar(inv, ratio, yerr=[ratio - ci[:, 0], ci[:, 1] - ratio], marker="o",
                    capsize=3, label="best constant / theory")
        cens = np.asarray([min(r["constant_reached"], r["theory_reached"]) < 1.0
                           for r in s["rows"]])
        if cens.any():
            ax.plot(inv[cens], ratio[cens], "rx", ms=10, label="censored (some runs never "
                    "reached eps)")
        lf = np.asarray([r["log_factor"] for r in s["rows"]])
        ax.plot(inv, ratio[0] * lf / lf[0], "k:", label="log factor (scaled to 1st point)")
        ax.set(xscale="log", yscale="log", xlabel="1 / eps", ylabel="samples ratio",
               title=f"{s['family']} ({s['inner_loop']})")
        ax.legend(fontsize=7)
    plots.save(fig, os.path.join(workdir, "ratio_vs_eps.png"),
               caption=f"Ratio of mean samples to eps over {n_test} test seeds; bars: 95% "
               f"paired percentile bootstrap ({config.bootstrap_resamples} resamples).")


def _record_step(summary: dict, family: dict) -> float | None:
    """Samples between two record points of a family's runs (None when the summary does
    not say)."""
    if family.get("samples_per_record"):
        return float(family["samples_per_record"])
    records = ((summary.get("provenance") or {}).get("config") or {}).get("num_records")
    return float(family["samples_per_run"]) / records if records else None


def ratio_text(row: dict, step: float | None) -> str:
    """A row's ratio best constant / theory as "2.50x [2.10, 3.00]"; when the record grid
    (``step`` samples apart) is what resolves it -- a CI of zero width (every test seed
    crossed at the same record points) or a schedule that crossed at the first record --
    the bounds the grid allows instead: the hitting times are record points, each at most
    ``step`` samples after the true crossing."""
    v, (lo, hi) = row["ratio"]["value"], row["ratio"]["ci95"]
    c, t = row["constant_samples"]["mean"], row["theory_samples"]["mean"]
    first = step is not None and min(c, t) <= step * (1 + 1e-9)
    if hi - lo > 1e-9 * max(abs(v), 1.0) and not first:
        return f"{v:.2f}x [{lo:.2f}, {hi:.2f}]"
    if step is None:
        return f"{v:.2f}x on the record grid (resolution: record grid; the CI has zero width)"
    low = max(c - step, 0.0) / t
    bound = (f"ratio >= {low:.2f}" if t <= step * (1 + 1e-9)
             else f"ratio in [{low:.2f}, {c / (t - step):.2f}]")
    return (f"{v:.2f}x on the record grid (resolution: record grid, every {step:g} samples; "
            f"{bound})")


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for results/REPORT.md."""
    rows = []
    for s in summary["families"]:
        tag = f"{s['family']} ({s['inner_loop']}{'' if s['headline'] else ', variant'})"
        for r in s["rows"]:
            if "ratio" not in r:
                continue
            edge = ", best K at grid edge" if r["best_constant_at_grid_edge"] else ""
            if min(r["constant_reached"], r["theory_reached"]) < 1.0:
                edge += (f", censored: reached {r['constant_reached']:.0%} / "
                         f"{r['theory_reached']:.0%} of test runs")
            rows.append((f"{tag} samples to eps={r['eps_rel']:g} ||Q*||: best constant / theory",
                         f"{ratio_text(r, _record_step(summary, s))} "
                         f"({r['best_constant_val']} vs {r['theory']}{edge})"))
        goals = [(r["eps_rel"], g) for r in s["rows"]
                 for g in (r.get("comparison") or {}).get("goals", ())]
        if goals:
            rows.append((f"{tag} declared goal: {goals[0][1]['a']} needs fewer samples than "
                         f"the best {goals[0][1]['b']} (paired difference of mean samples, "
                         "95% CI over test seeds), per eps ||Q*||",
                         "; ".join(f"{e:g}: {'met' if g['met'] else 'not met'} "
                                   f"({-g['difference']:+.4g} [{-g['ci'][1]:+.4g}, "
                                   f"{-g['ci'][0]:+.4g}])" for e, g in goals)))
        sl = s["slope_samples_vs_inv_eps"]
        rows.append((f"{tag} slope of samples vs 1/eps (best constant, theory)",
                     f"{sl['best_constant']:.2f}, {sl.get('p=0.667', float('nan')):.2f}"))
        if "ratio_growth" in s:
            g = s["ratio_growth"]
            used = g.get("eps_rel_used", [])
            rows.append((f"{tag} growth of the ratio vs the theory's log((1-gamma)^-1 eps^-1) "
                         "factor over the uncensored eps "
                         f"({'/'.join(f'{e:g}' for e in used) or 'none'}): log-log exponent in "
                         "1/eps; last / first eps",
                         f"{g['ratio_slope_vs_inv_eps']:.2f} vs "
                         f"{g['log_factor_slope_vs_inv_eps']:.2f}; "
                         f"{g['ratio_last_over_first']:.2f}x vs "
                         f"{g['log_factor_last_over_first']:.2f}x"))
            last = _last_uncensored(s["rows"])
            if last is not None:
                sh = last["bias_share"]
                rows.append((f"{tag} regime at eps={last['eps_rel']:g} ||Q*||: contraction-bias "
                             "share of eps (theory; best constant)",
                             f"{_regime(sh['theory'])}; {_regime(sh['constant'])}"))
        sweep = _growth_sweep_row(s)
        if sweep is not None:
            rows.append((f"{tag} growth sweep K_n = K_0 gamma^(-p n) (K_0 picked on validation "
                         "seeds): samples to eps relative to p=2/3 at eps=" + sweep[0], sweep[1]))
        if s.get("base_grid_edge_flags"):
            rows.append((f"{tag} K_0 picked at an end of base_grid (powers)",
                         ", ".join(s["base_grid_edge_flags"])))
    return rows


def _regime(share) -> str:
    """Names the regime from the contraction-bias share ||T^n Q_0 - Q*||_inf / eps at the
    hitting iteration: >= 0.7 bias-dominated, <= 0.3 variance-dominated, else mixed."""
    if share is None or not np.isfinite(share):
        return "n/a"
    kind = ("bias-dominated" if share >= 0.7 else "variance-dominated" if share <= 0.3
            else "mixed")
    return f"{kind} ({share:.2f})"


def _last_uncensored(rows):
    """The smallest-eps row where the picked constant and the theory schedule reached eps
    on every test seed (None if there is none)."""
    ok = [r for r in rows if "ratio" in r and r["constant_reached"] == 1.0
          and r["theory_reached"] == 1.0]
    return ok[-1] if ok else None


def _growth_sweep_row(s):
    """(eps label, text) for the growth-exponent sweep at the smallest eps where every
    power reached eps on every test seed; None with fewer than two powers."""
    powers = list(s["rows"][0]["growth_sweep"])
    if len(powers) < 2 or "p=0.667" not in powers:
        return None
    ok = [r for r in s["rows"] if all(g["reached"] == 1.0 for g in r["growth_sweep"].values())]
    if not ok:
        return None
    r = ok[-1]
    ref = r["growth_sweep"]["p=0.667"]["mean"]
    return (f"{r['eps_rel']:g} ||Q*||", ", ".join(
        f"{pk} {g['mean'] / ref:.2f}x" for pk, g in r["growth_sweep"].items()))


# ------------------------------------------------------------------ TensorBoard series


def tb_scalars(config, unit, result, workdir):
    """TensorBoard series of a unit (``study.Experiment.scalars``; module docstring of
    ``experiments.lib.scalars``)."""
    del workdir
    trace = result.get("trace") if isinstance(result, dict) else None
    if not trace:
        return {}
    q = np.asarray(trace["q_error"])  # [schedules, seeds, records]
    r = q.shape[-1]
    q = q.reshape(q.shape[0], -1, r)
    names = None
    if config is not None:
        try:
            names = build_schedules(config, unit.rsplit("-", 1)[0])[0]
        except Exception as e:  # noqa: BLE001 - names only
            logging.info("qlearning scalars: schedule names unavailable (%s)", e)
    names = S.run_names(names, q.shape[0], "schedule")
    samples = np.asarray(trace["samples"]).reshape(q.shape[0], -1, r)
    out = {}
    for i, name in enumerate(names):
        steps = samples[i, 0]
        for field in ("q_error", "target_error", "outer_iter"):
            if field in trace:
                vals = np.asarray(trace[field]).reshape(q.shape[0], -1, r)[i]
                out[(name, f"qlearning/{field}")] = (steps, S.mean(vals, 0))
    return out


CAPTION = ("Samples to reach ||Q - Q*||_inf <= eps: the best constant period over the growing "
           "(theory) schedule, paired bootstrap 95% CIs over test seeds; a ratio above 1 means "
           "the growing schedule needs fewer samples.")

EXPERIMENT = study.Experiment(name="qlearning", validate=_validate, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline,
                              scalars=tb_scalars, caption=CAPTION)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/qlearning.py:quick")
