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


def t_band(n: int, what: str = "seeds") -> str:
    """Caption for ``line_with_band`` bands from ``core.metrics.mean_and_ci``."""
    return f"Line: mean over {n} {what}; band: 95% Student-t confidence interval of the mean."


def save(fig, path: str | os.PathLike, caption: str | None = None) -> str:
    """Saves ``fig`` as PNG at ``path`` (folders created) and closes it; in a multi-host
    run only the main process writes.

    Args:
      fig: the figure.
      path: PNG path.
      caption: text under the axes; every figure with bands or error bars states what they
        are (CI kind and level) and over how many seeds / problems / images (see ``t_band``).
    """
    path = os.fspath(path)
    if caption:
        fig.text(0.5, 0.005, caption, ha="center", va="bottom", fontsize=8, wrap=True)
    if sharding.is_main_process():
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.tight_layout(rect=(0, 0.05 if caption else 0, 1, 1))
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
