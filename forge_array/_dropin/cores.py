"""The computations behind the drop-in's functions (:class:`Cores`): each takes CuPy's
arguments and runs on the primitives, or returns :data:`DECLINE` for the original to run.
"""

from __future__ import annotations

import math
import operator
import warnings

import numpy as np

from .. import ops as _ops
from ..primitives import axis_reduce as _axis
from ..primitives.matvec import matmul_fast as _matmul_fast
from ..primitives.matvec import matvec as _matvec
from ..primitives.matvec import result_dtype as _mv_dtype
from ..primitives.matvec import route_matmul as _route_matmul
from ..primitives.matvec import vecmat as _vecmat
from ..primitives.reductions import all as _p_all
from ..primitives.reductions import any as _p_any
from ..primitives.reductions import mapreduce as _mapreduce
from ..primitives.reductions import max as _p_max
from ..primitives.reductions import mean as _p_mean
from ..primitives.reductions import min as _p_min
from ..primitives.reductions import normalize_axis as _normalize_axis
from ..primitives.reductions import prod as _p_prod
from ..primitives.reductions import std as _p_std
from ..primitives.reductions import sum as _p_sum
from ..primitives.reductions import var as _p_var
from ..runtime import kernels_available
from .rules import (
    _BOOL,
    _INT64,
    _KINDS,
    _KINDS_C,
    DECLINE,
    _accumulation_dtype,
    _mul_as,
    _nan_to_zero,
    _ok,
    _reduced_shape,
    _welford_map,
    float_dtype,
    fmax,
    fmin,
)


class Cores:
    """Mixin of :class:`forge_array._dropin.DropIn`: one core per function family."""

    def _mine(self, a, kinds=_KINDS):
        """Whether array ``a`` is one our kernels take, of a dtype they cover."""
        return isinstance(a, self.ndarray) and _ok(a.dtype, kinds) and kernels_available(a)

    def _out_ok(self, out, shape, dtype):
        return (out is None or (isinstance(out, self.ndarray) and tuple(out.shape) == shape
                                and out.dtype == dtype))

    @staticmethod
    def _axes(a, axis):
        """Normalised axis tuple, or None for a call to leave to the original (bad axis:
        the original raises its own error; ``axis=()``)."""
        try:
            axes = _normalize_axis(axis, a.ndim)
        except (TypeError, ValueError, IndexError):
            return None
        if axis is not None and not axes and a.ndim:
            return None
        return axes

    @staticmethod
    def _put(r, out):
        if out is None:
            return r
        out[...] = r
        return out

    # ----------------------------------------------------------------- cores
    # Each returns the result, or DECLINE to run the original.

    def _c_sum_prod(self, prim, a, axis, dtype, out, keepdims):
        if not self._mine(a, _KINDS_C):
            return DECLINE
        dt = _accumulation_dtype(a.dtype, dtype)
        if dt is None:
            return DECLINE
        axes = self._axes(a, axis)
        if axes is None:
            return DECLINE
        if not self._out_ok(out, _reduced_shape(a.shape, axes, keepdims), dt):
            return DECLINE
        return self._put(prim(a, axes, dt, bool(keepdims)), out)

    def _c_extremum(self, prim, a, axis, out, keepdims):
        if not self._mine(a):
            return DECLINE
        axes = self._axes(a, axis)
        if axes is None:
            return DECLINE
        if a.size == 0:    # the original's empty result or error (CuPy's and NumPy's differ)
            return DECLINE
        if not self._out_ok(out, _reduced_shape(a.shape, axes, keepdims), a.dtype):
            return DECLINE
        return self._put(prim(a, axes, bool(keepdims)), out)

    def _c_logical(self, prim, a, axis, out, keepdims):
        if not self._mine(a, _KINDS_C):
            return DECLINE
        axes = self._axes(a, axis)
        if axes is None:
            return DECLINE
        if not self._out_ok(out, _reduced_shape(a.shape, axes, keepdims), _BOOL):
            return DECLINE
        return self._put(prim(a, axes, bool(keepdims)), out)

    def _c_mean(self, a, axis, dtype, out, keepdims):
        if not self._mine(a, _KINDS_C):
            return DECLINE
        dt = float_dtype(a.dtype) if dtype is None else np.dtype(dtype)
        if not _ok(dt, "fc") or (a.dtype.kind == "c" and dt.kind != "c"):
            return DECLINE
        axes = self._axes(a, axis)
        if axes is None:
            return DECLINE
        shape = _reduced_shape(a.shape, axes, keepdims)
        if not self._out_ok(out, shape, dt):
            return DECLINE
        n = math.prod(a.shape[d] for d in axes)
        if n == 0:
            return DECLINE                     # NaN with the original's RuntimeWarning
        if len(axes) == a.ndim and dt == float_dtype(a.dtype):
            r = _p_mean(a, axes, bool(keepdims))
        else:
            s = _p_sum(a, axes, dt, bool(keepdims))
            r = (s / dt.type(n)).astype(dt, copy=False)
        return self._put(r, out)

    def _c_moments(self, a, axis, dtype, out, ddof, keepdims, std):
        if not self._mine(a):
            return DECLINE
        dt = float_dtype(a.dtype)
        if dtype is not None and np.dtype(dtype) != dt:
            return DECLINE
        axes = self._axes(a, axis)
        if axes is None:
            return DECLINE
        try:
            ddof = operator.index(ddof) if not isinstance(ddof, float) else ddof
        except TypeError:
            return DECLINE
        shape = _reduced_shape(a.shape, axes, keepdims)
        if not self._out_ok(out, shape, dt):
            return DECLINE
        n = math.prod(a.shape[d] for d in axes)
        if n == 0 or n - ddof <= 0:
            return DECLINE                     # the original's warnings and inf / NaN
        if len(axes) == a.ndim:
            prim = _p_std if std else _p_var
            r = prim(a, axes, ddof, bool(keepdims))
        else:
            t = _axis.axis_mapreduce(_welford_map(dt), _ops.welford, (a,), axes, None,
                                     bool(keepdims), (dt, dt, dt))
            r = t[2] / dt.type(n - ddof)
            if std:
                r = self.xp.sqrt(r)
            r = r.astype(dt, copy=False)
        return self._put(r, out)

    def _c_arg(self, prim, a, axis, dtype, out, keepdims):
        if not self._mine(a) or a.size == 0:
            return DECLINE
        if axis is not None:
            try:
                axis = operator.index(axis)
            except TypeError:
                return DECLINE
            if not -a.ndim <= axis < a.ndim:
                return DECLINE
            axis %= a.ndim
            shape = _reduced_shape(a.shape, (axis,), keepdims)
        else:
            shape = (1,) * a.ndim if keepdims else ()
        odt = _INT64 if dtype is None else np.dtype(dtype)
        if odt.kind not in "iu" or not self._out_ok(out, shape, odt):
            return DECLINE
        r = prim(a, axis, bool(keepdims))
        if odt != r.dtype:
            r = r.astype(odt)
        return self._put(r, out)

    def _c_scan(self, prim, a, axis, dtype, out):
        if not self._mine(a, _KINDS_C):
            return DECLINE
        dt = _accumulation_dtype(a.dtype, dtype)
        if dt is None:
            return DECLINE
        if axis is None:
            x = a.reshape(-1)
            ax = 0
        else:
            if a.ndim == 0:
                return DECLINE
            try:
                ax = operator.index(axis)
            except TypeError:
                return DECLINE
            if not -a.ndim <= ax < a.ndim:
                return DECLINE
            x = a
            ax %= a.ndim
        if not self._out_ok(out, tuple(x.shape), dt):
            return DECLINE
        direct = out is not None and (out is a or not self.xp.may_share_memory(out, a))
        r = prim(x, axis=ax, dtype=dt, out=out if direct else None)
        return r if direct else self._put(r, out)

    def _c_nansum(self, a, axis, dtype, out, keepdims):
        if not self._mine(a):
            return DECLINE
        if a.dtype.kind != "f":
            return self._c_sum_prod(_sum_prim, a, axis, dtype, out, keepdims)
        dt = a.dtype if dtype is None else np.dtype(dtype)
        if not _ok(dt, "f"):
            return DECLINE
        axes = self._axes(a, axis)
        if axes is None:
            return DECLINE
        if not self._out_ok(out, _reduced_shape(a.shape, axes, keepdims), dt):
            return DECLINE
        r = _mapreduce(_nan_to_zero(dt), _ops.add, a, axis=axes, keepdims=bool(keepdims))
        return self._put(r, out)

    def _c_nanext(self, a, axis, out, keepdims, is_max):
        if not self._mine(a):
            return DECLINE
        if a.dtype.kind != "f":
            return self._c_extremum(_max_prim if is_max else _min_prim, a, axis, out, keepdims)
        axes = self._axes(a, axis)
        if axes is None:
            return DECLINE
        if a.size == 0:
            return DECLINE
        if not self._out_ok(out, _reduced_shape(a.shape, axes, keepdims), a.dtype):
            return DECLINE
        r = _mapreduce(None, fmax if is_max else fmin, a, axis=axes, keepdims=bool(keepdims))
        if bool(self.fallbacks["any"](self.xp.isnan(r))):   # as CuPy: a sync for the warning
            warnings.warn("All-NaN slice encountered", RuntimeWarning, stacklevel=3)
        return self._put(r, out)

    def _c_product(self, a, b, out, kind):
        """dot / matmul / inner of a matrix (or batch) and a vector, or of two vectors."""
        if not (self._mine(a) and self._mine(b)) or a.dtype != b.dtype:
            return DECLINE
        if a.ndim == 0 or b.ndim == 0:
            return DECLINE
        if kind != "inner" and b.ndim == 2 and b.shape[1] == 1 and a.ndim >= 2:
            # (..., n, p) @ (p, 1): a matrix-vector product kept 2-D (dask.array's matmul
            # of a vector)
            if a.shape[-1] != b.shape[0]:
                return DECLINE
            dt = _mv_dtype(None, None, a.dtype, b.dtype)
            if not self._out_ok(out, tuple(a.shape[:-1]) + (1,), dt):
                return DECLINE
            # the launch of an earlier call on (a, b) of these layouts replays on them
            # directly: no views of b and of the result to make (CuPy's views cost more
            # host time than the launch)
            r = _matmul_fast(a, b)
            if r is None:
                r = _route_matmul(a, b)
            if r is None:
                r = _matvec(a, b[:, 0])[..., None]
            return self._put(r, out)
        if kind != "inner" and a.ndim == 2 and a.shape[0] == 1 and b.ndim == 2:
            # (1, n) @ (n, p): a vector-matrix product kept 2-D
            if a.shape[1] != b.shape[0]:
                return DECLINE
            dt = _mv_dtype(None, None, a.dtype, b.dtype)
            if not self._out_ok(out, (1, b.shape[1]), dt):
                return DECLINE
            return self._put(_vecmat(a[0], b)[None, :], out)
        dt = _mv_dtype(None, None, a.dtype, b.dtype)
        if a.ndim == 1 and b.ndim == 1:
            if a.shape[0] != b.shape[0] or not self._out_ok(out, (), dt):
                return DECLINE
            if dt.kind == "f":                  # one-launch full reduction
                r = _mapreduce(_mul_as(dt), _ops.add, a, b)
            else:                               # integers stay in dt (numba widens int ops)
                r = _matvec(a[None, :], b).reshape(())
            return self._put(r, out)
        if b.ndim == 1:                         # (..., n, p) . (p,)
            if a.shape[-1] != b.shape[0]:
                return DECLINE
            shape = tuple(a.shape[:-1])
            if not self._out_ok(out, shape, dt):
                return DECLINE
            return self._put(_matvec(a, b), out)
        if a.ndim == 1:
            if kind == "inner":                 # inner(x, B)[...] = sum_k x[k] B[..., k]
                if b.shape[-1] != a.shape[0]:
                    return DECLINE
                shape = tuple(b.shape[:-1])
                if not self._out_ok(out, shape, dt):
                    return DECLINE
                return self._put(_matvec(b, a), out)
            if b.shape[-2] != a.shape[0]:       # (n,) . (..., n, p)
                return DECLINE
            shape = tuple(b.shape[:-2]) + (b.shape[-1],)
            if not self._out_ok(out, shape, dt):
                return DECLINE
            return self._put(_vecmat(a, b), out)
        return DECLINE                          # matrix-matrix: cuBLAS

    # ----------------------------------------------------------------- public functions


# primitives with one calling convention: (x, axes, dtype, keepdims) / (x, axes, keepdims)

def _sum_prim(x, axes, dt, keepdims):
    return _p_sum(x, axes, dt, keepdims)


def _prod_prim(x, axes, dt, keepdims):
    return _p_prod(x, axes, dt, keepdims)


def _max_prim(x, axes, keepdims):
    return _p_max(x, axes, keepdims)


def _min_prim(x, axes, keepdims):
    return _p_min(x, axes, keepdims)


def _any_prim(x, axes, keepdims):
    return _p_any(x, axes, keepdims)


def _all_prim(x, axes, keepdims):
    return _p_all(x, axes, keepdims)


