"""Scans on backend arrays: generic ``accumulate`` and ``cumulative_sum`` / ``cumulative_prod``.

On our kernels (:mod:`forge_array.kernels.scan`, single pass with decoupled look-back) when
``runtime.kernels_available(x)``; otherwise NumPy (``cumsum`` / ufunc ``accumulate``) or a
numba loop on the CPU for generic operators.

Example
-------
>>> import numpy as np
>>> from forge_array import ops
>>> from forge_array.primitives import accumulate, cumulative_sum
>>> cumulative_sum(np.array([1, 2, 3], dtype=np.int32), include_initial=True).tolist()
[0, 1, 3, 6]
>>> a, b = np.array([0.5, 0.5, 0.5]), np.array([1.0, 1.0, 1.0])
>>> accumulate(ops.affine, (a, b))[1].tolist()      # h_t = 0.5 h_(t-1) + 1, h_(-1) = 0
[1.0, 1.5, 1.75]
"""

from ...dispatch.scan import scan_statistics
from .cumulative import cumulative_fast, cumulative_mapped, cumulative_prod, cumulative_sum, mapped_launch
from .generic import accumulate, accumulate_fast

__all__ = ["accumulate", "accumulate_fast", "cumulative_sum", "cumulative_prod", "cumulative_mapped", "mapped_launch",
           "cumulative_fast", "scan_statistics"]
