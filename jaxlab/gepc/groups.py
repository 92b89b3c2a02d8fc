"""Group actions on images as pure functions with inverses.

Images are [..., H, W, C]. Every action here permutes pixels, so a score that is exactly
equivariant (e.g. the score of an isotropic Gaussian) satisfies g^-1 s(g x) = s(x).
Register your own with ``register(name, forward, inverse, needs_square=False)``.

Checks: ``get`` raises ValueError naming ``group`` for an unknown element and for a
rotation of non-square images.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp

from jaxlab.core.types import Array

__all__ = ["GroupElement", "ELEMENTS", "DEFAULT_GROUP", "register", "get"]


class GroupElement(NamedTuple):
    """forward(x) = g x; inverse(x) = g^-1 x; needs_square: only defined for H == W."""

    forward: Callable[[Array], Array]
    inverse: Callable[[Array], Array]
    needs_square: bool = False


_H, _W = -3, -2  # axes of [..., H, W, C]

ELEMENTS: dict[str, GroupElement] = {
    "id": GroupElement(lambda x: x, lambda x: x),
    "hflip": GroupElement(lambda x: jnp.flip(x, _W), lambda x: jnp.flip(x, _W)),
    "vflip": GroupElement(lambda x: jnp.flip(x, _H), lambda x: jnp.flip(x, _H)),
    "rot90": GroupElement(lambda x: jnp.rot90(x, 1, (_H, _W)),
                          lambda x: jnp.rot90(x, -1, (_H, _W)), needs_square=True),
    "rot180": GroupElement(lambda x: jnp.rot90(x, 2, (_H, _W)),
                           lambda x: jnp.rot90(x, 2, (_H, _W))),
    "shift_x": GroupElement(lambda x: jnp.roll(x, 1, _W), lambda x: jnp.roll(x, -1, _W)),
    "shift_y": GroupElement(lambda x: jnp.roll(x, 1, _H), lambda x: jnp.roll(x, -1, _H)),
}

#: The GEPC group of the public code (identity excluded: its residual is zero).
DEFAULT_GROUP = ("hflip", "vflip", "rot90", "rot180", "shift_x", "shift_y")


def register(name: str, forward, inverse, needs_square: bool = False) -> None:
    """Adds a group element under ``name`` (overwrites an existing one).

    Raises:
      TypeError / ValueError: ``name`` not a non-empty string, ``forward`` / ``inverse``
        not callable, ``needs_square`` not a bool (nothing is registered then).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"`name` must be a non-empty string, got {name!r}.")
    for arg, fn in (("forward", forward), ("inverse", inverse)):
        if not callable(fn):
            raise TypeError(f"`{arg}` must be a function of images [..., H, W, C], got "
                            f"{type(fn).__name__}.")
    if not isinstance(needs_square, bool):
        raise TypeError(f"`needs_square` must be a bool, got {type(needs_square).__name__}.")
    ELEMENTS[name] = GroupElement(forward, inverse, needs_square)


def get(names, image_shape) -> list[GroupElement]:
    """The elements called ``names``, checked against ``image_shape`` = (..., H, W, C)."""
    out = []
    for n in names:
        if n not in ELEMENTS:
            raise ValueError(f"unknown group element {n!r} in `names` (the GEPC functions' "
                             f"`group`); known: {sorted(ELEMENTS)}.")
        e = ELEMENTS[n]
        h, w = image_shape[-3], image_shape[-2]
        if e.needs_square and h != w:
            raise ValueError(f"group element {n!r} needs square images, got H={h}, W={w}.")
        out.append(e)
    return out
