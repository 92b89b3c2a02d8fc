"""Sphinx configuration of the jaxlab API reference.

Build (warnings are errors, as in CI):

    .venv/bin/python -m sphinx -W --keep-going -b html docs /tmp/jaxlab_docs
"""

import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "jaxlab"
author = "jaxlab contributors"
copyright = "2026, jaxlab contributors"  # noqa: A001 - Sphinx's name
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.viewcode"]
exclude_patterns = ["_build"]
html_theme = "alabaster"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": False}
# NamedTuple fields get a one-line docstring from collections ("Alias for field number
# N"); the class docstrings' Attributes sections document them instead.
autodoc_inherit_docstrings = False
napoleon_use_ivar = True
