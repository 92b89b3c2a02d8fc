"""SALE benchmark: sparsity, attention-mass recall and output error vs sequence length;
on a GPU also latency of the SALE kernels vs dense attention.

  python -m experiments.bench_sale [--lengths=1024,2048,4096] [--tau=0.001]

On CPU only the accuracy side is measured (the kernels run in the Pallas interpreter,
whose speed means nothing); on a GPU it times, side by side in one run, SALE (estimation +
block-sparse kernels), the estimation kernel alone, and jax.nn.dot_product_attention, and
prints speed-up and estimation overhead as % of dense.
"""

import jax
import jax.numpy as jnp
from absl import app, flags

from experiments.lib import timing
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.estimate import estimate_and_select, sale_attention_pallas
from pallas_kernels.sale.synthetic import structured_qkv

_LENGTHS = flags.DEFINE_list("lengths", ["1024", "2048", "4096"], "Sequence lengths.")
_TAU = flags.DEFINE_float("tau", R.DEFAULT_TAU, "Relative Attention Score threshold.")
_HEADS = flags.DEFINE_integer("heads", 4, "Query heads (key heads = heads // 2).")
_DIM = flags.DEFINE_integer("dim", 64, "Head dimension.")
_CAUSAL = flags.DEFINE_bool("causal", True, "Causal attention.")


def _gpu_times(q, k, v):
    """Seconds of jax.nn.dot_product_attention, SALE end to end, and its estimation pass."""
    causal, tau = _CAUSAL.value, _TAU.value

    def to_bnhd(x):
        return jnp.swapaxes(x, 1, 2)

    dpa = jax.jit(lambda q, k, v: jax.nn.dot_product_attention(
        to_bnhd(q), to_bnhd(k), to_bnhd(v), is_causal=causal))
    return (timing.best_time(lambda: dpa(q, k, v)),
            timing.best_time(lambda: sale_attention_pallas(q, k, v, tau, causal=causal)[0]),
            timing.best_time(lambda: estimate_and_select(q, k, tau, causal=causal)[2]))


def main(argv):
    del argv
    on_gpu = jax.default_backend() == "gpu"
    print(f"backend: {jax.default_backend()}  tau={_TAU.value}  causal={_CAUSAL.value}")
    print(f"{'N':>7} {'density':>8} {'recall':>8} {'mean|dO|':>10}"
          + (f" {'dense ms':>9} {'sale ms':>8} {'speedup':>8} {'est %':>6}" if on_gpu else ""))
    for n in (int(x) for x in _LENGTHS.value):
        dtype = jnp.bfloat16 if on_gpu else jnp.float32
        q, k, v = structured_qkv(n, _DIM.value, _HEADS.value, _HEADS.value // 2, dtype=dtype)
        keep = R.block_keep_mask(q, k, _TAU.value, causal=_CAUSAL.value)
        recall = float(R.attention_recall(q, k, keep, causal=_CAUSAL.value).mean())
        out, _ = sale_attention_pallas(q, k, v, _TAU.value, causal=_CAUSAL.value,
                                       interpret=not on_gpu)
        dense = R.dense_attention(q, k, v, _CAUSAL.value)
        err = float(jnp.abs(out.astype(jnp.float32) - dense).mean())
        line = f"{n:>7} {float(keep.mean()):>8.3f} {recall:>8.4f} {err:>10.2e}"
        if on_gpu:
            t_dense, t_sale, t_est = _gpu_times(q, k, v)
            line += (f" {1e3 * t_dense:>9.2f} {1e3 * t_sale:>8.2f} {t_dense / t_sale:>7.2f}x"
                     f" {100 * t_est / t_dense:>5.1f}%")
        print(line)


if __name__ == "__main__":
    app.run(main)
