"""Warp-specialised, pipelined tile scan for contiguous rows (sm_90: bulk copies, mbarriers).

The tile scan of :mod:`.scan` gives a block ONE tile: it loads it, reduces it, waits for
warp 0's look-back at a block barrier, then rescans and stores it; while a block waits for
its look-back none of its loads are in flight. Here a block is a small pipeline that
walks its tiles (taken from the atomic ticket counter, as before) through ``stages``
buffers of shared memory, with three kinds of warps working on different tiles at once:

- the **producer** warp takes a ticket and, for a whole tile, issues ONE asynchronous bulk
  copy (``cp.async.bulk``, the 1-D TMA) of it into a free buffer, completing on the
  buffer's ``full`` mbarrier; partial tiles (the ends of a row) are copied by its 32 lanes;
- the **reduce** squad (``warps`` warps) reduces tile ``k`` as soon as it lands (each
  thread ``items = vectors * VEC`` consecutive elements, read as 16-byte vectors from the
  dense buffer: an odd number of vectors per thread keeps a quarter-warp's reads in 8
  distinct bank groups), keeps its thread and warp totals in shared memory and publishes
  the tile's AGGREGATE at once (PREFIX for a row's first tile), then goes on to tile
  ``k + 1``: a tile's aggregate never waits for the look-back of the block's earlier tiles
  (the reason the prefetching "persist" ticket of :mod:`.scan` lost);
- the **look-back** warp folds the predecessors of tile ``k`` (the warp-wide window of
  :func:`.scan.make_warp_lookback`) and publishes its PREFIX (``lookers = 2``: two such
  warps take the block's tiles in turn);
- the **scan-store** squad (``warps`` warps; thread ``r`` owns the items of thread ``r`` of
  the reduce squad) rescans tile ``k`` with its prefix, in place, and writes it out with ONE
  bulk store (scalar stores when the output is not in the input's phase or the tile is
  partial), then frees the buffer.

Barriers per buffer: ``full`` (producer -> reduce), ``reduced`` (reduce -> look-back and
scan-store), ``prefix`` (look-back -> scan-store) and ``empty`` (scan-store -> producer),
each of one arrival per use; the parity of use ``u`` of a buffer is ``u & 1``. Named block
barriers ``1`` and ``2`` join the warps of one squad.

One scalar value type, read and written in that type (the bulk copies move raw bytes),
inclusive, exclusive or ``include_initial`` (``shift``), any associative operator; rows of a
batch as in :mod:`.scan` (``tile_coords``); ``det``: the deterministic look-back of
:mod:`.scan` (in groups, ``det_group``, whose last tile's reduce squad publishes the group's
aggregate: it waits on aggregates alone, while the look-back warp takes the block's tiles in
turn behind their prefixes; else a fixed window of ``32 * lookback`` predecessors), with
aggregates, PREFIXes and group aggregates in their own status slots.

Example (the public way in is ``forge_array.cumulative_sum``; the host picks this kernel
when ``tuning.params("scan")["pipeline"]`` is on):

>>> from forge_array.kernels.scan_spec import pipeline_shape
>>> pipeline_shape("float32", warps=4, vectors=7, stages=3)
(320, 3584, 43008)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from ... import intrinsics as fi
from ..scan_spec import STAT_WORDS, TRACE, TRACE_STAMPS, packable
from .lookback import (
    _ONE,
    _TWO,
    _ZERO,
    _ld_tag,
    _make_shared_vec,
    _make_status,
    _st_tag,
    group_or_window_lookback,
    tagged_combine,
    tile_coords,
    value_op,
)

__all__ = ["make_pipeline_scan"]


def make_pipeline_scan(fn, dtype, warps, vectors, stages, shift, has_init, ovec, wide=True,
                       release=False, spin_ns=0, lookback=1, dynamic=False, lookers=1, group=1,
                       trace=None, det=False, det_group=None):
    """Kernel factory (see the module docstring). ``fn``: the scalar operator; ``dtype``:
    input = accumulator = output type (2, 4 or 8 bytes); ``warps`` warps per squad (reduce,
    scan-store), ``vectors`` (odd) 16-byte vectors per thread of a squad, ``stages`` buffers
    (>= 2); ``shift``/``has_init`` as in
    :func:`.scan.make_tile_scan`; ``ovec``: the host found the output in the input's 16-byte
    phase (bulk stores of whole tiles); ``dynamic``: the tile buffers are the launch's
    dynamic shared memory (``stages * tile`` elements; more than the 48 KB of static shared
    memory a block may declare); ``lookers`` (1 or 2): look-back warps, taking the block's
    tiles in turn (the ``k``-th of them tiles ``k, k + lookers, ...``), so that one tile's
    look-back need not wait for the previous one's (the producer then ends the ring with one
    end mark per look-back warp); ``group``: tiles per ticket (the producer takes ``group``
    consecutive tiles with one atomic add of ``group``, so that the block's own previous tile
    is the predecessor of all but the first of them; a launch advances the counter by
    ``group * (ceil(ntiles / group) + grid - (ntiles % group != 0))``: every block takes one
    ticket past the last tile except the one whose group holds it, if partial); ``trace``:
    time-stamp every tile (default: ``TRACE``; the planner passes it, so that it is part of
    the compiled kernel's key).

    Kernel arguments, as :func:`.scan.make_tile_scan`'s: ``src, dst, init, n, m, nb1, s_in,
    b0_in, b1_in, s_out, b0_out, b1_out, lead, tpr, status, vals, counter, base, epoch,
    ntiles`` (``s_in`` must be 1; ``lead`` aligns the tiles to 16 bytes). ``det``: the
    deterministic look-back: in groups with ``det_group = (group, groups)`` for packed status
    words (:func:`.scan.lookback.make_group_lookback`), else ``lookback`` predecessors per
    lane in a fixed window."""
    acc = np.dtype(dtype)
    VEC = fi.VEC(acc)
    RV = int(vectors)
    W, S = int(warps), int(stages)
    if RV < 1 or RV % 2 == 0:
        raise ValueError(f"vectors per thread must be odd (conflict-free shared reads), got {RV}")
    if S < 2 or W < 1 or VEC < 2:
        raise ValueError(f"pipeline: stages >= 2, warps >= 1, values of <= 8 bytes (got {S}, {W}, {acc})")
    TRACED = TRACE if trace is None else bool(trace)
    GT = int(group)
    if GT < 1:
        raise ValueError(f"pipeline: tiles per ticket >= 1, got {group}")
    LK = int(lookers)
    if LK not in (1, 2) or LK > S:
        raise ValueError(f"pipeline: 1 or 2 look-back warps (at most one per buffer), got {lookers}")
    items = RV * VEC
    CT = W * 32                      # compute threads
    TILE = CT * items
    NB = TILE * acc.itemsize         # bytes of a whole tile (a multiple of 16)
    ISZ = acc.itemsize
    PW, LW = 2 * W, 2 * W + 1        # producer warp, look-back warp
    FULL, RED, PRE, EMPT = 0, S, 2 * S, 3 * S
    # tagged slots: warp totals, tile totals, prefixes, thread totals (per buffer)
    WT0, TOT0, PRE0, TS0 = 0, S * W, S * W + S, S * W + 2 * S
    NSLOT = TS0 + S * CT
    IDS = NSLOT                      # tile id of each stage (in the kinds array)
    T = acc.type
    shift = int(shift)
    has_init, ovec = bool(has_init), bool(ovec)
    op_v = value_op(fn, False)
    comb = tagged_combine(op_v)
    warp_scan = fi.make_warp_scan(comb)
    packed = packable((acc,), wide)
    publish, _ = _make_status((acc,), packed, det, comb, release, spin_ns)
    look_back, group_total, G = group_or_window_lookback((acc,), comb, det, wide, release, spin_ns,
                                                         lookback, det_group)
    _, _, _, vfirst, vstep = _make_shared_vec(op_v, items, VEC, T, True)

    @cuda.jit(device=True)
    def wait(bars, b, parity):
        while not fi.mbar_try_wait(bars, b, parity):
            pass

    @cuda.jit(device=True)
    def stamp(counter, t, k):
        if TRACED:
            fi.atomic_exch(counter, STAT_WORDS + t * TRACE_STAMPS + k, fi.globaltimer())

    @cuda.jit(device=True)
    def partial_span(start, n):
        """``(lo, hi, a, b)`` of a partial tile starting at row element ``start``: its
        elements ``lo <= j < hi`` are in the row; ``a <= j < b`` is their 16-byte aligned
        middle (empty when ``b <= a``)."""
        lo = max(np.int64(0), -start)
        hi = min(np.int64(TILE), n - start)
        a = (lo + VEC - 1) // VEC * VEC
        b = hi // VEC * VEC
        return lo, hi, a, b

    @cuda.jit(device=True)
    def edge_index(lane, lo, hi, a, b):
        """The element of a partial tile outside its aligned middle that ``lane`` (of 32)
        moves, or -1: lanes 0-15 the head ``lo <= j < a`` (the whole span when the middle
        is empty: fewer than 2 * VEC <= 16 elements), lanes 16-31 the tail ``b <= j < hi``."""
        if lane < 16:
            j = lo + lane
            if j < (a if b > a else hi):
                return j
        elif b > a:
            j = b + lane - 16
            if j < hi:
                return j
        return np.int64(-1)

    @cuda.jit(device=True)
    def load_edges(lane, lo, hi, a, b, tiles, k0, src, base):
        j = edge_index(lane, lo, hi, a, b)
        if j >= 0:
            tiles[k0 + j] = fi.load(src[0], base + j)

    @cuda.jit(device=True)
    def item_span(first, n):
        """``(jlo, jhi)``: the items ``jlo <= j < jhi`` of a thread whose first item is row
        element ``first`` that lie in the row (``0 <= first + j < n``)."""
        return max(np.int64(0), -first), min(np.int64(items), n - first)

    def make_span(store):
        """Device function ``(tiles, k0, jlo, jhi, run) -> run``: fold items ``jlo <= j < jhi``
        of a thread of a partial tile into the tagged value ``run`` (its items read as 16-byte
        vectors: no chain of scalar shared loads behind bounds tests); with ``store``, write
        each running value back in place (the rescan)."""
        @cuda.jit(device=True)
        def span(tiles, k0, jlo, jhi, run):
            for i in range(RV):
                v = fi.vload_shared(tiles, k0 + i * VEC)
                for e in range(VEC):
                    j = i * VEC + e
                    if j >= jlo and j < jhi:
                        run = comb(run, (_ONE, v[e]))
                        if store:
                            tiles[k0 + j] = run[1]
            return run
        return span

    fold_span = make_span(False)
    rescan_span = make_span(True)

    @cuda.jit(device=True)
    def take(sk, bars, B, it):
        """``(buffer, tile id)`` of the ``it``-th tile of this block, once barrier ``B`` of
        its buffer has completed that use (tile id -1: no tile left)."""
        s = it % S
        wait(bars, B + s, (it // S) & 1)
        return s, sk[IDS + s]

    @cuda.jit(device=True)
    def produce(tiles, sk, bars, src, n, nb1, b0_in, b1_in, lead, tpr, counter, base, ntiles):
        lane = fi.lane_id()
        it = 0
        t0 = np.int64(0)
        while True:
            s = it % S
            if it >= S:  # the scan-store squad released this buffer's previous tile
                wait(bars, EMPT + s, ((it // S) - 1) & 1)
            g = it % GT
            if g == 0:   # a ticket: GT consecutive tiles
                if lane == 0:
                    t0 = np.int64(fi.atomic_add(counter, 0, np.uint64(GT))) - base
                t0 = fi.shfl_idx(t0, 0)
            t = t0 + g
            if t >= ntiles:
                # one end mark per look-back warp (each waits on its own turns of the ring)
                for e in range(LK):
                    if e > 0:
                        it += 1
                        s = it % S
                        if it >= S:
                            wait(bars, EMPT + s, ((it // S) - 1) & 1)
                    if lane == 0:
                        sk[IDS + s] = -1
                        fi.mbar_arrive(bars, FULL + s)
                return
            ti, r0, r1 = tile_coords(t, tpr, nb1, ntiles)
            ib = r0 * b0_in + r1 * b1_in
            start = ti * TILE - lead
            k0 = s * TILE
            if TRACED and lane == 0:
                stamp(counter, t, 0)
                fi.atomic_exch(counter, STAT_WORDS + t * TRACE_STAMPS + 4,
                               np.uint64(cuda.blockIdx.x))
            if start >= 0 and start + TILE <= n:
                if lane == 0:
                    sk[IDS + s] = t
                    fi.mbar_arrive_tx(bars, FULL + s, NB)
                    fi.bulk_load(tiles, k0, src[0], ib + start, NB, bars, FULL + s)
            else:
                # a partial tile (a row's ends): one bulk copy of its 16-byte aligned middle,
                # the < VEC elements at either side by the lanes, one load each (a loop of
                # scalar loads over the whole tile took ~17 us: serial DRAM round trips)
                lo, hi, a, b = partial_span(start, n)
                load_edges(lane, lo, hi, a, b, tiles, k0, src, ib + start)
                fi.syncwarp()
                if lane == 0:
                    sk[IDS + s] = t
                    if b > a:
                        fi.mbar_arrive_tx(bars, FULL + s, (b - a) * ISZ)
                        fi.bulk_load(tiles, k0 + a, src[0], ib + start + a, (b - a) * ISZ, bars,
                                     FULL + s)
                    else:
                        fi.mbar_arrive(bars, FULL + s)
            it += 1

    @cuda.jit(device=True)
    def look(sk, sv, bars, nb1, tpr, status, vals, counter, epoch, ntiles, init_t, empty, first):
        lane = fi.lane_id()
        it = first
        while True:
            s, t = take(sk, bars, RED, it)
            if t < 0:
                return
            ti, r0, r1 = tile_coords(t, tpr, nb1, ntiles)
            pre = init_t
            if ti > 0:
                pre = look_back(status, vals, 1, t - ti, ti, epoch, counter, init_t, empty)
                if lane == 0 and ti + 1 < tpr:
                    tot = _ld_tag(sk, TOT0 + s, sv, TOT0 + s)
                    publish(status, vals, t, 2, comb(pre, tot)[1:], epoch)
            if lane == 0:
                stamp(counter, t, 2)
                _st_tag(sk, PRE0 + s, sv, PRE0 + s, pre)
                fi.mbar_arrive(bars, PRE + s)
            it += LK

    @cuda.jit(device=True)
    def reduce_squad(tiles, sk, sv, bars, n, nb1, lead, tpr, status, vals, counter, epoch,
                     ntiles, init_t, empty):
        """Warps ``0 .. W-1``: reduce each tile as soon as it lands, keep the thread totals
        and warp totals for the scan-store squad, publish the tile's state."""
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        kb = tid * items
        it = 0
        ends = 0
        while True:
            s, t = take(sk, bars, FULL, it)
            if t < 0:
                # hand every end mark on (the look-back warps and the scan-store squad)
                if tid == 0:
                    fi.mbar_arrive(bars, RED + s)
                ends += 1
                if ends == LK:
                    return
                it += 1
                continue
            ti, r0, r1 = tile_coords(t, tpr, nb1, ntiles)
            start = ti * TILE - lead
            k0 = s * TILE + kb
            if start >= 0 and start + TILE <= n:
                v = fi.vload_shared(tiles, k0)
                a = (v[0],)
                for e in range(1, VEC):
                    a = op_v(a, (v[e],))
                for i in range(1, RV):
                    v = fi.vload_shared(tiles, k0 + i * VEC)
                    for e in range(VEC):
                        a = op_v(a, (v[e],))
                agg = (_ONE,) + a
            else:
                jlo, jhi = item_span(start + kb, n)
                agg = fold_span(tiles, k0, jlo, jhi, empty)
            _st_tag(sk, TS0 + s * CT + tid, sv, TS0 + s * CT + tid, agg)
            inc = warp_scan(agg)
            q = WT0 + s * W
            if lane == 31:
                _st_tag(sk, q + warp, sv, q + warp, inc)
            fi.bar_sync(1, CT)
            if warp == 0:
                tot = empty
                for w in range(W):
                    tot = comb(tot, _ld_tag(sk, q + w, sv, q + w))
                if lane == 0:
                    if ti + 1 < tpr:  # the row's last tile has no reader
                        if ti == 0:
                            if det:  # the fixed window reads the aggregate of the row's first tile
                                publish(status, vals, t, 1, tot[1:], epoch)
                            publish(status, vals, t, 2, comb(init_t, tot)[1:], epoch)
                        else:
                            publish(status, vals, t, 1, tot[1:], epoch)
                    _st_tag(sk, TOT0 + s, sv, TOT0 + s, tot)
                    stamp(counter, t, 1)
                    fi.mbar_arrive(bars, RED + s)
                if G and ti % G == G - 1 and ti + 1 < tpr:
                    # the group's aggregate, here where it waits on aggregates alone (the
                    # look-back warp takes this block's tiles in turn, behind their prefixes)
                    group_total(status, vals, 1, t - ti, ti, epoch, counter, tot, empty)
            it += 1

    @cuda.jit(device=True)
    def store_squad(tiles, sk, sv, bars, dst, init, n, m, nb1, s_out, b0_out, b1_out, lead,
                    tpr, counter, ntiles, empty):
        """Warps ``W .. 2W-1``: rescan each tile with its prefix (thread ``r`` of the squad
        owns the items of thread ``r`` of the reduce squad), write it out, free the buffer."""
        r = cuda.threadIdx.x - CT
        lane = r & 31
        warp = r >> 5
        kb = r * items
        it = 0
        while True:
            s, t = take(sk, bars, RED, it)
            if t < 0:
                return
            # the thread's exclusive prefix within the tile, from the reduce squad's totals
            x = _ld_tag(sk, TS0 + s * CT + r, sv, TS0 + s * CT + r)
            up = fi.shfl_up(warp_scan(x), 1)
            q = WT0 + s * W
            wp = empty
            for w in range(W):
                if w < warp:
                    wp = comb(wp, _ld_tag(sk, q + w, sv, q + w))
            texcl = wp
            if lane > 0:
                texcl = comb(wp, up)
            ti, r0, r1 = tile_coords(t, tpr, nb1, ntiles)
            ob = r0 * b0_out + r1 * b1_out
            start = ti * TILE - lead
            whole = start >= 0 and start + TILE <= n
            k0 = s * TILE + kb
            wait(bars, PRE + s, (it // S) & 1)
            run = comb(_ld_tag(sk, PRE0 + s, sv, PRE0 + s), texcl)
            if whole:
                rr, w = vfirst(run, fi.vload_shared(tiles, k0))
                fi.vstore_shared(tiles, k0, w)
                for i in range(1, RV):
                    rr, w = vstep(rr, fi.vload_shared(tiles, k0 + i * VEC))
                    fi.vstore_shared(tiles, k0 + i * VEC, w)
            else:
                jlo, jhi = item_span(start + kb, n)
                rescan_span(tiles, k0, jlo, jhi, run)
            q0 = s * TILE
            if ovec and whole and start + TILE + shift <= m:
                fi.fence_proxy_async()  # this thread's results, to the bulk copy's proxy
                fi.bar_sync(2, CT)
                if r == 0:
                    fi.bulk_store(dst[0], ob + start + shift, tiles, q0, NB)
                    fi.bulk_commit()
                    fi.bulk_wait_read()
            elif ovec:
                # a partial tile in the output's phase: one bulk store of its aligned middle,
                # the edges by the first warp's lanes
                lo, hi, a, b = partial_span(start, min(n, m - shift))
                fi.fence_proxy_async()
                fi.bar_sync(2, CT)
                if r == 0 and b > a:
                    fi.bulk_store(dst[0], ob + start + shift + a, tiles, q0 + a, (b - a) * ISZ)
                    fi.bulk_commit()
                if r < 32:
                    j = edge_index(r, lo, hi, a, b)
                    if j >= 0:
                        fi.store(dst, ob + start + shift + j, (tiles[q0 + j],))
                if r == 0 and b > a:
                    fi.bulk_wait_read()
                fi.bar_sync(2, CT)  # every read of the buffer done before it is released
            else:
                fi.bar_sync(2, CT)
                for j in range(r, TILE, CT):
                    L = start + j
                    P = L + shift
                    if L >= 0 and L < n and P < m:
                        fi.store(dst, ob + P * s_out, (tiles[q0 + j],))
                fi.bar_sync(2, CT)  # every read of the buffer done before it is released
            if shift and ti == 0 and r == 0:
                fi.store(dst, ob, fi.load(init, 0))
            if r == 0:
                stamp(counter, t, 3)
                fi.mbar_arrive(bars, EMPT + s)
            it += 1

    def body(tiles, sv, sk, bars, src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out,
             b1_out, lead, tpr, status, vals, counter, base, epoch, ntiles):
        tid = cuda.threadIdx.x
        warp = tid >> 5
        if tid == 0:
            for s in range(S):
                fi.mbar_init(bars, FULL + s, 1)
                fi.mbar_init(bars, RED + s, 1)
                fi.mbar_init(bars, PRE + s, 1)
                fi.mbar_init(bars, EMPT + s, 1)
            fi.mbar_fence_init()
        cuda.syncthreads()
        empty = (_ZERO, T(0))
        init_t = empty
        if has_init:
            init_t = (_TWO,) + fi.load(init, 0)
        if warp == PW:
            produce(tiles, sk, bars, src, n, nb1, b0_in, b1_in, lead, tpr, counter, base, ntiles)
        elif warp >= LW:
            look(sk, sv, bars, nb1, tpr, status, vals, counter, epoch, ntiles, init_t, empty,
                 warp - LW)
        elif warp < W:
            reduce_squad(tiles, sk, sv, bars, n, nb1, lead, tpr, status, vals, counter, epoch,
                         ntiles, init_t, empty)
        else:
            store_squad(tiles, sk, sv, bars, dst, init, n, m, nb1, s_out, b0_out, b1_out, lead,
                        tpr, counter, ntiles, empty)

    N = 20
    # shape 0: numba's dynamic shared memory (its size is the launch's)
    f3 = fi.with_shared_scratch(0 if dynamic else S * TILE, acc, cuda.jit(device=True)(body),
                                nargs=N + 3)
    f2 = fi.with_shared_scratch(NSLOT, (acc,), f3, nargs=N + 2)
    f1 = fi.with_shared_scratch(NSLOT + S, np.int64, f2, nargs=N + 1)
    f0 = fi.with_shared_scratch(4 * S, np.uint64, f1, nargs=N)

    def pipeline_scan(src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out, b1_out,
                      lead, tpr, status, vals, counter, base, epoch, ntiles):
        f0(src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out, b1_out, lead, tpr,
           status, vals, counter, base, epoch, ntiles)

    return pipeline_scan
