"""Simulated shared scratch, memory barriers in shared memory, bulk copies and named barriers.
"""

from __future__ import annotations

import time

import numpy as np

from . import sim_threads as _threads
from .sim_memory import _address, _dtype_of
from .sim_threads import _STATE_LOCK, _failed_sibling, _thread, _WarpBarrier

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
        t._forge_mbar_deadline = now + _threads.BARRIER_TIMEOUT
    elif now > deadline:
        raise RuntimeError(f"mbar_try_wait: deadlock: phase {int(parity) & 1} of a memory "
                           f"barrier did not complete within {_threads.BARRIER_TIMEOUT:g} s")
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
