"""Indexing functions: take, take_along_axis (out-of-range indices raise IndexError).

>>> import forge_array as xp
>>> xp.take(xp.asarray([10, 20, 30], device="cpu"), xp.asarray([2, 0], device="cpu"))
Array([30, 10], dtype=int64, device=cpu)
"""

from __future__ import annotations

from . import _devices as _dev
from . import _dtypes as _dt
from ._array import Array
from ._backend_indexing import indices_outside
from ._helpers import check_array, normalize_axis

__all__ = ["take", "take_along_axis"]


def _check_indices(name, idx, n, device):
    if idx.dtype not in _dt.integer_dtypes:
        raise TypeError(f"{name}(): indices must have an integer dtype, got {idx.dtype}")
    if idx.size == 0:
        return
    with _dev.on(device):
        bad = indices_outside(idx._array, n)
    if bad:
        raise IndexError(f"{name}(): index out of bounds for an axis of size {n}")


def take(x, indices, /, *, axis=None):
    """Elements of ``x`` at ``indices`` (1-D integer array) along ``axis``.

    >>> import forge_array as xp
    >>> x = xp.reshape(xp.arange(6, device="cpu"), (2, 3))
    >>> xp.take(x, xp.asarray([2], device="cpu"), axis=1)
    Array([[2],
           [5]], dtype=int64, device=cpu)
    """
    check_array(x, "take")
    check_array(indices, "take", "indices")
    _dev.check_same_device(x.device, indices.device)
    if indices.ndim != 1:
        raise ValueError(f"take(): indices must be 1-D, got shape {indices.shape}")
    if axis is None:
        if x.ndim != 1:
            raise ValueError("take(): axis is required for arrays of more than one dimension")
        ax = 0
    else:
        ax = normalize_axis(axis, x.ndim, "take")
    _check_indices("take", indices, x.shape[ax], x.device)
    with _dev.on(x.device):
        return Array._new(_dev.backend(x.device).take(x._array, indices._array, axis=ax),
                          x.device)


def take_along_axis(x, indices, /, *, axis=-1):
    """Pick values of ``x`` along ``axis`` at ``indices`` of the same rank.

    >>> import forge_array as xp
    >>> x = xp.asarray([[10, 30, 20]], device="cpu")
    >>> xp.take_along_axis(x, xp.argsort(x, axis=1), axis=1)
    Array([[10, 20, 30]], dtype=int64, device=cpu)
    """
    check_array(x, "take_along_axis")
    check_array(indices, "take_along_axis", "indices")
    _dev.check_same_device(x.device, indices.device)
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_axis(): indices must have the rank of x ({x.ndim}), got "
                         f"{indices.ndim}")
    ax = normalize_axis(axis, x.ndim, "take_along_axis")
    _check_indices("take_along_axis", indices, x.shape[ax], x.device)
    with _dev.on(x.device):
        res = _dev.backend(x.device).take_along_axis(x._array, indices._array, axis=ax)
    return Array._new(res, x.device)
