"""SALE accuracy on attention inputs of trained models of this repo and on synthetic inputs.

  python -m experiments.sale_accuracy [--tasks=sudoku,countdown] [--taus=...]
      [--model_tiles=8/8/8,8/4/4] [--lengths=512,1024] [--out=sale_accuracy.json]

Model inputs: the shipped dLLM denoisers (``experiments/pretrained/dllm/<task>``, read
only; the script never trains: a missing checkpoint raises). Their token inputs are task
prompts followed by the answer with a random fraction of it masked (what the denoiser sees
while decoding); each layer's Q, K (after RoPE) and V are captured by running the model's
own blocks (``jaxlab.dllm.model.Block``) and recomputing the attention inputs there. The
denoisers are bidirectional (not causal) with short sequences (sudoku 32, countdown 31
tokens), so the tiles are small (``--model_tiles`` block_q/block_k/local: 8/8/8 as in the
dLLM SALE study, and 8/4/4).

Synthetic inputs: ``pallas_kernels.sale.synthetic.structured_qkv`` (AR(1) latents with
RoPE, a sink, needle rows), causal, SALE's 64 x 32 blocks, local 128.

Per (source, layer, tau), from the pure-jnp reference (``pallas_kernels.sale.reference``,
int8 estimation): density = kept / valid blocks (valid: on or below the diagonal when
causal, every block otherwise; so dense attention is 1), recall = exact attention mass
inside the kept blocks (mean and worst row), output error mean |O - O~| per element and
relative to mean |O|. For each source and layer, ``calibrate_tau`` at the official
``--theta_official`` (0.4; per element theta / D, see ``reference``) over all the
sequences of the source gives per-head taus and their figures. The kernels
(Triton form, interpreter) are run once per source at the first tau and their kept sets
compared with the reference's (``kernel_kept_equal``).

Paired comparison (``comparison``): per source, ``jaxlab.attention.compare`` (the protocol
of every method) with items = the (sequence, layer, head) slices, sequence-major
(``stack_layers``): the first half of the sequences tunes SALE's tau over ``--taus``, the
other half is tested; SALE against the static sink / local / diagonal pattern and dense
attention, tuned on each metric of ``jaxlab.attention.comparison.METRICS`` in turn (density
with slices above ``--tolerance`` relative error counted as dense), with paired bootstrap
CIs.

Output: one JSON file (config, versions, git commit, rows, comparison).
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from jaxlab import attention
from jaxlab.attention import comparison as attention_comparison
from jaxlab.core import protocol
from jaxlab.dllm import model as model_lib
from pallas_kernels.sale import config as C
from pallas_kernels.sale import reference as R
from pallas_kernels.sale.estimate import kept_block_mask, sale_attention_pallas
from pallas_kernels.sale.synthetic import structured_qkv

from . import dllm_models
from .configs import dllm as dllm_configs
from .lib import artifacts, progress, provenance, results


def _define_flags() -> None:
    """The script's flags, defined when it runs as a script only (importing the module, e.g.
    for ``comparison_for``, defines none, so it never collides with another binary's)."""
    global _TASKS, _SAMPLES, _TAUS, _TILES, _LENGTHS, _THETA, _OUT, _SEED, _TOLERANCE
    _TASKS = flags.DEFINE_list("tasks", ["sudoku", "countdown"], "dLLM tasks (shipped models).")
    _SAMPLES = flags.DEFINE_integer("samples", 64, "Sequences per task.")
    _TAUS = flags.DEFINE_list("taus", ["1e-3", "8e-3", "3e-2", "1e-1"], "Keep thresholds.")
    _TILES = flags.DEFINE_list("model_tiles", ["8/8/8", "8/4/4"],
                               "block_q/block_k/local tile specs for the model inputs.")
    _LENGTHS = flags.DEFINE_list("lengths", ["512", "1024"], "Synthetic sequence lengths.")
    _THETA = flags.DEFINE_float("theta_official", 0.4,
                                "Calibration tolerance in the official convention (sum of |dO| "
                                "over the head's N x D output < theta N); ours per element is "
                                "theta / D.")
    _OUT = flags.DEFINE_string("out", "sale_accuracy.json", "Output JSON path.")
    _SEED = flags.DEFINE_integer("seed", 0, "Seed of prompts, masks and synthetic inputs.")
    _TOLERANCE = flags.DEFINE_float("tolerance", 0.05, "Relative output error above which a "
                                    "slice counts as dense in the paired density comparison.")


def capture_qkv(model, tokens):
    """[(q [B, Hq, N, D], k [B, Hk, N, D], v)] per layer of a ``model_lib.LLaDA``."""
    cfg = model.cfg
    x = model.wte(tokens)
    b, n = tokens.shape
    out = []
    for block in model.blocks:
        h = block.attn_norm(x)
        q = block.q_proj(h).reshape(b, n, cfg.n_heads, cfg.head_dim)
        k = block.k_proj(h).reshape(b, n, cfg.n_kv_heads, cfg.head_dim)
        v = block.v_proj(h).reshape(b, n, cfg.n_kv_heads, cfg.head_dim)
        q, k = model_lib.rope(q, cfg.rope_theta), model_lib.rope(k, cfg.rope_theta)
        out.append(tuple(jnp.swapaxes(t, 1, 2).astype(jnp.float32) for t in (q, k, v)))
        x = block(x)
    return out


def load_denoiser(config, name: str):
    """(model, task) from the shipped checkpoint; raises FileNotFoundError if absent."""
    task = dllm_models.make_task(config, name)
    graphdef, template = model_lib.init(dllm_models.model_config(config, task), seed=config.seed)
    path = dllm_models.shipped_path(config, name)
    params = artifacts.restore_first([(path, None)], template, f"{name} denoiser",
                                     expected=dllm_models.weights_record(config, name))
    if params is None:
        raise FileNotFoundError(f"no shipped denoiser for task {name!r} under {path!r}.")
    from flax import nnx

    return nnx.merge(graphdef, params), task


def model_inputs(model, task, num: int, seed: int):
    """Prompt + answer with a uniform-rate random mask over the answer -> per-layer q, k, v."""
    kp, kr, km = jax.random.split(jax.random.key(seed), 3)
    prompt, answer = task.sample(kp, num)
    rate = jax.random.uniform(kr, (num, 1))
    masked = jax.random.uniform(km, answer.shape) < rate
    tokens = jnp.concatenate([prompt, jnp.where(masked, task.mask_id, answer)], axis=1)
    return capture_qkv(model, tokens)


def metrics(q, k, v, tau, sizes, causal, dense) -> dict:
    """SALE at ``tau`` against ``dense`` (the layer's dense attention, computed once)."""
    out, keep = R.sale_attention(q, k, v, tau, sizes, 8, causal)
    rec = R.attention_row_recall(q, k, keep, sizes, causal)
    err = jnp.abs(out - dense)
    return {"density": float(R.causal_density(keep, q.shape[2], sizes, causal).mean()),
            "recall_mean": float(rec.mean()), "recall_worst_row": float(rec.min()),
            "err_mean": float(err.mean()), "err_max": float(err.max()),
            "err_rel": float(err.mean() / jnp.abs(dense).mean())}


def kernel_kept_equal(q, k, v, tau, sizes, causal) -> bool:
    cfg = C.KernelConfig("triton")
    _, sel = sale_attention_pallas(q, k, v, tau, sizes, 8, causal, True, cfg)
    got = kept_block_mask(sel, q.shape, k.shape, sizes, causal, cfg)
    return bool((got == R.block_keep_mask(q, k, tau, sizes, 8, causal)).all())


def evaluate(source: str, layers, sizes, causal, taus, theta) -> list[dict]:
    rows = []
    for li, (q, k, v) in enumerate(layers):
        base = {"source": source, "layer": li, "n": q.shape[2], "d": q.shape[3],
                "heads": q.shape[1], "kv_heads": k.shape[1], "batch": q.shape[0],
                "causal": causal}
        dense = R.dense_attention(q, k, v, causal)
        for tau in taus:
            row = {**base, "tau": tau, **metrics(q, k, v, tau, sizes, causal, dense)}
            if li == 0 and tau == taus[0]:
                row["kernel_kept_equal"] = kernel_kept_equal(q, k, v, tau, sizes, causal)
            rows.append(row)
        theta_el = theta / q.shape[3]  # per element: official theta / D
        tau_h = R.calibrate_tau(q, k, v, theta_el, sizes, 8, causal)
        rows.append({**base, "tau": "calibrated", "theta_official": theta,
                     "theta_per_element": theta_el,
                     "tau_per_head": [float(t) for t in tau_h],
                     **metrics(q, k, v, tau_h, sizes, causal, dense)})
    return rows


def stack_layers(layers):
    """[(q [B, Hq, N, D], k, v)] per layer -> (q [B, L Hq, N, D], k [B, L Hk, N, D], v):
    each sequence's layers side by side on the head axis, so the flattened (sequence, head)
    items of ``jaxlab.attention.compare`` are sequence-major (its tuning slices are whole
    sequences, its test slices the other sequences)."""
    return tuple(jnp.concatenate([layer[i] for layer in layers], axis=1) for i in range(3))


def comparison_for(layers, sizes, causal, taus, seed, tolerance=0.05,
                   progress=False) -> dict:
    """metric -> ``jaxlab.attention.compare(...).to_dict()`` on one source's slices: the
    first half of the sequences (at least one slice) tunes tau over ``taus``, the rest are
    the paired test slices, tuned on that metric (each metric's goals:
    ``comparison.default_goals``); ``progress`` as ``compare``'s."""
    q, k, v = stack_layers(layers)
    problem = attention.AttentionProblem(q, k, v, causal=causal, sizes=sizes)
    b, h = q.shape[0], q.shape[1]
    tuning = (b // 2) * h if b > 1 else h // 2
    contenders = {"sale": protocol.Builtin("sale", grid=tuple({"tau": float(t)} for t in taus)),
                  "static": "static", "dense": "dense"}
    out = {}
    for metric in attention_comparison.METRICS:
        c = attention.compare(jax.random.key(seed), problem, contenders=contenders,
                              tuning=tuning, seeds=b * h - tuning, metrics=(metric.name,),
                              goals=attention_comparison.default_goals(metric.name),
                              settings={"tolerance": tolerance}, progress=progress)
        out[metric.name] = c.to_dict()
    return out


def summarize(rows) -> list[dict]:
    """Mean over layers per (source, tau); worst-row recall is the min over layers."""
    out = {}
    for r in rows:
        key = (r["source"], str(r["tau"]))
        out.setdefault(key, []).append(r)
    table = []
    for (source, tau), rs in out.items():
        table.append({"source": source, "tau": tau, "layers": len(rs),
                      "density": float(np.mean([r["density"] for r in rs])),
                      "recall_mean": float(np.mean([r["recall_mean"] for r in rs])),
                      "recall_worst_row": float(np.min([r["recall_worst_row"] for r in rs])),
                      "err_mean": float(np.mean([r["err_mean"] for r in rs])),
                      "err_rel": float(np.mean([r["err_rel"] for r in rs]))})
    return table


def main(argv):
    del argv
    taus = [float(t) for t in _TAUS.value]
    if not taus or any(not np.isfinite(t) or t < 0 for t in taus):
        raise ValueError(f"`taus` must be finite and >= 0, got {_TAUS.value}.")
    if _THETA.value <= 0:
        raise ValueError(f"`theta_official` must be > 0, got {_THETA.value}.")
    config = dllm_configs.get_config("quick")
    tiles = []
    for spec in _TILES.value:
        parts = spec.split("/")
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise ValueError(f"`model_tiles` entries must be block_q/block_k/local, got {spec!r}.")
        tiles.append(R.BlockSizes(*(int(p) for p in parts)))
    rows, paired = [], {}
    for name in _TASKS.value:
        model, task = load_denoiser(config, name)
        layers = model_inputs(model, task, _SAMPLES.value, _SEED.value)
        for sizes in tiles:
            tag = f"{sizes.block_q}/{sizes.block_k}/{sizes.local}"
            rows += evaluate(f"dllm/{name} {tag}", layers, sizes, False, taus, _THETA.value)
            paired[f"dllm/{name} {tag}"] = comparison_for(
                layers, sizes, False, taus, _SEED.value, _TOLERANCE.value,
                progress.comparison_reporter())
            print(f"done dllm/{name} {tag}", flush=True)
    for n in (int(x) for x in _LENGTHS.value):
        q, k, v = structured_qkv(n, seed=_SEED.value)
        rows += evaluate(f"synthetic/N={n}", [(q, k, v)], R.BlockSizes(), True, taus,
                         _THETA.value)
        paired[f"synthetic/N={n}"] = comparison_for(
            [(q, k, v)], R.BlockSizes(), True, taus, _SEED.value, _TOLERANCE.value,
            progress.comparison_reporter())
        print(f"done synthetic N={n}", flush=True)
    table = summarize(rows)
    flag_values = {f: flags.FLAGS[f].value for f in
                   ("tasks", "samples", "taus", "model_tiles", "lengths", "theta_official",
                    "seed")}
    record = {"flags": flag_values,
              "dllm": {"pretrained_dir": config.pretrained_dir, "model": dict(config.model)},
              "packages": provenance.package_versions(), "git": provenance.git_state(),
              "machine": provenance.machine(), "table": table, "rows": rows,
              "comparison": paired}
    results.write_json(_OUT.value, record)
    print(f"{'source':26s} {'tau':>10s} {'density':>8s} {'recall':>8s} {'worst':>8s} "
          f"{'err_mean':>9s} {'err_rel':>8s}")
    for t in table:
        print(f"{t['source']:26s} {t['tau']:>10s} {t['density']:8.3f} {t['recall_mean']:8.4f} "
              f"{t['recall_worst_row']:8.4f} {t['err_mean']:9.2e} {t['err_rel']:8.2e}")
    print(f"wrote {os.path.abspath(_OUT.value)}")


if __name__ == "__main__":
    _define_flags()
    app.run(main)
