"""Tile-status storage of the look-back scans, without numba.

A scan launch publishes each tile's aggregate and inclusive prefix in status words that the
next launch on the same stream reuses without clearing them: every word carries the *epoch*
of the launch that wrote it, so an older word reads as not yet published, and tile ids are
tickets of a counter that only grows, turned into ids by subtracting the launch's *base*.
After a launch of ``ntiles`` tiles the base moves on by ``ntiles`` and the epoch by one; the
words are cleared only when the epoch wraps.  The kernel layer (``primitives.scan``) and the
stored launches (:mod:`.stored`) keep their states apart, each with this class.

>>> import numpy as np
>>> st = TileState(np, 2, ("float32",), 4, counter_words=8)
>>> st.status.size, st.epoch
(24, 1)
>>> st.advance(3); (st.base, st.epoch)
(3, 2)
"""

from __future__ import annotations

import numpy as np

#: the epoch wraps (and the words are cleared) before it reaches this value
EPOCH_LIMIT = (1 << 30) - 1


def zeros16(xp, n, dtype):
    """Zeroed 1-D array of ``n`` elements starting on a 16-byte boundary (CuPy allocations
    always do; NumPy ones are over-allocated and sliced)."""
    if getattr(xp, "__wrapped__", xp) is not np:
        return xp.zeros(n, dtype=dtype)
    isz = np.dtype(dtype).itemsize
    raw = np.zeros(n + 16 // isz, dtype=dtype)
    k = (-raw.__array_interface__["data"][0] % 16) // isz
    return raw[k:k + n]


class TileState:
    """Tile-status storage of one (device, stream, value type, host thread): reused by every
    launch; the epoch makes old words read as INVALID, the base turns the monotone ticket
    counter into tile ids, so nothing is ever cleared between launches. It grows in place
    (launch plans keep a reference to it).  ``packed``: 32-bit pieces per packed status word
    (2 or 4), 0 for a flag word per tile with separate value slots; ``counter_words``: the
    ticket counter and the look-back statistics (uint64)."""

    __slots__ = ("xp", "packed", "acc_dtypes", "status", "vals", "counter", "base", "epoch",
                 "slots", "_bufs", "_buffer_of")

    def __init__(self, xp, packed, acc_dtypes, slots, counter_words, buffer_of=None):
        self.xp = xp
        self.packed = packed
        self.acc_dtypes = acc_dtypes
        self.counter = xp.zeros(counter_words, dtype=np.uint64)
        self.base = 0
        self.epoch = 1
        self.slots = 0
        self._buffer_of = buffer_of or (lambda a: a.data.ptr)
        self.grow(slots)

    def grow(self, slots):
        """Room for ``slots`` tile states (fresh zeroed words: epoch 0 is never used)."""
        xp = self.xp
        if self.packed:  # 3 words per tile (deterministic mode: aggregate, prefix, group)
            self.status = zeros16(xp, 3 * slots * self.packed, np.uint32)
            self.vals = tuple(xp.zeros(1, dtype=d) for d in self.acc_dtypes)
        else:
            self.status = xp.zeros(slots, dtype=np.uint32)
            self.vals = tuple(xp.zeros(2 * slots, dtype=d) for d in self.acc_dtypes)
        self.slots = slots
        self._bufs = None

    def counter_room(self, words):
        """At least ``words`` words in the counter buffer (a traced pipeline launch writes
        its time stamps after the statistics words), the counts kept."""
        if self.counter.size < words:
            grown = self.xp.zeros(words, dtype=np.uint64)
            grown[: self.counter.size] = self.counter
            self.counter = grown
            self._bufs = None

    def reset(self):
        """Back to a fresh state in place (after a failed launch took an unknown number of
        tickets and left words half-published); the plans that hold it stay valid."""
        self.counter[...] = 0
        self.status[...] = 0
        self.base = 0
        self.epoch = 1

    def buffers(self):
        """Kernel buffers ``(status, vals, counter)`` (built once per allocation)."""
        b = self._bufs
        if b is None:
            bo = self._buffer_of
            b = self._bufs = (bo(self.status), tuple(bo(v) for v in self.vals), bo(self.counter))
        return b

    def advance(self, ntiles):
        """After a launch of ``ntiles`` tiles: the base past its tickets, the next epoch (the
        words cleared when the epoch wraps)."""
        self.base += ntiles
        self.epoch += 1
        if self.epoch >= EPOCH_LIMIT:
            self.status[...] = 0
            self.epoch = 1
