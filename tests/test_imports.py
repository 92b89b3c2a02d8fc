"""The library is pure at import: importing ``jaxlab.<method>`` loads no matplotlib, orbax,
tqdm or experiment plumbing, and ``pallas_kernels`` imports no ``jaxlab`` (the kernels
depend on jax only; ``jaxlab.attention`` depends on them, not the other way round)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLUMBING = ("matplotlib", "orbax", "tqdm", "experiments")
MODULES = ["jaxlab", "jaxlab.core", "jaxlab.qlearning", "jaxlab.bco", "jaxlab.avatar",
           "jaxlab.gepc", "jaxlab.dllm", "jaxlab.rfo", "jaxlab.attention"]


def _loaded_after(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"}, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


@pytest.mark.heavy
@pytest.mark.parametrize("module", MODULES)
def test_importing_a_method_loads_no_plumbing(module):
    if module == "jaxlab.rfo":
        pytest.importorskip("brax")
    if module == "jaxlab.avatar":
        pytest.importorskip("ott")
    stdout = _loaded_after(
        f"import sys, importlib\nimportlib.import_module({module!r})\n"
        f"bad = sorted({{m.split('.')[0] for m in sys.modules}} & set({PLUMBING!r}))\n"
        "print('PLUMBING', bad)\n")
    assert "PLUMBING []" in stdout, stdout


def test_importing_pallas_kernels_loads_no_jaxlab_module():
    stdout = _loaded_after(
        "import sys, pkgutil, importlib, pallas_kernels, pallas_kernels.sale\n"
        "for m in pkgutil.walk_packages(pallas_kernels.__path__, 'pallas_kernels.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(m for m in sys.modules if m == 'jaxlab' or m.startswith('jaxlab.'))\n"
        "assert 'pallas_kernels.sale.block_sparse_attention_tpu' in sys.modules\n"
        "print('JAXLAB_MODULES', bad)\n")
    assert "JAXLAB_MODULES []" in stdout, stdout


def test_importing_the_core_loads_no_scipy_stats():
    """``scipy.stats`` (a third of ``import jaxlab.qlearning`` when imported at the top of
    ``core.metrics``) is imported by ``mean_and_ci`` only, on first use."""
    stdout = _loaded_after("import sys, jaxlab.core, jaxlab.qlearning, jaxlab.bco\n"
                           "print('STATS', 'scipy.stats' in sys.modules)\n")
    assert "STATS False" in stdout, stdout
