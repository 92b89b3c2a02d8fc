"""Every method's batch axis on an 8-device mesh gives the single-device results.

One subprocess with ``--xla_force_host_platform_device_count=8`` runs each experiment's own
batched call twice: ``mesh_shape=None`` (all on one device) and ``mesh_shape=(-1,)`` (the
batch axis split over 8 devices), and compares. Periodic Q-learning has its own check in
tests/core/test_sharding.py.
"""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CODE = textwrap.dedent("""
    import os, sys, tempfile
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    import jax, jax.numpy as jnp, numpy as np
    assert jax.device_count() == 8
    from jaxlab.core import sharding

    def spread(x):
        return len(x.sharding.device_set)

    which = sys.argv[1].split(",")
    if "bco" in which:
        from experiments.configs import bco as cfg_mod
        from jaxlab.bco import experiment as ex
        c = cfg_mod.get_config("smoke"); c.num_seeds = 8
        c.mesh_shape = None
        ref = ex._units(c)["vs_dim"][1]()
        c.mesh_shape = (-1,)
        keys = sharding.shard_batch(jax.random.split(jax.random.key(0), 8))
        assert spread(keys) == 8
        np.testing.assert_allclose(ex._units(c)["vs_dim"][1](), ref, rtol=1e-5, atol=1e-5)
        print("bco OK")
    if "avatar" in which:
        from experiments.configs import avatar as cfg_mod
        from jaxlab.avatar import experiment as ex
        c = cfg_mod.get_config("smoke"); c.num_seeds = 8; c.strategies = ["avatar", "random"]
        c.mesh_shape = None
        ref = ex._study(c, "karate")
        c.mesh_shape = (-1,)
        np.testing.assert_allclose(ex._study(c, "karate"), ref, rtol=1e-4, atol=1e-5)
        print("avatar OK")
    if "gepc" in which:
        from experiments.configs import gepc as cfg_mod
        from jaxlab.gepc import experiment as ex, residual
        from jaxlab.gepc.train import make_eps_fn
        c = cfg_mod.get_config("quick"); c.eval_batch = 16
        _, id_test, _ = ex.id_split(c)
        model, params = ex.load_or_train(c, tempfile.mkdtemp(), None)
        eps_fn = make_eps_fn(model, params)
        score_fn = residual.score_from_eps(eps_fn)
        x = id_test[:32]
        c.mesh_shape = None
        ref = ex._features(c, eps_fn, score_fn, x, jax.random.key(0))
        c.mesh_shape = (-1,)
        assert spread(sharding.shard_batch(jnp.asarray(x[:16]))) == 8
        out = ex._features(c, eps_fn, score_fn, x, jax.random.key(0))
        for k in ref:
            np.testing.assert_allclose(out[k], ref[k], rtol=1e-4, atol=1e-4, err_msg=k)
        print("gepc OK")
    if "dllm" in which:
        import functools
        from experiments.configs import dllm as cfg_mod
        from jaxlab.dllm import experiment as ex, model as model_lib
        c = cfg_mod.get_config("quick")
        task, graphdef, params = ex.load_or_train_denoiser(c, tempfile.mkdtemp(), "sudoku")
        denoise = jax.jit(functools.partial(model_lib.apply, graphdef, params))
        prompt, _ = task.sample(jax.random.key(3), 16)
        decs = ex.decoders(c, task, denoise, None)
        fn = jax.jit(decs[f"smc_{c.particles[0]}"][2])  # the experiment's Path-LL SMC
        ref, bad = fn(prompt, key=jax.random.key(1))
        assert not bool(bad)
        p8 = sharding.shard_batch(prompt)
        assert spread(p8) == 8
        out, _ = fn(p8, key=jax.random.key(1))
        np.testing.assert_array_equal(out.answer, ref.answer)
        np.testing.assert_allclose(out.path_ll, ref.path_ll, rtol=1e-4, atol=1e-4)
        print("dllm OK")
    if "rfo" in which:
        from experiments.configs import rfo as cfg_mod
        from jaxlab.rfo import experiment as ex
        c = cfg_mod.get_config("smoke"); c.num_seeds = 8
        c.mesh_shape = None
        ref = ex.run_method(c, "pendulum", "ppo", tempfile.mkdtemp())
        c.mesh_shape = (-1,)
        out = ex.run_method(c, "pendulum", "ppo", tempfile.mkdtemp())
        np.testing.assert_allclose(out["eval_return"], ref["eval_return"], rtol=1e-4,
                                   atol=1e-3)
        print("rfo OK")
""")


# RFO's check (about a minute of PPO compiles) runs with -m slow, beside its two-host check
# in tests/test_multihost.py.
# Under -m slow (146 s of the default run on this session's 2-core machine): the default run
# keeps the sharded Q-learning equality (tests/core/test_sharding.py) and the two-host suite
# check (tests/test_multihost.py); -m slow also runs every binary on two hosts.
@pytest.mark.slow
@pytest.mark.parametrize("methods", ["bco,avatar,gepc,dllm", "rfo"])
def test_sharded_batch_axis_equals_single_device(methods):
    if "rfo" in methods:
        pytest.importorskip("brax")
    if "avatar" in methods:
        pytest.importorskip("ott")
    out = subprocess.run([sys.executable, "-c", _CODE, methods], cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-4000:]
    for m in methods.split(","):
        assert f"{m} OK" in out.stdout, out.stdout
