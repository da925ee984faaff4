"""The named reductions of the namespace on backend arrays (NumPy / CuPy): ``sum``, ``prod``,
``max``, ``min``, ``any``, ``all``, ``mean``, ``var``, ``std`` (one Welford / Chan pass),
``argmax``, ``argmin``; each through its cached launch, a full-reduction kernel, the axis
kernels, or the backend's own function.
"""

from __future__ import annotations

import math

import numpy as np

from ... import ops as _ops
from ...dispatch.axis_reduce import FAST as _AXIS_FAST
from ...dispatch.axis_reduce import axis_hot_key
from ...dispatch.reduce import full_fast, named_spec
from ...runtime import SIMULATE, kernels_available, lazy, stored
from ...runtime import tuning as _tuning
from ...runtime.accumulation import accumulation_dtype, float_result
from .. import axis_reduce as _axis
from .arguments import array_module, python_scalar

_kl = lazy.module("forge_array.dispatch.reduce", __name__, "_kl")

_builtin_max = max
_builtin_min = min
_builtin_any = any


def _full(x, axis):
    return axis is None or len(axis) == x.ndim


def _use_kernel(x, axis):
    return kernels_available(x) and _full(x, axis) and x.size > 0


def _axis_named(x, axis, f, op, out_dtype, keepdims, hot=None):
    """Axis reduction through the axis kernels when they exist; None otherwise. With
    ``hot = (name, dtype)`` (the caller's arguments) its launch is cached for
    :func:`axis_fast`."""
    if not kernels_available(x):
        return None
    if axis is None or len(axis) == x.ndim or x.size == 0:
        return None
    key = None
    if hot is not None:
        key = axis_hot_key(hot[0], x, axis, hot[1], keepdims)
    r = _axis.axis_mapreduce(f, op, (x,), axis, None, keepdims, np.dtype(out_dtype), _replay=key)
    if key is not None and not SIMULATE:   # for a later process's first call (runtime.stored)
        ent = _AXIS_FAST.get(key)
        if ent is not None:
            stored.save(stored.reduction_key(hot[0], x, axis, hot[1], keepdims), ent.stored_form((x,), (x,)))
    return r



def _np_axis(axis):
    return None if axis is None else tuple(axis)


def sum(x, axis=None, dtype=None, keepdims=False):
    """Sum of the elements of backend array ``x`` over ``axis`` (a tuple of non-negative
    ints, or None), accumulated and returned in ``dtype`` (the caller applies the
    standard's defaults; None keeps NumPy's).

    >>> import numpy as np
    >>> int(sum(np.arange(5, dtype=np.uint8), dtype=np.uint64))
    10
    """
    return _sum_or_prod("sum", _ops.add, 0, x, axis, dtype, keepdims)


def _sum_or_prod(name, op, identity, x, axis, dtype, keepdims):
    """``sum`` / ``prod``: the cached full-reduction launch, a fresh full reduction, the axis
    kernels, or the backend, accumulating in ``dtype`` (the standard's default when None)."""
    if _full(x, axis):
        r = full_fast(name, x, dtype, keepdims)
        if r is not None:
            return r
    arg = dtype
    dtype = np.dtype(dtype) if dtype is not None else accumulation_dtype(x.dtype)
    if _use_kernel(x, axis):
        spec = named_spec(name, op, (dtype,), (python_scalar(dtype.type(identity)),))
        return _kl.launch_named(spec, x, 0.0, keepdims, (name, arg, None))
    r = _axis_named(x, axis, None, op, dtype, keepdims, (name, arg))
    if r is not None:
        return r
    return getattr(array_module(x), name)(x, axis=_np_axis(axis), dtype=dtype, keepdims=keepdims)


def prod(x, axis=None, dtype=None, keepdims=False):
    """Product of the elements over ``axis`` in ``dtype``.

    >>> import numpy as np
    >>> int(prod(np.arange(1, 6, dtype=np.int32), dtype=np.int64))
    120
    """
    return _sum_or_prod("prod", _ops.multiply, 1, x, axis, dtype, keepdims)


def _extremum(x, axis, keepdims, op, name):
    if _full(x, axis):
        r = full_fast(name, x, None, keepdims)
        if r is not None:
            return r
    if x.size == 0 and (axis is None or _builtin_any(x.shape[d] == 0 for d in axis)):
        raise ValueError(f"{name} of an empty array (zero-size reduction) has no identity")
    if _use_kernel(x, axis):
        ident = op.identity(x.dtype)
        spec = named_spec(name, op, (x.dtype,), (python_scalar(ident),))
        return _kl.launch_named(spec, x, 0.0, keepdims, (name, None, None))
    r = _axis_named(x, axis, None, op, x.dtype, keepdims, (name, None))
    if r is not None:
        return r
    return getattr(array_module(x), name)(x, axis=_np_axis(axis), keepdims=keepdims)


def max(x, axis=None, keepdims=False):
    """Largest element over ``axis``; NaN propagates; ValueError for an empty reduction.

    >>> import numpy as np
    >>> float(max(np.array([1.0, 7.0, 3.0])))
    7.0
    """
    return _extremum(x, axis, keepdims, _ops.maximum, "max")


def min(x, axis=None, keepdims=False):
    """Smallest element over ``axis``; NaN propagates; ValueError for an empty reduction.

    >>> import numpy as np
    >>> int(min(np.array([4, -2, 9])))
    -2
    """
    return _extremum(x, axis, keepdims, _ops.minimum, "min")


def _logical(x, axis, keepdims, op, name):
    if _full(x, axis):
        r = full_fast(name, x, None, keepdims)
        if r is not None:
            return r
    if _use_kernel(x, axis):
        spec = named_spec(name, op, (np.bool_,), (python_scalar(op.identity(np.dtype(np.bool_))),))
        return _kl.launch_named(spec, x, 0.0, keepdims, (name, None, None))
    r = _axis_named(x, axis, _truth, op, np.bool_, keepdims, (name, None))
    if r is not None:
        return r
    return getattr(array_module(x), name)(x, axis=_np_axis(axis), keepdims=keepdims)


def _truth(v):
    return v != 0



def any(x, axis=None, keepdims=False):
    """Whether any element over ``axis`` is nonzero (NaN counts as nonzero).

    >>> import numpy as np
    >>> bool(any(np.array([0, 0, 3])))
    True
    """
    return _logical(x, axis, keepdims, _ops.logical_or, "any")


def all(x, axis=None, keepdims=False):
    """Whether every element over ``axis`` is nonzero.

    >>> import numpy as np
    >>> bool(all(np.array([1.0, 0.0])))
    False
    """
    return _logical(x, axis, keepdims, _ops.logical_and, "all")


# ---- mean / var / std: one pass with the Welford / Chan triple


def _mean_post(t, p):
    return t / p


def _var_post(t, p):
    return t[2] / p


def _std_post(t, p):
    return math.sqrt(t[2] / p)


def _welford_map(dt):
    """``x -> (1, x, (x - x)**2)`` in float type ``dt`` (see :func:`forge_array.ops.welford_map`)."""
    return _ops.welford_map(dt)


def mean(x, axis=None, keepdims=False):
    """Arithmetic mean over ``axis`` (sum in the float dtype, divided by the count); NaN for
    an empty reduction.

    >>> import numpy as np
    >>> float(mean(np.array([1.0, 2.0, 6.0])))
    3.0
    """
    if _full(x, axis):
        r = full_fast("mean", x, None, keepdims)
        if r is not None:
            return r
    dt = float_result(x.dtype)
    if _use_kernel(x, axis):
        spec = named_spec("mean", _ops.add, (dt,), (python_scalar(dt.type(0)),), post=_mean_post,
                           out_dtypes=(dt,))
        return _kl.launch_named(spec, x, float(x.size), keepdims, ("mean", None, None))
    r = _axis_named(x, axis, None, _ops.add, dt, keepdims)
    if r is not None:
        r /= math.prod(x.shape[d] for d in axis)
        return r
    xp = array_module(x)
    return xp.mean(x, axis=_np_axis(axis), keepdims=keepdims, dtype=dt).astype(dt, copy=False)


def _moments(x, axis, correction, keepdims, post, name):
    if _full(x, axis):
        r = full_fast(name, x, None, keepdims, correction)
        if r is not None:
            return r
    dt = float_result(x.dtype)
    if dt.kind == "c":
        xp = array_module(x)
        fn = xp.var if name == "var" else xp.std
        return fn(x, axis=_np_axis(axis), ddof=correction, keepdims=keepdims)
    if _use_kernel(x, axis):
        spec = named_spec(name, _ops.welford, (dt, dt, dt), (0.0, 0.0, 0.0),
                           f=_welford_map(dt), acc_tuple=True, post=post, out_dtypes=(dt,))
        p = float(x.size) - float(correction)
        if p < 0:
            p = 0.0
        # no fast path for a degenerate count (the namespace silences its warnings)
        return _kl.launch_named(spec, x, p, keepdims, (name, None, correction) if p > 0 else None)
    if kernels_available(x) and x.size > 0:
        count = math.prod(x.shape[d] for d in axis)
        if shifted_pays(x, axis):
            m2 = moments_of_sums(*shifted_sums(x, axis, keepdims), with_mean=False)[1]
        else:
            m2 = _axis.axis_mapreduce(_welford_map(dt), _ops.welford, (x,), axis, None, keepdims,
                                      (dt, dt, dt))[2]
        m2 /= _builtin_max(count - correction, 0)
        if name == "std":
            array_module(x).sqrt(m2, out=m2)
        return m2.astype(dt, copy=False)
    xp = array_module(x)
    fn = xp.var if name == "var" else xp.std
    return fn(x, axis=_np_axis(axis), ddof=correction, keepdims=keepdims,
              dtype=dt).astype(dt, copy=False)


def shifted_pays(x, axes) -> bool:
    """Whether ``var`` / ``std`` of backend array ``x`` along ``axes`` (a tuple) take the
    shifted sums (:func:`shifted_moments`): float16 arrays (Welford triples in float16 lose
    digits that NumPy's float32 steps keep), and float32 arrays of at least the ``moments``
    tuning's ``shifted_min`` elements reduced across their innermost axis (columns: along
    the innermost axis the row kernels read the pivot beside each row and run slower than
    Welford triples), summed in float64.

    >>> import numpy as np
    >>> shifted_pays(np.ones((4, 3), np.float16), (1,)), shifted_pays(np.ones(3), (0,))
    (True, False)
    """
    dt = x.dtype
    if dt.kind != "f" or dt.itemsize > 4:
        return False
    if dt.itemsize == 2:
        return True
    if x.size < _tuning.params("moments")["shifted_min"]:
        return False
    inner = _builtin_min((d for d in range(x.ndim) if x.shape[d] > 1), default=None,
                key=lambda d: abs(x.strides[d]))
    return inner is not None and inner not in axes


def shifted_moments(x, axes, keepdims=False):
    """``(mean, m2)`` of backend array ``x`` along ``axes`` (a tuple) in float64, ``m2`` the
    sum of squared deviations from the mean, in one pass over ``x``: with ``pivot`` the first
    element along the reduced axes, the sums of ``d = x - pivot`` and ``d * d``
    (:func:`forge_array.ops.shifted_squares`, :data:`forge_array.ops.add_pair`) give
    ``mean = pivot + sum(d) / n`` and ``m2 = sum(d * d) - sum(d)**2 / n``. The pivot is one
    of the data, so ``d`` keeps the data's spread and the difference loses little (float64
    sums of float32 data: closer to the float64 two-pass value than float32 Welford triples);
    a NaN or an infinity gives NaN. ``x`` is not empty. The two steps apart:
    :func:`shifted_sums` (the pass) and :func:`moments_of_sums`.

    >>> import numpy as np
    >>> a = np.array([[1.0, 10.0], [3.0, 10.0], [5.0, 13.0]], dtype=np.float32)
    >>> mean, m2 = shifted_moments(a, (0,))
    >>> mean.tolist(), m2.tolist()
    ([3.0, 11.0], [8.0, 6.0])
    """
    return moments_of_sums(*shifted_sums(x, axes, keepdims))


def shifted_sums(x, axes, keepdims=False):
    """``(pivot, count, s1, s2)``: the launch of the pass of :func:`shifted_moments` over
    backend array ``x`` along ``axes`` (``pivot`` a view of ``x``, ``count`` the number of
    elements reduced into each result)."""
    xp = array_module(x)
    pivot = x[tuple(slice(0, 1) if d in axes else slice(None) for d in range(x.ndim))]
    f64 = np.dtype(np.float64)
    s1, s2 = _axis.axis_mapreduce(_ops.shifted_squares, _ops.add_pair,
                                  (x, xp.broadcast_to(pivot, x.shape)), axes, None, keepdims,
                                  (f64, f64))
    if not keepdims:
        pivot = pivot.reshape(s1.shape)
    return pivot, float(math.prod(x.shape[d] for d in axes)), s1, s2


def moments_of_sums(pivot, count, s1, s2, with_mean=True):
    """``(mean, m2)`` in float64 from :func:`shifted_sums`' results (``s1`` and ``s2`` are
    overwritten; ``mean`` None without ``with_mean``)."""
    xp = array_module(s1)
    s1 /= count
    mean = pivot.astype(np.float64) + s1 if with_mean else None
    s1 *= s1
    s1 *= -count
    s2 += s1
    xp.maximum(s2, 0.0, out=s2)   # the rounding of a constant column's sums (NaN stays)
    return mean, s2


def var(x, axis=None, correction=0.0, keepdims=False):
    """Variance over ``axis`` with ``correction`` (ddof), in one pass (Welford / Chan).

    >>> import numpy as np
    >>> float(var(np.array([1.0, 2.0, 3.0, 4.0])))
    1.25
    """
    return _moments(x, axis, correction, keepdims, _var_post, "var")


def std(x, axis=None, correction=0.0, keepdims=False):
    """Standard deviation over ``axis`` with ``correction``, in one pass.

    >>> import numpy as np
    >>> float(std(np.array([1.0, 3.0])))
    1.0
    """
    return _moments(x, axis, correction, keepdims, _std_post, "std")


# ---- argmax / argmin on (value, index) pairs


def _pair(v, i):
    return (v, i)


def _index_post(t, p):
    return t[1]


def _arg(x, axis, keepdims, op, name):
    """``axis`` is None or an int."""
    if axis is None:
        r = full_fast(name, x, None, keepdims)
        if r is not None:
            return r
    if x.size == 0 and (axis is None or x.shape[axis] == 0):
        raise ValueError(f"{name} of an empty sequence")
    xp = array_module(x)
    if kernels_available(x) and (axis is None or x.ndim <= 1):
        xv = x.view(np.uint8) if x.dtype.kind == "b" else x
        vdt = xv.dtype
        ident = op.identity((vdt, _ops.INDEX_DTYPE))
        spec = named_spec(name, op, (vdt, _ops.INDEX_DTYPE), tuple(python_scalar(v) for v in ident),
                           f=_pair, with_index=True, acc_tuple=True, post=_index_post,
                           out_dtypes=(_ops.INDEX_DTYPE,))
        # the fast path replays on x itself: not for a bool array (viewed as uint8 here)
        hot = (name, None, None) if axis is None and xv is x else None
        return _kl.launch_named(spec, xv, 0.0, keepdims, hot)
    if kernels_available(x):
        return getattr(_axis, name)(x, axis, keepdims)
    fn = getattr(xp, name)
    if keepdims:
        return fn(x, axis=axis, keepdims=True)
    return fn(x, axis=axis)


def argmax(x, axis=None, keepdims=False):
    """Index of the largest element (the first one; the first NaN wins), flat when ``axis``
    is None.

    >>> import numpy as np
    >>> int(argmax(np.array([1.0, 9.0, 9.0])))
    1
    """
    return _arg(x, axis, keepdims, _ops.argmax, "argmax")


def argmin(x, axis=None, keepdims=False):
    """Index of the smallest element (the first one; the first NaN wins).

    >>> import numpy as np
    >>> int(argmin(np.array([3, 1, 1])))
    1
    """
    return _arg(x, axis, keepdims, _ops.argmin, "argmin")
