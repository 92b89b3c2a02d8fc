"""Every quickstart (docs/_quickstart/*.rst, the README's blocks) runs from a read-only
folder with a read-only home and writes nothing: the library keeps no cache, checkpoint or
log file of its own.

Each quickstart runs as a doctest (``python -m doctest``) in a fresh interpreter whose
working directory, ``HOME``, ``XDG_CACHE_HOME`` / ``XDG_CONFIG_HOME`` and ``TMPDIR`` are
folders made read-only (mode 0o555); ``JAXLAB_CACHE_DIR`` is unset and the compilation
cache is off (``JAXLAB_COMPILATION_CACHE=0``). A root user can write to a 0o555 folder,
so the check that proves it is the second one: the three folders hold exactly what they
held before (every path, size and modification time). One dependency's cache is pointed
elsewhere: ott-jax imports matplotlib, which keeps a font list (``MPLCONFIGDIR``, a scratch
folder not checked). Doctest flags as pytest's default (``ELLIPSIS``). The seven take
60-75 s on a 2-core CPU, hence ``slow``. RFO's training line stays skipped (``+SKIP``, as
in the default doctest run; ``tests/test_readme.py``'s slow test runs it).

The static half: no module of ``jaxlab/`` calls ``print``, ``os.makedirs`` / ``mkdir``,
``os.getloadavg``, opens a file for writing or reads ``/proc`` (allowed:
``jaxlab.dllm.loading.save_params``, which writes to the path its caller names, and
``jaxlab.core.protocol``'s JSON-lines log of a caller-named ``results_path`` and its progress
lines on stderr, which ``progress=False`` turns off).
"""

import ast
import glob
import os
import shutil
import stat
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICKSTARTS = sorted(glob.glob(os.path.join(ROOT, "docs", "_quickstart", "*.rst")))


def _snapshot(root: str) -> dict:
    """{relative path: (is a folder, size, mtime_ns)} of everything under ``root``."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(folder, name)
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (stat.S_ISDIR(st.st_mode), st.st_size,
                                             st.st_mtime_ns)
    return out


# (file relative to ROOT, function) allowed to write: it writes where its caller says.
# ``protocol.compare`` appends per-item values to the file its caller names
# (``results_path``, its folder created) and reports progress on stderr unless
# ``progress=False``; ``dllm.save_denoiser`` / ``save_value_head`` write the folder named.
ALLOWED_WRITERS = {("jaxlab/dllm/loading.py", "save_params"),
                   ("jaxlab/core/protocol.py", "write"), ("jaxlab/core/protocol.py", "__call__"),
                   ("jaxlab/core/protocol.py", "__init__"), ("jaxlab/dllm/weights.py", "_save")}
MACHINE_CALLS = {"makedirs", "mkdir", "getloadavg", "getrusage", "remove", "replace",
                 "rename", "savez", "savez_compressed", "save"}


def _writer_calls(path: str):
    """(function, line, what) for each writing, printing or machine-reading call in a file."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    found = []

    def visit(node, func):
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef) else func
            if isinstance(child, ast.Name) and child.id == "print" and not (
                    isinstance(node, ast.Call) and node.func is child):
                found.append((inner, child.lineno, "print passed on"))
            if isinstance(child, ast.Call):
                f = child.func
                name = f.id if isinstance(f, ast.Name) else (
                    f.attr if isinstance(f, ast.Attribute) else "")
                if name == "print":
                    found.append((inner, child.lineno, "print"))
                elif name in MACHINE_CALLS and isinstance(f, ast.Attribute) and isinstance(
                        f.value, ast.Name) and f.value.id in ("os", "np", "resource"):
                    found.append((inner, child.lineno, f"{f.value.id}.{name}"))
                elif name == "open":
                    mode = child.args[1] if len(child.args) > 1 else next(
                        (k.value for k in child.keywords if k.arg == "mode"), None)
                    if mode is not None and not (isinstance(mode, ast.Constant)
                                                 and set(str(mode.value)) <= set("rbt")):
                        found.append((inner, child.lineno, "open for writing"))
            if isinstance(child, ast.Constant) and isinstance(child.value, str) \
                    and child.value.startswith("/proc"):
                found.append((inner, child.lineno, "/proc"))
            visit(child, inner)

    visit(tree, None)
    return found


def test_the_library_writes_prints_and_reads_the_machine_nowhere():
    bad = []
    for path in sorted(glob.glob(os.path.join(ROOT, "jaxlab", "**", "*.py"), recursive=True)):
        rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
        bad += [f"{rel}:{line} {what} (in {func})" for func, line, what in _writer_calls(path)
                if (rel, func) not in ALLOWED_WRITERS]
    assert not bad, "\n".join(bad)
    # the scan sees what it looks for: the allowed writer is found
    assert any(w == "os.makedirs" for _, _, w in
               _writer_calls(os.path.join(ROOT, "jaxlab", "dllm", "loading.py")))


def test_every_quickstart_is_checked():
    assert len(QUICKSTARTS) >= 7
    assert {os.path.basename(p) for p in QUICKSTARTS} >= {"avatar.rst", "rfo.rst"}


@pytest.mark.slow
@pytest.mark.parametrize("path", QUICKSTARTS, ids=lambda p: os.path.basename(p)[:-4])
def test_quickstart_runs_read_only_and_writes_nothing(path, tmp_path):
    home, work, tmp = (tmp_path / "home", tmp_path / "work", tmp_path / "tmp")
    for d in (home, work, tmp, tmp_path / "matplotlib"):
        d.mkdir()
    shutil.copy(path, work / "quickstart.rst")
    # No cache folder from the test run's own settings (tests/conftest.py points JAX's
    # compilation cache at the user's cache folder): the quickstart must need none.
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAXLAB_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR")}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_CONFIG_HOME=str(home / ".config"), TMPDIR=str(tmp),
               MPLCONFIGDIR=str(tmp_path / "matplotlib"),
               JAXLAB_COMPILATION_CACHE="0", PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([ROOT, *filter(None, [env.get("PYTHONPATH")])]))
    before = {d: _snapshot(str(d)) for d in (home, work, tmp)}
    for d in (home, work, tmp):
        d.chmod(0o555)
    try:
        out = subprocess.run([sys.executable, "-m", "doctest", "-o", "ELLIPSIS",
                              "quickstart.rst"], cwd=work, env=env, capture_output=True,
                             text=True, timeout=900)
    finally:
        for d in (home, work, tmp):
            d.chmod(0o755)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    for d in (home, work, tmp):
        assert _snapshot(str(d)) == before[d], f"the quickstart wrote under {d.name}/"
