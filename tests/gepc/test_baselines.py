"""DiffPath-6D and MSMA against independent numpy references; the GMM component search;
the experiment's settings and the full preset's sizes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.gepc import baselines, schedule, scoring


def _abar_np(t):
    s = schedule.S
    f = np.cos((t + s) / (1 + s) * np.pi / 2) ** 2
    return np.clip(f / np.cos(s / (1 + s) * np.pi / 2) ** 2, 1e-5, 1.0)


def _eps_fn(x, t):
    """A smooth nonlinear stand-in for eps_theta (per-image time dependence)."""
    return jnp.tanh(0.7 * x + 0.3 * t[:, None, None, None]) + 0.1 * x**2


def _eps_np(x, t):
    return np.tanh(0.7 * x + 0.3 * t) + 0.1 * x**2


def test_diffpath_6d_matches_a_numpy_ddim_inversion():
    """The official statistics (clear-nus/diffpath save_*_statistics.py) recomputed by a
    plain numpy DDIM inversion loop."""
    x0 = np.asarray(jax.random.uniform(jax.random.key(0), (3, 4, 4, 1), minval=-1, maxval=1))
    n, t0 = 5, 1e-3
    got = np.asarray(baselines.diffpath_features(_eps_fn, jnp.asarray(x0), n, t0))
    ts = np.linspace(t0, 1 - 1e-3, n + 1)
    x = np.sqrt(_abar_np(ts[0])) * x0.astype(np.float64)
    eps = []
    for k in range(n):
        e = _eps_np(x, ts[k])
        eps.append(e)
        a, a_next = _abar_np(ts[k]), _abar_np(ts[k + 1])
        x = np.sqrt(a_next) * (x - np.sqrt(1 - a) * e) / np.sqrt(a) + np.sqrt(1 - a_next) * e
    eps = np.stack(eps, 1)  # [B, n, H, W, C]
    d = np.diff(eps, axis=1) * n
    ref = np.stack([f(v).reshape(3, -1).sum(1) for v in (eps, d)
                    for f in (lambda v: v, lambda v: v**2, lambda v: v**3)], 1)
    np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-4)
    assert got.shape == (3, len(baselines.DIFFPATH_FEATURES))
    # One step: no rate of change.
    one = np.asarray(baselines.diffpath_features(_eps_fn, jnp.asarray(x0), 1))
    np.testing.assert_array_equal(one[:, 3:], 0.0)


def test_msma_grid_is_geometric_in_ve_sigma_and_features_are_clean_input_norms():
    ts = baselines.msma_times(0.02, 2.0, 10)
    sab = np.sqrt(_abar_np(ts))
    sigma = np.sqrt(1 - sab**2) / sab  # the VE level of each VP time
    np.testing.assert_allclose(sigma, np.geomspace(2.0, 0.02, 10), rtol=1e-6)
    x0 = np.asarray(jax.random.normal(jax.random.key(1), (2, 4, 4, 1)))
    got = np.asarray(baselines.msma_features(_eps_fn, jnp.asarray(x0), ts))
    ref = np.stack([np.sqrt((_eps_np(np.sqrt(_abar_np(t)) * x0, t) ** 2).reshape(2, -1)
                            .sum(1)) for t in ts], 1)
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    with pytest.raises(ValueError, match="sigma_max"):
        baselines.msma_times(0.5, 0.1)
    with pytest.raises(ValueError, match="sigma_min"):
        baselines.msma_times(0.0, 1.0)
    with pytest.raises(ValueError, match="levels"):
        baselines.msma_times(0.1, 1.0, 0)


def test_gmm_search_cv_score_and_selection():
    """The chosen setting's held-out log-likelihood equals a hand-rolled k-fold of the same
    pipeline; bimodal data gets more than one component; far points score higher NLL."""
    from sklearn.mixture import GaussianMixture
    from sklearn.model_selection import KFold
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(-3, 1, (150, 2)), rng.normal(3, 0.5, (150, 2))])
    g = scoring.fit_gmm_search(x, components=(1, 2, 4), covariance_types=("full", "diag"),
                               folds=3, seed=0)
    assert g.n_components >= 2
    fold_ll = []
    for tr, te in KFold(3, shuffle=True, random_state=0).split(x):
        sc = StandardScaler().fit(x[tr])
        m = GaussianMixture(g.n_components, covariance_type=g.covariance_type, max_iter=200,
                            random_state=0, reg_covar=1e-6).fit(sc.transform(x[tr]))
        fold_ll.append(m.score(sc.transform(x[te])))
    np.testing.assert_allclose(g.cv_loglik, np.mean(fold_ll), rtol=1e-6)
    nll = scoring.gmm_search_nll(g, np.concatenate([x[:5], [[0.0, 12.0]]]))
    assert nll[-1] > nll[:5].max()
    with pytest.raises(ValueError, match="components"):
        scoring.fit_gmm_search(x, components=(250,), folds=3)
    with pytest.raises(ValueError, match="folds"):
        scoring.fit_gmm_search(x, folds=1)
    with pytest.raises(ValueError, match="covariance_types"):
        scoring.fit_gmm_search(x, covariance_types=("banded",), folds=3)
    with pytest.raises(ValueError, match="x"):
        scoring.fit_gmm_search(np.full((10, 2), np.nan), components=(1,), folds=2)
    with pytest.raises(ValueError, match="x"):
        scoring.gmm_search_nll(g, np.zeros((2, 3)))


@pytest.mark.slow  # builds every full-preset image set (113 s under shared load)
def test_full_preset_sizes():
    """The full preset has >= 400 ID-test images and >= 400 per OOD set (faces: the 200
    scikit-image ships) in every block, and validates."""
    from experiments import gepc as exp
    from experiments.configs.gepc import get_config, validate_config

    c = get_config("full")
    validate_config(c)
    sets = exp.image_sets(c)
    for block, s in exp.settings(c).items():
        test = sets[s["test"].removeprefix(exp.CLUTTER_MODEL_PREFIX)]
        assert len(test) >= 400, block
        for name in s["ood"]:
            n = len(sets[name.removeprefix(exp.CLUTTER_MODEL_PREFIX)])
            assert n >= (200 if name == "faces" else 400), (block, name, n)
    assert set(exp.settings(c)) == set(exp.BLOCKS)


def test_config_checks_name_the_field():
    """Bad GMM-search / clutter-model / MSMA settings raise naming the field."""
    from experiments.configs.gepc import get_config, validate_config

    for field, value in (("gmm_components", [1, 1000]), ("gmm_covariances", ["banded"]),
                         ("gmm_folds", 1), ("train_target", "both"),
                         ("clutter_train_steps", 805), ("msma_sigma_max", 0.01)):
        bad = get_config("quick")
        bad[field] = value
        with pytest.raises(ValueError, match=f"config.{field}"):
            validate_config(bad)


def test_elsewhere_split_uses_the_other_dataset_only():
    """Pretrained elsewhere: ID = the other digit dataset's id_classes, disjoint fit / test,
    held-out classes from the rest; none of it is the score model's training data."""
    from experiments import gepc as exp
    from experiments.configs.gepc import get_config
    from jaxlab.gepc import data

    c = get_config("quick")
    fit, test, held = exp.elsewhere_split(c)
    assert len(fit) == c.elsewhere_fit_per_class * len(c.id_classes)
    assert len(test) == c.test_per_class * len(c.id_classes) and len(held) == c.num_ood
    x, y = data.sklearn_digits(c.image_size)
    flat = {row.tobytes(): label for row, label in zip(x, y, strict=True)}
    assert all(flat[r.tobytes()] in c.id_classes for r in np.concatenate([fit, test]))
    assert all(flat[r.tobytes()] not in c.id_classes for r in held)
    fit_rows = {r.tobytes() for r in fit}
    assert not any(r.tobytes() in fit_rows for r in test)
    mnist_train = {r.tobytes() for r in exp.id_split(c)[0]}
    assert not any(r.tobytes() in mnist_train for r in np.concatenate([fit, test, held]))


@pytest.mark.parametrize("failure", ["nonfinite_score", "fit_raises"])
def test_gmm_search_raises_when_no_candidate_fits(monkeypatch, failure):
    """Every candidate failing (non-finite held-out score, or every fit raising) is a clear
    ValueError naming the search, not a model chosen at a -inf score."""
    from sklearn.mixture import GaussianMixture

    if failure == "nonfinite_score":
        monkeypatch.setattr(GaussianMixture, "score", lambda self, x, y=None: -np.inf)
    else:
        def fail(self, x, y=None):
            raise ValueError("ill-defined empirical covariance")

        monkeypatch.setattr(GaussianMixture, "fit", fail)
    x = np.random.default_rng(0).normal(size=(30, 2))
    with pytest.raises(ValueError, match="no candidate GMM fitted .*`components`"):
        scoring.fit_gmm_search(x, components=(1, 2), covariance_types=("diag",), folds=3)


def test_gmm_search_components_accepts_numpy_ints():
    x = np.random.default_rng(0).normal(size=(30, 2))
    g = scoring.fit_gmm_search(x, components=np.array([1, 2]), covariance_types=("diag",),
                               folds=3)
    assert g.n_components in (1, 2)
