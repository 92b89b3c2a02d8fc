"""Metrics shared by the methods: AUROC, regret, slopes and confidence intervals.

Checks (eager, at the Python boundary; ``auroc`` validates before its jitted body, so
nothing is added to compiled code and ``jit`` / ``vmap`` of ``auroc`` still work):

* ``auroc``: ``scores`` 1-D, ``labels`` the same shape; when concrete: no NaN score
  (+-inf scores are valid extreme ranks), ``labels`` boolean or exactly 0/1 (no NaN) with
  both classes present. Traced inputs (e.g. a ``vmap`` over bootstrap resamples) are not
  inspected: a resample with one class gives NaN there, as documented under Returns.
* ``average_ranks``: 1-D ``x``, no NaN when concrete.
* ``cumulative_regret``: matching shapes, finite ``losses`` / ``comparator_losses`` when
  concrete.
* ``loglog_slope``: 1-D ``x`` and ``y`` of equal length >= 2, positive (so finite logs),
  and ``x`` not all equal.
* ``mean_and_ci``: ``level`` in (0, 1); ``axis`` valid; >= 2 replicates along it; a
  non-finite sample gives a RuntimeWarning naming ``samples`` (the NaN/inf result is kept
  so a long run still writes its summary).
* ``bootstrap_ci``: ``num_resamples`` >= 2, ``level`` in (0, 1), ``samples`` a non-empty
  tuple of arrays with a common leading axis n >= 2 and no NaN (ValueError naming
  ``samples[i]``).
* ``bootstrap_auroc``: as ``bootstrap_ci`` with ``samples = (scores, labels)`` of one
  shape [n, ...] (ValueError naming ``labels``), and ``auroc``'s checks on all entries.

Host values (NumPy arrays, lists) are computed with NumPy in their own precision
(float64 stays float64), so summaries compile nothing; ``jax.Array`` inputs and traced
values take the jitted path. SciPy is imported by the one function that needs it.
"""

import functools
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from jaxlab.core import checked, validation
from jaxlab.core.types import Array, ArrayLike

__all__ = ["average_ranks", "auroc", "cumulative_regret", "loglog_slope", "mean_and_ci",
    "bootstrap_ci", "bootstrap_auroc", "bootstrap_indices"]

checked.declare("jaxlab.core.metrics.auroc")


def average_ranks(x: ArrayLike) -> Array:
    """1-based ranks of ``x`` with ties given their average rank (as scipy.stats.rankdata).

    Args:
      x: [n] scores.

    Returns:
      [n] float ranks.
    """
    x = jnp.asarray(x)
    validation.check_ndim("x", x, 1)
    _check_no_nan("x", x)
    s = jnp.sort(x)
    lo = jnp.searchsorted(s, x, side="left")
    hi = jnp.searchsorted(s, x, side="right")
    return (lo + hi + 1) / 2.0


def _check_no_nan(name: str, x) -> None:
    """ValueError if a concrete float ``x`` holds NaN (+-inf allowed; traced values pass)."""
    if isinstance(x, jax.core.Tracer):
        return
    v = np.asarray(x)
    if v.dtype.kind in "fc" and np.any(np.isnan(v)):
        raise ValueError(f"`{name}` must not contain NaN, got {int(np.isnan(v).sum())} NaN "
                         f"entries (shape {v.shape}).")


def _traced_auroc(scores, labels) -> None:
    """Checked-mode checks of traced AUROC inputs (a one-class resample stays NaN)."""
    scores, labels = jnp.asarray(scores), jnp.asarray(labels)
    checked.check(~jnp.any(jnp.isnan(scores)), "`scores` must not contain NaN.")
    if labels.dtype != jnp.bool_:
        checked.check(jnp.all((labels == 0) | (labels == 1)),
                      "`labels` must be booleans or 0/1.")


def _check_auroc_inputs(scores, labels) -> None:
    validation.check_real("scores", scores)
    validation.check_real("labels", labels, allow_bool=True)
    validation.check_ndim("scores", scores, 1)
    validation.check_shape("labels", labels, np.shape(scores))
    _check_no_nan("scores", scores)
    checked.guard("jaxlab.core.metrics.auroc", _traced_auroc, scores, labels)
    if isinstance(labels, jax.core.Tracer):
        return
    lab = np.asarray(labels)
    if lab.dtype != bool:
        bad = ~np.isin(lab, (0, 1))
        if np.any(bad):
            shown = np.unique(lab[bad])[:5]
            raise ValueError(f"`labels` must be booleans or 0/1, got {int(bad.sum())} other "
                             f"entries (e.g. {shown.tolist()}).")
        lab = lab.astype(bool)
    n_pos = int(lab.sum())
    if n_pos == 0 or n_pos == lab.size:
        raise ValueError(f"`labels` must contain both classes, got {n_pos} positives and "
                         f"{lab.size - n_pos} negatives (AUROC is undefined).")


@checked.boundary
def auroc(scores: ArrayLike, labels: ArrayLike) -> Array:
    """Area under the ROC curve, positives = ``labels == True`` (Mann-Whitney U / (n+ n-)).

    Ties count one half. Jittable and vmappable (inputs are validated first when concrete,
    see the module docstring). Host ``scores`` (NumPy, lists) are ranked with NumPy in
    their own precision (float64 scores 1 and 1 + 1e-12 are distinct); ``jax.Array``
    and traced scores are ranked by the jitted path in their dtype (never narrowed).

    Args:
      scores: [n] real scores, larger means "more positive"; no NaN.
      labels: [n] booleans (or 0/1), at least one of each class.

    Returns:
      Scalar AUROC in [0, 1] (NaN if a class is empty in traced input).

    Raises:
      ValueError: for concrete NaN scores, labels other than 0/1 or a single class.
    """
    _check_auroc_inputs(scores, labels)
    if not isinstance(scores, jax.Array) and not isinstance(labels, jax.Array):
        return _auroc_host(np.asarray(scores), np.asarray(labels))
    return _auroc(scores, labels)


def _auroc_host(scores: np.ndarray, labels: np.ndarray) -> np.float64:
    """``auroc`` of host arrays in NumPy (scores in their own float precision)."""
    if scores.dtype.kind not in "fc":
        scores = scores.astype(np.float64)
    labels = labels.astype(bool)
    s = np.sort(scores)
    r = (np.searchsorted(s, scores, "left") + np.searchsorted(s, scores, "right") + 1) / 2.0
    n_pos = int(labels.sum())
    n_neg = labels.shape[0] - n_pos
    if n_pos == 0 or n_neg == 0:
        return np.float64(np.nan)
    u = r[labels].sum() - n_pos * (n_pos + 1) / 2.0
    return np.float64(u / (n_pos * n_neg))


@jax.jit
def _auroc(scores: ArrayLike, labels: ArrayLike) -> Array:
    scores = jnp.asarray(scores)
    if not jnp.issubdtype(scores.dtype, jnp.floating):
        scores = scores.astype(jnp.result_type(float))
    labels = jnp.asarray(labels).astype(bool)
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
    validation.check_finite("losses", losses)
    validation.check_finite("comparator_losses", comparator_losses)
    dtype = jnp.result_type(losses, comparator_losses)
    if jnp.issubdtype(dtype, jnp.floating) and not isinstance(losses - comparator_losses,
                                                               jax.core.Tracer):
        diff = np.asarray(losses, np.float64) - np.asarray(comparator_losses, np.float64)
        worst = float(np.max(np.sum(np.abs(diff), axis=-1), initial=0.0))
        validation.check_representable("losses", worst, dtype,
                                       "the running regret sum |losses - comparator_losses|")
    return jnp.cumsum(losses - comparator_losses, axis=-1)


def loglog_slope(x: ArrayLike, y: ArrayLike) -> float:
    """Least-squares slope of log(y) against log(x) (the exponent of a power law).

    Args:
      x: [n] positive, finite abscissae.
      y: [n] positive, finite ordinates.

    Returns:
      The fitted exponent b in y ~ a x^b.
    """
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    validation.check_ndim("x", x, 1)
    validation.check_shape("y", y, x.shape)
    validation.check_finite("x", x)
    validation.check_finite("y", y)
    validation.check_in_range("x", x, 0.0, low_inclusive=False)
    validation.check_in_range("y", y, 0.0, low_inclusive=False)
    validation.check_min_count("len(x)", x.shape[0], 2, "a slope needs two points; `x`")
    if np.ptp(x) == 0:
        raise ValueError(f"`x` must not be constant (the slope is undefined), got all {x[0]:g}.")
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
    if not -x.ndim <= axis < max(x.ndim, 1):
        raise ValueError(f"`axis`={axis} is out of range for `samples` of shape {x.shape}.")
    n = x.shape[axis]
    if n < 2:
        raise ValueError(f"`samples` needs >= 2 replicates along axis {axis}, got {n} "
                         "(e.g. raise `num_seeds`).")
    if not np.all(np.isfinite(x)):
        warnings.warn(f"`samples` holds {int((~np.isfinite(x)).sum())} non-finite values: the "
                      "mean / CI are NaN or inf.", RuntimeWarning, stacklevel=2)
    from scipy import stats  # a third of `import jaxlab`'s time if imported at the top

    mean = x.mean(axis=axis)
    sem = x.std(axis=axis, ddof=1) / np.sqrt(n)
    return mean, stats.t.ppf(0.5 + level / 2.0, df=n - 1) * sem


BOOTSTRAP_CHUNK = 128
# jax.Array samples with at least this many elements in all stay on the device (jitted,
# chunked resamples); smaller ones, and all host arrays, are resampled with NumPy.
DEVICE_MIN_SIZE = 1 << 16


def bootstrap_indices(key, n: int, num_resamples: int) -> jax.Array:
    """[num_resamples, n] int32 row indices of a bootstrap, ``randint(key, (num_resamples,
    n), 0, n)``: the one draw every bootstrap of this library makes (``bootstrap_ci``,
    ``bootstrap_auroc`` and the comparison protocol), so paired intervals are coherent.

    Raises:
      ValueError: ``n`` < 1 or ``num_resamples`` < 1.
    """
    validation.check_min_count("n", n, 1, "rows to resample")
    validation.check_min_count("num_resamples", num_resamples, 1, "resamples")
    return jax.random.randint(key, (num_resamples, n), 0, n)


def bootstrap_ci(key, statistic, samples, num_resamples: int, level: float = 0.95):
    """Point value and percentile-bootstrap interval of ``statistic(*samples)``.

    Rows are resampled jointly across every array in ``samples`` (a paired bootstrap: the
    i-th entries of all arrays stay together), ``num_resamples`` times, with indices drawn
    by ``jax.random.randint(key, (num_resamples, n), 0, n)``. Resamples where the
    statistic is NaN (e.g. an AUROC of a one-class resample) are ignored.

    Host samples (NumPy arrays, lists), and ``jax.Array`` samples of fewer than
    ``DEVICE_MIN_SIZE`` elements in all, are resampled on the host: ``statistic`` is
    called once per resample on NumPy arrays (NumPy functions, array methods and
    ``metrics.auroc`` run in NumPy; ``jnp`` functions also work, op by op), so nothing is
    compiled per call; a resample on which it raises ValueError (``auroc`` of one
    class) counts as NaN, as on the device. ``statistic=metrics.auroc`` on the host is not
    called per resample (up to 4096 rows): the scores are ranked once and every
    resample's AUROC is the Mann-Whitney U of the same items weighted by how often the
    resample drew them (integer arithmetic, so the values equal ``auroc`` of each resample
    bit for bit). Larger ``jax.Array`` samples stay on the device:
    ``jax.lax.map`` over chunks of ``BOOTSTRAP_CHUNK`` resamples in one jitted program,
    compiled once per ``statistic`` (hashable, e.g. a module-level function) and shapes.

    Args:
      key: PRNG key.
      statistic: function of the arrays in ``samples`` returning a scalar.
      samples: tuple of arrays with a common leading axis n >= 2, without NaN.
      num_resamples: number of bootstrap resamples (>= 2).
      level: interval level in (0, 1).

    Returns:
      (point, low, high) Python floats.

    Raises:
      ValueError: naming the argument: ``num_resamples`` < 2, ``level`` outside (0, 1),
        no arrays, ``samples[i]`` without the common leading axis or holding NaN.
    """
    validation.check_min_count("num_resamples", num_resamples, 2, "a percentile interval")
    validation.check_in_range("level", level, 0.0, 1.0, low_inclusive=False, high_inclusive=False)
    samples = tuple(samples)
    if not samples:
        raise ValueError("`samples` must hold at least one array.")
    on_device = (any(isinstance(s, jax.Array) for s in samples)
                 and sum(int(np.size(s)) for s in samples) >= DEVICE_MIN_SIZE)
    samples = tuple(jnp.asarray(s) if on_device else np.asarray(s) for s in samples)
    n = samples[0].shape[0] if samples[0].ndim else 0
    for i, s in enumerate(samples):
        if s.ndim == 0 or s.shape[0] != n:
            raise ValueError(f"`samples[{i}]` must have leading axis {n}, got shape {s.shape}.")
        if jnp.issubdtype(s.dtype, jnp.inexact) and bool((jnp if on_device else np)
                                                         .isnan(s).any()):
            raise ValueError(f"`samples[{i}]` must not contain NaN, got "
                             f"{int((jnp if on_device else np).isnan(s).sum())} NaN entries "
                             f"(shape {s.shape}).")
    validation.check_min_count("len(samples[0])", n, 2, "a bootstrap needs two rows")
    point = float(statistic(*samples))
    idx = bootstrap_indices(key, n, num_resamples)
    if on_device:
        boots = np.asarray(_device_resamples(statistic, samples, idx,
                                             min(num_resamples, BOOTSTRAP_CHUNK)))
    elif (statistic is auroc or statistic is _flat_auroc) and n * n <= _AUROC_MAX_ROWS_SQUARED:
        boots = _auroc_resamples(samples[0], samples[1], np.asarray(idx))
    else:
        boots = np.array([_host_statistic(statistic, [s[i] for s in samples])
                          for i in np.asarray(idx)])
    lo, hi = np.nanpercentile(boots, [50 - 50 * level, 50 + 50 * level])
    return point, float(lo), float(hi)


def _host_statistic(statistic, resample) -> float:
    """``statistic`` of one host resample; NaN where it is undefined there (it raises a
    ValueError, as ``auroc`` does for a one-class resample, which the jitted path
    returns as NaN)."""
    try:
        return float(statistic(*resample))
    except ValueError:
        return float("nan")


@functools.partial(jax.jit, static_argnums=(0, 3))
def _device_resamples(statistic, samples, idx, chunk):
    # Chunks of resamples (vmapped inside a scan): the same values as one vmap over all of
    # them, with memory bounded by the chunk (a pixel-level AUROC over 10^5 pixels x 2000
    # resamples held ~10 GB in one vmap).
    return jax.lax.map(lambda i: statistic(*(s[i] for s in samples)), idx, batch_size=chunk)


def bootstrap_auroc(key, scores, labels, num_resamples: int, level: float = 0.95):
    """AUROC of all entries of ``scores`` against ``labels`` with a percentile-bootstrap
    interval resampling their rows (e.g. images of per-pixel scores and masks).

    The same values as ``bootstrap_ci(key, lambda s, l: auroc(s.reshape(-1),
    l.reshape(-1)), (scores, labels), num_resamples, level)``: the same index draws and
    host / device split. On the host (up to 4096 rows) the scores are ranked once and each
    resample's AUROC is the Mann-Whitney U of the entries weighted by how often their row
    was drawn (exact integer counts), so no resample is re-ranked.

    Args:
      key: PRNG key of the resample indices.
      scores: [n, ...] real scores (larger = more positive), no NaN; n >= 2 rows.
      labels: booleans or 0/1 of ``scores``' shape, both classes present.
      num_resamples: bootstrap resamples (>= 2).
      level: interval level in (0, 1).

    Returns:
      (point, low, high) Python floats; resamples with one class are ignored.

    Raises:
      ValueError: naming the argument, as ``bootstrap_ci`` and ``auroc``.

    Example:
      >>> import jax, numpy as np
      >>> from jaxlab.core import metrics
      >>> rng = np.random.default_rng(0)
      >>> maps = rng.normal(size=(20, 8, 8)); masks = rng.random((20, 8, 8)) < 0.2
      >>> point, lo, hi = metrics.bootstrap_auroc(jax.random.key(0), maps + masks, masks, 200)
      >>> bool(lo <= point <= hi)
      True
    """
    validation.check_real("scores", scores)
    _check_no_nan("scores", scores)
    validation.check_shape("labels", labels, np.shape(scores))
    return bootstrap_ci(key, _flat_auroc, (scores, labels), num_resamples, level)


def _flat_auroc(scores, labels):
    """``auroc`` of all entries of a resample of rows (``bootstrap_auroc``' statistic)."""
    return auroc(scores.reshape(-1), labels.reshape(-1))


# Rows n up to which host AUROC resamples are counted (``_auroc_resamples``' [n, n] float64
# matrix, 128 MiB at the limit); more rows are ranked resample by resample.
_AUROC_MAX_ROWS_SQUARED = 1 << 24
# (positive, negative) entry pairs up to which ``_auroc_resamples`` compares all at once.
_AUROC_PAIRS = 1 << 20


def _auroc_resamples(scores, labels, idx) -> np.ndarray:
    """[R] ``auroc`` of the host resamples ``scores[idx[r]]`` against ``labels[idx[r]]``
    (rows of [n, ...] arrays; all entries of a row go together) without re-ranking.

    The [n, n] matrix M with M[j, k] = 2 #(positive entry of row j > negative entry of
    row k) + #(ties between them) is built once (all pairs compared at once when few,
    else one ``searchsorted`` of the positive entries in each row's sorted negatives). A
    resample drawing row j c_j times holds c_j copies of its entries, so its Mann-Whitney
    U is c^T M c / 2, and n+ = c . positives_per_row, n- likewise. Every quantity is an
    integer far below 2^53, so the float64 sums and matrix products are exact in any
    order, and U / (n+ n-) is the float64 value ``auroc`` gives the resample (whose
    midrank sums are exact half-integers); NaN where a resample has one class.
    """
    n = scores.shape[0]
    s = scores.reshape(n, -1)
    if s.dtype.kind not in "fc":
        s = s.astype(np.float64)
    lab = labels.reshape(n, -1).astype(bool)
    row = np.repeat(np.arange(n), s.shape[1])
    flat, flat_lab = s.reshape(-1), lab.reshape(-1)
    pos_s, pos_row = flat[flat_lab], row[flat_lab]
    neg_s, neg_row = flat[~flat_lab], row[~flat_lab]
    if pos_s.size * neg_s.size <= _AUROC_PAIRS:  # every (positive, negative) pair at once
        pairs = ((neg_s[None] < pos_s[:, None]).astype(np.float64)
                 + (neg_s[None] <= pos_s[:, None]))
        m = np.eye(n)[:, pos_row] @ pairs @ np.eye(n)[neg_row]
    else:  # one ``searchsorted`` of the positives in each row's sorted negatives
        m = np.empty((n, n))
        for k in range(n):
            neg = np.sort(s[k][~lab[k]])
            ranked = np.searchsorted(neg, pos_s, "left") + np.searchsorted(neg, pos_s, "right")
            m[:, k] = np.bincount(pos_row, weights=ranked, minlength=n)
    pos_rows = lab.sum(1).astype(np.float64)
    neg_rows = s.shape[1] - pos_rows
    r = idx.shape[0]
    counts = np.bincount((idx + n * np.arange(r)[:, None]).reshape(-1),
                         minlength=r * n).reshape(r, n).astype(np.float64)
    n_pos, n_neg = counts @ pos_rows, counts @ neg_rows
    two_u = ((counts @ m) * counts).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = (two_u / 2.0) / (n_pos * n_neg)
    return np.where((n_pos > 0) & (n_neg > 0), out, np.nan)
