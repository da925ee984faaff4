"""The row scan :func:`make_row_scan`: a block scans whole contiguous rows with vector loads.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ... import intrinsics as fi
from ..staging import make_gather, make_tile_loader, make_tile_storer, make_vector_split


def _make_pack(n):
    """``pack(xs, b) -> (xs[b], ..., xs[b + n - 1])`` (a UniTuple for ``vstore``)."""
    g = {}
    items = ", ".join(f"xs[b + {e}]" for e in range(n))
    exec(compile(f"def pack(xs, b):\n    return ({items},)\n", "<forge_array.kernels.scan pack>", "exec"), g)
    return cuda.jit(device=True)(g["pack"])


def make_row_scan(fn, acc_dtype, block, vecs, has_init, in_dtype=None, shift=False,
                  reverse=False):
    """Kernel factory of the short-row scan: inclusive scans of many short contiguous rows
    (``n`` elements each, rows adjacent: ``R * n`` consecutive elements, e.g. axis 1 of a
    (10^7, 10) matrix), output of a 4- or 8-byte dtype, input of that dtype or (``in_dtype``)
    one of 4 or 8 bytes that casts safely to it (int32 -> int64, float32 -> float64), scalar
    operator ``fn``. ``shift``: output rows of ``m`` elements (``m = n + 1``: include_initial;
    ``m = n``: exclusive) that start with the value at ``init`` and hold the inclusive scan
    from their second element on (an exclusive row drops its last one). ``reverse``: every
    row is scanned from its last element to its first (input and output rows run backwards
    in memory: ``src`` and ``dst`` point at the first scanned element of row 0, the highest
    address of its row).
    Each warp works alone on tiles of ``RT = TW // n`` whole rows (``TW = vecs * 32 * VEC``
    elements, its slice of the block's shared memory): it stages the tile in with 128-bit
    loads (:func:`.staging.make_tile_loader`; a converted input into a tile of its own type),
    scans it in place in shared memory and
    stores it out with 128-bit stores (:func:`.staging.make_tile_storer`; input and output
    may have different 16-byte phases; a shifted tile's output vectors gathered from the
    scanned rows one place on, with the init at every row start). No look-back, no ticket,
    no block barrier: the rows are independent. With at least 32 rows per tile each lane
    scans rows ``lane, lane + 32, ...``; with fewer (rows longer than ``TW / 32``) the warp
    scans the tile as one segmented sequence: each lane folds a run of ``C`` consecutive
    elements (``C`` odd, so that the lanes' runs start in distinct shared-memory banks),
    restarting at every row start; a warp scan of the segmented operator (a row start on
    the right restarts the fold) hands each lane the fold of its row before its run, which
    the lane applies to its elements before its first row start. A reversed tile is the
    staged range read backwards (its rows in reverse order, each from its end), so the same
    code scans it.

    Kernel arguments: ``src, dst, init`` (1-tuples of pointers), ``n`` (row length, at most
    ``TW``), ``m`` (output row length: ``n`` unless ``shift``), ``R`` (rows), ``aux`` (the
    16-byte phase in elements of ``src[0]``, plus 16 times that of ``dst[0]``).

    >>> import numpy as np
    >>> callable(make_row_scan(lambda a, b: a + b, np.dtype("float32"), 64, 2, False))
    True
    """
    acc_dtype = np.dtype(acc_dtype)
    in_dtype = acc_dtype if in_dtype is None else np.dtype(in_dtype)
    CONV = in_dtype != acc_dtype
    SHIFT = bool(shift)
    REV = bool(reverse)
    OUT_T = acc_dtype.type
    VEC = fi.VEC(acc_dtype)
    TW = int(vecs) * 32 * VEC
    WPB = block // 32
    op = fi.as_device(fn)
    load_tile = make_tile_loader(32, fi.VEC(in_dtype))
    store_tile = make_tile_storer(32, VEC)
    gather = make_gather(VEC)
    split = make_vector_split(VEC)

    def seg(p, q):                     # (row start seen, fold since it): q's start restarts
        if q[0] != 0:
            return (p[0] | q[0], q[1])
        return (p[0], fi.cast_like(op(p[1], q[1]), q[1]))

    seg_scan = fi.make_warp_scan(seg)

    @cuda.jit(device=True)
    def ix(q, tot):                    # shared position of the tile's q-th scanned element
        if REV:
            return tot - 1 - q
        return q

    @cuda.jit(device=True)
    def lane_per_row(s, si, so, init, n, rows, lane):
        tot = rows * n
        r = lane
        while r < rows:
            e = r * n
            a = OUT_T(fi.load(si, so + ix(e, tot)))
            if has_init:
                a = fi.cast_like(op(fi.load(init[0], 0), a), a)
            if has_init or CONV:       # (else the first element is in place already)
                fi.store(s, so + ix(e, tot), a)
            for j in range(1, n):
                a = fi.cast_like(op(a, OUT_T(fi.load(si, so + ix(e + j, tot)))), a)
                fi.store(s, so + ix(e + j, tot), a)
            r += 32

    @cuda.jit(device=True)
    def segmented(s, si, so, init, n, rows, lane):
        tot = rows * n
        C = (tot + 31) // 32
        C += 1 - C % 2                 # odd: the 32 runs start in 32 distinct banks
        b = lane * C
        e = b + C
        if e > tot:
            e = tot
        fh = (b + n - 1) // n * n      # the first row start at or after b
        head = 0
        a = fi.load(s, so)             # (typed; lanes past the tile fold nothing)
        nxt = fh
        p = b
        while p < e:
            x = OUT_T(fi.load(si, so + ix(p, tot)))
            if p == nxt:
                if has_init:
                    x = fi.cast_like(op(fi.load(init[0], 0), x), x)
                a = x
                head = 1
                nxt += n
            elif p == b:
                a = x
            else:
                a = fi.cast_like(op(a, x), a)
            fi.store(s, so + ix(p, tot), a)
            p += 1
        inc = seg_scan((head, a))
        prev = fi.shfl_up(inc, 1)      # the fold of this lane's row before its run
        if fh > b and b < tot:         # (lane 0 starts a row: never here)
            c = prev[1]
            lim = fh
            if lim > e:
                lim = e
            p = b
            while p < lim:
                q = so + ix(p, tot)
                fi.store(s, q, fi.cast_like(op(c, fi.load(s, q)), c))
                p += 1

    # shifted output: element k of an output row is the init (k = 0) or the scanned row's
    # element k - 1; (r, k) walk the output in memory order (backwards when reversed)
    @cuda.jit(device=True)
    def shifted_value(s, so, r, k, n, tot, iv):
        if k == 0:
            return iv
        return fi.load(s, so + ix(r * n + k - 1, tot))

    @cuda.jit(device=True)
    def next_rk(r, k, m):
        if REV:
            k -= 1
            if k < 0:
                return r - 1, m - 1
            return r, k
        k += 1
        if k == m:
            return r + 1, 0
        return r, k

    @cuda.jit(device=True)
    def row_col(q, m, tout, inv_m):    # (row, element) of the output's memory position q
        o = q
        if REV:
            o = tout - 1 - q
        r = np.int64(np.float32(o) * inv_m)   # exact up to one either way: o < 2^24
        k = o - r * m
        if k < 0:
            r -= 1
            k += m
        elif k >= m:
            r += 1
            k -= m
        return r, k

    if VEC == 4:
        @cuda.jit(device=True)
        def shifted_vec(s, so, r, k, n, m, tot, iv):
            v0 = shifted_value(s, so, r, k, n, tot, iv)
            r, k = next_rk(r, k, m)
            v1 = shifted_value(s, so, r, k, n, tot, iv)
            r, k = next_rk(r, k, m)
            v2 = shifted_value(s, so, r, k, n, tot, iv)
            r, k = next_rk(r, k, m)
            return (v0, v1, v2, shifted_value(s, so, r, k, n, tot, iv))
    else:
        @cuda.jit(device=True)
        def shifted_vec(s, so, r, k, n, m, tot, iv):
            v0 = shifted_value(s, so, r, k, n, tot, iv)
            r, k = next_rk(r, k, m)
            return (v0, shifted_value(s, so, r, k, n, tot, iv))

    @cuda.jit(device=True)
    def store_shifted(s, so, p, start, n, m, rows, mis, lane, iv, inv_m, dr, dk):
        """The tile's ``rows * m`` output elements to ``p[start ...]``: scalar head up to the
        16-byte boundary, 128-bit stores, scalar tail (as the plain storer). A lane's vectors
        are ``32 * VEC`` elements apart: ``dr`` rows and ``dk`` elements of a row. When no
        vector of the warp's round holds a row start (or, exclusive, a dropped last
        element), each is ``VEC`` consecutive scanned elements: a plain gather."""
        tot = rows * n
        tout = rows * m
        ha, nv = split(mis, start, tout)
        if lane < ha:
            r, k = row_col(lane, m, tout, inv_m)
            fi.store(p, start + lane, shifted_value(s, so, r, k, n, tot, iv))
        r, k = row_col(ha + lane * VEC, m, tout, inv_m)
        qb = 0
        while qb < nv:                 # warp-uniform rounds of 32 vectors
            q = qb + lane
            if REV:                    # elements k, k - 1, ... of row r, none the init
                plain = k >= VEC
            else:                      # elements k, k + 1, ... of row r, none past its end
                plain = k >= 1 and k + VEC <= m
            every = fi.ballot(plain or q >= nv) == np.uint32(0xFFFFFFFF)
            if q < nv:
                if every:
                    v = gather(s, so + ix(r * n + k - 1, tot))
                else:
                    v = shifted_vec(s, so, r, k, n, m, tot, iv)
                fi.vstore(p, start + ha + q * VEC, v)
            if REV:                    # the next vector of this lane, 32 vectors on
                r -= dr
                k -= dk
                if k < 0:
                    k += m
                    r -= 1
            else:
                r += dr
                k += dk
                if k >= m:
                    k -= m
                    r += 1
            qb += 32
        tl = ha + nv * VEC + lane
        if tl < tout:
            r, k = row_col(tl, m, tout, inv_m)
            fi.store(p, start + tl, shifted_value(s, so, r, k, n, tot, iv))

    @cuda.jit(device=True)
    def tiles_loop(s, si, src, dst, init, n, m, R, aux):
        tid = cuda.threadIdx.x
        lane = tid % 32
        so = (tid // 32) * TW
        RT = TW // n
        tiles = (R + RT - 1) // RT
        t = np.int64(cuda.blockIdx.x) * WPB + tid // 32
        step = np.int64(cuda.gridDim.x) * WPB
        mis_in = aux & 15
        mis_out = aux >> 4
        iv = fi.load(s, 0)
        inv_m = np.float32(1.0) / np.float32(m)
        dr = (32 * VEC) // m
        dk = 32 * VEC - dr * m
        if SHIFT:
            iv = fi.load(init[0], 0)
        while t < tiles:               # warp-uniform
            r0 = t * RT
            rows = R - r0
            if rows > RT:
                rows = RT
            start_in = r0 * n
            start_out = r0 * m
            if REV:                    # the staged ranges start at the rows' other ends
                start_in -= n - 1
                start_out -= m - 1
            load_tile(si, so, src[0], start_in, rows * n, mis_in, lane)
            fi.syncwarp()
            if RT >= 32:               # warp-uniform
                lane_per_row(s, si, so, init, n, rows, lane)
            else:
                segmented(s, si, so, init, n, rows, lane)
            fi.syncwarp()
            if SHIFT:
                store_shifted(s, so, dst[0], start_out, n, m, rows, mis_out, lane, iv, inv_m, dr,
                              dk)
            else:
                store_tile(s, so, dst[0], start_out, rows * n, mis_out, lane)
            fi.syncwarp()
            t += step

    if CONV:                           # the input's own tile beside the result's
        def body(sc, src, dst, init, n, m, R, aux):
            tiles_loop(sc[0], sc[1], src, dst, init, n, m, R, aux)
        run = fi.with_shared_scratch(WPB * TW, (acc_dtype, in_dtype), body, 7)
    else:
        def body(s, src, dst, init, n, m, R, aux):
            tiles_loop(s, s, src, dst, init, n, m, R, aux)
        run = fi.with_shared_scratch(WPB * TW, acc_dtype, body, 7)

    def row_scan(src, dst, init, n, m, R, aux):
        run(src, dst, init, n, m, R, aux)

    return row_scan


