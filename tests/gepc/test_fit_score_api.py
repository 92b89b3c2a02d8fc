"""The public fit / score of every method and the AUROC with CI, against the scoring
functions they wrap and an independent AUROC (scipy's Mann-Whitney U)."""

import jax
import numpy as np
import pytest
from scipy import stats

from jaxlab.gepc import baselines, ood, residual, scoring


@pytest.fixture(scope="module")
def feats():
    rng = np.random.default_rng(0)
    n, t, g = 60, 3, 4
    return {
        "official": np.abs(rng.normal(size=(n, t, 3))).astype(np.float32) + 0.1,
        "per_element": np.abs(rng.normal(size=(n, t, g))).astype(np.float32) + 0.1,
        "score_norm": rng.normal(size=n).astype(np.float32),
        "msma": rng.normal(size=(n, 5)).astype(np.float32),
        "diffpath": rng.normal(size=(n, 6)).astype(np.float32),
    }


@pytest.mark.heavy
def test_fit_and_score_match_the_scoring_functions(feats):
    train = {k: v[:40] for k, v in feats.items()}
    test = {k: v[40:] for k, v in feats.items()}
    cols = [residual.OFFICIAL_FEATURES.index(n) for n in ("gepc_s", "gepc_s_pair")]
    want = {
        "official": scoring.score(scoring.fit_official(train["official"][..., cols], 2, "mean"),
                                  test["official"][..., cols]),
        "per_element": scoring.score(scoring.fit(train["per_element"], 2),
                                     test["per_element"]),
        "score_norm": test["score_norm"],
        "msma": scoring.gmm_search_nll(scoring.fit_gmm_search(
            train["msma"], components=(1, 2), covariance_types=("diag",), folds=3, seed=1),
            test["msma"]),
        "diffpath": scoring.gmm_search_nll(scoring.fit_gmm_search(
            train["diffpath"], components=(1, 2), covariance_types=("diag",), folds=3,
            seed=1), test["diffpath"]),
    }
    for m in baselines.METHODS:
        f = baselines.fit(m, train[m], num_t=2, official_features=("gepc_s", "gepc_s_pair"),
                          agg_feat="mean", gmm_components=(1, 2), gmm_covariances=("diag",),
                          gmm_folds=3, seed=1)
        assert f.method == m
        got = baselines.score(f, test[m])
        assert got.shape == (20,), m
        np.testing.assert_allclose(got, np.asarray(want[m]), rtol=1e-5, err_msg=m)


def test_bad_method_features_and_fitted_are_named(feats):
    with pytest.raises(ValueError, match="`method`"):
        baselines.fit("mahalanobis", feats["msma"])
    with pytest.raises(ValueError, match="`official_features`"):
        baselines.fit("official", feats["official"], official_features=("gepc_x",))
    with pytest.raises(ValueError, match="`features` must be 2-D"):
        baselines.fit("msma", feats["official"])
    with pytest.raises(ValueError, match="`fitted` must come from baselines.fit"):
        baselines.score(("msma", None), feats["msma"])


def test_auroc_with_ci_matches_mann_whitney_and_covers_it():
    rng = np.random.default_rng(1)
    id_s, ood_s = rng.normal(size=150), rng.normal(size=90) + 1.0
    r = ood.auroc_with_ci(jax.random.key(0), id_s, ood_s, num_resamples=300)
    u = stats.mannwhitneyu(ood_s, id_s).statistic / (len(id_s) * len(ood_s))
    assert r.auroc == pytest.approx(u, rel=1e-5)
    assert r.low < r.auroc < r.high and r.high - r.low < 0.25
    wide = ood.auroc_with_ci(jax.random.key(0), id_s, ood_s, num_resamples=300, level=0.99)
    assert wide.low <= r.low and wide.high >= r.high
    with pytest.raises(ValueError, match="`id_scores` must be 1-D"):
        ood.auroc_with_ci(jax.random.key(0), id_s[:, None], ood_s)


def test_fit_weights_are_scale_free_up_to_float32s_max():
    """The fit's column weights (1 / coefficient of variation) do not change when the
    features are scaled towards float32's max (std's squares would overflow), and equal a
    float64 NumPy reference."""
    rng = np.random.default_rng(0)
    f = rng.uniform(1.0, 3.0, size=(6, 3, 2)).astype(np.float32)
    small = scoring.fit(f, num_t=2)
    huge = scoring.fit(f * np.float32(1e38), num_t=2)
    assert np.all(np.isfinite(np.asarray(huge.weights)))
    np.testing.assert_array_equal(np.asarray(huge.t_index), np.asarray(small.t_index))
    np.testing.assert_allclose(np.asarray(huge.weights), np.asarray(small.weights), rtol=1e-5)
    sel = f.astype(np.float64)[:, np.asarray(small.t_index)].reshape(6, -1)
    cv = sel.std(0) / np.abs(sel.mean(0))
    ref = (1.0 / cv) / (1.0 / cv).sum()
    np.testing.assert_allclose(np.asarray(small.weights), ref, rtol=1e-4)


@pytest.mark.parametrize("fit", [scoring.fit, scoring.fit_official], ids=["fit", "official"])
def test_scores_of_rescaled_features_shift_by_the_log_scale(fit):
    """Features scaled by s = 2^100 (~1e30; a power of two, so exact) score as the unscaled
    ones plus log(s) times the weights' sum (each KDE's log density shifts by -log s),
    not as NaN, inf or one value for every point."""
    rng = np.random.default_rng(1)
    f = rng.uniform(1.0, 3.0, size=(40, 3, 2)).astype(np.float32)
    s = np.float32(2.0 ** 100)
    small, huge = fit(f, num_t=2), fit(f * s, num_t=2)
    expected = np.asarray(scoring.score(small, f[:8]), np.float64) + (
        np.log(2.0) * 100 * float(np.sum(small.weights)))
    got = np.asarray(scoring.score(huge, f[:8] * s), np.float64)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert np.ptp(got) > 1e-3


@pytest.mark.parametrize("log_features", [False, True])
def test_compiled_fits_and_scores_equal_the_op_by_op_run(feats, log_features):
    """``fit``, ``fit_official`` and ``score`` run as one compiled program each; op by op
    (``jax.disable_jit``, every jnp call its own program, as they ran before) they give the
    same times and, to float32 rounding, the same arrays and scores."""
    train, test = feats["per_element"][:40], feats["per_element"][40:]
    off_train, off_test = feats["official"][:40], feats["official"][40:]

    def run():
        pe = scoring.fit(train, 2, log_features)
        off = scoring.fit_official(off_train, 2, "mean")
        return pe, off, scoring.score(pe, test), scoring.score(off, off_test)

    compiled = run()
    with jax.disable_jit():
        eager = run()
    for got, want in zip(compiled[:2], eager[:2], strict=True):
        np.testing.assert_array_equal(np.asarray(got.t_index), np.asarray(want.t_index))
        for name in ("train", "bandwidth", "weights"):
            np.testing.assert_allclose(np.asarray(getattr(got, name)),
                                       np.asarray(getattr(want, name)), rtol=1e-6,
                                       err_msg=name)
    for got, want in zip(compiled[2:], eager[2:], strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
