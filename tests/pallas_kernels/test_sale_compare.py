"""``jaxlab.attention.compare``: SALE's accuracy comparison on a user's q, k, v, and the
accuracy script's paired rows are the same computation."""

import jax
import numpy as np
import pytest

from jaxlab import attention
from jaxlab.attention import accuracy, comparison
from jaxlab.core import protocol
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.synthetic import structured_qkv

SIZES = R.BlockSizes(16, 8, 16)


def _qkv(n=64, batch=2, seed=0, heads=(4, 2)):
    qs, ks, vs = zip(*(structured_qkv(n, d=32, q_heads=heads[0], kv_heads=heads[1],
                                      seed=seed + b)
                       for b in range(batch)), strict=True)
    return tuple(np.concatenate(x, axis=0) for x in (qs, ks, vs))


def _numpy_dense(q, k, v, causal):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v, p / p.sum(-1, keepdims=True)


def _items(split, index, tuning_items):
    index = np.asarray(index)
    return protocol.Items(split, index, protocol.item_keys(jax.random.key(0), split, index),
                          tuning_items)


@pytest.mark.heavy
def test_slices_metrics_match_a_numpy_reference():
    q, k, v = _qkv()
    prob = attention.AttentionProblem(q, k, v, causal=True, sizes=SIZES)
    qi, ki, vi = comparison.item_slices(prob, _items("test", np.arange(4), 3))  # slices 3 .. 6
    for j, flat in enumerate((3, 4, 5, 6)):
        b, h = divmod(flat, 4)
        np.testing.assert_array_equal(np.asarray(qi[0, j]), q[b, h])
        np.testing.assert_array_equal(np.asarray(ki[0, j]), k[b, h // 2])  # GQA
    dense = accuracy.slice_metrics(qi, ki, vi, 0.0, causal=True, sizes=SIZES)
    np.testing.assert_allclose(dense["error"], 0.0, atol=1e-5)
    np.testing.assert_allclose(dense["recall"], 1.0, rtol=1e-5)
    np.testing.assert_allclose(dense["density"], 1.0)
    # the static pattern: attention over the always-kept blocks only, brute force in numpy
    static = accuracy.slice_metrics(qi, ki, vi, np.inf, causal=True, sizes=SIZES)
    qn, kn, vn = (np.asarray(x[0], np.float64) for x in (qi, ki, vi))
    out, p = _numpy_dense(qn, kn, vn, True)
    always = np.asarray(R.always_kept_blocks(64, SIZES, True))
    el = always[np.arange(64) // 16][:, np.arange(64) // 8] & np.tril(np.ones((64, 64), bool))
    s = np.where(el, qn @ np.swapaxes(kn, -1, -2) / np.sqrt(32.0), -np.inf)
    ps = np.exp(s - s.max(-1, keepdims=True))
    o_static = (ps / ps.sum(-1, keepdims=True)) @ vn
    np.testing.assert_allclose(static["error"], np.abs(o_static - out).mean((1, 2))
                               / np.abs(out).mean((1, 2)), rtol=1e-3)
    np.testing.assert_allclose(static["recall"], (p * el).sum(-1).mean(-1), rtol=1e-4)
    # valid blocks: holding a (query, key) pair on or below the diagonal
    valid = np.array([[c * 8 <= r * 16 + 15 for c in range(8)] for r in range(4)])
    np.testing.assert_allclose(static["density"], (always & valid).sum() / valid.sum())


def test_compare_tunes_tau_on_tuning_slices_and_reports_three_metrics_of_one_run():
    q, k, v = _qkv()
    prob = attention.AttentionProblem(q, k, v, causal=True, sizes=SIZES)
    out = attention.compare(jax.random.key(0), prob, tuning=4, seeds=4, resamples=200,
                            metrics=("density", "error", "recall"), progress=False)
    sale = out.contenders["sale"]
    assert [p["tau"] for p, _ in sale.tuning] == list(comparison.TAU_GRID)
    assert sale.params == min(sale.tuning, key=lambda r: r[1])[0]
    # test values: density, or 1.0 where the relative error exceeds the tolerance
    qi, ki, vi = comparison.item_slices(prob, _items("test", np.arange(4), 4))
    m = accuracy.slice_metrics(qi, ki, vi, sale.params["tau"], causal=True, sizes=SIZES)
    np.testing.assert_allclose(sale.values, np.where(m["error"] > 0.05, 1.0, m["density"]))
    np.testing.assert_array_equal(sale.censored, m["error"] > 0.05)
    # the other metrics come from the same run, at the tau tuned on density
    np.testing.assert_allclose(out["error"].contenders["sale"].values, m["error"])
    np.testing.assert_allclose(out["recall"].contenders["sale"].values, m["recall"])
    assert out.contenders["dense"].statistic == 1.0
    assert [(g.goal.a, g.goal.b) for g in out.goals] == [("sale", "dense")]
    strict = attention.compare(jax.random.key(0), prob, contenders=["static", "dense"],
                               tuning=0, seeds=4, settings={"tolerance": 1e-9},
                               progress=False)
    assert strict.contenders["static"].censored.all()
    assert strict.contenders["static"].statistic == 1.0
    assert "censored 4/4" in strict.table()
    err = attention.compare(jax.random.key(0), prob, tuning=4, seeds=4, metrics=("error",),
                            goals=comparison.default_goals("error"), progress=False)
    assert not err.higher_is_better and err.contenders["sale"].params["tau"] == 1e-3
    assert [(g.goal.a, g.goal.b) for g in err.goals] == [("sale", "static")]
    assert not err.records  # the metrics not asked for are not kept


def test_script_comparison_equals_public_compare():
    """experiments/sale_accuracy.py's ``comparison_for`` on a smoke source is
    ``attention.compare`` on the sequence-major stack of its layers."""
    from experiments import sale_accuracy as script

    layers = [_qkv(batch=2, seed=s, heads=(2, 1)) for s in (0, 10)]  # 2 layers, 2 sequences
    got = script.comparison_for(layers, SIZES, True, (1e-3, 3e-2), seed=3)
    q = np.concatenate([layers[0][0], layers[1][0]], axis=1)
    k = np.concatenate([layers[0][1], layers[1][1]], axis=1)
    v = np.concatenate([layers[0][2], layers[1][2]], axis=1)
    prob = attention.AttentionProblem(q, k, v, causal=True, sizes=SIZES)
    grid = ({"tau": 1e-3}, {"tau": 3e-2})
    for metric, d in got.items():
        want = attention.compare(jax.random.key(3), prob, tuning=4, seeds=4,
                                 contenders={"sale": protocol.Builtin("sale", grid=grid),
                                             "static": "static", "dense": "dense"},
                                 metrics=(metric,), goals=comparison.default_goals(metric),
                                 progress=False).to_dict(seconds=False)
        d = {f: x for f, x in d.items() if f != "run_id"}
        for r in d["contenders"].values():
            r.pop("compile_s"), r.pop("run_s")
        assert d == want, metric
    assert list(got) == [m.name for m in comparison.METRICS]
