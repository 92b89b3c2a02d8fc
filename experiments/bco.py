"""Gradient-variation bandit convex optimization: regret vs T, d and V_T, variants, baselines.

  python -m experiments.bco --config=experiments/configs/bco.py:quick --workdir=results/bco

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. Six units (``vs_dim``, ``vs_rounds``, ``vs_variation``, ``variants``,
``dynamic``, ``one_point``), each a fixed-shape float32 array of per-seed final regrets;
all (learner, seed) runs of a unit are vmapped over seeds inside one jitted scan, and a
finished unit is never recomputed when the run is resumed.
"""

import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from experiments import common
from experiments.lib import plots, study
from jaxlab.bco import domains, ensembles, learners, losses
from jaxlab.bco.run import dynamic_regret, regret, run
from jaxlab.core import metrics, sharding

TWO_POINT = {
    "gradient_variation (ours)": learners.gradient_variation,
    "chiang2013 (anchor)": learners.chiang2013,
    "agarwal2010 (plain OGD)": learners.agarwal2010,
}


def _final_regrets(make_learner, make_seq, domain, keys, params, horizons=None,
                   dynamic=False) -> np.ndarray:
    """Per-seed regrets for every value of a sequence parameter, in one jitted call.

    Args:
      make_learner: () -> a bandit learner (``Algorithm``).
      make_seq: (key, param) -> loss sequence; ``param`` is traced (vmapped).
      domain: the comparator's domain.
      keys: [S] seeds.
      params: [P] parameter values.
      horizons: optional prefix lengths; then the result is [P, H, S].
      dynamic: regret against per-round minimisers.

    Returns:
      [P, S] final regrets (or [P, H, S]).
    """
    learner = make_learner()

    def one(k, p):
        k_seq, k_run = jax.random.split(k)
        seq = make_seq(k_seq, p)
        info = run(learner, k_run, seq, domain.center)
        r = dynamic_regret(info, seq, domain) if dynamic else regret(info, seq, domain)
        return r[-1] if horizons is None else r[jnp.asarray(horizons) - 1]

    out = jax.jit(jax.vmap(jax.vmap(one, (0, None)), (None, 0)))(keys, jnp.asarray(params))
    out = sharding.to_host(out)
    return out if horizons is None else np.moveaxis(out, 1, 2)


def _validate(config: ml_collections.ConfigDict) -> None:
    learners.validate_config(config)


def _units(c: ml_collections.ConfigDict, workdir: str) -> list[study.Unit]:
    """The six studies; each returns a float32 array of per-seed final regrets:
    vs_dim [3, dims, S], vs_rounds [3, horizons, S], vs_variation [3, amplitudes, S],
    variants [3, curvatures, S], dynamic [2, switch_periods, S],
    one_point [2, one_point_drifts, S]."""
    del workdir
    delta = c.delta
    n2 = len(TWO_POINT)
    quad = losses.stochastic_quadratic

    def seeds():
        return sharding.shard_batch(jax.random.split(jax.random.key(c.seed), c.num_seeds),
                                    c.mesh_shape)

    def vs_dim():
        keys = seeds()
        out = np.zeros((n2, len(c.dims), c.num_seeds), np.float32)
        for j, d in enumerate(c.dims):
            dom = domains.ball(d)
            for i, mk in enumerate(TWO_POINT.values()):
                out[i, j] = _final_regrets(lambda mk=mk, dom=dom: mk(dom, delta),
                                           lambda k, s, d=d: quad(k, c.num_rounds, d, s),
                                           dom, keys, [c.sigma])[0]
        return out

    def vs_rounds():
        keys = seeds()
        dom = domains.ball(c.dim)
        return np.stack([
            _final_regrets(lambda mk=mk: mk(dom, delta),
                           lambda k, s: quad(k, max(c.horizons), c.dim, s),
                           dom, keys, [c.sigma], horizons=c.horizons)[0]
            for mk in TWO_POINT.values()])

    def vs_variation():
        keys = seeds()
        dom = domains.ball(c.dim)
        seq = lambda k, a: losses.switching_quadratic(  # noqa: E731
            k, c.num_rounds, c.dim, 1, radius=a, offset=0.3)
        return np.stack([_final_regrets(lambda mk=mk: mk(dom, delta), seq, dom, keys,
                                        c.amplitudes) for mk in TWO_POINT.values()])

    def variants():
        """Rows: convex ours, sc ours (lam = largest curvature), universal; cols: curvatures."""
        keys = seeds()
        dom = domains.ball(c.dim)
        makers = [lambda: learners.gradient_variation(dom, delta),
                  lambda: learners.gradient_variation(
                      dom, delta, learners.step_rule(lam=c.curvatures[-1])),
                  lambda: ensembles.universal_ensemble(dom, delta)]
        seq = lambda k, a: quad(k, c.num_rounds, c.dim, c.sigma, curvature=a)  # noqa: E731
        return np.stack([_final_regrets(mk, seq, dom, keys, c.curvatures) for mk in makers])

    def dynamic():
        keys = seeds()
        dom = domains.ball(c.dim)
        makers = [lambda: learners.gradient_variation(dom, delta),
                  lambda: ensembles.dynamic_ensemble(dom, delta, c.num_rounds)]
        seq = lambda k, per: losses.switching_quadratic(k, c.num_rounds, c.dim, per)  # noqa: E731
        return np.stack([_final_regrets(mk, seq, dom, keys, c.switch_periods, dynamic=True)
                         for mk in makers])

    def one_point():
        keys = seeds()
        d = c.one_point_dim
        dom = domains.box(-np.ones(d), np.ones(d))
        rule = learners.step_rule(float(dom.diameter))
        makers = [lambda: learners.one_point_box(dom, c.one_point_delta, rule, hint="ema"),
                  lambda: learners.one_point_box(dom, c.one_point_delta, rule, hint="none")]
        seq = lambda k, w: losses.drifting_linear(k, c.one_point_rounds, d, w)  # noqa: E731
        return np.stack([_final_regrets(mk, seq, dom, keys, c.one_point_drifts)
                         for mk in makers])

    studies = [vs_dim, vs_rounds, vs_variation, variants, dynamic, one_point]
    return [study.Unit(fn.__name__, lambda ctx, fn=fn: np.asarray(fn(), np.float32))
            for fn in studies]


def _stats(arr):
    m, hw = metrics.mean_and_ci(arr, axis=-1)
    return {"mean": m.tolist(), "ci95": hw.tolist()}


def _variation_values(c):
    seqs = [losses.switching_quadratic(jax.random.key(0), c.num_rounds, c.dim, 1, radius=a,
                                       offset=0.3) for a in c.amplitudes]
    return [float(losses.gradient_variation(s)) for s in seqs]


def _summarize(c, out) -> dict:
    lnames = list(TWO_POINT)
    v_t = _variation_values(c)
    s = {"config": c.to_dict(), "learners": lnames, "V_T": v_t}
    s["regret_vs_dim"] = {n: _stats(out["vs_dim"][i]) for i, n in enumerate(lnames)}
    s["regret_vs_rounds"] = {n: _stats(out["vs_rounds"][i]) for i, n in enumerate(lnames)}
    s["regret_vs_variation"] = {n: _stats(out["vs_variation"][i]) for i, n in enumerate(lnames)}

    def slope(x, arr):
        y = arr.mean(-1)
        ok = y > 0
        return metrics.loglog_slope(np.asarray(x)[ok], y[ok]) if ok.sum() >= 2 else float("nan")

    s["slope_vs_dim"] = {n: slope(c.dims, out["vs_dim"][i]) for i, n in enumerate(lnames)}
    s["slope_vs_rounds"] = {n: slope(c.horizons, out["vs_rounds"][i])
                            for i, n in enumerate(lnames)}
    pos = np.asarray(v_t) > 0
    s["slope_vs_variation"] = {
        n: slope(np.asarray(v_t)[pos], out["vs_variation"][i][pos]) for i, n in enumerate(lnames)}
    vnames = ["convex (ours)", f"strongly convex lam={c.curvatures[-1]:g} (ours)", "universal"]
    s["variants"] = {"curvatures": list(c.curvatures),
                     **{n: _stats(out["variants"][i]) for i, n in enumerate(vnames)}}
    s["dynamic"] = {"switch_periods": list(c.switch_periods),
                    "single learner": _stats(out["dynamic"][0]),
                    "dynamic ensemble": _stats(out["dynamic"][1])}
    s["one_point"] = {"drifts": list(c.one_point_drifts),
                      "gradient-variation hint (ema)": _stats(out["one_point"][0]),
                      "no hint": _stats(out["one_point"][1])}
    for n in lnames:
        logging.info("%s: slope vs d %.2f, vs T %.2f, vs V_T %.2f", n, s["slope_vs_dim"][n],
                     s["slope_vs_rounds"][n], s["slope_vs_variation"][n])
    return s


def _plot(c, s, out, workdir):
    del out
    v_t = s["V_T"]
    fig, axes = plots.figure(3)
    for key, x, ax, xl in [("regret_vs_dim", c.dims, axes[0], "dimension d"),
                           ("regret_vs_rounds", c.horizons, axes[1], "rounds T"),
                           ("regret_vs_variation", v_t, axes[2],
                            "gradient variation V_T (V_T = 0 drawn at 0.1)")]:
        x = np.maximum(np.asarray(x, np.float64), 0.1)
        for n in s["learners"]:
            plots.line_with_band(ax, x, s[key][n]["mean"], s[key][n]["ci95"], label=n,
                                 marker="o")
        ax.set(xlabel=xl, ylabel="regret", xscale="log", yscale="log")
    axes[0].legend(fontsize=7)
    axes[0].set_title(f"stochastic quadratics, T={c.num_rounds}")
    axes[1].set_title(f"d={c.dim}")
    axes[2].set_title(f"alternating quadratics, d={c.dim}, T={c.num_rounds}")
    plots.save(fig, os.path.join(workdir, "regret_scaling.png"),
               caption=plots.t_band(c.num_seeds))

    fig, axes = plots.figure(3)
    v = s["variants"]
    for n in [k for k in v if k != "curvatures"]:
        plots.line_with_band(axes[0], c.curvatures, v[n]["mean"], v[n]["ci95"], label=n,
                             marker="o")
    axes[0].set(xlabel="curvature (strong convexity)", ylabel="regret", xscale="log",
                title="convex / strongly convex / universal")
    axes[0].legend(fontsize=7)
    for n in ["single learner", "dynamic ensemble"]:
        plots.line_with_band(axes[1], c.switch_periods, s["dynamic"][n]["mean"],
                             s["dynamic"][n]["ci95"], label=n, marker="o")
    axes[1].set(xlabel="switch period", ylabel="dynamic regret", xscale="log",
                title="switching quadratics")
    axes[1].legend(fontsize=7)
    for n in ["gradient-variation hint (ema)", "no hint"]:
        plots.line_with_band(axes[2], np.asarray(c.one_point_drifts) + 1e-4,
                             s["one_point"][n]["mean"], s["one_point"][n]["ci95"], label=n,
                             marker="o")
    axes[2].set(xlabel="drift of theta (rad/round, +1e-4)", ylabel="regret", xscale="log",
                title=f"one-point linear, box d={c.one_point_dim}")
    axes[2].legend(fontsize=7)
    plots.save(fig, os.path.join(workdir, "variants.png"), caption=plots.t_band(c.num_seeds))


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for results/REPORT.md."""
    rows = []
    for n in summary["learners"]:
        rows.append((f"{n}: log-log slope of regret vs d / vs T / vs V_T",
                     f"{summary['slope_vs_dim'][n]:.2f} / {summary['slope_vs_rounds'][n]:.2f} / "
                     f"{summary['slope_vs_variation'][n]:.2f}"))
    dims = summary["config"]["dims"]
    for n in summary["learners"]:
        r = summary["regret_vs_dim"][n]
        rows.append((f"{n}: regret at d={dims[-1]}",
                     f"{r['mean'][-1]:.1f} +- {r['ci95'][-1]:.1f}"))
    v = summary["variants"]
    rows.append((f"regret at curvature {v['curvatures'][-1]:g}: convex / strongly convex / "
                 "universal",
                 " / ".join(f"{v[k]['mean'][-1]:.1f}" for k in v if k != "curvatures")))
    dyn = summary["dynamic"]
    rows.append(("dynamic regret (shortest switch period): single vs ensemble",
                 f"{dyn['single learner']['mean'][0]:.1f} vs "
                 f"{dyn['dynamic ensemble']['mean'][0]:.1f}"))
    op = summary["one_point"]
    rows.append(("one-point linear regret (max drift): ema hint vs none",
                 f"{op['gradient-variation hint (ema)']['mean'][-1]:.0f} vs "
                 f"{op['no hint']['mean'][-1]:.0f}"))
    return rows


EXPERIMENT = study.Experiment(name="bco", validate=_validate, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/bco.py:quick")
