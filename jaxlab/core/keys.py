"""PRNG keys at the public entry points: typed keys, legacy keys converted.

Every public jaxlab function that consumes randomness takes the key as its first argument
and passes it through :func:`as_key` once, at trace time: a typed key
(``jax.random.key(0)``) is returned as it is; a legacy ``uint32`` key
(``jax.random.PRNGKey(0)``, trailing axis of size 2) is wrapped into a typed key holding the
same bits, so both give identical draws; anything else raises a ``TypeError`` naming the
argument.
"""

import jax
import jax.numpy as jnp

__all__ = ["as_key"]


def as_key(key, name: str = "key") -> jax.Array:
    """Returns ``key`` as a typed PRNG key array (legacy ``uint32`` keys converted).

    Args:
        key: a typed key array of any batch shape ``[...]`` (``jax.random.key``), or a
            legacy ``uint32`` key array ``[..., 2]`` (``jax.random.PRNGKey``).
        name: the argument's name, used in the error message.

    Returns:
        A typed key array ``[...]`` with the same bits (jit- and vmap-safe: a dtype check
        and, for legacy keys, ``jax.random.wrap_key_data``).

    Raises:
        TypeError: ``key`` is neither a typed key nor a ``uint32`` array with a trailing
            axis of size 2.
    """
    dtype = getattr(key, "dtype", None)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return key
    if dtype is not None and dtype == jnp.uint32 and getattr(key, "ndim", 0) >= 1 \
            and key.shape[-1] == 2:
        return jax.random.wrap_key_data(key, impl="threefry2x32")
    raise TypeError(
        f"`{name}` must be a PRNG key (jax.random.key(seed), or a legacy "
        f"jax.random.PRNGKey(seed)); got {type(key).__name__}"
        f"{'' if dtype is None else f' of dtype {dtype} and shape {tuple(key.shape)}'}.")
