"""POKE-SMC decoding study: every decoder on every task (accuracy vs NFE, Path LL).

  python -m experiments.dllm --config=experiments/configs/dllm.py:quick --workdir=results/dllm

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. Units: one per task (every decoder of ``decoders`` on
``config.num_problems`` held-out problems, and the POKE head's held-out fit; keyed by the
config without ``tasks``, ``throughput_particles`` and ``sale``, so adding a task keeps
the others);
``throughput`` (SMC tokens/s against particles on ``config.tasks[0]``); ``sale`` (greedy
decoding with SALE attention in the denoiser, when ``config.sale.task`` is a task). The
models come from ``experiments/dllm_models.py`` (shipped, else trained in the workdir by
the first unit that needs them) and are loaded once per run.
"""

import dataclasses
import functools
import os
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from experiments import common, dllm_models
from experiments.lib import plots, provenance, study, timing
from experiments.lib.progress import Progress
from jaxlab.core import metrics, sharding
from jaxlab.dllm import config as config_lib
from jaxlab.dllm import decoding, path_smc, poke, sr_smc
from jaxlab.dllm import model as model_lib
from pallas_kernels.sale.reference import BlockSizes


class Decoder(NamedTuple):
    """A decoder of the study.

    Attributes:
      family: "greedy", "best_of_n", "smc", "sr_smc" or "poke_smc" (plot marker,
        comparisons).
      particles: N (1 for the greedy decoders).
      fn: ``fn(prompt [B, P], key) -> (DecodeResult, flag [])``; flag: the SMC log weights
        became non-finite on some step (``Info.nonfinite_weights``; False when greedy).
    """

    family: str
    particles: int
    fn: Callable


def _greedy(fn) -> Decoder:
    return Decoder("greedy", 1, lambda prompt, key: (fn(prompt, key=key), jnp.bool_(False)))


def _particles(family: str, n: int, fn) -> Decoder:
    def run(prompt, key):
        result, info = fn(prompt, key=key)
        bad = jnp.any(info.nonfinite_weights)
        if hasattr(info, "unfinished"):  # SR-SMC: a block NaN priorities left unfinished
            bad = bad | jnp.any(info.unfinished)
        return result, bad

    return Decoder(family, n, run)


def decoder_names(config) -> list[str]:
    """The four policies, semi-AR, threshold, then per N best-of-N, Path-LL SMC, SR-SMC and
    POKE-SMC."""
    return [*decoding.POLICIES, "semi_ar", "threshold",
            *(f"{f}_{n}" for n in config.particles
              for f in ("best_of", "smc", "sr_smc", "poke_smc"))]


def decoders(config, task, denoise_fn, value_fn) -> dict[str, Decoder]:
    """name -> Decoder, in the order of ``decoder_names``."""
    kw = dict(gen_length=task.answer_len, mask_id=task.mask_id, vocab_size=task.vocab_size)
    dec = functools.partial(decoding.decode, denoise_fn, **kw)
    out = {pol: _greedy(functools.partial(dec, policy=pol)) for pol in decoding.POLICIES}
    out["semi_ar"] = _greedy(functools.partial(
        dec, block_length=decoding.semi_ar_block(task.answer_len)))
    out["threshold"] = _greedy(functools.partial(
        decoding.decode_threshold, denoise_fn, threshold=config.threshold, **kw))
    for n in config.particles:
        pkw = dict(num_particles=n, temperature=config.temperature, **kw)
        smc = functools.partial(path_smc.smc_decode, denoise_fn, **pkw)
        out[f"best_of_{n}"] = _particles("best_of_n", n, functools.partial(
            path_smc.best_of_n, denoise_fn, **pkw))
        out[f"smc_{n}"] = _particles("smc", n, smc)
        # Self-rewarding SMC as in its official sampler: semi-AR blocks (the same blocks as
        # the "semi_ar" greedy decoder), Fast-dLLM threshold commits, block-end resampling.
        out[f"sr_smc_{n}"] = _particles("sr_smc", n, functools.partial(
            sr_smc.sr_smc_decode, denoise_fn, block_length=decoding.semi_ar_block(
                task.answer_len), threshold=config.threshold, **pkw))
        out[f"poke_smc_{n}"] = _particles("poke_smc", n, functools.partial(smc, value_fn=value_fn))
    return out


def _run_decoder(config, task, name: str, dec: Decoder, prompt) -> dict:
    """One decoder on every problem: accuracy (bootstrap CI), NFE, Path LL, seconds."""
    fn, b = jax.jit(dec.fn), config.eval_batch
    correct, pll, nfe = [], [], []
    t0 = time.perf_counter()
    for i in range(0, config.num_problems, b):
        p = sharding.shard_batch(prompt[i:i + b], config.get("mesh_shape", (-1,)))
        r, bad = fn(p, jax.random.key(config.seed * 1000 + i))
        ok, path_ll, n_fe, bad = sharding.to_host(
            (task.verify(p, r.answer), r.path_ll, r.nfe, bad))
        if bool(bad):
            raise FloatingPointError(
                f"dllm {name}: SMC log weights became non-finite on problems {i}.."
                f"{i + p.shape[0] - 1}; check `weight_scale`, `temperature` and the POKE head "
                "(see path_smc.raise_if_nonfinite).")
        correct, pll, nfe = correct + [ok], pll + [path_ll], nfe + [n_fe]
    correct, pll, nfe = map(np.concatenate, (correct, pll, nfe))
    _, lo, hi = metrics.bootstrap_ci(jax.random.key(config.seed), jnp.mean, (correct,),
                                     config.bootstrap)
    return {"family": dec.family, "particles": dec.particles,
            "accuracy": float(np.mean(correct)), "accuracy_ci": [lo, hi],
            "nfe": float(nfe.mean()), "nfe_batched": float(nfe.mean()) / dec.particles,
            "path_ll": float(pll.mean()),
            "seconds": time.perf_counter() - t0, "_correct": correct, "_path_ll": pll}


def _evaluate_task(config, models, name: str, ctx: study.Context) -> dict:
    """Unit ``<task>``: every decoder on ``config.num_problems`` held-out problems."""
    m = models.denoiser(name, ctx)
    head = models.poke_head(name, ctx)
    value_fn = poke.make_value_fn(*head, m.task.prompt_len, m.task.mask_id)
    poke_fit = poke.evaluate(*head, dllm_models.rollouts(
        config, m, 2, min(512, config.poke.rollouts)))
    prompt, _ = m.task.sample(jax.random.key(config.seed + 7_777), config.num_problems)
    decs = decoders(config, m.task, m.denoise_fn, value_fn)
    rows, prog = {}, Progress(len(decs), desc=f"dllm {name} decoders", unit="decoder")
    for dname, dec in decs.items():
        rows[dname] = _run_decoder(config, m.task, f"{name} {dname}", dec, prompt)
        prog.update(1, postfix=f"{dname} acc {rows[dname]['accuracy']:.3f}")
    prog.close()
    return {"task": name, "answer_len": m.task.answer_len, "poke_fit": poke_fit,
            "decoders": rows}


def _throughput(config, models, ctx: study.Context) -> dict:
    """Unit ``throughput``: tokens/s of N-particle SMC vs 1 particle on 64 problems."""
    task, _, _, denoise_fn = models.denoiser(config.tasks[0], ctx)
    prompt, _ = task.sample(jax.random.key(1), 64)
    out = {}
    for n in config.throughput_particles:
        fn = jax.jit(functools.partial(
            path_smc.smc_decode, denoise_fn, gen_length=task.answer_len, num_particles=n,
            mask_id=task.mask_id, vocab_size=task.vocab_size))
        sec = timing.best_time(lambda fn=fn: fn(prompt, key=jax.random.key(0)), repeats=2)
        out[str(n)] = {"seconds": sec,
                       "tokens_per_s": prompt.shape[0] * n * task.answer_len / sec}
    base = out[str(min(config.throughput_particles))]["tokens_per_s"]
    return {k: {**v, "batching_efficiency": v["tokens_per_s"] / base} for k, v in out.items()}


def _sale_check(config, models, ctx: study.Context) -> dict:
    """Unit ``sale``: greedy decoding of ``config.sale.task`` with SALE block-sparse
    attention vs dense: accuracy and the share of answers equal to the dense ones, per tau."""
    sc = config.sale
    m = models.denoiser(sc.task, ctx)
    base = dllm_models.model_config(config, m.task)
    prompt, _ = m.task.sample(jax.random.key(config.seed + 7_777), sc.num_problems)
    out, dense = {}, None
    for tau in (None, *sc.taus):
        cfg = base if tau is None else dataclasses.replace(
            base, attention_impl="sale", sale_tau=tau,
            sale_sizes=BlockSizes(sc.block_q, sc.block_k, sc.local))
        den = functools.partial(model_lib.apply, model_lib.abstract(cfg)[0], m.params)
        r = jax.jit(functools.partial(
            decoding.decode, den, gen_length=m.task.answer_len, key=jax.random.key(0),
            mask_id=m.task.mask_id, vocab_size=m.task.vocab_size))(prompt)
        dense = np.asarray(r.answer) if tau is None else dense
        out["dense" if tau is None else f"sale_tau_{tau:g}"] = {
            "accuracy": float(np.mean(m.task.verify(prompt, r.answer))),
            "same_answer_as_dense": float(np.mean(np.all(np.asarray(r.answer) == dense, 1)))}
    return {"task": sc.task, "block_sizes": [sc.block_q, sc.block_k, sc.local],
            "seq_len": m.task.prompt_len + m.task.answer_len, "results": out}


def _task_spec(config, name: str) -> dict:
    """What a task unit depends on: the config without the other units' fields."""
    spec = provenance.config_dict(config)
    for field in ("tasks", "throughput_particles", "sale"):
        spec.pop(field, None)
    return {**spec, "task": name}


def _units(config, workdir: str) -> list[study.Unit]:
    models = dllm_models.Models(config, workdir)
    units = [study.Unit(name, functools.partial(_evaluate_task, config, models, name),
                        _task_spec(config, name)) for name in config.tasks]
    units.append(study.Unit("throughput", functools.partial(_throughput, config, models)))
    if config.sale.task in config.tasks:
        units.append(study.Unit("sale", functools.partial(_sale_check, config, models)))
    return units


def _path_ll_correlation(rows) -> dict:
    acc = np.array([v["accuracy"] for v in rows.values()])
    pll = np.array([v["path_ll"] for v in rows.values()])
    correct = np.concatenate([v["_correct"] for v in rows.values()])
    per = np.concatenate([v["_path_ll"] for v in rows.values()])
    return {"pearson_across_decoders": float(np.corrcoef(pll, acc)[0, 1])
            if acc.std() > 0 else float("nan"),
            "auroc_path_ll_for_correct": float(metrics.auroc(per, correct))
            if 0 < correct.mean() < 1 else float("nan")}


def _compare(config, rows) -> dict:
    """POKE-SMC(N) minus the best other decoder with NFE <= its NFE (paired bootstrap)."""
    out = {}
    for n in config.particles:
        ours = rows[f"poke_smc_{n}"]
        rivals = {k: v for k, v in rows.items() if not k.startswith("poke_smc")
                  and v["nfe"] <= ours["nfe"] + 1e-9}
        best = max(rivals, key=lambda k: rivals[k]["accuracy"])
        a, b = (np.asarray(x, np.float64) for x in (ours["_correct"], rivals[best]["_correct"]))
        _, lo, hi = metrics.bootstrap_ci(jax.random.key(config.seed),
                                         lambda x, y: jnp.mean(x - y),
                                         (a.astype(np.float32), b.astype(np.float32)),
                                         config.bootstrap)
        out[str(n)] = {"best_baseline": best, "baseline_accuracy": rivals[best]["accuracy"],
                       "poke_smc_accuracy": ours["accuracy"], "gain": float(np.mean(a - b)),
                       "gain_ci": [lo, hi], "nfe": ours["nfe"]}
    return out


def _versus_sr_smc(config, rows) -> dict:
    """Declared before the run: POKE-SMC(N) minus SR-SMC(N), same N and temperature, paired
    over problems (bootstrap CI), with both NFE conventions (per-particle and batched)."""
    out = {}
    for n in config.particles:
        ours, sr = rows[f"poke_smc_{n}"], rows[f"sr_smc_{n}"]
        a, b = (np.asarray(x, np.float32) for x in (ours["_correct"], sr["_correct"]))
        _, lo, hi = metrics.bootstrap_ci(jax.random.key(config.seed),
                                         lambda x, y: jnp.mean(x - y), (a, b), config.bootstrap)
        out[str(n)] = {"poke_smc_accuracy": ours["accuracy"], "sr_smc_accuracy": sr["accuracy"],
                       "difference": float(np.mean(a - b)), "difference_ci": [lo, hi],
                       "nfe": {"poke_smc": ours["nfe"], "sr_smc": sr["nfe"]},
                       "nfe_batched": {"poke_smc": ours["nfe_batched"],
                                       "sr_smc": sr["nfe_batched"]}}
    return out


def _summarize(config, out) -> dict:
    tasks = {}
    for name in config.tasks:
        # Ties in _compare go to the first decoder of ``decoders`` (registry order).
        rows = {k: out[name]["decoders"][k] for k in decoder_names(config)}
        tasks[name] = {**{k: v for k, v in out[name].items() if k != "decoders"},
                       "path_ll_correlation": _path_ll_correlation(rows),
                       "poke_vs_best_baseline": _compare(config, rows),
                       "poke_vs_sr_smc": _versus_sr_smc(config, rows),
                       "decoders": {k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")}
                                    for k, v in rows.items()}}
    summary = {"tasks": tasks,
               "mean_gain_over_best_baseline": {n: float(np.mean(
                   [t["poke_vs_best_baseline"][str(n)]["gain"] for t in tasks.values()]))
                   for n in config.particles},
               "throughput": out["throughput"], "num_problems": config.num_problems}
    if "sale" in out:
        summary["sale_attention"] = out["sale"]
    return summary


def _plot(config, summary, out, workdir):
    del out
    tasks = summary["tasks"]
    styles = {"greedy": "o", "best_of_n": "s", "smc": "^", "sr_smc": "D", "poke_smc": "*"}
    fig, axes = plots.figure(len(tasks), width=4.2)
    for ax, (name, t) in zip(axes, tasks.items(), strict=True):
        for fam, marker in styles.items():
            pts = sorted((v["nfe"], v["accuracy"], v["accuracy_ci"])
                         for v in t["decoders"].values() if v["family"] == fam)
            if pts:
                x, y, ci = zip(*pts, strict=True)
                err = np.abs(np.array(ci).T - np.array(y))
                ax.errorbar(x, y, yerr=err, marker=marker, ls="none" if fam == "greedy" else "-",
                            label=fam, capsize=2, ms=7 if fam == "poke_smc" else 5)
        ax.set(xscale="log", xlabel="NFE per problem", ylabel="accuracy", title=name)
    axes[0].legend(fontsize=8)
    plots.save(fig, os.path.join(workdir, "accuracy_vs_nfe.png"),
               caption=f"Points: accuracy on {config.num_problems} problems per task; bars: "
               f"95% percentile-bootstrap interval ({config.bootstrap} resamples).")
    fig, axes = plots.figure(len(tasks), width=4.2)
    for ax, (name, t) in zip(axes, tasks.items(), strict=True):
        for k, v in t["decoders"].items():
            ax.scatter(v["path_ll"], v["accuracy"], marker=styles[v["family"]])
            ax.annotate(k, (v["path_ll"], v["accuracy"]), fontsize=6)
        r = t["path_ll_correlation"]["pearson_across_decoders"]
        ax.set(xlabel="mean Path LL of the output", ylabel="accuracy", title=f"{name}: r = {r:.2f}")
    plots.save(fig, os.path.join(workdir, "path_ll_vs_accuracy.png"))


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for results/REPORT.md."""
    rows = [(f"POKE-SMC N={n}: mean accuracy gain over the best baseline at <= NFE",
             f"{100 * g:+.1f} pts") for n, g in summary["mean_gain_over_best_baseline"].items()]
    for name, t in summary["tasks"].items():
        n = max(int(k) for k in t["poke_vs_best_baseline"])
        c = t["poke_vs_best_baseline"][str(n)]
        rows.append((f"{name}: greedy confidence / POKE-SMC N={n} / best baseline",
                     f"{t['decoders']['confidence']['accuracy']:.3f} / "
                     f"{c['poke_smc_accuracy']:.3f} / {c['baseline_accuracy']:.3f} "
                     f"({c['best_baseline']})"))
    for n in summary["mean_gain_over_best_baseline"]:
        d = [t["poke_vs_sr_smc"][str(n)] for t in summary["tasks"].values()]
        cells = ", ".join(
            f"{name} {100 * x['difference']:+.1f} [{100 * x['difference_ci'][0]:+.1f}, "
            f"{100 * x['difference_ci'][1]:+.1f}]"
            for name, x in zip(summary["tasks"], d, strict=True))
        rows.append((f"POKE-SMC - SR-SMC, N={n} (paired, pts; NFE not equal: SR-SMC uses "
                     "adaptive threshold passes)", cells))
    tp = summary["throughput"]
    k = max(tp, key=int)
    rows.append((f"batching efficiency, {k} particles vs 1",
                 f"{tp[k]['batching_efficiency']:.1f}x"))
    return rows


EXPERIMENT = study.Experiment(name="dllm", validate=config_lib.validate_config, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/dllm.py:quick")
