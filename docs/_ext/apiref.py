"""The API reference, generated from each package's ``__all__``: ``.. apiref:: jaxlab.bco``.

The directive documents a package: its docstring, one entry per name in its ``__all__``,
then one section per public submodule (a module named in the package's ``__all__``) with
the submodule's docstring and one entry per name in *its* ``__all__``. Nothing is
hand-picked, so a name added to ``__all__`` is in the reference and an internal left out of
``__all__`` is not.

Each object is described once, at its canonical name: the first place it appears when the
packages of ``apiref_packages`` (docs/conf.py) are walked in order, the package before its
submodules. Every other public name of the same object gets a short entry of its own (an
anchor, so every public name can be linked) that points to the canonical one. A class
exported under another name than its own (``bco.State`` for ``learners.BanditState``) is
rendered from its docstring under the exported name (autodoc would print "alias of"
instead); objects from other libraries (``core.types.Array`` is ``jax.Array``) and
constants are ``py:data`` entries with their value.

``entries(packages)`` and ``rst(packages, package)`` are what the directive renders; the
tests read them without building the docs.
"""

import importlib
import inspect
import re
import sys
import types
from typing import NamedTuple

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

OURS = ("jaxlab", "pallas_kernels")
_MAX_VALUE = 80  # longer reprs are left out of a constant's entry


class Entry(NamedTuple):
    """One public name: ``module.name`` is what it documents.

    Attributes:
      module: the namespace whose ``__all__`` lists the name ("jaxlab.bco.losses").
      name: the name in that ``__all__``.
      kind: "module", "class", "function" or "data".
      canonical: the full name of the entry that describes the object, or None when this
        entry is that one.
    """

    module: str
    name: str
    kind: str
    canonical: str | None


def public_names(module_name: str) -> list[str]:
    """The ``__all__`` of ``module_name`` (a ValueError if it has none)."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        raise ValueError(f"apiref: {module_name} has no __all__")
    return list(names)


def public_modules(package: str) -> list[str]:
    """``package`` and its public submodules (modules named in its ``__all__``), in order."""
    pkg = importlib.import_module(package)
    subs = [f"{package}.{n}" for n in public_names(package)
            if isinstance(getattr(pkg, n), types.ModuleType)]
    return [package, *subs]


def _ours(obj) -> bool:
    return (getattr(obj, "__module__", None) or "").split(".")[0] in OURS


def _kind(obj) -> str:
    if isinstance(obj, types.ModuleType):
        return "module"
    if inspect.isclass(obj) and _ours(obj):
        return "class"
    if callable(obj) and not inspect.isclass(obj) and _ours(obj):
        return "function"
    return "data"


def _key(name: str, obj):
    # Constants are matched by name as well: equal small values are not the same constant.
    return (id(obj), name) if _kind(obj) == "data" else id(obj)


def entries(packages) -> list[Entry]:
    """Every public name of ``packages`` and of their public submodules, in page order."""
    out, seen = [], {}
    for package in packages:
        for mod_name in public_modules(package):
            module = importlib.import_module(mod_name)
            for name in public_names(mod_name):
                if not hasattr(module, name):
                    raise ValueError(f"apiref: {mod_name}.__all__ names {name!r}, "
                                     "which the module does not define")
                obj = getattr(module, name)
                kind = _kind(obj)
                if kind == "module":
                    canonical = None
                else:
                    canonical = seen.setdefault(_key(name, obj), f"{mod_name}.{name}")
                    canonical = None if canonical == f"{mod_name}.{name}" else canonical
                out.append(Entry(mod_name, name, kind, canonical))
    return out


_LITERAL = re.compile(r"(``.*?``|`[^`]*`)")


def escape_bars(lines: list[str]) -> list[str]:
    """Escapes ``|`` in docstring prose, where ``|x|`` means an absolute value or a norm.

    reStructuredText reads ``|x|`` as a substitution; the docstrings are written as plain
    text for ``help()``, so the bars are escaped outside literals, interpreted text,
    literal blocks (after ``::``), doctest lines and grid-table rows.
    """
    out, block_indent = [], None
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if block_indent is not None and line.strip() and indent <= block_indent:
            block_indent = None
        stripped = line.strip()
        table_row = stripped.startswith("+") or (stripped[:1] == "|" == stripped[-1:])
        if (block_indent is not None or stripped.startswith((">>>", "...")) or table_row
                or "|" not in line):
            out.append(line)
        else:
            parts = _LITERAL.split(line)
            out.append("".join(p if i % 2 else p.replace("|", r"\|")
                               for i, p in enumerate(parts)))
        if block_indent is None and stripped.endswith("::"):
            block_indent = indent
    return out


def _escape_docstring(app, what, name, obj, options, lines):
    lines[:] = escape_bars(lines)


def _indent(lines, by="   "):
    return [by + ln if ln.strip() else "" for ln in lines]


def _attr_doc(module, name, obj) -> list[str]:
    """The ``#:`` comment or docstring of a constant, from the module that assigns it."""
    from sphinx.pycode import ModuleAnalyzer

    candidates = [module.__name__] + sorted(
        m for m, mod in list(sys.modules.items())
        if m.startswith(module.__name__.split(".")[0] + ".") and mod is not None
        and getattr(mod, name, None) is obj and m != module.__name__)
    for mod_name in candidates:
        try:
            docs = ModuleAnalyzer.for_module(mod_name).find_attr_docs()
        except Exception:  # noqa: BLE001 - no source: no comment
            continue
        if ("", name) in docs:
            return [ln for ln in docs[("", name)] if ln is not None]
    return []


def _napoleon(config, obj, full_name, what) -> list[str]:
    from sphinx.ext.napoleon.docstring import GoogleDocstring

    doc = inspect.getdoc(obj) or ""
    return escape_bars(GoogleDocstring(doc, config, None, what, full_name).lines())


def _render(entry: Entry, config=None) -> list[str]:
    module = importlib.import_module(entry.module)
    obj = getattr(module, entry.name)
    full = f"{entry.module}.{entry.name}"
    if entry.canonical is not None:
        # A class stays a class; anything else is a plain name (no argument list to show).
        directive = "class" if entry.kind == "class" else "data"
        role = {"class": "class", "function": "func"}.get(entry.kind, "data")
        return [f".. py:{directive}:: {entry.name}", f"   :module: {entry.module}", "",
                f"   The same object as :py:{role}:`{entry.canonical}`.", ""]
    if entry.kind == "function":
        return [f".. autofunction:: {full}", ""]
    if entry.kind == "class" and obj.__name__ == entry.name:
        return [f".. autoclass:: {full}", "   :members:", ""]
    if entry.kind == "class":  # exported under another name: render its docstring here
        try:  # field names and defaults; the docstring gives the shapes
            sig = inspect.signature(obj)
            sig = str(sig.replace(
                parameters=[p.replace(annotation=p.empty) for p in sig.parameters.values()],
                return_annotation=sig.empty))
        except (TypeError, ValueError):
            sig = ""
        body = _napoleon(config, obj, full, "class") if config is not None else []
        return [f".. py:class:: {entry.name}{sig}", f"   :module: {entry.module}", "",
                *_indent(body), ""]
    # data: a constant, a type alias or another library's object
    lines = [f".. py:data:: {entry.name}", f"   :module: {entry.module}"]
    if _ours(obj) or not (inspect.isclass(obj) or inspect.isroutine(obj)):
        value = repr(obj).replace("\n", " ")
        if len(value) <= _MAX_VALUE:
            lines.append(f"   :value: {value}")
        body = _attr_doc(module, entry.name, obj)
    else:
        origin = f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"
        body = [f"``{origin.lstrip('.')}``."]
    return [*lines, "", *_indent(body), ""]


def rst(packages, package: str, config=None) -> str:
    """The reStructuredText that ``.. apiref:: package`` renders (``config``: Sphinx's,
    for the napoleon rendering of classes exported under another name)."""
    if package not in packages:
        raise ValueError(f"apiref: {package} is not in apiref_packages")
    mods = public_modules(package)
    listed = entries(packages)
    lines = [f".. automodule:: {package}", ""]
    for mod_name in mods:
        if mod_name != package:
            title = f"``{mod_name}``"
            lines += [title, "~" * len(title), "", f".. automodule:: {mod_name}", ""]
        for entry in listed:
            if entry.module == mod_name and entry.kind != "module":
                lines += _render(entry, config)
    return "\n".join(lines) + "\n"


class ApiRef(SphinxDirective):
    """``.. apiref:: jaxlab.bco``: the package's reference from its ``__all__``."""

    required_arguments = 1
    has_content = False

    def run(self):
        package = self.arguments[0]
        text = rst(self.config.apiref_packages, package, self.config)
        for mod_name in public_modules(package):
            module = importlib.import_module(mod_name)
            if getattr(module, "__file__", None):
                self.env.note_dependency(module.__file__)
        holder = nodes.section()
        holder.document = self.state.document
        nested_parse_with_titles(self.state, StringList(text.splitlines(), source="apiref"),
                                 holder)
        return holder.children


def setup(app):
    app.add_config_value("apiref_packages", [], "env")
    app.add_directive("apiref", ApiRef)
    app.connect("autodoc-process-docstring", _escape_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
