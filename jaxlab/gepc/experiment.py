"""GEPC OOD benchmark: ID = some digit classes (MNIST-5k or scikit-learn digits, 16x16),
several offline OOD sets.

``train(config, workdir)`` trains the score model (what experiments/gepc_train.py runs;
its output ships in experiments/pretrained/). ``train_and_evaluate(config, workdir)``
loads the shipped model (or trains one), computes GEPC residuals and baseline features
for every set (one resumable chunk per set), and writes AUROCs with bootstrap CIs.
"""

import functools
import hashlib
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from experiments.lib import checkpoint, plots, results, study
from jaxlab.core import metrics, sharding
from jaxlab.gepc import baselines, data, residual, schedule, scoring
from jaxlab.gepc.model import UNet
from jaxlab.gepc.train import make_eps_fn, train_score_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _id_source(config):
    if config.id_dataset == "mnist":
        return data.mnist(config.image_size)
    if config.id_dataset == "digits":
        return data.sklearn_digits(config.image_size)
    raise ValueError(f"`id_dataset` must be 'mnist' or 'digits', got {config.id_dataset!r}.")


def id_split(config):
    """(ID-train, ID-test, OOD held-out classes) images of ``config.id_dataset``."""
    x, y = _id_source(config)
    is_id = np.isin(y, config.id_classes)
    xid = x[is_id]
    return xid[:config.num_train], xid[config.num_train:config.num_train + config.num_test], \
        x[~is_id][:config.num_test]


def ood_sets(config, id_test, held_out) -> dict[str, np.ndarray]:
    """name -> [N, S, S, 1] OOD images, all offline."""
    s = config.image_size
    n = config.num_test
    other_name = "sklearn_digits" if config.id_dataset == "mnist" else "mnist"
    other, _ = data.sklearn_digits(s) if config.id_dataset == "mnist" else data.mnist(s)
    return {
        f"{config.id_dataset}_heldout_classes": held_out,
        other_name: other[:n],
        "textures": data.image_patches(("brick", "grass", "gravel"), n, s),
        "faces": data.faces(s)[:n],
        "uniform_noise": data.uniform_noise(n, s),
        "rotated_id": np.rot90(id_test, 1, (1, 2)).copy(),
        "shifted_id": np.roll(id_test, 3, axis=2),
    }


def _model_dir(config):
    """``config.pretrained_dir`` as given if it exists (absolute or from the cwd), else
    relative to the repository root of this checkout."""
    path = config.pretrained_dir
    return path if os.path.isdir(path) else os.path.join(ROOT, path)


def train(config: ml_collections.ConfigDict, workdir: str, id_train=None):
    """Trains the eps-model on ID-train (loaded unless given) and exports its params to
    ``workdir/score_model``."""
    scoring.validate_config(config)
    if id_train is None:
        id_train, _, _ = id_split(config)
    # Keyed by everything that determines the model (data bytes included) and the code
    # version: a changed setting or dataset never resumes another run's training.
    ckpt = checkpoint.checkpoint_dir_for(workdir, {
        "what": "gepc_score_model", "steps": config.train_steps,
        "batch_size": config.batch_size, "learning_rate": config.learning_rate,
        "num_chunks": config.train_chunks, "channels": tuple(config.channels),
        "seed": config.seed,
        "data_sha1": hashlib.sha1(np.asarray(id_train).tobytes()).hexdigest()})
    model, params, losses = train_score_model(
        id_train, runner=functools.partial(study.run_resumable, checkpoint_dir=ckpt),
        steps=config.train_steps, batch_size=config.batch_size,
        learning_rate=config.learning_rate, num_chunks=config.train_chunks,
        channels=tuple(config.channels), seed=config.seed)
    out = os.path.join(os.path.abspath(workdir), "score_model")
    with checkpoint.Checkpointer(out, max_to_keep=1) as ck:
        ck.save(config.train_steps, params)
    logging.info("score model saved to %s (final chunk loss %.4f)", out, losses[-1])
    return model, params, losses


def load_or_train(config, workdir, id_train):
    """The shipped model if ``config.pretrained_dir`` holds one, else one trained on
    ``id_train``."""
    model = UNet(tuple(config.channels))
    template = model.init(jax.random.key(0), jnp.zeros((1, config.image_size,
                                                        config.image_size, 1)), jnp.zeros(1))
    path = _model_dir(config)
    if config.pretrained_dir and os.path.isdir(path):
        with checkpoint.Checkpointer(path) as ck:
            if ck.latest_step() is not None:
                logging.info("GEPC: using the shipped score model in %s", path)
                return model, ck.restore(template)
    logging.info("GEPC: no shipped model at %s; training one", path)
    model, params, _ = train(config, workdir, id_train)
    return model, params


def _batched(fn, x, batch, mesh_shape=(-1,)):
    """fn over fixed-size batches (the last one padded), so each program compiles once; each
    batch of images is split over the devices of ``mesh_shape``."""
    n = x.shape[0]
    pad = (-n) % batch
    xp = np.concatenate([x, np.repeat(x[-1:], pad, 0)]) if pad else x
    out = np.concatenate([sharding.to_host(fn(sharding.shard_batch(xp[i:i + batch],
                                                                   mesh_shape)))
                          for i in range(0, xp.shape[0], batch)])
    return out[:n]


def _features(config, eps_fn, score_fn, x, key):
    """Per-image features of every method: dict of fixed-shape arrays."""
    ts = schedule.t_from_sqrt_alpha_bar(np.asarray(config.sqrt_abars))
    b, ms = config.eval_batch, config.get("mesh_shape", (-1,))
    keys = iter(jax.random.split(key, 4))
    k_res, k_norm = next(keys), next(keys)
    res = _batched(lambda xb: residual.gepc_residuals(score_fn, xb, k_res, ts, config.group,
                                                      config.rho), x, b, ms)
    msma_ts = np.linspace(config.msma_t_min, config.msma_t_max, config.msma_levels)
    return {
        "gepc": res,
        "score_norm": _batched(lambda xb: baselines.score_norm(eps_fn, xb, k_norm,
                                                               float(ts.min())), x, b, ms),
        "msma": _batched(lambda xb: baselines.msma_features(eps_fn, xb, msma_ts), x, b, ms),
        "diffpath": _batched(lambda xb: baselines.diffpath_features(
            eps_fn, xb, config.diffpath_steps), x, b, ms),
    }


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict:
    scoring.validate_config(config)
    id_train, id_test, held_out = id_split(config)
    sets = {"id_train": id_train, "id_test": id_test, **ood_sets(config, id_test, held_out)}
    model, params = load_or_train(config, workdir, id_train)
    eps_fn = make_eps_fn(model, params)
    score_fn = residual.score_from_eps(eps_fn)
    names = list(sets)
    n_t, n_g = len(config.sqrt_abars), len(config.group)
    init = {}
    for name in names:
        n = sets[name].shape[0]
        init[name] = {"gepc": jnp.zeros((n, n_t, n_g)), "score_norm": jnp.zeros((n,)),
                      "msma": jnp.zeros((n, config.msma_levels)),
                      "diffpath": jnp.zeros((n, 2))}

    def chunk(carry, i):
        name = names[i]
        logging.info("GEPC features: %s (%d images)", name, sets[name].shape[0])
        f = _features(config, eps_fn, score_fn, sets[name], jax.random.key(config.seed + i))
        return {**carry, name: {k: jnp.asarray(v, jnp.float32) for k, v in f.items()}}

    feats = study.run_resumable(chunk, init, len(names),
                                     checkpoint_dir=checkpoint.checkpoint_dir_for(workdir, config),
                                     desc="GEPC sets", unit="set")
    feats = jax.tree.map(np.asarray, feats)
    summary = _evaluate(config, names, feats)
    summary["cost_score_evals_per_image"] = {
        "gepc": config.num_t * (len(config.group) + 1), "score_norm": 1,
        "msma": config.msma_levels, "diffpath": config.diffpath_steps}
    results.write_summary(workdir, summary, config)
    _plot_auroc(summary, os.path.join(workdir, "auroc.png"),
                caption=f"Bars: AUROC (OOD positive) of {config.num_test} ID-test images vs "
                f"each set (up to {config.num_test} images); error bars: 95% percentile "
                f"bootstrap over images ({config.bootstrap} resamples).")
    _plot_maps(config, score_fn, sets, os.path.join(workdir, "maps.png"))
    return summary


def _evaluate(config, names, feats):
    ood = [n for n in names if n not in ("id_train", "id_test")]
    scorers = {"gepc": scoring.fit(feats["id_train"]["gepc"], config.num_t),
               "gepc_logkde": scoring.fit(feats["id_train"]["gepc"], config.num_t,
                                          log_features=True)}
    gmms = {k: scoring.fit_gmm(np.log(feats["id_train"][k] + 1e-8), config.gmm_components)
            for k in ("msma", "diffpath")}

    def method_scores(name):
        f = feats[name]
        return {
            "GEPC": np.asarray(scoring.score(scorers["gepc"], f["gepc"])),
            "GEPC log-KDE (ours)": np.asarray(scoring.score(scorers["gepc_logkde"], f["gepc"])),
            "score norm": f["score_norm"],
            "MSMA-style": scoring.gmm_nll(gmms["msma"], np.log(f["msma"] + 1e-8)),
            "DiffPath-style": scoring.gmm_nll(gmms["diffpath"], np.log(f["diffpath"] + 1e-8)),
        }

    id_scores = method_scores("id_test")
    table = {}
    key = jax.random.key(config.seed)
    for name in ood:
        o = method_scores(name)
        table[name] = {}
        for m in o:
            s = np.concatenate([id_scores[m], o[m]])
            lab = np.concatenate([np.zeros(len(id_scores[m]), bool), np.ones(len(o[m]), bool)])
            table[name][m] = _auroc_ci(key, s, lab, config.bootstrap)
    methods = list(id_scores)
    mean_auroc = {m: float(np.mean([table[n][m]["auroc"] for n in ood])) for m in methods}
    sel = np.asarray(scorers["gepc"].t_index)
    return {"config": config.to_dict(), "auroc": table, "mean_auroc": mean_auroc,
            "selected_sqrt_abar": [float(config.sqrt_abars[i]) for i in sel],
            "id_train_size": int(feats["id_train"]["score_norm"].shape[0])}


def _auroc_ci(key, scores, labels, num_boot):
    s, lab = jnp.asarray(scores, jnp.float32), jnp.asarray(labels)
    point = float(metrics.auroc(s, lab))
    n = s.shape[0]
    idx = jax.random.randint(key, (num_boot, n), 0, n)
    boots = np.asarray(jax.vmap(lambda i: metrics.auroc(s[i], lab[i]))(idx))
    lo, hi = np.nanpercentile(boots, [2.5, 97.5])
    return {"auroc": point, "ci95": [float(lo), float(hi)]}


def _plot_auroc(summary, path, caption):
    table = summary["auroc"]
    sets = list(table)
    methods = list(next(iter(table.values())))
    fig, (ax,) = plots.figure(1, width=10)
    w = 0.8 / len(methods)
    for j, m in enumerate(methods):
        vals = [table[s][m]["auroc"] for s in sets]
        err = np.array([[table[s][m]["auroc"] - table[s][m]["ci95"][0],
                         table[s][m]["ci95"][1] - table[s][m]["auroc"]] for s in sets]).T
        ax.bar(np.arange(len(sets)) + j * w, vals, w, yerr=err, label=m, capsize=2)
    ax.set_xticks(np.arange(len(sets)) + 0.4 - w / 2, sets, rotation=20, fontsize=8)
    ax.set(ylabel="AUROC (OOD positive)", ylim=(0, 1.18), title="ID classes vs OOD sets")
    ax.axhline(0.5, color="gray", lw=0.8, ls=":")
    ax.legend(fontsize=7, ncol=5, loc="upper center")
    plots.save(fig, path, caption=caption)


def _plot_maps(config, score_fn, sets, path):
    show = ["id_test", f"{config.id_dataset}_heldout_classes", "textures", "faces",
            "rotated_id"]
    t = schedule.t_from_sqrt_alpha_bar(np.asarray(config.sqrt_abars[:1]))
    fig, axes = plots.figure(len(show), width=2.2, height=4.6)
    for ax, name in zip(axes, show, strict=True):
        x = jnp.asarray(sets[name][:1])
        _, maps = residual.gepc_residuals(score_fn, x, jax.random.key(0), t, config.group,
                                          config.rho, with_maps=True)
        ax.imshow(np.concatenate([np.asarray(x[0, :, :, 0]) * 0.5 + 0.5,
                                  np.asarray(maps[0, 0]) / float(maps.max())], 0), cmap="magma")
        ax.set_title(name, fontsize=8)
        ax.axis("off")
    plots.save(fig, path)


def headline(summary: dict) -> list[tuple[str, str]]:
    m = summary["mean_auroc"]
    rows = [("mean AUROC over OOD sets: " + ", ".join(m), ", ".join(f"{v:.3f}" for v in
                                                                    m.values()))]
    for name, row in summary["auroc"].items():
        rows.append((f"AUROC {name}: GEPC / best baseline",
                     f"{row['GEPC']['auroc']:.3f} / " + "{:.3f} ({})".format(*max(
                         (v["auroc"], k) for k, v in row.items() if not k.startswith("GEPC")))))
    return rows


