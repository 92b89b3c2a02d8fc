"""Shared pieces of the one-shape API tests (tests/test_method_api.py and its 8-device
subprocess): each method's tiny example from ``tests/<method>/api_example.py``."""

import importlib

import jax
import numpy as np

from experiments.lib import registry

METHODS = list(registry.METHODS)
NEEDS = {"rfo": "brax", "avatar": "ott"}  # optional extra each example needs
# Compiling RFO's gradient through MJX physics takes ~1.5 min per check on 2 CPU cores
# (about 11 min for its share of tests/test_method_api.py), so its checks run with -m slow.
SLOW = {"rfo"}


def build(name: str):
    """(alg, init_args, step_args) of ``tests/<name>/api_example.py``."""
    return importlib.import_module(f"tests.{name}.api_example").build()


def host_leaves(tree) -> list[np.ndarray]:
    """The leaves of ``tree`` as NumPy (typed PRNG keys as their key data)."""
    def host(x):
        if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            x = jax.random.key_data(x)
        return np.asarray(x)

    return [host(x) for x in jax.tree.leaves(tree)]


def assert_trees_close(a, b, rtol=1e-5, atol=1e-6, what=""):
    la, lb = host_leaves(a), host_leaves(b)
    assert jax.tree.structure(a) == jax.tree.structure(b), what
    for i, (x, y) in enumerate(zip(la, lb, strict=True)):
        if np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.complexfloating):
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol, err_msg=f"{what} leaf {i}")
        else:
            np.testing.assert_array_equal(x, y, err_msg=f"{what} leaf {i}")


def run_seeds(name: str, keys):
    """vmap over ``keys`` of one init and one step (what every batched experiment does)."""
    alg, init_args, step_args = build(name)

    def one(key):
        k_init, k_step = jax.random.split(key)
        state = alg.init(k_init, *init_args)
        return alg.step(k_step, state, *step_args)

    return jax.jit(jax.vmap(one))(keys)
