"""The element-wise map's dispatch tier: the layout of a call (the kernel's mode, collapsed
dims, 16-byte peel, uniform operands), the kernel of a layout (tuning table, compiled or
loaded once per key), the plan of a launch cached per layout of its arrays and replayed
(:class:`MapLaunch`), and the launch (:func:`map_arrays`) of the kernel of
:mod:`forge_array.kernels.elementwise`: ``out_q[i] = f(x_0[i], ..., x_{K-1}[i])[q]`` in
one launch, the kernel behind materialised fused expressions.

The kernel module (numba's CUDA target) loads at the first plan.

>>> import numpy as np
>>> def f(a, b):
...     return (a * b + 1.0,)
>>> map_arrays(f, [np.arange(4.0), np.full(4, 2.0)], ("float64",))   # doctest: +SKIP
(array([1., 3., 5., 7.]),)
"""

from __future__ import annotations

import numpy as np

from ..runtime import (
    array_module,
    buffer_of,
    compile_kernel,
    data_address,
    device_info,
    element_strides,
    launch,
    lazy,
    tuning,
)
from ..runtime.caches import Cache
from ..runtime.config import SIMULATE as _SIM
from ..runtime.memory import misalignment
from ._common import collapse, uniform_operands

__all__ = ["map_arrays", "map_plan", "MapLaunch"]

_k = lazy.module("forge_array.kernels.elementwise", __name__, "_k")


def _layout(arrays, outs, uniform):
    lay = [a for k, a in enumerate(arrays) if k not in uniform]
    if not lay:  # every input uniform: one value, written everywhere
        return _k.MODE_FLAT, 1, None, None, 0
    if all(a.flags.c_contiguous for a in lay):
        size = lay[0].dtype.itemsize
        mis = misalignment(outs[0])
        if (size < 16 and all(a.dtype.itemsize == size and misalignment(a) == mis for a in lay)
                and all(o.dtype.itemsize == size and o.dtype.kind != "b" for o in outs)
                and mis % size == 0):
            return _k.MODE_VEC, 1, None, None, ((16 - mis) % 16) // size
        return _k.MODE_FLAT, 1, None, None, 0
    shape, st = collapse(lay[0].shape, [element_strides(a) for a in lay])
    if len(shape) <= 1 and all(not s or s[0] == 1 for s in st):
        return _k.MODE_FLAT, 1, None, None, 0
    if len(shape) > _k.MAX_DIMS:
        raise ValueError(f"{len(shape)} dims after collapsing")
    return _k.MODE_STRIDED, len(shape), st, shape, 0


_PLANS = Cache("dispatch.elementwise.PLANS")


def _kernel(f, in_dtypes, out_dtypes, mode, ndim, uniform):
    key = (f, in_dtypes, out_dtypes, mode, ndim, uniform)
    kp = _PLANS.get(key)
    if kp is None:
        p = tuning.params("map")
        block = p["block"]
        lead = next((k for k in range(len(in_dtypes)) if k not in uniform), 0)
        vec = 16 // np.dtype(in_dtypes[lead]).itemsize if mode == _k.MODE_VEC else 1
        items = p["items"] if mode == _k.MODE_VEC else 1
        kernel = compile_kernel(_k.make_map_kernel,
                                (f, in_dtypes, out_dtypes, mode, ndim, items, vec, block, uniform),
                                _k.map_argtypes(in_dtypes, out_dtypes, mode, ndim, uniform))
        gmax = max(1, device_info()["sm_count"] * p["blocks_per_sm"])
        kp = _PLANS[key] = (kernel, block, block * items * vec, gmax)
    return kp


_MAX_CACHED = 4096
_MAP_PLANS = Cache("dispatch.elementwise.MAP_PLANS", _MAX_CACHED)


def _plan(f, arrays, out_dtypes, out):
    """(kernel, grid, block, tail arguments, bool inputs, bool outputs) of a map launch."""
    n = int(arrays[0].size)
    uniform = uniform_operands(arrays)
    try:
        mode, ndim, strides, cshape, peel = _layout(arrays, out, uniform)
    except ValueError:  # more dims than the strided path takes: the caller gathers first
        return None
    in_dtypes = tuple(a.dtype.str for a in arrays)
    kernel, block, per_block, gmax = _kernel(f, in_dtypes, out_dtypes, mode, ndim, uniform)
    grid = max(1, min(gmax, (n + per_block - 1) // per_block))
    tail = (n, peel)
    if mode == _k.MODE_STRIDED:
        tail += tuple(cshape) + tuple(s for st in strides for s in st)
    return (kernel, grid, block, tail, tuple(a.dtype.kind == "b" for a in arrays),
            tuple(np.dtype(d).kind == "b" for d in out_dtypes))


def _buffer(a, is_bool):
    return buffer_of(a.view(np.uint8) if is_bool else a)


class MapLaunch:
    """A map launch replayed on new arrays of the layouts it was planned for (see
    :func:`map_plan`): ``launch(arrays)`` allocates the outputs, launches, returns them."""

    __slots__ = ("f", "plan", "shape", "dtypes", "empty", "mis")

    def __init__(self, f, plan, shape, dtypes, empty, mis):
        self.f, self.plan, self.shape, self.dtypes = f, plan, shape, dtypes
        self.empty, self.mis = empty, mis

    def launch(self, arrays):
        out = tuple([self.empty(self.shape, dtype=d) for d in self.dtypes])
        kernel, grid, block, tail, in_bool, out_bool = self.plan
        if _SIM:
            if misalignment(out[0]) != self.mis:  # a host allocation of another phase
                return map_arrays(self.f, arrays, self.dtypes, out)
            args = tuple(map(_buffer, arrays, in_bool)) + tuple(map(_buffer, out, out_bool))
        else:
            args = tuple([a.data.ptr for a in arrays]) + tuple([o.data.ptr for o in out])
        launch(kernel, grid, block, args + tail)
        return out


def map_plan(f, arrays, out_dtypes):
    """The :class:`MapLaunch` of ``map_arrays(f, arrays, out_dtypes)`` for arrays of these
    layouts, or None (empty arrays; views that must be gathered first).  Its launch takes
    the arrays' addresses only: the arrays it is given may be the unbroadcast operands of
    ``arrays`` (the same first element), the strides are those of ``arrays``."""
    x0 = arrays[0]
    if x0.size == 0:
        return None
    out_dtypes = tuple(np.dtype(d).str for d in out_dtypes)
    xp = array_module(x0)
    out = tuple(xp.empty(x0.shape, dtype=d) for d in out_dtypes)
    p = _plan(f, list(arrays), out_dtypes, out)
    if p is None:
        return None
    return MapLaunch(f, p, tuple(x0.shape), out_dtypes, xp.empty, misalignment(out[0]))


def map_arrays(f, arrays, out_dtypes, out=None):
    """Run ``f`` over the backend arrays ``arrays`` (one shape: broadcast views are fine)
    in one launch; returns the tuple of new C-contiguous outputs of ``out_dtypes`` (or
    fills ``out``, a tuple of C-contiguous arrays of that shape).  ``f`` returns a tuple of
    ``len(out_dtypes)`` values.  The launch is planned once per layout of the inputs
    (type, dtype, shape, strides, address mod 16 of each) and replayed after."""
    x0 = arrays[0]
    shape = tuple(x0.shape)
    out_dtypes = tuple(np.dtype(d).str for d in out_dtypes)
    fresh = out is None
    if fresh:
        xp = array_module(x0)
        out = tuple(xp.empty(shape, dtype=d) for d in out_dtypes)
    if x0.size == 0:
        return out
    p = None
    if fresh:
        key = (f, out_dtypes, misalignment(out[0])) + tuple(
            (type(a), a.dtype, a.shape, a.strides, data_address(a) & 15) for a in arrays)
        p = _MAP_PLANS.get(key)
        if p is None:
            p = _plan(f, arrays, out_dtypes, out)
            if p is not None:
                _MAP_PLANS[key] = p
    else:
        p = _plan(f, arrays, out_dtypes, out)
    if p is None:  # gather the views first
        uniform = uniform_operands(arrays)
        arrays = [a if k in uniform else a.copy() for k, a in enumerate(arrays)]
        p = _plan(f, arrays, out_dtypes, out)
    kernel, grid, block, tail, in_bool, out_bool = p
    args = tuple(map(_buffer, arrays, in_bool)) + tuple(map(_buffer, out, out_bool)) + tail
    launch(kernel, grid, block, args)
    return out
