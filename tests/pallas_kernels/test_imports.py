"""pallas_kernels is standalone: importing it never loads jaxlab."""

import os
import subprocess
import sys


def test_importing_pallas_kernels_loads_no_jaxlab_module():
    code = ("import sys, pkgutil, importlib, pallas_kernels, pallas_kernels.sale\n"
            "for m in pkgutil.walk_packages(pallas_kernels.__path__, 'pallas_kernels.'):\n"
            "    importlib.import_module(m.name)\n"
            "bad = sorted(m for m in sys.modules if m == 'jaxlab' or m.startswith('jaxlab.'))\n"
            "assert 'pallas_kernels.sale.block_sparse_attention_tpu' in sys.modules\n"
            "print('JAXLAB_MODULES', bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"}, cwd=_root(), timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "JAXLAB_MODULES []" in out.stdout, out.stdout


def _root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
