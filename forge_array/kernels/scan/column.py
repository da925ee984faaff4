"""Column scans: :func:`make_column_scan` (tiles of columns with a look-back down the rows).
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ... import intrinsics as fi
from ..scan_spec import STAT_AGG_WINDOWS, packable, status_words
from .lookback import (
    _ONE,
    _TWO,
    _ZERO,
    COUNT,
    _ld_tag,
    _make_converter,
    _make_status,
    _st_tag,
    make_warp_lookback,
    tagged_combine,
    value_op,
)


def make_column_scan(fn, tuple_op, in_dtypes, acc_dtypes, block, items, shift, has_init,
                     det, wide=True, release=False, spin_ns=0, staged=0, lookback=0,
                     warp_lookback=False, init_batch=False):
    """Kernel factory of the column scan; see :mod:`forge_array.kernels.scan`.

    Kernel arguments: ``src, dst, init, n, m, nbatch, nb1, s_in, b0_in, b1_in, s_out,
    b0_out, b1_out`` (as :func:`make_tile_scan`, plus the number of columns ``nbatch``),
    ``cb`` (columns per block), ``nstrips`` (blocks across the columns), ``nchunks``
    (chunks of ``(block // cb) * items`` rows down the scan axis), ``status, vals,
    counter, base, epoch``. Tile ``t`` is chunk ``t // nstrips`` of strip
    ``t % nstrips``; column ``c`` of tile ``t`` keeps its state in slot ``t * cb + c``.
    Launches of one chunk per column (no look-back) take tiles from ``blockIdx.x`` (no
    ticket); ``wide``, ``release``, ``spin_ns`` as :func:`make_tile_scan`.

    ``staged`` (the host checks that each block's elements form ONE dense range: a single
    strip of contiguous rows (``b1 == 1, s == nbatch == cb``) or contiguous short rows of
    one chunk (``s == 1, b1 == n``)): 1 = the block's range is read with warp-striped
    coalesced loads (all ``items`` of a thread in flight) into shared memory, in the
    range's own order, and each thread reads its column from there; 2 = the results go
    out the same way (needs the output's layout equal to the input's and ``shift == 0``).
    Instead of strided loads that touch 4-10 lines per warp access. ``lookback``: chunks a
    column's look-back reads per round trip (0: 8, or 4 for 16-byte status words).

    ``warp_lookback`` (for few columns per block, e.g. axis 0 of (10^7, 10)): each column's
    look-back is done by a whole warp over windows of 32 chunks (:func:`make_warp_lookback`;
    warp ``w`` takes columns ``w, w + NW, ...``) instead of by one thread ``lookback``
    chunks at a time: long chains of chunks settle in one or two round trips. One more
    block barrier (the column totals go through shared memory first).

    ``init_batch``: ``init`` holds one value per batch row (column ``col`` starts from
    ``init[col]``, the batch rows in C order) instead of one for all.
    """
    in_dtypes = tuple(np.dtype(d) for d in in_dtypes)
    acc_dtypes = tuple(np.dtype(d) for d in acc_dtypes)
    R = items
    REG = len(acc_dtypes) == 1
    OUT_T = acc_dtypes[0].type
    packed = packable(acc_dtypes, wide)
    op_v = value_op(fn, tuple_op)
    comb = tagged_combine(op_v)
    conv = _make_converter(in_dtypes, acc_dtypes)
    publish, make_window = _make_status(acc_dtypes, packed, det, comb, release, spin_ns)
    # chunks read per round trip of a column's look-back (16-byte words: 4, for registers)
    LBV = int(lookback) or (4 if packed and status_words(acc_dtypes) == 4 else 8)
    window = make_window(LBV)
    NW = block // 32
    WLB = bool(warp_lookback)
    wlookback = make_warp_lookback(acc_dtypes, comb, det, wide, release, spin_ns, 1)
    # staged items (padded by one slot per 32 when staged: a warp's threads of one column
    # and different groups read positions 32 * k apart), then group aggregates, then
    # column prefixes
    GV = block * R + (block * R // 32 + 1 if staged else 0)
    CV = GV + block

    @cuda.jit(device=True)
    def pad(i):
        if staged:
            return i + (i >> 5)
        return i

    @cuda.jit(device=True)
    def spos(pc, j, s_in, tid):
        if staged:
            i = pc + j * s_in
            return i + (i >> 5)
        return j * block + tid

    @cuda.jit(device=True)
    def lookback(status, vals, chunk, strip, nstrips, cb, c, epoch, counter, init_t, empty):
        acc = empty
        hi = chunk
        mul = nstrips * cb
        add = strip * cb + c
        while True:
            x = window(status, vals, mul, add, hi - LBV, True, epoch, counter, init_t, empty)
            acc = comb(x, acc)
            if det or x[0] == 2 or hi <= LBV:
                return acc
            if COUNT:
                fi.atomic_add(counter, STAT_AGG_WINDOWS, np.uint64(1))
            hi -= LBV

    def body(sk, sh, src, dst, init, n, m, nbatch, nb1, s_in, b0_in, b1_in, s_out, b0_out,
             b1_out, cb, nstrips, nchunks, status, vals, counter, base, epoch):
        tid = cuda.threadIdx.x
        if nchunks == 1:  # no look-back: no ticket either
            t = np.int64(cuda.blockIdx.x)
        else:
            if tid == 0:
                sk[2 * block] = np.int64(fi.atomic_add(counter, 0, np.uint64(1))) - base
            cuda.syncthreads()
            t = sk[2 * block]
        chunk = t - t
        strip = t
        if nstrips != 1:
            chunk = t // nstrips
            strip = t - chunk * nstrips
        elif nchunks != 1:
            chunk = t
            strip = t - t
        G = block // cb
        g = tid // cb
        c = tid - g * cb
        col = strip * cb + c
        active = g < G and col < nbatch
        ib = 0
        ob = 0
        if active:
            r0 = col - col
            r1 = col
            if nbatch > nb1:
                r0 = col // nb1
                r1 = col - r0 * nb1
            ib = r0 * b0_in + r1 * b1_in
            ob = r0 * b0_out + r1 * b1_out
        rows0 = (chunk * G + g) * R
        x0 = conv(fi.load(src, ib))
        empty = (_ZERO,) + x0
        agg = empty
        # shared position of (row rows0 + j, this column): staged in the block's range
        # order (c * b1 + row * s relative to the range's start), else j * block + tid
        pc = c * b1_in + g * R * s_in
        span = 0
        if staged:
            # the block's dense range [lo, lo + span): coalesced warp-striped loads, all in
            # flight (clamped), then one block barrier before threads read their columns
            c0 = strip * cb
            r0s = chunk * G * R
            ncol = min(cb, nbatch - c0)
            nrow = min(G * R, n - r0s)
            lo = c0 * b1_in + r0s * s_in
            span = (ncol - 1) * b1_in + (nrow - 1) * s_in + 1
            # (rounds past the range are skipped: short rows fill few of the R rounds)
            if REG:
                xs = cuda.local.array(R, OUT_T)
                for j in range(R):
                    if j * block < span:
                        xs[j] = conv(fi.load(src, lo + min(j * block + tid, span - 1)))[0]
                for j in range(R):
                    if j * block < span:
                        fi.store(sh, pad(j * block + tid), (xs[j],))
            else:
                for j in range(R):
                    if j * block < span:
                        fi.store(sh, pad(j * block + tid), conv(fi.load(src, lo + min(j * block + tid, span - 1))))
            cuda.syncthreads()
        elif REG:
            # every load in flight before the first use: branch-free (rows clamped, inactive
            # threads read column 0), through registers for scalars; then the valid rows' fold
            xs = cuda.local.array(R, OUT_T)
            for j in range(R):
                xs[j] = conv(fi.load(src, ib + min(rows0 + j, n - 1) * s_in))[0]
            for j in range(R):
                fi.store(sh, j * block + tid, (xs[j],))
        else:
            for j in range(R):
                fi.store(sh, j * block + tid, conv(fi.load(src, ib + min(rows0 + j, n - 1) * s_in)))
        full = active and rows0 + R <= n  # the group's rows are all in the column
        if full:  # untagged: no kind tests per element
            a = fi.load(sh, spos(pc, 0, s_in, tid))
            for j in range(1, R):
                a = op_v(a, fi.load(sh, spos(pc, j, s_in, tid)))
            agg = (_ONE,) + a
        else:
            for j in range(R):
                if active and rows0 + j < n:
                    agg = comb(agg, (_ONE,) + fi.load(sh, spos(pc, j, s_in, tid)))
        _st_tag(sk, tid, sh, GV + tid, agg)
        cuda.syncthreads()
        gex = empty
        if active:
            for h in range(g):  # the groups above this one
                gex = comb(gex, _ld_tag(sk, h * cb + c, sh, GV + h * cb + c))
        ii = col - col  # this column's init value: its own with init_batch
        if init_batch and active:
            ii = col
        if has_init:
            init_t = (_TWO,) + fi.load(init, ii)
        else:
            init_t = empty
        last = chunk + 1 >= nchunks
        if g == G - 1 and active:
            tot = comb(gex, agg)
            s = t * cb + c
            if chunk == 0:
                pre = init_t
                if not last:
                    if det:
                        publish(status, vals, s, 1, tot[1:], epoch)
                    publish(status, vals, s, 2, comb(pre, tot)[1:], epoch)
            else:
                if det or not last:
                    publish(status, vals, s, 1, tot[1:], epoch)
                if WLB:
                    pre = tot  # the column total, for the warp that looks back
                else:
                    pre = lookback(status, vals, chunk, strip, nstrips, cb, c, epoch, counter,
                                   init_t, empty)
                    if not last:
                        publish(status, vals, s, 2, comb(pre, tot)[1:], epoch)
            _st_tag(sk, block + c, sh, CV + c, pre)
        cuda.syncthreads()
        if WLB and chunk > 0:  # warp w looks back for columns w, w + NW, ...
            lane = tid & 31
            ncol = min(cb, nbatch - strip * cb)
            for cc in range(tid >> 5, ncol, NW):
                ctot = _ld_tag(sk, block + cc, sh, CV + cc)
                lb = wlookback(status, vals, nstrips * cb, strip * cb + cc, chunk, epoch,
                               counter, init_t, empty)
                if lane == 0:
                    _st_tag(sk, block + cc, sh, CV + cc, lb)
                    if not last:
                        publish(status, vals, t * cb + cc, 2, comb(lb, ctot)[1:], epoch)
            cuda.syncthreads()
        if full:  # untagged, as the fold
            run = comb(_ld_tag(sk, block + c, sh, CV + c), gex)
            for j in range(R):
                q = spos(pc, j, s_in, tid)
                v = fi.load(sh, q)
                if j > 0 or run[0] != 0:
                    v = op_v(run[1:], v)
                run = (_ONE,) + v
                if staged == 2:  # back in place: every position is this thread's own
                    fi.store(sh, q, v)
                else:
                    P = rows0 + j + shift
                    if P < m:
                        fi.store(dst, ob + P * s_out, v)
            if shift and chunk == 0 and g == 0:
                fi.store(dst, ob, fi.load(init, ii))
        elif active:
            run = comb(_ld_tag(sk, block + c, sh, CV + c), gex)
            for j in range(R):
                r = rows0 + j
                if r < n:
                    q = spos(pc, j, s_in, tid)
                    run = comb(run, (_ONE,) + fi.load(sh, q))
                    if staged == 2:  # back in place: every position is this thread's own
                        fi.store(sh, q, run[1:])
                    else:
                        P = r + shift
                        if P < m:
                            fi.store(dst, ob + P * s_out, run[1:])
            if shift and chunk == 0 and g == 0:
                fi.store(dst, ob, fi.load(init, ii))
        if staged == 2:  # coalesced warp-striped stores of the block's range (same layout)
            cuda.syncthreads()
            olo = strip * cb * b1_out + chunk * G * R * s_out
            for j in range(R):
                i = j * block + tid
                if i < span:
                    fi.store(dst, olo + i, fi.load(sh, pad(i)))

    inner = fi.with_shared_scratch(2 * block + 1, np.int64, cuda.jit(device=True)(body), nargs=22)
    outer = fi.with_shared_scratch(CV + block, acc_dtypes, inner, nargs=21)

    def column_scan(src, dst, init, n, m, nbatch, nb1, s_in, b0_in, b1_in, s_out, b0_out,
                    b1_out, cb, nstrips, nchunks, status, vals, counter, base, epoch):
        outer(src, dst, init, n, m, nbatch, nb1, s_in, b0_in, b1_in, s_out, b0_out,
              b1_out, cb, nstrips, nchunks, status, vals, counter, base, epoch)

    return column_scan


