"""Typed aliases used across jaxlab."""

from typing import Any, TypeAlias

import jax
import numpy as np

Array: TypeAlias = jax.Array
ArrayLike: TypeAlias = jax.typing.ArrayLike
PRNGKey: TypeAlias = jax.Array
PyTree: TypeAlias = Any
Scalar: TypeAlias = float | int | jax.Array
NDArray: TypeAlias = np.ndarray
