"""The load of the kernel layer: :func:`load_kernels` imports the kernel modules the primitives
launch from (numba's CUDA target with them) and the dispatch modules that launch them, at once: the
routing seam's load of the kernel layer (they are otherwise imported at their first use, so
that CPU arrays never load them).
"""

import importlib

#: the kernel modules the primitives launch from
KERNEL_MODULES = ("copy", "reduce", "rowcol", "scan", "scan.narrow", "scan.pipeline")
#: the dispatch modules that launch them and import the kernel modules
LAUNCH_MODULES = ("reduce",)


def load_kernels() -> None:
    """Import the kernel modules the primitives use (numba's CUDA target with them) and the
    dispatch modules that launch them.

    >>> from forge_array.primitives.loading import KERNEL_MODULES
    >>> "reduce" in KERNEL_MODULES
    True
    """
    for name in KERNEL_MODULES:
        importlib.import_module("forge_array.kernels." + name)
    for name in LAUNCH_MODULES:
        importlib.import_module("forge_array.dispatch." + name)
