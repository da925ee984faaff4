"""Threads of the simulated kernels: lane and warp ids, the barrier of a warp's 32 lanes (with
deadlock and abort detection), the per-warp exchange slots shuffles use, and the patches that
let numba's simulator wake blocked threads by event instead of by polling and give every
thread of a block the same ``cuda.shared.array``.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np

from ..runtime.flags import FLAGS
from ..runtime.packed_words import vector_elems

WARP = 32

# Simulated threads hand the interpreter to each other at every warp barrier and
# syncthreads; a short switch interval makes simulated kernels several times faster.
if sys.getswitchinterval() > 0.001:
    sys.setswitchinterval(0.001)

#: seconds a lane waits at a warp barrier before the run is declared deadlocked (the tests
#: run a test that failed on such a deadlock once more: tests/conftest.py)
BARRIER_TIMEOUT = FLAGS["sim_barrier_timeout"].cell[0]



def VEC(dtype) -> int:
    """Elements of ``dtype`` per 128-bit access.

    >>> VEC("float64"), VEC("complex128")
    (2, 1)
    """
    try:
        return vector_elems(dtype)
    except TypeError:
        from numba.np import numpy_support

        return vector_elems(numpy_support.as_dtype(dtype))


def _thread():
    t = threading.current_thread()
    if not hasattr(t, "_manager"):
        raise RuntimeError("forge_array intrinsics must be called from a simulated kernel")
    return t


def lane_id() -> int:
    """Lane of the calling thread in its warp."""
    return _thread().thread_id % WARP


def warp_id() -> int:
    """Warp of the calling thread in its block."""
    return _thread().thread_id // WARP


# --------------------------------------------------------------------------- warp barrier

_STATE_LOCK = threading.Lock()


class _WarpBarrier:
    """Barrier of the 32 lanes of one warp that notices aborted runs and deadlocks."""

    def __init__(self, parties=WARP):
        self.parties = parties
        self.count = 0
        self.generation = 0
        self.broken = None
        self.cond = threading.Condition()

    def wait(self, what):
        t = threading.current_thread()
        with self.cond:
            if self.broken:
                raise RuntimeError(self.broken)
            gen = self.generation
            self.count += 1
            if self.count == self.parties:
                self.count = 0
                self.generation += 1
                self.cond.notify_all()
                return
            deadline = time.monotonic() + BARRIER_TIMEOUT
            seen = self.count
            while gen == self.generation:
                if self.count != seen:  # lanes still arriving: a slow warp, not a deadlock
                    seen = self.count
                    deadline = time.monotonic() + BARRIER_TIMEOUT
                if self.broken:
                    raise RuntimeError(self.broken)
                if getattr(t, "abort", False):
                    self.broken = "simulated kernel aborted"
                    self.cond.notify_all()
                    raise RuntimeError(self.broken)
                failed = _failed_sibling(t)  # a lane of this block that raised never arrives
                if failed is not None:
                    self.broken = f"simulated kernel aborted: {failed}"
                    self.cond.notify_all()
                    raise RuntimeError(self.broken)
                if time.monotonic() > deadline:
                    self.broken = (
                        f"{what}: deadlock in warp {t.thread_id // WARP} of block "
                        f"{tuple(t.blockIdx)}: only {self.count} of {self.parties} lanes "
                        f"arrived within {BARRIER_TIMEOUT:g} s (all 32 lanes of a warp must "
                        "call warp intrinsics, and the block size must be a multiple of 32); "
                        f"the warp's lanes are at: {_where_lanes_are(t)}"
                    )
                    self.cond.notify_all()
                    raise RuntimeError(self.broken)
                self.cond.wait(0.05)


#: files of the simulator itself (numba's, ours, Python's threads), skipped when telling where
#: a lane is
_MACHINERY = ("/simulator/", "/intrinsics/sim_", "/threading.py")


def _where_lanes_are(t):
    """Where the lanes of ``t``'s warp are now, grouped by place (``kernel line N`` of the
    innermost simulated frame, or ``finished``): what a deadlock message needs to say."""
    threads = getattr(t._manager, "forge_threads", ())
    w = t.thread_id // WARP
    frames = sys._current_frames()
    places: dict = {}
    for other in threads:
        if other.thread_id // WARP != w:
            continue
        f = frames.get(other.ident)
        place = "finished" if f is None else "running"
        while f is not None:  # the innermost frame of the kernel's own code
            name = f.f_code.co_filename.replace("\\", "/")
            if not any(m in name for m in _MACHINERY):
                place = f"{f.f_code.co_name} ({name.rsplit('/', 1)[-1]}) line {f.f_lineno}"
                break
            f = f.f_back
        places.setdefault(place, []).append(other.thread_id % WARP)
    return "; ".join(f"lanes {_ranges(v)}: {k}" for k, v in places.items()) or "unknown"


def _ranges(lanes):
    lanes = sorted(lanes)
    out, start = [], lanes[0]
    for a, b in zip(lanes, lanes[1:] + [None]):
        if b != a + 1:
            out.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return ",".join(out)


def _failed_sibling(t):
    """The exception of a thread of ``t``'s block that has died raising (numba's simulator
    can miss it: it drops finished threads before looking at their exceptions), or None."""
    return getattr(getattr(t, "_manager", None), "forge_failed", None)


def _patch_simulator():
    """Install the simulator patches: a thread that dies raising leaves its exception on its
    block's manager (one per block, where the lanes waiting for it at a warp barrier look) and
    wakes the manager; an event-driven block manager and ``syncthreads`` in place of numba's
    polling ones; direct calls of device functions that never reach the ``cuda`` module."""
    try:
        from numba.cuda.simulator import kernel as simk
    except ImportError:  # not simulating
        return
    if getattr(simk.BlockThread.run, "_forge_notes", False):
        return
    run = simk.BlockThread.run

    def noting_run(self):
        try:
            run(self)
        except BaseException as exc:  # noqa: BLE001  (numba's run records only what it can
            # rebuild from a message; anything else would end the lane unnoticed by its warp)
            self.exception = (RuntimeError(f"tid={list(self.threadIdx)} "
                                           f"ctaid={list(self.blockIdx)}: {exc!r}"),
                              exc.__traceback__)
        if self.exception is not None:
            m = self._manager
            cv = getattr(m, "forge_cv", None)
            if cv is None:
                m.forge_failed = self.exception[0]
            else:
                with cv:
                    m.forge_failed = self.exception[0]
                    cv.notify()

    noting_run._forge_notes = True
    simk.BlockThread.run = noting_run
    simk.BlockThread.syncthreads = _signalling_syncthreads
    simk.BlockManager.run = _event_driven_run
    call = simk.FakeCUDAKernel.__call__

    def direct_device_call(self, *args):
        if self._device and simk._kernel_context is not None and not _uses_cuda(self.fn):
            return self.fn(*args)
        return call(self, *args)

    simk.FakeCUDAKernel.__call__ = direct_device_call
    from numba.cuda.simulator import kernelapi

    kernelapi.FakeCUDAShared.array = _make_shared_array(kernelapi.FakeCUDAShared.array)


_SHARED_LOCK = threading.Lock()


def _make_shared_array(array):
    """numba's ``FakeCUDAShared.array`` with one allocation per call site that every thread
    of the block gets: numba's looks the site up and stores the new array in two steps, so
    two threads arriving together could each get an array of their own (the threads of one
    block then disagree on what a thread wrote there: divergent lanes, a deadlocked warp).
    The site is the caller's (file, line), as numba's, read from the caller's frame rather
    than from a formatted stack."""

    def shared_array(self, shape, dtype, alignment=None):
        if alignment is not None or shape == 0 or not hasattr(self, "_allocations"):
            return array(self, shape, dtype, alignment)
        f = sys._getframe(1)
        site = (f.f_code.co_filename, f.f_lineno)
        res = self._allocations.get(site)
        if res is None:
            with _SHARED_LOCK:
                res = self._allocations.get(site)
                if res is None:
                    from numba.cuda import types
                    from numba.cuda.np import numpy_support

                    if isinstance(dtype, types.Type):
                        dtype = numpy_support.as_dtype(dtype)
                    res = self._allocations[site] = np.empty(shape, dtype)
        return res

    return shared_array


def _code_names(code):
    names = set(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            names |= _code_names(c)
    return names


def _uses_cuda(fn):
    """Whether ``fn`` may reach the ``cuda`` module through its globals (then numba's simulator
    swaps in the kernel's fake module around each call, taking two locks: most device
    functions do not, and are called directly)."""
    names = getattr(fn, "_forge_names", None)
    if names is None:
        code = getattr(fn, "__code__", None)
        if code is None:
            return True
        names = fn._forge_names = tuple(_code_names(code))
    g = fn.__globals__
    for n in names:
        v = g.get(n)
        if v is not None and (type(v).__name__ == "FakeCUDAModule" or getattr(v, "__name__", "") == "numba.cuda"):
            return True
    return False


def _signalling_syncthreads(self):
    """numba's ``BlockThread.syncthreads``, telling the block's manager that one more thread
    waits (numba's manager finds out by polling every thread, which keeps the interpreter
    busy while the simulated threads need it)."""
    if self.abort:
        raise RuntimeError("abort flag set on syncthreads call")
    m = self._manager
    with m.forge_cv:
        self.syncthreads_blocked = True
        m.forge_blocked += 1
        m.forge_cv.notify()
    self.syncthreads_event.wait()
    self.syncthreads_event.clear()
    if self.abort:
        raise RuntimeError("abort flag set on syncthreads clear")


def _event_driven_run(self, grid_point, *args):
    """numba's ``BlockManager.run`` without polling: the manager sleeps on a condition that
    a thread signals when it reaches ``syncthreads`` or ends, releases the block when every
    live thread waits there, and raises the first exception of a thread (after telling the
    others to abort), as numba's does."""
    from numba.cuda.simulator import kernel as simk

    self.forge_cv = cv = threading.Condition()
    self.forge_blocked = 0
    self.forge_failed = None
    done = [0]

    def target():
        try:
            self._f(*args)
        finally:
            with cv:
                done[0] += 1
                cv.notify()

    threads = [simk.BlockThread(target, self, grid_point, point, self._debug)
               for point in np.ndindex(*self._block_dim)]
    self.forge_threads = threads
    for t in threads:
        t.start()
    with cv:
        while True:
            if self.forge_failed is not None:  # set (and notified) by the thread that raised
                for other in threads:
                    other.abort = True
                    other.syncthreads_blocked = False
                    other.syncthreads_event.set()
                first = next(t for t in threads if t.exception is not None)
                raise first.exception[0].with_traceback(first.exception[1])
            live = len(threads) - done[0]
            if live == 0:
                break
            if self.forge_blocked == live:
                self.forge_blocked = 0
                for t in threads:
                    if t.syncthreads_blocked:
                        t.syncthreads_blocked = False
                        t.syncthreads_event.set()
                continue
            cv.wait(1.0)
    for t in threads:
        t.join()
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


_patch_simulator()


class _Warp:
    __slots__ = ("slots", "barrier")

    def __init__(self):
        self.slots = [None] * WARP
        self.barrier = _WarpBarrier()


def _warp_state(t):
    mgr = t._manager
    warps = getattr(mgr, "_forge_warps", None)
    if warps is None:
        with _STATE_LOCK:
            warps = getattr(mgr, "_forge_warps", None)
            if warps is None:
                warps = mgr._forge_warps = {}
    w = t.thread_id // WARP
    st = warps.get(w)
    if st is None:
        with _STATE_LOCK:
            st = warps.get(w)
            if st is None:
                st = warps[w] = _Warp()
    return st


def _exchange(v, src_of, what):
    t = _thread()
    lane = t.thread_id % WARP
    st = _warp_state(t)
    st.slots[lane] = v
    st.barrier.wait(what)
    j = src_of(lane)
    r = st.slots[j] if 0 <= j < WARP else v
    st.barrier.wait(what)
    return r


