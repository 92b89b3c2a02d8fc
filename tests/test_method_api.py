"""One shape for every method (optax-style parameterized test).

Every method package exports ``State``, ``Info``, ``init`` and ``step``, and its
constructor returns a ``jaxlab.core.types.Algorithm`` with ``init(key, ...) -> State`` and
``step(key, state, ...) -> (State, Info)``. On each method's tiny example
(``tests/<method>/api_example.py``) the same checks run: eager == jit, the key is the only
randomness (same key, same state; another key, another state: weights come from the key),
vmap over seeds == the seeds one by one, and on 8 (virtual CPU) devices the seed axis
split over the devices gives the single-device numbers.
"""

import importlib
import inspect
import os
import subprocess
import sys

import jax
import numpy as np
import pytest

from jaxlab.core.types import Algorithm
from tests import method_api
from tests.method_api import METHODS, assert_trees_close, build, host_leaves

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _skip_without_extra(name):
    if name in method_api.NEEDS:
        pytest.importorskip(method_api.NEEDS[name])


@pytest.fixture(params=[pytest.param(m, marks=pytest.mark.slow) if m in method_api.SLOW
                        else m for m in METHODS])
def method(request):
    _skip_without_extra(request.param)
    return request.param


def test_package_exports_the_one_shape(method):
    pkg = importlib.import_module(f"jaxlab.{method}")
    for name in ("State", "Info", "init", "step"):
        assert hasattr(pkg, name), f"jaxlab.{method} does not export {name}"
        assert name in pkg.__all__, f"{name} missing from jaxlab.{method}.__all__"
    for fn in (pkg.init, pkg.step):
        first = next(iter(inspect.signature(fn).parameters))
        assert first == "key", f"jaxlab.{method}.{fn.__name__}: first argument is {first!r}"
    first = list(inspect.signature(pkg.step).parameters)[:2]
    assert first == ["key", "state"], f"jaxlab.{method}.step arguments start {first}"


@pytest.mark.heavy
def test_init_and_step_eager_equal_jit(method):
    alg, init_args, step_args = build(method)
    assert isinstance(alg, Algorithm)
    k_init, k_step = jax.random.split(jax.random.key(0))
    state = alg.init(k_init, *init_args)
    assert hasattr(state, "_fields"), "State must be a NamedTuple"
    jit_state = jax.jit(lambda k: alg.init(k, *init_args))(k_init)
    assert_trees_close(state, jit_state, what="init")
    new, info = alg.step(k_step, state, *step_args)
    assert hasattr(info, "_fields"), "Info must be a NamedTuple"
    assert jax.tree.structure(new) == jax.tree.structure(state), "step changed the State"
    jit_new, jit_info = jax.jit(lambda k, s: alg.step(k, s, *step_args))(k_step, jit_state)
    assert_trees_close(new, jit_new, rtol=1e-4, atol=1e-5, what="step")
    assert_trees_close(info, jit_info, rtol=1e-4, atol=1e-5, what="info")


@pytest.mark.heavy
def test_the_key_is_the_only_randomness(method):
    alg, init_args, step_args = build(method)
    k1, k2 = jax.random.key(1), jax.random.key(2)
    init = jax.jit(lambda k: alg.init(k, *init_args))
    step = jax.jit(lambda k, s: alg.step(k, s, *step_args))
    assert_trees_close(init(k1), init(k1), rtol=0, atol=0, what="same key")
    assert_trees_close(step(k1, init(k1)), step(k1, init(k1)), rtol=0, atol=0,
                       what="same key, same step")
    # Another key gives another state: the weights / estimates are drawn from the key
    # (the leaves that hold PRNG keys themselves are not counted).
    def non_key_leaves(tree):
        return [x for x, leaf in zip(host_leaves(tree), jax.tree.leaves(tree), strict=True)
                if not (isinstance(leaf, jax.Array)
                        and jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key))]

    a = non_key_leaves(step(k1, init(k1)))
    b = non_key_leaves(step(k2, init(k2)))
    assert any(x.shape != y.shape or not np.array_equal(x, y) for x, y in zip(a, b, strict=True)), \
        "two keys gave the same state after init + step"


@pytest.mark.heavy
def test_vmap_over_seeds_equals_seeds_one_by_one(method):
    keys = jax.random.split(jax.random.key(3), 3)
    batched = method_api.run_seeds(method, keys)
    for i in range(3):
        single = method_api.run_seeds(method, keys[i:i + 1])
        # Batched, XLA may reduce in another order: float32 diagnostics near a solver's
        # tolerance (AvAtar's CG residual, ~1e-4) move by up to ~5e-5, as on 8 devices.
        assert_trees_close(jax.tree.map(lambda x, i=i: x[i:i + 1], batched), single,
                           rtol=1e-4, atol=1e-4, what=f"seed {i}")


_SHARDED = """
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import jax
assert jax.device_count() == 8
from jaxlab.core import sharding
from tests import method_api
for name in sys.argv[1].split(","):
    keys = jax.random.split(jax.random.key(5), 8)
    ref = method_api.run_seeds(name, keys)
    sharded = sharding.shard_batch(keys, (-1,))
    assert len(sharded.sharding.device_set) == 8
    out = method_api.run_seeds(name, sharded)
    # Split over devices, XLA may reduce in another order: float32 diagnostics near a
    # solver's tolerance (AvAtar's CG residual, ~1e-4) move by up to ~5e-5.
    method_api.assert_trees_close(out, ref, rtol=1e-4, atol=1e-4, what=name)
    print(name, "OK", flush=True)
"""


@pytest.mark.heavy
@pytest.mark.parametrize("slow", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_seed_axis_sharded_over_8_devices_equals_one_device(slow):
    names = []
    for name in METHODS:
        if (name in method_api.SLOW) != slow:
            continue
        needs = method_api.NEEDS.get(name)
        if needs is None or importlib.util.find_spec(needs) is not None:
            names.append(name)
    out = subprocess.run([sys.executable, "-c", _SHARDED, ",".join(names)], cwd=ROOT,
                         capture_output=True, text=True, timeout=900,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    for name in names:
        assert f"{name} OK" in out.stdout, out.stdout
