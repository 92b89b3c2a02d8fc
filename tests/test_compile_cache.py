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


@pytest.mark.heavy
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


def test_tally_names_a_program_built_twice(tmp_path):
    """Two jitted closures of the same computation build one program twice (an in-memory
    jit cache miss): ``CompileTally.duplicates`` names it; distinct programs and a reused
    jitted function are not duplicates, and JAX's compiler log prints nothing new."""
    import logging

    import jax
    import jax.numpy as jnp

    compile_cache.enable(tmp_path)  # the test run's own folder when it is set already
    shown = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = shown.append
    logging.getLogger().addHandler(handler)
    try:
        t0 = compile_cache.tally()
        once = jax.jit(lambda x: jnp.cos(x) * 5.0 + 1.0)
        for _ in range(2):
            once(jnp.arange(7.0))
        jax.jit(lambda x: jnp.tanh(x) - 2.0)(jnp.arange(7.0))
        d = compile_cache.tally() - t0
        assert d.programs >= 2 and d.duplicates == {}
        for _ in range(2):
            jax.jit(lambda x: jnp.cos(x) * 9.0 - 4.0)(jnp.arange(7.0))
        d = compile_cache.tally() - t0
    finally:
        logging.getLogger().removeHandler(handler)
    assert d.duplicates == {"jit__lambda": 2}
    assert len(d.keys) == d.programs and d.duplicate_s > 0
    assert d.duplicates_over(1e6) == {}  # the repeated build took less than that
    assert compile_cache.timing_row(1.0, d)["duplicate_programs"] == {"jit__lambda": 2}
    assert not [r for r in shown if r.name.startswith("jax._src.compiler")
                and r.levelno < logging.WARNING]
