"""Simulator implementation of the intrinsics: plain Python for numba's CUDA simulator.

numba's simulator runs every thread of a block as a Python thread
(``threading.current_thread()`` is a ``BlockThread`` with ``thread_id``, ``threadIdx``,
``blockIdx`` and ``_manager``, the ``BlockManager`` of the running block), one block after
the other. Warp shuffles exchange values through per-warp slots kept on the block manager
and a barrier of the 32 lanes; fences are no-ops; atomics take a lock; and
``load_acquire`` / ``load_relaxed`` model weak visibility by sometimes returning an older
value written at the same address by ``store_release`` or an atomic (seeded by
``FORGE_ARRAY_SIM_SEED``; probability ``FORGE_ARRAY_SIM_STALE``, default 1/3), so look-back
code meets predecessors that "have not published yet".

Example
-------
>>> VEC("float32"), VEC("int8")
(4, 16)
"""

from __future__ import annotations

import os
import random
import re
import sys
import threading
import time

import numpy as np

WARP = 32

# Simulated threads hand the interpreter to each other at every warp barrier and
# syncthreads; a short switch interval makes simulated kernels several times faster.
if sys.getswitchinterval() > 0.001:
    sys.setswitchinterval(0.001)

#: seconds a lane waits at a warp barrier before the run is declared deadlocked (the tests
#: run a test that failed on such a deadlock once more: tests/conftest.py)
BARRIER_TIMEOUT = float(os.environ.get("FORGE_ARRAY_SIM_BARRIER_TIMEOUT", "30"))

__all__ = [
    "WARP", "VEC", "lane_id", "warp_id", "ballot", "syncwarp", "shfl_idx", "shfl_up", "shfl_down", "shfl_xor",
    "fence_block", "fence_device", "fence_system", "load_acquire", "store_release",
    "load_relaxed", "atomic_add", "atomic_exch", "atomic_cas", "load", "store", "vload",
    "vstore", "vstore_shared", "vload_shared", "vload_hinted", "vstore_hinted", "nanosleep", "cast_like",
    "with_shared_scratch", "memory_model",
    "device_op", "globaltimer",
]


def VEC(dtype) -> int:
    """Elements of ``dtype`` per 128-bit access.

    >>> VEC("float64"), VEC("complex128")
    (2, 1)
    """
    try:
        return 16 // np.dtype(dtype).itemsize
    except TypeError:
        from numba.np import numpy_support

        return 16 // numpy_support.as_dtype(dtype).itemsize


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
            while gen == self.generation:
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
                        "call warp intrinsics, and the block size must be a multiple of 32)"
                    )
                    self.cond.notify_all()
                    raise RuntimeError(self.broken)
                self.cond.wait(0.05)


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
        run(self)
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


# --------------------------------------------------------------------------- memory model


def _dtype_of(p):
    dt = getattr(p, "dtype", None)
    if dt is None:
        raise TypeError(f"expected a buffer, got {type(p).__name__}")
    return np.dtype(dt)


def _address(p, i) -> int:
    addr = getattr(p, "address", None)
    if addr is not None:
        return int(addr(int(i)))
    a = np.asarray(p)
    if a.ndim != 1:
        raise TypeError("expected a 1-D buffer")
    return int(a.__array_interface__["data"][0]) + int(i) * a.strides[0]


class _MemoryModel:
    """Per-address histories of values published by ``store_release`` and atomics."""

    def __init__(self):
        self.lock = threading.RLock()
        self.seed = int(os.environ.get("FORGE_ARRAY_SIM_SEED", "12345"))
        self.stale = float(os.environ.get("FORGE_ARRAY_SIM_STALE", str(1 / 3)))
        self.max_stale_run = 16
        self.rng = random.Random(self.seed)
        self.history = {}
        self.context = None

    def reset(self, seed=None, stale=None):
        """Forget all histories; optionally reseed and set the stale-read probability."""
        with self.lock:
            if seed is not None:
                self.seed = int(seed)
            if stale is not None:
                self.stale = float(stale)
            self.rng = random.Random(self.seed)
            self.history = {}

    def _check_launch(self):
        from numba.cuda.simulator import kernel as simkernel

        ctx = simkernel._get_kernel_context()
        if ctx is not self.context:  # a new launch: kernel boundaries make all visible
            self.context = ctx
            self.history = {}

    def _hist(self, p, i, create):
        key = _address(p, i)
        cur = p[i]
        h = self.history.get(key)
        if h is not None and not _same(h[-1], cur):
            h = None  # memory was written by other means: the history is stale
        if h is None:
            if not create:
                self.history.pop(key, None)
                return key, None, cur
            h = self.history[key] = [cur]
        return key, h, cur

    def publish(self, p, i, value):
        with self.lock:
            self._check_launch()
            _, h, _ = self._hist(p, i, True)
            p[i] = value
            h.append(p[i])

    def rmw(self, p, i, fn):
        with self.lock:
            self._check_launch()
            _, h, cur = self._hist(p, i, True)
            new = fn(cur)
            if new is not None:
                p[i] = new
                h.append(p[i])
            return cur

    def read(self, p, i):
        t = threading.current_thread()
        with self.lock:
            self._check_launch()
            key, h, cur = self._hist(p, i, False)
            if h is None or len(h) == 1:
                return cur
            seen = t.__dict__.setdefault("_forge_seen", {})
            s = seen.get(key)
            lo, run = (s[1], s[2]) if s is not None and s[0] is h else (0, 0)
            last = len(h) - 1
            if lo < last and run < self.max_stale_run and self.rng.random() < self.stale:
                k = self.rng.randrange(lo, last)
                run += 1
            else:
                k, run = last, 0
            seen[key] = (h, k, run)  # coherence: never read older than already observed
            return h[k]


def _same(a, b) -> bool:
    try:
        return bool(a == b) or (a != a and b != b)
    except Exception:
        return a is b


#: the simulator's memory model (``memory_model.reset(seed=..., stale=...)`` in tests)
memory_model = _MemoryModel()

_WORD_DTYPES = tuple(np.dtype(t) for t in ("int32", "uint32", "int64", "uint64"))


def _check_word(what, p, allow_float=True):
    dt = _dtype_of(p)
    ok = dt in _WORD_DTYPES or (allow_float and dt in (np.dtype("float32"), np.dtype("float64")))
    if not ok:
        raise TypeError(f"{what}: unsupported element type {dt} (int32, uint32, int64, uint64)")
    return dt


def load_acquire(p, i):
    """``p[i]`` with acquire semantics; may return an older published value (see module)."""
    _check_word("load_acquire", p)
    return memory_model.read(p, i)


def load_relaxed(p, i):
    """``p[i]`` with relaxed semantics; may return an older published value."""
    _check_word("load_relaxed", p)
    return memory_model.read(p, i)


def store_release(p, i, v):
    """``p[i] = v`` with release semantics (recorded in the address's history)."""
    dt = _check_word("store_release", p)
    memory_model.publish(p, i, _convert(v, dt))


def atomic_add(p, i, v):
    """Atomically ``p[i] += v`` (wrapping); returns the old value."""
    dt = _check_word("atomic_add", p, allow_float=False)
    return memory_model.rmw(p, i, lambda old: _convert(int(old) + int(v), dt))


def atomic_exch(p, i, v):
    """Atomically ``p[i] = v``; returns the old value."""
    dt = _check_word("atomic_exch", p, allow_float=False)
    return memory_model.rmw(p, i, lambda old: _convert(v, dt))


def atomic_cas(p, i, expected, new):
    """Atomically ``if p[i] == expected: p[i] = new``; returns the old value."""
    dt = _check_word("atomic_cas", p, allow_float=False)
    exp = _convert(expected, dt)
    return memory_model.rmw(p, i, lambda old: _convert(new, dt) if old == exp else None)


# --------------------------------------------------------------------------- load / store


def load(p, i):
    """``p[i]`` for a buffer, or the tuple of ``q[i]`` for a tuple of buffers."""
    if isinstance(p, tuple):
        return tuple(load(q, i) for q in p)
    return p[i]


def store(p, i, v):
    """``p[i] = v`` for a buffer, or member-wise for a tuple of buffers."""
    if isinstance(p, tuple):
        if not isinstance(v, tuple) or len(v) != len(p):
            raise TypeError(f"store: value {v!r} does not match a tuple of {len(p)} buffers")
        for q, x in zip(p, v):
            store(q, i, x)
        return
    p[i] = v


# --------------------------------------------------------------------------- 128-bit access


def _check_aligned(what, p, i):
    addr = _address(p, i)
    if addr % 16:
        raise ValueError(
            f"{what}: misaligned 128-bit access at element {int(i)} (address % 16 == "
            f"{addr % 16}); the address must be 16-byte aligned"
        )


def vload(p, i):
    """128-bit load: the tuple ``(p[i], ..., p[i + VEC - 1])``; ``p[i]`` must be 16-byte
    aligned (checked)."""
    _check_aligned("vload", p, i)
    n = VEC(_dtype_of(p))
    return tuple(p[i + k] for k in range(n))


def vstore(p, i, values):
    """128-bit store of the ``VEC`` values of a tuple at ``p[i], ...`` (16-byte aligned)."""
    _check_aligned("vstore", p, i)
    n = VEC(_dtype_of(p))
    if len(values) != n:
        raise TypeError(f"vstore: expected {n} values, got {len(values)}")
    for k in range(n):
        p[i + k] = values[k]


def vstore_shared(a, i, values):
    """:func:`vstore` into a block-shared array (``st.shared.v4`` on the GPU); the index must
    be a multiple of ``VEC`` (the kernels lay shared tiles out from a 16-byte boundary)."""
    n = VEC(_dtype_of(a))
    if (int(i) * (16 // n)) % 16:
        raise ValueError(f"vstore_shared: misaligned 128-bit access at element {int(i)}")
    if len(values) != n:
        raise TypeError(f"vstore_shared: expected {n} values, got {len(values)}")
    for k in range(n):
        a[i + k] = values[k]


def vload_shared(a, i):
    """:func:`vload` from a block-shared array (``ld.shared.v4`` on the GPU); the index must be
    a multiple of ``VEC``."""
    n = VEC(_dtype_of(a))
    if (int(i) * (16 // n)) % 16:
        raise ValueError(f"vload_shared: misaligned 128-bit access at element {int(i)}")
    return tuple(a[i + k] for k in range(n))


_HINT_RE = re.compile(r"(\.[A-Za-z0-9_:]+)*")


def _check_hint(hint):
    if not isinstance(hint, str) or not _HINT_RE.fullmatch(hint):
        raise ValueError(f"cache hint {hint!r}: expected PTX qualifiers such as '.nc.L2::256B' or ''")


def vload_hinted(hint: str):
    """:func:`vload` with a PTX cache hint (``ld.global<hint>.v4`` on the GPU); the simulator
    has no caches, so it is :func:`vload` itself.

    >>> vload_hinted(".nc") is vload
    True
    """
    _check_hint(hint)
    return vload


def vstore_hinted(hint: str):
    """:func:`vstore` with a PTX cache hint (``st.global<hint>.v4`` on the GPU); here
    :func:`vstore` itself.

    >>> vstore_hinted(".cs") is vstore
    True
    """
    _check_hint(hint)
    return vstore


# --------------------------------------------------------------------------- shared scratch

_SCRATCH_IDS = iter(range(1 << 62))


def with_shared_scratch(n: int, ttype, body, nargs: int = 1):
    """Function ``(a_1, ..., a_nargs) -> body(s, a_1, ..., a_nargs)`` where ``s`` is an array
    of ``n`` elements of block-shared memory (a tuple of arrays for a tuple of dtypes): one
    allocation per block and per call of this factory.

    >>> def body(s, v):
    ...     return s
    >>> f = with_shared_scratch(4, ("float32", "int64"), body)
    >>> callable(f)
    True
    """
    with _STATE_LOCK:
        uid = next(_SCRATCH_IDS)
    _alloc(0, ttype)  # validates the dtypes now

    def with_scratch(*args):
        if len(args) != nargs:
            raise TypeError(f"expected {nargs} arguments, got {len(args)}")
        mgr = _thread()._manager
        with _STATE_LOCK:
            allocs = getattr(mgr, "_forge_scratch", None)
            if allocs is None:
                allocs = mgr._forge_scratch = {}
            s = allocs.get(uid)
            if s is None:
                s = allocs[uid] = _alloc(n, ttype)
        return body(s, *args)

    return with_scratch


def _alloc(n, ttype):
    if isinstance(ttype, (tuple, list)):
        return tuple(_alloc(n, t) for t in ttype)
    return np.zeros(n, np.dtype(ttype))


# --------------------------------------------------------------------------- asynchronous
# bulk copies, memory barriers in shared memory, named barriers (simulated: copies happen at
# once, barriers are Python objects kept per block)

__all__ += ["mbar_init", "mbar_fence_init", "mbar_arrive", "mbar_arrive_tx", "mbar_try_wait",
            "bulk_load", "bulk_store", "bulk_commit", "bulk_wait_read", "fence_proxy_async",
            "bar_sync"]


class _MBarrier:
    """An ``mbarrier``: ``count`` arrivals and the expected bytes complete a phase."""

    __slots__ = ("count", "pending", "tx", "phase")

    def __init__(self, count):
        self.count, self.pending, self.tx, self.phase = int(count), int(count), 0, 0

    def _maybe_flip(self):
        if self.pending == 0 and self.tx == 0:
            self.phase ^= 1
            self.pending = self.count


def _block_objects(kind):
    mgr = _thread()._manager
    with _STATE_LOCK:
        objs = getattr(mgr, "_forge_" + kind, None)
        if objs is None:
            objs = {}
            setattr(mgr, "_forge_" + kind, objs)
    return objs


def _mbar(bars, i):
    objs = _block_objects("mbars")
    key = _address(bars, i)
    with _STATE_LOCK:
        b = objs.get(key)
    if b is None:
        raise RuntimeError(f"memory barrier at element {int(i)} used before mbar_init")
    return b


def mbar_init(bars, i, count):
    """Initialise barrier ``bars[i]`` for ``count`` arrivals per phase."""
    if int(count) < 1:
        raise ValueError("mbar_init: count must be >= 1")
    objs = _block_objects("mbars")
    with _STATE_LOCK:
        objs[_address(bars, i)] = _MBarrier(count)


def mbar_fence_init():
    """Fence after barrier initialisation (a no-op here)."""


def mbar_arrive(bars, i):
    """One arrival on ``bars[i]``."""
    b = _mbar(bars, i)
    with _STATE_LOCK:
        if b.pending <= 0:
            raise RuntimeError("mbar_arrive: more arrivals than the barrier's count")
        b.pending -= 1
        b._maybe_flip()


def mbar_arrive_tx(bars, i, nbytes):
    """One arrival on ``bars[i]`` that expects ``nbytes`` more bytes of bulk copies."""
    b = _mbar(bars, i)
    with _STATE_LOCK:
        b.tx += int(nbytes)
        if b.pending <= 0:
            raise RuntimeError("mbar_arrive_tx: more arrivals than the barrier's count")
        b.pending -= 1
        b._maybe_flip()


def mbar_try_wait(bars, i, parity):
    """Whether the phase of ``bars[i]`` with parity ``parity`` has completed (yields the
    interpreter when not; a wait longer than the barrier timeout is a deadlock)."""
    b = _mbar(bars, i)
    t = _thread()
    deadline = getattr(t, "_forge_mbar_deadline", None)
    if b.phase != (int(parity) & 1):
        t._forge_mbar_deadline = None
        return True
    now = time.monotonic()
    if deadline is None:
        t._forge_mbar_deadline = now + BARRIER_TIMEOUT
    elif now > deadline:
        raise RuntimeError(f"mbar_try_wait: deadlock: phase {int(parity) & 1} of a memory "
                           f"barrier did not complete within {BARRIER_TIMEOUT:g} s")
    failed = _failed_sibling(t)
    if failed is not None or getattr(t, "abort", False):
        raise RuntimeError(f"simulated kernel aborted: {failed}")
    time.sleep(0.0005)
    return False


def _bulk_check(what, p, i, sh, k, nbytes, side):
    """Elements of a bulk copy of ``nbytes`` between global ``p + i`` and shared ``sh + k``
    (both 16-byte aligned, the same dtype, a positive multiple of 16 bytes)."""
    if int(nbytes) % 16 or int(nbytes) <= 0:
        raise ValueError(f"{what}: {int(nbytes)} bytes is not a positive multiple of 16")
    if _address(p, i) % 16:
        raise ValueError(f"{what}: misaligned bulk copy at element {int(i)}")
    dt = _dtype_of(p)
    if _dtype_of(sh) != dt:
        raise TypeError(f"{what}: the global and shared arrays must have the same dtype")
    if (int(k) * dt.itemsize) % 16:
        raise ValueError(f"{what}: misaligned shared {side} at element {int(k)}")
    return int(nbytes) // dt.itemsize


def bulk_load(sh, k, src, i, nbytes, bars, b):
    """Copy ``nbytes`` from ``src + i`` to ``sh + k`` (same dtype) and complete them on
    barrier ``bars[b]``."""
    n = _bulk_check("bulk_load", src, i, sh, k, nbytes, "destination")
    k, i = int(k), int(i)
    for e in range(n):
        sh[k + e] = src[i + e]
    m = _mbar(bars, b)
    with _STATE_LOCK:
        m.tx -= int(nbytes)
        m._maybe_flip()


def bulk_store(dst, i, sh, k, nbytes):
    """Copy ``nbytes`` from ``sh + k`` to ``dst + i`` (same dtype)."""
    n = _bulk_check("bulk_store", dst, i, sh, k, nbytes, "source")
    k, i = int(k), int(i)
    for e in range(n):
        dst[i + e] = sh[k + e]


def bulk_commit():
    """Close the group of bulk stores (they are done at once here)."""


def bulk_wait_read():
    """Wait for bulk stores to read shared memory (done at once here)."""


def fence_proxy_async():
    """Order shared-memory accesses with bulk copies (a no-op here)."""


def bar_sync(bid, nthreads):
    """Named barrier ``bid`` of ``nthreads`` threads."""
    objs = _block_objects("named_bars")
    key = (int(bid), int(nthreads))
    with _STATE_LOCK:
        bar = objs.get(key)
        if bar is None:
            bar = objs[key] = _WarpBarrier(int(nthreads))
    bar.wait(f"bar_sync({int(bid)}, {int(nthreads)})")
