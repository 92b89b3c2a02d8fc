"""Optional dependencies: one clear line naming the extra to install when one is missing.

jaxlab's core needs only jax and friends; each optional group of packages is an extra of
``pyproject.toml``::

    ot      ott-jax, networkx          (jaxlab.avatar)
    rl      brax, mujoco, mujoco-mjx   (jaxlab.rfo environments)
    vision  scikit-learn, mlxtend, scikit-image   (jaxlab.gepc data and GMM baselines)

``require("networkx")`` imports and returns the module, or raises ``MissingExtraError``
(a ``ModuleNotFoundError``) whose one-line message names the package and the command that
installs it, e.g. ``pip install 'jaxlab[ot]'``. Library modules import their optional
packages through it, at the place they are first needed.

Example:
    >>> from jaxlab.core import extras
    >>> extras.extra_of("ott.geometry")
    'ot'
    >>> np = extras.require("numpy")  # a required dependency: plain import
"""

import importlib
import types

__all__ = ["MissingExtraError", "extra_of", "message", "require"]

# top-level module -> (extra, distribution name as pip knows it)
EXTRAS = {
    "ott": ("ot", "ott-jax"),
    "networkx": ("ot", "networkx"),
    "brax": ("rl", "brax"),
    "mujoco": ("rl", "mujoco / mujoco-mjx"),
    "sklearn": ("vision", "scikit-learn"),
    "mlxtend": ("vision", "mlxtend"),
    "skimage": ("vision", "scikit-image"),
    "tensorboardX": ("dev", "tensorboardX"),
    "tbparse": ("dev", "tbparse"),
}


class MissingExtraError(ModuleNotFoundError):
    """An optional dependency is not installed; the message names the extra."""


def _check_module(module) -> str:
    """``module`` if it is a non-empty dotted module name; else a ValueError / TypeError
    naming ``module``."""
    if not isinstance(module, str):
        raise TypeError(f"`module` must be a dotted module name (str), got "
                        f"{type(module).__name__}.")
    if not module or not all(part.isidentifier() for part in module.split(".")):
        raise ValueError(f"`module` must be a dotted module name like 'ott.geometry', got "
                         f"{module!r}.")
    return module


def extra_of(module: str) -> str | None:
    """The extra that provides ``module`` (a dotted name), or None for a required one.

    Raises:
      TypeError / ValueError: ``module`` is not a dotted module name.
    """
    _check_module(module)
    entry = EXTRAS.get(module.split(".")[0])
    return entry[0] if entry else None


def message(module: str) -> str:
    """The one-line message for a missing ``module``.

    Raises:
      ValueError: ``module`` is not a package of an optional extra (``extra_of`` is None).
    """
    top = _check_module(module).split(".")[0]
    if top not in EXTRAS:
        raise ValueError(f"`module`={module!r} is not a package of an optional extra (those "
                         f"are {', '.join(sorted(EXTRAS))}).")
    extra, dist = EXTRAS[top]
    return (f"{dist} is not installed; it comes with jaxlab's optional extra [{extra}]: "
            f"pip install 'jaxlab[{extra}]'")


def require(module: str) -> types.ModuleType:
    """Imports ``module``; a missing optional package raises ``MissingExtraError``.

    Args:
      module: dotted module name, e.g. ``"ott.solvers.linear"``.

    Returns:
      The imported module.

    Raises:
      MissingExtraError: the top-level package of ``module`` is an optional dependency
        that is not installed (the message names ``pip install 'jaxlab[<extra>]'``).
      TypeError / ValueError: ``module`` is not a dotted module name.
    """
    _check_module(module)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        top = module.split(".")[0]
        if top in EXTRAS and (e.name or "").split(".")[0] == top:
            raise MissingExtraError(message(module), name=e.name) from None
        raise
