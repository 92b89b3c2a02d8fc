"""SALE on a small head: the reference and the Pallas kernels, with the accuracy check.

  python -m experiments.sale --workdir=results/sale [--config=experiments/configs/sale.py:smoke]

The suite's SALE entry (``experiments.suite``): on one causal head group of synthetic
attention inputs (``pallas_kernels.sale.synthetic.structured_qkv``: AR(1) latents with
RoPE, a sink, needle rows), for each keep threshold tau of ``config.taus``:

* the pure-jnp reference (``pallas_kernels.sale.reference``, int8 estimation): density
  (kept / causally valid blocks: dense attention is 1), attention-mass recall inside the
  kept blocks (mean and worst query row), and the output error against dense attention
  (mean |O - O_dense| relative to mean |O_dense|);
* the two Pallas kernels (estimation + block-sparse attention, Triton form; in the Pallas
  interpreter when ``config.interpret``): their kept blocks against the reference's and
  max |O_kernel - O_reference| against ``config.kernel_atol`` (the accuracy check).

Latency is not measured here (``experiments.bench_sale`` times the kernels on a GPU); the
trained-model inputs are ``experiments.sale_accuracy``'s.
"""

import os

import jax
import jax.numpy as jnp
import numpy as np

from pallas_kernels.sale import config as C
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.estimate import kept_block_mask, sale_attention_pallas
from pallas_kernels.sale.synthetic import structured_qkv

from . import common
from .lib import plots, study

CAPTION = ("SALE on synthetic causal attention inputs: the interpreted Pallas kernels against "
           "the pure-jnp reference (same kept blocks, output within the tolerance), then per "
           "keep threshold tau the kept-block density (lower is sparser), the attention mass "
           "recalled (higher is better) and the output error against dense attention.")


def _validate(config) -> None:
    for name in ("length", "heads", "kv_heads", "dim"):
        value = config[name]
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"`config.{name}` must be a positive int, got {value!r}.")
    if config.heads % config.kv_heads:
        raise ValueError(f"`config.heads`={config.heads} must be a multiple of "
                         f"`config.kv_heads`={config.kv_heads}.")
    if config.dim < 17:
        raise ValueError(f"`config.dim` must be >= 17, got {config.dim}.")
    taus = tuple(config.taus)
    if not taus or any(not (isinstance(t, float) and 0 < t < 1) for t in taus):
        raise ValueError(f"`config.taus` must be floats in (0, 1), got {taus!r}.")
    if config.bits not in (4, 8):
        raise ValueError(f"`config.bits` must be 4 or 8, got {config.bits!r}.")
    if not config.kernel_atol > 0:
        raise ValueError(f"`config.kernel_atol` must be > 0, got {config.kernel_atol!r}.")


def _inputs(config):
    return structured_qkv(config.length, config.dim, config.heads, config.kv_heads,
                          seed=config.seed)


def evaluate_tau(config, tau: float) -> dict:
    """The reference's and the kernels' figures at one ``tau`` (see the module doc)."""
    q, k, v = _inputs(config)
    sizes, causal = R.BlockSizes(), True
    dense = R.dense_attention(q, k, v, causal)
    out_ref, keep = R.sale_attention(q, k, v, tau, sizes, config.bits, causal)
    recall = R.attention_row_recall(q, k, keep, sizes, causal)
    kernel = C.KernelConfig("triton")
    out_k, sel = sale_attention_pallas(q, k, v, tau, sizes, config.bits, causal,
                                       config.interpret, kernel)
    kept = kept_block_mask(sel, q.shape, k.shape, sizes, causal, kernel)
    err = jnp.abs(out_ref - dense)
    return {"tau": tau,
            "density": float(R.causal_density(keep, config.length, sizes, causal).mean()),
            "recall_mean": float(recall.mean()), "recall_worst_row": float(recall.min()),
            "err_rel": float(err.mean() / jnp.abs(dense).mean()),
            "kernel_kept_equal": bool((kept == keep).all()),
            "kernel_max_abs_diff": float(jnp.abs(out_k.astype(jnp.float32) - out_ref).max())}


def _unit_name(tau: float) -> str:
    return f"tau={tau:g}"


def _units(config, workdir):
    del workdir
    return [study.Unit(_unit_name(t), lambda ctx, t=t: evaluate_tau(config, t))
            for t in config.taus]


def _summarize(config, results) -> dict:
    rows = [results[_unit_name(t)] for t in config.taus]
    worst = max(r["kernel_max_abs_diff"] for r in rows)
    return {"length": config.length, "heads": config.heads, "kv_heads": config.kv_heads,
            "dim": config.dim, "interpret": bool(config.interpret),
            "backend": jax.default_backend(), "rows": rows,
            "kernel_max_abs_diff": worst, "kernel_atol": config.kernel_atol,
            "accuracy_ok": bool(all(r["kernel_kept_equal"] for r in rows)
                                and worst <= config.kernel_atol)}


def _plot(config, summary, results, workdir) -> None:
    del results
    rows = summary["rows"]
    taus = np.array([r["tau"] for r in rows])
    fig, (ax, ax_err) = plots.figure(2, width=4.6, height=3.6)
    ax.semilogx(taus, [r["density"] for r in rows], "o-", label="kept-block density")
    ax.semilogx(taus, [r["recall_mean"] for r in rows], "s--", label="recall (mean row)")
    ax.semilogx(taus, [r["recall_worst_row"] for r in rows], "^:", label="recall (worst row)")
    ax.set(xlabel=f"keep threshold tau (reference, N={summary['length']} causal)",
           ylabel="fraction", ylim=(0, 1.05))
    ax_err.loglog(taus, [max(r["err_rel"], 1e-12) for r in rows], "o-",
                  label="reference vs dense (relative)")
    ax_err.loglog(taus, [max(r["kernel_max_abs_diff"], 1e-12) for r in rows], "s--",
                  label="kernel vs reference (max abs)")
    ax_err.axhline(summary["kernel_atol"], color="0.5", lw=1, label="kernel tolerance")
    ax_err.set(xlabel="keep threshold tau", ylabel="output error")
    for a in (ax, ax_err):  # above the panels, off the data
        a.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, fontsize=8,
                 frameon=False)
    plots.save(fig, os.path.join(workdir, "sale_tau.png"),
               caption=f"{summary['heads']} query / {summary['kv_heads']} key-value heads, "
                       f"D={summary['dim']}; one synthetic sequence, no interval")


def headline(summary) -> list[tuple[str, str]]:
    rows = summary["rows"]
    same = all(r["kernel_kept_equal"] for r in rows)
    mode = "interpreted" if summary["interpret"] else "compiled"
    out = [(f"Pallas kernels ({mode}) vs reference at every tau: kept blocks identical; "
            f"max |O_kernel - O_ref| (tolerance {summary['kernel_atol']:g})",
            f"{'yes' if same else 'NO'}; {summary['kernel_max_abs_diff']:.1e} "
            f"({'passed' if summary['accuracy_ok'] else 'FAILED'})")]
    out += [(f"tau={r['tau']:g}: density / attention recall mean, worst row / relative "
             "output error vs dense",
             f"{r['density']:.3f} / {r['recall_mean']:.4f}, {r['recall_worst_row']:.3f} / "
             f"{r['err_rel']:.1e}") for r in rows]
    return out


EXPERIMENT = study.Experiment(name="sale", validate=_validate, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline,
                              caption=CAPTION)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/sale.py:quick")
