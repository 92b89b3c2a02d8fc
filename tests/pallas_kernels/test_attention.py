import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.attention import attention
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.synthetic import structured_qkv


@pytest.mark.heavy
@pytest.mark.parametrize("causal", [False, True])
def test_sale_impl_close_to_dense_on_structured_inputs(causal):
    qh, kh, vh = structured_qkv(256)
    q, k, v = (jnp.swapaxes(x, 1, 2) for x in (qh, kh, vh))  # [B, N, H, D]
    dense = attention(q, k, v, impl="dense", causal=causal)
    sale = attention(q, k, v, impl="sale", causal=causal)
    assert dense.shape == sale.shape == q.shape
    # O - O~ = (1 - r_i)(O_dropped - O_kept) per row, so mean |O - O~| <= 2 max|v| (1 - recall).
    keep = R.block_keep_mask(qh, kh, R.DEFAULT_TAU, causal=causal)
    recall = float(R.attention_recall(qh, kh, keep, causal=causal).mean())
    assert 0.99 < recall < 1.0
    bound = 2 * float(jnp.abs(v).max()) * (1 - recall)
    assert float(jnp.abs(sale - dense).mean()) <= bound + 1e-6
    exact = attention(q, k, v, impl="sale", causal=causal, tau=0.0)  # every block kept
    np.testing.assert_allclose(exact, dense, atol=1e-5)


def test_bad_impl():
    q = jnp.zeros((1, 64, 2, 32))
    with pytest.raises(ValueError, match="impl"):
        attention(q, q, q, impl="flash")
    with pytest.raises(ValueError, match="`q`"):
        attention(q[0], q, q)


@pytest.mark.parametrize("arg", ["q", "k", "v"])
def test_integer_inputs_raise_type_error_naming_the_argument(arg):
    x = jnp.ones((1, 16, 2, 4), jnp.float32)
    qkv = {"q": x, "k": x, "v": x, arg: x.astype(jnp.int32)}
    for impl in ("dense", "sale"):
        with pytest.raises(TypeError, match=f"`{arg}`"):
            attention(**qkv, impl=impl, sizes=R.BlockSizes(8, 8, 8))


def test_mismatched_shapes_and_tau_raise():
    x = jnp.ones((1, 16, 2, 4), jnp.float32)
    with pytest.raises(ValueError, match="`k`"):
        attention(x, jnp.ones((1, 16, 3, 4)), jnp.ones((1, 16, 3, 4)))
    with pytest.raises(ValueError, match="`v`"):
        attention(x, x, jnp.ones((1, 8, 2, 4)))
    with pytest.raises(ValueError, match="N >= 1"):
        attention(x[:, :0], x[:, :0], x[:, :0], impl="sale", sizes=R.BlockSizes(8, 8, 8))
    with pytest.raises(ValueError, match="N >= 1"):
        attention(x[..., :0], x[..., :0], x[..., :0])
    with pytest.raises(TypeError, match="`sizes`"):
        attention(x, x, x, impl="sale", sizes=(8, 8, 8))
    with pytest.raises(ValueError, match="`bits`"):
        attention(x, x, x, impl="sale", bits=2, sizes=R.BlockSizes(8, 8, 8))
    with pytest.raises(ValueError, match="`interpret`"):
        attention(x, x, x, impl="sale", interpret="yes", sizes=R.BlockSizes(8, 8, 8))
    with pytest.raises(ValueError, match="`tau`"):
        attention(x, x, x, impl="sale", tau=jnp.ones(3), sizes=R.BlockSizes(8, 8, 8))
    for tau in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="`tau`"):
            attention(x, x, x, impl="sale", tau=tau, sizes=R.BlockSizes(8, 8, 8))


@pytest.mark.parametrize("n, causal", [
    (45, True),
    pytest.param(45, False, marks=pytest.mark.slow),
    pytest.param(13, True, marks=pytest.mark.slow),
    pytest.param(1, False, marks=pytest.mark.slow),
])
@pytest.mark.heavy
def test_sale_any_length_matches_reference_and_dense(n, causal, request):
    """N not a multiple of b_q (nor of the kernels' 64-key tile): padded keys are masked,
    padded query rows dropped; equals the reference at N and (``-m slow`` cases), with every
    block kept, dense attention. GQA 4:2, D = 20 (padded too)."""
    sizes = R.BlockSizes(8, 4, 8)
    qh, kh, vh = structured_qkv(64, d=20, q_heads=4, kv_heads=2)
    qh, kh, vh = (x[:, :, :n] for x in (qh, kh, vh))
    q, k, v = (jnp.swapaxes(x, 1, 2) for x in (qh, kh, vh))
    tau = 3e-2
    got = attention(q, k, v, impl="sale", causal=causal, tau=tau, sizes=sizes)
    want, keep = R.sale_attention(qh, kh, vh, tau, sizes, causal=causal)
    assert got.shape == q.shape and bool(jnp.isfinite(got).all())
    np.testing.assert_allclose(got, jnp.swapaxes(want, 1, 2), atol=1e-5)
    if n == 45:  # the case is not trivially dense
        assert float(R.causal_density(keep, n, sizes, causal).mean()) < 1.0
    if "slow" in request.keywords:  # dense comparison: -m slow (a second compile)
        dense = attention(q, k, v, impl="dense", causal=causal)
        exact = attention(q, k, v, impl="sale", causal=causal, tau=0.0, sizes=sizes)
        np.testing.assert_allclose(exact, dense, atol=1e-5)
