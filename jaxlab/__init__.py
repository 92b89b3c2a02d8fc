"""jaxlab: purely functional JAX implementations of recent ML research methods.

Each method lives in its own sub-package (``jaxlab.qlearning``, ...); shared,
method-agnostic code lives in ``jaxlab.core``. A method package never imports
another method package.
"""

import os as _os

# Subpackages load from this file's real folder: under the strict editable install this
# file is a link from the build tree, and a module added to the checkout after installing
# is then found without reinstalling (a wheel's folder is its own real folder).
__path__ = [_os.path.dirname(_os.path.realpath(__file__))]

__version__ = "0.2.0"
