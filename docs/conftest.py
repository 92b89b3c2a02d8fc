"""Doctest set-up of docs/*.rst: mujoco.mjx prints "Failed to import warp" when its optional
GPU backend is absent; it is imported here, quietly, so the RFO examples' output is theirs."""

import contextlib
import io

with contextlib.redirect_stdout(io.StringIO()):
    try:
        import mujoco.mjx.warp  # noqa: F401
    except ImportError:
        pass
