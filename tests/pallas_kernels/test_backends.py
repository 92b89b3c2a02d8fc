"""The Mosaic GPU and TPU kernels run in their interpreters on CPU and agree with the
Triton-form kernels (identical kept sets; same outputs) and the reference."""

import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels.sale import config as C
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.estimate import kept_block_mask, sale_attention_pallas
from tests.pallas_kernels.test_sale_reference import structured


def _run(q, k, v, backend, causal):
    cfg = C.KernelConfig(backend=backend)
    out, sel = sale_attention_pallas(q, k, v, R.DEFAULT_TAU, causal=causal, interpret=True,
                                     config=cfg)
    return out, kept_block_mask(sel, q.shape, k.shape, causal=causal, config=cfg)


CAUSAL = [pytest.param(False, marks=pytest.mark.slow), True]  # full attention: -m slow


@pytest.mark.heavy
@pytest.mark.parametrize("causal", CAUSAL)
def test_mosaic_gpu_kernels_equal_triton_kernels(causal):
    """bf16 (Mosaic GPU computes in bf16), N = 160 (padded), D = 64, GQA 2:1."""
    q, k, v = (x[:, :, :160].astype(jnp.bfloat16) for x in structured(n=192, d=64, hq=2, hk=1))
    out_m, keep_m = _run(q, k, v, "mosaic_gpu", causal)
    out_t, keep_t = _run(q, k, v, "triton", causal)
    np.testing.assert_array_equal(keep_m, keep_t)
    np.testing.assert_array_equal(keep_m, R.block_keep_mask(q, k, R.DEFAULT_TAU, causal=causal))
    assert float(keep_m.mean()) < 1.0
    np.testing.assert_allclose(out_m.astype(jnp.float32), out_t.astype(jnp.float32), atol=1e-6)


@pytest.mark.heavy
@pytest.mark.parametrize("causal", CAUSAL)
def test_tpu_kernels_equal_reference(causal):
    q, k, v = (x[:, :, :200] for x in structured(n=256, hq=4, hk=1))  # one 4-head group
    out, keep = _run(q, k, v, "tpu", causal)
    ref, ref_keep = R.sale_attention(q, k, v, R.DEFAULT_TAU, causal=causal)
    np.testing.assert_array_equal(keep, ref_keep)
    np.testing.assert_allclose(out, ref, atol=1e-5, rtol=1e-5)
