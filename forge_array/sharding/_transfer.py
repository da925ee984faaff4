"""Copies between the devices of a sharding: blocks out (scatter), blocks in (gather),
small partial results to one device, operands to every device.

GPU to GPU copies are peer copies (``cudaMemcpyPeerAsync``) on the destination's current
stream, ordered after the source's pending work by an event, and the source's stream waits
for the copy before it reuses the memory; nothing here waits on the host. Peer access is left as
it is: enabling it for every pair (4× H100, NVLink) made the sharded reductions' combine of
a few bytes per GPU slower, not faster (``sum`` 3.48 against 3.37 ms, ``argmax`` 4.12
against 3.59 at 4 GPUs, ``python -m bench.suite_shard --gpus 1,2,4``).

Small partial results gathered onto one device (a reduction's per-block partials, a scan's
block totals: up to :data:`STAGED_BYTES` each) travel through pinned host memory instead:
one copy out on each source's own stream, the destination's stream waits for those copies'
events and copies the staged rows in with one copy. That is fewer driver calls on the host
than a peer copy's two-sided ordering, and the source's memory is safe without its stream
waiting for the destination. With the launch order of :mod:`._reductions`, on 4× H200:
``sum`` 2.34 -> 2.27 ms, ``argmax`` 2.89 -> 2.31 ms (``python -m bench.suite_shard --gpus 1,4
--per-gpu 2e9 --scaling weak``; bench/results/nvidia-h200/shard-before-after.md). The pinned
buffer is kept until the copy into the device has finished (:data:`_IN_FLIGHT`).
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from .. import _devices as _dev
from .. import _ownership as _own
from .._array import Array
from .._interop import transfer
from ..runtime.caches import Cache
from ..runtime.memory import data_address
from . import _core
from ._core import ShardedArray, Sharding, block_sizes

__all__ = ["move", "stack_on", "scatter", "gather", "reshard", "replicate", "replica", "block_slice"]


def _cupy():
    return _dev.cupy_module()


def _peer_copy(dst_ptr, dst, src_arr, src, nbytes):
    """Copy ``nbytes`` from the C-contiguous CuPy array ``src_arr`` on GPU ``src`` to address
    ``dst_ptr`` on GPU ``dst``, stream-ordered on both sides."""
    cp = _cupy()
    with cp.cuda.Device(src.index):
        s_stream = cp.cuda.get_current_stream()
        ready = cp.cuda.Event(disable_timing=True)
        ready.record(s_stream)
    with cp.cuda.Device(dst.index):
        d_stream = cp.cuda.get_current_stream()
        d_stream.wait_event(ready)
        cp.cuda.runtime.memcpyPeerAsync(dst_ptr, dst.index, src_arr.data.ptr, src.index,
                                        nbytes, d_stream.ptr)
        done = cp.cuda.Event(disable_timing=True)
        done.record(d_stream)
    with cp.cuda.Device(src.index):
        s_stream.wait_event(done)


def _contiguous(arr, dev):
    if arr.flags.c_contiguous:
        return arr
    with _dev.on(dev):
        if dev.is_cuda:
            return _cupy().ascontiguousarray(arr)
        return np.ascontiguousarray(arr)


def move(arr, src, dst):
    """Backend array ``arr`` (on device ``src``) on device ``dst``: itself when ``src ==
    dst``, else a C-contiguous copy."""
    if src == dst:
        return arr
    if src.is_cuda and dst.is_cuda:
        arr = _contiguous(arr, src)
        cp = _cupy()
        with cp.cuda.Device(dst.index):
            out = cp.empty(arr.shape, arr.dtype)
        if arr.nbytes:
            _peer_copy(out.data.ptr, dst, arr, src, arr.nbytes)
        return out
    return transfer(arr, src, dst)


def _copy_into(out, dst, arr, src):
    """``out[...] = arr`` where ``out`` is on ``dst`` and ``arr`` on ``src``."""
    if arr.size == 0:
        return
    if src.is_cuda and dst.is_cuda and src != dst and out.flags.c_contiguous:
        _peer_copy(out.data.ptr, dst, _contiguous(arr, src), src, arr.nbytes)
        return
    a = move(arr, src, dst)
    with _dev.on(dst):
        out[...] = a


#: partials up to this many bytes each are gathered through pinned host memory
STAGED_BYTES = 1 << 16
#: (event on the destination's stream, pinned buffer): kept until the event has passed
_IN_FLIGHT: collections.deque = collections.deque()
_IN_FLIGHT_LOCK = threading.Lock()
_D2H, _H2D, _D2D = 2, 1, 3


def _retire():
    with _IN_FLIGHT_LOCK:
        while _IN_FLIGHT and _IN_FLIGHT[0][0].done:
            _IN_FLIGHT.popleft()
        oldest = _IN_FLIGHT.popleft() if len(_IN_FLIGHT) > 256 else None
    if oldest is not None:  # a host that outruns its devices: wait for the oldest
        oldest[0].synchronize()


def _staged_into(out, dst, parts, devices):
    """``out[i] = parts[i]`` for C-contiguous ``out`` on GPU ``dst`` and small CuPy arrays
    ``parts[i]`` on GPUs ``devices[i]``: remote rows through one pinned host buffer, local
    rows copied on the destination's stream after them."""
    cp = _cupy()
    _retire()
    row = out.nbytes // len(parts)
    host = cp.cuda.alloc_pinned_memory(out.nbytes)
    ready = []
    local = []
    for i, (p, d) in enumerate(zip(parts, devices)):
        p = _contiguous(p, d)
        if d == dst:
            local.append((i, p))
            continue
        with cp.cuda.Device(d.index):
            st = cp.cuda.get_current_stream()
            cp.cuda.runtime.memcpyAsync(host.ptr + i * row, p.data.ptr, row, _D2H, st.ptr)
            e = cp.cuda.Event(disable_timing=True)
            e.record(st)
            ready.append(e)
    with cp.cuda.Device(dst.index):
        st = cp.cuda.get_current_stream()
        for e in ready:
            st.wait_event(e)
        cp.cuda.runtime.memcpyAsync(out.data.ptr, host.ptr, out.nbytes, _H2D, st.ptr)
        for i, p in local:
            cp.cuda.runtime.memcpyAsync(out.data.ptr + i * row, p.data.ptr, row, _D2D, st.ptr)
        done = cp.cuda.Event(disable_timing=True)
        done.record(st)
    with _IN_FLIGHT_LOCK:
        _IN_FLIGHT.append((done, host))


def stack_on(parts, devices, dst):
    """Backend arrays ``parts`` (one shape and dtype, ``parts[i]`` on ``devices[i]``)
    stacked along a new leading axis on ``dst``."""
    p0 = parts[0]
    shape = (len(parts),) + tuple(p0.shape)
    m = _dev.backend(dst)
    with _dev.on(dst):
        out = m.empty(shape, dtype=p0.dtype)
    if (out.nbytes and p0.nbytes <= STAGED_BYTES and dst.is_cuda
            and all(d.is_cuda for d in devices) and any(d != dst for d in devices)):
        _staged_into(out, dst, parts, devices)
        return out
    for i, (p, d) in enumerate(zip(parts, devices)):
        _copy_into(out[i, ...], dst, p, d)
    return out


def block_slice(ndim, axis, start, stop):
    key = [slice(None)] * ndim
    key[axis] = slice(start, stop)
    return tuple(key)


def _split(x: Array, sharding: Sharding, axis: int, sizes=None):
    """Blocks of the unsharded array ``x`` on the sharding's devices (copies)."""
    if sizes is None:
        sizes = block_sizes(x.shape[axis], sharding.num_shards)
    src = x.device
    arr = x._array
    shards = []
    start = 0
    for d, b in zip(sharding.devices, sizes):
        part = arr[block_slice(arr.ndim, axis, start, start + b)]
        start += b
        if d == src:
            with _dev.on(d):
                part = part.copy()
        else:
            part = move(part, src, d)
        shards.append(Array._new(part, d))
    return shards


def scatter(x, sharding: Sharding):
    """``x`` (an unsharded array) split over ``sharding``: a copy."""
    if isinstance(x, ShardedArray):
        return reshard(x, sharding)
    axis = sharding.resolve_axis(x.ndim)
    return ShardedArray._from_shards(_split(x, sharding, axis), sharding, axis, x.shape)


def gather(x: ShardedArray, dst) -> Array:
    """The sharded array ``x`` as one array on device ``dst``."""
    m = _dev.backend(dst)
    with _dev.on(dst):
        out = m.empty(x.shape, dtype=x.dtype)
    off = x._offsets
    for i, s in enumerate(x._shards):
        if off[i + 1] > off[i]:
            _copy_into(out[block_slice(x.ndim, x._axis, off[i], off[i + 1])], dst,
                       s._array, s.device)
    return Array._new(out, dst)


def reshard(x: ShardedArray, sharding: Sharding) -> ShardedArray:
    """``x`` split over ``sharding`` (itself when it is split that way already)."""
    axis = sharding.resolve_axis(x.ndim)
    sizes = sharding.blocks(x.shape[axis])
    if (axis == x._axis and sharding.devices == x._sharding.devices
            and tuple(x._offsets[i + 1] - x._offsets[i] for i in range(len(sizes))) == sizes):
        if sharding == x._sharding:
            return x
        return ShardedArray._from_shards(x._shards, sharding, axis, x.shape)
    # each new block assembled from the parts of the old ones it overlaps
    shards = []
    start = 0
    off = x._offsets
    nd = x.ndim
    for d, b in zip(sharding.devices, sizes):
        stop = start + b
        m = _dev.backend(d)
        shape = list(x.shape)
        shape[axis] = b
        with _dev.on(d):
            out = m.empty(tuple(shape), dtype=x.dtype)
        for i, s in enumerate(x._shards):
            if axis == x._axis:
                lo, hi = max(start, off[i]), min(stop, off[i + 1])
                if lo >= hi:
                    continue
                src = block_slice(nd, axis, lo - off[i], hi - off[i])
                dst = block_slice(nd, axis, lo - start, hi - start)
            else:
                src = block_slice(nd, axis, start, stop)
                dst = list(block_slice(nd, x._axis, off[i], off[i + 1]))
                if off[i] == off[i + 1] or b == 0:
                    continue
                dst = tuple(dst)
            _copy_into(out[dst], d, s._array[src], s.device)
        shards.append(Array._new(out, d))
        start = stop
    return ShardedArray._from_shards(shards, sharding, axis, x.shape)


class replicate:
    """Copies of one unsharded array on the devices that ask for it (each made once; a
    small array of private memory keeps them across calls, see :func:`replica`)."""

    __slots__ = ("x", "_copies")

    def __init__(self, x: Array):
        self.x = x
        self._copies = {x.device: x}

    def on(self, dev) -> Array:
        c = self._copies.get(dev)
        if c is None:
            c = self._copies[dev] = Array._new(replica(self.x._array, self.x.device, dev), dev)
        return c


#: arrays of at most this many bytes keep their copies on other devices across calls (the
#: replicated operands of sharded calls: vectors, scalars)
REPLICA_BYTES = 1 << 20
#: (id of the root array, address, dtype, shape, strides, source, destination, the
#: destination's stream) -> (the root, the count of writes when copied, the copy); the entry
#: holds the root, so its id stays its own
_REPLICAS = Cache("sharding.transfer.REPLICAS", 64)


def _stream_on(dev) -> int:
    """The current stream of GPU ``dev`` (0 for the CPU): a copy made on one stream is only
    known to be finished for later work on the same stream."""
    if not getattr(dev, "is_cuda", False):
        return 0
    cp = _cupy()
    with cp.cuda.Device(dev.index):
        return cp.cuda.get_current_stream().ptr


def replica(arr, src, dst):
    """:func:`move` of backend array ``arr`` from device ``src`` to ``dst``, kept for the
    calls after this one where ``arr`` is small and private memory
    (:func:`forge_array._ownership.is_private`: only forge_array can write it) and nothing has
    been written through forge_array since the copy (:func:`forge_array._ownership.writes`):
    a sharded ``x @ v`` called again with the same ``v`` then issues no copy of it, as an
    array placed on every device beforehand would not.  The copy is only read."""
    if src == dst or arr.nbytes > REPLICA_BYTES or not _own.is_private(arr):
        return move(arr, src, dst)
    r = _own.root(arr)
    try:
        key = (id(r), data_address(arr), arr.dtype.str, arr.shape, arr.strides, src, dst, _stream_on(dst))
        hit = _REPLICAS.get(key)
    except TypeError:   # devices that do not hash
        return move(arr, src, dst)
    n = _own.writes()
    if hit is not None and hit[0] is r and hit[1] == n:
        return hit[2]
    out = move(arr, src, dst)
    _REPLICAS[key] = (r, n, out)
    return out

_core.METHODS["scatter"] = scatter
_core.METHODS["reshard"] = reshard
_core.METHODS["gather"] = gather
