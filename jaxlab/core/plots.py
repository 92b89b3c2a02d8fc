"""Matplotlib (Agg) helpers for result figures."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from jaxlab.core import sharding  # noqa: E402


def figure(ncols: int = 1, width: float = 5.0, height: float = 3.8):
    """A new figure with ``ncols`` axes side by side; returns (fig, axes list)."""
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    return fig, list(axes[0])


def line_with_band(ax, x, mean, half_width=None, label=None, **kwargs):
    """Plots ``mean`` against ``x`` with a shaded +- ``half_width`` band."""
    x, mean = np.asarray(x), np.asarray(mean)
    (line,) = ax.plot(x, mean, label=label, **kwargs)
    if half_width is not None:
        hw = np.asarray(half_width)
        ax.fill_between(x, mean - hw, mean + hw, color=line.get_color(), alpha=0.2, lw=0)
    return line


def save(fig, path: str | os.PathLike) -> str:
    """Saves ``fig`` as PNG at ``path`` (folders created) and closes it; in a multi-host
    run only the main process writes."""
    path = os.fspath(path)
    if sharding.is_main_process():
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
