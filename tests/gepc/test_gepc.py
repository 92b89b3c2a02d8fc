import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxlab.gepc import groups, residual, schedule, scoring


@pytest.mark.parametrize("name", sorted(groups.ELEMENTS))
def test_group_inverse_identities(name):
    el = groups.ELEMENTS[name]
    x = jax.random.normal(jax.random.key(0), (2, 6, 6, 3))
    np.testing.assert_array_equal(el.inverse(el.forward(x)), x)
    np.testing.assert_array_equal(el.forward(el.inverse(x)), x)
    # Every element permutes pixels: the multiset of values is unchanged.
    np.testing.assert_array_equal(np.sort(el.forward(x).ravel()), np.sort(np.asarray(x).ravel()))
    if not el.needs_square:
        y = jax.random.normal(jax.random.key(1), (1, 4, 7, 1))
        np.testing.assert_array_equal(el.inverse(el.forward(y)), y)


def test_rotation_needs_square_images():
    with pytest.raises(ValueError, match="square"):
        groups.get(["rot90"], (1, 4, 6, 1))
    with pytest.raises(ValueError, match="unknown group element"):
        groups.get(["shear"], (1, 4, 4, 1))


def test_top_rho_pool_matches_numpy():
    m = np.asarray(jax.random.normal(jax.random.key(2), (3, 5, 5, 2)))
    got = np.asarray(residual.top_rho_pool(jnp.asarray(m), 0.3))
    v = np.abs(m.mean(-1)).reshape(3, -1)
    k = round(0.3 * 25)
    np.testing.assert_allclose(got, np.sort(v, 1)[:, ::-1][:, :k].mean(1), rtol=1e-6)


TS = schedule.t_from_sqrt_alpha_bar(np.array([0.9999, 0.9979]))


def test_residual_vanishes_for_an_exactly_equivariant_score():
    """Isotropic Gaussian N(0, I): s(x) = -x commutes with every pixel permutation."""
    x = jax.random.uniform(jax.random.key(3), (4, 8, 8, 1), minval=-1, maxval=1)
    r = residual.gepc_residuals(jax.random.key(4), lambda xt, t: -xt, x, TS)
    assert r.shape == (4, 2, len(groups.DEFAULT_GROUP))
    np.testing.assert_allclose(r, 0.0, atol=1e-10)


def test_residual_is_positive_when_equivariance_is_broken():
    """Diagonal Gaussian with a non-symmetric per-pixel precision: flips break the score."""
    w = 1.0 + 3.0 * jax.random.uniform(jax.random.key(5), (1, 8, 8, 1))
    x = jax.random.uniform(jax.random.key(6), (4, 8, 8, 1), minval=-1, maxval=1)
    r, maps = residual.gepc_residuals(jax.random.key(7), lambda xt, t: -w * xt, x, TS,
                                      with_maps=True)
    assert np.all(np.asarray(r) > 1e-2)
    assert maps.shape == (4, 2, 8, 8) and np.all(np.asarray(maps) >= 0)


def test_residual_errors():
    x = jnp.zeros((2, 8, 6, 1))
    with pytest.raises(ValueError, match="square"):
        residual.gepc_residuals(jax.random.key(0), lambda xt, t: -xt, x, TS)
    xs = jnp.zeros((2, 8, 8, 1))
    with pytest.raises(ValueError, match="rho"):
        residual.gepc_residuals(jax.random.key(0), lambda xt, t: -xt, xs, TS, rho=0.0)
    with pytest.raises(ValueError, match="ts"):
        residual.gepc_residuals(jax.random.key(0), lambda xt, t: -xt, xs, [0.0])
    with pytest.raises(ValueError, match="ts"):
        residual.gepc_residuals(jax.random.key(0), lambda xt, t: -xt, xs, [1.5])
    with pytest.raises(ValueError, match="x0"):
        residual.gepc_residuals(jax.random.key(0), lambda xt, t: -xt, jnp.zeros((8, 8, 1)), TS)


def test_schedule_inverse():
    for v in (0.99997, 0.9999, 0.9979, 0.9969, 0.5):
        t = schedule.t_from_sqrt_alpha_bar(v)
        np.testing.assert_allclose(np.sqrt(schedule.alpha_bar(t)), v, rtol=1e-5)
    with pytest.raises(ValueError, match="sqrt_abar"):
        schedule.t_from_sqrt_alpha_bar(1.2)


def test_kde_matches_scipy_and_silverman():
    x = np.asarray(jax.random.normal(jax.random.key(8), (300, 2))) * np.array([1.0, 3.0])
    h = np.asarray(scoring.silverman_bandwidth(jnp.asarray(x)))
    iqr = np.subtract(*np.percentile(x, [75, 25], 0))
    np.testing.assert_allclose(h, 0.9 * np.minimum(x.std(0, ddof=1), iqr / 1.34) * 300 ** -0.2,
                               rtol=1e-5)
    q = np.linspace(-4, 4, 7)[:, None].repeat(2, 1)
    got = np.asarray(scoring.kde_log_density(jnp.asarray(x), jnp.asarray(h), jnp.asarray(q)))
    for k in range(2):
        kde = stats.gaussian_kde(x[:, k], bw_method=h[k] / x[:, k].std(ddof=1))
        np.testing.assert_allclose(got[:, k], kde.logpdf(q[:, k]), rtol=1e-4, atol=1e-4)


def test_fit_selects_lowest_cv_times_and_scores_outliers_higher():
    rng = np.random.default_rng(0)
    spread = np.array([0.5, 0.05, 0.1, 0.9])  # relative std per t: lowest CV at t=1, then t=2
    f = np.abs(1.0 + spread[None, :, None] * rng.normal(size=(500, 4, 3)))
    sc = scoring.fit(jnp.asarray(f), num_t=2)
    assert sorted(np.asarray(sc.t_index).tolist()) == [1, 2]
    inliers = np.abs(1.0 + spread[None, :, None] * rng.normal(size=(50, 4, 3)))
    outliers = inliers * 3.0
    assert np.mean(scoring.score(sc, jnp.asarray(outliers))) > np.mean(
        scoring.score(sc, jnp.asarray(inliers)))
    with pytest.raises(ValueError, match="num_t"):
        scoring.fit(jnp.asarray(f), num_t=5)


def test_gmm_density_and_fit():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.normal(-3, 1, (300, 2)), rng.normal(3, 0.5, (300, 2))])
    g = scoring.fit_gmm(x, 2)
    lp = scoring.gmm_component_logpdf(x[:5], g)
    for k in range(2):
        ref = stats.multivariate_normal(g.means[k], np.diag(g.variances[k])).logpdf(x[:5])
        np.testing.assert_allclose(lp[:, k], ref + np.log(g.weights[k]), rtol=1e-6)
    np.testing.assert_allclose(np.sort(g.means[:, 0]), [-3, 3], atol=0.3)
    assert scoring.gmm_nll(g, np.array([[0.0, 10.0]]))[0] > scoring.gmm_nll(g, x).mean()
    with pytest.raises(ValueError, match="num_components"):
        scoring.fit_gmm(x[:3], 4)
    with pytest.raises(ValueError, match="x"):
        scoring.fit_gmm(x[:, 0], 2)


def test_offline_data_shapes_and_errors():
    from jaxlab.gepc import data

    p = data.image_patches(("camera",), num=5, size=8, patch=32)
    assert p.shape == (5, 8, 8, 1) and p.min() >= -1 and p.max() <= 1
    with pytest.raises(ValueError, match="patch"):
        data.image_patches(("camera",), num=2, patch=1000)
    with pytest.raises(ValueError, match="num"):
        data.uniform_noise(0)


# The notebook at smoke size: 247 s at -n 2 (two score models trained, five benchmark
# blocks), so -m slow; the suite's quick run (the README's main command) runs the binary.
@pytest.mark.slow
def test_smoke_experiment(tmp_path):

    from experiments import gepc as exp
    from tests.notebooks import run_notebook

    s, _ = run_notebook("gepc", tmp_path)  # colab/gepc.ipynb at smoke size
    for f in ("summary.json", "auroc.png", "maps.png"):
        assert os.path.getsize(tmp_path / f) > 1000
    assert os.path.isdir(tmp_path / "score_model")
    assert os.path.exists(tmp_path / "score_model" / exp.PROVENANCE)
    assert os.path.exists(tmp_path / "clutter_model" / exp.PROVENANCE)
    assert s["blocks"] == {
        "semantic_far": ["digits_heldout_classes", "mnist", "textures", "faces",
                         "uniform_noise"],
        "group_transforms": ["id_rot90", "id_rot180", "id_hflip", "id_vflip",
                             "id_shift2_wrap", "id_shift2_fill"],
        "invariant_clutter": ["cm_clutter_digits", "cm_clutter_shapes"],
        "invariant_clutter_elsewhere": ["clutter_digits", "clutter_shapes"],
        "digits_elsewhere": ["elsewhere_heldout_classes", "textures", "faces",
                             "uniform_noise"]}
    assert {b: sorted(v) for b, v in s["auroc"].items()} == {
        b: sorted(v) for b, v in s["blocks"].items()}
    for sets in s["auroc"].values():
        for row in sets.values():
            assert set(row) == set(exp.METHODS)
            assert all(v["ci95"][0] <= v["auroc"] <= v["ci95"][1] for v in row.values())
    assert set(s["localisation_pixel_auroc"]) == {"invariant_clutter",
                                                  "invariant_clutter_elsewhere"}
    for block, loc in s["localisation_pixel_auroc"].items():
        assert set(loc) == {"sqrt_abar", *s["blocks"][block]}
        for name in s["blocks"][block]:
            assert set(loc[name]) == {"GEPC map", "denoising-error map"}
            assert all(0.0 <= v["auroc"] <= 1.0 for v in loc[name].values())
    assert s["sizes"]["id_cal"] == 100 and s["sizes"]["id_test"] == 40
    assert s["sizes"]["cm_clutter_cal"] == s["sizes"]["clutter_cal"] == 40
    assert len(s["selected_sqrt_abar"]["id_cal"]) == 2
    assert s["cost_score_evals_per_image"] == {
        "GEPC (official)": 14, "GEPC per-element (ours)": 14, "score norm": 1, "MSMA": 10,
        "DiffPath-6D": 10}
    # the protocol's paired comparison per (block, OOD set): jaxlab.gepc.compare's dict
    assert {b: sorted(v) for b, v in s["comparison"].items()} == {
        b: sorted(v) for b, v in s["blocks"].items()}
    for sets in s["comparison"].values():
        for c in sets.values():
            assert c["metric"] == "AUROC" and c["test_items"] == 80
            assert list(c["contenders"]) == ["gepc", "gepc_per_element", "score_norm",
                                             "msma", "diffpath"]
            assert [(d["a"], d["b"]) for d in c["differences"]] == [
                ("gepc", n) for n in ("gepc_per_element", "score_norm", "msma", "diffpath")]
    rows = exp.headline(s)
    assert rows[0][0].startswith("mean AUROC semantic_far")


@pytest.mark.heavy
def test_detector_is_residuals_then_fit_then_score():
    """The Algorithm reproduces the experiment's path: gepc_residuals -> fit -> score."""
    from jaxlab import gepc
    from tests.gepc import api_example

    alg, (x_fit,), (x,) = api_example.build()
    k_fit, k_x = jax.random.split(jax.random.key(0))
    state = alg.init(k_fit, x_fit)
    _, info = alg.step(k_x, state, x)
    w = 1.0 + 3.0 * jax.random.uniform(jax.random.split(jax.random.key(42), 3)[0], (1, 8, 8, 1))
    eps_fn = lambda xt, t: 0.1 * w * xt  # noqa: E731
    score_fn = residual.score_from_eps(eps_fn)
    ts = schedule.t_from_sqrt_alpha_bar(np.asarray(gepc.SQRT_ABARS))
    r_fit = residual.gepc_residuals(k_fit, score_fn, x_fit, ts)
    r = residual.gepc_residuals(k_x, score_fn, x, ts)
    # official (default): gepc_s = residual averaged over G with the identity -> 1 KDE per t
    ref = scoring.fit_official(r_fit.sum(-1, keepdims=True) / 7.0, 2)
    for a, b in zip(state, ref[:4], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    np.testing.assert_allclose(info.residuals, r, rtol=1e-6)
    np.testing.assert_allclose(info.scores, scoring.score(ref, r.sum(-1, keepdims=True) / 7.0),
                               rtol=1e-5)
    assert info.scores.shape == (4,) and info.residuals.shape == (4, 4, 6)
    assert info.features.shape == (4, 4, 3) and np.all(np.asarray(info.residuals) > 0)
    # per_element (ours): one KDE per (t, g) residual
    alg_pe = gepc.detector(eps_fn, scorer="per_element")
    st_pe = alg_pe.init(k_fit, x_fit)
    ref_pe = scoring.fit(r_fit, 2)
    for a, b in zip(st_pe, ref_pe[:4], strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(alg_pe.step(k_x, st_pe, x)[1].scores, scoring.score(ref_pe, r),
                               rtol=1e-5)


@pytest.mark.heavy
def test_detector_jit_vmap_and_state_unchanged():
    from tests.gepc import api_example

    alg, init_args, step_args = api_example.build()
    keys = jax.random.split(jax.random.key(1), 2)
    init = jax.jit(lambda k: alg.init(k, *init_args))
    step = jax.jit(lambda k, s: alg.step(k, s, *step_args))
    states = jax.vmap(init)(keys)
    new, infos = jax.vmap(step)(keys, states)
    jax.tree.map(np.testing.assert_array_equal, new, states)
    s1, i1 = alg.step(keys[1], alg.init(keys[1], *init_args), *step_args)
    np.testing.assert_allclose(infos.scores[1], i1.scores, rtol=1e-5)
    np.testing.assert_array_equal(states.t_index[1], s1.t_index)
