"""GEPC OOD benchmark in three blocks, declared before any run (issue 17):

  (a) semantic / far OOD: held-out digit classes, the other digit dataset, textures,
      faces, uniform noise, against ID-test digits (the model's own ID classes);
  (b) group transforms of ID-test: rot90, rot180, hflip, vflip, 2-px shifts with
      wrap-around and with background fill. Known blind spot: for self-inverse elements
      (flips, rot180) the numerator of that element's residual on (g x, g eps) equals the
      one on (x, eps) exactly (``jaxlab.gepc.residual``); wrap-around shifts are seen
      through the network's zero padding, not the data;
  (c) the invariant-ID testbed (the premise of the paper's SAR result): ID = clutter
      whose distribution is invariant under the group (``data.clutter``), OOD = clutter
      with one small embedded target (held-out-class digit or shape); AUROC, plus the
      pixel AUROC of the GEPC map (and of a denoising-error map) against the target mask.
      Block (c) is the pretrained-elsewhere setting of the paper and DiffPath: the score
      model is the digit model, never trained on clutter; the scorers are fitted on
      clutter-cal only.
ID digits: ``data.stratified_split`` (shuffled, seeded, the same count per class): the
score model trains on ID-train, every scorer (KDEs, GMMs) is fitted on ID-cal, ID-test is
scored. Methods: GEPC as in the public code (``scoring.fit_official``), GEPC per-element
(ours, ``scoring.fit``), score norm, MSMA-style, DiffPath-style, all on the same model and
data; the cost in score evaluations per test image is in the summary.

  python -m experiments.gepc --config=experiments/configs/gepc.py:quick --workdir=results/gepc

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. The score model is the shipped one (``config.pretrained_dir``, looked up
through ``experiments.lib.artifacts``); without one, the ``score_model`` unit trains it
(resumable chunks, keyed by the training settings and the ID-train data's sha1) and
exports it to ``<workdir>/score_model`` with a ``provenance.json`` (the training spec,
ID-train's sha1 included) that ``load_or_train`` checks against the config before using a
shipped model. Then one unit per image set computes the GEPC features and the baselines'
(``features``); the summary fits the scorers on the calibration sets and reports AUROCs
with bootstrap CIs (``metrics.bootstrap_ci``).
``train(config, workdir)`` is what experiments/gepc_train.py runs (its output ships in
experiments/pretrained/).
"""

import functools
import hashlib
import json
import os

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging

from experiments import common
from experiments.lib import artifacts, plots, provenance, results, study
from jaxlab.core import loops, metrics, sharding
from jaxlab.gepc import baselines, data, residual, schedule, scoring
from jaxlab.gepc.model import UNet
from jaxlab.gepc.train import make_eps_fn, train_score_model

METHODS = ("GEPC (official)", "GEPC per-element (ours)", "score norm", "MSMA-style",
           "DiffPath-style")


def _id_source(config):
    if config.id_dataset == "mnist":
        return data.mnist(config.image_size)
    if config.id_dataset == "digits":
        return data.sklearn_digits(config.image_size)
    raise ValueError(f"`id_dataset` must be 'mnist' or 'digits', got {config.id_dataset!r}.")


def id_split(config):
    """(ID-train, ID-cal, ID-test, OOD held-out classes) images of ``config.id_dataset``:
    ``data.stratified_split`` (shuffled with ``config.split_seed``, the same count per
    class)."""
    x, y = _id_source(config)
    s = data.stratified_split(y, config.id_classes, config.train_per_class,
                              config.cal_per_class, config.test_per_class, config.num_ood,
                              config.split_seed)
    return x[s.train], x[s.cal], x[s.test], x[s.heldout]


SEMANTIC_FAR, GROUP_TRANSFORMS, CLUTTER = "semantic_far", "group_transforms", "invariant_clutter"
BLOCKS = (SEMANTIC_FAR, GROUP_TRANSFORMS, CLUTTER)


def _shift_fill(x, px):
    """Shift right by ``px`` pixels, filling with the background (-1): no wrap-around."""
    out = np.full_like(x, -1.0)
    out[:, :, px:] = x[:, :, :-px]
    return out


def semantic_far_sets(config, held_out) -> dict[str, np.ndarray]:
    """Block (a): other classes, other datasets, noise: name -> [N, S, S, 1]."""
    s, n = config.image_size, config.num_ood
    other_name = "sklearn_digits" if config.id_dataset == "mnist" else "mnist"
    other, _ = data.sklearn_digits(s) if config.id_dataset == "mnist" else data.mnist(s)
    rng = np.random.default_rng(config.split_seed + 1)
    return {
        f"{config.id_dataset}_heldout_classes": held_out,
        other_name: other[rng.permutation(len(other))[:n]],
        "textures": data.image_patches(("brick", "grass", "gravel"), n, s),
        "faces": data.faces(s)[:n],
        "uniform_noise": data.uniform_noise(n, s),
    }


def group_transform_sets(id_test) -> dict[str, np.ndarray]:
    """Block (b): elements of (or near) the GEPC group applied to ID-test images."""
    return {
        "id_rot90": np.rot90(id_test, 1, (1, 2)).copy(),
        "id_rot180": np.rot90(id_test, 2, (1, 2)).copy(),
        "id_hflip": id_test[:, :, ::-1].copy(),
        "id_vflip": id_test[:, ::-1].copy(),
        "id_shift2_wrap": np.roll(id_test, 2, axis=2),
        "id_shift2_fill": _shift_fill(id_test, 2),
    }


def clutter_sets(config) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Block (c), the invariant-ID testbed: ({name: images}, {name: target masks}).

    ID = ``data.clutter`` (exactly D4- and shift-invariant in distribution), calibration
    and test drawn with different seeds; OOD = fresh clutter with one small embedded
    target: a held-out-class digit (``config.target_size`` px) or a shape."""
    s, n, k = config.image_size, config.num_ood, config.target_size
    cal = data.clutter(config.clutter_cal, s, seed=config.split_seed + 10)
    test = data.clutter(n, s, seed=config.split_seed + 11)
    x, y = data.mnist(k)
    digits = (x[~np.isin(y, config.id_classes)][:n, :, :, 0] + 1.0) / 2.0
    with_digits, m_digits = data.embed_targets(data.clutter(n, s, seed=config.split_seed + 12),
                                               digits, config.target_strength, seed=1)
    with_shapes, m_shapes = data.embed_targets(
        data.clutter(n, s, seed=config.split_seed + 13), data.shapes(n, k, seed=2),
        config.target_strength, seed=2)
    images = {"clutter_cal": cal, "clutter_test": test, "clutter_digits": with_digits,
              "clutter_shapes": with_shapes}
    return images, {"clutter_digits": m_digits, "clutter_shapes": m_shapes}


def image_sets(config) -> dict[str, np.ndarray]:
    """Every image set that gets features: id_cal, id_test, blocks (a), (b), (c)."""
    _, id_cal, id_test, held_out = id_split(config)
    return {"id_cal": id_cal, "id_test": id_test, **semantic_far_sets(config, held_out),
            **group_transform_sets(id_test), **clutter_sets(config)[0]}


def blocks(config) -> dict[str, list[str]]:
    """block -> the OOD set names scored against that block's ID-test."""
    return {SEMANTIC_FAR: [f"{config.id_dataset}_heldout_classes",
                           "sklearn_digits" if config.id_dataset == "mnist" else "mnist",
                           "textures", "faces", "uniform_noise"],
            GROUP_TRANSFORMS: ["id_rot90", "id_rot180", "id_hflip", "id_vflip",
                               "id_shift2_wrap", "id_shift2_fill"],
            CLUTTER: ["clutter_digits", "clutter_shapes"]}


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


PROVENANCE = "provenance.json"


def _check_shipped(config, path, id_train) -> None:
    """The shipped model must have been trained on this config's ID-train split with this
    config's training settings (its ``provenance.json`` spec), never on ID-cal / ID-test
    or OOD classes; raises ValueError naming ``config.pretrained_dir`` otherwise."""
    marker = os.path.join(path, PROVENANCE)
    if not os.path.exists(marker):
        raise ValueError(f"`config.pretrained_dir`={config.pretrained_dir!r} has no "
                         f"{PROVENANCE}: its training data cannot be checked.")
    with open(marker) as f:
        shipped = json.load(f)["spec"]
    want = json.loads(json.dumps(_model_spec(config, id_train)))
    if shipped != want:
        diff = sorted(k for k in set(want) | set(shipped) if want.get(k) != shipped.get(k))
        raise ValueError(f"`config.pretrained_dir`={config.pretrained_dir!r} was trained "
                         f"with other data or settings (differs in {diff}); retrain it with "
                         "experiments.gepc_train or set `config.pretrained_dir` to ''.")


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
        id_train = id_split(config)[0]
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
    results.write_json(os.path.join(out, PROVENANCE), {
        "spec": _model_spec(config, id_train), "chunk_losses": np.asarray(losses).tolist(),
        "trained_on": f"{config.id_dataset} classes {list(config.id_classes)}, "
                      f"{config.train_per_class} per class (data.stratified_split, seed "
                      f"{config.split_seed}); never ID-cal, ID-test or other classes",
        "code": provenance.code_version()})
    logging.info("score model saved to %s (final chunk loss %.4f)", out, losses[-1])
    return model, params, losses


def load_or_train(config, workdir, id_train=None):
    """(model, params): the shipped model if ``config.pretrained_dir`` holds one, else the
    one trained under this config and code in ``workdir/score_model``, else a new one
    trained on ``id_train`` (default: ``id_split(config)[0]``)."""
    model = UNet(tuple(config.channels))
    template = model.init(jax.random.key(0), jnp.zeros((1, config.image_size,
                                                        config.image_size, 1)), jnp.zeros(1))
    if id_train is None:
        id_train = id_split(config)[0]
    if _shipped(config):
        _check_shipped(config, _shipped(config), id_train)
    params = artifacts.restore_first([(_shipped(config), None)], template,
                                     "GEPC score model (shipped)")
    if params is None:
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


def features(config, eps_fn, score_fn, x, key, with_maps: bool = False) -> dict:
    """Per-image features of every method on images ``x``: {"residuals": [N, T, G],
    "official": [N, T, 3] (``residual.OFFICIAL_FEATURES``), "score_norm": [N],
    "msma": [N, msma_levels], "diffpath": [N, 2]} (float32) and, ``with_maps``,
    "gepc_map" / "denoise_map" [N, T, H, W]; in batches of ``config.eval_batch`` split over
    the devices of ``config.mesh_shape``."""
    ts = schedule.t_from_sqrt_alpha_bar(np.asarray(config.sqrt_abars))
    b, ms = config.eval_batch, config.mesh_shape
    k_res, k_norm, k_map = jax.random.split(key, 3)

    def gepc(xb):
        r, f, *m = residual.consistency_features(score_fn, xb, k_res, ts, config.group,
                                                 config.rho, with_maps=with_maps)
        return jnp.concatenate([r, f] + [m[0].reshape(m[0].shape[:2] + (-1,))], -1) \
            if with_maps else jnp.concatenate([r, f], -1)

    g = _batched(gepc, x, b, ms)
    n_g = len(config.group)
    msma_ts = np.linspace(config.msma_t_min, config.msma_t_max, config.msma_levels)
    out = {
        "residuals": g[..., :n_g], "official": g[..., n_g:n_g + 3],
        "score_norm": _batched(lambda xb: baselines.score_norm(eps_fn, xb, k_norm,
                                                               float(ts.min())), x, b, ms),
        "msma": _batched(lambda xb: baselines.msma_features(eps_fn, xb, msma_ts), x, b, ms),
        "diffpath": _batched(lambda xb: baselines.diffpath_features(
            eps_fn, xb, config.diffpath_steps), x, b, ms),
    }
    if with_maps:
        hw = x.shape[1:3]
        out["gepc_map"] = g[..., n_g + 3:].reshape(g.shape[:2] + hw)
        out["denoise_map"] = _batched(lambda xb: baselines.denoising_error_map(
            eps_fn, xb, k_map, ts), x, b, ms)
    return {k: np.asarray(v, np.float32) for k, v in out.items()}


def _score_fns(config, workdir, id_train):
    model, params = load_or_train(config, workdir, id_train)
    eps_fn = make_eps_fn(model, params)
    return eps_fn, residual.score_from_eps(eps_fn)


def _units(config: ml_collections.ConfigDict, workdir: str) -> list[study.Unit]:
    id_train = id_split(config)[0]
    sets = image_sets(config)
    units = []
    if not _shipped(config):
        spec = _model_spec(config, id_train)

        def train_unit(ctx):
            _, _, losses = train(config, workdir, id_train, runner=ctx.run_chunks)
            return {"losses": np.asarray(losses, np.float32)}

        units.append(study.Unit("score_model", train_unit, spec=spec))
    fns = functools.cache(lambda: _score_fns(config, workdir, id_train))
    mapped = set(blocks(config)[CLUTTER])

    def set_unit(i, name):
        def run(ctx):
            del ctx
            logging.info("GEPC features: %s (%d images)", name, sets[name].shape[0])
            eps_fn, score_fn = fns()
            return features(config, eps_fn, score_fn, sets[name],
                            jax.random.key(config.seed + i), with_maps=name in mapped)
        return study.Unit(name, run)

    return units + [set_unit(i, name) for i, name in enumerate(sets)]


# --- summary, plots -------------------------------------------------------------------


def _summarize(config, out) -> dict:
    feats = {k: v for k, v in out.items() if k != "score_model"}
    summary = _evaluate(config, feats)
    n_g = len(config.group)
    summary["cost_score_evals_per_image"] = {
        "GEPC (official)": config.num_t * (n_g + 1),
        "GEPC per-element (ours)": config.num_t * (n_g + 1), "score norm": 1,
        "MSMA-style": config.msma_levels, "DiffPath-style": config.diffpath_steps}
    summary["cost_note"] = (
        f"score evaluations per test image at the selected times; fitting GEPC evaluates all "
        f"{len(config.sqrt_abars)} candidate times ({len(config.sqrt_abars) * (n_g + 1)} "
        "per calibration image)")
    return summary


def _official_columns(config):
    return [residual.OFFICIAL_FEATURES.index(f) for f in config.features]


def _fit_all(config, cal):
    """Every method's scorer fitted on one calibration set's features."""
    return {
        "official": scoring.fit_official(cal["official"][..., _official_columns(config)],
                                         config.num_t, config.agg_feat),
        "per_element": scoring.fit(cal["residuals"], config.num_t),
        "msma": scoring.fit_gmm(np.log(cal["msma"] + 1e-8), config.gmm_components),
        "diffpath": scoring.fit_gmm(np.log(cal["diffpath"] + 1e-8), config.gmm_components),
    }


def _method_scores(config, fitted, f):
    return dict(zip(METHODS, (
        np.asarray(scoring.score(fitted["official"], f["official"][...,
                                                                   _official_columns(config)])),
        np.asarray(scoring.score(fitted["per_element"], f["residuals"])),
        f["score_norm"],
        scoring.gmm_nll(fitted["msma"], np.log(f["msma"] + 1e-8)),
        scoring.gmm_nll(fitted["diffpath"], np.log(f["diffpath"] + 1e-8)),
    ), strict=True))


def _auroc_ci(key, id_scores, ood_scores, num_resamples):
    s = np.concatenate([id_scores, ood_scores])
    lab = np.concatenate([np.zeros(len(id_scores), bool), np.ones(len(ood_scores), bool)])
    point, lo, hi = metrics.bootstrap_ci(key, metrics.auroc, (jnp.asarray(s, jnp.float32), lab),
                                         num_resamples)
    return {"auroc": point, "ci95": [lo, hi]}


def _pixel_auroc(maps, masks):
    return metrics.auroc(maps.reshape(-1), masks.reshape(-1))


def _evaluate(config, feats):
    key = jax.random.key(config.seed)
    bl = blocks(config)
    fitted = {"digits": _fit_all(config, feats["id_cal"]),
              CLUTTER: _fit_all(config, feats["clutter_cal"])}
    id_scores = {"digits": _method_scores(config, fitted["digits"], feats["id_test"]),
                 CLUTTER: _method_scores(config, fitted[CLUTTER], feats["clutter_test"])}
    table, block_of = {}, {}
    for block, names in bl.items():
        which = CLUTTER if block == CLUTTER else "digits"
        for name in names:
            o = _method_scores(config, fitted[which], feats[name])
            table[name] = {m: _auroc_ci(key, id_scores[which][m], o[m], config.bootstrap)
                           for m in METHODS}
            block_of[name] = block
    mean_auroc = {b: {m: float(np.mean([table[n][m]["auroc"] for n in names]))
                      for m in METHODS} for b, names in bl.items()}
    # Localisation: the maps at the clutter scorer's lowest-CV time vs the target masks,
    # AUROC over all pixels, bootstrap over images.
    t_loc = int(np.asarray(fitted[CLUTTER]["official"].t_index)[0])
    _, masks = clutter_sets(config)
    loc = {}
    for name in bl[CLUTTER]:
        m = jnp.asarray(masks[name].reshape(len(masks[name]), -1))
        loc[name] = {}
        for label, col in (("GEPC map", "gepc_map"), ("denoising-error map", "denoise_map")):
            mp = jnp.asarray(feats[name][col][:, t_loc].reshape(m.shape[0], -1))
            point, lo, hi = metrics.bootstrap_ci(key, _pixel_auroc, (mp, m), config.bootstrap)
            loc[name][label] = {"auroc": point, "ci95": [lo, hi]}
    sqrt_abars = np.asarray(config.sqrt_abars)
    return {"config": config.to_dict(), "blocks": bl, "block_of": block_of, "auroc": table,
            "mean_auroc": mean_auroc, "localisation_pixel_auroc": loc,
            "localisation_sqrt_abar": float(sqrt_abars[t_loc]),
            "selected_sqrt_abar": {
                k: [float(sqrt_abars[i]) for i in np.asarray(v["official"].t_index)]
                for k, v in fitted.items()},
            "sizes": {k: int(v["score_norm"].shape[0]) for k, v in feats.items()}}


_TITLES = {SEMANTIC_FAR: "(a) semantic / far OOD vs ID-test digits",
           GROUP_TRANSFORMS: "(b) group transforms of ID-test digits",
           CLUTTER: "(c) invariant clutter: ID clutter vs clutter + target\n"
                    "(model trained on digits; scorers fitted on clutter-cal)"}


def _plot(config, summary, out, workdir):
    sizes = summary["sizes"]
    _plot_auroc(summary, os.path.join(workdir, "auroc.png"),
                caption=f"AUROC (OOD positive); ID-test: {sizes['id_test']} digits (a, b), "
                f"{sizes['clutter_test']} clutter patches (c); each OOD set up to "
                f"{config.num_ood} images (faces: {sizes['faces']}); error bars: 95% "
                f"percentile bootstrap over images ({config.bootstrap} resamples); one "
                "trained model, one noise draw (seed "
                f"{config.seed}).")
    _plot_maps(config, summary, out, os.path.join(workdir, "maps.png"))


def _plot_auroc(summary, path, caption):
    table = summary["auroc"]
    fig, axes = plots.figure(len(BLOCKS), width=6.5, height=4.2)
    for ax, block in zip(axes, BLOCKS, strict=True):
        sets = summary["blocks"][block]
        w = 0.8 / len(METHODS)
        for j, m in enumerate(METHODS):
            vals = [table[s][m]["auroc"] for s in sets]
            err = np.array([[table[s][m]["auroc"] - table[s][m]["ci95"][0],
                             table[s][m]["ci95"][1] - table[s][m]["auroc"]] for s in sets]).T
            ax.bar(np.arange(len(sets)) + j * w, vals, w, yerr=err, label=m, capsize=2)
        ax.set_xticks(np.arange(len(sets)) + 0.4 - w / 2, sets, rotation=25, fontsize=7)
        ax.set(ylabel="AUROC (OOD positive)", ylim=(0, 1.2))
        ax.set_title(_TITLES[block], fontsize=8)
        ax.axhline(0.5, color="gray", lw=0.8, ls=":")
    axes[0].legend(fontsize=6, ncol=3, loc="upper center")
    plots.save(fig, path, caption=caption)


def _plot_maps(config, summary, out, path):
    t_loc = list(config.sqrt_abars).index(summary["localisation_sqrt_abar"])
    images, masks = clutter_sets(config)
    rows = []
    for name in blocks(config)[CLUTTER]:
        for i in range(3):
            rows.append((name, images[name][i, :, :, 0], masks[name][i],
                         out[name]["gepc_map"][i, t_loc], out[name]["denoise_map"][i, t_loc]))
    fig, axes = plots.figure(len(rows), width=1.6, height=6.4)
    for ax, (name, x, m, gm, dm) in zip(axes, rows, strict=True):
        col = np.concatenate([x * 0.5 + 0.5, m.astype(float), gm / max(gm.max(), 1e-12),
                              dm / max(dm.max(), 1e-12)], 0)
        ax.imshow(col, cmap="magma")
        ax.set_title(name.replace("clutter_", "+"), fontsize=7)
        ax.axis("off")
    plots.save(fig, path, caption="Columns: clutter images with one embedded target; rows: "
               "image, target mask, GEPC map, denoising-error map (each scaled to its max), "
               f"at sqrt(abar) = {summary['localisation_sqrt_abar']}.")


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for results/REPORT.md."""
    names = ", ".join(METHODS)
    rows = [(f"mean AUROC {block}: {names}",
             ", ".join(f"{summary['mean_auroc'][block][m]:.3f}" for m in METHODS))
            for block in BLOCKS]
    for name in (n for block in BLOCKS for n in summary["blocks"][block]):
        row = summary["auroc"][name]
        best = max((v["auroc"], k) for k, v in row.items() if not k.startswith("GEPC"))
        rows.append((f"AUROC {name} ({summary['block_of'][name]}): GEPC official / best "
                     "baseline", f"{row[METHODS[0]]['auroc']:.3f} / {best[0]:.3f} ({best[1]})"))
    for name, row in summary["localisation_pixel_auroc"].items():
        rows.append((f"pixel AUROC of the map vs target mask, {name}: GEPC / denoising error",
                     f"{row['GEPC map']['auroc']:.3f} / {row['denoising-error map']['auroc']:.3f}"))
    return rows


EXPERIMENT = study.Experiment(name="gepc", validate=scoring.validate_config, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/gepc.py:quick")
