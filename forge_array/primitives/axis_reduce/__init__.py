"""Reductions along any axes of any strided view, on the row / column kernels.

Signature (used by :mod:`forge_array.primitives.reductions` and :mod:`.matvec`)::

    axis_mapreduce(f, op, arrays, axis, init, keepdims, out_dtype, *, index=False)

- ``f``: ``f(e_0, ..., e_{K-1})`` of one element of each array (an element of a tuple of
  arrays is a tuple), or None (identity for one array, the tuple of the elements for
  several); with ``index=True`` ``f`` also receives the position of the element in the
  reduced axes (C order over them, as ``numpy.argmax`` along one axis).
- ``op``: an :class:`forge_array.ops.Operator` or a Python function, associative and
  commutative (the kernels combine lanes' strided partial results).
- ``arrays``: tuple of ``K <= 3`` backend arrays (NumPy or CuPy; one device), or tuples of
  them (struct-of-arrays); all of one shape (broadcast views with zero strides are fine).
- ``axis``: None, an int or a tuple of ints (negative allowed).
- ``init``: None, or a value combined once into every result (``op(init, total)``); it is
  also the result of an empty reduction. Without ``init`` the identity of ``op`` is used
  (``ops`` operators have one); an operator without identity needs ``init`` for empty
  reductions, and otherwise costs a flag per value.
- ``out_dtype``: accumulator and result dtype, or a tuple of dtypes for tuple values
  (the result is then a tuple of arrays).

Kept axes become the kernels' output rows (collapsed where the strides of every operand
allow, at most two dims, more are looped on the host), reduced axes the reduction index
(collapsed, at most two dims in the kernel, more are made contiguous). Negative strides
are flipped (views, not copies). The row kernel runs when the smallest stride of the
first array is along a reduced axis, the column kernel otherwise.

Example
-------
>>> import numpy as np
>>> from forge_array import ops
>>> x = np.arange(12.0).reshape(3, 4)
>>> axis_mapreduce(None, ops.add, (x,), 0, None, False, np.dtype("float64")).tolist()
[12.0, 15.0, 18.0, 21.0]
>>> axis_mapreduce(lambda v: v * v, ops.add, (x,), (1,), None, True, np.dtype("float64")).tolist()
[[14.0], [126.0], [366.0]]
"""

from .arguments import normalize_axes
from .mapreduce import argmax, argmin, axis_mapreduce

__all__ = ["axis_mapreduce", "argmax", "argmin", "normalize_axes"]
