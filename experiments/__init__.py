"""Experiment binaries and configs (thin wrappers over library functions).

In a checkout this package is ``experiments`` (``python -m experiments.qlearning`` from the
repository's root); the wheel installs the same folder as ``jaxlab_experiments`` (``jaxlab
qlearning`` or ``python -m jaxlab_experiments.qlearning`` from any folder), so a user's own
``experiments`` package is never shadowed. Its modules import each other relatively, and
paths such as ``experiments/configs/x.py`` or ``experiments/pretrained/...`` resolve through
``package_path`` under either name.
"""

import os

# This package's folder (``<checkout>/experiments`` or ``<site-packages>/jaxlab_experiments``;
# an editable install's link to this file resolves to the checkout's folder).
PACKAGE_DIR = os.path.dirname(os.path.realpath(__file__))
# Modules and subpackages load from that folder, so a module added to a checkout after an
# editable install is found without reinstalling.
__path__ = [PACKAGE_DIR]


def package_path(path: str) -> str:
    """``path``, relative to a checkout's root, as an absolute path in this installation.

    Args:
      path: e.g. ``experiments/configs/qlearning.py`` or ``experiments/pretrained/dllm``
        (its ``experiments`` part names this package's folder, whatever the package is
        imported as) or ``jaxlab/avatar/data`` (beside this package).

    Returns:
      The absolute path (it need not exist).
    """
    head, _, rest = os.path.normpath(os.fspath(path)).partition(os.sep)
    if head == "experiments":
        return os.path.join(PACKAGE_DIR, rest) if rest else PACKAGE_DIR
    return os.path.join(os.path.dirname(PACKAGE_DIR), os.fspath(path))
