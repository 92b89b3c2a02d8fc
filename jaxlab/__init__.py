"""jaxlab: purely functional JAX implementations of recent ML research methods.

Each method lives in its own sub-package (``jaxlab.qlearning``, ...); shared,
method-agnostic code lives in ``jaxlab.core``. A method package never imports
another method package.
"""

__version__ = "0.2.0"
