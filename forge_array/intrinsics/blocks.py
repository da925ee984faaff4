"""Operator-generic warp and block reduce/scan, written once on top of the shuffles.

Each factory closes over a user operator ``op(a, b)`` (a plain Python function on scalars
or tuples, or a numba CUDA device function) and returns a device function. Operand order
is kept everywhere (lane / thread 0's value on the left), so associative but
non-commutative operators (matrix products, affine-map composition) are correct. The same
source runs on the GPU (the intrinsics are inline PTX) and in numba's simulator (the
intrinsics are Python stand-ins).

Loop-carried values are converted back to the input's type after each ``op`` call
(:func:`cast_like`), so an operator that widens (``int32 + int32 -> int64`` in numba) keeps
the value's type.

Example
-------
>>> import numpy as np
>>> from forge_array import intrinsics as fi
>>> add = lambda a, b: a + b
>>> warp_sum = fi.make_warp_reduce(add)                  # (v) -> total, on every lane
>>> block_scan = fi.make_block_scan(add, 64, np.float32)  # (v) -> (inclusive, total)
"""

from __future__ import annotations

from numba import cuda

from ._impl import (
    WARP,
    cast_like,
    device_op,
    lane_id,
    load,
    shfl_down,
    shfl_idx,
    shfl_up,
    store,
    warp_id,
    with_shared_scratch,
)

_LOG_WARP = 5


def as_device(op):
    """The device function for operator ``op`` used by the factories: on the GPU ``op``
    itself when it already is a numba CUDA device function, else ``cuda.jit(device=True)``
    of the Python function (of ``op.py_func`` for a CPU ``numba.njit`` dispatcher); in the
    simulator a Python callable with NumPy's overflow warnings off (integers wrap silently,
    as on the GPU).

    >>> f = as_device(lambda a, b: a * b)
    >>> callable(f)
    True
    """
    if not callable(op):
        raise TypeError(f"operator must be callable, got {type(op).__name__}")
    return device_op(op)


def _check_block(block) -> int:
    block = int(block)
    if block <= 0 or block % WARP or block > 1024:
        raise ValueError(f"block size must be a multiple of {WARP} in [32, 1024], got {block}")
    return block // WARP


def _make_partial_reduce(f):
    """``(v, n) -> r``: lane 0 gets ``op(v_0, ..., v_{n-1})`` (lanes 0..n-1, in lane order);
    other lanes get partial values. All 32 lanes must call."""

    @cuda.jit(device=True)
    def partial_reduce(v, n):
        lane = lane_id()
        d = 1
        for _ in range(_LOG_WARP):
            u = shfl_down(v, d)
            if lane + d < n:
                v = cast_like(f(v, u), v)
            d *= 2
        return v

    return partial_reduce


def make_warp_reduce(op):
    """Device function ``(v) -> total`` over the 32 lanes of the warp, in lane order, with
    the total on every lane. All 32 lanes must call.

    >>> warp_max = make_warp_reduce(lambda a, b: a if a >= b else b)
    """
    reduce_n = _make_partial_reduce(as_device(op))

    @cuda.jit(device=True)
    def warp_reduce(v):
        return shfl_idx(reduce_n(v, WARP), 0)

    return warp_reduce


def make_warp_scan(op):
    """Device function ``(v) -> inclusive prefix``: lane ``l`` gets ``op(v_0, ..., v_l)``
    (Kogge-Stone on ``shfl_up``; lane 0's value on the left). All 32 lanes must call.

    >>> compose = lambda p, q: (p[0] * q[0], q[0] * p[1] + q[1])   # affine maps
    >>> warp_scan = make_warp_scan(compose)
    """
    f = as_device(op)

    @cuda.jit(device=True)
    def warp_scan(v):
        lane = lane_id()
        d = 1
        for _ in range(_LOG_WARP):
            u = shfl_up(v, d)
            if lane >= d:
                v = cast_like(f(u, v), v)
            d *= 2
        return v

    return warp_scan


def make_warp_exclusive_scan(op):
    """Device function ``(v, init) -> (exclusive, total)``: lane ``l`` gets
    ``op(init, v_0, ..., v_{l-1})`` (lane 0 gets ``init``) and every lane the warp total
    ``op(v_0, ..., v_31)`` (without ``init``). All 32 lanes must call.

    >>> warp_exscan = make_warp_exclusive_scan(lambda a, b: a + b)
    """
    f = as_device(op)
    scan = make_warp_scan(f)

    @cuda.jit(device=True)
    def warp_exclusive_scan(v, init):
        inc = scan(v)
        prev = shfl_up(inc, 1)
        total = shfl_idx(inc, WARP - 1)
        out = init
        if lane_id() > 0:
            out = cast_like(f(init, prev), init)
        return out, total

    return warp_exclusive_scan


def make_block_reduce(op, block, ttype):
    """Device function ``(v) -> total`` over the ``block`` threads of a 1-D block, in thread
    order, with the total on every thread. ``ttype`` is the NumPy dtype (or tuple of dtypes)
    of the value, for the shared scratch. All threads of the block must call; it may be
    called again without an extra ``syncthreads``.

    >>> import numpy as np
    >>> block_sum = make_block_reduce(lambda a, b: a + b, 64, np.float64)
    """
    nw = _check_block(block)
    reduce_n = _make_partial_reduce(as_device(op))

    @cuda.jit(device=True)
    def block_reduce_body(s, v):
        # s[0:nw]: warp totals; s[nw]: the result (a separate slot, so that a second call
        # cannot overwrite what a slow thread of the first call still reads)
        lane = lane_id()
        w = warp_id()
        t = reduce_n(v, WARP)
        if lane == 0:
            store(s, w, t)
        cuda.syncthreads()
        if w == 0:
            x = load(s, lane if lane < nw else nw - 1)
            x = reduce_n(x, nw)
            if lane == 0:
                store(s, nw, x)
        cuda.syncthreads()
        return load(s, nw)

    return with_shared_scratch(nw + 1, ttype, block_reduce_body, 1)


def _make_block_scan_core(f, block):
    """``(s, v) -> inclusive prefix within the warp``; leaves in ``s[nw:2 nw]`` the inclusive
    prefixes of the warp totals (``s[0:nw]`` holds the totals: two regions, so that a second
    call cannot overwrite what a slow thread of the first call still reads)."""
    nw = _check_block(block)
    scan = make_warp_scan(f)

    @cuda.jit(device=True)
    def block_scan_core(s, v):
        lane = lane_id()
        w = warp_id()
        inc = scan(v)
        if lane == WARP - 1:
            store(s, w, inc)
        cuda.syncthreads()
        if w == 0:
            x = load(s, lane if lane < nw else nw - 1)
            x = scan(x)
            if lane < nw:
                store(s, nw + lane, x)
        cuda.syncthreads()
        return inc

    return block_scan_core, nw


def make_block_scan(op, block, ttype):
    """Device function ``(v) -> (inclusive, total)``: thread ``t`` of a 1-D block of
    ``block`` threads gets ``op(v_0, ..., v_t)`` and the block total. ``ttype`` is the NumPy
    dtype (or tuple of dtypes) of the value. All threads of the block must call.

    >>> import numpy as np
    >>> block_cumsum = make_block_scan(lambda a, b: a + b, 128, np.int64)
    """
    f = as_device(op)
    core, nw = _make_block_scan_core(f, block)

    @cuda.jit(device=True)
    def block_scan_body(s, v):
        inc = core(s, v)
        w = warp_id()
        total = load(s, 2 * nw - 1)
        if w > 0:
            inc = cast_like(f(load(s, nw + w - 1), inc), inc)
        return inc, total

    return with_shared_scratch(2 * nw, ttype, block_scan_body, 1)


def make_block_exclusive_scan(op, block, ttype):
    """Device function ``(v, init) -> (exclusive, total)``: thread ``t`` gets
    ``op(init, v_0, ..., v_{t-1})`` (thread 0 gets ``init``) and every thread the block total
    ``op(v_0, ..., v_{block-1})`` (without ``init``). All threads of the block must call.

    >>> import numpy as np
    >>> block_exscan = make_block_exclusive_scan(lambda a, b: a + b, 64, np.int32)
    """
    f = as_device(op)
    core, nw = _make_block_scan_core(f, block)

    @cuda.jit(device=True)
    def block_exclusive_scan_body(s, v, init):
        inc = core(s, v)
        w = warp_id()
        total = load(s, 2 * nw - 1)
        prev = shfl_up(inc, 1)
        base = init
        if w > 0:
            base = cast_like(f(init, load(s, nw + w - 1)), init)
        out = base
        if lane_id() > 0:
            out = cast_like(f(base, prev), base)
        return out, total

    return with_shared_scratch(2 * nw, ttype, block_exclusive_scan_body, 2)
