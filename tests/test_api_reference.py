"""The API reference is generated from ``__all__``, and the docs use only public names.

* every ``jaxlab.*`` / ``pallas_kernels.*`` name that the code of README.md and
  docs/**/*.rst uses (``>>>`` lines and code blocks: imports, aliases such as ``ql`` or
  ``ev``, dotted names) is in its module's ``__all__``, and none starts with ``_``;
* every name of every ``__all__`` (the packages of ``apiref_packages`` in docs/conf.py and
  their public submodules) is an entry of the generated reference: in the reStructuredText
  the ``apiref`` directive renders (fast) and, after a build, as an anchor of the HTML;
* no namespace exports one object under two names, and no experiment-config validator is
  public;
* the RFO task list of the package docstring and of the guide is ``rfo.task_names()``.
"""

import ast
import glob
import importlib
import os
import re
import runpy
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
ROOTS = ("jaxlab", "pallas_kernels")

sys.path.insert(0, os.path.join(DOCS, "_ext"))
import apiref  # noqa: E402 - docs/_ext is not a package

PACKAGES = runpy.run_path(os.path.join(DOCS, "conf.py"))["apiref_packages"]


def _is_dunder(name):
    return name.startswith("__") and name.endswith("__")


# -- the code of README.md and docs/**/*.rst -------------------------------------------


def _code_lines(path):
    """The code lines of a page: doctest lines (prompt removed), literal blocks after
    ``::`` / ``.. code-block::`` in .rst, fenced blocks in .md."""
    with open(path) as f:
        lines = f.read().splitlines()
    out, block_indent, fenced = [], None, False
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if path.endswith(".md") and stripped.startswith("```"):
            fenced = not fenced
            continue
        if block_indent is not None and stripped and indent <= block_indent:
            block_indent = None
        if stripped.startswith((">>> ", "... ")) or stripped in (">>>", "..."):
            out.append(stripped[4:])
        elif fenced or (block_indent is not None and stripped):
            out.append(stripped)
        if (not path.endswith(".md") and block_indent is None
                and (stripped.endswith("::") or re.match(r"\.\. code(-block)?::", stripped))):
            block_indent = indent
    return out


def _pages():
    pages = [os.path.join(ROOT, "README.md")]
    pages += sorted(glob.glob(os.path.join(DOCS, "**", "*.rst"), recursive=True))
    return pages


_FROM = re.compile(r"^from\s+([\w.]+)\s+import\s+(.+)$")
_IMPORT = re.compile(r"^import\s+(.+)$")
_CHAIN = re.compile(r"(?<![\w./])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)")


def uses(path):
    """``(module, name, text)`` for every jaxlab / pallas_kernels name the page's code uses:
    ``from m import a`` is (m, a) and m's own path as below; ``alias.a.b`` with alias bound
    to module m is (m, a) and, if ``m.a`` is a module, (m.a, b); ``jaxlab.m.a`` is
    (jaxlab, m), then likewise from the package m."""
    aliases = {}  # local name -> module path
    found = []
    for line in _code_lines(path):
        for stmt in line.split(";"):
            stmt = stmt.split("#")[0].strip()
            m = _FROM.match(stmt)
            if m and m.group(1).split(".")[0] in ROOTS:
                module = m.group(1)
                found.extend(_dotted(module, stmt))  # the module itself is public
                for part in m.group(2).strip("() ").split(","):
                    if not part.strip():
                        continue
                    name, _, alias = (p.strip() for p in part.strip().partition(" as "))
                    found.append((module, name, stmt))
                    if _is_module(module, name):
                        aliases[alias or name] = f"{module}.{name}"
                continue
            m = _IMPORT.match(stmt)
            if m:
                for part in m.group(1).split(","):
                    target, _, alias = (p.strip() for p in part.strip().partition(" as "))
                    if target.split(".")[0] in ROOTS:
                        found.extend(_dotted(target, stmt))
                        if alias:
                            aliases[alias] = target
                continue
            for chain in _CHAIN.findall(stmt):
                head, *rest = chain.split(".")
                if head in aliases:
                    found.extend(_chain(aliases[head], rest, stmt))
                elif head in ROOTS:
                    found.extend(_dotted(chain, stmt))
    return found


def _is_module(module, name):
    """Whether ``from module import name`` binds a module (a package's attribute wins over
    a submodule file of the same name, as in ``jaxlab.attention.attention``)."""
    obj = getattr(importlib.import_module(module), name, None)
    if obj is None:
        try:
            obj = importlib.import_module(f"{module}.{name}")
        except ImportError:
            return False
    return isinstance(obj, types.ModuleType)


def _dotted(chain, text):
    """``jaxlab.m.a...``: the package ``jaxlab.m`` is one of the documented packages."""
    parts = chain.split(".")
    if len(parts) < 2 or _is_dunder(parts[1]):
        return []
    package = ".".join(parts[:2])
    found = [(parts[0], parts[1], text)]  # checked against apiref_packages
    return found + _chain(package, parts[2:], text)


def _chain(module, rest, text):
    found = []
    for name in rest:
        if _is_dunder(name):
            break
        found.append((module, name, text))
        if not _is_module(module, name):
            break
        module = f"{module}.{name}"
    return found


def _check_use(module, name):
    if module in ROOTS:
        return f"{module}.{name}" in PACKAGES
    mod = importlib.import_module(module)
    return name in getattr(mod, "__all__", ())


def test_uses_parses_the_forms_the_docs_use(tmp_path):
    """The parser sees imports, aliases, dotted names and private names (a check of the
    check: the page below uses one name of each form, two of them wrongly)."""
    page = tmp_path / "page.rst"
    page.write_text(
        "Text with jaxlab.bco.nothing in prose (not code).\n\n"
        ">>> import jax; from jaxlab import qlearning as ql; from jaxlab.dllm import "
        "evaluation as ev\n"
        ">>> from jaxlab.attention import attention, attention_sizes as sizes\n"
        ">>> mdp = ql.make_mdp(P, R, gamma=0.9); s = ql.schedules.stack([])\n"
        "... ev.pass_at_n(c) + jaxlab.gepc.ood.auroc_with_ci(k)\n"
        ">>> ql.periodic_q._private(1); ql.build_kernel(mdp)\n\n"
        "Example::\n\n    import jaxlab.bco as b\n    b.losses.fixed_comparator_loss(seq, d)\n\n"
        "After the block: jaxlab.gepc.not_code\n")
    got = {(m, n) for m, n, _ in uses(str(page))}
    assert got == {
        ("jaxlab.qlearning", "make_mdp"), ("jaxlab.qlearning", "schedules"),
        ("jaxlab.qlearning.schedules", "stack"), ("jaxlab.dllm", "evaluation"),
        ("jaxlab.dllm.evaluation", "pass_at_n"), ("jaxlab.attention", "attention"),
        ("jaxlab.attention", "attention_sizes"), ("jaxlab", "gepc"), ("jaxlab.gepc", "ood"),
        ("jaxlab.gepc.ood", "auroc_with_ci"), ("jaxlab.qlearning", "periodic_q"),
        ("jaxlab.qlearning.periodic_q", "_private"), ("jaxlab.qlearning", "build_kernel"),
        ("jaxlab", "bco"), ("jaxlab.bco", "losses"), ("jaxlab", "qlearning"), ("jaxlab", "dllm"),
        ("jaxlab", "attention"),
        ("jaxlab.bco.losses", "fixed_comparator_loss")}, got
    bad = sorted((m, n) for m, n, _ in uses(str(page)) if not _check_use(m, n))
    assert bad == [("jaxlab.qlearning", "build_kernel"), ("jaxlab.qlearning", "periodic_q"),
                   ("jaxlab.qlearning.periodic_q", "_private")], bad


@pytest.mark.parametrize("path", _pages(), ids=lambda p: os.path.relpath(p, ROOT))
def test_docs_code_uses_only_public_names(path):
    """Every jaxlab / pallas_kernels name in the page's code is in its module's
    ``__all__`` (so it is in the reference), and none is private."""
    found = uses(path)
    private = [(m, n, t) for m, n, t in found
               if n.startswith("_") or any(p.startswith("_") for p in m.split("."))]
    assert not private, private
    missing = [(m, n, t) for m, n, t in found if not _check_use(m, n)]
    assert not missing, missing


def test_the_quickstarts_are_parsed():
    """The guides' own-problem names are seen (so the test above checks something)."""
    seen = {(m, n) for p in _pages() for m, n, _ in uses(p)}
    for pair in [("jaxlab.bco", "loss_sequence"), ("jaxlab.bco.losses", "fixed_comparator_loss"),
                 ("jaxlab.gepc.ood", "auroc_with_ci"), ("jaxlab.dllm", "smc_decode"),
                 ("jaxlab.dllm.evaluation", "particle_correctness"),
                 ("jaxlab.dllm.evaluation", "pass_at_n"), ("jaxlab.rfo", "new_task"),
                 ("jaxlab.rfo", "load_mjcf"), ("jaxlab.attention", "attention_sizes"),
                 ("jaxlab.qlearning", "make_mdp"), ("jaxlab.qlearning.schedules", "stack")]:
        assert pair in seen, pair


# -- the generated reference -------------------------------------------------------------


def _package_dirs():
    out = []
    for root in ROOTS:
        for init in sorted(glob.glob(os.path.join(ROOT, root, "*", "__init__.py"))):
            out.append(f"{root}.{os.path.basename(os.path.dirname(init))}")
    return out


def _namespaces():
    return [m for p in PACKAGES for m in apiref.public_modules(p)]


def test_every_package_has_one_generated_reference():
    """Every package of jaxlab/ and pallas_kernels/ is in ``apiref_packages`` and its page
    has exactly one ``.. apiref::`` directive for it."""
    assert sorted(PACKAGES) == sorted(_package_dirs()), (PACKAGES, _package_dirs())
    directives = []
    for page in glob.glob(os.path.join(DOCS, "*.rst")):
        with open(page) as f:
            directives += re.findall(r"^\.\. apiref:: (\S+)$", f.read(), re.M)
    assert sorted(directives) == sorted(PACKAGES), directives


def test_every_public_name_is_listed_by_the_reference_source():
    """Each name of each ``__all__`` has an entry (and an anchor) in the reStructuredText
    the directive renders; only the names of ``__all__`` do."""
    for package in PACKAGES:
        text = apiref.rst(PACKAGES, package)
        anchors = set(re.findall(r"^\.\. auto(?:function|class):: (\S+)$", text, re.M))
        anchors |= {f"{mod}.{name}" for name, mod in re.findall(
            r"^\.\. py:\w+:: (\w+)(?:\(.*\))?\n   :module: (\S+)$", text, re.M)}
        modules = set(re.findall(r"^\.\. automodule:: (\S+)$", text, re.M))
        expected, expected_modules = set(), set()
        for mod_name in apiref.public_modules(package):
            module = importlib.import_module(mod_name)
            for name in module.__all__:
                if isinstance(getattr(module, name), types.ModuleType):
                    expected_modules.add(f"{mod_name}.{name}")
                else:
                    expected.add(f"{mod_name}.{name}")
        assert anchors == expected, (package, sorted(anchors ^ expected))
        assert modules == expected_modules | {package}, (package, modules)


def test_each_object_is_described_once():
    """One full description per object; its other public names point to it."""
    listed = apiref.entries(PACKAGES)
    full = {}
    for e in listed:
        if e.kind in ("class", "function") and e.canonical is None:
            obj = getattr(importlib.import_module(e.module), e.name)
            assert id(obj) not in full, (e, full.get(id(obj)))
            full[id(obj)] = f"{e.module}.{e.name}"
    names = {f"{e.module}.{e.name}" for e in listed}
    assert all(e.canonical in names for e in listed if e.canonical), "dangling pointer"


def test_all_lists_public_names_once():
    """Every ``__all__`` name exists, none is private, no namespace exports one of our
    objects under two names (constants and type aliases such as ``PRNGKey`` for
    ``jax.Array`` aside), and no experiment-config validator is public."""
    for mod_name in _namespaces():
        module = importlib.import_module(mod_name)
        names = module.__all__
        assert len(names) == len(set(names)), mod_name
        assert all(hasattr(module, n) and not n.startswith("_") for n in names), mod_name
        objs = {}
        for n in names:
            obj = getattr(module, n)
            if isinstance(obj, types.ModuleType) or (apiref._ours(obj) and callable(obj)):
                assert id(obj) not in objs, f"{mod_name}: {n} is {objs.get(id(obj))}"
                objs[id(obj)] = n
        assert "validate_config" not in names, mod_name


def test_public_submodules_define_all():
    """Every module named in a package's ``__all__`` defines its own ``__all__``."""
    for package in PACKAGES:
        pkg = importlib.import_module(package)
        for name in pkg.__all__:
            obj = getattr(pkg, name)
            if isinstance(obj, types.ModuleType):
                assert "__all__" in vars(obj), f"{package}.{name}"


@pytest.mark.heavy
def test_reference_is_built_from_all(tmp_path):
    """The docs build without warnings and the HTML has an anchor for every public name
    of every namespace; ``load_mjcf`` shows its real signature."""
    from sphinx.cmd.build import build_main

    out = tmp_path / "html"
    rc = build_main(["-E", "-W", "--keep-going", "-q", "-b", "html", DOCS, str(out)])
    assert rc == 0
    pages = {p.name: p.read_text() for p in out.glob("*.html")}
    ids = set()
    for text in pages.values():
        ids |= set(re.findall(r'id="([^"]+)"', text))
    missing = []
    for mod_name in _namespaces():
        module = importlib.import_module(mod_name)
        if f"module-{mod_name}" not in ids:
            missing.append(mod_name)
        missing += [f"{mod_name}.{n}" for n in module.__all__
                    if not isinstance(getattr(module, n), types.ModuleType)
                    and f"{mod_name}.{n}" not in ids]
    assert not missing, missing
    rfo_page = pages["rfo.html"]
    entry = rfo_page[rfo_page.index('id="jaxlab.rfo.load_mjcf"'):][:3000]
    assert "require_bodies" in entry


# -- documentation drift -------------------------------------------------------------------


def _listed_tasks(text):
    m = re.search(r"task_names\(\)``\s*\(built in: ([^)]*)\)", text)
    assert m, "no task list after task_names()"
    return re.findall(r"``(\w+)``", m.group(1))


def test_rfo_task_lists_are_task_names():
    """The package docstring and the guide list the built-in tasks, as
    ``rfo.task_names()`` returns them before any task is registered."""
    rfo = pytest.importorskip("jaxlab.rfo")
    with open(os.path.join(ROOT, "jaxlab", "rfo", "__init__.py")) as f:
        docstring = ast.get_docstring(ast.parse(f.read()))
    with open(os.path.join(DOCS, "rfo.rst")) as f:
        guide = f.read()
    built_in = list(rfo.TASK_NAMES)
    assert set(built_in) <= set(rfo.task_names())
    assert _listed_tasks(docstring) == built_in
    assert _listed_tasks(" ".join(guide.split())) == built_in
    assert "load_mjcf(" not in guide  # the signature is autodoc's (the API section)
