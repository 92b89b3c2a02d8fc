"""GEPC OOD benchmark in blocks declared before any run:

  (a) semantic_far: held-out digit classes, the other digit dataset, textures, faces,
      uniform noise, against ID-test digits (the model's own ID classes);
  (b) group_transforms of ID-test: rot90, rot180, hflip, vflip, 2-px shifts with
      wrap-around and with background fill. Known blind spot: for self-inverse elements
      (flips, rot180) the numerator of that element's residual on (g x, g eps) equals the
      one on (x, eps) exactly (``jaxlab.gepc.residual``); wrap-around shifts are seen
      through the network's zero padding, not the data;
  (c) invariant_clutter, the invariant-ID testbed (the premise of the paper's SAR result):
      ID = clutter whose distribution is invariant under the group (``data.clutter``),
      OOD = clutter with one small embedded target (held-out-class digit or shape); AUROC,
      plus the pixel AUROC of the GEPC map (and of a denoising-error map) against the
      target mask. The score model is trained on ID clutter (``clutter_train_set``, its own
      seed; shipped as experiments/pretrained/gepc_clutter16);
  (c') invariant_clutter_elsewhere: the same sets scored with the digit model (pretrained
      elsewhere, the paper's and DiffPath's setting), scorers fitted on clutter-cal only;
  (d) digits_elsewhere (``config.digits_elsewhere``): the digit model, ID = the *other*
      digit dataset's ID classes (``elsewhere_split``), scorers fitted on its fit split
      only, OOD = its held-out classes and the far sets.
ID digits: ``data.stratified_split`` (shuffled, seeded, the same count per class): the
score model trains on ID-train, every scorer (KDEs, GMMs) is fitted on its block's fit set
(ID-cal, clutter-cal, elsewhere-fit), ID-test is scored. Methods: GEPC as in the public
code (``scoring.fit_official``), GEPC per-element (ours, ``scoring.fit``), score norm, MSMA
(10-level geometric noise grid) and DiffPath-6D (the official 6 path statistics), the last
two with standard scaling + a GMM chosen by cross-validation on the fit set
(``scoring.fit_gmm_search``); all on the same model and data; the cost in score
evaluations per test image is in the summary and the headline.

  python -m experiments.gepc --config=experiments/configs/gepc.py:quick --workdir=results/gepc

``EXPERIMENT`` (a ``study.Experiment``) is what this binary, the suite, the notebook and
the tests run. The score models are the shipped ones (``config.pretrained_dir``,
``config.clutter_pretrained_dir``, looked up through ``experiments.lib.artifacts``);
without one, the ``score_model`` / ``clutter_model`` unit trains it (resumable chunks,
keyed by the training settings and the training data's sha1) and exports it to
``<workdir>/score_model`` / ``<workdir>/clutter_model`` with a ``provenance.json`` (the
training spec and its sha256, the sha256 of every weights file, and the training images'
shape and ``data_signature``, which is CPU-independent where their sha1 is not) that
``load_or_train`` checks against the weights' bytes and the config before using a shipped
model (restored into ``params_template``, abstract shapes: no network
is initialised to restore one). Then one unit per (model, image set) computes the GEPC
features and the baselines' (``features``; ``cm_`` units use the clutter model): the fit
sets first, at every candidate time (their features choose the times), every other set
only at the times its blocks' fitted GEPC scorers keep (``times_needed``; the same
numbers as the all-times evaluation). Each image's noise comes from its own key
(``set_keys``: a block's ID-test image ``j`` is test item ``2 j`` and an OOD image item
``2 j + 1`` of ``jaxlab.core.protocol.item_keys``), as ``jaxlab.gepc.compare`` draws it.
The summary fits the scorers on the fit sets (``jaxlab.gepc.features.fit_scorers``) and
reports AUROCs with bootstrap CIs (``metrics.bootstrap_ci``; pixel AUROCs
``metrics.bootstrap_auroc``) and, per (block, OOD set), the protocol's paired comparison
(``summary["comparison"]``: ``comparison.analyse_scores`` on the balanced paired items,
every method's AUROC and GEPC minus each other method with paired bootstrap CIs, the
paper's goals), the dict ``jaxlab.gepc.compare`` returns on the same images.
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

from jaxlab.core import loops, metrics, protocol, validation
from jaxlab.gepc import baselines, comparison, data, ood, residual
from jaxlab.gepc import features as gepc_features
from jaxlab.gepc.model import UNet
from jaxlab.gepc.train import make_eps_fn, train_score_model

from . import common
from .configs import gepc as gepc_configs
from .lib import artifacts, plots, provenance, results, study

METHODS = ("GEPC (official)", "GEPC per-element (ours)", "score norm", "MSMA", "DiffPath-6D")


def _id_source(config):
    if config.id_dataset == "mnist":
        return data.mnist(config.image_size)
    if config.id_dataset == "digits":
        return data.sklearn_digits(config.image_size)
    raise ValueError(f"`id_dataset` must be 'mnist' or 'digits', got {config.id_dataset!r}.")


def _other_name(config) -> str:
    return "sklearn_digits" if config.id_dataset == "mnist" else "mnist"


def _other_source(config):
    return (data.sklearn_digits(config.image_size) if config.id_dataset == "mnist"
            else data.mnist(config.image_size))


def id_split(config):
    """(ID-train, ID-cal, ID-test, OOD held-out classes) images of ``config.id_dataset``:
    ``data.stratified_split`` (shuffled with ``config.split_seed``, the same count per
    class)."""
    x, y = _id_source(config)
    s = data.stratified_split(y, config.id_classes, config.train_per_class,
                              config.cal_per_class, config.test_per_class, config.num_ood,
                              seed=config.split_seed)
    return x[s.train], x[s.cal], x[s.test], x[s.heldout]


def elsewhere_split(config):
    """The pretrained-elsewhere digits setting: (fit, test, held-out classes) images of the
    *other* digit dataset (sklearn digits when the model is MNIST's), classes
    ``config.id_classes``: ``elsewhere_fit_per_class`` per class to fit the scorers,
    ``test_per_class`` per class to test, ``num_ood`` from the other classes
    (``data.stratified_split``, seed ``split_seed + 3``). The score model never sees them."""
    x, y = _other_source(config)
    s = data.stratified_split(y, config.id_classes, config.elsewhere_fit_per_class, 0,
                              config.test_per_class, config.num_ood, seed=config.split_seed + 3)
    return x[s.train], x[s.test], x[s.heldout]


#: The clutter image sets (``clutter_sets``), scored by both models.
CLUTTER_SETS = ("clutter_cal", "clutter_test", "clutter_digits", "clutter_shapes")
SEMANTIC_FAR, GROUP_TRANSFORMS = "semantic_far", "group_transforms"
CLUTTER, CLUTTER_ELSEWHERE = "invariant_clutter", "invariant_clutter_elsewhere"
DIGITS_ELSEWHERE = "digits_elsewhere"
BLOCKS = (SEMANTIC_FAR, GROUP_TRANSFORMS, CLUTTER, CLUTTER_ELSEWHERE, DIGITS_ELSEWHERE)
#: Prefix of the feature units computed with the clutter-trained model.
CLUTTER_MODEL_PREFIX = "cm_"


def _shift_fill(x, px):
    """Shift right by ``px`` pixels, filling with the background (-1): no wrap-around."""
    out = np.full_like(x, -1.0)
    out[:, :, px:] = x[:, :, :-px]
    return out


def semantic_far_sets(config, held_out) -> dict[str, np.ndarray]:
    """Block (a): other classes, other datasets, noise: name -> [N, S, S, 1]."""
    s, n = config.image_size, config.num_ood
    other, _ = _other_source(config)
    rng = np.random.default_rng(config.split_seed + 1)
    return {
        f"{config.id_dataset}_heldout_classes": held_out,
        _other_name(config): other[rng.permutation(len(other))[:n]],
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
    """Blocks (c), the invariant-ID testbed: ({name: images}, {name: target masks}).

    ID = ``data.clutter`` (exactly D4- and shift-invariant in distribution), calibration
    and test drawn with different seeds (the clutter model's training clutter has another
    seed, ``clutter_train_set``); OOD = fresh clutter with one small embedded target: a
    held-out-class digit (``config.target_size`` px) or a shape. Drawn once per process
    and settings (the units, the summary and the maps figure read them); fresh copies."""
    images, masks = _clutter_sets(config.image_size, config.num_ood, config.target_size,
                                  config.clutter_cal, config.split_seed,
                                  tuple(int(c) for c in config.id_classes),
                                  float(config.target_strength))
    return ({k: v.copy() for k, v in images.items()}, {k: v.copy() for k, v in masks.items()})


@functools.lru_cache(maxsize=4)
def _clutter_sets(s, n, k, clutter_cal, split_seed, id_classes, target_strength):
    """``clutter_sets`` of these settings (read-only arrays, shared: callers copy)."""
    cal = data.clutter(clutter_cal, s, seed=split_seed + 10)
    test = data.clutter(n, s, seed=split_seed + 11)
    x, y = data.mnist(k)
    digits = (x[~np.isin(y, id_classes)][:n, :, :, 0] + 1.0) / 2.0
    with_digits, m_digits = data.embed_targets(data.clutter(n, s, seed=split_seed + 12),
                                               digits, target_strength, seed=1)
    with_shapes, m_shapes = data.embed_targets(
        data.clutter(n, s, seed=split_seed + 13), data.shapes(n, k, seed=2),
        target_strength, seed=2)
    images = {"clutter_cal": cal, "clutter_test": test, "clutter_digits": with_digits,
              "clutter_shapes": with_shapes}
    masks = {"clutter_digits": m_digits, "clutter_shapes": m_shapes}
    for a in (*images.values(), *masks.values()):
        a.setflags(write=False)
    return images, masks


def image_sets(config) -> dict[str, np.ndarray]:
    """Every image set the digit-trained model scores: id_cal, id_test, blocks (a), (b), the
    clutter sets and, with ``config.digits_elsewhere``, the pretrained-elsewhere digit sets
    (``elsewhere_fit``, ``elsewhere_test``, ``elsewhere_heldout_classes``). The clutter
    model scores the clutter sets (units ``cm_<name>``)."""
    _, id_cal, id_test, held_out = id_split(config)
    sets = {"id_cal": id_cal, "id_test": id_test, **semantic_far_sets(config, held_out),
            **group_transform_sets(id_test), **clutter_sets(config)[0]}
    if config.digits_elsewhere:
        fit, test, held = elsewhere_split(config)
        sets.update(elsewhere_fit=fit, elsewhere_test=test, elsewhere_heldout_classes=held)
    return sets


def settings(config) -> dict[str, dict]:
    """block -> {"fit": unit the scorers are fitted on, "test": ID-test unit, "ood": OOD
    units scored against it, "model": "id" | "clutter", "maps": localisation scored}.
    Declared before any run; unit names are feature units (``cm_`` = clutter model)."""
    cm = CLUTTER_MODEL_PREFIX
    clutter_ood = ["clutter_digits", "clutter_shapes"]
    out = {
        SEMANTIC_FAR: {"fit": "id_cal", "test": "id_test", "model": "id", "maps": False,
                       "ood": [f"{config.id_dataset}_heldout_classes", _other_name(config),
                               "textures", "faces", "uniform_noise"]},
        GROUP_TRANSFORMS: {"fit": "id_cal", "test": "id_test", "model": "id", "maps": False,
                           "ood": ["id_rot90", "id_rot180", "id_hflip", "id_vflip",
                                   "id_shift2_wrap", "id_shift2_fill"]},
        CLUTTER: {"fit": cm + "clutter_cal", "test": cm + "clutter_test", "model": "clutter",
                  "maps": True, "ood": [cm + n for n in clutter_ood]},
        CLUTTER_ELSEWHERE: {"fit": "clutter_cal", "test": "clutter_test", "model": "id",
                            "maps": True, "ood": clutter_ood},
    }
    if config.digits_elsewhere:
        out[DIGITS_ELSEWHERE] = {"fit": "elsewhere_fit", "test": "elsewhere_test",
                                 "model": "id", "maps": False,
                                 "ood": ["elsewhere_heldout_classes", "textures", "faces",
                                         "uniform_noise"]}
    return out


def blocks(config) -> dict[str, list[str]]:
    """block -> the OOD set names scored against that block's ID-test."""
    return {b: s["ood"] for b, s in settings(config).items()}


# --- the score models -----------------------------------------------------------------
#
# Two models, the same UNet and training code: "id" is trained on ID-train digits
# (``config.pretrained_dir``), "clutter" on ID clutter patches (``clutter_train`` images of
# ``data.clutter`` with their own seed, never the clutter cal/test/OOD images;
# ``config.clutter_pretrained_dir``). ``config.train_target`` picks the one
# experiments/gepc_train.py trains.

MODELS = ("id", "clutter")


def clutter_train_set(config) -> np.ndarray:
    """[clutter_train, S, S, 1] ID clutter the clutter model trains on (seed split_seed + 9;
    calibration, test and OOD clutter use seeds + 10 .. + 13); drawn once per process and
    settings, a fresh copy."""
    return _clutter(config.clutter_train, config.image_size, config.split_seed + 9).copy()


@functools.lru_cache(maxsize=4)
def _clutter(num, size, seed):
    out = data.clutter(num, size, seed=seed)
    out.setflags(write=False)
    return out


def _model_setup(config, which):
    """(train images, steps, pretrained-dir field, export folder, trained_on text)."""
    validation.check_one_of("which", which, MODELS)
    if which == "id":
        return (id_split(config)[0], config.train_steps, "pretrained_dir", "score_model",
                f"{config.id_dataset} classes {list(config.id_classes)}, "
                f"{config.train_per_class} per class (data.stratified_split, seed "
                f"{config.split_seed}); never ID-cal, ID-test or other classes")
    return (clutter_train_set(config), config.clutter_train_steps, "clutter_pretrained_dir",
            "clutter_model",
            f"{config.clutter_train} ID clutter patches (data.clutter, seed "
            f"{config.split_seed + 9}); never clutter-cal, clutter-test or targets")


def _model_spec(config, id_train, steps=None) -> dict:
    """Everything that determines the trained model (data bytes included)."""
    return {"what": "gepc_score_model",
            "steps": config.train_steps if steps is None else steps,
            "batch_size": config.batch_size, "learning_rate": config.learning_rate,
            "num_chunks": config.train_chunks, "channels": tuple(config.channels),
            "seed": config.seed,
            "data_sha1": hashlib.sha1(np.asarray(id_train).tobytes()).hexdigest()}


SIGNATURE_SEED, SIGNATURE_DIM, SIGNATURE_ATOL = 20261204, 8, 1e-3


def data_signature(images) -> list[float]:
    """[SIGNATURE_DIM] fixed Gaussian projections of the images, normalised to O(1):
    sig_k = sum_{n, p} W_k[n, p] x[n, p] / sqrt(N P), W seeded by ``SIGNATURE_SEED``.

    The exact ``data_sha1`` of float32 images depends on the CPU (XLA's resize and NumPy /
    SciPy kernels round differently on an AMD EPYC and an Intel Xeon, measured: the same
    split, another sha1), so the shipped-model check compares this signature within
    ``SIGNATURE_ATOL`` instead: rounding moves it by ~1e-6, another image set by O(1)."""
    x = np.asarray(images, np.float64).reshape(len(images), -1)
    rng = np.random.default_rng(SIGNATURE_SEED)
    scale = np.sqrt(x.size)
    return [float(np.sum(rng.standard_normal(x.shape) * x) / scale)
            for _ in range(SIGNATURE_DIM)]


def _model_key(config, id_train, steps=None) -> str:
    """The key of a model trained under ``config`` by this code: the training unit's key,
    also the ``trained_with.json`` marker of the exported model."""
    return provenance.unit_key({"unit": "score_model",
                                "spec": _model_spec(config, id_train, steps)})


def _shipped(config, field="pretrained_dir") -> str:
    """The folder of the shipped model named by ``config.<field>``, or "" when the field is
    "" (train instead); a value naming no folder raises (``artifacts.pretrained_root``)."""
    return artifacts.pretrained_root(config, field)


def _validate(config) -> None:
    """The config's checks, then the model folders must exist (before any unit)."""
    gepc_configs.validate_config(config)
    for field in ("pretrained_dir", "clutter_pretrained_dir"):
        artifacts.pretrained_root(config, field)


PROVENANCE = "provenance.json"


def _check_shipped(config, path, id_train, steps=None, field="pretrained_dir") -> None:
    """The shipped model must be the weights its ``provenance.json`` names (the sha256 of
    every file and of the spec: ``artifacts.verify``), trained on this config's training
    images with this config's training settings (the record's spec), never on calibration
    / test or OOD images; raises ValueError naming ``config.<field>`` otherwise."""
    if not os.path.exists(os.path.join(path, PROVENANCE)):
        raise ValueError(f"`config.{field}`={config.get(field)!r} has no "
                         f"{PROVENANCE}: its training data cannot be checked.")
    record = artifacts.verify(path, "GEPC score model", f"config.{field}",
                              record_name=PROVENANCE, config_field="spec")
    shipped = record["spec"]
    want = json.loads(json.dumps(_model_spec(config, id_train, steps)))
    # The training settings must match exactly; the training images by shape and by
    # data_signature within SIGNATURE_ATOL (their float32 sha1 is CPU-dependent).
    diff = sorted(k for k in (set(want) | set(shipped)) - {"data_sha1"}
                  if want.get(k) != shipped.get(k))
    if "data_signature" in record:
        shape = list(np.shape(id_train))
        if record.get("data_shape") != shape:
            diff.append("data_shape")
        elif not np.allclose(record["data_signature"], data_signature(id_train), rtol=0.0,
                             atol=SIGNATURE_ATOL):
            diff.append("data_signature")
    elif want.get("data_sha1") != shipped.get("data_sha1"):
        diff.append("data_sha1")
    if diff:
        values = "; ".join(f"{k}: trained with {shipped.get(k, record.get(k))!r}, this config "
                           f"needs {want.get(k)!r}" for k in diff
                           if k in shipped or k in want)
        raise ValueError(f"`config.{field}`={config.get(field)!r} was trained "
                         f"with other data or settings (differs in {diff}"
                         f"{': ' + values if values else ''}); retrain it with "
                         f"experiments.gepc_train or set `config.{field}` to ''.")


def train(config: ml_collections.ConfigDict, workdir: str, id_train=None,
          runner: loops.ChunkRunner | None = None, which: str | None = None):
    """Trains an eps-model and exports its params to ``workdir/score_model`` ("id") or
    ``workdir/clutter_model`` ("clutter"), with the ``trained_with.json`` marker and a
    ``provenance.json``.

    Args:
      config: a GEPC config.
      workdir: output folder.
      id_train: [N, S, S, 1] training images (default: those of ``which``).
      runner: chunk runner (default: ``study.run_resumable`` checkpointing under
        ``workdir/checkpoints/<model key>``, the folder the training unit uses).
      which: "id" (ID-train digits) or "clutter" (``clutter_train_set``); default
        ``config.train_target`` (or "id").

    Returns:
      (model, params, per-chunk mean losses).
    """
    gepc_configs.validate_config(config)
    which = config.get("train_target", "id") if which is None else which
    images, steps, _, folder, trained_on = _model_setup(config, which)
    if id_train is None:
        id_train = images
    key = _model_key(config, id_train, steps)
    if runner is None:
        runner = functools.partial(study.run_resumable, checkpoint_dir=os.path.join(
            os.path.abspath(workdir), "checkpoints", key))
    model, params, losses = train_score_model(
        id_train, runner=runner, steps=steps, batch_size=config.batch_size,
        learning_rate=config.learning_rate, num_chunks=config.train_chunks,
        channels=tuple(config.channels), seed=config.seed)
    out = os.path.join(os.path.abspath(workdir), folder)
    spec = _model_spec(config, id_train, steps)
    artifacts.export(out, steps, params, key, spec)
    results.write_json(os.path.join(out, PROVENANCE), {
        **artifacts.stamp(out, spec, config_field="spec"),
        "data_shape": list(np.shape(id_train)), "data_signature": data_signature(id_train),
        "chunk_losses": np.asarray(losses).tolist(), "trained_on": trained_on,
        "code": provenance.code_version()})
    logging.info("score model saved to %s (final chunk loss %.4f)", out, losses[-1])
    return model, params, losses


def params_template(model: UNet, image_size: int):
    """The params tree of ``model`` on [1, image_size, image_size, 1] images as
    ``jax.ShapeDtypeStruct`` leaves (``jax.eval_shape``: traced once, nothing compiled or
    run), the restore template of a checkpoint."""
    x = jax.ShapeDtypeStruct((1, image_size, image_size, 1), jnp.float32)
    t = jax.ShapeDtypeStruct((1,), jnp.float32)
    return jax.eval_shape(lambda x, t: model.init(jax.random.key(0), x, t), x, t)


def load_or_train(config, workdir, id_train=None, which: str = "id"):
    """(model, params) of model ``which`` ("id" or "clutter"): the shipped one if
    ``config.pretrained_dir`` / ``config.clutter_pretrained_dir`` holds one (its provenance
    checked), else the one trained under this config and code in the workdir, else a new one
    trained on ``id_train`` (default: the model's training images)."""
    images, steps, field, folder, _ = _model_setup(config, which)
    model = UNet(tuple(config.channels))
    template = params_template(model, config.image_size)
    if id_train is None:
        id_train = images
    shipped = _shipped(config, field)
    if shipped:
        _check_shipped(config, shipped, id_train, steps, field)
    params = artifacts.restore_first([(shipped, None)], template,
                                     f"GEPC {which} score model (shipped)",
                                     field=f"config.{field}", record_name=PROVENANCE,
                                     config_field="spec")
    if params is None:
        params = artifacts.restore_first(
            [(os.path.join(workdir, folder), _model_key(config, id_train, steps))], template,
            f"GEPC {which} score model (trained in the workdir)")
    if params is None:
        logging.info("GEPC: no shipped %s model at %s; training one", which,
                     config.get(field))
        model, params, _ = train(config, workdir, id_train, which=which)
    return model, params


# --- features -------------------------------------------------------------------------


def comparison_settings(config) -> gepc_features.Settings:
    """The ``jaxlab.gepc.Settings`` of a GEPC config (what ``compare`` runs)."""
    return gepc_features.Settings(
        sqrt_abars=tuple(config.sqrt_abars), group=tuple(config.group), rho=config.rho,
        features=tuple(config.features), agg_feat=config.agg_feat,
        msma_levels=config.msma_levels, msma_sigma_min=config.msma_sigma_min,
        msma_sigma_max=config.msma_sigma_max, diffpath_steps=config.diffpath_steps,
        gmm_components=tuple(config.gmm_components),
        gmm_covariances=tuple(config.gmm_covariances), gmm_folds=config.gmm_folds,
        seed=config.seed, batch=config.eval_batch, mesh_shape=tuple(config.mesh_shape))


def features(config, eps_fn, score_fn, x, keys, with_maps: bool = False,
             t_index=None) -> dict:
    """Per-image features of every method on images ``x`` with one noise key per image
    (``keys`` [N]): ``jaxlab.gepc.features.image_features`` under the config's settings
    ({"residuals": [N, T', G], "official": [N, T', 3], "t_index": [T'], "score_norm": [N],
    "msma": [N, msma_levels], "diffpath": [N, 6]} and, ``with_maps``, "gepc_map" /
    "denoise_map" [N, T', H, W]), in padded batches of ``config.eval_batch`` split over
    ``config.mesh_shape``. ``t_index`` (default: every candidate time) picks the times GEPC
    and the maps are evaluated at, with the numbers of the all-times evaluation."""
    return gepc_features.image_features(keys, eps_fn, x, comparison_settings(config),
                                        score_fn=score_fn, t_index=t_index,
                                        with_maps=with_maps)


def set_keys(config, unit: str, n: int) -> jax.Array:
    """[n] noise keys of the images of feature unit ``unit``: a fit set's are
    ``features.fit_keys(config.seed, n)``; a block's ID-test image ``j`` is test item
    ``2 j`` and an OOD image ``j`` item ``2 j + 1`` of ``protocol.item_keys(key(seed))``, as
    ``jaxlab.gepc.compare`` keys them (its test items with no tuning items)."""
    st = settings(config).values()
    if unit in {s["fit"] for s in st}:
        return gepc_features.fit_keys(config.seed, n)
    odd = 0 if unit in {s["test"] for s in st} else 1
    return protocol.item_keys(jax.random.key(config.seed), "test", 2 * np.arange(n) + odd)


def selected_times(config, cal) -> dict[str, np.ndarray]:
    """The candidate times (indices into ``config.sqrt_abars``) the GEPC scorers fitted on
    one fit set's features ``cal`` (``features``, all times) keep: {"official": [num_t],
    "per_element": [num_t]} (``baselines.fit``, as the summary fits them)."""
    fitted = _fit_gepc(config, cal)
    return {m: np.asarray(f.model.t_index) for m, f in fitted.items()}


def times_needed(config, unit, fit_results) -> np.ndarray | None:
    """The candidate times unit ``unit`` is evaluated at: None (every time) for a fit
    set, whose features choose the times; else the sorted union, over the blocks that test
    or score ``unit``, of the times the block's GEPC scorers keep (``selected_times`` of
    its fit set, read from ``fit_results[fit unit]``); the maps' time (the official
    scorer's first) is among them."""
    st = settings(config).values()
    if unit in {s["fit"] for s in st}:
        return None
    keep = set()
    for s in st:
        if unit == s["test"] or unit in s["ood"]:
            for t in selected_times(config, fit_results[s["fit"]]).values():
                keep.update(int(i) for i in t)
    if not keep:
        raise ValueError(f"unit {unit!r} is in no block of `settings`.")
    return np.asarray(sorted(keep))


def _score_fns(config, workdir, which):
    model, params = load_or_train(config, workdir, which=which)
    eps_fn = make_eps_fn(model, params)
    return eps_fn, residual.score_from_eps(eps_fn)


def _units(config: ml_collections.ConfigDict, workdir: str) -> list[study.Unit]:
    sets = image_sets(config)
    units = []
    for which in MODELS:
        images, steps, field, _, _ = _model_setup(config, which)
        if _shipped(config, field):
            continue

        def train_unit(ctx, which=which, images=images):
            _, _, losses = train(config, workdir, images, runner=ctx.run_chunks, which=which)
            return {"losses": np.asarray(losses, np.float32)}

        name = "score_model" if which == "id" else "clutter_model"
        units.append(study.Unit(name, train_unit, spec=_model_spec(config, images, steps)))
    fns = {w: functools.cache(functools.partial(_score_fns, config, workdir, w))
           for w in MODELS}
    mapped = {n for s in settings(config).values() if s["maps"] for n in s["ood"]}

    def set_unit(i, name, which):
        unit = (CLUTTER_MODEL_PREFIX if which == "clutter" else "") + name

        def run(ctx):
            # Outside the fit sets only the times the fit set's scorers keep are evaluated
            # (the fit units run first; ``ctx.results`` holds their features).
            t_index = times_needed(config, unit, ctx.results)
            logging.info("GEPC features (%s model): %s (%d images, times %s)", which, name,
                         sets[name].shape[0], "all" if t_index is None else t_index.tolist())
            eps_fn, score_fn = fns[which]()
            return features(config, eps_fn, score_fn, sets[name],
                            set_keys(config, unit, sets[name].shape[0]),
                            with_maps=unit in mapped, t_index=t_index)
        return study.Unit(unit, run)

    # The fit sets first (their features choose the times the other units evaluate); the
    # noise keys stay those of the sets' declaration order.
    fits = {s["fit"] for s in settings(config).values()}
    feature_units = ([(i, n, "id") for i, n in enumerate(sets)]
                     + [(i, n, "clutter") for i, n in enumerate(CLUTTER_SETS)])
    feature_units.sort(key=lambda u: ((CLUTTER_MODEL_PREFIX if u[2] == "clutter" else "")
                                      + u[1]) not in fits)
    return units + [set_unit(*u) for u in feature_units]


# --- summary, plots -------------------------------------------------------------------


def cost_per_image(config) -> dict[str, int]:
    """Score-network evaluations per test image of each method (at GEPC's selected times;
    fitting GEPC evaluates all candidate times)."""
    n_g = len(config.group)
    return {"GEPC (official)": config.num_t * (n_g + 1),
            "GEPC per-element (ours)": config.num_t * (n_g + 1), "score norm": 1,
            "MSMA": config.msma_levels, "DiffPath-6D": config.diffpath_steps}


def _summarize(config, out) -> dict:
    feats = {k: v for k, v in out.items() if k not in ("score_model", "clutter_model")}
    summary = _evaluate(config, feats)
    summary["cost_score_evals_per_image"] = cost_per_image(config)
    n_g = len(config.group)
    summary["cost_note"] = (
        f"score evaluations per test image at the selected times; fitting GEPC evaluates all "
        f"{len(config.sqrt_abars)} candidate times ({len(config.sqrt_abars) * (n_g + 1)} "
        "per calibration image)")
    return summary


def _fit_gepc(config, cal):
    """The two GEPC scorers fitted on one fit set's features (``features.fit_scorers``)."""
    return gepc_features.fit_scorers(cal, comparison_settings(config), config.num_t,
                                  ("official", "per_element"))


def _fit_all(config, cal):
    """Every method's scorer fitted on one fit set's features (``features.fit_scorers``,
    as ``jaxlab.gepc.compare`` fits them)."""
    return gepc_features.fit_scorers(cal, comparison_settings(config), config.num_t)


def _position(f, t, what) -> int:
    """Where candidate time ``t`` sits in features ``f`` (their "t_index"; all times when
    absent); ValueError naming ``what`` when it was not evaluated."""
    have = np.asarray(f.get("t_index", np.arange(np.shape(f["residuals"])[1])))
    hit = np.flatnonzero(have == int(t))
    if not hit.size:
        raise ValueError(f"{what}: candidate time {int(t)} was not evaluated (features at "
                         f"times {have.tolist()}).")
    return int(hit[0])


def _at_times(fitted, f, what):
    """A GEPC scorer re-indexed to the times features ``f`` were evaluated at."""
    pos = [_position(f, t, what) for t in np.asarray(fitted.model.t_index)]
    return fitted._replace(model=fitted.model._replace(t_index=np.asarray(pos)))


# The features each method reads (``features``' keys).
FEATURE_KEY = {"official": "official", "per_element": "residuals", "score_norm": "score_norm",
               "msma": "msma", "diffpath": "diffpath"}


def _method_scores(config, fitted, f, what="features"):
    del config
    fitted = {**fitted, "score_norm": baselines.fit("score_norm", f["score_norm"])}
    for m in ("official", "per_element"):
        fitted[m] = _at_times(fitted[m], f, what)
    return {baselines.METHOD_LABELS[m]: baselines.score(fitted[m], f[FEATURE_KEY[m]])
            for m in baselines.METHODS}


#: Study label (``METHODS``) -> ``jaxlab.gepc.compare``'s contender name.
CONTENDER_NAMES = {baselines.METHOD_LABELS[m]: n for n, m in comparison.CONTENDERS.items()}


def comparison_section(config, id_scores, ood_scores) -> dict:
    """The protocol's comparison of one (block, OOD set): ``comparison.analyse_scores`` of
    the methods' scores (study labels -> [N] scores) on the balanced paired items (ID-test
    image ``j`` = item ``2 j``, OOD image ``j`` = item ``2 j + 1``), with the bootstrap key
    ``jaxlab.gepc.compare`` uses; ``to_dict()`` without the seconds (the summary is
    byte-stable). The same dict as ``jaxlab.gepc.compare`` with ``tuning=0``, the GEPC
    scorers' grid ``({"num_t": config.num_t},)`` and ``seeds`` = twice the shorter set."""
    params = {n: {"num_t": int(config.num_t)} if m in ("official", "per_element") else {}
              for n, m in comparison.CONTENDERS.items()}
    out = comparison.analyse_scores(
        jax.random.fold_in(jax.random.key(config.seed), 2),
        {CONTENDER_NAMES[k]: v for k, v in id_scores.items()},
        {CONTENDER_NAMES[k]: v for k, v in ood_scores.items()}, params=params,
        resamples=config.bootstrap)
    return out.to_dict(seconds=False)


def _auroc_ci(key, id_scores, ood_scores, num_resamples):
    r = ood.auroc_with_ci(key, id_scores, ood_scores, num_resamples)
    return {"auroc": r.auroc, "ci95": [r.low, r.high]}


def _evaluate(config, feats):
    """AUROC (bootstrap CI over images) of every method on every (block, OOD set): the
    scorers are fitted on the block's fit set only; for the clutter blocks also the pixel
    AUROC of the maps (at that block's lowest-CV time) against the target masks."""
    key = jax.random.key(config.seed)
    st = settings(config)
    sqrt_abars = np.asarray(config.sqrt_abars)
    _, masks = clutter_sets(config)
    fitted, table, loc, gmm, paired = {}, {}, {}, {}, {}
    for block, s in st.items():
        if s["fit"] not in fitted:
            fitted[s["fit"]] = _fit_all(config, feats[s["fit"]])
        fit = fitted[s["fit"]]
        gmm[block] = {m: {"n_components": fit[k].model.n_components,
                          "covariance_type": fit[k].model.covariance_type}
                      for m, k in (("MSMA", "msma"), ("DiffPath-6D", "diffpath"))}
        id_scores = _method_scores(config, fit, feats[s["test"]], s["test"])
        table[block], paired[block] = {}, {}
        for name in s["ood"]:
            o = _method_scores(config, fit, feats[name], name)
            table[block][name] = {m: _auroc_ci(key, id_scores[m], o[m], config.bootstrap)
                                  for m in METHODS}
            paired[block][name] = comparison_section(config, id_scores, o)
        if s["maps"]:
            t_loc = int(np.asarray(fit["official"].model.t_index)[0])
            loc[block] = {"sqrt_abar": float(sqrt_abars[t_loc])}
            for name in s["ood"]:
                mk = masks[name.removeprefix(CLUTTER_MODEL_PREFIX)]
                m = jnp.asarray(mk.reshape(len(mk), -1))
                loc[block][name] = {}
                for label, col in (("GEPC map", "gepc_map"),
                                   ("denoising-error map", "denoise_map")):
                    at = _position(feats[name], t_loc, name)
                    mp = jnp.asarray(feats[name][col][:, at].reshape(m.shape[0], -1))
                    point, lo, hi = metrics.bootstrap_auroc(key, mp, m, config.bootstrap)
                    loc[block][name][label] = {"auroc": point, "ci95": [lo, hi]}
    mean_auroc = {b: {m: float(np.mean([table[b][n][m]["auroc"] for n in s["ood"]]))
                      for m in METHODS} for b, s in st.items()}
    return {"config": config.to_dict(), "settings": st, "blocks": blocks(config),
            "auroc": table, "comparison": paired, "mean_auroc": mean_auroc,
            "localisation_pixel_auroc": loc,
            "gmm_selected": gmm,
            "selected_sqrt_abar": {
                k: [float(sqrt_abars[i]) for i in np.asarray(v["official"].model.t_index)]
                for k, v in fitted.items()},
            "sizes": {k: int(v["score_norm"].shape[0]) for k, v in feats.items()}}


_TITLES = {SEMANTIC_FAR: "(a) semantic / far OOD vs ID-test digits",
           GROUP_TRANSFORMS: "(b) group transforms of ID-test digits",
           CLUTTER: "(c) invariant clutter vs clutter + target\n"
                    "(model trained on ID clutter)",
           CLUTTER_ELSEWHERE: "(c') invariant clutter vs clutter + target\n"
                              "(model trained on digits: pretrained elsewhere)",
           DIGITS_ELSEWHERE: "(d) other digit dataset as ID (model trained on the\n"
                             "first; scorers fitted on the other's fit split)"}


def _plot(config, summary, out, workdir):
    sizes = summary["sizes"]
    _plot_auroc(summary, os.path.join(workdir, "auroc.png"),
                caption=f"AUROC (OOD positive); ID-test: {sizes['id_test']} digits (a, b), "
                f"{sizes['clutter_test']} clutter patches (c, c'); each OOD set up to "
                f"{config.num_ood} images (faces: {sizes['faces']}); error bars: 95% "
                f"percentile bootstrap over images ({config.bootstrap} resamples); one "
                "trained model per row, one noise draw (seed "
                f"{config.seed}). Score evaluations per test image: " + ", ".join(
                    f"{m} {c}" for m, c in summary["cost_score_evals_per_image"].items()))
    _plot_maps(config, summary, out, os.path.join(workdir, "maps.png"))


def _plot_auroc(summary, path, caption):
    table = summary["auroc"]
    bl = _blocks_in(summary)
    fig, axes = plots.figure(len(bl), width=6.5, height=4.2)
    for ax, block in zip(axes, bl, strict=True):
        sets = summary["blocks"][block]
        w = 0.8 / len(METHODS)
        for j, m in enumerate(METHODS):
            vals = [table[block][s][m]["auroc"] for s in sets]
            err = np.array([[table[block][s][m]["auroc"] - table[block][s][m]["ci95"][0],
                             table[block][s][m]["ci95"][1] - table[block][s][m]["auroc"]]
                            for s in sets]).T
            ax.bar(np.arange(len(sets)) + j * w, vals, w, yerr=err, label=m, capsize=2)
        ax.set_xticks(np.arange(len(sets)) + 0.4 - w / 2, sets, rotation=25, fontsize=7)
        ax.set(ylabel="AUROC (OOD positive)", ylim=(0, 1.2))
        ax.set_title(_TITLES[block], fontsize=8)
        ax.axhline(0.5, color="gray", lw=0.8, ls=":")
    axes[0].legend(fontsize=7, ncol=3, loc="upper center")
    plots.save(fig, path, caption=caption)


_SHORT = {CLUTTER: "(c)", CLUTTER_ELSEWHERE: "(c')"}


def _plot_maps(config, summary, out, path):
    images, masks = clutter_sets(config)
    rows = []
    for block in (CLUTTER, CLUTTER_ELSEWHERE):
        loc = summary["localisation_pixel_auroc"][block]
        t_loc = list(config.sqrt_abars).index(loc["sqrt_abar"])
        for name in settings(config)[block]["ood"]:
            base = name.removeprefix(CLUTTER_MODEL_PREFIX)
            at = _position(out[name], t_loc, name)
            for i in range(2):
                rows.append((f"{_SHORT[block]} {base.replace('clutter_', '+')}",
                             images[base][i, :, :, 0], masks[base][i],
                             out[name]["gepc_map"][i, at],
                             out[name]["denoise_map"][i, at]))
    plots.save(maps_figure(rows), path, caption="Columns: clutter images with one embedded "
               "target, maps of the clutter-trained model (c) and of the digit-trained model "
               "(c'); rows: " + ", ".join(MAP_ROWS) + " (maps each scaled to their max), at "
               "each block's lowest-CV time.")


MAP_ROWS = ("image", "target mask", "GEPC map", "denoising-error map")


def maps_figure(columns):
    """The maps figure: one column per image, one row per ``MAP_ROWS`` entry, each row
    titled on the left, each column titled by its name.

    Args:
      columns: ``[(name, image [H, W] in [-1, 1], mask [H, W], gepc_map [H, W],
        denoise_map [H, W])]``.

    Returns:
      the figure.
    """
    fig, axes = plots.item_grid(len(columns), len(MAP_ROWS), width=1.7, height=1.75,
                                max_cols=8)
    for i, (ax_col, (name, x, m, gm, dm)) in enumerate(zip(axes, columns, strict=True)):
        panels = (np.asarray(x) * 0.5 + 0.5, np.asarray(m, float),
                  gm / max(float(np.max(gm)), 1e-12), dm / max(float(np.max(dm)), 1e-12))
        for r, (ax, img) in enumerate(zip(ax_col, panels, strict=True)):
            ax.imshow(img, cmap="magma", vmin=0.0, vmax=1.0)
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(name, fontsize=8)
            if i % 8 == 0:
                ax.set_ylabel(MAP_ROWS[r], fontsize=8)
    fig.subplots_adjust(hspace=0.15, wspace=0.1)
    return fig


def _blocks_in(summary) -> list[str]:
    """The summary's blocks in declaration order (summary.json stores keys sorted)."""
    return [b for b in BLOCKS if b in summary["auroc"]]


def headline(summary: dict) -> list[tuple[str, str]]:
    """(metric, value) rows for results/REPORT.md: per block the mean AUROC of every method
    (with its score evaluations per image), per OOD set GEPC vs the best baseline with CIs,
    and the clutter blocks' map localisation."""
    cost = summary["cost_score_evals_per_image"]
    names = ", ".join(f"{m} [{cost[m]} evals]" for m in METHODS)
    bl = _blocks_in(summary)
    rows = [(f"mean AUROC {block}: {names}",
             ", ".join(f"{summary['mean_auroc'][block][m]:.3f}" for m in METHODS))
            for block in bl]

    def ci(v):
        return f"{v['auroc']:.3f} [{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}]"

    for block in bl:
        for name in summary["blocks"][block]:
            row = summary["auroc"][block][name]
            best = max((v["auroc"], k) for k, v in row.items() if not k.startswith("GEPC"))
            rows.append((f"AUROC {name} ({block}): GEPC official / best baseline",
                         f"{ci(row[METHODS[0]])} / {ci(row[best[1]])} ({best[1]})"))
    for block in (b for b in bl if b in summary["localisation_pixel_auroc"]):
        for name in summary["blocks"][block]:
            row = summary["localisation_pixel_auroc"][block][name]
            rows.append((f"pixel AUROC of the map vs target mask, {name} ({block}): GEPC / "
                         "denoising error",
                         f"{ci(row['GEPC map'])} / {ci(row['denoising-error map'])}"))
    return rows


# ------------------------------------------------------------------ TensorBoard series


def tb_scalars(config, unit, result, workdir):
    """TensorBoard series of a unit (``study.Experiment.scalars``; module docstring of
    ``experiments.lib.scalars``)."""
    del config, workdir
    if not isinstance(result, dict):
        return {}
    if "losses" in result:
        return {"gepc/score_model_loss": np.asarray(result["losses"]).reshape(-1)}
    if "residuals" in result:
        r = np.asarray(result["residuals"], np.float64)  # [N, T', G]
        steps = np.asarray(result.get("t_index", np.arange(r.shape[1])))
        return {"gepc/mean_residual_vs_timestep_index": (steps, r.mean(axis=(0, 2)))}
    return {}


CAPTION = ("OOD AUROC per benchmark block and OOD set (OOD positive; 0.5 is chance, higher is "
           "better), with percentile-bootstrap 95% CIs over images.")

EXPERIMENT = study.Experiment(name="gepc", validate=_validate, units=_units,
                              summarize=_summarize, plot=_plot, headline=headline,
                              scalars=tb_scalars, caption=CAPTION)

if __name__ == "__main__":
    common.launch(EXPERIMENT, "experiments/configs/gepc.py:quick")
