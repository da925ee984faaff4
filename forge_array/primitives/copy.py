"""Copies of one dtype on our kernels: contiguous (128-bit, any misalignment) or any view.

Example
-------
>>> import numpy as np
>>> from forge_array.primitives import copy
>>> x = np.arange(10.0)[::-3]
>>> copy(x).tolist()
[9.0, 6.0, 3.0, 0.0]
"""

from __future__ import annotations

import numpy as np

from .. import runtime
from ..kernels import copy as kcopy
from ..runtime import tuning
from ._layout import collapse

_RAW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.complex128}


def _xp(x):
    return np if type(x) is np.ndarray or not runtime.is_cupy_array(x) else runtime.cupy()


def _grid(work_items: int, block: int) -> int:
    p = tuning.params("copy")
    cap = runtime.device_info()["sm_count"] * p["blocks_per_sm"]
    return max(1, min(-(-work_items // block), cap))


_PLANS: dict = {}


def copy(x, out=None):
    """Copy backend array ``x`` (NumPy or CuPy, any view) into ``out`` (a new C-contiguous
    array when None; else an array of the same shape and dtype, possibly a view) and return
    ``out``. Runs on our kernels when they are available for ``x``.

    >>> import numpy as np
    >>> copy(np.arange(6).reshape(2, 3).T).tolist()
    [[0, 3], [1, 4], [2, 5]]
    """
    xp = _xp(x)
    if out is None:
        out = xp.empty(x.shape, dtype=x.dtype)
    elif out.shape != x.shape or out.dtype != x.dtype:
        raise ValueError(f"copy: out has shape {out.shape} and dtype {out.dtype}, "
                         f"expected {x.shape} and {x.dtype}")
    ax, ao = runtime.data_address(x), runtime.data_address(out)
    # everything below depends only on this key (whether kernels run on x: its type)
    key = (type(x), x.dtype, x.shape, x.strides, out.strides, ax & 15, ao & 15)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan_of(x, out)
        if len(_PLANS) > 4096:
            _PLANS.clear()
        _PLANS[key] = plan
    if type(plan) is tuple:
        kernel, grid, block, extra = plan
        if runtime.SIMULATE:
            raw = _RAW[x.dtype.itemsize]  # the kernels move raw bits, as on the GPU
            runtime.launch(kernel, grid, block,
                           (runtime.buffer_of(x.view(raw)), runtime.buffer_of(out.view(raw))) + extra)
        else:
            runtime.launch(kernel, grid, block, (ax, ao) + extra)
    elif plan is _HOST:
        out[...] = x
    elif plan is _LOOP:  # rare: more dimensions than the strided kernel takes
        for i in range(x.shape[0]):
            copy(x[i], out[i])
    return out


def _plan_of(x, out):
    """What copying ``x`` into ``out`` takes: nothing (empty), NumPy / CuPy (no kernels for
    ``x``, strides that are not whole elements), a loop over the first axis, or a launch."""
    if x.size == 0:
        return _EMPTY
    if not runtime.kernels_available(x) or x.dtype.itemsize not in _RAW:
        return _HOST
    try:
        return _plan(x, out)
    except ValueError:  # strides that are not whole elements
        return _HOST


_EMPTY = object()
_HOST = object()
_LOOP = object()


def _plan(x, out):
    """(kernel, grid, block, trailing args) for copying ``x`` into ``out``."""
    sx, so = runtime.element_strides(x), runtime.element_strides(out)
    shape, (sx, so) = collapse(x.shape, [sx, so])
    if len(shape) > kcopy.MAX_DIMS:
        return _LOOP
    itemsize = x.dtype.itemsize
    raw = _RAW[itemsize]
    p = tuning.params("copy")
    block, items = p["block"], p["items"]
    n = x.size
    pt = runtime.ptr_t(raw)
    i64 = runtime.i64
    if len(shape) <= 1 and (not shape or (sx[0] == 1 and so[0] == 1)):
        mx, mo = runtime.misalignment(x), runtime.misalignment(out)
        if mx == mo and mx % itemsize == 0 and itemsize < 16:
            head = min(n, ((16 - mx) % 16) // itemsize)
            nvec = (n - head) // (16 // itemsize)
            k = runtime.compile_kernel(kcopy.make_copy_contiguous, (itemsize,), (pt, pt, i64, i64))
            return k, _grid(max(-(-nvec // 4), head, 1), block), block, (n, head)
        k = runtime.compile_kernel(kcopy.make_copy_scalar, (np.dtype(raw), items), (pt, pt, i64))
        return k, _grid(-(-n // items), block), block, (n,)
    nd = len(shape)
    pad = kcopy.MAX_DIMS - nd
    d = (1,) * pad + tuple(shape)
    s = (0,) * pad + tuple(sx)
    t = (0,) * pad + tuple(so)
    k = runtime.compile_kernel(kcopy.make_copy_strided, (nd,), (pt, pt) + (i64,) * 13)
    return k, _grid(n, block), block, (n,) + d + s + t
