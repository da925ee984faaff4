"""Scan down the rows of a narrow C-contiguous matrix: axis 0 of an ``(n, p)`` array with few
columns (``2 <= p <= 32`` with flag words, up to the block's threads with packed status words),
e.g. ten running sums of 10^7 rows, treated as ONE scan of
``n`` rows whose elements are ``p``-vectors (a single-pass decoupled look-back, Merrill &
Garland, NVR-2016-002, with one look-back per tile for all ``p`` columns).

The column scan of :mod:`.scan` gives each column its own chain of tiles and its own
look-back; with ten columns of 10^7 rows its loads touch 40 bytes per row and its ten
chains of look-backs cost more than the data. Here a block's tile is ``T`` whole rows,
``T * p`` consecutive elements:

1. A tile id from an atomic counter (tile ``t`` covers rows ``t * T .. t * T + T - 1``).
2. The tile is staged into shared memory with coalesced 128-bit loads and ``st.shared.v4``
   (:func:`.staging.make_tile_loader`, laid out from the 16-byte boundary), whatever the
   16-byte phase of its start.
3. Thread ``(g, c)`` (``g < G`` groups of ``p`` threads, ``G * p <= block``) folds rows
   ``g * R .. g * R + R - 1`` of column ``c`` in shared memory. ``R = 1 (mod 32 / gcd(p,
   32))``, so ``R * p = p (mod 32)`` and lane ``l = g * p + c`` of a warp reads bank
   ``l + const``: conflict-free without padding, all index arithmetic in 32 bits. The groups' totals go
   through shared memory: each thread folds those of the groups above its own, the last
   group's threads get the tile's column totals (the tile aggregate, a ``p``-vector).
4. The aggregate is published, looked back from and the inclusive prefix published. Two status
   layouts (``packed``): by default each (tile, column) has its own status word with the
   value packed in (:func:`.scan.packable`), written and read with single relaxed vector
   accesses and no fence, and thread ``c`` looks back along column ``c`` alone, a few tiles
   per round trip (any number of columns up to the block's threads: each has its own
   chain); or (``packed=0``, at most 32 columns) warp 0 alone with one flag word per tile
   and ``p`` value slots behind it:
   lane ``l`` reads the flag of tile ``t - 32 + l``, one ballot finds the last PREFIX, then
   lane ``c`` folds column ``c`` of the values from there (all loads in flight), with a fence
   on each side. On an H200 the packed words were 1.7x faster (``docs/scans.md``).
5. Each thread rescans its rows in place with the column's exclusive prefix, and the tile
   goes out with ``ld.shared.v4`` and coalesced 128-bit stores (:func:`.staging.make_tile_storer`;
   an output with another 16-byte phase than the input's gathers its vectors from scalars).

Every input element is read once and every output element written once; four block
barriers per tile. Status words carry the launch *epoch* and tile ids come from a monotone
counter minus a host-kept ``base``, as in :mod:`.scan`, so nothing is cleared between
launches. With flag words, the values of tile ``t``, column ``c`` live at
``vals[2 * (t * p + c) + k]`` (``k`` = 0: aggregate, 1: inclusive prefix), written before the
flag's release store and read after the flag's relaxed load and a fence.

Example (the public way in is :func:`forge_array.accumulate` / ``cumulative_sum`` with
``axis=0`` on a C-contiguous matrix of a few columns):

>>> import numpy as np
>>> callable(make_narrow_scan(lambda a, b: a + b, np.dtype("float32"), 64, 4, False))
True
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ... import intrinsics as fi
from ..scan_spec import MAX_COLUMNS
from ..staging import make_tile_loader, make_tile_storer
from . import lookback as kscan

__all__ = ["make_narrow_scan"]

AGG, PREFIX = 1, 2


def make_narrow_scan(fn, acc_dtype, block, items, has_init, prefix_every=1, packed=0,
                     wide=False, shift=0, init_batch=False):
    """Kernel factory of the narrow-matrix scan (see the module docstring): inclusive scan
    along axis 0 of a C-contiguous ``(n, p)`` matrix of one 4- or 8-byte dtype (input and
    output alike), scalar operator ``fn`` (associative, commutative or not), tiles of at
    most ``block * items`` elements.

    Kernel arguments: ``src, dst, init`` (1-tuples of pointers to element 0), ``n`` (rows),
    ``m`` (output rows), ``p`` (columns: ``2 .. MAX_COLUMNS`` with flag words, ``2 .. block``
    packed), ``aux`` (16-byte phase in
    elements of ``src[0]`` plus 16 times that of ``dst[0]``), ``status`` (uint32 flag per
    tile), ``vals`` (1-tuple: ``2 * p`` values per tile), ``counter`` (uint64 ticket at
    ``[0]``), ``base``, ``epoch``; the grid has one block per tile.

    ``shift`` (1: exclusive results and ``include_initial``, as in :mod:`.scan`): row ``r``'s
    inclusive result goes to output row ``r + 1`` (rows ``>= m`` dropped) and the first tile
    writes ``init`` to row 0; the tile goes out from shared memory to a start one row later,
    whatever its 16-byte phase.

    ``prefix_every`` (tests): tiles ``t > 0`` publish their inclusive prefix only when ``t`` is
    a multiple of it, so that successors must fold long chains of aggregates, over several
    windows (1: every tile does, the normal case).

    ``packed`` (> 0): instead of one flag per tile, each (tile, column) has its own status
    word with the value packed in (8 or 16 bytes, :func:`.scan.packable`; slot ``t * p + c``),
    written and read with single relaxed vector accesses and no fence; lane ``c`` of warp 0
    looks back along column ``c`` alone, ``packed`` tiles per round trip. The host then
    gives the packed status buffer (``vals`` unused). ``wide``: 8 vector loads in flight per
    thread while staging the tile (else 4). ``init_batch``: ``init`` holds one value per
    column (column ``c`` starts from ``init[c]``) instead of one for all.
    """
    PE = int(prefix_every)
    SHIFT = int(shift)
    PK = int(packed)
    acc = np.dtype(acc_dtype)
    if acc.itemsize not in (4, 8):
        raise ValueError(f"make_narrow_scan: 4- or 8-byte values only, got {acc}")
    IB = bool(init_batch)
    MAXC = int(block) if PK else MAX_COLUMNS  # columns the shared prefixes hold
    VEC = fi.VEC(acc)
    E = int(block) * int(items)           # tile capacity (elements)
    GT = E + VEC                          # group totals: GT + g * p + c (< block values)
    CA = GT + int(block)                  # column aggregates of the tile (MAXC)
    CP = CA + MAXC                        # column exclusive prefixes (MAXC)
    NS = CP + MAXC
    ACC_T = acc.type
    ZERO = ACC_T(0)
    op = fi.as_device(fn)
    load_tile = make_tile_loader(block, VEC, V4=True, WIDE=bool(wide))
    store_tile = make_tile_storer(block, VEC, V4=True)
    I32 = np.int32

    @cuda.jit(device=True)
    def f(a, b):
        return fi.cast_like(op(a, b), a)

    @cuda.jit(device=True)
    def publish(status, vals, t, p, lane, kind, v, epoch):
        """Warp 0: lane ``c < p`` writes column ``c``'s value, then lane 0 the flag."""
        if lane < p:
            fi.store(vals, 2 * (t * p + lane) + (kind - 1), v)
            fi.fence_device()
        fi.syncwarp()
        if lane == 0:
            fi.store_release(status, t, np.uint32(epoch * 4 + kind))

    @cuda.jit(device=True)
    def lookback(status, vals, t, p, lane, epoch):
        """Warp 0: lane ``c < p`` gets column ``c`` of the fold of tiles ``0 .. t - 1``."""
        hi = t
        acc_v = ZERO
        have = False
        while True:
            first = hi - 32
            q = first + lane
            kind = np.uint32(0)
            if q >= 0:
                w = fi.load_relaxed(status, q)
                while (w >> np.uint32(2)) != np.uint32(epoch) or (w & np.uint32(3)) == 0:
                    w = fi.load_relaxed(status, q)
                kind = w & np.uint32(3)
            m = fi.ballot(kind == np.uint32(PREFIX))
            fi.fence_device()
            start = 0
            if first < 0:
                start = -first
            for k in range(32):
                if (m >> np.uint32(k)) & np.uint32(1):
                    start = k
            if lane < p:
                # every value load in flight before the first use (registers, unrolled)
                xs = cuda.local.array(32, ACC_T)
                for k in range(32):
                    if k >= start:
                        slot = 2 * ((first + k) * p + lane)
                        if k == start and m != 0:
                            slot += 1
                        xs[k] = fi.load(vals, slot)
                v = ZERO
                hv = False
                for k in range(32):
                    if k >= start:
                        if hv:
                            v = f(v, xs[k])
                        else:
                            v = xs[k]
                        hv = True
                if have:
                    acc_v = f(v, acc_v)
                else:
                    acc_v = v
                have = True
            if m != 0:
                return acc_v
            hi = first

    if PK:
        comb = kscan.tagged_combine(kscan.value_op(fn, False))
        pk_publish, make_window = kscan._make_status((acc,), True, False, comb)
        window = make_window(PK)
        EMPTY_T = (np.int32(0), ZERO)

        @cuda.jit(device=True)
        def pk_lookback(status, vals, t, p, lane, epoch, counter):
            """Lane ``c < p``: column ``c`` of the fold of tiles ``0 .. t - 1``."""
            acc_t = EMPTY_T
            hi = t
            while True:
                x = window(status, vals, p, lane, hi - PK, True, epoch, counter, EMPTY_T,
                           EMPTY_T)
                acc_t = comb(x, acc_t)
                if x[0] == 2 or hi <= PK:
                    return acc_t[1]
                hi -= PK

    def body(sx, s, src, dst, init, n, m, p, aux, status, vals, counter, base, epoch):
        tid = cuda.threadIdx.x
        if tid == 0:
            sx[0] = np.int64(fi.atomic_add(counter, 0, np.uint64(1))) - base
        cuda.syncthreads()
        t = sx[0]
        p32 = I32(p)
        G = I32(block) // p32
        if G > 32:
            G = I32(32)
        lsb = p32 & (-p32)
        if lsb > 32:
            lsb = I32(32)
        M = I32(32) // lsb
        R = (I32(E) // (G * p32) - I32(1)) // M * M + I32(1)
        T = G * R
        r0 = t * T
        rows = I32(T)
        if n - r0 < T:
            rows = I32(n - r0)
        mis_in = aux & 15
        ph = I32((mis_in + r0 * p) % VEC)  # shared position of the tile's element 0
        load_tile(s, 0, src[0], r0 * p, rows * p32, mis_in, tid)
        cuda.syncthreads()
        # thread (g, c): rows rb .. rb + nr - 1 of column c
        tid32 = I32(tid)
        g = tid32 // p32
        c = tid32 - g * p32
        rb = g * R
        nr = rows - rb
        if nr > R:
            nr = R
        mine = g < G and nr > 0
        e0 = ph + rb * p32 + c
        a = ZERO
        if mine:
            e = e0
            a = fi.load(s, e)
            for _ in range(1, nr):
                e += p32
                a = f(a, fi.load(s, e))
            fi.store(s, GT + tid32, a)
        cuda.syncthreads()
        gx = a
        if mine and g > 0:  # the groups above are full: fold their totals in order
            gx = fi.load(s, GT + c)
            for h in range(1, g):
                gx = f(gx, fi.load(s, GT + h * p32 + c))
        if mine and g == (rows - 1) // R:  # the last group: column totals of the tile
            tot = a
            if g > 0:
                tot = f(gx, a)
            fi.store(s, CA + c, tot)
        cuda.syncthreads()
        last = r0 + T >= n
        lookers = tid < 32      # flag words: warp 0
        if PK:
            lookers = tid < p   # packed words: a thread per column
        if lookers:  # publish, look back, publish
            lane = tid
            agg = ZERO
            if lane < p:
                agg = fi.load(s, CA + lane)
            if PK:
                if lane < p:
                    sl = t * p + lane
                    if t == 0:
                        inc = agg
                        if has_init:
                            x0 = fi.load(init[0], lane if IB else 0)
                            inc = f(x0, agg)
                            fi.store(s, CP + lane, x0)
                        if not last:
                            pk_publish(status, vals, sl, PREFIX, (inc,), epoch)
                    else:
                        if not last:
                            pk_publish(status, vals, sl, AGG, (agg,), epoch)
                        ex = pk_lookback(status, vals, t, p, lane, epoch, counter)
                        fi.store(s, CP + lane, ex)
                        if not last and (PE == 1 or t % PE == 0):
                            pk_publish(status, vals, sl, PREFIX, (f(ex, agg),), epoch)
            elif t == 0:
                inc = agg
                if has_init:
                    x0 = fi.load(init[0], (lane if lane < p else 0) if IB else 0)
                    inc = f(x0, agg)
                    if lane < p:
                        fi.store(s, CP + lane, x0)
                if not last:
                    publish(status, vals[0], t, p, lane, PREFIX, inc, epoch)
            else:
                if not last:
                    publish(status, vals[0], t, p, lane, AGG, agg, epoch)
                ex = lookback(status, vals[0], t, p, lane, epoch)
                if lane < p:
                    fi.store(s, CP + lane, ex)
                if not last and (PE == 1 or t % PE == 0):
                    publish(status, vals[0], t, p, lane, PREFIX, f(ex, agg), epoch)
        cuda.syncthreads()
        if mine:  # rescan with the column's exclusive prefix, in place
            have = t > 0 or has_init
            run = a
            if have:
                run = fi.load(s, CP + c)
            if g > 0:
                if have:
                    run = f(run, gx)
                else:
                    run = gx
                have = True
            e = e0
            for _ in range(nr):
                v = fi.load(s, e)
                if have:
                    v = f(run, v)
                fi.store(s, e, v)
                run = v
                have = True
                e += p32
        cuda.syncthreads()
        if SHIFT == 0:
            store_tile(s, 0, dst[0], r0 * p, rows * p32, aux >> 4, tid, ph)
        else:
            ro = rows
            if m - r0 - 1 < ro:
                ro = I32(m - r0 - 1)
            if ro > 0:
                store_tile(s, 0, dst[0], (r0 + 1) * p, ro * p32, aux >> 4, tid, ph)
            if t == 0 and tid32 < p32:
                fi.store(dst[0], tid32, fi.load(init[0], tid32 if IB else 0))

    inner = fi.with_shared_scratch(1, np.int64, cuda.jit(device=True)(body), nargs=13)
    outer = fi.with_shared_scratch(NS, acc, inner, nargs=12)

    def narrow_scan(src, dst, init, n, m, p, aux, status, vals, counter, base, epoch):
        outer(src, dst, init, n, m, p, aux, status, vals, counter, base, epoch)

    return narrow_scan
