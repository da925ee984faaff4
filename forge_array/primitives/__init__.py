"""Primitives: the public generic operations on backend arrays (NumPy / CuPy).

Argument checks, dtype rules, output allocation, choice of kernel and launch shape.
Each module adds its exports here.
"""

from .copy import copy  # noqa: F401
from .reduce import mapreduce, reduce  # noqa: F401
from .scan import accumulate, cumulative_prod, cumulative_sum  # noqa: F401
