import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels.sale import reference as R
from pallas_kernels.sale.block_sparse_attention import (
    block_sparse_attention,
    compact_block_lists,
)
from pallas_kernels.sale.block_sparse_attention_tpu import block_sparse_attention_tpu
from tests.pallas_kernels.test_sale_reference import structured


@pytest.mark.parametrize("causal", [False, True])
def test_kernel_equals_reference_with_the_same_mask(causal):
    q, k, v = structured(n=256)
    ref, keep = R.sale_attention(q, k, v, R.DEFAULT_TAU, causal=causal)
    assert 0.3 < float(keep.mean()) < 1.0  # really sparse
    out = block_sparse_attention(q, k, v, keep, causal=causal, interpret=True)
    np.testing.assert_allclose(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_all_blocks_kept_equals_dense(causal):
    q, k, v = structured(n=128, hq=4, hk=1)  # GQA 4:1
    keep = jnp.ones((1, 4, 2, 4), bool)
    out = block_sparse_attention(q, k, v, keep, causal=causal, interpret=True)
    np.testing.assert_allclose(out, R.dense_attention(q, k, v, causal), atol=1e-5)


def test_bf16_within_tier():
    q, k, v = structured(n=128)
    qb, kb, vb = (x.astype(jnp.bfloat16) for x in (q, k, v))
    _, keep = R.sale_attention(q, k, v, R.DEFAULT_TAU)
    out = block_sparse_attention(qb, kb, vb, keep, interpret=True)
    assert out.dtype == jnp.bfloat16
    ref = block_sparse_attention(*(x.astype(jnp.float32) for x in (qb, kb, vb)), keep,
                                 interpret=True)
    np.testing.assert_allclose(out.astype(jnp.float32), ref, atol=3e-3, rtol=3e-3)


def test_compact_block_lists():
    mask = jnp.array([[[[True, False, True, False], [False, False, False, True]]]])
    idx, cnt = compact_block_lists(mask)
    np.testing.assert_array_equal(cnt, [[[2, 1]]])
    np.testing.assert_array_equal(idx[0, 0, 0, :2], [0, 2])
    np.testing.assert_array_equal(idx[0, 0, 1, :1], [3])
    idx2, cnt2 = compact_block_lists(mask[0, 0])  # any leading shape
    np.testing.assert_array_equal(idx2, idx[0, 0])
    np.testing.assert_array_equal(cnt2, cnt[0, 0])
    with pytest.raises(ValueError, match="block_mask"):
        compact_block_lists(jnp.asarray(True))


def test_bad_input():
    q, k, v = structured(n=128)
    with pytest.raises(ValueError, match="block_mask"):
        block_sparse_attention(q, k, v, jnp.ones((1, 4, 2, 3), bool), interpret=True)
    with pytest.raises(ValueError, match="divisible"):
        block_sparse_attention(q[:, :, :96], k[:, :, :96], v[:, :, :96],
                               jnp.ones((1, 4, 1, 3), bool), interpret=True)


@pytest.mark.parametrize("causal", [False, True])
def test_tpu_scalar_prefetch_variant_equals_reference(causal):
    q, k, v = structured(n=256)
    ref, keep = R.sale_attention(q, k, v, R.DEFAULT_TAU, causal=causal)
    out = block_sparse_attention_tpu(q, k, v, keep, causal=causal, interpret=True)
    np.testing.assert_allclose(out, ref, atol=1e-5, rtol=1e-5)
    q1, k1, v1 = structured(n=128, hq=4, hk=1)  # GQA 4:1, every block kept
    dense = block_sparse_attention_tpu(q1, k1, v1, jnp.ones((1, 4, 2, 4), bool), causal=causal,
                                       interpret=True)
    np.testing.assert_allclose(dense, R.dense_attention(q1, k1, v1, causal), atol=1e-5)
    with pytest.raises(ValueError, match="block_mask"):
        block_sparse_attention_tpu(q1, k1, v1, jnp.ones((1, 4, 2, 3), bool), interpret=True)


@pytest.mark.parametrize("fn", [block_sparse_attention, block_sparse_attention_tpu])
def test_block_mask_must_be_boolean_and_keep_a_block_per_row(fn):
    q, k, v = structured(n=128)
    mask = np.ones((1, 4, 2, 4), bool)
    mask[0, 3, 1] = False
    with pytest.raises(ValueError, match="`block_mask`.*1 empty rows"):
        fn(q, k, v, jnp.asarray(mask), interpret=True)
    with pytest.raises(TypeError, match="`block_mask`"):
        fn(q, k, v, jnp.ones((1, 4, 2, 4), jnp.float32), interpret=True)
    with pytest.raises(TypeError, match="`v`"):
        fn(q, k, v.astype(jnp.int32), jnp.ones((1, 4, 2, 4), bool), interpret=True)
