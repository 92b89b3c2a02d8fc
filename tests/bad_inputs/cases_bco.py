"""Bad-input cases for jaxlab.bco (domains, losses, estimators, learners, ensembles, run)."""


import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import bco
from jaxlab.bco import ensembles, estimators, losses, msmwc, reference, variation
from tests.bad_inputs.harness import Case, train_smoke

D = 3


def _seq(t=10, d=D):
    return losses.stochastic_quadratic(jax.random.key(0), t, d, 0.1)


def _run(learner=None, seq=None, x0=None):
    learner = learner or bco.gradient_variation(bco.ball(D), 0.1)
    seq = _seq() if seq is None else seq
    x0 = jnp.zeros(D) if x0 is None else x0
    return bco.run(jax.random.key(1), learner, seq, x0).loss


def _train(**changes):
    return train_smoke("bco", **changes)


def _problem(**kw):
    return bco.problem(lambda k: losses.stochastic_quadratic(k, 10, D, 0.1), bco.ball(D), **kw)


def _info(rounds=4):
    return bco.Info(jnp.zeros((rounds, D)), jnp.zeros(rounds), jnp.zeros((rounds, D)))


def _regret_mismatch():
    info = bco.run(jax.random.key(1), bco.gradient_variation(bco.ball(D), 0.1), _seq(10),
                   jnp.zeros(D))
    return bco.regret(info, _seq(1), bco.ball(D))


CASES = [
    # --- domains --------------------------------------------------------------------------
    Case("bco/ball/dim_zero", lambda: bco.ball(0), "dim"),
    Case("bco/ball/radius_zero", lambda: bco.ball(D, 0.0), "radius"),
    Case("bco/ball/radius_nan", lambda: bco.ball(D, np.nan), "radius"),
    Case("bco/box/low_inf", lambda: bco.box([-np.inf, 0.0], [1.0, 1.0]), "low"),
    Case("bco/box/high_nan", lambda: bco.box([0.0, 0.0], [1.0, np.nan]), "high"),
    Case("bco/box/low_ge_high", lambda: bco.box([0.0, 1.0], [1.0, 1.0]), "high"),
    # --- losses ---------------------------------------------------------------------------
    Case("bco/losses/num_rounds_zero", lambda: _seq(t=0), "num_rounds"),
    Case("bco/losses/dim_zero", lambda: _seq(d=0), "dim"),
    Case("bco/losses/curvature_negative", lambda: losses.drifting_quadratic(
        jax.random.key(0), 10, D, 0.1, curvature=-1.0), "curvature"),
    Case("bco/losses/curvature_zero", lambda: losses.stochastic_quadratic(
        jax.random.key(0), 10, D, 0.1, curvature=0.0), "curvature"),
    Case("bco/losses/radius_negative", lambda: losses.drifting_quadratic(
        jax.random.key(0), 10, D, 0.1, radius=-0.5), "radius"),
    Case("bco/losses/drift_nan", lambda: losses.drifting_quadratic(
        jax.random.key(0), 10, D, np.nan), "drift"),
    Case("bco/losses/sigma_negative", lambda: losses.stochastic_quadratic(
        jax.random.key(0), 10, D, -0.1), "sigma"),
    Case("bco/losses/period_zero", lambda: losses.switching_quadratic(
        jax.random.key(0), 10, D, 0), "period"),
    Case("bco/losses/offset_negative", lambda: losses.switching_quadratic(
        jax.random.key(0), 10, D, 2, offset=-1.0), "offset"),
    Case("bco/losses/linear_scale_negative", lambda: losses.drifting_linear(
        jax.random.key(0), 10, D, 0.1, scale=-1.0), "scale"),
    Case("bco.losses.prefix_comparator_losses: linear losses on a ball", lambda: (
        losses.prefix_comparator_losses(losses.drifting_linear(jax.random.key(0), 10, D, 0.1),
                                        bco.ball(D))), "domain"),
    Case("bco.losses.stochastic_family: unknown family", lambda: losses.stochastic_family(
        jax.random.key(0), "cubic", 10, D, 0.1), "family"),
    Case("bco/losses/family_param_zero", lambda: losses.stochastic_family(
        jax.random.key(0), "huber", 10, D, 0.1, param=0.0), "param"),
    Case("bco.losses.fixed_comparator_loss: num_iters 0", lambda: losses.fixed_comparator_loss(
        _seq(), bco.ball(D), 0), "num_iters"),
    Case("bco/losses/huber_prefix_comparator", lambda: losses.prefix_comparator_losses(
        losses.stochastic_family(jax.random.key(0), "huber", 10, D, 0.1), bco.ball(D)),
        "seq"),
    Case("bco/losses/lse_sharpness_negative", lambda: _run(seq=losses.LogSumExpSeq(
        jnp.zeros((10, D)), jnp.float32(-1.0))), "seq.sharpness"),
    # --- estimators -----------------------------------------------------------------------
    Case("bco/estimators/sphere_dim_zero", lambda: estimators.sphere(jax.random.key(0), 0),
         "dim"),
    Case("bco/estimators/two_point_delta_zero", lambda: estimators.two_point(
        1.0, 0.5, jnp.array([1.0, 0.0]), 0.0), "delta"),
    Case("bco/estimators/one_point_delta_negative", lambda: estimators.one_point_box(
        1.0, jnp.zeros(2), 0, 1.0, -0.1, jnp.zeros(2)), "delta"),
    # --- learners -------------------------------------------------------------------------
    Case("bco/learners/delta_zero", lambda: bco.gradient_variation(bco.ball(D), 0.0), "delta"),
    Case("bco/learners/delta_ge_radius", lambda: bco.gradient_variation(bco.ball(D), 1.0),
         "delta"),
    Case("bco/learners/delta_nan", lambda: bco.agarwal2010(bco.ball(D), np.nan), "delta"),
    Case("bco/learners/scale_zero", lambda: bco.step_rule(scale=0.0), "scale"),
    Case("bco/learners/eta_max_negative", lambda: bco.step_rule(eta_max=-1.0), "eta_max"),
    Case("bco/learners/lam_negative", lambda: bco.step_rule(lam=-0.1), "lam"),
    Case("bco/learners/lam_nan", lambda: bco.step_rule(lam=np.nan), "lam"),
    Case("bco.learners.two_point: domain a tuple", lambda: bco.two_point(
        (np.zeros(D), 1.0), 0.1, bco.step_rule()), "domain"),
    Case("bco/learners/one_point_on_ball", lambda: bco.one_point_box(
        bco.ball(2), 0.1, bco.step_rule()), "domain"),
    Case("bco/learners/one_point_beta_zero", lambda: bco.one_point_box(
        bco.box(-np.ones(2), np.ones(2)), 0.1, bco.step_rule(), beta=0.0), "beta"),
    Case("bco/learners/one_point_hint_unknown", lambda: bco.one_point_box(
        bco.box(-np.ones(2), np.ones(2)), 0.1, bco.step_rule(), hint="last"), "hint"),
    # --- ensembles ------------------------------------------------------------------------
    Case("bco.ensembles.universal_ensemble: a zero lam", lambda: ensembles.universal_ensemble(
        bco.ball(D), 0.1, lams=(1.0, 0.0)), "lams"),
    Case("bco.ensembles.dynamic_ensemble: num_bases 0", lambda: ensembles.dynamic_ensemble(
        bco.ball(D), 0.1, 10, num_bases=0), "num_bases"),
    Case("bco.ensembles.ensemble: meta_scale 0", lambda: ensembles.ensemble(
        bco.ball(D), 0.1, jax.tree.map(lambda x: x[None], bco.step_rule()), meta_scale=0.0),
        "meta_scale"),
    Case("bco/ensembles/delta_zero", lambda: ensembles.dynamic_ensemble(bco.ball(D), 0.0, 10),
         "delta"),
    Case("bco/ensembles/optimistic_not_bool", lambda: ensembles.dynamic_ensemble(
        bco.ball(D), 0.1, 10, optimistic="yes"), "optimistic"),
    Case("bco/ensembles/meta_unknown", lambda: ensembles.dynamic_ensemble(
        bco.ball(D), 0.1, 10, meta="exp3"), "meta"),
    Case("bco/ensembles/meta_contradicts_optimistic", lambda: ensembles.universal_ensemble(
        bco.ball(D), 0.1, optimistic=True, meta="hedge"), "optimistic"),
    Case("bco/msmwc/prior_not_normalised", lambda: msmwc.run(
        np.array([0.5, 0.6]), np.full(2, 0.01), np.zeros((3, 2)), np.zeros((3, 2))), "prior"),
    Case("bco/msmwc/eta_nan", lambda: msmwc.run(
        np.full(2, 0.5), np.array([0.01, np.nan]), np.zeros((3, 2)), np.zeros((3, 2))), "eta"),
    Case("bco/msmwc/eta_prior_mismatch", lambda: msmwc.run(
        np.full(2, 0.5), np.full(3, 0.01), np.zeros((3, 2)), np.zeros((3, 2))), "eta"),
    Case("bco/msmwc/losses_wrong_width", lambda: msmwc.run(
        np.full(2, 0.5), np.full(2, 0.01), np.zeros((3, 4)), np.zeros((3, 4))), "losses"),
    Case("bco/learners/ogd_sqrt_d_step_delta_zero", lambda: bco.ogd_sqrt_d_step(
        bco.ball(D), 0.0), "delta"),
    # --- variation ------------------------------------------------------------------------
    Case("bco.variation.estimated_variation: 1-D estimates", lambda: (
        variation.estimated_variation(jnp.zeros(5))), "estimates"),
    Case("bco/variation/one_round", lambda: variation.stats(jnp.zeros((1, D)),
                                                              jnp.zeros((1, D))), "estimates"),
    Case("bco.variation.stats: grads of another width", lambda: variation.stats(
        jnp.zeros((5, D)), jnp.zeros((5, D + 1))), "grads"),
    Case("bco.variation.played_gradients: info.x of 4 rounds, seq of 10", lambda: (
        variation.played_gradients(_info(4), _seq(10))), "info.x"),
    # --- the Algorithm API: init(key, x0), step(key, state, f) ------------------------------
    Case("bco/init/x0_outside_domain", lambda: bco.gradient_variation(bco.ball(D), 0.1).init(
        jax.random.key(0), jnp.full(D, 5.0)), "x0"),
    Case("bco/init/x0_shape", lambda: bco.agarwal2010(bco.ball(D), 0.1).init(
        jax.random.key(0), jnp.zeros(D + 1)), "x0"),
    Case("bco/ensembles/init_x0_nan", lambda: ensembles.universal_ensemble(bco.ball(D), 0.1).init(
        jax.random.key(0), jnp.array([0.0, np.nan, 0.0])), "x0"),
    # --- run / regret ---------------------------------------------------------------------
    Case("bco/run/x0_outside_domain", lambda: _run(x0=jnp.full(D, 5.0)), "x0"),
    Case("bco/run/x0_nan", lambda: _run(x0=jnp.array([0.0, np.nan, 0.0])), "x0"),
    Case("bco/run/x0_shape", lambda: _run(x0=jnp.zeros(D + 1)), "x0"),
    Case("bco/run/predraw_string", lambda: bco.run(
        jax.random.key(1), bco.gradient_variation(bco.ball(D), 0.1), _seq(), jnp.zeros(D),
        predraw="yes"), "predraw"),
    Case("bco/run/predraw_int", lambda: bco.run(
        jax.random.key(1), bco.gradient_variation(bco.ball(D), 0.1), _seq(), jnp.zeros(D),
        predraw=1), "predraw"),
    Case("bco/run/centers_nan", lambda: _run(seq=losses.QuadraticSeq(
        jnp.full((10, D), jnp.nan), jnp.float32(1.0))), "seq.centers"),
    Case("bco/run/thetas_inf", lambda: _run(seq=losses.LinearSeq(
        jnp.full((10, D), jnp.inf))), "seq.thetas"),
    Case("bco/run/seq_unknown_family", lambda: _run(seq=(jnp.zeros((10, D)),)), "seq"),
    Case("bco/run/curvature_negative_seq", lambda: _run(seq=losses.QuadraticSeq(
        jnp.zeros((10, D)), jnp.float32(-1.0))), "seq.curvature"),
    Case("bco/regret/length_mismatch", _regret_mismatch, "info"),
    # --- reference ------------------------------------------------------------------------
    Case("bco/reference/delta_ge_radius", lambda: reference.two_point_ogd_numpy(
        np.zeros((5, 2)), 1.0, 1.0, 1.5, 1.0, np.tile([1.0, 0.0], (5, 1)))[0], "delta"),
    Case("bco/reference/directions_not_unit", lambda: reference.two_point_ogd_numpy(
        np.zeros((5, 2)), 1.0, 1.0, 0.1, 1.0, np.ones((5, 2)) * 3)[0], "directions"),
    Case("bco/reference/directions_shape", lambda: reference.two_point_ogd_numpy(
        np.zeros((5, 2)), 1.0, 1.0, 0.1, 1.0, np.ones((4, 2)))[0], "directions"),
    # --- the comparison (jaxlab.bco.comparison), losses and MsMwC pieces ----------------------
    Case("bco.compare: contenders one name as a string", lambda: bco.compare(
        jax.random.key(0), _problem(), contenders="agarwal2010", progress=False),
         "`contenders`"),
    Case("bco.compare: one test seed", lambda: bco.compare(
        jax.random.key(0), _problem(), seeds=1, progress=False), "`seeds`"),
    Case("bco.compare: a loss-sequence maker, not a Problem", lambda: bco.compare(
        jax.random.key(0), _problem().make_seq, progress=False), "`problem`"),
    Case("bco.check_problem: a loss-sequence maker, not a Problem", lambda: bco.check_problem(
        _problem().make_seq), "`problem`"),
    Case("bco.check_problem: comparator_iters 0", lambda: bco.check_problem(
        _problem()._replace(comparator_iters=0)), "`comparator_iters`"),
    Case("bco.problem: numerical comparator with dynamic regret", lambda: _problem(
        regret="dynamic", comparator_iters=10), "`comparator_iters`"),
    Case("bco.final_regrets: negative multiplier", lambda: bco.final_regrets(
        jax.random.split(jax.random.key(0), 2), _problem(), [0.5, -1.0]), "`multipliers`"),
    Case("bco.problem: unknown regret", lambda: _problem(regret="adaptive"), "`regret`"),
    Case("bco.problem: delta past the radius", lambda: _problem(delta=1.5), "`delta`"),
    Case("bco.two_point_contender: optimistic a string", lambda: bco.two_point_contender(
        "yes"), "`optimistic`"),
    Case("bco.dynamic_regret: info of 4 rounds, seq of 10", lambda: bco.dynamic_regret(
        _info(4), _seq(10), bco.ball(D)), "`info`"),
    Case("bco.loss_sequence: smoothness 0", lambda: bco.loss_sequence(
        jnp.zeros((5, D)), lambda c, x: jnp.sum((x - c) ** 2), smoothness=0.0),
        "`smoothness`"),
    Case("bco.loss_sequence: leaves of different lengths", lambda: bco.loss_sequence(
        (jnp.zeros((5, D)), jnp.zeros(4)), lambda p, x: jnp.sum((x - p[0]) ** 2)),
        "`seq.params`"),
    Case("bco.losses.per_round_minima: linear losses on a ball", lambda: (
        losses.per_round_minima(losses.drifting_linear(jax.random.key(0), 10, D, 0.1),
                                bco.ball(D))), "`domain`"),
    Case("bco.losses.per_round_minima: no minimiser", lambda: losses.per_round_minima(
        bco.loss_sequence(jnp.zeros((5, D)), lambda c, x: jnp.sum((x - c) ** 2)),
        bco.ball(D)), "`seq.minimiser`"),
    Case("bco.losses.round_params: a tuple of centres", lambda: losses.round_params(
        (jnp.zeros((10, D)),)), "`seq`"),
    Case("bco.msmwc.adaptive_rates: meta_scale 0", lambda: msmwc.adaptive_rates(
        msmwc.init(np.full(2, 0.5)), 0.0), "`meta_scale`"),
    Case("bco.msmwc.adaptive_rates: meta_scale NaN", lambda: msmwc.adaptive_rates(
        msmwc.init(np.full(2, 0.5)), np.nan), "`meta_scale`"),
    Case("bco.msmwc.play: hint of 3 experts, state of 2", lambda: msmwc.play(
        msmwc.init(np.full(2, 0.5)), jnp.zeros(3), jnp.full(2, 0.1)), "`hint`"),
    Case("bco.msmwc.update: loss of 3 experts, state of 2", lambda: msmwc.update(
        msmwc.init(np.full(2, 0.5)), jnp.zeros(3), jnp.zeros(2), jnp.full(2, 0.1)),
        "`loss`"),
    Case("bco.msmwc.update: eta of 3 experts, state of 2", lambda: msmwc.update(
        msmwc.init(np.full(2, 0.5)), jnp.zeros(2), jnp.zeros(2), jnp.full(3, 0.1)),
        "`eta`"),
    Case("bco.msmwc.weighted_entropy_step: x of 3 entries, log_prev of 2", lambda: (
        msmwc.weighted_entropy_step(jnp.log(jnp.full(2, 0.5)), jnp.zeros(3),
                                    jnp.full(2, 0.1))), "`x`"),
    Case("bco.msmwc.weighted_entropy_step: 2-D log_prev", lambda: (
        msmwc.weighted_entropy_step(jnp.zeros((2, 2)), jnp.zeros((2, 2)),
                                    jnp.full((2, 2), 0.1))), "`log_prev`"),
    # --- experiment config ----------------------------------------------------------------
    Case("bco/config/num_seeds_1", lambda: _train(num_seeds=1), "config.num_seeds"),
    Case("bco/config/delta_zero", lambda: _train(delta=0.0), "config.delta"),
    Case("bco/config/delta_ge_radius", lambda: _train(delta=1.0), "config.delta"),
    Case("bco/config/dims_zero", lambda: _train(dims=[0, 2]), "config.dims"),
    Case("bco/config/num_rounds_zero", lambda: _train(num_rounds=0), "config.num_rounds"),
    Case("bco/config/sigma_negative", lambda: _train(sigma=-0.3), "config.sigma"),
    Case("bco/config/curvatures_zero", lambda: _train(curvatures=[0.0, 1.0]),
         "config.curvatures"),
    Case("bco/config/switch_periods_zero", lambda: _train(switch_periods=[0, 10]),
         "config.switch_periods"),
    Case("bco/config/one_point_delta_big", lambda: _train(one_point_delta=1.0),
         "config.one_point_delta"),
    Case("bco/config/horizons_zero", lambda: _train(horizons=[0, 100]), "config.horizons"),
    Case("bco/config/val_seed_is_test_seed", lambda: _train(val_seed=0), "config.val_seed"),
    Case("bco/config/num_val_seeds_zero", lambda: _train(num_val_seeds=0),
         "config.num_val_seeds"),
    Case("bco/config/step_grid_without_1", lambda: _train(step_grid=[0.5, 0.25, 2**-0.5]),
         "config.step_grid"),
    Case("bco/config/step_grid_negative", lambda: _train(step_grid=[1.0, -0.25, 2**-0.5]),
         "config.step_grid"),
    Case("bco/config/variation_dims_zero", lambda: _train(variation_dims=[0, 2]),
         "config.variation_dims"),
]
