"""Primitives: the public generic operations on backend arrays (NumPy / CuPy).

Argument checks, dtype rules, output allocation, choice of kernel and launch shape, one
subpackage or module per algorithm (``reductions``, ``axis_reduce``, ``scan``, ``matvec``,
``strided_copy``, ``fused_reduce``).  The kernel modules (and numba's CUDA target with them)
are imported at their first use, so that CPU arrays never load them;
:func:`~forge_array.primitives.loading.load_kernels` imports them all at once.
"""

from .loading import load_kernels
from .reductions import mapreduce, reduce
from .scan import accumulate, cumulative_prod, cumulative_sum
from .strided_copy import copy

__all__ = ["accumulate", "copy", "cumulative_prod", "cumulative_sum", "load_kernels", "mapreduce", "reduce"]
