import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.attention import attention
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.synthetic import structured_qkv


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
    with pytest.raises(ValueError, match="`block_q`"):
        attention(x[:, :12], x[:, :12], x[:, :12], impl="sale", sizes=R.BlockSizes(8, 8, 8))
    for tau in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="`tau`"):
            attention(x, x, x, impl="sale", tau=tau, sizes=R.BlockSizes(8, 8, 8))
