"""The kernel argument types: numba types of scalars, buffers (``CPointer``) and tuples of
buffers (struct-of-arrays), memoised, and the scalar aliases the kernel modules use.  A
kernel source (:data:`.kernel_sources.KERNEL_SOURCES`): kernel code is typed with these.

>>> ptr_t("float32")
float32*
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types as nt

from .caches import Cache

__all__ = ["numba_type", "ptr_t", "tuple_ptr_t", "i64", "i32", "u64", "u32", "f64", "f32"]



_TYPES = Cache("runtime.kernel_types.TYPES")


def _memo(kind, key, make):
    """Memoised type construction: building numba types costs microseconds per call, which
    the launch path of every primitive would otherwise pay."""
    try:
        return _TYPES[kind, key]
    except KeyError:
        t = _TYPES[kind, key] = make(key)
        return t
    except TypeError:  # unhashable key
        return make(key)


def numba_type(dtype):
    """The numba scalar type of a NumPy dtype (``numba_type("float32") -> float32``)."""
    return _memo("scalar", dtype, lambda d: numba.from_dtype(np.dtype(d)))


def ptr_t(dtype):
    """Kernel argument type of a buffer of ``dtype``: ``CPointer(dtype)``."""
    return _memo("ptr", dtype, lambda d: nt.CPointer(numba_type(d)))


def tuple_ptr_t(dtypes):
    """Kernel argument type of a tuple of buffers (struct-of-arrays)."""
    return _memo("tuple", tuple(dtypes), lambda ds: nt.Tuple(tuple(ptr_t(d) for d in ds)))


i64, i32, u64, u32, f64, f32 = nt.int64, nt.int32, nt.uint64, nt.uint32, nt.float64, nt.float32
