"""``jaxlab.attention``: key padding mask (dense and SALE) against a numpy masked softmax,
the [B, H, N, D] layout, and the kernels' Selection back to a block mask."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.attention import attention, attention_sizes
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.estimate import kept_block_mask, sale_attention_pallas
from pallas_kernels.sale.synthetic import structured_qkv


def np_attention(q, k, v, mask, causal):
    """[B, N, Hq, D] numpy softmax attention with GQA; masked keys excluded; rows with no
    visible key give zeros."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    b, n, hq, d = q.shape
    g = hq // k.shape[2]
    k, v = np.repeat(k, g, axis=2), np.repeat(v, g, axis=2)
    out = np.zeros_like(q)
    for bi in range(b):
        for h in range(hq):
            s = q[bi, :, h] @ k[bi, :, h].T / np.sqrt(d)
            ok = np.broadcast_to(mask[bi][None, :], (n, n)).copy()
            if causal:
                ok &= np.tril(np.ones((n, n), bool))
            for i in range(n):
                if ok[i].any():
                    w = np.exp(s[i][ok[i]] - s[i][ok[i]].max())
                    out[bi, i, h] = (w / w.sum()) @ v[bi, ok[i], h]
    return out


def _qkv(b=2, n=24, hq=4, hk=2, d=8, seed=0):
    ks = jax.random.split(jax.random.key(seed), 3)
    return (jax.random.normal(ks[0], (b, n, hq, d)), jax.random.normal(ks[1], (b, n, hk, d)),
            jax.random.normal(ks[2], (b, n, hk, d)))


@pytest.mark.heavy
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("impl", ["dense", "sale"])
def test_key_mask_matches_numpy_masked_softmax(impl, causal):
    q, k, v = _qkv()
    mask = np.ones((2, 24), bool)
    mask[0, 17:] = False           # right padding
    mask[1, [0, 3, 9, 10, 20]] = False  # arbitrary holes, incl. the first key
    kw = dict(impl=impl, causal=causal, key_mask=jnp.asarray(mask))
    if impl == "sale":
        kw.update(tau=0.0, sizes=attention_sizes(8, 8, 8))  # every block kept: exact
    got = np.asarray(attention(q, k, v, **kw))
    want = np_attention(q, k, v, mask, causal)
    np.testing.assert_allclose(got, want, atol=2e-5)
    if causal:  # query 0 of batch 1 sees only key 0, which is masked: zeros
        np.testing.assert_array_equal(got[1, 0], 0.0)


@pytest.mark.heavy
def test_sale_with_a_mask_drops_blocks_like_without_one():
    """With tau > 0 and nothing masked, the masked path equals the plain SALE path."""
    q, k, v = _qkv(n=32, seed=1)
    sz = attention_sizes(8, 8, 8)
    plain = attention(q, k, v, impl="sale", tau=0.05, sizes=sz)
    masked = attention(q, k, v, impl="sale", tau=0.05, sizes=sz,
                       key_mask=jnp.ones((2, 32), bool))
    np.testing.assert_allclose(masked, plain, atol=2e-5)


def test_layout_bhnd_is_the_transposed_call():
    q, k, v = _qkv()
    t = lambda x: jnp.swapaxes(x, 1, 2)  # noqa: E731
    mask = jnp.arange(24)[None, :] < jnp.array([[20], [24]])
    want = attention(q, k, v, key_mask=mask)
    got = attention(t(q), t(k), t(v), key_mask=mask, layout="bhnd")
    np.testing.assert_allclose(t(got), want, atol=1e-6)
    # the kernels' reference takes [B, H, N, D]: the same numbers without transposes
    np.testing.assert_allclose(attention(t(q), t(k), t(v), layout="bhnd"),
                               R.dense_attention(t(q), t(k), t(v)), atol=1e-6)


def test_bad_key_mask_and_layout_are_named():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="`key_mask` must have shape"):
        attention(q, k, v, key_mask=jnp.ones((2, 23), bool))
    with pytest.raises(TypeError, match="`key_mask` must be a bool array"):
        attention(q, k, v, key_mask=jnp.ones((2, 24)))
    with pytest.raises(ValueError, match="`layout`"):
        attention(q, k, v, layout="nbhd")


@pytest.mark.heavy
def test_selection_back_to_the_reference_block_mask():
    """``kept_block_mask`` of the kernels' Selection is the reference keep mask."""
    qh, kh, vh = structured_qkv(128)  # [B, H, N, D], attention concentrated in few blocks
    sz = R.BlockSizes(16, 16, 16)
    _, sel = sale_attention_pallas(qh, kh, vh, R.DEFAULT_TAU, sz, 8, False, True)
    got = kept_block_mask(sel, qh.shape, kh.shape, sz)
    want = R.block_keep_mask(qh, kh, R.DEFAULT_TAU, sz)
    np.testing.assert_array_equal(got, want)
    assert 0 < float(jnp.mean(got)) < 1  # some blocks dropped: the test can tell
