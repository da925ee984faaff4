"""Simulated warp intrinsics (the twin of :mod:`.cuda_warp`): shuffles, ballot, syncwarp, casts,
device functions, fences, sleep and the timer.
"""

from __future__ import annotations

import time

import numpy as np

from .sim_threads import WARP, _exchange, _thread, _warp_state

# --------------------------------------------------------------------------- shuffles


def shfl_idx(v, src_lane):
    """Value of ``v`` in lane ``src_lane & 31`` (all 32 lanes must call)."""
    b = int(src_lane) & 31
    return _exchange(v, lambda lane: b, "shfl_idx")


def shfl_up(v, delta):
    """Value of lane ``lane - delta``; the caller's own value when out of range."""
    d = int(delta)
    return _exchange(v, lambda lane: lane - d, "shfl_up")


def shfl_down(v, delta):
    """Value of lane ``lane + delta``; the caller's own value when out of range."""
    d = int(delta)
    return _exchange(v, lambda lane: lane + d, "shfl_down")


def shfl_xor(v, mask):
    """Value of lane ``lane ^ mask``; the caller's own value when out of range."""
    m = int(mask)
    return _exchange(v, lambda lane: lane ^ m, "shfl_xor")


def ballot(pred):
    """uint32 mask of the lanes whose ``pred`` is true (all 32 lanes must call)."""
    t = _thread()
    lane = t.thread_id % WARP
    st = _warp_state(t)
    st.slots[lane] = bool(pred)
    st.barrier.wait("ballot")
    mask = sum(1 << j for j in range(WARP) if st.slots[j])
    st.barrier.wait("ballot")
    return np.uint32(mask)


def syncwarp():
    """Barrier of the 32 lanes of the warp (all 32 lanes must call)."""
    t = _thread()
    _warp_state(t).barrier.wait("syncwarp")


# --------------------------------------------------------------------------- casting


def cast_like(value, like):
    """``value`` converted to the type of ``like`` (member-wise for tuples), wrapping
    integers as the GPU does."""
    if isinstance(like, tuple):
        if not isinstance(value, tuple) or len(value) != len(like):
            raise TypeError(f"cannot convert {value!r} to the structure of {like!r}")
        return tuple(cast_like(v, w) for v, w in zip(value, like))
    if isinstance(like, np.generic):
        return _convert(value, like.dtype)
    if isinstance(like, bool):
        return bool(value)
    if isinstance(like, int) and not isinstance(value, (complex, np.complexfloating)):
        return int(value)
    if isinstance(like, float) and not isinstance(value, (complex, np.complexfloating)):
        return float(value)
    return value


def _convert(value, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu" and not isinstance(value, (float, np.floating, complex)):
        bits = dtype.itemsize * 8
        u = np.array(int(value) & ((1 << bits) - 1), dtype=f"u{dtype.itemsize}")
        return u.view(dtype)[()]
    with np.errstate(all="ignore"):
        return np.asarray(value).astype(dtype)[()]


def device_op(fn):
    """``fn`` as a simulated device function, with NumPy's overflow warnings off (integer
    arithmetic wraps silently, as on the GPU).

    >>> device_op(lambda a, b: a + b)(np.uint8(200), np.uint8(100))
    np.uint8(44)
    """
    from numba import cuda

    f = fn if type(fn).__name__ == "FakeCUDAKernel" else cuda.jit(device=True)(
        getattr(fn, "py_func", fn))

    def call(*args):
        with np.errstate(over="ignore"):
            return f(*args)

    return call


# --------------------------------------------------------------------------- fences, sleep


def fence_block():
    """Block-scope fence (a no-op in the simulator)."""


def fence_device():
    """Device-scope fence (a no-op in the simulator)."""


def fence_system():
    """System-scope fence (a no-op in the simulator)."""


def nanosleep(ns):
    """Sleep hint; yields the interpreter in the simulator."""
    time.sleep(0)


def globaltimer():
    """The host's nanosecond clock as ``uint64`` (the GPU's ``%globaltimer``)."""
    return np.uint64(time.perf_counter_ns())


