"""Generic reductions on forge_array arrays: ``reduce`` and ``mapreduce``.

Thin wrappers over :mod:`forge_array.primitives.reductions`: unwrap the arrays (or tuples of
arrays, struct-of-arrays), check devices, call the primitive, wrap the results.

>>> import forge_array as xp
>>> from forge_array import ops
>>> x = xp.asarray([1.0, 2.0, 3.0])
>>> float(xp.mapreduce(lambda v: v * v, ops.add, x))     # sum of squares, one pass
14.0
>>> lo, hi = xp.mapreduce(lambda v: (v, v), ops.minmax, x)
>>> float(lo), float(hi)
(1.0, 3.0)
"""

from __future__ import annotations

from . import _devices as _dev
from ._array import Array
from ._helpers import AxisError, named_axis_error
from ._kernel_layer import binding

__all__ = ["reduce", "mapreduce"]

_prim = binding("reductions", __name__, "_prim")  # loads numba at first use


def _unwrap(a, devices):
    if isinstance(a, (tuple, list)):
        return tuple(_unwrap(c, devices) for c in a)
    if not isinstance(a, Array):
        raise TypeError(f"expected forge_array arrays (or tuples of them), got "
                        f"{type(a).__name__}; convert with forge_array.asarray()")
    devices.append(a.device)
    return a._array


def _wrap(r, device):
    if isinstance(r, tuple):
        return tuple(Array._new(c, device) for c in r)
    return Array._new(r, device)


def reduce(op, x, /, *, axis=None, init=None, keepdims=False):
    """Reduce ``x`` with the associative binary operator ``op`` over ``axis``.

    ``op`` is a [`forge_array.ops`][forge_array.ops] operator (which brings its identity and fast paths)
    or any Python function ``op(a, b)`` numba can compile.  ``x`` is an array, or a tuple of
    arrays of one shape whose elements are then tuples (struct-of-arrays); the result is an
    array, or a tuple of arrays.  ``init`` is combined once on the left (``op(init,
    total)``) and is the result of an empty reduction; without it an empty reduction gives
    the operator's identity, or ValueError when it has none.

    Examples:
        >>> import forge_array as xp
        >>> from forge_array import ops
        >>> float(xp.reduce(ops.maximum, xp.asarray([1.0, 4.0, 2.0])))
        4.0
        >>> r = xp.reduce(lambda a, b: a * b, xp.asarray([[1, 2], [3, 4]]), axis=1)
        >>> list(map(int, r))
        [2, 12]
        >>> v, i = xp.reduce(ops.argmin, (xp.asarray([3.0, 1.0, 1.0]), xp.asarray([0, 1, 2])))
        >>> int(i)
        1
    """
    if axis is None and init is None and type(x) is Array:  # a replay of an earlier call
        r = _prim.mapreduce_fast(None, op, x._array, keepdims)
        if r is not None:
            return _wrap(r, x.device)
    devices: list = []
    xb = _unwrap(x, devices)
    if not devices:
        raise ValueError("reduce needs at least one array")
    _check_devices(devices)
    try:
        with _dev.on(devices[0]):   # the arrays' GPU, whichever is current
            r = _prim.reduce(op, xb, axis=axis, init=init, keepdims=keepdims)
    except AxisError as exc:
        raise named_axis_error(exc, "reduce") from None
    return _wrap(r, devices[0])


def mapreduce(f, op, *arrays, axis=None, init=None, keepdims=False):
    """Apply ``f`` to each element (one argument per array; a tuple of arrays passes a
    tuple) and reduce the results with ``op``, in one pass without temporaries.

    Examples:
        >>> import math
        >>> import forge_array as xp
        >>> from forge_array import ops
        >>> x = xp.asarray([1.0, float("nan"), 3.0])
        >>> int(xp.mapreduce(lambda v: 1 if v != v else 0, ops.add, x))     # count NaNs
        1
        >>> y = xp.asarray([0.0, 1.0, 2.0])
        >>> round(float(xp.mapreduce(None, ops.logaddexp, y)), 4)           # log-sum-exp
        2.4076
    """
    if axis is None and init is None and len(arrays) == 1 and type(arrays[0]) is Array:
        r = _prim.mapreduce_fast(f, op, arrays[0]._array, keepdims)   # replay of an earlier call
        if r is not None:
            return _wrap(r, arrays[0].device)
    devices: list = []
    bs = tuple(_unwrap(a, devices) for a in arrays)
    if not devices:
        raise TypeError("mapreduce needs at least one array")
    _check_devices(devices)
    try:
        with _dev.on(devices[0]):
            r = _prim.mapreduce(f, op, *bs, axis=axis, init=init, keepdims=keepdims)
    except AxisError as exc:
        raise named_axis_error(exc, "mapreduce") from None
    return _wrap(r, devices[0])


def _check_devices(devices):
    d0 = devices[0]
    for d in devices[1:]:
        if d != d0:
            raise ValueError(f"arrays on different devices: {d0} and {d}")
