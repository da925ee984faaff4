"""Generic scans on forge_array arrays: ``accumulate``.

A thin wrapper over :func:`forge_array.primitives.accumulate`: unwrap the arrays (or tuples
of arrays, struct-of-arrays), check devices, call the primitive, wrap the results.

>>> import forge_array as xp
>>> from forge_array import ops
>>> a = xp.asarray([0.5, 0.5, 0.5])          # h_t = a_t * h_(t-1) + b_t
>>> b = xp.asarray([1.0, 1.0, 1.0])
>>> _, h = xp.accumulate(ops.affine, (a, b))
>>> [float(v) for v in h]
[1.0, 1.5, 1.75]
"""

from __future__ import annotations

from . import _array as _array_module
from . import _devices as _dev
from ._array import Array
from ._helpers import AxisError, named_axis_error
from ._kernel_layer import binding

__all__ = ["accumulate"]

_prim = binding("scan", __name__, "_prim")  # loads numba at first use


def _unwrap(a, devices, what):
    if isinstance(a, (tuple, list)):
        return tuple(_unwrap(c, devices, what) for c in a)
    if not isinstance(a, Array):
        raise TypeError(f"accumulate: {what} must be forge_array arrays (or tuples of them), got "
                        f"{type(a).__name__}; convert with forge_array.asarray()")
    devices.append(a.device)
    return a._array


def accumulate(op, x, /, *, axis=None, init=None, include_initial=False, exclusive=False,
               reverse=False, out=None, deterministic=False):
    """Inclusive scan of ``x`` with the associative operator ``op`` along ``axis``.

    ``op`` is a [`forge_array.ops`][forge_array.ops] operator or any Python function ``op(a, b)`` numba
    can compile, commutative or not. ``x`` is an array, or a tuple of arrays of one shape
    whose elements are then tuples (struct-of-arrays); the result is an array or a tuple of
    arrays. ``axis=None`` scans the C-order flattening. ``init`` is combined on the left:
    a scalar (a tuple for tuple operators), or an array of ``x``'s shape without ``axis``
    holding one value per scan.
    ``include_initial`` prepends ``init`` (or the identity), ``exclusive`` gives each
    element the combination of those before it, ``reverse`` scans from the end, ``out``
    receives the result, ``deterministic`` makes float results bitwise reproducible. See
    [Scans](scans.md).

    Examples:
        >>> import numpy as np
        >>> import forge_array as xp
        >>> x = xp.asarray([[1, 2, 3], [4, 5, 6]])
        >>> np.from_dlpack(xp.accumulate(lambda a, b: a * b, x, axis=1)).tolist()
        [[1, 2, 6], [4, 20, 120]]
        >>> r = xp.accumulate(lambda a, b: a + b, x, axis=0, include_initial=True, init=10)
        >>> np.from_dlpack(r).tolist()
        [[10, 10, 10], [11, 12, 13], [15, 17, 19]]
        >>> r = xp.accumulate(lambda a, b: a + b, x, axis=0, init=xp.asarray([0, 10, 100]))
        >>> np.from_dlpack(r).tolist()
        [[1, 12, 103], [5, 17, 109]]
    """
    if out is not None:
        _array_module.before_write()  # pending expressions that read out: computed first
    if type(x) is Array and init is None and (out is None or type(out) is Array):
        dev = x._device  # one array, a replayed plan: no argument checks but the devices'
        if out is None or out._device == dev:
            try:
                r = _prim.accumulate_fast(op, x._array, axis, include_initial, exclusive,
                                          reverse, None if out is None else out._array,
                                          deterministic)
            except AxisError as exc:
                raise named_axis_error(exc, "accumulate") from None
            if r is not None:
                return Array._new(r, dev)
    devices: list = []
    xb = _unwrap(x, devices, "x")
    if not devices:
        raise ValueError("accumulate needs at least one array")
    ob = None
    if out is not None:
        ob = _unwrap(out, devices, "out")
    if isinstance(init, Array):  # one value per scan (or a 0-d array)
        init = _unwrap(init, devices, "init")
    if any(d != devices[0] for d in devices):
        raise ValueError(f"accumulate: arrays on different devices: {sorted(set(map(str, devices)))}")
    try:
        with _dev.on(devices[0]):   # the arrays' GPU, whichever is current
            r = _prim.accumulate(op, xb, axis=axis, init=init, include_initial=include_initial,
                                 exclusive=exclusive, reverse=reverse, out=ob,
                                 deterministic=deterministic)
    except AxisError as exc:
        raise named_axis_error(exc, "accumulate") from None
    if isinstance(r, tuple):
        return tuple(Array._new(c, devices[0]) for c in r)
    return Array._new(r, devices[0])
