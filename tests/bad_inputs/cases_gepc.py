"""Bad-input cases for jaxlab.gepc (residual, schedule, scoring, baselines, data, training)."""


import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab import gepc
from jaxlab.core import protocol
from jaxlab.gepc import (
    baselines,
    comparison,
    data,
    features,
    groups,
    residual,
    schedule,
    scoring,
    train,
)
from jaxlab.gepc import model as gepc_model
from tests.bad_inputs.harness import Case, train_smoke

TS = [0.01, 0.02]


def _x(b=2, s=8, seed=0):
    return jax.random.uniform(jax.random.key(seed), (b, s, s, 1), minval=-1, maxval=1)


def _with(x, idx, value):
    x = np.array(x, np.float32)
    x[idx] = value
    return x


def _gmm_x(n=40, seed=0):
    return np.random.default_rng(seed).normal(size=(n, 2))


def _score(x, t):
    return -x


def _eps(x, t):
    return 0.1 * x


def _feats(n=50, t=3, g=2, seed=0):
    return np.abs(1.0 + 0.2 * np.random.default_rng(seed).normal(size=(n, t, g)))


def _scorer():
    return scoring.fit(_feats(), num_t=2)


def _residuals(**kw):
    args = {"score_fn": _score, "x0": _x(), "key": jax.random.key(0), "ts": TS}
    args.update(kw)
    return residual.gepc_residuals(**args)


def _train_eval(**changes):
    return train_smoke("gepc", **changes)


def _problem(**kw):
    x = np.asarray(_x(4, 8))
    return comparison.OODProblem(**{"eps_fn": _eps, "x_fit": x, "x_id": x, "x_ood": x, **kw})


@functools.cache
def _unet():
    """A tiny UNet and abstract params (shapes only: the checks fire before any use)."""
    model = gepc_model.UNet((8, 8, 8))
    params = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 8, 8, 1)),
                            jnp.zeros(1))
    return model, params


def _fitted_score_norm():
    return baselines.fit("score_norm", np.abs(_feats()[:, 0, 0]))


def _train_model(**kw):
    args = {"images": np.asarray(_x(4, 8)), "steps": 2,
            "batch_size": 2, "num_chunks": 1, "channels": (8, 8, 8)}
    args.update(kw)
    return train.train_score_model(**args)[2]


CASES = [
    # --- residual -------------------------------------------------------------------------
    Case("gepc/residuals/x0_nan", lambda: _residuals(x0=_with(_x(), (0, 1, 1, 0), np.nan)),
         "x0"),
    Case("gepc/residuals/ts_zero", lambda: _residuals(ts=[0.0, 0.1]), "ts"),
    Case("gepc/residuals/ts_above_T", lambda: _residuals(ts=[0.5, 1.5]), "ts"),
    Case("gepc/residuals/ts_nan", lambda: _residuals(ts=[np.nan]), "ts"),
    Case("gepc/residuals/rho_zero", lambda: _residuals(rho=0.0), "rho"),
    Case("gepc/residuals/rho_above_one", lambda: _residuals(rho=1.5), "rho"),
    Case("gepc/residuals/group_unknown", lambda: _residuals(group=("hflip", "shear")),
         "group"),
    Case("gepc/residuals/score_fn_shape", lambda: _residuals(
        score_fn=lambda x, t: x.mean((1, 2, 3))), "score_fn"),
    Case("gepc/residuals/x0_3d", lambda: _residuals(x0=jnp.zeros((8, 8, 1))), "x0"),
    Case("gepc/top_rho_pool/rho_zero", lambda: residual.top_rho_pool(_x(), 0.0), "rho"),
    Case("gepc/top_rho_pool/rho_two", lambda: residual.top_rho_pool(_x(), 2.0), "rho"),
    Case("gepc/top_rho_pool/m_3d", lambda: residual.top_rho_pool(jnp.ones((2, 8, 8)), 0.3),
         "m"),
    Case("gepc/residuals/noise_shape", lambda: _residuals(noise=jnp.zeros((1, 2, 8, 8, 1))),
         "noise"),
    Case("gepc/consistency_features/rho_zero", lambda: residual.consistency_features(
        jax.random.key(0), _score, _x(), TS, rho=0.0), "rho"),
    Case("gepc/consistency_features/x0_nan", lambda: residual.consistency_features(
        jax.random.key(0), _score, _with(_x(), (0, 1, 1, 0), np.nan), TS), "x0"),
    # --- schedule -------------------------------------------------------------------------
    Case("gepc/schedule/sqrt_abar_nan", lambda: schedule.t_from_sqrt_alpha_bar(np.nan),
         "sqrt_abar"),
    Case("gepc/schedule/sqrt_abar_zero", lambda: schedule.t_from_sqrt_alpha_bar(0.0),
         "sqrt_abar"),
    Case("gepc/schedule/alpha_bar_t_above_one", lambda: schedule.alpha_bar(2.0), "t"),
    Case("gepc.schedule.noise: negative t", lambda: schedule.noise(
        _x(), _x(seed=1), jnp.array([-0.5, 0.1])), "t"),
    # --- scoring --------------------------------------------------------------------------
    Case("gepc/fit/features_nan", lambda: scoring.fit(_with(_feats(), (0, 0, 0), np.nan)),
         "features"),
    Case("gepc/fit/features_negative", lambda: scoring.fit(
        _with(_feats(), (0, 0, 0), -1.0), log_features=True), "features"),
    Case("gepc/fit/one_row", lambda: scoring.fit(_feats(1)), "features"),
    Case("gepc/fit/num_t_zero", lambda: scoring.fit(_feats(), num_t=0), "num_t"),
    Case("gepc/score/features_nan", lambda: scoring.score(
        _scorer(), _with(_feats(5), (0, 0, 0), np.nan)), "features"),
    Case("gepc/score/features_too_few_t", lambda: scoring.score(_scorer(), _feats(5, t=1)),
         "features"),
    Case("gepc/score/features_wrong_g", lambda: scoring.score(_scorer(), _feats(5, g=3)),
         "features"),
    Case("gepc/fit_official/features_nan", lambda: scoring.fit_official(
        _with(_feats(), (0, 0, 0), np.nan)), "features"),
    Case("gepc/fit_official/one_row", lambda: scoring.fit_official(_feats(1)), "features"),
    Case("gepc/fit_official/num_t_zero", lambda: scoring.fit_official(_feats(), num_t=0),
         "num_t"),
    Case("gepc/fit_official/agg_feat_unknown", lambda: scoring.fit_official(
        _feats(), agg_feat="max"), "agg_feat"),
    Case("gepc/official_bandwidth/one_row", lambda: scoring.official_bandwidth(
        jnp.ones((1, 2))), "x"),
    Case("gepc/kde/bandwidth_zero", lambda: scoring.kde_log_density(
        jnp.ones((5, 2)), jnp.array([0.1, 0.0]), jnp.ones((3, 2))), "bandwidth"),
    Case("gepc/kde/x_columns", lambda: scoring.kde_log_density(
        jnp.ones((5, 2)), jnp.array([0.1, 0.1]), jnp.ones((3, 3))), "x"),
    Case("gepc/silverman/one_row", lambda: scoring.silverman_bandwidth(jnp.ones((1, 2))), "x"),
    Case("gepc/fit_gmm/x_nan", lambda: scoring.fit_gmm(_with(np.ones((20, 2)), (0, 0),
                                                            np.nan), 2), "x"),
    Case("gepc/fit_gmm/iters_zero", lambda: scoring.fit_gmm(
        np.random.default_rng(0).normal(size=(20, 2)), 2, iters=0), "iters"),
    Case("gepc/gmm_nll/x_columns", lambda: scoring.gmm_nll(scoring.fit_gmm(
        np.random.default_rng(0).normal(size=(20, 2)), 2), np.ones((3, 4))), "x"),
    # --- baselines ------------------------------------------------------------------------
    Case("gepc/score_norm/t_zero", lambda: baselines.score_norm(jax.random.key(0), _eps, _x(),
                                                                t=0.0), "t"),
    Case("gepc/score_norm/num_noise_zero", lambda: baselines.score_norm(
        jax.random.key(0), _eps, _x(), num_noise=0), "num_noise"),
    Case("gepc/score_norm/x0_nan", lambda: baselines.score_norm(
        jax.random.key(0), _eps, _with(_x(), (0, 0, 0, 0), np.nan)), "x0"),
    Case("gepc/msma/ts_above_one", lambda: baselines.msma_features(_eps, _x(), [0.1, 2.0]),
         "ts"),
    Case("gepc/diffpath/num_steps_zero", lambda: baselines.diffpath_features(
        _eps, _x(), num_steps=0), "num_steps"),
    Case("gepc/diffpath/t0_negative", lambda: baselines.diffpath_features(
        _eps, _x(), t0=-0.5), "t0"),
    Case("gepc/msma_times/sigma_max_inf", lambda: baselines.msma_times(0.02, np.inf),
         "sigma_max"),
    Case("gepc/msma_times/sigma_max_nan", lambda: baselines.msma_times(0.02, np.nan),
         "sigma_max"),
    Case("gepc/ddim_inversion_eps/num_steps_zero", lambda: baselines.ddim_inversion_eps(
        _eps, _x(), 0, 1e-3), "num_steps"),
    Case("gepc/ddim_inversion_eps/t0_zero", lambda: baselines.ddim_inversion_eps(
        _eps, _x(), 4, 0.0), "t0"),
    Case("gepc/ddim_inversion_eps/t0_past_end", lambda: baselines.ddim_inversion_eps(
        _eps, _x(), 4, 0.9995), "t0"),
    Case("gepc/ddim_inversion_eps/x0_nan", lambda: baselines.ddim_inversion_eps(
        _eps, _with(_x(), (0, 0, 0, 0), np.nan), 4, 1e-3), "x0"),
    Case("gepc/ddim_inversion_eps/x0_3d", lambda: baselines.ddim_inversion_eps(
        _eps, _x()[..., 0], 4, 1e-3), "x0"),
    Case("gepc/fit_gmm_search/components_fractional", lambda: scoring.fit_gmm_search(
        _gmm_x(), components=(1, 2.5), folds=2), "components"),
    Case("gepc/fit_gmm_search/components_nan", lambda: scoring.fit_gmm_search(
        _gmm_x(), components=(np.nan,), folds=2), "components"),
    Case("gepc/fit_gmm_search/components_bool", lambda: scoring.fit_gmm_search(
        _gmm_x(), components=(True,), folds=2), "components"),
    Case("gepc/gmm_search_nll/x_nan", lambda: scoring.gmm_search_nll(
        scoring.fit_gmm_search(_gmm_x(), components=(1,), covariance_types=("diag",),
                               folds=2), _with(np.zeros((3, 2)), (1, 0), np.nan)), "x"),
    Case("gepc/denoising_error_map/ts_zero", lambda: baselines.denoising_error_map(
        jax.random.key(0), _eps, _x(), [0.0]), "ts"),
    Case("gepc/denoising_error_map/x0_nan", lambda: baselines.denoising_error_map(
        jax.random.key(0), _eps, _with(_x(), (0, 0, 0, 0), np.nan), TS), "x0"),
    # --- data / training ------------------------------------------------------------------
    Case("gepc/split/labels_2d", lambda: data.stratified_split(
        np.zeros((4, 2), int), [0], 1, 0, 1, 0), "labels"),
    Case("gepc/split/labels_float", lambda: data.stratified_split(
        np.zeros(10), [0], 1, 0, 1, 0), "labels"),
    Case("gepc/split/id_classes_missing", lambda: data.stratified_split(
        np.repeat(np.arange(3), 10), [0, 5], 2, 2, 2, 2), "id_classes"),
    Case("gepc/split/id_classes_repeated", lambda: data.stratified_split(
        np.repeat(np.arange(3), 10), [0, 0], 2, 2, 2, 2), "id_classes"),
    Case("gepc.data.stratified_split: train_per_class 0", lambda: data.stratified_split(
        np.repeat(np.arange(3), 10), [0], 0, 2, 2, 2), "train_per_class"),
    Case("gepc/split/cal_negative", lambda: data.stratified_split(
        np.repeat(np.arange(3), 10), [0], 2, -1, 2, 2), "cal_per_class"),
    Case("gepc/split/too_many_per_class", lambda: data.stratified_split(
        np.repeat(np.arange(3), 10), [0], 5, 5, 5, 2), "train_per_class"),
    Case("gepc/split/num_heldout_too_many", lambda: data.stratified_split(
        np.repeat(np.arange(3), 10), [0], 2, 2, 2, 21), "num_heldout"),
    Case("gepc/clutter/num_zero", lambda: data.clutter(0), "num"),
    Case("gepc/shapes/size_zero", lambda: data.shapes(3, size=0), "size"),
    Case("gepc/embed_targets/images_3d", lambda: data.embed_targets(
        np.zeros((2, 8, 8)), np.ones((1, 3, 3))), "images"),
    Case("gepc/embed_targets/targets_too_big", lambda: data.embed_targets(
        np.zeros((2, 8, 8, 1)), np.ones((1, 9, 9))), "targets"),
    Case("gepc/embed_targets/strength_zero", lambda: data.embed_targets(
        np.zeros((2, 8, 8, 1)), np.ones((1, 3, 3)), strength=0.0), "strength"),
    Case("gepc/data/uniform_noise_size_zero", lambda: data.uniform_noise(3, size=0), "size"),
    Case("gepc.data.sklearn_digits: size 0", lambda: data.sklearn_digits(size=0), "size"),
    Case("gepc.data.image_patches: unknown image name", lambda: data.image_patches(
        ("nope",), num=2), "names"),
    Case("gepc/train/images_nan", lambda: _train_model(
        images=_with(np.asarray(_x(4, 8)), (0, 0, 0, 0), np.nan)), "images"),
    Case("gepc/train/learning_rate_negative", lambda: _train_model(learning_rate=-1e-3),
         "learning_rate"),
    Case("gepc.train.train_score_model: batch_size 0", lambda: _train_model(batch_size=0),
         "batch_size"),
    Case("gepc/train/num_chunks_zero", lambda: _train_model(num_chunks=0), "num_chunks"),
    Case("gepc/train/image_size_odd", lambda: _train_model(images=np.zeros((4, 6, 6, 1))),
         "images"),
    # --- the Algorithm API (detector, init, step) ----------------------------------------
    Case("gepc/detector/sqrt_abars_above_one", lambda: gepc.detector(
        _eps, sqrt_abars=(0.999, 1.5)), "sqrt_abars"),
    Case("gepc/detector/group_unknown", lambda: gepc.detector(_eps, group=("shear",)),
         "group"),
    Case("gepc/detector/num_t_too_many", lambda: gepc.detector(_eps, num_t=9), "num_t"),
    Case("gepc/detector/rho_zero", lambda: gepc.detector(_eps, rho=0.0), "rho"),
    Case("gepc/detector/scorer_unknown", lambda: gepc.detector(_eps, scorer="mvn"), "scorer"),
    Case("gepc/detector/features_unknown", lambda: gepc.detector(_eps, features=("cycle",)),
         "features"),
    Case("gepc/detector/features_empty", lambda: gepc.detector(_eps, features=()), "features"),
    Case("gepc/detector/log_features_official", lambda: gepc.detector(
        _eps, log_features=True), "log_features"),
    Case("gepc/detector/agg_feat_unknown", lambda: gepc.detector(_eps, agg_feat="max"),
         "agg_feat"),
    Case("gepc/init/x_fit_nan", lambda: gepc.detector(_eps).init(
        jax.random.key(0), _with(_x(4), (0, 0, 0, 0), np.nan)), "x_fit"),
    Case("gepc/init/one_image", lambda: gepc.detector(_eps).init(jax.random.key(0), _x(1)),
         "features"),
    Case("gepc/step/x_inf", lambda: gepc.step(
        jax.random.key(0), gepc.init(jax.random.key(0), _x(4), _score, ts=TS),
        _with(_x(2), (1, 2, 2, 0), np.inf), _score, ts=TS), "x"),
    Case("gepc/step/ts_mismatch", lambda: gepc.step(
        jax.random.key(0), gepc.init(jax.random.key(0), _x(4), _score, ts=TS), _x(2),
        _score, ts=TS[:1]), "features"),
    # --- the comparison (jaxlab.gepc.comparison) ----------------------------------------------
    Case("gepc.compare: a tuple of images", lambda: gepc.compare(
        jax.random.key(0), tuple(_problem())[1:], seeds=2, progress=False), "`problem`"),
    Case("gepc.compare: one test image", lambda: gepc.compare(
        jax.random.key(0), _problem(), seeds=1, progress=False), "`seeds`"),
    Case("gepc.comparison.analyse_scores: the two dicts name different methods", lambda: (
        comparison.analyse_scores(jax.random.key(0), {"gepc": np.ones(3)},
                                  {"msma": np.ones(3)})), "`ood_scores`"),
    Case("gepc.comparison.auroc_statistic: ID items only", lambda: (
        comparison.auroc_statistic(np.ones(3), np.array([0, 2, 4]))), "`index`"),
    Case("gepc.compare: a num_t grid past the candidate times", lambda: gepc.compare(
        jax.random.key(0), _problem(), contenders={"gepc": protocol.Builtin(
            "gepc", ({"num_t": 9},))}, tuning=0, seeds=2, progress=False), "`contenders`"),
    Case("gepc.compare: a GMM covariance sklearn lacks", lambda: gepc.compare(
        jax.random.key(0), _problem(), settings={"gmm_covariances": ("banded",)}, tuning=0,
        seeds=2, progress=False), "`settings.gmm_covariances`"),
    Case("gepc.features.fit_keys: n -1", lambda: features.fit_keys(0, -1), "`n`"),
    Case("gepc.features.fit_keys: fractional seed", lambda: features.fit_keys(0.5, 2),
         "`seed`"),
    Case("gepc.features.fit_scorers: unknown method", lambda: features.fit_scorers(
        {"score_norm": np.ones(4)}, methods=("mahalanobis",)), "`methods`"),
    Case("gepc.features.fit_scorers: features of a method missing", lambda: (
        features.fit_scorers({"score_norm": np.ones(4)}, methods=("msma",))),
        "`fit_features`"),
    Case("gepc.features.image_features: 3-D images", lambda: features.image_features(
        jax.random.split(jax.random.key(0), 2), _eps, np.zeros((2, 8, 8))), "`x`"),
    Case("gepc.features.image_features: keys of another count", lambda: (
        features.image_features(jax.random.split(jax.random.key(0), 3), _eps,
                                np.zeros((2, 8, 8, 1)))), "`keys`"),
    Case("gepc.comparison.item_images: a split name, not items", lambda: (
        comparison.item_images("train")), "`items`"),
    Case("gepc.features.method_scores: features of another method", lambda: (
        features.method_scores(_fitted_score_norm(), {"msma": np.ones((3, 2))})),
        "`features`"),
    Case("gepc.comparison.scores_to_items: NaN ID score", lambda: (
        comparison.scores_to_items(np.array([0.1, np.nan]), np.array([0.2, 0.3]))),
        "`id_scores`"),
    Case("gepc.comparison.scores_to_items: 2-D OOD scores", lambda: (
        comparison.scores_to_items(np.ones(2), np.ones((2, 2)))), "`ood_scores`"),
    # --- data, groups, models -------------------------------------------------------------
    Case("gepc.data.faces: size 0", lambda: data.faces(size=0), "`size`"),
    Case("gepc.data.mnist: size 0", lambda: data.mnist(size=0), "`size`"),
    Case("gepc.groups.register: inverse None", lambda: groups.register(
        "transpose", lambda x: jnp.swapaxes(x, -3, -2), None), "`inverse`"),
    Case("gepc.groups.register: empty name", lambda: groups.register(
        "", lambda x: x, lambda x: x), "`name`"),
    Case("gepc.residual.score_from_eps: params, not a function", lambda: (
        residual.score_from_eps({"w": np.ones(2)})), "`eps_fn`"),
    Case("gepc.scoring.gmm_component_logpdf: x of another width", lambda: (
        scoring.gmm_component_logpdf(np.ones((3, 4)), scoring.fit_gmm(_gmm_x(20), 2))), "`x`"),
    Case("gepc.train.diffusion_loss: 3-D images", lambda: train.diffusion_loss(
        _unet()[1], _unet()[0], jnp.zeros((2, 8, 8)), jax.random.key(0)), "`x0`"),
    Case("gepc.train.make_eps_fn: params and model swapped", lambda: train.make_eps_fn(
        _unet()[1], _unet()[0]), "`model`"),
    # --- experiment config ----------------------------------------------------------------
    Case("gepc/config/rho_zero", lambda: _train_eval(rho=0.0), "config.rho"),
    Case("gepc/config/sqrt_abars_above_one", lambda: _train_eval(sqrt_abars=[0.9999, 1.2]),
         "config.sqrt_abars"),
    Case("gepc/config/num_t_too_many", lambda: _train_eval(num_t=5), "config.num_t"),
    Case("gepc/config/bootstrap_one", lambda: _train_eval(bootstrap=1), "config.bootstrap"),
    Case("gepc/config/learning_rate_zero", lambda: _train_eval(learning_rate=0.0),
         "config.learning_rate"),
    Case("gepc/config/id_classes_out_of_range", lambda: _train_eval(id_classes=[0, 11]),
         "config.id_classes"),
    Case("gepc/config/group_unknown", lambda: _train_eval(group=["hflip", "shear"]),
         "config.group"),
    Case("gepc/config/image_size_odd", lambda: _train_eval(image_size=10), "config.image_size"),
    Case("gepc/config/msma_sigma_min_zero", lambda: _train_eval(msma_sigma_min=0.0),
         "config.msma_sigma_min"),
    Case("gepc/config/features_unknown", lambda: _train_eval(features=["cycle"]),
         "config.features"),
    Case("gepc/config/agg_feat_unknown", lambda: _train_eval(agg_feat="max"),
         "config.agg_feat"),
    Case("gepc/config/target_size_too_big", lambda: _train_eval(target_size=40),
         "config.target_size"),
    Case("gepc/config/clutter_cal_one", lambda: _train_eval(clutter_cal=1),
         "config.clutter_cal"),
    Case("gepc/config/test_per_class_zero", lambda: _train_eval(test_per_class=0),
         "config.test_per_class"),
    Case("gepc/config/id_dataset_unknown", lambda: _train_eval(id_dataset="cifar"),
         "config.id_dataset"),
]
