"""POKE-SMC experiments: train/load the task denoisers and POKE heads, run the decoding
study (accuracy vs NFE for every decoder, Path-LL/accuracy correlation, throughput).

``train_and_evaluate(config, workdir)`` is what experiments/dllm.py, the suite and the
notebook call; ``train_denoisers`` is experiments/dllm_train.py (its output ships in
experiments/pretrained/dllm/).
"""

import dataclasses
import functools
import json
import os
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from experiments.lib import checkpoint, plots, provenance, study, timing
from experiments.lib.progress import Progress
from experiments.lib.results import write_json, write_summary
from jaxlab.core import metrics, sharding
from jaxlab.dllm import config as config_lib
from jaxlab.dllm import decoding, path_smc, poke
from jaxlab.dllm import model as model_lib
from jaxlab.dllm import tasks as tasks_lib
from jaxlab.dllm import train as train_lib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def make_task(config, name):
    return tasks_lib.make_task(name, **dict(config.task_kwargs.get(name, {})))


def model_config(config, task) -> model_lib.LLaDAConfig:
    return model_lib.LLaDAConfig(vocab_size=task.vocab_size, mask_token_id=task.mask_id,
                                 **dict(config.model))


def _pretrained(config, name) -> str:
    path = config.pretrained_dir
    if not path:
        return ""
    path = path if os.path.isdir(path) else os.path.join(ROOT, path)
    return os.path.join(path, name)


def _train_kwargs(config, name) -> dict:
    return {**dict(config.train), **dict(config.get("task_train", {}).get(name, {}))}


def _model_key(config, name, head: bool = False) -> str:
    """Key of a model trained in a workdir: what determines it (task, architecture,
    training settings, seed; the POKE settings for a head) and the code version."""
    spec = {"task": name, "task_kwargs": dict(config.task_kwargs.get(name, {})),
            "model": dict(config.model), "train": _train_kwargs(config, name),
            "seed": config.seed}
    if head:
        spec["poke"] = dict(config.poke)
    return provenance.unit_key(spec)


def _export(path, step, params, key):
    with checkpoint.Checkpointer(path, max_to_keep=1) as ck:
        ck.save(step, params)
    write_json(os.path.join(path, "trained_with.json"), {"unit_key": key})


def train_denoiser(config, workdir, name):
    """Trains one task's denoiser (resumable) and exports params to workdir/models/name."""
    task = make_task(config, name)
    cfg = model_config(config, task)
    kw = _train_kwargs(config, name)
    graphdef, params, history = train_lib.train(
        task, cfg, seed=config.seed,
        runner=functools.partial(study.run_resumable, checkpoint_dir=os.path.join(
            checkpoint.checkpoint_dir_for(workdir, config), f"train_{name}")), **kw)
    out = os.path.join(os.path.abspath(workdir), "models", name)
    _export(out, kw["steps"], params, _model_key(config, name))
    write_json(os.path.join(workdir, "models", f"{name}_history.json"), history)
    logging.info("%s denoiser saved to %s (eval loss %.4f)", name, out,
                 history["eval_loss"][-1])
    return graphdef, params


def train_denoisers(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """Trains every task's denoiser; returns {task: final held-out diffusion loss}."""
    config_lib.validate_config(config)
    out = {}
    for name in config.tasks:
        train_denoiser(config, workdir, name)
        with open(os.path.join(workdir, "models", f"{name}_history.json")) as f:
            out[name] = json.load(f)["eval_loss"][-1]
    return out


def _restore_first(paths, template, what):
    """The params in the first of ``paths`` holding a checkpoint, else None.

    ``paths`` holds (path, key): key None for shipped models (part of the code version);
    a model trained in a workdir is used only if its ``trained_with.json`` has ``key``.
    """
    for path, key in paths:
        if path and os.path.isdir(path) and key is not None:
            marker = os.path.join(path, "trained_with.json")
            found = None
            if os.path.exists(marker):
                with open(marker) as f:
                    found = json.load(f)["unit_key"]
            if found != key:
                logging.warning("dllm: %s in %s was trained with another config or code "
                                "version (%s); not using it", what, path, found)
                continue
        if path and os.path.isdir(path):
            with checkpoint.Checkpointer(path) as ck:
                if ck.latest_step() is not None:
                    logging.info("dllm: %s from %s", what, path)
                    return ck.restore(template)
    return None


def load_or_train_denoiser(config, workdir, name):
    """The shipped denoiser of ``name`` if there is one, else one trained in ``workdir``."""
    task = make_task(config, name)
    graphdef, template = model_lib.init(model_config(config, task), config.seed)
    params = _restore_first(((_pretrained(config, name), None),
                             (os.path.join(os.path.abspath(workdir), "models", name),
                              _model_key(config, name))),
                            template, f"{name} denoiser")
    if params is not None:
        return task, graphdef, params
    logging.info("dllm: no denoiser for %s; training one", name)
    return (task, *train_denoiser(config, workdir, name))



def _poke_rollouts(config, task, denoise_fn, seed_offset: int, num: int):
    prompt, _ = task.sample(jax.random.key(config.seed + seed_offset), num)
    chunks = []
    b = min(num, 1024)
    for i in range(0, num, b):
        chunks.append(poke.collect_rollouts(
            denoise_fn, prompt[i:i + b], task.answer_len, jax.random.key(seed_offset + i),
            mask_id=task.mask_id, temperature=config.poke.temperature))
    return jax.tree.map(lambda *x: jnp.concatenate(x), *chunks)


def train_poke(config, workdir, name, task, denoise_fn):
    """Fits the POKE head of ``name`` on proposal rollouts; exports to workdir/models/."""
    pc = config.poke
    ro = _poke_rollouts(config, task, denoise_fn, 1, pc.rollouts)
    graphdef, params, _, _ = poke.fit(
        ro, hidden=pc.hidden, steps=pc.steps, batch_size=pc.batch_size, lr=pc.lr,
        seed=config.seed, num_chunks=pc.num_chunks,
        runner=functools.partial(study.run_resumable, checkpoint_dir=os.path.join(
            checkpoint.checkpoint_dir_for(workdir, config), f"poke_{name}")))
    out = os.path.join(os.path.abspath(workdir), "models", f"{name}_poke")
    _export(out, pc.steps, params, _model_key(config, name, head=True))
    return graphdef, params


def train_poke_heads(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """experiments/poke_train.py: fits every task's POKE head on its (shipped) denoiser."""
    config_lib.validate_config(config)
    out = {}
    for name in config.tasks:
        task, graphdef, params = load_or_train_denoiser(config, workdir, name)
        denoise_fn = jax.jit(functools.partial(model_lib.apply, graphdef, params))
        gh, ph = train_poke(config, workdir, name, task, denoise_fn)
        out[name] = poke.evaluate(gh, ph, _poke_rollouts(config, task, denoise_fn, 2, 512))
        logging.info("%s POKE head held-out fit: %s", name, out[name])
    return out


def load_or_train_poke(config, workdir, name, task, denoise_fn):
    graphdef, template = poke.init(config.model.d_model, config.poke.hidden, config.seed)
    params = _restore_first(((_pretrained(config, f"{name}_poke"), None),
                             (os.path.join(os.path.abspath(workdir), "models", f"{name}_poke"),
                              _model_key(config, name, head=True))),
                            template, f"{name} POKE head")
    if params is not None:
        return graphdef, params
    return train_poke(config, workdir, name, task, denoise_fn)


def semi_ar_block(gen_length: int) -> int:
    """Largest proper divisor of gen_length (1 = left-to-right for prime lengths)."""
    return max([d for d in range(1, gen_length) if gen_length % d == 0] or [1])


def decoders(config, task, denoise_fn, value_fn) -> dict:
    """name -> (family, N, fn(prompt, key) -> (DecodeResult, flag)), each jitted once.

    ``flag`` is True when SMC log weights became non-finite on any step (``SMCInfo.
    nonfinite_weights``; always False for the greedy decoders); ``evaluate_task`` raises on it.
    """
    a, common = task.answer_len, dict(mask_id=task.mask_id, vocab_size=task.vocab_size)
    out = {}
    for pol in decoding.POLICIES:
        out[pol] = ("greedy", 1, _no_flag(functools.partial(
            decoding.decode, denoise_fn, gen_length=a, policy=pol, **common)))
    out["semi_ar"] = ("greedy", 1, _no_flag(functools.partial(
        decoding.decode, denoise_fn, gen_length=a, block_length=semi_ar_block(a), **common)))
    out["threshold"] = ("greedy", 1, _no_flag(functools.partial(
        decoding.decode_threshold, denoise_fn, gen_length=a, threshold=config.threshold,
        **common)))
    for n in config.particles:
        kw = dict(num_particles=n, temperature=config.temperature, **common)
        out[f"best_of_{n}"] = ("best_of_n", n, _weight_flag(functools.partial(
            path_smc.best_of_n, denoise_fn, gen_length=a, **kw)))
        out[f"smc_{n}"] = ("smc", n, _weight_flag(functools.partial(
            path_smc.smc_decode, denoise_fn, gen_length=a, **kw)))
        out[f"poke_smc_{n}"] = ("poke_smc", n, _weight_flag(functools.partial(
            path_smc.smc_decode, denoise_fn, gen_length=a, value_fn=value_fn, **kw)))
    return out


def _no_flag(f):
    return lambda *x, **k: (f(*x, **k), jnp.bool_(False))


def _weight_flag(f):
    def g(*x, **k):
        result, info = f(*x, **k)
        return result, jnp.any(info.nonfinite_weights)
    return g


def _bootstrap_ci(x, num, seed, paired_with=None):
    """Mean and 95% percentile-bootstrap interval of x (or of x - paired_with)."""
    x = np.asarray(x, np.float64)
    if paired_with is not None:
        x = x - np.asarray(paired_with, np.float64)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.shape[0], (num, x.shape[0]))].mean(1)
    return float(x.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def evaluate_task(config, workdir, name) -> dict:
    """Runs every decoder on ``config.num_problems`` held-out problems of ``name``."""
    task, graphdef, params = load_or_train_denoiser(config, workdir, name)
    denoise_fn = jax.jit(functools.partial(model_lib.apply, graphdef, params))
    gh, ph = load_or_train_poke(config, workdir, name, task, denoise_fn)
    value_fn = poke.make_value_fn(gh, ph, task.prompt_len, task.mask_id)
    poke_fit = poke.evaluate(gh, ph, _poke_rollouts(config, task, denoise_fn, 2,
                                                    min(512, config.poke.rollouts)))
    prompt, _ = task.sample(jax.random.key(config.seed + 7_777), config.num_problems)
    b = config.eval_batch
    decs = decoders(config, task, denoise_fn, value_fn)
    rows = {}
    prog = Progress(len(decs), desc=f"dllm {name} decoders", unit="decoder")
    for dname, (family, n, fn) in decs.items():
        jfn = jax.jit(fn)
        correct, pll, nfe = [], [], []
        t0 = time.perf_counter()
        for i in range(0, config.num_problems, b):
            p = sharding.shard_batch(prompt[i:i + b], config.get("mesh_shape", (-1,)))
            r, bad = jfn(p, key=jax.random.key(config.seed * 1000 + i))
            ok, path_ll, n_fe, bad = sharding.to_host(
                (task.verify(p, r.answer), r.path_ll, r.nfe, bad))
            if bool(bad):
                raise FloatingPointError(
                    f"dllm {name} {dname}: SMC log weights became non-finite on problems "
                    f"{i}..{i + p.shape[0] - 1}; check `weight_scale`, `temperature` and the "
                    "POKE head (see path_smc.raise_if_nonfinite).")
            correct.append(ok)
            pll.append(path_ll)
            nfe.append(n_fe)
        correct, pll, nfe = map(np.concatenate, (correct, pll, nfe))
        acc, lo, hi = _bootstrap_ci(correct, config.bootstrap, config.seed)
        rows[dname] = {"family": family, "particles": n, "accuracy": acc,
                       "accuracy_ci": [lo, hi], "nfe": float(nfe.mean()),
                       "path_ll": float(pll.mean()), "seconds": time.perf_counter() - t0,
                       "_correct": correct, "_path_ll": pll}
        prog.update(1, postfix=f"{dname} acc {acc:.3f}")
    prog.close()
    return {"task": name, "answer_len": task.answer_len, "poke_fit": poke_fit,
            "decoders": rows}


def _path_ll_correlation(rows) -> dict:
    names = list(rows)
    acc = np.array([rows[k]["accuracy"] for k in names])
    pll = np.array([rows[k]["path_ll"] for k in names])
    correct = np.concatenate([rows[k]["_correct"] for k in names])
    per = np.concatenate([rows[k]["_path_ll"] for k in names])
    both = 0 < correct.mean() < 1
    return {"pearson_across_decoders": float(np.corrcoef(pll, acc)[0, 1])
            if acc.std() > 0 else float("nan"),
            "auroc_path_ll_for_correct": float(metrics.auroc(per, correct)) if both
            else float("nan")}


def _compare(config, rows) -> dict:
    """POKE-SMC(N) minus the best other decoder with NFE <= its NFE (paired bootstrap)."""
    out = {}
    for n in config.particles:
        ours = rows[f"poke_smc_{n}"]
        rivals = {k: v for k, v in rows.items() if not k.startswith("poke_smc")
                  and v["nfe"] <= ours["nfe"] + 1e-9}
        best = max(rivals, key=lambda k: rivals[k]["accuracy"])
        mean, lo, hi = _bootstrap_ci(ours["_correct"], config.bootstrap, config.seed,
                                     paired_with=rivals[best]["_correct"])
        out[str(n)] = {"best_baseline": best, "baseline_accuracy": rivals[best]["accuracy"],
                       "poke_smc_accuracy": ours["accuracy"], "gain": mean,
                       "gain_ci": [lo, hi], "nfe": ours["nfe"]}
    return out


def throughput(config, name, workdir) -> dict:
    """Generated tokens/s of N-particle SMC vs a single greedy decode of the same problems."""
    task, graphdef, params = load_or_train_denoiser(config, workdir, name)
    denoise_fn = jax.jit(functools.partial(model_lib.apply, graphdef, params))
    prompt, _ = task.sample(jax.random.key(1), 64)
    common = dict(mask_id=task.mask_id, vocab_size=task.vocab_size)
    out = {}
    for n in config.throughput_particles:
        fn = jax.jit(functools.partial(path_smc.smc_decode, denoise_fn, gen_length=task.answer_len,
                                       num_particles=n, **common))
        sec = timing.best_time(lambda fn=fn: fn(prompt, key=jax.random.key(0)), repeats=2)
        out[str(n)] = {"seconds": sec,
                       "tokens_per_s": prompt.shape[0] * n * task.answer_len / sec}
    base = out[str(min(config.throughput_particles))]["tokens_per_s"]
    for v in out.values():
        v["batching_efficiency"] = v["tokens_per_s"] / base
    return out


def sale_check(config, workdir) -> dict:
    """Greedy decoding of ``config.sale.task`` with SALE block-sparse attention in the
    denoiser (``jaxlab.attention``, Pallas kernels) vs dense: accuracy and the share of
    answers identical to the dense decode, per tau."""
    sc = config.sale
    task, _, params = load_or_train_denoiser(config, workdir, sc.task)
    base = model_config(config, task)
    prompt, _ = task.sample(jax.random.key(config.seed + 7_777), sc.num_problems)
    common = dict(key=jax.random.key(0), mask_id=task.mask_id, vocab_size=task.vocab_size)
    out, dense_answer = {}, None
    for tau in (None, *sc.taus):
        cfg = base if tau is None else dataclasses.replace(
            base, attention_impl="sale", sale_tau=tau, sale_block_q=sc.block_q,
            sale_block_k=sc.block_k, sale_local=sc.local)
        graphdef, _ = model_lib.abstract(cfg)
        den = functools.partial(model_lib.apply, graphdef, params)
        r = jax.jit(functools.partial(decoding.decode, den, gen_length=task.answer_len,
                                      **common))(prompt)
        ans = np.asarray(r.answer)
        dense_answer = ans if tau is None else dense_answer
        out["dense" if tau is None else f"sale_tau_{tau:g}"] = {
            "accuracy": float(np.mean(task.verify(prompt, r.answer))),
            "same_answer_as_dense": float(np.mean(np.all(ans == dense_answer, axis=1)))}
    return {"task": sc.task, "block_sizes": [sc.block_q, sc.block_k, sc.local],
            "seq_len": task.prompt_len + task.answer_len, "results": out}


def _public(rows):
    return {k: {kk: vv for kk, vv in v.items() if not kk.startswith("_")}
            for k, v in rows.items()}


def _plot(config, workdir, results):
    names = list(results)
    fig, axes = plots.figure(len(names), width=4.2)
    styles = {"greedy": "o", "best_of_n": "s", "smc": "^", "poke_smc": "*"}
    for ax, name in zip(axes, names, strict=True):
        rows = results[name]["decoders"]
        for fam, marker in styles.items():
            pts = sorted((v["nfe"], v["accuracy"], v["accuracy_ci"], k)
                         for k, v in rows.items() if v["family"] == fam)
            if not pts:
                continue
            x = [p[0] for p in pts]
            y = [p[1] for p in pts]
            err = np.array([[p[1] - p[2][0], p[2][1] - p[1]] for p in pts]).T
            ax.errorbar(x, y, yerr=err, marker=marker, ls="-" if fam != "greedy" else "none",
                        label=fam, capsize=2, ms=7 if fam == "poke_smc" else 5)
        ax.set_xscale("log")
        ax.set_xlabel("NFE per problem")
        ax.set_ylabel("accuracy")
        ax.set_title(name)
    axes[0].legend(fontsize=8)
    plots.save(fig, os.path.join(workdir, "accuracy_vs_nfe.png"),
               caption=f"Points: accuracy on {config.num_problems} problems per task; bars: "
               f"95% percentile-bootstrap interval ({config.bootstrap} resamples).")
    fig, axes = plots.figure(len(names), width=4.2)
    for ax, name in zip(axes, names, strict=True):
        rows = results[name]["decoders"]
        for k, v in rows.items():
            ax.scatter(v["path_ll"], v["accuracy"], marker=styles[v["family"]])
            ax.annotate(k, (v["path_ll"], v["accuracy"]), fontsize=6)
        ax.set_xlabel("mean Path LL of the output")
        ax.set_ylabel("accuracy")
        r = results[name]["path_ll_correlation"]["pearson_across_decoders"]
        ax.set_title(f"{name}: r = {r:.2f}")
    plots.save(fig, os.path.join(workdir, "path_ll_vs_accuracy.png"))


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    """The POKE-SMC study on every task; writes summary.json + PNGs into ``workdir``.

    Finished tasks are kept in ``<workdir>/checkpoints/<config hash>/<task>.json`` so an
    interrupted run resumes at the next task.
    """
    config_lib.validate_config(config)
    os.makedirs(workdir, exist_ok=True)
    done_dir = checkpoint.checkpoint_dir_for(workdir, config)
    os.makedirs(done_dir, exist_ok=True)
    results = {}
    for name in config.tasks:
        path = os.path.join(done_dir, f"{name}.json")
        if os.path.exists(path):
            logging.info("dllm: %s already evaluated (%s)", name, path)
            with open(path) as f:
                res = json.load(f)
            for v in res["decoders"].values():
                v["_correct"], v["_path_ll"] = np.array(v["_correct"]), np.array(v["_path_ll"])
        else:
            res = evaluate_task(config, workdir, name)
            write_json(path, res)
        res["path_ll_correlation"] = _path_ll_correlation(res["decoders"])
        res["poke_vs_best_baseline"] = _compare(config, res["decoders"])
        results[name] = res
    gains = {n: float(np.mean([results[t]["poke_vs_best_baseline"][str(n)]["gain"]
                               for t in results])) for n in config.particles}
    summary = {
        "tasks": {k: {**{kk: vv for kk, vv in v.items() if kk != "decoders"},
                      "decoders": _public(v["decoders"])} for k, v in results.items()},
        "mean_gain_over_best_baseline": gains,
        "throughput": throughput(config, config.tasks[0], workdir),
        "num_problems": config.num_problems,
    }
    if config.sale.task in config.tasks:
        summary["sale_attention"] = sale_check(config, workdir)
    _plot(config, workdir, results)
    write_summary(workdir, summary, config)
    return summary


def headline(summary: dict) -> list[tuple[str, str]]:
    rows = []
    for n, g in summary["mean_gain_over_best_baseline"].items():
        rows.append((f"POKE-SMC N={n}: mean accuracy gain over the best baseline at <= NFE",
                     f"{100 * g:+.1f} pts"))
    for name, t in summary["tasks"].items():
        d = t["decoders"]
        n = max(int(k) for k in t["poke_vs_best_baseline"])
        c = t["poke_vs_best_baseline"][str(n)]
        rows.append((f"{name}: greedy confidence / POKE-SMC N={n} / best baseline",
                     f"{d['confidence']['accuracy']:.3f} / {c['poke_smc_accuracy']:.3f} / "
                     f"{c['baseline_accuracy']:.3f} ({c['best_baseline']})"))
    tp = summary["throughput"]
    k = max(tp, key=int)
    rows.append((f"batching efficiency, {k} particles vs 1",
                 f"{tp[k]['batching_efficiency']:.1f}x"))
    return rows
