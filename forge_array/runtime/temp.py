"""Temporary storage for kernels: partials, tile status words, counters.

On the GPU it comes from CuPy's memory pool on the current stream; in the simulator it is
NumPy. :func:`counters` hands out small zero-initialised integer buffers that kernels must
leave zeroed when they finish (e.g. the last block resets its ticket), so that no extra
launch is needed to clear them; one set per (device, stream, host thread), so several
threads and streams can run forge_array at once.

Example
-------
>>> import numpy as np
>>> t = empty(4, np.float32, np.zeros(1))   # like= picks NumPy or CuPy
>>> t.shape
(4,)
"""

from __future__ import annotations

import threading

import numpy as np

from . import backend, config

_local = threading.local()


_xp = backend.array_module


def empty(n: int, dtype, like) -> "np.ndarray":
    """Uninitialised 1-D temporary of ``n`` elements on ``like``'s device."""
    return _xp(like).empty(int(n), dtype=dtype)


def zeros(n: int, dtype, like):
    """Zeroed 1-D temporary (costs a memset launch on the GPU; prefer :func:`counters`)."""
    return _xp(like).zeros(int(n), dtype=dtype)


def scratch(nbytes: int, like, key=None):
    """A cached uninitialised byte buffer (``uint8``) of at least ``nbytes`` for the current
    device and stream (the host thread in the simulator): ``key`` is
    :func:`forge_array.runtime.backend.stream_key` when the caller has it. Launches on one
    stream are ordered, so kernels on one stream may share it, one launch after another.
    It grows by doubling; a buffer handed out before stays valid for as long as its holder
    keeps a reference (the older ones together take less memory than the newest).

    >>> b = scratch(100, np.zeros(1))
    >>> b.dtype == np.uint8 and b.size >= 100
    True
    """
    if key is None:
        key = backend.stream_key()
    cache = _SCRATCH.get(type(like))
    if cache is None:
        cache = _SCRATCH[type(like)] = {}
    buf = cache.get(key)
    if buf is None and len(cache) >= 64:  # many streams (or simulator threads) over time
        cache.clear()
    if buf is None or buf.size < nbytes:
        size = max(int(nbytes), 4096, 2 * buf.size if buf is not None else 0)
        buf = cache[key] = _xp(like).empty(size, dtype=np.uint8)
    return buf


_SCRATCH: dict = {}

_ON_DISCARD: list = []


def on_discard(fn) -> None:
    """Register ``fn()`` to reset cached per-thread kernel state in place (e.g. scan tile
    states) whenever :func:`discard` runs."""
    _ON_DISCARD.append(fn)


def discard() -> None:
    """Zero this host thread's counters in place and reset the state registered with
    :func:`on_discard`.

    Called after a kernel launch fails (in the simulator a kernel can stop half-way, e.g. on
    a Python exception in one thread): such a launch may leave a ticket counter non-zero or
    scan tickets unaccounted for. The buffers stay the same objects, so launch plans that
    replay them stay valid.

    >>> discard()
    """
    for buf in getattr(_local, "counters", {}).values():
        buf[...] = 0
    for fn in _ON_DISCARD:
        fn()


def counters(n: int, like, dtype=np.uint32):
    """A cached zeroed buffer of at least ``n`` integers for the current device, stream and
    host thread. The kernel that uses it must leave every word it touched back at zero."""
    cache = getattr(_local, "counters", None)
    if cache is None:
        cache = _local.counters = {}
    if config.SIMULATE or not backend.is_cupy_array(like):
        key = ("host", np.dtype(dtype).str)
    else:
        cp = backend.cupy()
        key = (cp.cuda.runtime.getDevice(), cp.cuda.get_current_stream().ptr, np.dtype(dtype).str)
    buf = cache.get(key)
    if buf is None or buf.size < n:
        buf = _xp(like).zeros(max(int(n), 64), dtype=dtype)
        cache[key] = buf
    return buf
