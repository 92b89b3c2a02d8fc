"""SALE benchmark: density, attention-mass recall and output error vs sequence length; on a
GPU also latency of the SALE kernels against dense attention.

  python -m experiments.bench_sale [--lengths=1024,2048,4096] [--tau=0.001] [--backend=triton]

Density is over the causally valid blocks (on or below the diagonal): dense causal
attention is 1.0 (the full-square figure, ~half of that, is printed too). The kernels'
kept sets are compared with the reference's (``kept==ref``). On CPU the kernels run in the
Pallas interpreter (speed means nothing: latency is skipped, with a line saying so); on a
GPU it times, in one run: cuDNN flash attention (the dense baseline,
``jax.nn.dot_product_attention(implementation="cudnn")``), jax's Pallas Triton flash
attention, our attention kernel with every valid block kept, SALE end to end and its
estimation kernel alone, and prints SALE's speed-up over cuDNN and the estimation overhead
as % of cuDNN. Inputs: ``pallas_kernels.sale.synthetic.structured_qkv`` (block-local
attention with a sink), bf16 on GPU.
"""

import jax
import jax.numpy as jnp
from absl import app, flags

from pallas_kernels.sale import config as C
from pallas_kernels.sale import measure
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.synthetic import structured_qkv

_LENGTHS = flags.DEFINE_list("lengths", ["1024", "2048", "4096"], "Sequence lengths.")
_TAU = flags.DEFINE_float("tau", R.DEFAULT_TAU, "Relative Attention Score threshold.")
_HEADS = flags.DEFINE_integer("heads", 4, "Query heads.")
_KV_HEADS = flags.DEFINE_integer("kv_heads", 2, "Key / value heads (GQA).")
_DIM = flags.DEFINE_integer("dim", 64, "Head dimension.")
_CAUSAL = flags.DEFINE_bool("causal", True, "Causal attention.")
_BITS = flags.DEFINE_enum("bits", "8", ["8", "4"], "Quantization bits of the estimation.")
_BACKEND = flags.DEFINE_enum("backend", None, list(C.BACKENDS),
                             "Kernel backend (default: tpu on TPU, else triton).")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed repeats (best of) per measurement.")


def _latency(q, k, v, config):
    causal, tau = _CAUSAL.value, _TAU.value
    fns = {**measure.baseline_fns(q, k, v, causal),
           **measure.kernel_fns(q, k, v, tau, bits=int(_BITS.value), causal=causal,
                                config=config)}
    times = {}
    for name in ("cudnn", "pallas_triton_flash", "all_kept", "sale", "estimate"):
        try:
            times[name] = measure.best_time(fns[name], _REPEATS.value)
        except Exception as e:  # noqa: BLE001 - a baseline that cannot build is reported
            print(f"    {name}: failed: {type(e).__name__}: {str(e)[:160]}")
            times[name] = float("nan")
    dense = times["cudnn"]
    tflops = measure.flops(q.shape[2], q.shape[1], q.shape[3], causal=causal) / dense / 1e12
    return (f" {1e3 * dense:>9.2f} {1e3 * times['pallas_triton_flash']:>9.2f}"
            f" {1e3 * times['all_kept']:>9.2f} {1e3 * times['sale']:>8.2f}"
            f" {dense / times['sale']:>7.2f}x {100 * times['estimate'] / dense:>6.1f}%"
            f" {tflops:>7.0f}")


def main(argv):
    del argv
    on_gpu = jax.default_backend() == "gpu"
    config = C.KernelConfig(backend=_BACKEND.value).resolved()
    print(f"jax {jax.__version__}  device: {jax.devices()[0].device_kind}  kernels: "
          f"{config.backend}  tau={_TAU.value}  causal={_CAUSAL.value}  bits={_BITS.value}  "
          f"heads {_HEADS.value}/{_KV_HEADS.value}  D={_DIM.value}")
    if not on_gpu:
        print("latency: skipped (no GPU here; the cuDNN, Pallas flash and all-kept baselines "
              "need one; kernels run in the Pallas interpreter)")
    header = (f"{'N':>7} {'density':>8} {'full-sq':>8} {'recall':>8} {'mean|dO|':>10}"
              f" {'kept==ref':>9}")
    if on_gpu:
        header += (f" {'cudnn ms':>9} {'pflash ms':>9} {'allkept':>9} {'sale ms':>8}"
                   f" {'speedup':>8} {'est %':>7} {'TF/s':>7}")
    print(header)
    for n in (int(x) for x in _LENGTHS.value):
        dtype = jnp.bfloat16 if on_gpu else jnp.float32
        q, k, v = structured_qkv(n, _DIM.value, _HEADS.value, _KV_HEADS.value, dtype=dtype)
        acc = measure.accuracy(q, k, v, _TAU.value, bits=int(_BITS.value),
                               causal=_CAUSAL.value, interpret=not on_gpu, config=config)
        line = (f"{n:>7} {acc['density']:>8.3f} {acc['density_full_square']:>8.3f}"
                f" {acc['recall']:>8.4f} {acc['kernel_vs_dense_mean_abs']:>10.2e}"
                f" {str(acc['kept_identical']):>9}")
        if on_gpu:
            line += _latency(q, k, v, config)
        print(line, flush=True)


if __name__ == "__main__":
    app.run(main)
