"""``jaxlab.attention.compare``: SALE's accuracy comparison on a user's q, k, v, and the
accuracy script's paired rows are the same computation."""

import jax
import numpy as np
import pytest

from jaxlab import attention
from jaxlab.attention import comparison
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


@pytest.mark.heavy
def test_slices_metrics_match_a_numpy_reference():
    q, k, v = _qkv()
    prob = attention.AttentionProblem(q, k, v, causal=True, sizes=SIZES)
    qi, ki, vi = comparison.item_slices(prob, "test", np.arange(4), 3)  # slices 3 .. 6
    for j, flat in enumerate((3, 4, 5, 6)):
        b, h = divmod(flat, 4)
        np.testing.assert_array_equal(np.asarray(qi[0, j]), q[b, h])
        np.testing.assert_array_equal(np.asarray(ki[0, j]), k[b, h // 2])  # GQA
    dense = comparison.slice_metrics(qi, ki, vi, 0.0, causal=True, sizes=SIZES)
    np.testing.assert_allclose(dense["error"], 0.0, atol=1e-5)
    np.testing.assert_allclose(dense["recall"], 1.0, rtol=1e-5)
    np.testing.assert_allclose(dense["density"], 1.0)
    # the static pattern: attention over the always-kept blocks only, brute force in numpy
    static = comparison.slice_metrics(qi, ki, vi, np.inf, causal=True, sizes=SIZES)
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


def test_compare_tunes_tau_on_tuning_slices_and_censors_above_tolerance():
    q, k, v = _qkv()
    prob = attention.AttentionProblem(q, k, v, causal=True, sizes=SIZES)
    out = attention.compare(jax.random.key(0), prob, tuning=4, seeds=4, resamples=200,
                            progress=False)
    sale = out.contenders["sale"]
    assert [p["tau"] for p, _ in sale.tuning] == list(comparison.TAU_GRID)
    assert sale.params == min(sale.tuning, key=lambda r: r[1])[0]
    # test values: density, or 1.0 where the relative error exceeds the tolerance
    qi, ki, vi = comparison.item_slices(prob, "test", np.arange(4), 4)
    m = comparison.slice_metrics(qi, ki, vi, sale.params["tau"], causal=True, sizes=SIZES)
    np.testing.assert_allclose(sale.values, np.where(m["error"] > 0.05, 1.0, m["density"]))
    np.testing.assert_array_equal(sale.censored, m["error"] > 0.05)
    assert out.contenders["dense"].statistic == 1.0
    assert [(g.goal.a, g.goal.b) for g in out.goals] == [("sale", "dense")]
    strict = attention.compare(jax.random.key(0), prob, contenders=["static", "dense"],
                               tuning=0, seeds=4, tolerance=1e-9, progress=False)
    assert strict.contenders["static"].censored.all()
    assert strict.contenders["static"].statistic == 1.0
    assert "censored 4/4" in strict.table()
    err = attention.compare(jax.random.key(0), prob, tuning=4, seeds=4, metric="error",
                            progress=False)
    assert not err.higher_is_better and err.contenders["sale"].params["tau"] == 1e-3
    assert [(g.goal.a, g.goal.b) for g in err.goals] == [("sale", "static")]


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
    for metric, d in got.items():
        want = attention.compare(jax.random.key(3), prob, tuning=4, seeds=4, metric=metric,
                                 tau_grid=(1e-3, 3e-2), progress=False).to_dict()
        for x in (d, want):
            for r in x["contenders"].values():
                r.pop("compile_s"), r.pop("run_s")
        assert d == want, metric
    assert set(got) == set(comparison.METRICS)


@pytest.mark.parametrize("kwargs, match", [
    ({"problem": (1, 2, 3)}, "problem"),
    ({"seeds": 9}, "seeds"),
    ({"metric": "speed"}, "metric"),
    ({"contenders": ["sale", "flash"]}, "contenders"),
    ({"tolerance": 0.0}, "tolerance"),
    ({"tau_grid": (-1.0,)}, "tau_grid"),
    ({"problem": attention.AttentionProblem(np.zeros((1, 3, 8, 4)), np.zeros((1, 2, 8, 4)),
                                            np.zeros((1, 2, 8, 4)))}, "Hq a multiple"),
])
def test_bad_calls_name_the_argument(kwargs, match):
    q, k, v = _qkv(batch=1)
    args = {"problem": attention.AttentionProblem(q, k, v, sizes=SIZES), "tuning": 0,
            "seeds": 4, "contenders": ["static", "dense"], "progress": False, **kwargs}
    with pytest.raises((ValueError, TypeError), match=match):
        attention.compare(jax.random.key(0), args.pop("problem"), **args)
