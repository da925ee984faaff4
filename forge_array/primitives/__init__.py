"""Primitives: the public generic operations on backend arrays (NumPy / CuPy).

Argument checks, dtype rules, output allocation, choice of kernel and launch shape.
Each module adds its exports here.  The kernel modules (and numba's CUDA target with them)
are imported at their first use, so that CPU arrays never load them; :func:`load_kernels`
imports them all at once (the routing seam's load of the kernel layer).
"""

import importlib

from .reductions import mapreduce, reduce  # noqa: F401
from .scan import accumulate, cumulative_prod, cumulative_sum  # noqa: F401
from .strided_copy import copy  # noqa: F401

#: the kernel modules the primitives launch from
KERNEL_MODULES = ("copy", "reduce", "rowcol", "scan", "scan.narrow", "scan.pipeline")
#: the primitives' own modules that launch them and import the kernel modules
LAUNCH_MODULES = ("reductions.launch",)


def load_kernels() -> None:
    """Import the kernel modules the primitives use (numba's CUDA target with them) and the
    primitives' launch modules."""
    for name in KERNEL_MODULES:
        importlib.import_module("forge_array.kernels." + name)
    for name in LAUNCH_MODULES:
        importlib.import_module("forge_array.primitives." + name)
