"""``axis_mapreduce`` (see the package's docstring), ``argmax`` and ``argmin`` along an axis:
checked arguments, a cached launch replayed, the row / column kernels planned, or numba on the
CPU.
"""

from __future__ import annotations

import math

import numpy as np

from ... import ops as _ops
from ... import runtime
from ...dispatch.axis_reduce import AxisReduction, launch, replayed
from ...runtime import lazy
from ...runtime.functions import compilable
from .arguments import (
    DEFAULT_MAPS,
    _f_pair_index,
    array_module,
    components,
    dtypes_of,
    first_component,
    normalize_axes,
    scalars_of,
)

_cpu = lazy.module("forge_array.primitives.axis_reduce.cpu", __name__, "_cpu")  # numba: CPU operands only

#: the row and column kernels' ``MAX_INPUTS`` (checked against it where they are built)
_MAX_INPUTS = 3


def axis_mapreduce(f, op, arrays, axis, init, keepdims, out_dtype, *, index=False,
                   _replay=None):
    """Map ``f`` over the elements of ``arrays`` and reduce with ``op`` along ``axis``; see
    the module docstring for the arguments. Returns a backend array (a tuple of them for a
    tuple ``out_dtype``) of the kept axes (kept as size 1 with ``keepdims``).

    >>> import numpy as np
    >>> from forge_array import ops
    >>> a = np.arange(6).reshape(2, 3)
    >>> axis_mapreduce(lambda u, v: u * v, ops.add, (a, a), -1, None, False, np.dtype("int64")).tolist()
    [5, 50]
    >>> axis_mapreduce(_f_pair_index, ops.argmax, (np.array([[1., 5., 5.], [7., 0., 1.]]),),
    ...                1, None, False, (np.dtype("float64"), np.dtype("int64")), index=True)[1].tolist()
    [1, 0]
    """
    fkey = None
    if init is None and isinstance(arrays, tuple):
        # replay a cached launch plan: same operators, axes and operand layouts
        fkey, r = replayed(f, op, arrays, axis, keepdims, out_dtype, index, _replay)
        if r is not None:
            return r
    op = _ops.as_operator(op)
    if not isinstance(arrays, (tuple, list)) or not arrays:
        raise TypeError("arrays must be a non-empty tuple of arrays")
    arrays = tuple(arrays)
    K = len(arrays)
    if K > _MAX_INPUTS:
        raise ValueError(f"at most {_MAX_INPUTS} arrays, got {K}")
    if f is None:
        if index:
            raise TypeError("index=True needs a map function f(element, index)")
        f = DEFAULT_MAPS[K]
    elif not callable(f):
        raise TypeError(f"map function must be callable, got {type(f).__name__}")
    else:
        f = compilable(f, K + (1 if index else 0))
    x0 = first_component(arrays[0])
    xp = array_module(x0)
    shape = tuple(x0.shape)
    for e in arrays:
        for c in components(e):
            if array_module(c) is not xp:
                raise ValueError("arrays are on different devices (NumPy and CuPy arrays mixed)")
            if not isinstance(c, np.ndarray) and c.device != x0.device:
                raise ValueError(f"arrays are on different devices: {c.device} and {x0.device}")
            if tuple(c.shape) != shape:
                raise ValueError(f"arrays of different shapes: {tuple(c.shape)} and {shape}")
    ndim = len(shape)
    axes = normalize_axes(axis, ndim)
    acc = dtypes_of(out_dtype)
    is_tuple = isinstance(acc, tuple)
    kept = [d for d in range(ndim) if d not in axes]
    out_shape = tuple(shape[d] for d in kept)
    J = math.prod(shape[d] for d in axes)
    ident = op.identity(acc)
    init_v = None if init is None else scalars_of(init, acc)
    outs = tuple(xp.empty(out_shape, dtype=d) for d in (acc if is_tuple else (acc,)))
    if math.prod(out_shape) > 0:
        if J == 0:
            fill = init_v if init_v is not None else ident
            if fill is None:
                raise ValueError(f"reduction over an empty axis with operator {op.name}, which "
                                 "has no identity: pass init")
            for o, v in zip(outs, fill if is_tuple else (fill,)):
                o[...] = v
        elif runtime.kernels_available(x0):
            launch(AxisReduction(f, op, axes, acc, ident, init_v, index), arrays, outs, shape, keepdims,
                   (fkey, _replay) if init is None else ())
        else:
            _cpu.run_cpu(AxisReduction(f, op, axes, acc, ident, init_v, index), arrays,
                    outs if is_tuple else outs[0])
    if keepdims:
        ks = tuple(1 if d in axes else n for d, n in enumerate(shape))
        outs = tuple(o.reshape(ks) for o in outs)
    return outs if is_tuple else outs[0]


def _arg(x, axis, keepdims, op, name):
    if x.shape and axis is not None and x.shape[normalize_axes(axis, x.ndim)[0]] == 0:
        raise ValueError(f"{name} of an empty sequence")
    xv = x.view(np.uint8) if x.dtype.kind == "b" else x
    if axis is None:
        xv = xv.reshape(-1)
        axis = 0
    acc = (xv.dtype, _ops.INDEX_DTYPE)
    r = axis_mapreduce(_f_pair_index, op, (xv,), axis, None, False, acc, index=True)[1]
    if keepdims:
        shape = list(x.shape)
        if len(shape):
            shape[normalize_axes(axis, x.ndim)[0]] = 1
        r = r.reshape(tuple(shape) if x.ndim else ())
    return r


def argmax(x, axis, keepdims=False):
    """Index of the largest element along ``axis`` (an int; the first one, the first NaN
    wins), on the axis kernels.

    >>> import numpy as np
    >>> argmax(np.array([[1, 9, 9], [4, 2, 4]]), 1).tolist()
    [1, 0]
    """
    return _arg(x, axis, keepdims, _ops.argmax, "argmax")


def argmin(x, axis, keepdims=False):
    """Index of the smallest element along ``axis`` (an int; the first one, the first NaN
    wins), on the axis kernels.

    >>> import numpy as np
    >>> argmin(np.array([[1, 9, 0], [4, 2, 2]]), 1).tolist()
    [2, 1]
    """
    return _arg(x, axis, keepdims, _ops.argmin, "argmin")
