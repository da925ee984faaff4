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

from __future__ import annotations

import math

import numpy as np

from ... import ops as _ops
from ...runtime import SIMULATE, data_address, kernels_available, lazy, stored, stream_key
from ...runtime.accumulation import accumulation_dtype
from ...runtime.caches import Cache
from ...runtime.functions import compilable
from .. import axis_reduce as _axis
from .arguments import (
    _flatten_operands,
    _identity_of,
    _infer,
    _init_values,
    _operand_types,
    _py,
    _wrap,
    _xp,
    normalize_axis,
)
from .cpu import _cpu_mapreduce

# the kernel modules (numba.cuda) load at first use: CPU arrays never need them
_k = lazy.module("forge_array.kernels.reduce", __name__, "_k")
_kl = lazy.module("forge_array.primitives.reductions.launch", __name__, "_kl")

#: most arrays the axis kernels take in one mapreduce
_AXIS_MAX_INPUTS = 3

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
]

_builtin_max = max
_builtin_any = any


# --------------------------------------------------------------------------- generic API


def reduce(op, x, *, axis=None, init=None, keepdims=False):
    """Reduce the elements of backend array ``x`` (or of a tuple of arrays,
    struct-of-arrays: elements are tuples) with the associative operator ``op`` (an
    :class:`forge_array.ops.Operator` or a plain Python function numba compiles).

    ``axis``: None (all), an int or a tuple; ``init`` is combined once on the left of
    each result: ``op(init, total)``.  Empty reductions give the identity (or ``init``);
    ValueError when the operator has none.

    >>> import numpy as np
    >>> from forge_array import ops
    >>> float(reduce(ops.maximum, np.array([1.0, 5.0, 2.0])))
    5.0
    >>> reduce(lambda a, b: a + b, np.arange(6).reshape(2, 3), axis=1).tolist()
    [3, 12]
    >>> v, i = reduce(ops.argmax, (np.array([1.0, 3.0, 3.0]), np.arange(3)))
    >>> float(v), int(i)
    (3.0, 1)
    """
    return mapreduce(None, op, x, axis=axis, init=init, keepdims=keepdims)


def mapreduce(f, op, *arrays, axis=None, init=None, keepdims=False):
    """Apply ``f`` to each element (one argument per array, in order; a tuple of arrays
    gives a tuple argument) and reduce the results with ``op``, in one pass without
    temporaries.  ``f`` None is the identity (a tuple of the elements for several arrays).

    >>> import numpy as np, math
    >>> from forge_array import ops
    >>> x = np.array([1.0, 2.0, float("nan"), 4.0])
    >>> int(mapreduce(lambda v: 1 if v != v else 0, ops.add, x))         # count NaNs
    1
    >>> y = np.array([0.5, 1.0, 2.0])
    >>> float(mapreduce(lambda a, b: a * b, ops.add, y, y))              # dot product
    5.25
    >>> round(float(mapreduce(None, ops.logaddexp, np.log(np.array([1.0, 3.0])))), 6)
    1.386294
    """
    if f is not None and not callable(f):
        raise TypeError(f"map function must be callable, got {type(f).__name__}")
    if f is not None:
        f = compilable(f, len(arrays))   # an equal function finds the kernels of the first
    op = _ops.as_operator(op)
    if not arrays:
        raise TypeError("mapreduce needs at least one array")
    flat, struct = _flatten_operands(arrays)
    x0 = flat[0]
    axes = normalize_axis(axis, x0.ndim)
    elem_types = _operand_types(flat, struct)
    acc, is_tuple = _infer(f, op, elem_types)
    init_v = _init_values(init, acc, is_tuple, op.name) if init is not None else None
    full = len(axes) == x0.ndim
    if kernels_available(x0):
        if full:
            hot = (f, op) if len(arrays) == 1 and axis is None and init is None else None
            return _kernel_full(f, op, flat, struct, acc, is_tuple, init_v, keepdims, x0, hot)
        if op.commutative and len(arrays) <= _AXIS_MAX_INPUTS:
            return _axis.axis_mapreduce(f, op, arrays, axes, init, keepdims,
                                        acc if is_tuple else acc[0])
        # a non-commutative operator along some axes (the axis kernels combine lanes out
        # of order): compute on the host
        xp = _xp(x0)
        host = [np.asarray(a.get() if hasattr(a, "get") else a) for a in flat]
        r = _cpu_mapreduce(f, op, host, struct, axes, acc, is_tuple, init_v, keepdims)
        return tuple(xp.asarray(o) for o in r) if is_tuple else xp.asarray(r)
    if not isinstance(x0, np.ndarray):  # CuPy array without kernels (disabled)
        host = [a.get() for a in flat]
        r = _cpu_mapreduce(f, op, host, struct, axes, acc, is_tuple, init_v, keepdims)
        xp = _xp(x0)
        return tuple(xp.asarray(o) for o in r) if is_tuple else xp.asarray(r)
    return _cpu_mapreduce(f, op, flat, struct, axes, acc, is_tuple, init_v, keepdims)


_SPECS = Cache("primitives.reductions.SPECS")


def _kernel_full(f, op, flat, struct, acc, is_tuple, init_v, keepdims, x0, hot=None):
    xp = _xp(x0)
    shape = (1,) * x0.ndim if keepdims else ()
    if x0.size == 0:
        ident = _identity_of(op, acc, is_tuple)
        if init_v is None and ident is None:
            raise ValueError(f"reduction of an empty array with operator {op.name}, which has "
                             "no identity: pass init")
        return _wrap(xp, init_v if init_v is not None else ident, acc, is_tuple, shape)
    key = (f, op, struct, acc, is_tuple, init_v is not None)
    spec = _SPECS.get(key)
    if spec is None:
        spec = _SPECS[key] = _k.ReduceSpec(
            op=op.fn, acc_dtypes=tuple(d.str for d in acc),
            identity=_identity_of(op, acc, is_tuple), f=f, struct=struct,
            acc_tuple=is_tuple, commutative=op.commutative, has_init=init_v is not None)
    init_bufs = None
    if init_v is not None:
        init_bufs = tuple(xp.asarray([v], dtype=d) for v, d in zip(init_v, acc))
    elif hot is not None and len(flat) == 1 and not struct[0]:
        p = _kl.plan(spec, x0, 0.0, shape)
        if p is not None:
            try:
                _remember(_hot_key("mapreduce", x0, None, keepdims, hot), (p, is_tuple))
            except TypeError:  # an unhashable function: no fast path
                pass
            outs = _kl.replay(p, x0)
            return outs if is_tuple else outs[0]
    outs = _launch(spec, flat, init_bufs, 0.0, op.name, shape)
    return outs if is_tuple else outs[0]


def mapreduce_fast(f, op, x, keepdims=False):
    """The host fast path of ``mapreduce(f, op, x, keepdims=keepdims)`` (``reduce`` when
    ``f`` is None) of one backend array ``x`` over all axes without ``init``: replay the
    launch cached by an earlier call with the same ``f`` and ``op`` (the same objects) on an
    array of the same layout.  Returns the result (a tuple when ``f`` returns tuples), or
    None when no launch is cached for the call.

    >>> import numpy as np
    >>> from forge_array import ops
    >>> x = np.arange(4.0)
    >>> r = mapreduce_fast(None, ops.add, x)   # None until reduce(ops.add, x) has run on our kernels
    >>> r is None or float(r) == 6.0
    True
    """
    try:
        key = _hot_key("mapreduce", x, None, keepdims, (None if f is None else compilable(f, 1),
                                                        _ops.as_operator(op)))
        hit = _HOT.get(key)
    except (TypeError, AttributeError):  # an unhashable function; not an array
        return None
    if hit is None:
        return None
    outs = _kl.replay(hit[0], x, key[-1])
    return outs if hit[1] else outs[0]


def _launch(spec, flat, init_bufs=None, param=0.0, what="", shape=(1,)):
    try:
        return _kl.full_reduce(spec, flat, init_bufs, param, shape)
    except TypeError as exc:
        msg = str(exc)
        if what and what not in msg:
            raise TypeError(f"reduction with operator {what}: {msg}") from exc
        raise


# --------------------------------------------------------------------------- named reductions

#: Launch plans of full named reductions by call: (name, array type, dtype, shape, strides,
#: address mod 16, dtype argument, keepdims, extra argument, stream) -> primitives.reductions.launch.Launch
_HOT = Cache("primitives.reductions.HOT", 4096)


def _hot_key(name, x, dtype, keepdims, extra):
    return (name, type(x), x.dtype, x.shape, x.strides, data_address(x) & 15, dtype, keepdims,
            extra, stream_key())


def full_fast(name, x, dtype=None, keepdims=False, extra=None):
    """The host fast path of a full named reduction (``name``: "sum", "max", "var", ...) of
    backend array ``x``: replay the launch cached by an earlier call with the same arguments
    (``dtype`` of sum / prod, ``correction`` of var / std as ``extra``) on an array of the
    same layout.  Returns the result, or None when no launch is cached for the call (then
    call the reduction itself, which caches it).

    >>> import numpy as np
    >>> x = np.arange(4.0)
    >>> r = full_fast("sum", x)          # None until sum(x) has run on our kernels
    >>> r is None or float(r) == 6.0
    True
    """
    try:
        key = _hot_key(name, x, dtype, keepdims, extra)
        p = _HOT.get(key)
    except (TypeError, AttributeError):  # an unhashable argument; not an array
        return None
    if p is None:
        return None
    return _kl.replay(p, x, key[-1])[0]


def _launch_named(spec, x, param, keepdims, hot=None):
    """Full reduction of ``x`` alone with ``spec``; with ``hot = (name, dtype, extra)`` (the
    caller's arguments) its launch is cached for :func:`full_fast`."""
    shape = (1,) * x.ndim if keepdims else ()
    p = _kl.plan(spec, x, param, shape)
    if p is None:
        return _launch(spec, [x], None, param, shape=shape)[0]
    if hot is not None:
        try:
            _remember(_hot_key(hot[0], x, hot[1], keepdims, hot[2]), p)
        except TypeError:  # unhashable argument: no fast path
            pass
        else:
            if not SIMULATE:   # for a later process's first call (runtime.stored)
                stored.save(stored.full_key(hot[0], x, hot[1], keepdims, hot[2]), _kl.stored_form(p, x))
    return _kl.replay(p, x)[0]


def _remember(key, p):
    """Cache launch ``p`` for the fast paths (raises TypeError for an unhashable key)."""
    _HOT[key] = p


def _named_spec(name, op, acc, identity, f=None, with_index=False, acc_tuple=False, post=None,
                out_dtypes=None):
    key = (name, tuple(acc), f, post, out_dtypes)
    spec = _SPECS.get(key)
    if spec is None:
        spec = _SPECS[key] = _k.ReduceSpec(
            op=op.fn, acc_dtypes=tuple(np.dtype(d).str for d in acc), identity=identity, f=f,
            with_index=with_index, acc_tuple=acc_tuple, post=post,
            out_dtypes=None if out_dtypes is None else tuple(np.dtype(d).str for d in out_dtypes),
            commutative=True)
    return spec


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
        key = _axis_hot_key(hot[0], x, axis, hot[1], keepdims)
    r = _axis.axis_mapreduce(f, op, (x,), axis, None, keepdims, np.dtype(out_dtype), _replay=key)
    if key is not None and not SIMULATE:   # for a later process's first call (runtime.stored)
        ent = _axis._FAST.get(key)
        if ent is not None:
            stored.save(stored.axis_key(hot[0], x, axis, hot[1], keepdims), ent.stored_form((x,), (x,)))
    return r


def _axis_hot_key(name, x, axes, dtype, keepdims):
    try:
        key = ("axis", name, axes, dtype, keepdims, _axis._layout_key(x))
        hash(key)
    except (TypeError, AttributeError):  # an unhashable argument; not an array
        return None
    return key


def axis_fast(name, x, axes, dtype=None, keepdims=False):
    """The host fast path of the named reduction ``name`` ("sum", "prod", "max", "min",
    "any", "all") of backend array ``x`` along ``axes`` (a sorted tuple of non-negative
    ints, not all of them): replay the launch an earlier call with the same arguments
    (``dtype`` of sum / prod) left for an array of the same layout (dtype, shape, strides,
    16-byte phase, device).  Returns the result, or None when there is none (then call the
    reduction itself, which leaves one).

    >>> import numpy as np
    >>> x = np.ones((2, 3))
    >>> r = axis_fast("sum", x, (0,), np.dtype("float64"))   # None until sum(x, (0,)) ran
    >>> r is None or r.tolist() == [2.0, 2.0, 2.0]
    True
    """
    try:
        ent = _axis._FAST.get(("axis", name, axes, dtype, keepdims, _axis._layout_key(x)))
    except (TypeError, AttributeError):
        return None
    if ent is None:
        return None
    return ent((x,))


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
        spec = _named_spec(name, op, (dtype,), (_py(dtype.type(identity)),))
        return _launch_named(spec, x, 0.0, keepdims, (name, arg, None))
    r = _axis_named(x, axis, None, op, dtype, keepdims, (name, arg))
    if r is not None:
        return r
    return getattr(_xp(x), name)(x, axis=_np_axis(axis), dtype=dtype, keepdims=keepdims)


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
        spec = _named_spec(name, op, (x.dtype,), (_py(ident),))
        return _launch_named(spec, x, 0.0, keepdims, (name, None, None))
    r = _axis_named(x, axis, None, op, x.dtype, keepdims, (name, None))
    if r is not None:
        return r
    return getattr(_xp(x), name)(x, axis=_np_axis(axis), keepdims=keepdims)


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
        spec = _named_spec(name, op, (np.bool_,), (_py(op.identity(np.dtype(np.bool_))),))
        return _launch_named(spec, x, 0.0, keepdims, (name, None, None))
    r = _axis_named(x, axis, _TRUTH, op, np.bool_, keepdims, (name, None))
    if r is not None:
        return r
    return getattr(_xp(x), name)(x, axis=_np_axis(axis), keepdims=keepdims)


def _truth(v):
    return v != 0


_TRUTH = _truth


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


def _float_result(dt):
    if dt.kind in "fc":
        return dt
    return np.dtype(np.float64)


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
    dt = _float_result(x.dtype)
    if _use_kernel(x, axis):
        spec = _named_spec("mean", _ops.add, (dt,), (_py(dt.type(0)),), post=_mean_post,
                           out_dtypes=(dt,))
        return _launch_named(spec, x, float(x.size), keepdims, ("mean", None, None))
    r = _axis_named(x, axis, None, _ops.add, dt, keepdims)
    if r is not None:
        r /= math.prod(x.shape[d] for d in axis)
        return r
    xp = _xp(x)
    return xp.mean(x, axis=_np_axis(axis), keepdims=keepdims, dtype=dt).astype(dt, copy=False)


def _moments(x, axis, correction, keepdims, post, name):
    if _full(x, axis):
        r = full_fast(name, x, None, keepdims, correction)
        if r is not None:
            return r
    dt = _float_result(x.dtype)
    if dt.kind == "c":
        xp = _xp(x)
        fn = xp.var if name == "var" else xp.std
        return fn(x, axis=_np_axis(axis), ddof=correction, keepdims=keepdims)
    if _use_kernel(x, axis):
        spec = _named_spec(name, _ops.welford, (dt, dt, dt), (0.0, 0.0, 0.0),
                           f=_welford_map(dt), acc_tuple=True, post=post, out_dtypes=(dt,))
        p = float(x.size) - float(correction)
        if p < 0:
            p = 0.0
        # no fast path for a degenerate count (the namespace silences its warnings)
        return _launch_named(spec, x, p, keepdims, (name, None, correction) if p > 0 else None)
    if kernels_available(x) and x.size > 0:
        m2 = _axis.axis_mapreduce(_welford_map(dt), _ops.welford, (x,), axis, None, keepdims,
                                  (dt, dt, dt))[2]
        m2 /= _builtin_max(math.prod(x.shape[d] for d in axis) - correction, 0)
        if name == "std":
            _xp(x).sqrt(m2, out=m2)
        return m2
    xp = _xp(x)
    fn = xp.var if name == "var" else xp.std
    return fn(x, axis=_np_axis(axis), ddof=correction, keepdims=keepdims,
              dtype=dt).astype(dt, copy=False)


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
    xp = _xp(x)
    if kernels_available(x) and (axis is None or x.ndim <= 1):
        xv = x.view(np.uint8) if x.dtype.kind == "b" else x
        vdt = xv.dtype
        ident = op.identity((vdt, _ops.INDEX_DTYPE))
        spec = _named_spec(name, op, (vdt, _ops.INDEX_DTYPE), tuple(_py(v) for v in ident),
                           f=_pair, with_index=True, acc_tuple=True, post=_index_post,
                           out_dtypes=(_ops.INDEX_DTYPE,))
        # the fast path replays on x itself: not for a bool array (viewed as uint8 here)
        hot = (name, None, None) if axis is None and xv is x else None
        return _launch_named(spec, xv, 0.0, keepdims, hot)
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
