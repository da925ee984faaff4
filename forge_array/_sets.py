"""Set functions: unique_all, unique_counts, unique_inverse, unique_values, isin.

NaNs are all distinct; ``inverse_indices`` has the shape of ``x``.

>>> import forge_array as xp
>>> xp.unique_values(xp.asarray([2, 1, 2], device="cpu"))
Array([1, 2], dtype=int64, device=cpu)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _devices as _dev
from . import _dtypes as _dt
from . import _routing
from ._array import Array, is_scalar, py_scalar, values_read
from ._helpers import check_array
from ._interop import transfer_together

__all__ = ["isin", "unique_all", "unique_counts", "unique_inverse", "unique_values"]


class UniqueAllResult(NamedTuple):
    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCountsResult(NamedTuple):
    values: Array
    counts: Array


class UniqueInverseResult(NamedTuple):
    values: Array
    inverse_indices: Array


#: a GPU array of at most this many elements is made unique on the host: its values are
#: read back in any case (they decide the result's shape), and NumPy's sort of a few
#: thousand values costs less than the launches of a GPU sort and compaction
#: (``python -m bench.suite_hostops --only unique``: the 4 labels and 4,096 values rows)
HOST_MAX = 4096


def _unique_on_host(x, index, inverse, counts):
    """``(values, index, inverse, counts)`` of ``x`` (flat, None where not asked) from NumPy's
    ``unique`` (of a host copy for a GPU array, moved back in one copy): the compaction's
    results (every NaN a value of its own, in the order of its occurrences)."""
    stable = index or inverse   # NumPy sorts stably (NaNs in order) only when asked for indices
    host = x._array.get() if x.device.is_cuda else x._array
    r = np.unique(host.reshape(-1), return_index=stable, return_inverse=inverse,
                  return_counts=counts, equal_nan=False)
    parts = list(r) if stable or counts else [r]
    if stable and not index:
        del parts[1]
    moved = iter(transfer_together(parts, x.device) if x.device.is_cuda else parts)
    v = next(moved)
    return (v, next(moved) if index else None, next(moved) if inverse else None,
            next(moved) if counts else None)


def _call(name, x, index=False, inverse=False, counts=False):
    """``(values, index, inverse, counts)`` of ``x`` (None where not asked): our compaction
    on a GPU (:func:`._routing.unique`; NumPy's on a copy for up to :data:`HOST_MAX`
    elements), NumPy's ``unique`` on the CPU, else the backend's function ``name``."""
    check_array(x, name)
    values_read()  # the values decide the result's shape
    with _dev.on(x.device):
        if x.device.is_cuda and x.size <= HOST_MAX:
            return _unique_on_host(x, index, inverse, counts)
        r = _routing.unique(x._array, index, inverse, counts)
        if r is not None:
            return r
        if not x.device.is_cuda:   # NumPy's own function (its wrapper asks for its signature per call)
            return _unique_on_host(x, index, inverse, counts)
        r = getattr(_dev.compat(x.device), name)(x._array)
    if name == "unique_values":
        return r, None, None, None
    it = iter(r)
    v = next(it)
    return (v, next(it) if index else None, next(it) if inverse else None,
            next(it) if counts else None)


def _w(a, x, index=False):
    if index:
        a = a.astype(_dt.default_index, copy=False)
    return Array._new(a, x.device)


def unique_all(x, /):
    """Unique values with first indices, inverse indices and counts.

    >>> import forge_array as xp
    >>> r = xp.unique_all(xp.asarray([2, 1, 2], device="cpu"))
    >>> r.counts
    Array([1, 2], dtype=int64, device=cpu)
    """
    v, i, inv, c = _call("unique_all", x, index=True, inverse=True, counts=True)
    return UniqueAllResult(_w(v, x), _w(i, x, True), _w(inv.reshape(x.shape), x, True), _w(c, x, True))


def unique_counts(x, /):
    """Unique values and their counts.

    >>> import forge_array as xp
    >>> xp.unique_counts(xp.asarray([2, 1, 2], device="cpu")).values
    Array([1, 2], dtype=int64, device=cpu)
    """
    v, _, _, c = _call("unique_counts", x, counts=True)
    return UniqueCountsResult(_w(v, x), _w(c, x, True))


def unique_inverse(x, /):
    """Unique values and the indices reconstructing ``x`` from them.

    >>> import forge_array as xp
    >>> xp.unique_inverse(xp.asarray([2, 1, 2], device="cpu")).inverse_indices
    Array([1, 0, 1], dtype=int64, device=cpu)
    """
    v, _, inv, _ = _call("unique_inverse", x, inverse=True)
    return UniqueInverseResult(_w(v, x), _w(inv.reshape(x.shape), x, True))


def unique_values(x, /):
    """Unique values of ``x`` (flattened, sorted).

    >>> import forge_array as xp
    >>> xp.unique_values(xp.asarray([3, 3, 1], device="cpu"))
    Array([1, 3], dtype=int64, device=cpu)
    """
    return _w(_call("unique_values", x)[0], x)


def isin(x1, x2, /, *, invert=False):
    """Whether each element of ``x1`` is in ``x2`` (either may be a Python int).

    >>> import forge_array as xp
    >>> xp.isin(xp.asarray([1, 2, 3], device="cpu"), xp.asarray([2], device="cpu"))
    Array([False,  True, False], dtype=bool, device=cpu)
    """
    if not isinstance(x1, Array) and not isinstance(x2, Array):
        raise TypeError("isin(): at least one of x1, x2 must be an array")
    dev = (x1 if isinstance(x1, Array) else x2).device
    m = _dev.backend(dev)

    def arg(v, what):
        if isinstance(v, Array):
            return v._array
        if is_scalar(v):
            return py_scalar(v)
        raise TypeError(f"isin(): {what} must be an array or a Python scalar")

    if isinstance(x1, Array) and isinstance(x2, Array):
        _dev.check_same_device(x1.device, x2.device)
    a, b = arg(x1, "x1"), arg(x2, "x2")
    with _dev.on(dev):
        if not isinstance(a, (int, float, complex, bool)):
            res = m.isin(a, m.asarray(b) if not hasattr(b, "shape") else b, invert=invert)
        else:
            res = m.isin(m.asarray(a), b, invert=invert)
        return Array._new(m.asarray(res), dev)
