"""Where the package's files are: its root folder and the folders config values name.

``ROOT`` holds ``jaxlab/``, ``pallas_kernels/`` and ``experiments/`` (a checkout's root, or
site-packages), found from this file: ``jaxlab.__file__`` is None where a folder named
jaxlab in the working directory (e.g. the clone itself) shadows the package. The source
hash of ``provenance`` and the weight lookup of ``artifacts`` start from it. This module
imports no other module of ``experiments.lib``.
"""

import os

from .. import PACKAGE_DIR, package_path

ROOT = os.path.dirname(PACKAGE_DIR)


def resolve(path: str) -> str:
    """The folder a ``pretrained_dir``-style config value names.

    Order: ``""`` stays ``""`` (no weights); an absolute path is used as given; a relative
    path is looked up under the package's root first (``experiments/pretrained/...``, the
    shipped weights, found from any working directory) and then under the working directory
    (a folder the user typed, e.g. ``my_weights``), returned absolute. A relative path found
    in neither place is returned under the package's root (callers treat it as absent).
    Whichever folder is used, cache keys hash its files by content
    (``provenance.weights_hash``).
    """
    if not path:
        return ""
    path = os.fspath(path)
    if os.path.isabs(path):
        return path
    shipped = package_path(path)
    if os.path.isdir(shipped) or not os.path.isdir(path):
        return shipped
    return os.path.abspath(path)
