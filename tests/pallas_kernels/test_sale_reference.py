import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels.sale import reference as R
from pallas_kernels.sale.synthetic import structured_qkv


def structured(n=1024, d=32, hq=4, hk=2, seed=0):
    return structured_qkv(n, d, hq, hk, seed=seed)


@pytest.mark.parametrize("bits", [8, 4])
def test_quantization_round_trip(bits):
    x = jax.random.normal(jax.random.key(0), (2, 3, 128, 16)) * 3.0
    codes, scale = R.quantize_blocks(x, 32, bits)
    assert codes.dtype == jnp.int8 and int(jnp.abs(codes).max()) <= R.QMAX[bits]
    err = jnp.abs(R.dequantize_blocks(codes, scale, 32) - x).reshape(2, 3, 4, 32, 16)
    assert bool(jnp.all(err <= scale / 2 + 1e-6))


def test_smoothing_correction_is_exact_without_quantization():
    q, k, _ = structured(n=256)
    exact = jnp.einsum("bhnd,bhmd->bhnm", q, jnp.repeat(k, 2, 1)) / jnp.sqrt(32.0)
    np.testing.assert_allclose(R.estimate_scores(q, k, bits=None), exact, atol=2e-4)
    err8 = float(jnp.abs(R.estimate_scores(q, k, bits=8) - exact).max())
    err4 = float(jnp.abs(R.estimate_scores(q, k, bits=4) - exact).max())
    assert err8 < 0.2 < err4 < 3.0  # int4 is coarser but still informative


@pytest.mark.parametrize("causal", [False, True])
def test_all_blocks_kept_equals_dense_attention(causal):
    q, k, v = structured(n=256)
    out, keep = R.sale_attention(q, k, v, 0.0, causal=causal)
    if not causal:
        assert bool(keep.all())
    np.testing.assert_allclose(out, R.dense_attention(q, k, v, causal), atol=1e-5)


@pytest.mark.heavy
@pytest.mark.parametrize("causal", [False, True])
def test_density_falls_with_tau_and_recall_at_default_tau(causal):
    q, k, v = structured()
    dens = [float(R.sale_attention(q, k, v, t, causal=causal)[1].mean())
            for t in (0.0, 1e-4, 1e-3, 8e-3)]
    assert all(a >= b for a, b in zip(dens, dens[1:], strict=False)) and dens[-1] < 0.6 * dens[0]
    _, keep = R.sale_attention(q, k, v, R.DEFAULT_TAU, causal=causal)
    assert float(R.attention_recall(q, k, keep, causal=causal).min()) >= 0.99


def test_always_kept_blocks_cover_sink_local_and_diagonal():
    base = np.asarray(R.always_kept_blocks(512, R.BlockSizes(), causal=True))
    assert base[:, 0].all()  # sink
    for i in range(8):
        assert base[i, 2 * i] and base[i, 2 * i + 1]  # diagonal (2 key blocks per row block)
        assert not base[i, 2 * i + 2:].any()  # causal
        assert base[i, max(0, 2 * i - 4):2 * i].all()  # 128-key local window


def test_calibration_meets_theta_per_head():
    q, k, v = structured(n=512)
    for theta in (1e-3, 1e-4):
        tau = R.calibrate_tau(q, k, v, theta)
        out, _ = R.sale_attention(q, k, v, tau)
        err = jnp.abs(out - R.dense_attention(q, k, v)).mean((0, 2, 3))
        assert bool(jnp.all(err < theta))
    assert bool(jnp.all(R.calibrate_tau(q, k, v, 1e-4) <= R.calibrate_tau(q, k, v, 1e-3)))


@pytest.mark.heavy
@pytest.mark.parametrize("causal", [False, True])
def test_any_length_blocks_live_on_the_padded_grid(causal):
    q, k, v = structured(n=200)  # 200 = 3 x 64 + 8: the last row block is mostly padding
    out, keep = R.sale_attention(q, k, v, 0.0, causal=causal)
    assert keep.shape == (1, 4, 4, 8)
    assert not bool(keep[..., 7].any())  # keys 224..255 are all padding: never kept
    np.testing.assert_allclose(out, R.dense_attention(q, k, v, causal), atol=1e-5)
    _, keep = R.sale_attention(q, k, v, R.DEFAULT_TAU, causal=causal)
    recall = R.attention_recall(q, k, keep, causal=causal)
    assert float(recall.min()) > 0.99 and bool(jnp.all(recall <= 1.0 + 1e-6))


def test_causal_density_counts_valid_blocks_only():
    n = 256
    dense = jnp.ones((1, 2, 4, 8), bool)
    np.testing.assert_allclose(R.causal_density(dense, n), 1.0)
    np.testing.assert_allclose(R.causal_density(dense, n, causal=False), 1.0)
    base = R.always_kept_blocks(n, R.BlockSizes(), causal=True)[None, None]
    valid = int(R.always_kept_blocks(n, R.BlockSizes(64, 32, n + 1), causal=True).sum())
    assert valid == 2 + 4 + 6 + 8  # blocks on or below the diagonal
    np.testing.assert_allclose(R.causal_density(base, n), float(base.sum()) / valid)


def test_log_space_keep_test_equals_the_exp_form():
    q, k, _ = structured(n=256)
    m, l_sum = R.row_stats(q, k)
    ras = jnp.exp(R.estimate_scores(q, k) - m) / l_sum
    by_exp = ras.reshape(1, 4, 4, 64, 8, 32).max((3, 5))
    np.testing.assert_allclose(R.block_ras_max(q, k), by_exp, rtol=1e-5)


def test_bad_input():
    q, k, v = structured(n=128)
    with pytest.raises(ValueError, match="GQA"):
        R.sale_attention(q[:, :3], k, v, 0.0)
    with pytest.raises(ValueError, match="`k`"):
        R.sale_attention(q, k[..., :16], v, 0.0)
    with pytest.raises(ValueError, match="bits"):
        R.quantize_blocks(q, 64, 2)
    with pytest.raises(ValueError, match="multiple"):
        R.BlockSizes(block_q=48, block_k=32)
    with pytest.raises(ValueError, match="theta"):
        R.calibrate_tau(q, k, v, 0.0)


@pytest.mark.parametrize("causal", [False, True])
def test_row_recall_matches_numpy_and_averages_to_recall(causal):
    """attention_row_recall against a numpy softmax with the kept blocks expanded by hand."""
    rng = np.random.default_rng(3)
    b, hq, hk, n, d = 1, 4, 2, 24, 8
    q, k = (rng.normal(size=(b, h, n, d)).astype(np.float32) for h in (hq, hk))
    sizes = R.BlockSizes(8, 8, local=8)
    keep = rng.random((b, hq, n // 8, n // 8)) < 0.5
    got = np.asarray(R.attention_row_recall(jnp.asarray(q), jnp.asarray(k), jnp.asarray(keep),
                                            sizes, causal))
    kk = np.repeat(k, hq // hk, axis=1).astype(np.float64)
    s = np.einsum("bhnd,bhmd->bhnm", q.astype(np.float64), kk) / np.sqrt(d)
    if causal:
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    elem = np.kron(keep, np.ones((8, 8))).astype(bool)
    want = np.where(elem, p, 0.0).sum(-1)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(np.asarray(R.attention_recall(q, k, keep, sizes, causal)),
                               got.mean(-1), rtol=1e-6)
