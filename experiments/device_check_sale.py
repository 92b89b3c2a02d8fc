"""One prepared SALE check for a GPU (an H200 lent for ~10 minutes), rehearsed on CPU.

  python3 -m experiments.device_check_sale --out=$OUT/sale_device_check.jsonl \
      [--time_budget_s=500] [--lengths=8192,...,131072] [--backends=triton,mosaic_gpu]
  python -m experiments.device_check_sale --smoke --out=/tmp/x.jsonl   # CPU rehearsal

Every result is appended to a JSON-lines file as soon as it is measured (flushed and
synced), so a run stopped by a timeout keeps what it did. Phases:

1. ``env``: python / jax / jaxlib versions, devices, device kind, compute capability, the
   default of ``jax_pallas_use_mosaic_gpu`` (our kernels never rely on it), nvidia-smi.
2. ``correctness``: per backend (Triton: float32 and bf16; Mosaic GPU: bf16, its compute
   type) and causal / full attention, on structured inputs (N = 2048, 8 / 2 heads,
   D = 128): kept sets identical to the reference's, the kernel output against the
   reference SALE output and against dense attention.
3. ``latency``: N = 8K .. 128K, Hq / Hk = 32 / 8, D = 128, bf16, causal: cuDNN flash
   attention (the dense baseline), jax's Pallas Triton flash attention and Mosaic GPU
   FlashAttention-3, and per backend our attention kernel with every valid block kept,
   SALE end to end and the estimation kernel alone; the kept density over the causally
   valid blocks; SALE's speed-up over cuDNN and the estimation overhead as % of cuDNN.
   Lengths run in increasing order while the time budget lasts: a measurement predicted
   (4x the previous length's) to overrun it is skipped with a ``skipped`` line.

``--smoke``: the same code path on CPU in the Pallas interpreters with tiny shapes (N 128
/ 256, 2 / 1 heads, D 64, one dtype per backend, one timed call without warm-up, GPU
baselines recorded as skipped): a test runs it with a 1 s budget, so N = 256 is skipped.
Inputs: ``pallas_kernels.sale.synthetic.structured_qkv``. jaxlab's calibration theta is per
element (official theta = D x ours); ``--tau`` here is the keep threshold itself.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback

import jax
import jax.numpy as jnp

from pallas_kernels.sale import config as C
from pallas_kernels.sale import measure
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.estimate import kept_block_mask, sale_attention_pallas
from pallas_kernels.sale.synthetic import structured_qkv


def _parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="CPU rehearsal (interpret mode).")
    p.add_argument("--time_budget_s", type=float, default=500.0,
                   help="Stop starting measurements past this many seconds.")
    p.add_argument("--out", default=None, help="JSON-lines file (default $OUT/... or ./...).")
    p.add_argument("--lengths", default="8192,16384,32768,65536,131072")
    p.add_argument("--backends", default="triton,mosaic_gpu")
    p.add_argument("--tau", type=float, default=R.DEFAULT_TAU)
    p.add_argument("--repeats", type=int, default=3)
    return p.parse_args(argv)


class Recorder:
    """Appends one JSON object per line, flushed and fsynced at once."""

    def __init__(self, path: str, t0: float):
        self.path, self.t0 = path, t0
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def __call__(self, phase: str, **fields):
        rec = {"phase": phase, "elapsed_s": round(time.perf_counter() - self.t0, 2), **fields}
        with open(self.path, "a") as f:
            f.write(json.dumps(rec, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        print(json.dumps(rec, default=str), flush=True)
        return rec


def _error(e: BaseException) -> dict:
    return {"status": "error", "error": f"{type(e).__name__}: {str(e)[:600]}",
            "where": traceback.format_exc(limit=3)[-800:]}


def _nvidia_smi():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                              "clocks.max.sm", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20)
        return out.stdout.strip() or out.stderr.strip()[:200]
    except Exception as e:  # noqa: BLE001 - absent on CPU machines
        return f"unavailable: {type(e).__name__}"


def correctness(rec, backends, smoke: bool, tau: float, interpret: bool):
    n, hq, hk, d = (128, 2, 1, 64) if smoke else (2048, 8, 2, 128)
    q32, k32, v32 = structured_qkv(n, d, hq, hk)
    cases = []
    for backend in backends:
        dtypes = ["bfloat16"] if backend == "mosaic_gpu" else ["float32", "bfloat16"]
        for dtype in dtypes[:1] if smoke else dtypes:
            for causal in (True, False):
                if smoke and not causal:
                    continue
                cases.append((backend, dtype, causal))
    for backend, dtype, causal in cases:
        try:
            q, k, v = (x.astype(dtype) for x in (q32, k32, v32))
            cfg = C.KernelConfig(backend=backend)
            res = measure.accuracy(q, k, v, tau, causal=causal, interpret=interpret,
                                   config=cfg)
            rec("correctness", status="ok", backend=backend, dtype=dtype, causal=causal, n=n,
                heads=[hq, hk], d=d, **res)
        except Exception as e:  # noqa: BLE001 - recorded, the run goes on
            rec("correctness", backend=backend, dtype=dtype, causal=causal, n=n, **_error(e))


def latency(rec, backends, lengths, smoke: bool, tau: float, repeats: int, budget_s: float,
            t0: float, interpret: bool):
    hq, hk, d = (2, 1, 64) if smoke else (32, 8, 128)
    dtype = jnp.float32 if smoke else jnp.bfloat16
    on_gpu = jax.default_backend() == "gpu"
    if not on_gpu:
        rec("latency", status="skipped", what="cudnn, pallas flash baselines",
            reason=f"default backend {jax.default_backend()}: no GPU")
    last_cost = 0.0
    for n in lengths:
        predicted = 4.0 * last_cost  # attention work grows as N^2
        left = budget_s - (time.perf_counter() - t0)
        if last_cost and predicted > left:
            rec("latency", status="skipped", n=n, reason=f"predicted {predicted:.0f}s > "
                f"{left:.0f}s left of the time budget")
            break
        start = time.perf_counter()
        try:
            q, k, v = structured_qkv(n, d, hq, hk, dtype=dtype)
            jax.block_until_ready((q, k, v))
        except Exception as e:  # noqa: BLE001
            rec("latency", n=n, what="inputs", **_error(e))
            break
        dense = math.nan
        if on_gpu:
            for name, fn in measure.baseline_fns(q, k, v, causal=True).items():
                try:
                    t = measure.best_time(fn, repeats, warmup=not smoke)
                    if name == "cudnn":
                        dense = t
                    rec("latency", status="ok", n=n, what=name, ms=1e3 * t,
                        tflops=measure.flops(n, hq, d) / t / 1e12)
                except Exception as e:  # noqa: BLE001
                    rec("latency", n=n, what=name, **_error(e))
        for backend in backends:
            cfg = C.KernelConfig(backend=backend)
            try:
                _, sel = sale_attention_pallas(q, k, v, tau, causal=True, interpret=interpret,
                                               config=cfg)
                keep = kept_block_mask(sel, q.shape, k.shape, causal=True, config=cfg)
                density = float(R.causal_density(keep, n).mean())
                del sel, keep
            except Exception as e:  # noqa: BLE001
                rec("latency", n=n, backend=backend, what="density", **_error(e))
                continue
            times = {}
            fns = measure.kernel_fns(q, k, v, tau, causal=True, config=cfg, interpret=interpret)
            for name in ("all_kept", "sale", "estimate"):
                try:
                    times[name] = measure.best_time(fns[name], repeats, warmup=not smoke)
                    rec("latency", status="ok", n=n, backend=backend, what=name,
                        ms=1e3 * times[name], density=density if name == "sale" else 1.0,
                        tflops_dense_equiv=measure.flops(n, hq, d) / times[name] / 1e12)
                except Exception as e:  # noqa: BLE001
                    rec("latency", n=n, backend=backend, what=name, **_error(e))
            if "sale" in times:
                summary = {"density": density, "sale_ms": 1e3 * times["sale"]}
                if not math.isnan(dense):
                    summary["speedup_vs_cudnn"] = dense / times["sale"]
                    if "estimate" in times:
                        summary["estimate_pct_of_cudnn"] = 100 * times["estimate"] / dense
                if "all_kept" in times:
                    summary["speedup_vs_all_kept"] = times["all_kept"] / times["sale"]
                plan = C.make_plan(q.shape, k.shape, R.BlockSizes(), cfg.resolved(), q.dtype)
                launch = {"heads_per_program": plan.heads_per_program, "rows": plan.rows,
                          "tile": plan.tile}
                if backend == "triton":
                    launch["num_warps"] = C.triton_warps(plan.rows, cfg)
                rec("summary", status="ok", n=n, backend=backend, heads=[hq, hk], d=d,
                    dtype=jnp.dtype(dtype).name, launch=launch, **summary)
        del q, k, v
        last_cost = time.perf_counter() - start


def main(argv=None) -> str:
    args = _parse(argv)
    t0 = time.perf_counter()
    out = args.out or os.path.join(os.environ.get("OUT", "."), "sale_device_check.jsonl")
    rec = Recorder(out, t0)
    interpret = args.smoke or jax.default_backend() != "gpu"
    backends = [b for b in args.backends.split(",") if b]
    lengths = [128, 256] if args.smoke else [int(x) for x in args.lengths.split(",")]
    repeats = 1 if args.smoke else args.repeats
    try:
        rec("env", status="ok", smoke=args.smoke, interpret=interpret, backends=backends,
            lengths=lengths, tau=args.tau, time_budget_s=args.time_budget_s,
            nvidia_smi=_nvidia_smi(), argv=sys.argv[1:] if argv is None else argv,
            **measure.env_report())
    except Exception as e:  # noqa: BLE001
        rec("env", **_error(e))
    correctness(rec, backends, args.smoke, args.tau, interpret)
    latency(rec, backends, lengths, args.smoke, args.tau, repeats, args.time_budget_s, t0,
            interpret)
    rec("done", status="ok", total_s=round(time.perf_counter() - t0, 1))
    return out


if __name__ == "__main__":
    main()
