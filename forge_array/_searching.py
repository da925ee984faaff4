"""Searching functions: argmax, argmin, count_nonzero, nonzero, searchsorted, where.

>>> import forge_array as xp
>>> int(xp.argmax(xp.asarray([1, 5, 2], device="cpu")))
1
"""

from __future__ import annotations

from . import _devices as _dev
from . import _dtypes as _dt
from . import _routing
from ._array import Array, is_scalar, values_read
from ._elementwise import binary_operands, binary_types, types_key
from ._helpers import check_array, normalize_axes, normalize_axis
from ._statistical import checked, full_fast
from .fusion import auto as _fusion_auto
from .fusion import build as _fusion
from .runtime.caches import Cache

_MIN = _fusion_auto.MIN_SIZE  # automatic fusion's size threshold (a one-element list)
_PY = _fusion.PY_SCALARS

__all__ = ["argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where"]


def _arg(name, x, axis, keepdims):
    if axis is None:
        r = full_fast(name, x, None, keepdims)
        if r is not None:
            return r
    check_array(x, name)
    if x.dtype not in _dt.real_numeric_dtypes:
        raise TypeError(f"{name}() requires a real numeric array, got {x.dtype}")
    checked(name, x, None, None, None)
    if not isinstance(keepdims, bool):
        raise TypeError(f"{name}(): keepdims must be a bool")
    if axis is None:
        if x.size == 0:
            raise ValueError(f"{name}() of an empty array")
        ax = None
    else:
        ax = normalize_axis(axis, x.ndim, name)
        if x.shape[ax] == 0:
            raise ValueError(f"{name}() along axis {ax} of length 0")
    if _fusion.ON[0]:
        r = _fusion.reduction(name, x, tuple(range(x.ndim)) if ax is None else (ax,), x.dtype,
                              keepdims)
        if r is not None:
            return r
    fn = _routing.argmax if name == "argmax" else _routing.argmin
    with _dev.on(x.device):
        return Array._new(fn(x._array, ax, keepdims), x.device)


def argmax(x, /, *, axis=None, keepdims=False):
    """Index of the first maximum (of the flattened array when ``axis`` is None).

    >>> import forge_array as xp
    >>> xp.argmax(xp.asarray([[1, 9], [7, 3]], device="cpu"), axis=1)
    Array([1, 0], dtype=int64, device=cpu)
    """
    return _arg("argmax", x, axis, keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    """Index of the first minimum (of the flattened array when ``axis`` is None).

    >>> import forge_array as xp
    >>> int(xp.argmin(xp.asarray([4, 1, 1], device="cpu")))
    1
    """
    return _arg("argmin", x, axis, keepdims)


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """Number of non-zero elements along ``axis`` (default integer dtype).

    >>> import forge_array as xp
    >>> int(xp.count_nonzero(xp.asarray([0, 1, 2], device="cpu")))
    2
    """
    check_array(x, "count_nonzero")
    axes = normalize_axes(axis, x.ndim, "count_nonzero")
    with _dev.on(x.device):
        nz = x._array != 0
        res = _routing.reduce_sum(nz, axes, _dt.default_int, bool(keepdims))
    return Array._new(res, x.device)


def nonzero(x, /):
    """Indices of the non-zero elements, one int64 array per dimension.

    >>> import forge_array as xp
    >>> xp.nonzero(xp.asarray([0, 3, 0, 4], device="cpu"))
    (Array([1, 3], dtype=int64, device=cpu),)
    """
    check_array(x, "nonzero")
    if x.ndim == 0:
        raise ValueError("nonzero() is not defined for 0-d arrays")
    values_read()  # the values decide the result's shape
    with _dev.on(x.device):
        if x.device.is_cuda:
            res = _routing.nonzero(x._array)
        else:
            res = _dev.backend(x.device).nonzero(x._array)
        return tuple(Array._new(r.astype(_dt.default_index, copy=False), x.device)
                     for r in res)


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Insertion indices of ``x2`` into the sorted 1-D ``x1``.

    >>> import forge_array as xp
    >>> xp.searchsorted(xp.asarray([1, 3, 5], device="cpu"), xp.asarray([4], device="cpu"))
    Array([2], dtype=int64, device=cpu)
    """
    check_array(x1, "searchsorted", "x1")
    if x1.ndim != 1:
        raise ValueError(f"searchsorted(): x1 must be 1-D, got shape {x1.shape}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted(): side must be 'left' or 'right', got {side!r}")
    if not isinstance(x2, Array) and not is_scalar(x2):
        raise TypeError("searchsorted(): x2 must be an array or a Python scalar")
    a, b, dt, dev = binary_operands("searchsorted", x1, x2, "real numeric", False)
    s = None
    if sorter is not None:
        check_array(sorter, "searchsorted", "sorter")
        _dev.check_same_device(dev, sorter.device)
        if sorter.dtype not in _dt.integer_dtypes or sorter.shape != x1.shape:
            raise ValueError("searchsorted(): sorter must be an integer array shaped like x1")
        s = sorter._array
    with _dev.on(dev):
        m = _dev.backend(dev)
        res = m.searchsorted(a, m.asarray(b), side=side, sorter=s)
        res = _dev.backend(dev).asarray(res).astype(_dt.default_index, copy=False)
    return Array._new(res, dev)


def where(condition, x1, x2, /):
    """Elements of ``x1`` where ``condition`` is true, else of ``x2`` (scalars allowed).

    >>> import forge_array as xp
    >>> c = xp.asarray([True, False], device="cpu")
    >>> xp.where(c, xp.asarray([1, 2], device="cpu"), 0)
    Array([1, 0], dtype=int64, device=cpu)
    """
    check_array(condition, "where", "condition")
    if condition.dtype != _dt.bool:
        raise TypeError(f"where(): condition must be a boolean array, got {condition.dtype}")
    dev = condition._device
    if (type(condition) is Array and type(x1) is Array and (type(x2) is float or type(x2) is int)
            and x1._device is dev
            and not (_fusion.ON[0] and (_fusion.ACTIVE[0] or condition._array.size >= _MIN[0]
                                        or x1._array.size >= _MIN[0]))):
        a = x1._array
        sdt = _WHERE_SCALAR.get((a.dtype, type(x2), dev._kind))
        if sdt is not None:   # where(c, x, 0.0): checks that depend on the types alone passed before
            m = _dev.backend(dev)
            if dev._kind == "cuda":
                b = sdt.type(x2)
                if _dev.current_cuda_index() != dev._index:
                    with _dev.on(dev):
                        return Array._new(m.where(condition._array, a, b), dev)
            else:
                b = m.asarray(x2, dtype=sdt)
            return Array._new(m.where(condition._array, a, b), dev)
    # asks the builder unless the step is small and eager (the rule beside
    # fusion.build.PY_SCALARS, inlined: small eager calls pay these checks only)
    if (_fusion.ON[0]
            and (_fusion.ACTIVE[0]
                 or not (type(condition) is Array and condition._array.size < _MIN[0])
                 or not (type(x1) is Array and x1._array.size < _MIN[0] or type(x1) in _PY)
                 or not (type(x2) is Array and x2._array.size < _MIN[0] or type(x2) in _PY))
            and _fusion.wanted(condition, x1, x2)):
        dt, dev, s1, s2 = binary_types("where", x1, x2, "any")
        _dev.check_same_device(condition.device, dev)
        r = _fusion.where(condition, x1, x2, dt, dev, s1, s2)
        if r is not None:
            return r
    a, b, dt, dev = binary_operands("where", x1, x2, "any")
    _dev.check_same_device(condition.device, dev)
    with _dev.on(dev):
        res = _dev.backend(dev).where(condition._array, a, b)
    if (type(x1) is Array and a is x1._array and a.dtype == dt == b.dtype and type(x2) is not Array
            and types_key("where", "any", x1, x2) is not None):
        _WHERE_SCALAR[(dt, type(x2), dev._kind)] = dt
    return Array._new(res, dev)


#: (array dtype, ``float`` or ``int``, device kind) -> the scalar's dtype, for ``where(c, x, s)``
#: calls with an array ``x`` and a Python scalar ``s`` whose checks depend on the types alone
#: and that reached the backend with ``x`` unconverted
_WHERE_SCALAR = Cache("_searching.WHERE_SCALAR")
_dt.ON_SWITCH.append(_WHERE_SCALAR.clear)
