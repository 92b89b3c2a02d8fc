import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels.sale import config as C
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.block_sparse_attention import block_sparse_attention
from pallas_kernels.sale.block_sparse_attention_tpu import block_sparse_attention_tpu
from pallas_kernels.sale.common import (
    bits_to_block_mask,
    compact_block_lists,
    lists_from_bits,
    lists_to_block_mask,
    tile_bits,
)
from tests.pallas_kernels.test_sale_reference import structured


@pytest.mark.parametrize("causal", [False, True])
def test_kernel_equals_reference_with_the_same_mask(causal):
    q, k, v = structured(n=256)
    ref, keep = R.sale_attention(q, k, v, R.DEFAULT_TAU, causal=causal)
    assert 0.3 < float(keep.mean()) < 1.0  # really sparse
    out = block_sparse_attention(q, k, v, keep, causal=causal, interpret=True)
    np.testing.assert_allclose(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_all_blocks_kept_equals_dense_at_any_length(causal):
    q, k, v = structured(n=128, hq=4, hk=1)  # GQA 4:1
    q, k, v = (x[:, :, :100] for x in (q, k, v))
    keep = jnp.ones((1, 4, 2, 4), bool)
    out = block_sparse_attention(q, k, v, keep, causal=causal, interpret=True)
    np.testing.assert_allclose(out, R.dense_attention(q, k, v, causal), atol=1e-5)


def test_bf16_within_tier():
    q, k, v = structured(n=128)
    qb, kb, vb = (x.astype(jnp.bfloat16) for x in (q, k, v))
    _, keep = R.sale_attention(q, k, v, R.DEFAULT_TAU)
    out = block_sparse_attention(qb, kb, vb, keep, interpret=True)
    assert out.dtype == jnp.bfloat16
    ref = R.sale_attention(*(x.astype(jnp.float32) for x in (qb, kb, vb)), R.DEFAULT_TAU)[0]
    # bf16 dot operands (P rounded to bf16 before P V), float32 accumulation, bf16 output:
    # within the output's own rounding (half an ulp: 2^-8 relative) plus the 3e-3 tier.
    np.testing.assert_allclose(out.astype(jnp.float32), ref, atol=3e-3, rtol=2 ** -8)
    assert float(jnp.abs(out.astype(jnp.float32) - ref).mean()) < 2e-3


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


def test_tile_bits_round_trip_with_head_packing():
    plan = C.make_plan((1, 4, 256, 32), (1, 2, 256, 32), R.BlockSizes(), C.KernelConfig(
        backend="triton"))
    assert (plan.heads_per_program, plan.sub) == (2, 2)
    mask = jnp.asarray(np.random.default_rng(0).random((1, 4, 4, 8)) < 0.3)
    bits = tile_bits(mask, plan)
    assert bits.shape == (1, 2, 4, 4) and int(bits.max()) < 16
    np.testing.assert_array_equal(bits_to_block_mask(bits, plan), mask)
    np.testing.assert_array_equal(lists_to_block_mask(lists_from_bits(bits), plan), mask)


@pytest.mark.parametrize("causal", [False, True])
def test_tpu_scalar_prefetch_variant_equals_reference(causal):
    q, k, v = structured(n=256)
    ref, keep = R.sale_attention(q, k, v, R.DEFAULT_TAU, causal=causal)
    out = block_sparse_attention_tpu(q, k, v, keep, causal=causal, interpret=True)
    np.testing.assert_allclose(out, ref, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="block_mask"):
        block_sparse_attention_tpu(q, k, v, jnp.ones((1, 4, 4, 3), bool), interpret=True)


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
    with pytest.raises(ValueError, match="block_mask"):  # N = 100: 2 x 4 blocks, not 2 x 3
        fn(q[:, :, :100], k[:, :, :100], v[:, :, :100], jnp.ones((1, 4, 2, 3), bool),
           interpret=True)
