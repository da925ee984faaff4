"""Dtype rules of the drop-in (NumPy's, as CuPy follows them) and the device functions its
reductions map with: NaN to zero, Welford triples, products in a given dtype, fmax / fmin.
"""

from __future__ import annotations

import numpy as np

from .. import ops as _ops
from ..runtime.accumulation import accumulation_dtype, float_result
from ..runtime.caches import Cache

#: returned by a core when our kernels do not cover the call: the original runs instead
DECLINE = object()

_KINDS = frozenset("biuf")          # dtypes every kernel path takes (not float16)
_KINDS_C = frozenset("biufc")       # ... plus complex, for sums / products / any / all
_F16 = np.dtype(np.float16)
_INT64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)


# --------------------------------------------------------------------------- dtype rules


#: NumPy's / CuPy's accumulation dtype of ``sum``, ``prod``, ``cumsum`` and ``cumprod``
#: without ``dtype=`` (bool and integers narrower than 64 bits widen to int64 / uint64), and
#: the float dtype of ``mean`` / ``var`` / ``std``: the rules of :mod:`..runtime.accumulation`
sum_dtype = accumulation_dtype
float_dtype = float_result


def _ok(dt, kinds=_KINDS):
    return dt.kind in kinds and dt != _F16


def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


# --------------------------------------------------------------------------- device functions
# module-level (not per call) so the kernel caches, which key on the callables, hit

_NAN_TO_ZERO = Cache("_dropin.rules.NAN_TO_ZERO")
_MUL = Cache("_dropin.rules.MUL")


def _nan_to_zero(dt):
    """``v -> D(v)`` with NaN -> 0, in dtype ``dt`` (the map of nansum)."""
    f = _NAN_TO_ZERO.get(dt)
    if f is None:
        D = dt.type

        def nan_to_zero(v):
            return D(v) if v == v else D(0)

        f = _NAN_TO_ZERO[dt] = nan_to_zero
    return f


def _accumulation_dtype(in_dtype, dtype):
    """The dtype a sum / prod / cumsum / cumprod accumulates in, as NumPy picks it (``dtype``
    given or not), or None when our kernels do not take that combination."""
    if dtype is None:
        return sum_dtype(in_dtype)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        return None
    if not _ok(dt, _KINDS_C) or not np.can_cast(in_dtype, dt, "same_kind"):
        return None
    return dt


def _welford_map(dt):
    """One element as a Welford triple in float dtype ``dt`` (see :func:`forge_array.ops.welford_map`)."""
    return _ops.welford_map(dt)


def _mul_as(dt):
    """``(u, v) -> D(u) * D(v)``: the product of a dot product accumulated in ``dt``."""
    f = _MUL.get(dt)
    if f is None:
        D = dt.type

        def mul_as(u, v):
            return D(u) * D(v)

        f = _MUL[dt] = mul_as
    return f


def _fmax(a, b):
    # NaN-skipping maximum (numpy.fmax): NaN only when both are NaN; NaN is the identity
    if b != b or a >= b:
        return a
    if a != a:
        return b
    return b


def _fmin(a, b):
    if b != b or a <= b:
        return a
    if a != a:
        return b
    return b


def _nan_identity(dt):
    return dt.type(np.nan)


fmax = _ops.Operator(_fmax, "fmax", identity=_nan_identity, commutative=True, ufunc=np.fmax)
fmin = _ops.Operator(_fmin, "fmin", identity=_nan_identity, commutative=True, ufunc=np.fmin)


