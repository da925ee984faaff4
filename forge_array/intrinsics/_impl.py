"""Selects the implementation of the intrinsics for this process: :mod:`.cuda_impl` (inline
PTX through numba ``@intrinsic``) on the GPU, :mod:`.sim_impl` (plain Python) under numba's
CUDA simulator (``forge_array.runtime.config.SIMULATE``).

Example
-------
>>> from forge_array.intrinsics import _impl
>>> _impl.WARP
32
"""

from __future__ import annotations

try:
    from forge_array.runtime.config import SIMULATE
except ImportError:  # pragma: no cover - the runtime is not importable
    import os

    SIMULATE = os.environ.get("FORGE_ARRAY_SIMULATE", "") == "1"

if SIMULATE:
    from .sim_impl import *  # noqa: F401,F403
    from .sim_impl import __all__  # noqa: F401
else:
    from .cuda_impl import *  # noqa: F401,F403
    from .cuda_impl import __all__  # noqa: F401
