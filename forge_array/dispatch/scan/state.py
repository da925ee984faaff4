"""State the scan kernels keep between launches: status words with their epochs, tile counters,
the look-back statistics, and the tile sizes that fit shared memory.
"""
from __future__ import annotations

import threading

import numpy as np

from ... import runtime
from ...kernels import scan_spec as _spec
from ...runtime import temp
from ...runtime.caches import Cache
from ...runtime.scan_state import TileState, zeros16

# --------------------------------------------------------------------------- kernel path


def _new_state(like, packed, acc_dtypes, slots):
    """The :class:`forge_array.runtime.scan_state.TileState` of the kernel layer on ``like``'s
    device (a buffer per word array, the counter of the kernels' statistics words)."""
    return TileState(runtime.array_module(like), packed, acc_dtypes, slots, _spec.STAT_WORDS, runtime.buffer_of)


_zeros16 = zeros16

THREAD_LOCAL = threading.local()


def state_key(like):
    if runtime.is_cupy_array(like):
        return runtime.stream_key()  # (device, stream)
    return ("host",)


def tile_state(like, acc_dtypes, slots, wide=True, flags=False):
    """The tile state (:class:`forge_array.runtime.scan_state.TileState`) of this stream and
    value type with room for ``slots`` tile states; ``flags``: a flag word per tile plus
    separate value slots even when the value would fit a packed word (the narrow scan keeps
    ``p`` values per tile)."""
    cache = getattr(THREAD_LOCAL, "states", None)
    if cache is None:
        cache = THREAD_LOCAL.states = {}
    packed = 0 if flags else (_spec.status_words(acc_dtypes) if _spec.packable(acc_dtypes, wide) else 0)
    key = state_key(like) + (packed, acc_dtypes)
    st = cache.get(key)
    if st is None:
        st = cache[key] = _new_state(like, packed, acc_dtypes, max(slots, 1024))
    elif st.slots < slots:
        st.grow(max(slots, 2 * st.slots))
    return st


def reset_states():
    for st in getattr(THREAD_LOCAL, "states", {}).values():
        st.reset()


# a failed launch (simulator) may have taken fewer tickets than its tiles
temp.on_discard(reset_states)


def after_launch(st, ntiles):
    st.advance(ntiles)


def scan_statistics():
    """Look-back statistics of this thread's scans so far (simulator and GPU): ``spins``
    (reads of a predecessor that had not published yet) and ``agg_steps`` (look-back steps
    that found only aggregates and went further back). Reads device memory (syncs).

    >>> sorted(scan_statistics())
    ['agg_steps', 'spins']
    """
    spins = agg = 0
    for st in getattr(THREAD_LOCAL, "states", {}).values():
        c = st.counter.get() if runtime.is_cupy_array(st.counter) else st.counter
        spins += int(c[_spec.STAT_SPINS])
        agg += int(c[_spec.STAT_AGG_WINDOWS])
    return {"spins": spins, "agg_steps": agg}


_INIT_CACHE = Cache("dispatch.scan.INIT_CACHE", 256)


def init_buffers(like, acc_dtypes, init):
    key = (state_key(like), acc_dtypes, None if init is None else tuple(v.tobytes() for v in init))
    b = _INIT_CACHE.get(key)
    if b is None:
        xp = runtime.array_module(like)
        vals = init if init is not None else tuple(d.type(0) for d in acc_dtypes)
        b = tuple(xp.asarray(np.array([v], dtype=d)) for v, d in zip(vals, acc_dtypes))
        _INIT_CACHE[key] = b
    return b


_SMEM_LIMIT = 46 * 1024  # static shared memory of a block: 48 KiB, less the small arrays


def items_for(p, acc_dtypes):
    """Items per thread of the tile scan: ``item_bytes`` (``item_bytes_8`` for values of
    8 bytes or more when given) over the value size, capped by ``items_max`` and by the
    padded tile's static shared memory, rounded down to a power of two."""
    nbytes = sum(d.itemsize for d in acc_dtypes)
    ib = (p.get("item_bytes_8") or p["item_bytes"]) if nbytes >= 8 else p["item_bytes"]
    items = max(1, min(p.get("items_max", 32), ib // nbytes,
                       _SMEM_LIMIT * 32 // (33 * p["block"] * nbytes)))
    return 1 << (items.bit_length() - 1)  # a power of two


def items_for_size(p, items, total, acc_dtypes):
    """Items per thread of the tile scan for ``total`` elements: ``items`` halved while the
    scan would fill fewer than ``min_tiles`` tiles (0: never), down to ``item_bytes_min``
    bytes of values per thread.  Smaller tiles spread a mid-size scan over more SMs: with
    tiles of 8192 float32 a scan of 10^5 runs on 13 blocks.

    >>> p = {"block": 256, "min_tiles": 128, "item_bytes_min": 16}
    >>> f32 = (np.dtype("float32"),)
    >>> [items_for_size(p, 32, n, f32) for n in (10**4, 10**5, 10**6, 10**7)]
    [4, 4, 16, 32]
    """
    mt = int(p.get("min_tiles", 0))
    if not mt:
        return items
    nbytes = sum(d.itemsize for d in acc_dtypes)
    low = max(1, int(p.get("item_bytes_min", 16)) // nbytes)
    block = p["block"]
    while items > low and total < mt * block * items:
        items //= 2
    return items


def fit_items(p, items, n, in_dtypes, acc_dtypes, tuple_op):
    """Items per thread so that a row's tiles are about equally full (``fit_items``): the
    fewest tiles of at most ``items`` per thread, then the fewest items (a multiple of the
    128-bit vector width) that still cover the row in that many tiles, allowing for the
    alignment lead. A row of 10^4 float32 with tiles of 8192 gets 2 tiles of 5120 instead
    of one full tile and one of 1808 elements (half the blocks of a batch idle).

    >>> p = {"block": 256, "fit_items": True}
    >>> f32 = (np.dtype("float32"),)
    >>> fit_items(p, 32, 10**4, f32, f32, False), fit_items(p, 32, 10**8, f32, f32, False)
    (20, 32)
    """
    if not p.get("fit_items", True) or tuple_op:
        return items
    v = max(16 // in_dtypes[0].itemsize, 16 // acc_dtypes[0].itemsize, 1)
    if items % v or items <= v:
        return items
    block = p["block"]
    span = n + v - 1  # the lead (< v elements) shifts the first tile
    nt = -(-span // (block * items))
    fit = -(-span // (nt * block))
    fit = -(-fit // v) * v
    return min(items, fit)


def common_layout(arrs):
    """Element strides shared by all arrays, or None."""
    try:
        ss = [runtime.element_strides(a) for a in arrs]
    except ValueError:
        return None
    return ss[0] if all(s == ss[0] for s in ss) else None


