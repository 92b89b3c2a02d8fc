import subprocess
import sys
import textwrap

import jax
import pytest

from jaxlab.core import sharding


def test_make_mesh_single_device():
    mesh = sharding.make_mesh((-1,), ("batch",))
    assert mesh.shape["batch"] == jax.device_count()
    with pytest.raises(ValueError, match="axis_names"):
        sharding.make_mesh((1, 1), ("batch",))
    with pytest.raises(ValueError, match="needs"):
        sharding.make_mesh((jax.device_count() + 1,), ("batch",))


def test_initialize_distributed_noop_for_one_process():
    assert sharding.initialize_distributed() is False
    assert sharding.initialize_distributed(num_processes=1) is False


@pytest.mark.heavy
def test_sharded_periodic_q_equals_single_device():
    """With 8 host devices, sharding the run axis gives the same results as one device."""
    code = textwrap.dedent("""
        import os
        os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
        import jax, jax.numpy as jnp, numpy as np
        from jaxlab.core import sharding
        from jaxlab import qlearning as ql
        assert jax.device_count() == 8
        mdp = ql.garnet(jax.random.key(0), 6, 2, 2, 0.9)
        qs = ql.value_iteration(mdp)
        keys = jax.random.split(jax.random.key(1), 8)
        states = jax.vmap(lambda k: ql.init(k, mdp))(keys)
        sched = ql.schedules.constant(30)
        f = jax.jit(jax.vmap(lambda s: ql.simulate(s, mdp, sched, qs, 4, 50)[1]))
        ref = f(states)
        mesh = sharding.make_mesh((-1,), ("batch",))
        out = f(sharding.shard_leading_axis(states, mesh))
        assert len(out.target_error.sharding.device_set) == 8
        np.testing.assert_allclose(out.target_error, ref.target_error, rtol=1e-6)
        try:
            sharding.shard_leading_axis(jnp.zeros((3, 2)), mesh)
        except ValueError as e:
            assert "divisible" in str(e)
        else:
            raise AssertionError("expected ValueError")
        print("OK")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"JAX_PLATFORMS": "cpu", "PATH": ""}, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "OK" in out.stdout


def test_shard_batch_places_or_leaves_the_batch_axis():
    x = jax.numpy.arange(6.0).reshape(3, 2)
    assert sharding.shard_batch(x, None) is x
    out = sharding.shard_batch({"a": x}, (-1,))
    assert out["a"].sharding.spec[0] == "batch"
    with pytest.raises(ValueError, match="1-D"):
        sharding.shard_batch(x, (1, 1))


def test_to_host_and_place_on_one_process():
    import numpy as np

    x = sharding.shard_batch({"a": np.arange(4.0), "k": jax.random.split(jax.random.key(0), 4)})
    host = sharding.to_host({"a": x["a"], "s": jax.numpy.float32(2.0)})
    assert isinstance(host["a"], np.ndarray) and isinstance(host["s"], np.ndarray)
    np.testing.assert_array_equal(host["a"], np.arange(4.0))
    assert jax.dtypes.issubdtype(x["k"].dtype, jax.dtypes.prng_key)
    assert sharding.is_main_process()
    sharding.sync("single-process barrier is a no-op")


def test_write_json_is_atomic_and_on_the_main_process(tmp_path):
    import json

    import numpy as np

    from experiments.lib import results

    path = results.write_json(tmp_path / "d" / "r.json", {"x": np.arange(2), "nan": float("nan")})
    assert json.loads(open(path).read()) == {"x": [0, 1], "nan": None}
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["r.json"]  # no temp file left


def test_is_prng_key_and_local_cluster_rejects_bad_input():
    import numpy as np

    from experiments.lib import cluster

    assert sharding.is_prng_key(jax.random.key(0))
    assert not sharding.is_prng_key(jax.random.PRNGKey(0))  # raw uint32 key data
    assert not sharding.is_prng_key(np.zeros(2))
    with pytest.raises(ValueError, match="`args`"):
        cluster.run_local_cluster([])
    with pytest.raises(ValueError, match="`num_processes`"):
        cluster.run_local_cluster(["-c", "pass"], num_processes=0)
    with pytest.raises(ValueError, match="`devices_per_process`"):
        cluster.run_local_cluster(["-c", "pass"], devices_per_process=1.5)
