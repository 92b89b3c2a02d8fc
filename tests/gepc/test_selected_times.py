"""The GEPC study evaluates the candidate times on the fit sets only; elsewhere the times
the fitted scorers keep, with the same numbers as the all-times evaluation."""

import jax
import numpy as np
import pytest

from tests.gepc.tiny_model import eps_fn, smoke_config


def _counting(counter):
    """score_fn of ``eps_fn`` that adds the number of images it evaluates to ``counter``
    at run time (once per evaluation, inside ``lax.map`` too)."""
    from jaxlab.gepc import residual

    score = residual.score_from_eps(eps_fn)

    def add(n):
        counter.append(int(n))

    def fn(x, t):
        jax.debug.callback(add, x.shape[0])
        return score(x, t)
    return fn


@pytest.mark.heavy
@pytest.mark.parametrize("with_maps", [False, True])
def test_features_at_selected_times_evaluate_only_them_and_match_all_times(with_maps):
    from experiments import gepc as exp

    c = smoke_config()
    x = np.asarray(jax.random.uniform(jax.random.key(0), (10, 8, 8, 1), minval=-1, maxval=1))
    from jaxlab.gepc import features

    key = features.fit_keys(5, 10)  # one noise key per image
    every, some = [], []
    full = exp.features(c, eps_fn, _counting(every), x, key, with_maps=with_maps)
    sel = np.array([1, 3])
    part = exp.features(c, eps_fn, _counting(some), x, key, with_maps=with_maps, t_index=sel)
    jax.effects_barrier()
    n_t, n_g, padded = len(c.sqrt_abars), len(c.group), 12  # 10 images in batches of 4
    assert full["t_index"].tolist() == list(range(n_t)) and part["t_index"].tolist() == [1, 3]
    # score evaluations: (1 + |G|) images per image and time, padded batches included
    assert sum(every) == n_t * (1 + n_g) * padded
    assert sum(some) == len(sel) * (1 + n_g) * padded
    assert part["residuals"].shape == (10, 2, n_g) and part["official"].shape == (10, 2, 3)
    for k in ("residuals", "official") + (("gepc_map", "denoise_map") if with_maps else ()):
        np.testing.assert_array_equal(part[k], full[k][:, sel], err_msg=k)
    for k in ("score_norm", "msma", "diffpath"):
        np.testing.assert_array_equal(part[k], full[k], err_msg=k)


def test_features_reject_bad_t_index():
    from experiments import gepc as exp

    c = smoke_config()
    x = np.zeros((2, 8, 8, 1), np.float32)
    for bad in ([], [2, 1], [0, 0], [4], [-1, 0], [0.5]):
        with pytest.raises(ValueError, match="t_index"):
            exp.features(c, eps_fn, None, x, jax.random.split(jax.random.key(0), 2),
                         t_index=bad)


def _fake_features(rng, n, n_t, n_g):
    r = rng.gamma(2.0, 0.1, (n, n_t, n_g)).astype(np.float32) * rng.uniform(
        0.5, 2.0, (1, n_t, 1)).astype(np.float32)
    return {"residuals": r,
            "official": np.concatenate([r.mean(-1, keepdims=True),
                                        rng.uniform(0, 1, (n, n_t, 2)).astype(np.float32)], -1),
            "score_norm": rng.normal(size=n).astype(np.float32),
            "t_index": np.arange(n_t, dtype=np.int32)}


def test_scores_at_the_needed_times_equal_the_all_times_scores():
    from experiments import gepc as exp
    from jaxlab.gepc import baselines

    c = smoke_config()
    rng = np.random.default_rng(0)
    n_t, n_g = len(c.sqrt_abars), len(c.group)
    cal = _fake_features(rng, 40, n_t, n_g)
    test = _fake_features(rng, 15, n_t, n_g)
    block = exp.settings(c)[exp.SEMANTIC_FAR]
    assert exp.times_needed(c, block["fit"], {}) is None  # a fit set: every time
    need = exp.times_needed(c, block["test"], {block["fit"]: cal})
    kept = exp.selected_times(c, cal)
    assert need.tolist() == sorted(set(kept["official"].tolist())
                                   | set(kept["per_element"].tolist()))
    fitted = exp._fit_gepc(c, cal)
    at = {k: (v[:, need] if k in ("residuals", "official") else v) for k, v in test.items()}
    at["t_index"] = need.astype(np.int32)
    for m in ("official", "per_element"):
        want = baselines.score(fitted[m], test[exp.FEATURE_KEY[m]])
        got = baselines.score(exp._at_times(fitted[m], at, "test"), at[exp.FEATURE_KEY[m]])
        np.testing.assert_array_equal(got, want, err_msg=m)
    missing = dict(at, t_index=np.asarray([t for t in range(n_t) if t not in need][:len(need)],
                                          np.int32))
    with pytest.raises(ValueError, match="was not evaluated"):
        exp._at_times(fitted["official"], missing, "test")


def test_fit_units_run_before_the_units_that_read_their_times(tmp_path):
    from experiments import gepc as exp

    c = smoke_config()
    units = [u.name for u in exp.EXPERIMENT.units(c, str(tmp_path))]
    fits = {s["fit"] for s in exp.settings(c).values()}
    for s in exp.settings(c).values():
        for name in [s["test"], *s["ood"]]:
            assert units.index(s["fit"]) < units.index(name), (s["fit"], name)
    first = [u for u in units if u not in ("score_model", "clutter_model")][:len(fits)]
    assert set(first) == fits
