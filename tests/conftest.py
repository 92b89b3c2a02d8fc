import os

# Tests run on the CPU (interpret-mode kernels included), whatever the machine has.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
