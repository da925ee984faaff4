"""Kernels of integers within a span: which values of ``[lo, lo + size)`` occur in an array,
and each element's index among those that do — the distinct values of integer labels and
their inverse indices without a sort (:func:`forge_array.primitives.compaction.unique`), each
one grid-stride pass over contiguous 1-D memory.

- :func:`make_mark_values`: ``flags[values[i] - lo] = 1`` (threads marking one slot all
  write 1);
- :func:`make_ranks_of`: ``ranks[i] = count[values[i] - lo] - 1``, with ``count`` the
  inclusive running count of those flags (our scan).

Values are read as int64 (the caller takes this path only for values below 2**63). Bool
memory is written as uint8. The launches are planned by :mod:`forge_array.dispatch.compaction`:

>>> import numpy as np
>>> from forge_array.dispatch.compaction import mark_values
>>> mark_values(np.array([3, 5, 3]), 3, 4).tolist()   # doctest: +SKIP
[True, False, True, False]
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ..runtime import i64, ptr_t
from .reduce import buffer_dtype

__all__ = ["make_mark_values", "make_ranks_of", "mark_values_argtypes", "ranks_of_argtypes"]


def make_mark_values():
    """Kernel ``(values, lo, flags, n)``: ``flags[values[i] - lo] = 1``.

    >>> callable(make_mark_values())
    True
    """
    def mark_values(values, lo, flags, n):
        i = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = np.int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < n:
            flags[np.int64(values[i]) - lo] = 1
            i += step
    return mark_values


def make_ranks_of():
    """Kernel ``(values, lo, count, ranks, n)``: ``ranks[i] = count[values[i] - lo] - 1``.

    >>> callable(make_ranks_of())
    True
    """
    def ranks_of(values, lo, count, ranks, n):
        i = np.int64(cuda.blockIdx.x) * cuda.blockDim.x + cuda.threadIdx.x
        step = np.int64(cuda.gridDim.x) * cuda.blockDim.x
        while i < n:
            ranks[i] = count[np.int64(values[i]) - lo] - 1
            i += step
    return ranks_of


def mark_values_argtypes(dtype):
    """numba types of :func:`make_mark_values`' arguments for values of integer ``dtype``.

    >>> len(mark_values_argtypes("int64"))
    4
    """
    return (ptr_t(buffer_dtype(dtype)), i64, ptr_t(np.uint8), i64)


def ranks_of_argtypes(dtype):
    """numba types of :func:`make_ranks_of`' arguments for values of integer ``dtype``.

    >>> len(ranks_of_argtypes("int32"))
    5
    """
    return (ptr_t(buffer_dtype(dtype)), i64, ptr_t(np.int64), ptr_t(np.int64), i64)
