"""The estimation kernel (Triton form, interpret mode) against the reference: identical kept
sets, the exact always-kept pass reused by the attention kernel, any sequence length."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels.sale import config as C
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.common import MASK_VALUE, block_grid_masks
from pallas_kernels.sale.estimate import (
    estimate_and_select,
    kept_block_mask,
    sale_attention_pallas,
)
from tests.pallas_kernels.test_sale_reference import structured

TRITON = C.KernelConfig(backend="triton")


def _check_lists(sel, plan, causal):
    """Listed tiles ascending, unique, with bits; never an always-kept (head, block) bit."""
    idx, bits, cnt = (np.asarray(x) for x in sel.lists)
    base, _ = block_grid_masks(plan, causal)
    for b, c, i in np.ndindex(*cnt.shape):
        tiles = idx[b, c, i, :cnt[b, c, i]]
        assert np.all(np.diff(tiles) > 0) and np.all(bits[b, c, i, :cnt[b, c, i]] != 0)
        for t, word in zip(tiles, bits[b, c, i, :cnt[b, c, i]], strict=True):
            for s in range(plan.sub):
                if base[i, t * plan.sub + s]:
                    assert not any((word >> (g * plan.sub + s)) & 1
                                   for g in range(plan.heads_per_program))


@pytest.mark.heavy
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bits", [8, 4])
def test_kept_sets_identical_to_reference(causal, bits):
    q, k, _ = structured(n=256)  # GQA 4:2 -> two heads per program
    sel = estimate_and_select(q, k, R.DEFAULT_TAU, bits=bits, causal=causal, interpret=True,
                              config=TRITON)
    assert sel.state is None
    want = np.asarray(R.block_keep_mask(q, k, R.DEFAULT_TAU, bits=bits, causal=causal))
    got = np.asarray(kept_block_mask(sel, q.shape, k.shape, causal=causal, config=TRITON))
    np.testing.assert_array_equal(got, want)
    assert 0.3 < want.mean() < 0.9
    plan = C.make_plan(q.shape, k.shape, R.BlockSizes(), TRITON)
    assert plan.heads_per_program == 2 and plan.tile == 64
    _check_lists(sel, plan, causal)


@pytest.mark.heavy
@pytest.mark.parametrize("causal", [False, True])
def test_any_length_head_dim_and_gqa_end_to_end(causal):
    q, k, v = structured(n=256, d=40, hq=4, hk=1)
    q, k, v = (x[:, :, :200] for x in (q, k, v))  # N = 200, D = 40: both padded
    out, sel = sale_attention_pallas(q, k, v, R.DEFAULT_TAU, causal=causal, interpret=True)
    ref, keep = R.sale_attention(q, k, v, R.DEFAULT_TAU, causal=causal)
    np.testing.assert_array_equal(
        kept_block_mask(sel, q.shape, k.shape, causal=causal), keep)
    assert out.shape == q.shape
    np.testing.assert_allclose(out, ref, atol=1e-5, rtol=1e-5)
    assert float(keep.mean()) < 0.95  # sparse


def test_always_kept_pass_is_exact_attention_over_those_blocks():
    """The partial state handed to the attention kernel (nothing recomputed)."""
    q, k, v = structured(n=256)
    sel = estimate_and_select(q, k, R.DEFAULT_TAU, causal=True, interpret=True, v=v)
    base = jnp.broadcast_to(R.always_kept_blocks(256, R.BlockSizes(), True), (1, 4, 4, 8))
    s = jnp.where(R._element_mask(base, R.BlockSizes(), 256, True), R._exact_scores(q, k),
                  -jnp.inf)
    want = jnp.einsum("bhnm,bhmd->bhnd", jax.nn.softmax(s, -1), jnp.repeat(v, 2, 1))
    np.testing.assert_allclose(sel.state.out[..., :32], want, atol=1e-5)
    m, l_sum = R.row_stats(q, k, causal=True)
    np.testing.assert_allclose(sel.state.m2, m[..., 0] * C.LOG2E, rtol=1e-5)
    np.testing.assert_allclose(sel.state.l_sum, l_sum[..., 0], rtol=1e-5)
    assert MASK_VALUE < float(sel.state.m2.min())


@pytest.mark.heavy
def test_tau_zero_keeps_every_valid_block_and_equals_dense():
    q, k, v = structured(n=128)
    for causal in (False, True):
        out, sel = sale_attention_pallas(q, k, v, 0.0, causal=causal, interpret=True)
        keep = kept_block_mask(sel, q.shape, k.shape, causal=causal)
        np.testing.assert_allclose(R.causal_density(keep, 128, causal=causal), 1.0)
        np.testing.assert_allclose(out, R.dense_attention(q, k, v, causal), atol=1e-5)


def test_causal_candidates_stop_at_the_local_window():
    """Causal: no candidate above the local window; the work is the lower triangle."""
    sizes = R.BlockSizes()
    q_shape, k_shape = (1, 4, 1024, 64), (1, 2, 1024, 64)
    plan = C.make_plan(q_shape, k_shape, sizes, TRITON)
    base, cand = (np.asarray(x) for x in block_grid_masks(plan, causal=True))
    i, j = np.indices(base.shape)
    assert not (cand & (j >= 2 * i)).any() and not (base & cand).any()
    assert (base | cand | (j >= 2 * i + 2)).all()  # every block is one of the three
    _, cand_nc = block_grid_masks(plan, causal=False)
    assert 2 * cand.sum() < np.asarray(cand_nc).sum()


def test_bad_input():
    q, k, _ = structured(n=128)
    with pytest.raises(ValueError, match="bits"):
        estimate_and_select(q, k, 0.0, bits=2, interpret=True)
    with pytest.raises(ValueError, match="GQA"):
        estimate_and_select(q[:, :3], k, 0.0, interpret=True)
    with pytest.raises(ValueError, match="backend"):
        C.KernelConfig(backend="cuda")
    with pytest.raises(TypeError, match="config"):
        sale_attention_pallas(q, k, k, 0.0, interpret=True, config="triton")
