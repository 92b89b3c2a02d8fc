"""Typed aliases used across jaxlab."""

from collections.abc import Callable
from typing import Any, NamedTuple, TypeAlias

import jax
import numpy as np

__all__ = ["Array", "ArrayLike", "PRNGKey", "PyTree", "Scalar", "NDArray", "Algorithm"]

Array: TypeAlias = jax.Array
ArrayLike: TypeAlias = jax.typing.ArrayLike
PRNGKey: TypeAlias = jax.Array
PyTree: TypeAlias = Any
Scalar: TypeAlias = float | int | jax.Array
NDArray: TypeAlias = np.ndarray


class Algorithm(NamedTuple):
    """The one shape of every jaxlab method (blackjax/optax style).

    ``init(key, *args) -> State`` builds the state (network weights included) from the key;
    ``step(key, state, *args) -> (State, Info)`` advances it once. The key always comes
    first. Each method package exports ``State``, ``Info``, ``init``, ``step`` and one
    constructor returning an ``Algorithm`` with its static arguments bound, e.g.
    ``alg = qlearning.periodic(mdp, schedule); s = alg.init(key); s, info = alg.step(key, s)``.
    """

    init: Callable[..., Any]
    step: Callable[..., tuple[Any, Any]]
