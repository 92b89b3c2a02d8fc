"""GEPC OOD benchmark (AUROC table vs baselines, maps): ID = some digit classes (MNIST-5k
or scikit-learn digits, 16x16), several offline OOD sets.

  python -m experiments.gepc --config=experiments/configs/gepc.py:quick --workdir=results/gepc

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. The score model is the shipped one (``config.pretrained_dir``, looked up
through ``experiments.lib.artifacts``); without one, the ``score_model`` unit trains it
(resumable chunks, keyed by the training settings and the ID-train data's sha1) and
exports it to ``<workdir>/score_model``. Then one unit per image set computes the GEPC
residuals and the baseline features (``features``); the summary fits the scorers on
ID-train and reports AUROCs with bootstrap CIs (``metrics.bootstrap_ci``).
``train(config, workdir)`` is what experiments/gepc_train.py runs (its output ships in
experiments/pretrained/).
"""

import functools
import hashlib
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from experiments import common
from experiments.lib import artifacts, plots, provenance, study
from jaxlab.core import loops, metrics, sharding
from jaxlab.gepc import baselines, data, residual, schedule, scoring
from jaxlab.gepc.model import UNet
from jaxlab.gepc.train import make_eps_fn, train_score_model

METHODS = ("GEPC", "GEPC log-KDE (ours)", "score norm", "MSMA-style", "DiffPath-style")


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


def image_sets(config) -> dict[str, np.ndarray]:
    """Every image set of the benchmark: id_train, id_test, then the OOD sets."""
    id_train, id_test, held_out = id_split(config)
    return {"id_train": id_train, "id_test": id_test, **ood_sets(config, id_test, held_out)}


# --- the score model ------------------------------------------------------------------


def _model_spec(config, id_train) -> dict:
    """Everything that determines the trained model (data bytes included)."""
    return {"what": "gepc_score_model", "steps": config.train_steps,
            "batch_size": config.batch_size, "learning_rate": config.learning_rate,
            "num_chunks": config.train_chunks, "channels": tuple(config.channels),
            "seed": config.seed,
            "data_sha1": hashlib.sha1(np.asarray(id_train).tobytes()).hexdigest()}


def _model_key(config, id_train) -> str:
    """The key of a model trained under ``config`` by this code: the ``score_model`` unit's
    key, also the ``trained_with.json`` marker of ``<workdir>/score_model``."""
    return provenance.unit_key({"unit": "score_model", "spec": _model_spec(config, id_train)})


def _shipped(config) -> str:
    """The folder of the shipped model named by ``config.pretrained_dir``, or "" if none."""
    path = artifacts.resolve(config.pretrained_dir)
    return path if path and os.path.isdir(path) else ""


def train(config: ml_collections.ConfigDict, workdir: str, id_train=None,
          runner: loops.ChunkRunner | None = None):
    """Trains the eps-model on ID-train (loaded unless given) and exports its params to
    ``workdir/score_model`` (with the ``trained_with.json`` marker).

    Args:
      config: a GEPC config.
      workdir: output folder.
      id_train: [N, S, S, 1] ID-train images (default: ``id_split(config)[0]``).
      runner: chunk runner (default: ``study.run_resumable`` checkpointing under
        ``workdir/checkpoints/<model key>``, the folder the ``score_model`` unit uses).

    Returns:
      (model, params, per-chunk mean losses).
    """
    scoring.validate_config(config)
    if id_train is None:
        id_train, _, _ = id_split(config)
    key = _model_key(config, id_train)
    if runner is None:
        runner = functools.partial(study.run_resumable, checkpoint_dir=os.path.join(
            os.path.abspath(workdir), "checkpoints", key))
    model, params, losses = train_score_model(
        id_train, runner=runner, steps=config.train_steps, batch_size=config.batch_size,
        learning_rate=config.learning_rate, num_chunks=config.train_chunks,
        channels=tuple(config.channels), seed=config.seed)
    out = os.path.join(os.path.abspath(workdir), "score_model")
    artifacts.export(out, config.train_steps, params, key)
    logging.info("score model saved to %s (final chunk loss %.4f)", out, losses[-1])
    return model, params, losses


def load_or_train(config, workdir, id_train=None):
    """(model, params): the shipped model if ``config.pretrained_dir`` holds one, else the
    one trained under this config and code in ``workdir/score_model``, else a new one
    trained on ``id_train`` (default: ``id_split(config)[0]``)."""
    model = UNet(tuple(config.channels))
    template = model.init(jax.random.key(0), jnp.zeros((1, config.image_size,
                                                        config.image_size, 1)), jnp.zeros(1))
    params = artifacts.restore_first([(_shipped(config), None)], template,
                                     "GEPC score model (shipped)")
    if params is None:
        if id_train is None:
            id_train, _, _ = id_split(config)
        params = artifacts.restore_first(
            [(os.path.join(workdir, "score_model"), _model_key(config, id_train))], template,
            "GEPC score model (trained in the workdir)")
    if params is None:
        logging.info("GEPC: no shipped model at %s; training one", config.pretrained_dir)
        model, params, _ = train(config, workdir, id_train)
    return model, params


# --- features -------------------------------------------------------------------------


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


def features(config, eps_fn, score_fn, x, key) -> dict:
    """Per-image features of every method on images ``x``: {"gepc": [N, T, G] residuals,
    "score_norm": [N], "msma": [N, msma_levels], "diffpath": [N, 2]} (float32), in batches
    of ``config.eval_batch`` split over the devices of ``config.mesh_shape``."""
    ts = schedule.t_from_sqrt_alpha_bar(np.asarray(config.sqrt_abars))
    b, ms = config.eval_batch, config.mesh_shape
    keys = iter(jax.random.split(key, 4))
    k_res, k_norm = next(keys), next(keys)
    res = _batched(lambda xb: residual.gepc_residuals(score_fn, xb, k_res, ts, config.group,
                                                      config.rho), x, b, ms)
    msma_ts = np.linspace(config.msma_t_min, config.msma_t_max, config.msma_levels)
    out = {
        "gepc": res,
        "score_norm": _batched(lambda xb: baselines.score_norm(eps_fn, xb, k_norm,
                                                               float(ts.min())), x, b, ms),
        "msma": _batched(lambda xb: baselines.msma_features(eps_fn, xb, msma_ts), x, b, ms),
        "diffpath": _batched(lambda xb: baselines.diffpath_features(
            eps_fn, xb, config.diffpath_steps), x, b, ms),
    }
    return {k: np.asarray(v, np.float32) for k, v in out.items()}


def _score_fns(config, workdir, id_train):
    model, params = load_or_train(config, workdir, id_train)
    eps_fn = make_eps_fn(model, params)
    return eps_fn, residual.score_from_eps(eps_fn)


def _units(config: ml_collections.ConfigDict, workdir: str) -> list[study.Unit]:
    sets = image_sets(config)
    units = []
    if not _shipped(config):
        spec = _model_spec(config, sets["id_train"])

        def train_unit(ctx):
            _, _, losses = train(config, workdir, sets["id_train"], runner=ctx.run_chunks)
            return {"losses": np.asarray(losses, np.float32)}

        units.append(study.Unit("score_model", train_unit, spec=spec))
    fns = functools.cache(lambda: _score_fns(config, workdir, sets["id_train"]))

    def set_unit(i, name):
        def run(ctx):
            del ctx
            logging.info("GEPC features: %s (%d images)", name, sets[name].shape[0])
            eps_fn, score_fn = fns()
            return features(config, eps_fn, score_fn, sets[name],
                            jax.random.key(config.seed + i))
        return study.Unit(name, run)

    return units + [set_unit(i, name) for i, name in enumerate(sets)]


# --- summary, plots -------------------------------------------------------------------


def _summarize(config, out) -> dict:
    feats = {k: v for k, v in out.items() if k != "score_model"}
    summary = _evaluate(config, list(feats), feats)
    summary["cost_score_evals_per_image"] = {
        "gepc": config.num_t * (len(config.group) + 1), "score_norm": 1,
        "msma": config.msma_levels, "diffpath": config.diffpath_steps}
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
        return dict(zip(METHODS, (
            np.asarray(scoring.score(scorers["gepc"], f["gepc"])),
            np.asarray(scoring.score(scorers["gepc_logkde"], f["gepc"])),
            f["score_norm"],
            scoring.gmm_nll(gmms["msma"], np.log(f["msma"] + 1e-8)),
            scoring.gmm_nll(gmms["diffpath"], np.log(f["diffpath"] + 1e-8)),
        ), strict=True))

    id_scores = method_scores("id_test")
    table = {}
    key = jax.random.key(config.seed)
    for name in ood:
        o = method_scores(name)
        table[name] = {}
        for m in o:
            s = np.concatenate([id_scores[m], o[m]])
            lab = np.concatenate([np.zeros(len(id_scores[m]), bool), np.ones(len(o[m]), bool)])
            point, lo, hi = metrics.bootstrap_ci(key, metrics.auroc,
                                                 (jnp.asarray(s, jnp.float32), lab),
                                                 config.bootstrap)
            table[name][m] = {"auroc": point, "ci95": [lo, hi]}
    methods = list(id_scores)
    mean_auroc = {m: float(np.mean([table[n][m]["auroc"] for n in ood])) for m in methods}
    sel = np.asarray(scorers["gepc"].t_index)
    return {"config": config.to_dict(), "auroc": table, "mean_auroc": mean_auroc,
            "selected_sqrt_abar": [float(config.sqrt_abars[i]) for i in sel],
            "id_train_size": int(feats["id_train"]["score_norm"].shape[0])}


def _plot(config, summary, out, workdir):
    del out
    _plot_auroc(summary, os.path.join(workdir, "auroc.png"),
                caption=f"Bars: AUROC (OOD positive) of {config.num_test} ID-test images vs "
                f"each set (up to {config.num_test} images); error bars: 95% percentile "
                f"bootstrap over images ({config.bootstrap} resamples).")
    sets = image_sets(config)
    _, score_fn = _score_fns(config, workdir, sets["id_train"])
    _plot_maps(config, score_fn, sets, os.path.join(workdir, "maps.png"))


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
    """(metric, value) rows for results/REPORT.md."""
    m = summary["mean_auroc"]
    rows = [("mean AUROC over OOD sets: " + ", ".join(m), ", ".join(f"{v:.3f}" for v in
                                                                    m.values()))]
    for name, row in summary["auroc"].items():
        rows.append((f"AUROC {name}: GEPC / best baseline",
                     f"{row['GEPC']['auroc']:.3f} / " + "{:.3f} ({})".format(*max(
                         (v["auroc"], k) for k, v in row.items() if not k.startswith("GEPC")))))
    return rows


EXPERIMENT = study.Experiment(name="gepc", validate=scoring.validate_config, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/gepc.py:quick")
