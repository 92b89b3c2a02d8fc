"""The persistent compilation cache: where its folder is, and that a second process loads
what the first compiled (two subprocesses, a small program)."""

import json
import os
import subprocess
import sys

import pytest

from experiments.lib import compile_cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_folder_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(compile_cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compile_cache.default_dir() == str(tmp_path / "xdg" / "jaxlab" / "xla")
    assert compile_cache.resolve() == compile_cache.default_dir()
    assert compile_cache.resolve(tmp_path / "mine") == str(tmp_path / "mine")
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path / "env"))
    assert compile_cache.resolve(tmp_path / "mine") == str(tmp_path / "env")
    for off in ("0", "off", "OFF", "false", ""):
        monkeypatch.setenv(compile_cache.ENV, off)
        assert compile_cache.resolve(tmp_path / "mine") is None


def test_enable_rejects_a_negative_threshold():
    with pytest.raises(ValueError, match="min_compile_secs"):
        compile_cache.enable(min_compile_secs=-1.0)


_PROGRAM = """
import json, sys
import jax, jax.numpy as jnp
from experiments.lib import compile_cache
folder = compile_cache.enable(min_compile_secs=0.0)
t0 = compile_cache.tally()
f = jax.jit(lambda x: jnp.cumsum(jnp.sin(x) * 3.0) @ x)
float(f(jnp.arange(37.0)))
d = compile_cache.tally() - t0
print(json.dumps({"folder": folder, "programs": d.programs, "hits": d.cache_hits}))
"""


def _run(env):
    out = subprocess.run([sys.executable, "-c", _PROGRAM], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_loads_the_program_and_off_means_off(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")
           and k != "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"}
    env.update(JAX_PLATFORMS="cpu", **{compile_cache.ENV: str(tmp_path / "cache")})
    first = _run(env)
    assert first["folder"] == str(tmp_path / "cache")
    assert first["programs"] >= 1 and first["hits"] == 0
    assert os.listdir(tmp_path / "cache")
    second = _run(env)
    assert second["hits"] >= 1 and second["hits"] == second["programs"]
    off = _run({**env, compile_cache.ENV: "0"})
    assert off["folder"] is None and off["hits"] == 0
