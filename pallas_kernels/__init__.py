"""Pallas kernels used by jaxlab (each with a pure-jnp reference and ``interpret=`` mode).

``pallas_kernels.sale``: SALE's reference, estimation and block-sparse attention kernels
for the Triton, Mosaic GPU and TPU backends (``sale.config.KernelConfig``).
"""

import os as _os

# Subpackages load from this file's real folder: under the strict editable install this
# file is a link from the build tree, and a module added to the checkout after installing
# is then found without reinstalling (a wheel's folder is its own real folder).
__path__ = [_os.path.dirname(_os.path.realpath(__file__))]
