"""LLVM types, the warp size and the 128-bit vector width shared by the CUDA intrinsics.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.np import numpy_support

from ..runtime.packed_words import vector_elems

WARP = 32

_i1 = ir.IntType(1)
_i8 = ir.IntType(8)
_i16 = ir.IntType(16)
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_FULL_MASK = 0xFFFFFFFF



def VEC(dtype) -> int:
    """Elements of ``dtype`` per 128-bit access (a plain Python function for factories).

    >>> VEC("float32"), VEC("float64"), VEC("uint8"), VEC("complex128")
    (4, 2, 16, 1)
    """
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    return vector_elems(dtype)


