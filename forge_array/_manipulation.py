"""Manipulation functions of the standard.

>>> import forge_array as xp
>>> xp.concat([xp.ones(2, device="cpu"), xp.zeros(1, device="cpu")])
Array([1., 1., 0.], dtype=float64, device=cpu)
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from . import _devices as _dev
from . import _dtypes as _dt
from . import _routing
from ._array import Array, take_view
from ._helpers import as_int, check_array, normalize_axes, normalize_axis, normalize_shape

__all__ = [
    "broadcast_arrays", "broadcast_shapes", "broadcast_to", "concat", "expand_dims", "flip",
    "moveaxis", "permute_dims", "repeat", "reshape", "roll", "squeeze", "stack", "tile",
    "unstack",
]


def _m(x):
    return _dev.backend(x.device)


def broadcast_shapes(*shapes):
    """The shape that broadcasting the given shapes produces (ValueError if none).

    >>> import forge_array as xp
    >>> xp.broadcast_shapes((2, 1), (3,))
    (2, 3)
    """
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        dim = 1
        for s in shapes:
            if len(s) < -i:
                continue
            d = s[i]
            if d is None:
                dim = None if dim in (1, None) else dim
                continue
            d = as_int(d, "broadcast_shapes", "dimensions")
            if d == 1:
                continue
            if dim is None or dim == 1:
                dim = d
            elif dim != d:
                raise ValueError(f"shapes {shapes} cannot be broadcast together "
                                 f"(sizes {dim} and {d} at axis {i})")
        out.append(dim)
    return tuple(out)


def broadcast_to(x, /, shape):
    """A read-only broadcast view of ``x`` with ``shape``.

    >>> import forge_array as xp
    >>> xp.broadcast_to(xp.asarray([1, 2], device="cpu"), (2, 2)).shape
    (2, 2)
    """
    check_array(x, "broadcast_to")
    shape = normalize_shape(shape, "broadcast_to")
    if broadcast_shapes(x.shape, shape) != shape:
        raise ValueError(f"broadcast_to(): cannot broadcast shape {x.shape} to {shape}")
    with _dev.on(x.device):
        bt = _m(x).broadcast_to
        return take_view(x, lambda a: bt(a, shape))


def broadcast_arrays(*arrays):
    """Broadcast arrays against each other (a tuple of views).

    >>> import forge_array as xp
    >>> a, b = xp.broadcast_arrays(xp.ones((2, 1), device="cpu"), xp.ones(3, device="cpu"))
    >>> a.shape, b.shape
    ((2, 3), (2, 3))
    """
    for a in arrays:
        check_array(a, "broadcast_arrays", "arrays")
    if not arrays:
        return ()
    _dev.check_same_device(*[a.device for a in arrays])
    shape = broadcast_shapes(*[a.shape for a in arrays])
    return tuple(broadcast_to(a, shape) for a in arrays)


def _common(arrays, name):
    arrays = list(arrays)
    if not arrays:
        raise ValueError(f"{name}() needs at least one array")
    for a in arrays:
        check_array(a, name, "arrays")
    dev = _dev.check_same_device(*[a.device for a in arrays])
    dt = arrays[0].dtype
    for a in arrays[1:]:
        dt = _dt.promote(dt, a.dtype)
    return arrays, dev, dt


def concat(arrays, /, *, axis=0):
    """Join arrays along an existing axis (``axis=None`` flattens them first).

    >>> import forge_array as xp
    >>> xp.concat((xp.ones((1, 2), device="cpu"), xp.ones((1, 2), device="cpu"))).shape
    (2, 2)
    """
    arrays, dev, dt = _common(arrays, "concat")
    m = _dev.backend(dev)
    parts = [a._array if a.dtype == dt else a._array.astype(dt) for a in arrays]
    with _dev.on(dev):
        if axis is None:
            return Array._new(m.concatenate([p.reshape(-1) for p in parts]), dev)
        ndim = arrays[0].ndim
        if ndim == 0:
            raise ValueError("concat(): zero-dimensional arrays cannot be concatenated")
        if builtins.any(a.ndim != ndim for a in arrays):
            raise ValueError("concat(): all arrays must have the same number of dimensions")
        ax = normalize_axis(axis, ndim, "concat")
        for a in arrays[1:]:
            if a.shape[:ax] + a.shape[ax + 1:] != arrays[0].shape[:ax] + arrays[0].shape[ax + 1:]:
                raise ValueError(f"concat(): shapes {arrays[0].shape} and {a.shape} differ "
                                 f"outside axis {ax}")
        return Array._new(m.concatenate(parts, axis=ax), dev)


def stack(arrays, /, *, axis=0):
    """Join arrays of equal shape along a new axis.

    >>> import forge_array as xp
    >>> xp.stack([xp.ones(2, device="cpu"), xp.zeros(2, device="cpu")], axis=1).shape
    (2, 2)
    """
    arrays, dev, dt = _common(arrays, "stack")
    shape = arrays[0].shape
    if builtins.any(a.shape != shape for a in arrays):
        raise ValueError("stack(): all arrays must have the same shape")
    ax = normalize_axis(axis, len(shape) + 1, "stack")
    parts = [a._array if a.dtype == dt else a._array.astype(dt) for a in arrays]
    with _dev.on(dev):
        return Array._new(_dev.backend(dev).stack(parts, axis=ax), dev)


def expand_dims(x, /, axis):
    """Insert singleton dimension(s) at ``axis`` (an int or a tuple).

    >>> import forge_array as xp
    >>> xp.expand_dims(xp.ones(3, device="cpu"), axis=(0, -1)).shape
    (1, 3, 1)
    """
    check_array(x, "expand_dims")
    axes = axis if isinstance(axis, tuple) else (axis,)
    n = x.ndim + len(axes)
    norm = normalize_axes(axes, n, "expand_dims")
    shape = list(x.shape)
    for a in norm:
        shape.insert(a, 1)
    shape = tuple(shape)
    return take_view(x, lambda a: a.reshape(shape))


def flip(x, /, *, axis=None):
    """Reverse the order of elements along ``axis`` (all axes by default); a view.

    >>> import forge_array as xp
    >>> xp.flip(xp.asarray([1, 2, 3], device="cpu"))
    Array([3, 2, 1], dtype=int64, device=cpu)
    """
    check_array(x, "flip")
    axes = normalize_axes(axis, x.ndim, "flip")
    idx = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))
    return Array._new(x._array[idx], x.device)


def moveaxis(x, source, destination, /):
    """Move axes of ``x`` to new positions.

    >>> import forge_array as xp
    >>> xp.moveaxis(xp.ones((2, 3, 4), device="cpu"), 0, -1).shape
    (3, 4, 2)
    """
    check_array(x, "moveaxis")
    src = source if isinstance(source, tuple) else (source,)
    dst = destination if isinstance(destination, tuple) else (destination,)
    if len(src) != len(dst):
        raise ValueError("moveaxis(): source and destination need the same number of axes")
    s = [normalize_axis(a, x.ndim, "moveaxis") for a in src]
    d = [normalize_axis(a, x.ndim, "moveaxis") for a in dst]
    if len(set(s)) != len(s) or len(set(d)) != len(d):
        raise ValueError("moveaxis(): repeated axes")
    with _dev.on(x.device):
        return Array._new(_m(x).moveaxis(x._array, s, d), x.device)


def permute_dims(x, /, axes):
    """Permute the axes of ``x`` (negative axes allowed); a view.

    >>> import forge_array as xp
    >>> xp.permute_dims(xp.ones((2, 3), device="cpu"), (1, 0)).shape
    (3, 2)
    """
    check_array(x, "permute_dims")
    ax = [normalize_axis(a, x.ndim, "permute_dims") for a in axes]
    if sorted(ax) != list(range(x.ndim)):
        raise ValueError(f"permute_dims(): {tuple(axes)} is not a permutation of the "
                         f"{x.ndim} axes")
    return take_view(x, lambda a: a.transpose(ax))


def reshape(x, /, shape, *, copy=None):
    """Give ``x`` a new shape (one entry may be -1). ``copy=False`` raises ValueError
    when a view is impossible.

    >>> import forge_array as xp
    >>> xp.reshape(xp.arange(6, device="cpu"), (2, -1)).shape
    (2, 3)
    """
    check_array(x, "reshape")
    shape = tuple(as_int(s, "reshape", "shape entries") for s in
                  (shape if isinstance(shape, (tuple, list)) else (shape,)))
    if builtins.sum(1 for s in shape if s == -1) > 1 or builtins.any(s < -1 for s in shape):
        raise ValueError(f"reshape(): invalid shape {shape}")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or x.size % known:
            raise ValueError(f"reshape(): cannot reshape {x.shape} into {shape}")
    elif known != x.size:
        raise ValueError(f"reshape(): cannot reshape array of size {x.size} into {shape}")
    with _dev.on(x.device):
        if copy is True:
            res = _routing.copy(x._array).reshape(shape)
        else:
            res = x._array.reshape(shape)
            if copy is False and x.size and not _shares(res, x._array):
                raise ValueError(f"reshape(copy=False): {x.shape} -> {shape} needs a copy")
    return Array._new(res, x.device)


def _ptr(a):
    if isinstance(a, np.ndarray):
        return a.__array_interface__["data"][0]
    return a.data.ptr


def _shares(a, b):
    # a copy always allocates new memory, so equal data pointers mean a view
    return _ptr(a) == _ptr(b)


def repeat(x, repeats, /, *, axis=None):
    """Repeat each element ``repeats`` times (an int or a 1-D integer array).

    >>> import forge_array as xp
    >>> xp.repeat(xp.asarray([1, 2], device="cpu"), 2)
    Array([1, 1, 2, 2], dtype=int64, device=cpu)
    """
    check_array(x, "repeat")
    if isinstance(repeats, Array):
        _dev.check_same_device(x.device, repeats.device)
        if repeats.dtype not in _dt.integer_dtypes:
            raise TypeError(f"repeat(): repeats must have an integer dtype, got {repeats.dtype}")
        if repeats.ndim > 1:
            raise ValueError("repeat(): repeats must be 0-d or 1-D")
        r = repeats._host().tolist()
    else:
        r = as_int(repeats, "repeat", "repeats")
    if builtins.any(v < 0 for v in (r if isinstance(r, list) else [r])):
        raise ValueError("repeat(): repeats must be non-negative")
    arr = x._array
    if axis is None:
        arr = arr.reshape(-1)
        ax = 0
    else:
        ax = normalize_axis(axis, x.ndim, "repeat")
    if isinstance(r, list) and len(r) not in (1, arr.shape[ax]):
        raise ValueError(f"repeat(): {len(r)} repeats for an axis of length {arr.shape[ax]}")
    with _dev.on(x.device):
        return Array._new(_m(x).repeat(arr, r, axis=ax), x.device)


def roll(x, /, shift, *, axis=None):
    """Roll elements along ``axis`` (the flattened array by default).

    >>> import forge_array as xp
    >>> xp.roll(xp.asarray([1, 2, 3], device="cpu"), 1)
    Array([3, 1, 2], dtype=int64, device=cpu)
    """
    check_array(x, "roll")
    if isinstance(shift, tuple):
        shift = tuple(as_int(s, "roll", "shift") for s in shift)
    else:
        shift = as_int(shift, "roll", "shift")
    if axis is not None:
        ax = axis if isinstance(axis, tuple) else (axis,)
        axis = tuple(normalize_axis(a, x.ndim, "roll") for a in ax)
        if isinstance(shift, tuple) and len(shift) != len(axis):
            raise ValueError("roll(): shift and axis must have the same length")
    elif isinstance(shift, tuple):
        raise ValueError("roll(): a tuple shift needs axis")
    with _dev.on(x.device):
        return Array._new(_m(x).roll(x._array, shift, axis=axis), x.device)


def squeeze(x, /, axis):
    """Remove singleton dimension(s) ``axis`` (ValueError if one is not of size 1).

    >>> import forge_array as xp
    >>> xp.squeeze(xp.ones((1, 3), device="cpu"), axis=0).shape
    (3,)
    """
    check_array(x, "squeeze")
    axes = normalize_axes(axis, x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze(): axis {a} has size {x.shape[a]}, not 1")
    shape = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    return take_view(x, lambda a: a.reshape(shape))


def tile(x, repetitions, /):
    """Repeat ``x`` ``repetitions[i]`` times along each axis.

    >>> import forge_array as xp
    >>> xp.tile(xp.asarray([1, 2], device="cpu"), (2,))
    Array([1, 2, 1, 2], dtype=int64, device=cpu)
    """
    check_array(x, "tile")
    reps = tuple(as_int(r, "tile", "repetitions") for r in repetitions)
    if builtins.any(r < 0 for r in reps):
        raise ValueError("tile(): repetitions must be non-negative")
    with _dev.on(x.device):
        return Array._new(_m(x).tile(x._array, reps), x.device)


def unstack(x, /, *, axis=0):
    """Split ``x`` along ``axis`` into a tuple of views.

    >>> import forge_array as xp
    >>> len(xp.unstack(xp.ones((3, 2), device="cpu")))
    3
    """
    check_array(x, "unstack")
    if x.ndim == 0:
        raise ValueError("unstack(): x must have at least one dimension")
    ax = normalize_axis(axis, x.ndim, "unstack")
    arr = x._array
    return tuple(Array._new(arr[(slice(None),) * ax + (i,)], x.device)
                 for i in range(x.shape[ax]))
