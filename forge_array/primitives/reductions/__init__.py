"""Generic reductions on backend arrays (NumPy / CuPy): ``reduce``, ``mapreduce`` and the
specific reductions of the namespace (sum, prod, max, min, mean, var, std, any, all,
argmax, argmin).

Full reductions run in one launch of :mod:`forge_array.kernels.reduce` when
``runtime.kernels_available(x)``; reductions over some axes go to the axis kernels
(:mod:`forge_array.primitives.axis_reduce`) when present; otherwise NumPy / CuPy compute
the named reductions and numba on the CPU the generic ones.

Elements are scalars or tuples: pass a tuple of arrays (struct-of-arrays) and get a tuple
of arrays back.  The result type of a generic reduction is the operator's result type as
numba infers it.

>>> import numpy as np
>>> from forge_array import ops
>>> from forge_array.primitives.reductions import reduce, mapreduce
>>> x = np.arange(1.0, 5.0)
>>> float(reduce(ops.add, x))
10.0
>>> float(mapreduce(lambda v: v * v, ops.add, x))      # sum of squares, no temporary
30.0
>>> lo, hi = mapreduce(lambda v: (v, v), ops.minmax, x)   # min and max in one pass
>>> float(lo), float(hi)
(1.0, 4.0)
"""

from ...dispatch.axis_reduce import axis_fast
from ...dispatch.reduce import full_fast, mapreduce_fast
from .arguments import normalize_axis
from .generic import mapreduce, reduce
from .named import all, any, argmax, argmin, max, mean, min, prod, std, sum, var

__all__ = [
    "reduce",
    "mapreduce",
    "sum",
    "prod",
    "max",
    "min",
    "mean",
    "var",
    "std",
    "any",
    "all",
    "argmax",
    "argmin",
    "normalize_axis",
    "full_fast",
    "axis_fast",
    "mapreduce_fast",
]
