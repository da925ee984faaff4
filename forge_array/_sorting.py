"""Sorting functions: argsort, sort (stable by default, optionally descending).

>>> import forge_array as xp
>>> xp.sort(xp.asarray([3, 1, 2], device="cpu"), descending=True)
Array([3, 2, 1], dtype=int64, device=cpu)
"""

from __future__ import annotations

from . import _devices as _dev
from . import _dtypes as _dt
from ._array import Array
from ._helpers import check_array, normalize_axis

__all__ = ["argsort", "sort"]


def _prep(name, x, axis):
    check_array(x, name)
    if x.dtype not in _dt.real_numeric_dtypes + (_dt.bool,):
        raise TypeError(f"{name}() requires a real-valued array, got {x.dtype}")
    if x.ndim == 0:
        if axis not in (-1, 0):
            raise IndexError(f"{name}(): axis {axis} is out of bounds for a 0-d array")
        return None
    return normalize_axis(axis, x.ndim, name)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    """Indices that sort ``x`` along ``axis``; ties keep their order when ``stable``.

    >>> import forge_array as xp
    >>> xp.argsort(xp.asarray([3, 1, 2], device="cpu"))
    Array([1, 2, 0], dtype=int64, device=cpu)
    """
    ax = _prep("argsort", x, axis)
    ns = _dev.compat(x.device)
    with _dev.on(x.device):
        if ax is None:
            return Array._new(_dev.backend(x.device).zeros((), dtype=_dt.int64), x.device)
        res = ns.argsort(x._array, axis=ax, descending=descending, stable=stable)
        return Array._new(res.astype(_dt.default_index, copy=False), x.device)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    """Sorted copy of ``x`` along ``axis``.

    >>> import forge_array as xp
    >>> xp.sort(xp.asarray([3, 1, 2], device="cpu"))
    Array([1, 2, 3], dtype=int64, device=cpu)
    """
    ax = _prep("sort", x, axis)
    ns = _dev.compat(x.device)
    with _dev.on(x.device):
        if ax is None:
            return Array._new(x._array.copy(), x.device)
        return Array._new(ns.sort(x._array, axis=ax, descending=descending, stable=stable),
                          x.device)
