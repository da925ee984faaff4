"""Utility functions: all, any, diff.

>>> import forge_array as xp
>>> bool(xp.all(xp.asarray([True, False], device="cpu")))
False
"""

from __future__ import annotations

import builtins

import numpy as np

from . import _devices as _dev
from . import _dtypes as _dt
from . import _routing
from ._array import Array
from ._helpers import as_int, check_array, normalize_axes, normalize_axis
from ._statistical import axis_fast, checked, full_fast
from .fusion import build as _fusion

__all__ = ["all", "any", "diff"]


def _logical(name, x, axis, keepdims):
    r = full_fast(name, x, None, keepdims) if axis is None else axis_fast(name, x, axis, None, keepdims)
    if r is not None:
        return r
    check_array(x, name)
    checked(name, x, None, None, None)
    axes = normalize_axes(axis, x.ndim, name)
    if not isinstance(keepdims, bool):
        raise TypeError(f"{name}(): keepdims must be a bool")
    if _fusion.ON[0]:
        r = _fusion.reduction(name, x, axes, np.dtype(np.bool_), keepdims)
        if r is not None:
            return r
    fn = _routing.reduce_all if name == "all" else _routing.reduce_any
    with _dev.on(x.device):
        return Array._new(fn(x._array, axes, keepdims), x.device)


def all(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """Whether all elements along ``axis`` are true (non-zero); True when empty.

    >>> import forge_array as xp
    >>> xp.all(xp.asarray([[1, 0], [1, 1]], device="cpu"), axis=1)
    Array([False,  True], dtype=bool, device=cpu)
    """
    return _logical("all", x, axis, keepdims)


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """Whether any element along ``axis`` is true (non-zero); False when empty.

    >>> import forge_array as xp
    >>> bool(xp.any(xp.asarray([0, 0, 3], device="cpu")))
    True
    """
    return _logical("any", x, axis, keepdims)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """n-th discrete difference along ``axis``, optionally with ``prepend``/``append``.

    >>> import forge_array as xp
    >>> xp.diff(xp.asarray([1, 4, 9], device="cpu"))
    Array([3, 5], dtype=int64, device=cpu)
    """
    check_array(x, "diff")
    if x.ndim == 0:
        raise ValueError("diff(): x must have at least one dimension")
    ax = normalize_axis(axis, x.ndim, "diff")
    n = as_int(n, "diff", "n")
    if n < 0:
        raise ValueError("diff(): n must be non-negative")
    dt = x.dtype
    for extra, what in ((prepend, "prepend"), (append, "append")):
        if extra is None:
            continue
        check_array(extra, "diff", what)
        _dev.check_same_device(x.device, extra.device)
        if extra.ndim != x.ndim or builtins.any(extra.shape[i] != x.shape[i]
                                        for i in range(x.ndim) if i != ax):
            raise ValueError(f"diff(): {what} of shape {extra.shape} does not match x of "
                             f"shape {x.shape} outside axis {ax}")
        dt = _dt.promote(dt, extra.dtype)
    m = _dev.backend(x.device)
    with _dev.on(x.device):
        arr = x._array.astype(dt, copy=False)
        if prepend is not None:
            arr = m.concatenate([prepend._array.astype(dt, copy=False), arr], axis=ax)
        if append is not None:
            arr = m.concatenate([arr, append._array.astype(dt, copy=False)], axis=ax)
        if dt == _dt.bool:
            for _ in range(n):
                sl1 = [slice(None)] * arr.ndim
                sl2 = [slice(None)] * arr.ndim
                sl1[ax] = slice(1, None)
                sl2[ax] = slice(None, -1)
                arr = arr[tuple(sl1)] != arr[tuple(sl2)]
            return Array._new(arr, x.device)
        return Array._new(m.diff(arr, n=n, axis=ax), x.device)
