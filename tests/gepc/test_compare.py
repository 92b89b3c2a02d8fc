"""``jaxlab.gepc.compare``: the study's protocol on a user's score model and images, and the
binary's per-(block, OOD set) comparison is the same computation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from jaxlab import gepc
from jaxlab.core import protocol
from jaxlab.gepc import comparison
from tests.gepc.tiny_model import eps_fn, smoke_config


def _config():
    c = smoke_config()
    c.bootstrap = 100
    return c


def _images(key, n, ood=False):
    x = jax.random.uniform(key, (n, 8, 8, 1), minval=-1.0, maxval=1.0)
    bar = jnp.zeros((8, 8, 1)).at[:, 2:4].set(1.0)
    return np.asarray(0.3 * x + (bar.swapaxes(0, 1) if ood else bar))


def _problem(n_fit=20, n_id=8, n_ood=8):
    k = jax.random.split(jax.random.key(3), 3)
    return comparison.OODProblem(eps_fn, _images(k[0], n_fit), _images(k[1], n_id),
                                 _images(k[2], n_ood, ood=True))


@pytest.mark.heavy
def test_binary_comparison_equals_public_compare():
    """The binary's features (per-image keys of ``set_keys``, selected times only), fits and
    ``comparison_section`` give the dict ``gepc.compare`` gives on the same images."""
    from experiments import gepc as exp

    c = _config()
    p = _problem()
    fit_feats = exp.features(c, eps_fn, None, p.x_fit, exp.set_keys(c, "id_cal", 20))
    fits = {"id_cal": fit_feats}
    feats = {u: exp.features(c, eps_fn, None, x, exp.set_keys(c, u, 8),
                             t_index=exp.times_needed(c, u, fits))
             for u, x in (("id_test", p.x_id), ("id_rot90", p.x_ood))}
    assert feats["id_test"]["t_index"].size < len(c.sqrt_abars)  # the subset path
    fitted = exp._fit_all(c, fit_feats)
    section = exp.comparison_section(c, exp._method_scores(c, fitted, feats["id_test"]),
                                     exp._method_scores(c, fitted, feats["id_rot90"]))
    grid = ({"num_t": c.num_t},)
    out = gepc.compare(jax.random.key(c.seed), p, tuning=0, seeds=16,
                       contenders={"gepc": protocol.Builtin("gepc", grid=grid),
                                   "gepc_per_element": protocol.Builtin("gepc_per_element",
                                                                        grid=grid),
                                   "score_norm": "score_norm", "msma": "msma",
                                   "diffpath": "diffpath"},
                       settings=exp.comparison_settings(c), resamples=c.bootstrap,
                       progress=False)
    assert out.to_dict(seconds=False) == section
    assert list(section["contenders"]) == list(comparison.CONTENDERS)


_SETTINGS = gepc.Settings(msma_levels=3, diffpath_steps=2, gmm_components=(1,),
                                gmm_folds=2, batch=4)


@pytest.mark.heavy
def test_compare_tunes_on_tuning_images_and_reports_auroc_of_paired_items(tmp_path):
    p = _problem(n_id=12, n_ood=12)
    seen = []

    def mine(items, problem):  # a user's own scorer: mean brightness of columns 2..3
        is_ood, pos = comparison.item_images(items)
        seen.append((items.split, is_ood.tolist(), pos.tolist()))
        x = np.where(is_ood[:, None, None, None], problem.x_ood[pos], problem.x_id[pos])
        return -x[:, :, 2:4].mean(axis=(1, 2, 3))

    out = gepc.compare(jax.random.key(0), p, contenders={"gepc": "gepc",
                                                          "mine": protocol.Contender(mine),
                                                          "score_norm": "score_norm"},
                       tuning=6, seeds=12, settings=_SETTINGS, resamples=200,
                       progress=False, results_path=tmp_path / "items.jsonl")
    # balanced items, test images after the tuning images, ID even / OOD odd
    assert seen == [("test", [False, True] * 6, [3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8])]
    labels = np.arange(12) % 2 == 1
    for name, r in out.contenders.items():
        assert r.statistic == pytest.approx(roc_auc_score(labels, r.values)), name
    g = out.contenders["gepc"]
    assert [p_["num_t"] for p_, _ in g.tuning] == list(comparison.NUM_T_GRID)
    best = max(range(len(g.tuning)), key=lambda i: g.tuning[i][1])
    assert g.params == g.tuning[best][0]
    assert out.contenders["mine"].statistic == 1.0  # the bar's position separates them
    d = {(x.a, x.b): x for x in out.differences}
    assert d["gepc", "mine"].value == pytest.approx(g.statistic - 1.0)
    assert [(x.goal.a, x.goal.b) for x in out.goals] == [("gepc", "score_norm")]
    assert "AUROC (higher is better), 12 paired test items, tuned on 6" in out.table()
    lines = (tmp_path / "items.jsonl").read_text().count("\n")
    assert lines == 1 + 3 + 3  # the header, gepc tuned at 3 points, 3 contenders tested


@pytest.mark.heavy
def test_item_scores_do_not_depend_on_the_batch():
    p = _problem()
    kw = dict(contenders={"gepc_per_element": protocol.Builtin("gepc_per_element",
                                                                grid=({"num_t": 2},)),
                          "msma": "msma"},
              tuning=0, seeds=10, settings=_SETTINGS, resamples=50, progress=False)
    whole = gepc.compare(jax.random.key(4), p, **kw)
    parts = gepc.compare(jax.random.key(4), p, batch=3, **kw)
    for name in whole.contenders:
        np.testing.assert_allclose(parts.contenders[name].values,
                                   whole.contenders[name].values, rtol=1e-5)


@pytest.mark.heavy
def test_tuning_items_come_from_the_call_not_the_contender():
    """A built-in runs on the images after the call's tuning images, whatever made it: the
    test scores with tuning=4 equal those of the same images scored as the test items of a
    problem that starts at them."""
    p = _problem(n_id=8, n_ood=8)
    kw = dict(contenders={"score_norm": "score_norm", "msma": "msma"}, seeds=6,
              settings=_SETTINGS, resamples=50, progress=False)
    late = gepc.compare(jax.random.key(2), p, tuning=4, **kw)
    shifted = p._replace(x_id=p.x_id[2:], x_ood=p.x_ood[2:])
    early = gepc.compare(jax.random.key(2), shifted, tuning=0, **kw)
    for name in late.contenders:
        np.testing.assert_array_equal(late.contenders[name].values,
                                      early.contenders[name].values)


def test_item_images_start_the_test_split_after_the_tuning_images():
    def items(split, n, tuning):
        index = np.arange(n)
        return protocol.Items(split, index, protocol.item_keys(jax.random.key(0), split, index),
                              tuning)

    is_ood, rows = comparison.item_images(items("tuning", 5, 5))
    assert is_ood.tolist() == [False, True] * 2 + [False] and rows.tolist() == [0, 0, 1, 1, 2]
    is_ood, rows = comparison.item_images(items("test", 4, 5))  # after ceil(5 / 2) = 3 rows
    assert is_ood.tolist() == [False, True] * 2 and rows.tolist() == [3, 3, 4, 4]


def test_default_tuning_holds_both_classes_for_the_default_grid():
    assert comparison.SPEC.tuning >= 2 and len(comparison.NUM_T_GRID) > 1
    with pytest.raises(ValueError, match="`tuning`=8 and `seeds`=16"):
        gepc.compare(jax.random.key(0), _problem(n_id=8, n_ood=8), progress=False)
@pytest.mark.parametrize("kwargs, match", [
    ({"problem": (1, 2)}, "problem"),
    ({"seeds": 20}, "seeds"),
    ({"contenders": ["gepc", "nope"]}, "contenders"),
    ({"contenders": "gepc"}, "contenders"),
    ({"tuning": -1}, "tuning"),
    ({"problem": comparison.OODProblem(eps_fn, np.zeros((1, 8, 8, 1)), np.zeros((8, 8, 8, 1)),
                                       np.zeros((8, 8, 8, 1)))}, "x_fit"),
    ({"problem": comparison.OODProblem(eps_fn, np.zeros((4, 8, 8, 1)), np.zeros((8, 4, 4, 1)),
                                       np.zeros((8, 8, 8, 1)))}, "H, W, C"),
])
def test_bad_calls_name_the_argument(kwargs, match):
    args = {"problem": _problem(), "contenders": {"gepc": protocol.Builtin(
        "gepc", grid=({"num_t": 2},))}, "tuning": 0, "seeds": 4, "progress": False, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        gepc.compare(jax.random.key(0), args.pop("problem"), **args)
