"""Metrics shared by the methods: AUROC, regret, slopes and confidence intervals."""

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from jaxlab.core import validation
from jaxlab.core.types import Array, ArrayLike


def average_ranks(x: ArrayLike) -> Array:
    """1-based ranks of ``x`` with ties given their average rank (as scipy.stats.rankdata).

    Args:
      x: [n] scores.

    Returns:
      [n] float ranks.
    """
    x = jnp.asarray(x)
    validation.check_ndim("x", x, 1)
    s = jnp.sort(x)
    lo = jnp.searchsorted(s, x, side="left")
    hi = jnp.searchsorted(s, x, side="right")
    return (lo + hi + 1) / 2.0


@jax.jit
def auroc(scores: ArrayLike, labels: ArrayLike) -> Array:
    """Area under the ROC curve, positives = ``labels == True`` (Mann-Whitney U / (n+ n-)).

    Ties count one half. Jittable and vmappable.

    Args:
      scores: [n] real scores, larger means "more positive".
      labels: [n] booleans (or 0/1), at least one of each class.

    Returns:
      Scalar AUROC in [0, 1] (NaN if a class is empty).
    """
    scores = jnp.asarray(scores, jnp.float32)
    labels = jnp.asarray(labels).astype(bool)
    validation.check_ndim("scores", scores, 1)
    validation.check_shape("labels", labels, scores.shape)
    r = average_ranks(scores)
    n_pos = jnp.sum(labels)
    n_neg = labels.shape[0] - n_pos
    u = jnp.sum(jnp.where(labels, r, 0.0)) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def cumulative_regret(losses: ArrayLike, comparator_losses: ArrayLike) -> Array:
    """Cumulative regret sum_{s<=t} (f_s(x_s) - f_s(u_s)) along the last axis.

    Args:
      losses: [..., T] losses of the learner.
      comparator_losses: [..., T] losses of the comparator (fixed or moving).

    Returns:
      [..., T] running regret.
    """
    losses = jnp.asarray(losses)
    comparator_losses = jnp.asarray(comparator_losses)
    validation.check_shape("comparator_losses", comparator_losses, losses.shape)
    return jnp.cumsum(losses - comparator_losses, axis=-1)


def loglog_slope(x: ArrayLike, y: ArrayLike) -> float:
    """Least-squares slope of log(y) against log(x) (the exponent of a power law).

    Args:
      x: [n] positive abscissae.
      y: [n] positive ordinates.

    Returns:
      The fitted exponent b in y ~ a x^b.
    """
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    validation.check_ndim("x", x, 1)
    validation.check_shape("y", y, x.shape)
    validation.check_in_range("x", x, 0.0, low_inclusive=False)
    validation.check_in_range("y", y, 0.0, low_inclusive=False)
    slope, _ = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope)


def mean_and_ci(samples: ArrayLike, axis: int = 0, level: float = 0.95):
    """Mean and half-width of the Student-t confidence interval along ``axis``.

    Args:
      samples: array with independent replicates (e.g. seeds) along ``axis``.
      axis: the replicate axis.
      level: confidence level in (0, 1).

    Returns:
      (mean, half_width) NumPy arrays with ``axis`` removed.
    """
    validation.check_in_range("level", level, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    x = np.asarray(samples, np.float64)
    n = x.shape[axis]
    if n < 2:
        raise ValueError(f"`samples` needs >= 2 replicates along axis {axis}, got {n}.")
    mean = x.mean(axis=axis)
    sem = x.std(axis=axis, ddof=1) / np.sqrt(n)
    return mean, stats.t.ppf(0.5 + level / 2.0, df=n - 1) * sem
