"""The copy's dispatch tier: copies of one dtype on our kernels (:mod:`forge_array.kernels.copy`),
contiguous (128-bit, any misalignment) or any view; the plan of a layout (kernel, grid,
block, arguments, or the backend's own copy) cached by layout in ``PLANS``.

>>> import numpy as np
>>> x = np.arange(10.0)[::-3]
>>> out = np.empty(4)
>>> run(x, out); out.tolist()
[9.0, 6.0, 3.0, 0.0]
"""

from __future__ import annotations

import numpy as np

from .. import runtime
from ..runtime import lazy, tuning
from ..runtime.caches import Cache
from ._common import collapse

# the kernel module (numba.cuda) loads at first use: CPU arrays never need it
kcopy = lazy.module("forge_array.kernels.copy", __name__, "kcopy")

_RAW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.complex128}


def _grid(work_items: int, block: int) -> int:
    p = tuning.params("copy")
    cap = runtime.device_info()["sm_count"] * p["blocks_per_sm"]
    return max(1, min(-(-work_items // block), cap))


PLANS = Cache("dispatch.copy.PLANS")


def run(x, out):
    """Copy backend array ``x`` into ``out`` (same shape and dtype, any views): replay the
    plan of this layout (the first copy of a layout plans it)."""
    ax, ao = runtime.data_address(x), runtime.data_address(out)
    # everything below depends only on this key (whether kernels run on x: its type)
    key = (type(x), x.dtype, x.shape, x.strides, out.strides, ax & 15, ao & 15)
    plan = PLANS.get(key)
    if plan is None:
        plan = _plan_of(x, out)
        PLANS[key] = plan
    if type(plan) is tuple:
        kernel, grid, block, extra, words, raw = plan
        if runtime.SIMULATE:  # the kernels move raw bits (elements or bytes), as on the GPU
            if raw.itemsize == x.dtype.itemsize:
                args = (runtime.buffer_of(x.view(raw)), runtime.buffer_of(out.view(raw)))
            else:
                args = (runtime.buffer_of(x.reshape(-1).view(raw)), runtime.buffer_of(out.reshape(-1).view(raw)))
            if words is not None:
                args += (_sim_words(x, ax + words[0], words[2]), _sim_words(out, ao + words[1], words[2]))
            runtime.launch(kernel, grid, block, args + extra)
        elif words is None:
            runtime.launch(kernel, grid, block, (ax, ao) + extra)
        else:
            runtime.launch(kernel, grid, block, (ax, ao, ax + words[0], ao + words[1]) + extra)
    elif plan is _HOST:
        out[...] = x
    elif plan is _LOOP:  # rare: more dimensions than the strided kernel takes
        for i in range(x.shape[0]):
            run(x[i], out[i])


def _plan_of(x, out):
    """What copying ``x`` into ``out`` takes: nothing (empty), NumPy / CuPy (no kernels for
    ``x``, strides that are not whole elements), a loop over the first axis, or a launch."""
    if x.size == 0:
        return _EMPTY
    if not runtime.kernels_available(x) or x.dtype.itemsize not in _RAW:
        return _HOST
    try:
        runtime.element_strides(x), runtime.element_strides(out)
    except ValueError:  # strides that are not whole elements
        return _HOST
    return _plan(x, out)


_EMPTY = object()
_HOST = object()
_LOOP = object()


def _plan(x, out):
    """(kernel, grid, block, trailing args, word buffers or None, dtype of the raw bits)
    for copying ``x`` into ``out``."""
    sx, so = runtime.element_strides(x), runtime.element_strides(out)
    shape, (sx, so) = collapse(x.shape, [sx, so])
    if len(shape) > kcopy.MAX_DIMS:
        return _LOOP
    raw = np.dtype(_RAW[x.dtype.itemsize])
    p = tuning.params("copy")
    block = p["block"]
    n = x.size
    if len(shape) <= 1 and (not shape or (sx[0] == 1 and so[0] == 1)):
        return _plan_contiguous(x, out, n, raw, p)
    nd = len(shape)
    pad = kcopy.MAX_DIMS - nd
    d = (1,) * pad + tuple(shape)
    s = (0,) * pad + tuple(sx)
    t = (0,) * pad + tuple(so)
    pt = runtime.ptr_t(raw)
    k = runtime.compile_kernel(kcopy.make_copy_strided, (nd,), (pt, pt) + (runtime.i64,) * 13)
    return k, _grid(n, block), block, (n,) + d + s + t, None, raw


def _plan_contiguous(x, out, n, raw, p):
    """The plan of a contiguous copy of ``n`` elements of dtype ``raw``.

    Addresses that are not whole elements past a 16-byte boundary (a view of a byte buffer)
    are copied as bytes. The first ``head`` elements align the destination; then the source
    is ``r`` bytes past a boundary: ``r == 0`` is the plain vector kernel, other ``r`` the
    realigning kernel (tuning ``realign``: ``"shfl"`` or ``"reload"``; ``""`` takes the
    scalar kernel instead). Tuning ``vecs``: vectors per thread per step; ``one_pass``: a
    grid covering the whole array instead of ``blocks_per_sm`` blocks per SM;
    ``load_hint`` / ``store_hint``: PTX cache qualifiers of the vector accesses."""
    mx, mo = runtime.misalignment(x), runtime.misalignment(out)
    itemsize = raw.itemsize
    # complex128 (no scalar head or tail in the realigning kernel) may start 8 bytes past a
    # boundary; its head must be whole elements
    if mx % min(itemsize, 8) or mo % min(itemsize, 8) or (16 - mo) % 16 % itemsize:
        n, itemsize, raw = n * itemsize, 1, np.dtype(np.uint8)
    block, vecs = p["block"], p["vecs"]
    pt = runtime.ptr_t(raw)
    i64 = runtime.i64
    head = min(n, (16 - mo) % 16 // itemsize)
    r = (mx + head * itemsize) % 16
    mode = p["realign"]
    if r and not mode:
        k = runtime.compile_kernel(kcopy.make_copy_scalar, (raw, p["items"]), (pt, pt, i64))
        return k, _grid(-(-n // p["items"]), block), block, (n,), None, raw
    vec = max(1, 16 // itemsize)
    nvec = (n - head) // vec
    hints = (p["load_hint"], p["store_hint"])
    if r == 0:
        k = runtime.compile_kernel(kcopy.make_copy_contiguous, (itemsize, vecs) + hints, (pt, pt, i64, i64))
        return k, _vector_grid(-(-nvec // vecs), block, p), block, (n, head), None, raw
    k = runtime.compile_kernel(kcopy.make_copy_realign, (itemsize, r, vecs, mode) + hints,
                               (pt, pt, runtime.ptr_t(np.uint32), runtime.ptr_t(np.uint32), i64, i64))
    # srcw: the aligned source vector holding src[head]; dstw: dst + head (aligned);
    # words: (byte offset of srcw from src, of dstw from dst, words the kernel may touch)
    words = (head * itemsize - r, head * itemsize, 4 * (nvec + 1))
    # work items: 32 threads per warp tile of 32 * vecs vectors
    return k, _vector_grid(32 * -(-nvec // (32 * vecs)), block, p), block, (n, head), words, raw


def _vector_grid(work_items: int, block: int, p) -> int:
    """Blocks for ``work_items`` threads' worth of vector work (at least one: the scalar
    head and tail take fewer than 16 threads): all of it in one pass, or capped at
    ``blocks_per_sm`` blocks per SM (grid-stride)."""
    blocks = max(-(-work_items // block), 1)
    if p["one_pass"]:
        return min(blocks, 2**31 - 1)  # the kernels are grid-stride: beyond that, loops
    return min(blocks, runtime.device_info()["sm_count"] * p["blocks_per_sm"])


def _sim_words(owner, address: int, count: int):
    """Simulator: a buffer of ``count`` uint32 words at byte ``address`` (16-byte aligned),
    over the memory of ``owner``'s 16-byte blocks (which may start before ``owner``'s
    first element and end after its last one, like the GPU's aligned vector accesses)."""
    import ctypes

    raw = (ctypes.c_char * (4 * count)).from_address(address)
    return runtime.SimBuffer(np.frombuffer(raw, dtype=np.uint32, count=count), 0, owner)
