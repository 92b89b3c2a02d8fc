import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from jaxlab.core import metrics


@pytest.mark.parametrize("ties", [False, True])
def test_auroc_matches_sklearn(ties):
    rng = np.random.default_rng(0)
    for _ in range(5):
        n = 200
        labels = rng.random(n) < 0.3
        scores = rng.normal(size=n) + labels * 0.8
        if ties:
            scores = np.round(scores, 1)
        np.testing.assert_allclose(metrics.auroc(scores, labels),
                                   roc_auc_score(labels, scores), atol=1e-6)


def test_auroc_vmaps_and_perfect_separation():
    scores = jnp.stack([jnp.arange(10.0), -jnp.arange(10.0)])
    labels = jnp.arange(10) >= 5
    np.testing.assert_allclose(jax.vmap(metrics.auroc, (0, None))(scores, labels), [1.0, 0.0])


def test_auroc_bad_shapes():
    with pytest.raises(ValueError, match="labels"):
        metrics.auroc(jnp.zeros(5), jnp.zeros(4))
    with pytest.raises(ValueError, match="scores"):
        metrics.auroc(jnp.zeros((2, 2)), jnp.zeros((2, 2)))


def test_average_ranks_matches_scipy():
    x = np.array([3.0, 1.0, 2.0, 2.0, 5.0, 1.0])
    np.testing.assert_allclose(metrics.average_ranks(x), stats.rankdata(x))


def test_loglog_slope_recovers_exponent():
    x = np.geomspace(1, 1e4, 20)
    assert metrics.loglog_slope(x, 3.0 * x**0.5) == pytest.approx(0.5, abs=1e-9)
    with pytest.raises(ValueError, match="y"):
        metrics.loglog_slope(x, -x)


def test_mean_and_ci_matches_scipy_interval():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 3))
    m, hw = metrics.mean_and_ci(x)
    lo, hi = stats.t.interval(0.95, 39, loc=x.mean(0), scale=stats.sem(x, axis=0))
    np.testing.assert_allclose(m - hw, lo)
    np.testing.assert_allclose(m + hw, hi)
    with pytest.raises(ValueError, match="replicates"):
        metrics.mean_and_ci(x[:1])


def test_cumulative_regret():
    np.testing.assert_allclose(metrics.cumulative_regret([1.0, 2.0, 3.0], [0.5, 2.0, 1.0]),
                               [0.5, 0.5, 2.5])
    with pytest.raises(ValueError, match="comparator_losses"):
        metrics.cumulative_regret(jnp.zeros(3), jnp.zeros(2))


@pytest.mark.parametrize("scores,labels,arg", [
    ([0.1, np.nan, 0.3, 0.9], [0, 1, 0, 1], "scores"),
    ([0.1, 0.2, 0.3, 0.9], [0.0, np.nan, 0.0, 1.0], "labels"),
    ([0.1, 0.2, 0.3, 0.9], [0, 2, 0, 1], "labels"),
    ([0.1, 0.2, 0.3], [1, 1, 1], "labels"),
    ([0.1, 0.2, 0.3], [False, False, False], "labels"),
])
def test_auroc_rejects_nan_bad_labels_and_one_class(scores, labels, arg):
    with pytest.raises(ValueError, match=f"`{arg}`"):
        metrics.auroc(np.asarray(scores), np.asarray(labels))


def test_auroc_still_jits_and_allows_infinite_scores():
    scores, labels = jnp.array([-jnp.inf, 0.0, 1.0, jnp.inf]), jnp.array([0, 0, 1, 1])
    assert float(metrics.auroc(scores, labels)) == 1.0
    assert float(jax.jit(metrics.auroc)(scores, labels)) == 1.0


def test_regret_slope_and_ci_bad_input():
    with pytest.raises(ValueError, match="`losses`"):
        metrics.cumulative_regret([1.0, np.nan], [0.0, 0.0])
    with pytest.raises(ValueError, match="`x`"):
        metrics.loglog_slope([2.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="`x`"):
        metrics.loglog_slope([2.0], [1.0])
    with pytest.raises(ValueError, match="`axis`"):
        metrics.mean_and_ci(np.ones((3, 2)), axis=2)
    with pytest.warns(RuntimeWarning, match="`samples`"):
        m, _ = metrics.mean_and_ci(np.array([1.0, np.nan, 2.0]))
    assert np.isnan(m)


def test_bootstrap_ci_matches_a_numpy_loop_over_the_same_resamples():
    """Point value, and the percentile interval of the statistic over the resample indices
    ``randint(key, (R, n), 0, n)`` recomputed one by one with scikit-learn's AUROC (paired
    rows; R not a multiple of the chunk, so the last chunk is partial)."""
    rng = np.random.default_rng(0)
    n, r = 60, metrics.BOOTSTRAP_CHUNK * 2 + 37
    labels = rng.integers(0, 2, n).astype(bool)
    scores = rng.normal(size=n) + labels
    key = jax.random.key(3)
    point, lo, hi = metrics.bootstrap_ci(key, metrics.auroc, (scores, labels), r)
    idx = np.asarray(jax.random.randint(key, (r, n), 0, n))
    ref = []
    for i in idx:
        ref.append(roc_auc_score(labels[i], scores[i]) if 0 < labels[i].sum() < n else np.nan)
    want = np.nanpercentile(ref, [2.5, 97.5])
    np.testing.assert_allclose(point, roc_auc_score(labels, scores), rtol=1e-6)
    np.testing.assert_allclose([lo, hi], want, rtol=1e-5)


def test_auroc_keeps_float64_host_scores():
    """Scores 1, 1 + 1e-12, ... are distinct in float64 (equal in float32): labels that
    agree with them give AUROC 1, as scikit-learn says."""
    n = 12
    scores = 1.0 + np.arange(n) * 1e-12
    labels = np.arange(n) >= n // 2
    assert roc_auc_score(labels, scores) == 1.0
    assert float(metrics.auroc(scores, labels)) == 1.0
    rng = np.random.default_rng(5)
    scores = 1.0 + rng.normal(size=50) * 1e-10
    labels = rng.random(50) < 0.5
    assert float(metrics.auroc(scores, labels)) == pytest.approx(
        roc_auc_score(labels, scores), abs=1e-12)


def test_bootstrap_ci_rejects_nan_samples_naming_them():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    with pytest.raises(ValueError, match=r"`samples\[1\]` must not contain NaN"):
        metrics.bootstrap_ci(jax.random.key(0), lambda a, b: np.mean(a - b),
                             (x, np.array([1.0, np.nan, 0.0, 2.0])), 50)
    with pytest.raises(ValueError, match=r"`samples\[0\]` must not contain NaN"):
        metrics.bootstrap_ci(jax.random.key(0), jnp.mean, (jnp.array([1.0, jnp.nan]),), 50)


def test_bootstrap_ci_device_path_matches_host_path(monkeypatch):
    """The jitted, chunked path (large jax.Array samples) gives the host path's interval
    over the same resample indices."""
    rng = np.random.default_rng(2)
    n, r = 40, metrics.BOOTSTRAP_CHUNK + 9
    labels = rng.integers(0, 2, n).astype(bool)
    scores = (rng.normal(size=n) + labels).astype(np.float32)
    key = jax.random.key(7)
    host = metrics.bootstrap_ci(key, metrics.auroc, (scores, labels), r)
    monkeypatch.setattr(metrics, "DEVICE_MIN_SIZE", 0)
    device = metrics.bootstrap_ci(key, metrics.auroc, (jnp.asarray(scores),
                                                       jnp.asarray(labels)), r)
    np.testing.assert_allclose(device, host, rtol=1e-6)


def test_bootstrap_ci_on_host_compiles_nothing_on_a_repeat_call():
    """A fresh lambda on host arrays (as the summaries pass) compiles no XLA program once
    the resample-index program of that shape exists."""
    from experiments.lib import compile_cache

    x, y = np.arange(30.0), np.arange(30.0)[::-1].copy()
    metrics.bootstrap_ci(jax.random.key(0), lambda a, b: np.mean(a - b), (x, y), 100)
    before = compile_cache.tally()
    out = metrics.bootstrap_ci(jax.random.key(1), lambda a, b: a.mean() / b.mean(), (x, y), 100)
    assert (compile_cache.tally() - before).programs == 0
    assert out[1] <= out[0] <= out[2]


@pytest.mark.parametrize("all_pairs", [True, False])
@pytest.mark.parametrize("dtype,entries", [(np.float32, 1), (np.float64, 1), (np.float32, 12)])
def test_bootstrap_auroc_resamples_equal_auroc_of_each_resample_bit_for_bit(
        dtype, entries, all_pairs, monkeypatch):
    """The counted resamples (one ranking of the items) give exactly the float64 ``auroc``
    of every explicit resample, ties included, NaN where a resample has one class (rare
    positives), and agree with scikit-learn; both ways of counting the pairs."""
    if not all_pairs:
        monkeypatch.setattr(metrics, "_AUROC_PAIRS", 0)
    rng = np.random.default_rng(7)
    n, r = 45, 400
    scores = np.round(rng.normal(size=(n, entries)), 1).astype(dtype)  # many ties
    labels = rng.random((n, entries)) < (0.04 if entries == 1 else 0.2)
    scores[labels] += 0.3
    idx = np.asarray(jax.random.randint(jax.random.key(1), (r, n), 0, n))
    got = metrics._auroc_resamples(scores, labels, idx)
    want, sk = [], []
    for i in idx:
        s, lab = scores[i].reshape(-1), labels[i].reshape(-1)
        one_class = lab.all() or not lab.any()
        want.append(np.nan if one_class else float(metrics.auroc(s, lab)))
        sk.append(np.nan if one_class else roc_auc_score(lab, s))
    assert np.isnan(want).any() or entries > 1
    np.testing.assert_array_equal(got, np.array(want))
    np.testing.assert_allclose(got, sk, rtol=0, atol=1e-12)


def test_bootstrap_auroc_equals_the_per_resample_bootstrap(monkeypatch):
    """``bootstrap_auroc`` of rows of entries (images of pixels) and ``bootstrap_ci`` with
    ``metrics.auroc`` give the values of a statistic ranking each resample anew."""
    rng = np.random.default_rng(2)
    maps = np.round(rng.normal(size=(30, 4, 4)), 1).astype(np.float32)
    masks = rng.random((30, 4, 4)) < 0.15
    maps[masks] += 0.5
    key = jax.random.key(4)
    ranked_anew = metrics.bootstrap_ci(
        key, lambda s, lab: metrics.auroc(s.reshape(-1), lab.reshape(-1)), (maps, masks), 300)
    assert metrics.bootstrap_auroc(key, maps, masks, 300) == ranked_anew
    monkeypatch.setattr(metrics, "_AUROC_MAX_ROWS_SQUARED", 0)  # too many rows to count
    assert metrics.bootstrap_auroc(key, maps, masks, 300) == ranked_anew
    s, lab = maps[:, 0, 0], masks[:, 0, 0] | (np.arange(30) < 3)
    assert (metrics.bootstrap_ci(key, metrics.auroc, (s, lab), 300)
            == metrics.bootstrap_ci(key, lambda a, b: metrics.auroc(a, b), (s, lab), 300))


def test_bootstrap_auroc_rejects_bad_input_naming_it():
    x = np.zeros((4, 3))
    with pytest.raises(ValueError, match="`labels`"):
        metrics.bootstrap_auroc(jax.random.key(0), x, np.zeros((4, 2), bool), 10)
    with pytest.raises(ValueError, match="`labels`"):
        metrics.bootstrap_auroc(jax.random.key(0), x, np.zeros((4, 3), bool), 10)
    with pytest.raises(ValueError, match="num_resamples"):
        metrics.bootstrap_auroc(jax.random.key(0), x, np.eye(4, 3, dtype=bool), 1)
