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
    return runtime.cupy() if runtime.is_cupy_array(x) else np


def _grid(work_items: int, block: int) -> int:
    p = tuning.params("copy")
    cap = runtime.device_info()["sm_count"] * p["blocks_per_sm"]
    return max(1, min(-(-work_items // block), cap))


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
    if x.size == 0:
        return out
    if not runtime.kernels_available(x) or x.dtype.itemsize not in _RAW:
        out[...] = x
        return out
    try:
        sx, so = runtime.element_strides(x), runtime.element_strides(out)
    except ValueError:
        out[...] = x
        return out
    shape, (sx, so) = collapse(x.shape, [sx, so])
    if len(shape) > kcopy.MAX_DIMS:  # rare: loop over the leading dimension
        for i in range(x.shape[0]):
            copy(x[i], out[i])
        return out
    _launch_copy(x, out, shape, sx, so)
    return out


def _launch_copy(x, out, shape, sx, so):
    itemsize = x.dtype.itemsize
    raw = _RAW[itemsize]
    p = tuning.params("copy")
    block, items = p["block"], p["items"]
    n = x.size
    src, dst = runtime.buffer_of(x), runtime.buffer_of(out)
    pt = runtime.ptr_t(raw)
    if len(shape) <= 1 and (not shape or (sx[0] == 1 and so[0] == 1)):
        mx, mo = runtime.misalignment(x), runtime.misalignment(out)
        if mx == mo and mx % itemsize == 0 and itemsize < 16:
            head = min(n, ((16 - mx) % 16) // itemsize)
            vec = 16 // itemsize
            argtypes = (pt, pt, runtime.i64, runtime.i64)
            k = runtime.compile_kernel(kcopy.make_copy_contiguous, (itemsize, items), argtypes)
            nvec = (n - head) // vec
            grid = _grid(max(-(-nvec // items), head, 1), block)
            runtime.launch(k, grid, block, (src, dst, n, head))
        else:
            k = runtime.compile_kernel(kcopy.make_copy_scalar, (items,), (pt, pt, runtime.i64))
            runtime.launch(k, _grid(-(-n // items), block), block, (src, dst, n))
        return
    nd = len(shape)
    pad = kcopy.MAX_DIMS - nd
    d = (1,) * pad + tuple(shape)
    s = (0,) * pad + tuple(sx)
    t = (0,) * pad + tuple(so)
    k = runtime.compile_kernel(kcopy.make_copy_strided, (nd,), (pt, pt) + (runtime.i64,) * 13)
    runtime.launch(k, _grid(n, block), block, (src, dst, n) + d + s + t)
