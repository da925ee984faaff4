"""The full reduction's specification and parameters, without numba: what the dispatch tier
plans with (:mod:`forge_array.dispatch.reduce`) and the kernel factory
(:mod:`forge_array.kernels.reduce`) specialises on.

>>> from forge_array import ops
>>> spec = ReduceSpec(op=ops.add.fn, acc_dtypes=("float32",), identity=(0.0,))
>>> kernel_argtypes(spec, ("float32",), MODE_VEC, 1)
(float32*, int64, int64, float32*, uint8*, uint32*, float32*, float64)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..runtime.param_types import F64, I64, ptr

__all__ = ["ReduceSpec", "kernel_argtypes", "MAX_DIMS", "MODE_VEC", "MODE_FLAT", "MODE_STRIDED", "buffer_dtype",
           "spec_name"]

#: Largest number of (collapsed) dimensions of the strided path.
MAX_DIMS = 4

MODE_VEC = "vec"  # contiguous, 128-bit loads
MODE_FLAT = "flat"  # contiguous, scalar loads (complex, mixed alignment)
MODE_STRIDED = "strided"  # any view, up to MAX_DIMS collapsed dims


class ReduceSpec(NamedTuple):
    """The compile-time description of a full reduction (hashable; part of the cache key).

    ``struct`` gives, per operand of ``f``, 0 for a scalar array or k for a tuple of k
    arrays (struct-of-arrays); ``None`` means one scalar operand per array.  ``f`` is None
    for the identity map (one operand) or the tuple of operands.  ``with_index`` passes the
    element's flat C-order index to ``f`` as the last argument.  ``acc_dtypes`` are the
    component dtypes of the accumulator (one for a scalar accumulator, ``acc_tuple`` False).
    ``identity`` is a tuple of Python scalars (one per component) or None (a validity flag
    is then carried).  ``post(total, param)`` finishes the result (``param`` is a float64
    runtime argument); ``out_dtypes`` are its component dtypes (default: the accumulator's).
    ``commutative`` False keeps operands in order (chunked layout).
    """

    op: object
    acc_dtypes: tuple
    identity: tuple | None = None
    f: object = None
    struct: tuple | None = None
    with_index: bool = False
    acc_tuple: bool = False
    post: object = None
    out_dtypes: tuple | None = None
    out_tuple: bool = False
    commutative: bool = True
    has_init: bool = False


def buffer_dtype(dt):
    """dtype of the memory holding values of ``dt`` (bool is stored as uint8: numba
    cannot store an i1 through a bool pointer)."""
    return np.dtype(np.uint8) if np.dtype(dt).kind == "b" else np.dtype(dt)


def spec_name(spec) -> str:
    """A short readable name of a spec for error messages."""
    def nm(fn):
        return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    s = nm(spec.op)
    if spec.f is not None:
        s = f"{nm(spec.f)} then {s}"
    return s


def kernel_argtypes(spec, in_dtypes, mode, ndim, uniform=()):
    """The kernel's argument types for one specialisation (:mod:`forge_array.runtime.param_types`).

    >>> from forge_array import ops
    >>> spec = ReduceSpec(op=ops.add.fn, acc_dtypes=("float32",), identity=(0.0,))
    >>> len(kernel_argtypes(spec, ("float32",), "vec", 1))
    8
    """
    K = len(in_dtypes)
    a = [ptr(d) for d in in_dtypes] + [I64, I64]
    if mode == MODE_STRIDED:
        a += [I64] * (ndim + (K - len(uniform)) * ndim)
    a += [ptr(buffer_dtype(d)) for d in spec.acc_dtypes]
    a += [ptr("uint8"), ptr("uint32")]
    a += [ptr(buffer_dtype(d)) for d in (spec.out_dtypes or spec.acc_dtypes)]
    if spec.has_init:
        a += [ptr(buffer_dtype(d)) for d in spec.acc_dtypes]
    return tuple(a + [F64])
