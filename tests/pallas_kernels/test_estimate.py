import numpy as np
import pytest

from pallas_kernels.sale import reference as R
from pallas_kernels.sale.estimate import estimate_and_select, sale_attention_pallas
from tests.pallas_kernels.test_sale_reference import structured


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bits", [8, 4])
def test_selection_kernel_matches_reference(causal, bits):
    q, k, _ = structured(n=256)
    ras, idx, cnt = estimate_and_select(q, k, R.DEFAULT_TAU, bits=bits, causal=causal,
                                        interpret=True)
    ref_ras = R.block_ras_max(q, k, bits=bits, causal=causal)
    np.testing.assert_allclose(ras, ref_ras, rtol=1e-4, atol=1e-7)
    keep = np.asarray(R.block_keep_mask(q, k, R.DEFAULT_TAU, bits=bits, causal=causal))
    np.testing.assert_array_equal(cnt, keep.sum(-1))
    idx, cnt = np.asarray(idx), np.asarray(cnt)
    for bi, h, i in np.ndindex(*cnt.shape):  # the compact list is exactly the kept set
        assert sorted(idx[bi, h, i, :cnt[bi, h, i]].tolist()) == np.flatnonzero(
            keep[bi, h, i]).tolist()


@pytest.mark.parametrize("causal", [False, True])
def test_two_kernels_end_to_end_equal_reference(causal):
    q, k, v = structured(n=256)
    out, cnt = sale_attention_pallas(q, k, v, R.DEFAULT_TAU, causal=causal, interpret=True)
    ref, keep = R.sale_attention(q, k, v, R.DEFAULT_TAU, causal=causal)
    np.testing.assert_allclose(out, ref, atol=1e-5, rtol=1e-5)
    assert float(cnt.sum()) < keep.size  # sparse


def test_bad_bits():
    q, k, _ = structured(n=128)
    with pytest.raises(ValueError, match="bits"):
        estimate_and_select(q, k, 0.0, bits=2, interpret=True)
    with pytest.raises(ValueError, match="GQA"):
        estimate_and_select(q[:, :3], k, 0.0, interpret=True)
