"""Data type functions: astype, can_cast, finfo, iinfo, isdtype, result_type.

>>> import forge_array as xp
>>> xp.result_type(xp.int8, xp.uint8)
dtype('int16')
"""

from __future__ import annotations

from . import _devices as _dev
from . import _dtypes as _dt
from . import _routing
from ._array import Array, is_scalar, scalar_dtype
from ._dtypes import isdtype
from ._helpers import check_array
from ._interop import transfer
from .fusion import build as _fusion

__all__ = ["astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type"]


def astype(x, dtype, /, *, copy=True, device=None):
    """Cast ``x`` to ``dtype`` (complex -> real is refused); ``copy=False`` returns ``x``
    itself when nothing changes.

    >>> import forge_array as xp
    >>> xp.astype(xp.asarray([1.7, -1.7], device="cpu"), xp.int32)
    Array([ 1, -1], dtype=int32, device=cpu)
    """
    check_array(x, "astype")
    dtype = _dt.to_dtype(dtype)
    if x.dtype in _dt.complex_floating_dtypes and dtype not in _dt.complex_floating_dtypes:
        raise TypeError(f"astype(): casting complex {x.dtype} to real {dtype} would discard "
                        "the imaginary part; use real() or abs() first")
    dev = x.device if device is None else _dev.as_device(device)
    if dev == x.device and dtype != x.dtype and _fusion.ON[0]:
        r = _fusion.astype(x, dtype)
        if r is not None:
            return r
    arr = x._array
    moved = False
    if dev != x.device:
        arr = transfer(arr, x.device, dev)
        moved = True
    with _dev.on(dev):
        if arr.dtype != dtype:
            arr = arr.astype(dtype)
        elif copy and not moved:
            arr = _routing.copy(arr)
    if not copy and not moved and arr is x._array:
        return x
    return Array._new(arr, dev)


def _dtype_of(obj, name):
    if isinstance(obj, Array):
        return obj.dtype
    return _dt.to_dtype(obj, f"{name}() argument")


def can_cast(from_, to, /):
    """Whether ``from_`` (a dtype or array) can be cast to ``to`` by the standard's type
    promotion table (mixed kinds give False, with or without strict promotion).

    >>> import forge_array as xp
    >>> xp.can_cast(xp.int8, xp.int32), xp.can_cast(xp.int32, xp.float64)
    (True, False)
    """
    f = _dtype_of(from_, "can_cast")
    t = _dt.to_dtype(to, "to")
    r = _dt.promotion_table.get((f, t))
    return r is not None and r == t   # (None == float64 is True to NumPy)


def finfo(type, /):  # noqa: A002
    """Machine limits of a floating-point dtype (or array).

    >>> import forge_array as xp
    >>> xp.finfo(xp.float32).bits
    32
    """
    d = _dtype_of(type, "finfo")
    if d not in _dt.floating_dtypes:
        raise TypeError(f"finfo() requires a floating-point dtype, got {d}")
    return _dt.finfo_object(d)


def iinfo(type, /):  # noqa: A002
    """Machine limits of an integer dtype (or array).

    >>> import forge_array as xp
    >>> xp.iinfo(xp.int8).max
    127
    """
    d = _dtype_of(type, "iinfo")
    if d not in _dt.integer_dtypes:
        raise TypeError(f"iinfo() requires an integer dtype, got {d}")
    return _dt.iinfo_object(d)


def result_type(*arrays_and_dtypes):
    """The dtype type promotion gives for arrays, dtypes and Python scalars.

    At least one array or dtype is needed; Python scalars then take its kind. Dtypes of
    mixed kinds promote as in NumPy 2 unless strict promotion is on (see ``set_strict``).

    >>> import forge_array as xp
    >>> xp.result_type(xp.float32, 1.0)
    dtype('float32')
    """
    dtypes = []
    scalars = []
    for a in arrays_and_dtypes:
        if isinstance(a, Array):
            dtypes.append(a.dtype)
        elif is_scalar(a):
            scalars.append(a)
        else:
            dtypes.append(_dt.to_dtype(a, "result_type() argument"))
    if not dtypes:
        raise ValueError("result_type() needs at least one array or dtype")
    res = dtypes[0]
    for d in dtypes[1:]:
        res = _dt.promote(res, d)
    for s in scalars:
        res = _dt.promote(res, scalar_dtype(s, res, "scalar"))
    return res
