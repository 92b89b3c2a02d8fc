"""Gradient-variation bandit convex optimization: regret vs T, d and V_T, variants, baselines.

  python -m experiments.bco --config=experiments/configs/bco.py:quick --workdir=results/bco

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. Eight units (``vs_dim``, ``vs_rounds``, ``vs_variation``, ``families``,
``variation``, ``variants``, ``dynamic``, ``one_point``), each a fixed-shape float32
array; all (learner, seed) runs of a unit are vmapped inside one jitted scan, and a
finished unit is never recomputed when the run is resumed.

Declared before the runs:
  * ``vs_dim``: optimistic two-point OGD (ours) and plain two-point OGD (agarwal2010), each
    at every step multiplier of ``config.step_grid`` (times the default scale D) and at
    1/sqrt(d) (the ``ogd_sqrt_d_step`` control), through the public per-seed runner
    ``jaxlab.bco.final_regrets`` on the protocol's item keys of ``key(config.seed)``
    (``config.num_val_seeds`` tuning problems, ``config.num_seeds`` test problems). Per d,
    the multipliers are chosen and the paired differences (same test problems, same
    directions) get bootstrap CIs through ``jaxlab.bco.compare`` on those per-seed regrets
    (``compare_precomputed``; the summary's ``comparison``, without seconds, is its
    ``to_dict()``). Slopes vs d are fitted on the tuned learners only. Controls: plain OGD
    at 1/sqrt(2) (the constant by which S_t ~ 2 sum ||g_s||^2 exceeds the plain
    accumulator), a d-independent x 1/4, and 1/sqrt(d).
  * ``families``: the same tuned protocol on the new smooth families (log-sum-exp, Huber,
    softplus + quadratic; ``FAMILIES``) at ``config.family_dims``; regret against the
    numerical best fixed point (``losses.fixed_comparator_loss``).
  * ``variation``: S_T = sum ||g~_t - g~_{t-1}||^2 of the optimistic learner against the
    true V_T (switching quadratics with period 1) over d and V_T, with the refined (slope 1
    in d) and worst-case (slope 2) predictions of ``jaxlab.bco.variation``.
  * ``dynamic`` (meta-learners; MsMwC declared before its first run):
    the dynamic ensemble (dynamic regret) and the universal ensemble (static regret) with
    Hedge, optimistic Hedge and MsMwC (``jaxlab.bco.msmwc``) on switching quadratics at
    every ``config.switch_periods``, default rates, no tuning; paired differences
    (optimistic Hedge - Hedge, MsMwC - Hedge; same problems and directions) with bootstrap
    CIs over ``config.num_seeds`` test problems.
"""

import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from jaxlab.bco import comparison, domains, ensembles, learners, losses, regrets, variation
from jaxlab.bco.run import dynamic_regret, regret, run
from jaxlab.core import metrics, protocol, sharding

from . import common
from .configs import bco as configs
from .lib import plots, progress, study
from .lib import scalars as S

TWO_POINT = {
    "gradient_variation (ours)": learners.gradient_variation,
    "ogd_sqrt_d_step (control; not Chiang 2013)": learners.ogd_sqrt_d_step,
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
    out = jax.jit(_regrets_fn(make_learner(), make_seq, domain, horizons, dynamic))(
        keys, jnp.asarray(params))
    out = sharding.to_host(out)
    return out if horizons is None else np.moveaxis(out, -2, -1)


def _regrets_fn(learner, make_seq, domain, horizons=None, dynamic=False):
    """``f(keys, params) -> [P, S]`` (or [P, S, H]) final regrets of ``learner``, unjitted
    (see ``_final_regrets``)."""
    def f(keys, params):
        def one(k, p):
            k_seq, k_run = jax.random.split(k)
            seq = make_seq(k_seq, p)
            info = run(k_run, learner, seq, domain.center)
            r = dynamic_regret(info, seq, domain) if dynamic else regret(info, seq, domain)
            return r[-1] if horizons is None else r[jnp.asarray(horizons) - 1]

        return jax.vmap(jax.vmap(one, (0, None)), (None, 0))(keys, params)

    return f


def _two_point_regrets(dom, delta, make_seq, keys, params, horizons=None) -> np.ndarray:
    """``_final_regrets`` of every ``TWO_POINT`` learner, stacked ([3, P, S] or
    [3, P, H, S]), in one program: they are two-point OGD with default rules differing
    only in the hint (optimistic or not) and the step scale (D, D / sqrt(d), D), both
    traced."""
    d_scale = learners.step_rule(float(dom.diameter)).scale
    optimistic = jnp.array([True, True, False])
    scales = jnp.stack([d_scale, d_scale / jnp.sqrt(float(dom.dim)), d_scale])

    def learner_rows(opt, scale):
        rule = learners.StepRule(scale, jnp.float32(0.0), jnp.float32(jnp.inf))
        return _regrets_fn(learners.two_point(dom, delta, rule, opt), make_seq, dom,
                           horizons)(keys, jnp.asarray(params))

    out = sharding.to_host(jax.jit(jax.vmap(learner_rows))(optimistic, scales))
    return out if horizons is None else np.moveaxis(out, -2, -1)


def seed_keys(c) -> jax.Array:
    """[num_val_seeds + num_seeds] problem keys of the tuned studies: the protocol's tuning
    items, then its test items (``protocol.item_keys`` of ``key(config.seed)``), so
    ``jaxlab.bco.compare`` with that key plays the same problems."""
    key = jax.random.key(c.seed)
    return jnp.concatenate([protocol.item_keys(key, "tuning", np.arange(c.num_val_seeds)),
                            protocol.item_keys(key, "test", np.arange(c.num_seeds))])


def quadratic_problem(c, d: int) -> regrets.Problem:
    """The vs_dim study's problem at dimension d: stochastic quadratics on the unit ball."""
    return regrets.problem(
        lambda k: losses.stochastic_quadratic(k, c.num_rounds, d, c.sigma), domains.ball(d),
        delta=c.delta)


def family_problem(c, family: str, param: float, d: int) -> regrets.Problem:
    """The families study's problem: a smooth family on the unit ball, static regret against
    the numerical best fixed point (``config.comparator_iters`` iterations)."""
    return regrets.problem(
        lambda k: losses.stochastic_family(k, family, c.num_rounds, d, c.sigma, param=param),
        domains.ball(d), delta=c.delta, comparator_iters=c.comparator_iters)


def _variation_stats(dom, delta, keys, amplitudes, num_rounds) -> np.ndarray:
    """[A, S, 6] ``variation.VariationStats`` of the optimistic learner on switching
    quadratics (period 1, offset 0.3) of each amplitude."""
    learner = learners.gradient_variation(dom, delta)
    d = dom.dim

    def one(k, a):
        k_seq, k_run = jax.random.split(k)
        seq = losses.switching_quadratic(k_seq, num_rounds, d, 1, radius=a, offset=0.3)
        info = run(k_run, learner, seq, dom.center)
        return jnp.stack(variation.stats(info.g, variation.played_gradients(info, seq)))

    out = jax.jit(jax.vmap(jax.vmap(one, (0, None)), (None, 0)))(
        keys, jnp.asarray(amplitudes, jnp.float32))
    return sharding.to_host(out)


def _step_mults(c, d) -> list[float]:
    """The vs_dim step multipliers: config.step_grid, then 1/sqrt(d) (last)."""
    return [float(m) for m in c.step_grid] + [1.0 / float(np.sqrt(d))]


def _validate(config: ml_collections.ConfigDict) -> None:
    configs.validate_config(config)


def _units(c: ml_collections.ConfigDict, workdir: str) -> list[study.Unit]:
    """The eight studies; each returns a float32 array (per-seed final regrets unless said):
    vs_dim [2, dims, step_grid + 1, val + test seeds], vs_rounds [3, horizons, S],
    families [3, 2, family_dims, step_grid + 1, val + test seeds],
    vs_variation [3, amplitudes, S], variation [variation_dims, amplitudes, S, 6]
    (``variation.VariationStats`` fields), variants [3, curvatures, S],
    dynamic [7, switch_periods, S] (dynamic regret of the single learner, the dynamic
    ensemble with Hedge, optimistic Hedge and MsMwC; static regret of the universal
    ensemble with the same three meta-learners; ``DYNAMIC_ROWS``),
    one_point [2, one_point_drifts, S]."""
    del workdir
    delta = c.delta
    quad = losses.stochastic_quadratic

    def seeds():
        return sharding.shard_batch(jax.random.split(jax.random.key(c.seed), c.num_seeds),
                                    c.mesh_shape)

    def vs_dim():
        """[2 (ours, plain), dims, step_grid + 1, val + test seeds] final regrets, from the
        public per-seed runner (``jaxlab.bco.final_regrets``)."""
        keys = sharding.shard_batch(seed_keys(c), c.mesh_shape)
        m = len(c.step_grid) + 1
        out = np.zeros((2, len(c.dims), m, c.num_val_seeds + c.num_seeds), np.float32)
        for j, d in enumerate(c.dims):  # one program per d: (ours, plain) x steps x seeds
            out[:, j] = sharding.to_host(regrets.final_regrets(
                keys, quadratic_problem(c, d), _step_mults(c, d), [True, False]))
        return out

    def vs_rounds():
        keys = seeds()
        dom = domains.ball(c.dim)
        return _two_point_regrets(dom, delta, lambda k, s: quad(k, max(c.horizons), c.dim, s),
                                  keys, [c.sigma], horizons=c.horizons)[:, 0]

    def vs_variation():
        keys = seeds()
        dom = domains.ball(c.dim)
        seq = lambda k, a: losses.switching_quadratic(  # noqa: E731
            k, c.num_rounds, c.dim, 1, radius=a, offset=0.3)
        return _two_point_regrets(dom, delta, seq, keys, c.amplitudes)

    def families():
        """[families, 2 (ours, plain), family_dims, step_grid + 1, val + test seeds], from
        the public per-seed runner on ``family_problem``."""
        keys = seed_keys(c)
        out = np.zeros((len(FAMILIES), 2, len(c.family_dims), len(c.step_grid) + 1,
                        c.num_val_seeds + c.num_seeds), np.float32)
        for f, (fam, param) in enumerate(FAMILIES.items()):
            for j, d in enumerate(c.family_dims):
                out[f, :, j] = sharding.to_host(regrets.final_regrets(
                    keys, family_problem(c, fam, param, d), _step_mults(c, d),
                    [True, False]))
        return out

    def variation_unit():
        """[dims, amplitudes, seeds, 6] VariationStats fields."""
        keys = seeds()
        return np.stack([_variation_stats(domains.ball(d), delta, keys, c.amplitudes,
                                          c.num_rounds) for d in c.variation_dims])

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
        dyn = [lambda: learners.gradient_variation(dom, delta),
               lambda: ensembles.dynamic_ensemble(dom, delta, c.num_rounds),
               lambda: ensembles.dynamic_ensemble(dom, delta, c.num_rounds, optimistic=True),
               lambda: ensembles.dynamic_ensemble(dom, delta, c.num_rounds, meta="msmwc")]
        static = [lambda: ensembles.universal_ensemble(dom, delta),
                  lambda: ensembles.universal_ensemble(dom, delta, optimistic=True),
                  lambda: ensembles.universal_ensemble(dom, delta, meta="msmwc")]
        seq = lambda k, per: losses.switching_quadratic(k, c.num_rounds, c.dim, per)  # noqa: E731
        return np.stack(
            [_final_regrets(mk, seq, dom, keys, c.switch_periods, dynamic=True) for mk in dyn]
            + [_final_regrets(mk, seq, dom, keys, c.switch_periods) for mk in static])

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

    studies = [("vs_dim", vs_dim), ("vs_rounds", vs_rounds), ("vs_variation", vs_variation),
               ("families", families), ("variation", variation_unit), ("variants", variants),
               ("dynamic", dynamic), ("one_point", one_point)]
    return [study.Unit(name, lambda ctx, fn=fn: np.asarray(fn(), np.float32))
            for name, fn in studies]


def _stats(arr):
    m, hw = metrics.mean_and_ci(arr, axis=-1)
    return {"mean": m.tolist(), "ci95": hw.tolist()}


def _variation_values(c):
    seqs = [losses.switching_quadratic(jax.random.key(0), c.num_rounds, c.dim, 1, radius=a,
                                       offset=0.3) for a in c.amplitudes]
    return [float(losses.gradient_variation(s)) for s in seqs]


# The new smooth families of the tuned study and their parameter (sharpness / width /
# curvature); sigma = config.sigma noise on the centres (thetas): the gradient-variance
# regime.
FAMILIES = {"lse": 4.0, "huber": 0.2, "softplus_quadratic": 0.3}
DYNAMIC_ROWS = ("single learner", "dynamic ensemble", "dynamic ensemble, optimistic Hedge",
                "dynamic ensemble, MsMwC",
                "universal ensemble (static regret)",
                "universal ensemble, optimistic Hedge (static regret)",
                "universal ensemble, MsMwC (static regret)")
TUNED_ROWS = ("ours (optimistic), tuned", "plain OGD (agarwal2010), tuned")


def _slope(x, y):
    """Log-log slope over the positive points; None (JSON null) with fewer than two."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    ok = y > 0
    return metrics.loglog_slope(x[ok], y[ok]) if ok.sum() >= 2 else None


def _fmt(v, spec=".2f"):
    return "n/a" if v is None else format(v, spec)


def comparison_dict(cmp: protocol.Comparison) -> dict:
    """``cmp.to_dict()`` without the compile / run seconds (summary.json stays
    byte-identical across reruns)."""
    return cmp.to_dict(seconds=False)


COMPARED = ("gradient_variation", "agarwal2010", "ogd_sqrt_d_step")


def compare_precomputed(c, arr_d, problem) -> protocol.Comparison:
    """``jaxlab.bco.compare`` on a unit's per-seed final regrets of one dimension
    (``arr_d``: [2 (ours, plain), step_grid + 1, val + test seeds], tuning seeds first, of
    ``problem``): each contender's ``run`` returns its regrets on the requested seeds, so
    the tuning, the CIs and the goal are the public function's on the same values."""
    grid = [float(m) for m in c.step_grid]

    def contender(o, tuned):
        def run_items(items, problem, multiplier=None):
            del problem
            j = grid.index(multiplier) if tuned else len(grid)
            return arr_d[o, j, items.positions]
        return protocol.Contender(run_items, comparison.two_point_contender(
            o == 0, grid).grid if tuned else ({},))

    return comparison.compare(
        jax.random.key(c.seed), problem,
        contenders={COMPARED[0]: contender(0, True), COMPARED[1]: contender(1, True),
                    COMPARED[2]: contender(0, False)},
        tuning=c.num_val_seeds, seeds=c.num_seeds, progress=progress.comparison_reporter())


def _summarize_vs_dim(c, arr, dims=None, problems=None) -> dict:
    """Tuned and fixed-formula rows of the vs_dim study, and paired differences.

    arr: [2 (ours, plain), dims, multipliers, val + test seeds] of ``problems`` (one per d;
    default: ``quadratic_problem`` at each of ``c.dims``). The tuned rows, their picks and
    the tuned difference are ``compare_precomputed``'s (per d)."""
    dims = c.dims if dims is None else dims
    if problems is None:
        problems = [quadratic_problem(c, d) for d in dims]
    test = arr[..., c.num_val_seeds:]
    grid = list(c.step_grid)
    n_grid = len(grid)
    at = {v: int(np.argmin(np.abs(np.asarray(grid) - v))) for v in (1.0, _INV_SQRT2, 0.25)}
    # The choice uses validation problems only, over config.step_grid (not 1/sqrt(d)).
    cmps = [compare_precomputed(c, arr[:, k], problems[k]) for k in range(len(dims))]
    best = np.asarray([[grid.index(cm.contenders[n].params["multiplier"]) for cm in cmps]
                       for n in COMPARED[:2]])  # [2, dims]
    j = np.arange(len(dims))
    rows = {
        TUNED_ROWS[0]: test[0, j, best[0]],
        TUNED_ROWS[1]: test[1, j, best[1]],
        "ours, formula D/sqrt(1+S_t)": test[0, :, at[1.0]],
        "plain OGD, formula D/sqrt(1+sum||g||^2)": test[1, :, at[1.0]],
        "plain OGD x 1/sqrt(2) (matched constant)": test[1, :, at[_INV_SQRT2]],
        "ours x 1/4 (d-independent)": test[0, :, at[0.25]],
        "ogd_sqrt_d_step: ours x 1/sqrt(d)": test[0, :, n_grid],
    }
    out = {"rows": {n: _stats(v) for n, v in rows.items()},
           "chosen_multiplier": {TUNED_ROWS[i]: [grid[k] for k in best[i]] for i in range(2)},
           "slope_tuned": {n: _slope(dims, rows[n].mean(-1)) for n in TUNED_ROWS},
           "slope_formula": {n: _slope(dims, rows[n].mean(-1)) for n in list(rows)[2:4]}}
    # Paired (same test problems and directions): tuned ours - tuned plain (the
    # comparison's declared difference), and ours at its formula - plain at the matched
    # constant.
    matched = rows["plain OGD x 1/sqrt(2) (matched constant)"]
    formula = [protocol.paired_difference(
        jax.random.key(17), rows["ours, formula D/sqrt(1+S_t)"][k], matched[k],
        higher_is_better=False) for k in range(len(dims))]
    tuned = [cm.differences[0] for cm in cmps]
    out["paired_difference"] = {
        name: {"mean": [x.value for x in ds], "low": [x.low for x in ds],
               "high": [x.high for x in ds]}
        for name, ds in (("tuned ours - tuned plain", tuned),
                         ("ours formula - plain x 1/sqrt(2)", formula))}
    out["comparison"] = [comparison_dict(cm) for cm in cmps]
    return out


_INV_SQRT2 = 0.7071067811865476
_VAR_FIELDS = variation.VariationStats._fields


def _summarize_variation(c, arr, v_t) -> dict:
    """arr: [variation_dims, amplitudes, seeds, 6]."""
    mean = arr.mean(2)  # [D, A, 6]
    est = mean[..., _VAR_FIELDS.index("estimated")]
    dec = mean[..., _VAR_FIELDS.index("decoupled")]
    gsq = mean[..., _VAR_FIELDS.index("grad_sq")]
    dims = np.asarray(c.variation_dims, np.float64)
    pos = np.asarray(v_t) > 0
    s = {"dims": list(c.variation_dims), "V_T": v_t,
         "S_T": {f"d={d}": _stats(arr[i, :, :, 0]) for i, d in enumerate(c.variation_dims)},
         "slope_S_vs_d": [_slope(dims, est[:, a]) for a in range(len(v_t))],
         "slope_S_vs_d_predicted": {"refined (independent directions, eq. 3)": 1.0,
                                    "per-round worst case": 2.0},
         "slope_S_vs_d_eq3": [_slope(dims, dec[:, a]) for a in range(len(v_t))],
         "slope_S_vs_V_T": [_slope(np.asarray(v_t)[pos], est[i, pos])
                            for i in range(len(dims))],
         "slope_S_vs_V_T_eq3": [_slope(np.asarray(v_t)[pos], dec[i, pos])
                                for i in range(len(dims))],
         "S_T_over_V_T": [[float(est[i, a] / v_t[a]) if v_t[a] > 0 else None
                           for a in range(len(v_t))] for i in range(len(dims))],
         "S_T_over_eq3": (est / dec).tolist(),
         "S_T_over_2(d-1)G_T": [[float(est[i, a] / (2 * (d - 1) * gsq[i, a])) if d > 1
                                 else None for a in range(len(v_t))]
                                for i, d in enumerate(dims)]}
    return s


def _summarize(c, out) -> dict:
    lnames = list(TWO_POINT)
    v_t = _variation_values(c)
    s = {"config": c.to_dict(), "learners": lnames, "V_T": v_t}
    s["vs_dim"] = _summarize_vs_dim(c, out["vs_dim"])
    s["families"] = ({fam: _summarize_vs_dim(
        c, out["families"][f], c.family_dims,
        [family_problem(c, fam, FAMILIES[fam], d) for d in c.family_dims])
        for f, fam in enumerate(FAMILIES)} if len(c.family_dims) else {})
    s["regret_vs_rounds"] = {n: _stats(out["vs_rounds"][i]) for i, n in enumerate(lnames)}
    s["regret_vs_variation"] = {n: _stats(out["vs_variation"][i]) for i, n in enumerate(lnames)}
    s["slope_vs_rounds"] = {n: _slope(c.horizons, out["vs_rounds"][i].mean(-1))
                            for i, n in enumerate(lnames)}
    pos = np.asarray(v_t) > 0
    s["slope_vs_variation"] = {n: _slope(np.asarray(v_t)[pos], out["vs_variation"][i][pos].mean(-1))
                               for i, n in enumerate(lnames)}
    s["variation"] = _summarize_variation(c, out["variation"], v_t)
    vnames = ["convex (ours)", f"strongly convex lam={c.curvatures[-1]:g} (ours)", "universal"]
    s["variants"] = {"curvatures": list(c.curvatures),
                     **{n: _stats(out["variants"][i]) for i, n in enumerate(vnames)}}
    dyn = out["dynamic"]
    s["dynamic"] = {"switch_periods": list(c.switch_periods),
                    **{n: _stats(dyn[i]) for i, n in enumerate(DYNAMIC_ROWS)}}
    s["meta_paired_difference"] = {
        name: [metrics.bootstrap_ci(jax.random.key(18), lambda x, y: np.mean(x - y),
                                    (dyn[i, k], dyn[j, k]), 2000)
               for k in range(len(c.switch_periods))]
        for name, i, j in (("dynamic: optimistic Hedge - Hedge", 2, 1),
                           ("dynamic: MsMwC - Hedge", 3, 1),
                           ("universal: optimistic Hedge - Hedge", 5, 4),
                           ("universal: MsMwC - Hedge", 6, 4))}
    s["one_point"] = {"drifts": list(c.one_point_drifts),
                      "gradient-variation hint (ema)": _stats(out["one_point"][0]),
                      "no hint": _stats(out["one_point"][1])}
    for n in TUNED_ROWS:
        logging.info("%s: slope vs d %s", n, _fmt(s["vs_dim"]["slope_tuned"][n]))
    return s


def _plot(c, s, out, workdir):
    del out
    v_t = s["V_T"]
    fig, axes = plots.figure(3)
    rows = s["vs_dim"]["rows"]
    for n, r in rows.items():
        plots.line_with_band(axes[0], c.dims, r["mean"], r["ci95"], label=n, marker="o",
                             ls="-" if "tuned" in n else "--")
    axes[0].set(xlabel="dimension d", ylabel="regret (test problems)", xscale="log",
                yscale="log")
    axes[0].set_title(f"stochastic quadratics, T={c.num_rounds}; tuned on "
                      f"{c.num_val_seeds} val seeds", fontsize=8)
    # Its legend (one entry per learner) goes in the spare fourth panel, off the lines.
    spare = fig.axes[3]
    spare.set_visible(True)
    spare.axis("off")
    spare.legend(*axes[0].get_legend_handles_labels(), loc="center", fontsize=8,
                 title="left panel (regret vs d)", title_fontsize=8)
    for key, x, ax, xl in [("regret_vs_rounds", c.horizons, axes[1], "rounds T"),
                           ("regret_vs_variation", v_t, axes[2],
                            "gradient variation V_T (V_T = 0 drawn at 0.1)")]:
        x = np.maximum(np.asarray(x, np.float64), 0.1)
        for n in s["learners"]:
            plots.line_with_band(ax, x, s[key][n]["mean"], s[key][n]["ci95"], label=n,
                                 marker="o")
        ax.set(xlabel=xl, ylabel="regret", xscale="log", yscale="log")
    axes[1].legend(fontsize=7)
    axes[1].set_title(f"d={c.dim}, default step formulas")
    axes[2].set_title(f"alternating quadratics, d={c.dim}, T={c.num_rounds}")
    plots.save(fig, os.path.join(workdir, "regret_scaling.png"),
               caption=plots.t_band(c.num_seeds) + f" (test seeds; {c.num_val_seeds} "
               "validation seeds chose the tuned steps)")

    fig, axes = plots.figure(2)
    var = s["variation"]
    dims = np.asarray(var["dims"], np.float64)
    for a, vt in enumerate(v_t):
        m = [var["S_T"][f"d={d}"]["mean"][a] for d in var["dims"]]
        hw = [var["S_T"][f"d={d}"]["ci95"][a] for d in var["dims"]]
        plots.line_with_band(axes[0], dims, m, hw, label=f"V_T={vt:.3g}", marker="o")
    m0 = var["S_T"][f"d={var['dims'][0]}"]["mean"][-1]
    for p, ls in ((1, ":"), (2, "--")):
        axes[0].plot(dims, m0 * (dims / dims[0]) ** p, "k" + ls, lw=1,
                     label=f"slope {p} ({'refined' if p == 1 else 'worst case'})")
    axes[0].set(xlabel="dimension d", ylabel="S_T = sum ||g~_t - g~_{t-1}||^2", xscale="log",
                yscale="log", title="non-consecutive variation vs d")
    axes[0].legend(fontsize=7)
    pos = np.asarray(v_t) > 0
    for d in var["dims"]:
        st = var["S_T"][f"d={d}"]
        plots.line_with_band(axes[1], np.asarray(v_t)[pos], np.asarray(st["mean"])[pos],
                             np.asarray(st["ci95"])[pos], label=f"d={d}", marker="o")
    axes[1].plot(np.asarray(v_t)[pos], np.asarray(v_t)[pos], "k:", lw=1, label="S_T = V_T")
    axes[1].set(xlabel="true V_T", ylabel="S_T", xscale="log", yscale="log",
                title=f"switching quadratics, T={c.num_rounds}")
    axes[1].legend(fontsize=7)
    plots.save(fig, os.path.join(workdir, "variation.png"), caption=plots.t_band(c.num_seeds))

    fig, axes = plots.figure(4)
    v = s["variants"]
    for n in [k for k in v if k != "curvatures"]:
        plots.line_with_band(axes[0], c.curvatures, v[n]["mean"], v[n]["ci95"], label=n,
                             marker="o")
    axes[0].set(xlabel="curvature (strong convexity)", ylabel="regret", xscale="log",
                title="convex / strongly convex / universal")
    axes[0].legend(fontsize=7)
    # Dynamic regret is positive (log axis); the universal ensembles' static regret goes
    # below 0 at long periods (the best fixed point is a poor comparator), so it gets a
    # linear axis of its own.
    for n in DYNAMIC_ROWS:
        ax = axes[2] if "static" in n else axes[1]
        plots.line_with_band(ax, c.switch_periods, s["dynamic"][n]["mean"],
                             s["dynamic"][n]["ci95"], label=n.replace(" (static regret)", ""),
                             marker="o")
    axes[1].set(xlabel="switch period", ylabel="dynamic regret (vs argmin f_t)",
                xscale="log", yscale="log", title="switching quadratics: dynamic regret")
    axes[2].set(xlabel="switch period", ylabel="static regret (vs best fixed x)",
                xscale="log", title="switching quadratics: universal ensembles")
    axes[2].axhline(0.0, color="gray", lw=0.8, ls=":")
    for ax in axes[1:3]:
        ax.legend(fontsize=7)
    for n in ["gradient-variation hint (ema)", "no hint"]:
        plots.line_with_band(axes[3], np.asarray(c.one_point_drifts) + 1e-4,
                             s["one_point"][n]["mean"], s["one_point"][n]["ci95"], label=n,
                             marker="o")
    axes[3].set(xlabel="drift of theta (rad/round, +1e-4)", ylabel="regret", xscale="log",
                title=f"one-point linear, box d={c.one_point_dim}")
    axes[3].legend(fontsize=7)
    plots.save(fig, os.path.join(workdir, "variants.png"), caption=plots.t_band(c.num_seeds))


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for results/REPORT.md."""
    rows = []
    vd = summary["vs_dim"]
    dims = summary["config"]["dims"]
    rows.append(("tuned learners (steps chosen on validation problems): log-log slope of "
                 f"regret vs d (d={dims[0]}..{dims[-1]}), ours / plain OGD",
                 " / ".join(_fmt(vd["slope_tuned"][n]) for n in TUNED_ROWS)))
    grid = summary["config"]["step_grid"]
    rows.append((f"step multipliers chosen on validation problems per d={'/'.join(map(str, dims))}"
                 f" (grid {max(grid):.3g}..{min(grid):.3g}): ours; plain OGD",
                 "; ".join(" / ".join(f"{m:.3g}" + ("*" if m in (max(grid), min(grid)) else "")
                                      for m in vd["chosen_multiplier"][n])
                           for n in TUNED_ROWS) + " (* = grid edge)"))
    for n, r in vd["rows"].items():
        rows.append((f"regret at d={dims[-1]} (test problems): {n}",
                     f"{r['mean'][-1]:.1f} +- {r['ci95'][-1]:.1f}"))
    for name, dd in vd["paired_difference"].items():
        rows.append((f"paired regret difference {name}, d={dims[0]} / d={dims[-1]} "
                     "(bootstrap 95% CI)",
                     f"{dd['mean'][0]:.1f} [{dd['low'][0]:.1f}, {dd['high'][0]:.1f}] / "
                     f"{dd['mean'][-1]:.1f} [{dd['low'][-1]:.1f}, {dd['high'][-1]:.1f}]"))
    fdims = summary["config"]["family_dims"]
    for fam, fs in summary["families"].items():
        r = fs["rows"]
        rows.append((f"{fam} (d={'/'.join(map(str, fdims))}): regret of tuned ours / tuned "
                     "plain / ours formula / plain x 1/sqrt(2) / ours x 1/4 / ours x 1/sqrt(d)",
                     "; ".join(" / ".join(f"{r[n]['mean'][k]:.1f}" for n in (
                         TUNED_ROWS[0], TUNED_ROWS[1], "ours, formula D/sqrt(1+S_t)",
                         "plain OGD x 1/sqrt(2) (matched constant)",
                         "ours x 1/4 (d-independent)", "ogd_sqrt_d_step: ours x 1/sqrt(d)"))
                         for k in range(len(fdims)))))
        dd = fs["paired_difference"]["tuned ours - tuned plain"]
        rows.append((f"{fam}: paired difference tuned ours - tuned plain per d (95% CI)",
                     "; ".join(f"{m:.1f} [{lo:.1f}, {hi:.1f}]" for m, lo, hi in zip(
                         dd["mean"], dd["low"], dd["high"], strict=True))))
    var = summary["variation"]
    vts = summary["V_T"]
    if "slope_S_vs_d_eq3" in var:
        rows.append(("S_T = sum||g~_t - g~_{t-1}||^2 (independent directions): log-log slope vs "
                     f"d (d={var['dims'][0]}..{var['dims'][-1]}) at V_T={vts[0]:.3g} / "
                     f"V_T={vts[-1]:.3g}, measured (eq. (3) on the played gradients; refined "
                     "analysis 1, per-round worst case 2)",
                     f"{_fmt(var['slope_S_vs_d'][0])} ({_fmt(var['slope_S_vs_d_eq3'][0])}) / "
                     f"{_fmt(var['slope_S_vs_d'][-1])} ({_fmt(var['slope_S_vs_d_eq3'][-1])})"))
        rows.append(("S_T: log-log slope vs V_T (V_T > 0) per d, measured (eq. (3)); "
                     "S_T proportional to V_T would be 1",
                     "; ".join(f"d={d}: {_fmt(m)} ({_fmt(e)})" for d, m, e in zip(
                         var["dims"], var["slope_S_vs_V_T"], var["slope_S_vs_V_T_eq3"],
                         strict=True))))
    else:
        rows.append(("S_T = sum||g~_t - g~_{t-1}||^2: log-log slope vs d at the largest V_T "
                     "(refined prediction 1, worst case 2)", _fmt(var["slope_S_vs_d"][-1])))
    rows.append((f"S_T / V_T at the largest V_T, d={var['dims'][0]} / d={var['dims'][-1]}",
                 f"{var['S_T_over_V_T'][0][-1]:.1f} / {var['S_T_over_V_T'][-1][-1]:.1f}"))
    rows.append((f"S_T / eq. (3) prediction (d={var['dims'][-1]}, each V_T)",
                 ", ".join(f"{x:.2f}" for x in var["S_T_over_eq3"][-1])))
    rows.append(("log-log slope of regret vs T (d fixed, default steps): "
                 + " / ".join(summary["learners"]),
                 " / ".join(_fmt(summary["slope_vs_rounds"][n]) for n in summary["learners"])))
    v = summary["variants"]
    rows.append((f"regret at curvature {v['curvatures'][-1]:g}: convex / strongly convex / "
                 "universal",
                 " / ".join(f"{v[k]['mean'][-1]:.1f}" for k in v if k != "curvatures")))
    dyn = summary["dynamic"]
    rows.append(("dynamic regret (shortest switch period): single / ensemble Hedge / "
                 "ensemble optimistic Hedge / ensemble MsMwC",
                 " / ".join(f"{dyn[n]['mean'][0]:.1f}" for n in DYNAMIC_ROWS[:4])))
    for name, cis in summary["meta_paired_difference"].items():
        rows.append((f"paired regret difference {name} (switch periods "
                     f"{', '.join(str(p) for p in dyn['switch_periods'])}; bootstrap 95% CI)",
                     "; ".join(f"{m:.2f} [{lo:.2f}, {hi:.2f}]" for m, lo, hi in cis)))
    op = summary["one_point"]
    rows.append(("one-point linear regret (max drift): ema hint vs none",
                 f"{op['gradient-variation hint (ema)']['mean'][-1]:.0f} vs "
                 f"{op['no hint']['mean'][-1]:.0f}"))
    return rows


# ------------------------------------------------------------------ TensorBoard series


def tb_scalars(config, unit, result, workdir):
    """TensorBoard series of a unit (``study.Experiment.scalars``; module docstring of
    ``experiments.lib.scalars``)."""
    del workdir
    a = np.asarray(result, np.float64)
    two_point, dyn_rows, families = list(TWO_POINT), list(DYNAMIC_ROWS), list(FAMILIES)
    nval = int(S.get_field(config, "num_val_seeds", 0) or 0)
    # unit: (row names, config field of the swept axis, tag)
    sweeps = {"vs_rounds": (two_point, "horizons", "bco/regret_vs_horizon_T"),
              "vs_variation": (two_point, "amplitudes", "bco/regret_vs_amplitude"),
              "variants": (("convex", "strongly convex", "universal"), "curvatures",
                           "bco/regret_vs_curvature"),
              "dynamic": (dyn_rows, "switch_periods", "bco/regret_vs_switch_period"),
              "one_point": (("ema hint", "no hint"), "one_point_drifts",
                            "bco/one_point_regret_vs_drift")}
    out = {}
    if unit in sweeps and a.ndim == 3:
        rows, field, tag = sweeps[unit]
        steps, is_index = S.sweep_steps(S.get_field(config, field), a.shape[1])
        tag += "_index" if is_index else ""
        for name, row in zip(S.run_names(rows, a.shape[0], "learner"), a, strict=True):
            out[(name, tag)] = (steps, S.mean(row))
    elif unit == "vs_dim" and a.ndim == 4:
        steps, _ = S.sweep_steps(S.get_field(config, "dims"), a.shape[1])
        for name, row in zip(S.run_names(("ours (optimistic)", "plain OGD"), 2, "learner"), a,
                             strict=True):
            out[(name, "bco/regret_vs_dim_step_1_over_sqrt_d")] = (steps,
                                                                   S.mean(row[:, -1, nval:]))
    elif unit == "families" and a.ndim == 5:
        steps, _ = S.sweep_steps(S.get_field(config, "family_dims"), a.shape[2])
        for fam, block in zip(S.run_names(families, a.shape[0], "family"), a, strict=True):
            for name, row in zip(("ours (optimistic)", "plain OGD"), block, strict=True):
                out[(f"{fam} {name}", "bco/family_regret_vs_dim_step_1_over_sqrt_d")] = (
                    steps, S.mean(row[:, -1, nval:]))
    return out


CAPTION = ("Final regret of the bandit learners on held-out test problems (lower is better) and "
           "the measured growth of the non-consecutive variation S_T; paired differences are "
           "ours minus the rival, so negative favours ours.")

EXPERIMENT = study.Experiment(name="bco", validate=_validate, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline,
                              scalars=tb_scalars, caption=CAPTION)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/bco.py:quick")
