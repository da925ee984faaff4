"""Column kernels (reduction across the contiguous axis): :func:`make_col_kernel` and its
vectorised form :func:`make_colvec_kernel`.
"""
from __future__ import annotations

from numba import cuda

from ... import intrinsics as fi
from .common import _dtypes_of, _make_bcast, _make_call, _make_offsets, _make_range_reduce, _prepare

# --------------------------------------------------------------------------- column kernel


def make_col_kernel(f, op, K, ACC, ID, FLAG, INIT, BLOCK, SPLIT, RED2, INDEX, UNROLL):
    """Kernel factory: reduction across the contiguous axis (see :mod:`forge_array.kernels.rowcol`).

    Parameters as for :func:`make_row_kernel`. The runtime argument ``aux`` is ``C``, the
    outputs per block tile (1 <= C <= BLOCK);
    ``BLOCK // C`` threads share an output. ``SPLIT > 1``: ``ceil(J / chunk)`` blocks (a runtime
    value) share a tile's rows; the last one combines their partials, four in flight per thread.
    """
    fd, opd, ID, finish = _prepare(f, op, ID, FLAG, INIT)
    _, bases, _ = _make_offsets(K)
    rr = _make_range_reduce(fd, opd, K, ID, FLAG, RED2, INDEX, 1, UNROLL)
    bcast = _make_bcast()

    def combine_body(sh, acc, tid, rho, C, RB):
        """Total over the ``RB`` threads sharing an output; valid where ``rho == 0``."""
        fi.store(sh, tid, acc)
        cuda.syncthreads()
        d = 1
        while d < RB:                  # block-uniform
            if rho % (2 * d) == 0 and rho + d < RB:
                fi.store(sh, tid, fi.cast_like(opd(fi.load(sh, tid), fi.load(sh, tid + d * C)), ID))
            d *= 2
            cuda.syncthreads()
        v = fi.load(sh, tid)
        cuda.syncthreads()
        return v

    combine = fi.with_shared_scratch(BLOCK, _dtypes_of(ID), combine_body, 5)

    def col_kernel(ins, out, part, tick, nb, nr, m0, m1, SB, SR, S0, S1, ob, orr,
                   kb, L0, L1, chunk, aux):
        tid = cuda.threadIdx.x
        C = aux
        RB = BLOCK // C
        c = tid % C
        rho = tid // C
        tiles = (nr + C - 1) // C
        J = m0 * m1
        ntot = nb * nr
        nsp = 1
        if SPLIT > 1:
            nsp = (J + chunk - 1) // chunk
        nwork = nb * tiles * nsp
        t = cuda.blockIdx.x
        while t < nwork:               # block-uniform
            bt = t // nsp
            s = t - bt * nsp
            b = bt // tiles
            col = (bt - b * tiles) * C + c
            active = rho < RB and col < nr
            acc = ID
            if active:
                base = bases(b, col, SB, SR)
                lo = s * chunk
                hi = lo + chunk
                if hi > J:
                    hi = J
                acc = rr(ins, base, S0, S1, m1, kb, L0, L1, lo, hi, rho, RB, 0, acc)
            acc = combine(acc, tid, rho, C, RB)
            if SPLIT == 1:
                if rho == 0 and col < nr:
                    fi.store(out, b * ob + col * orr, finish(acc))
            else:
                if rho == 0 and col < nr:
                    fi.store(part, s * ntot + b * nr + col, acc)
                fi.fence_device()
                cuda.syncthreads()
                last = 0
                if tid == 0:
                    old = fi.atomic_add(tick, bt, 1)
                    if old == nsp - 1:
                        last = 1
                last = bcast(last)
                if last == 1:          # the last block of this tile combines
                    fi.fence_device()
                    acc = ID
                    if active:
                        o = b * nr + col
                        q = rho
                        while q + 3 * RB < nsp:    # four partials in flight
                            p0 = fi.load(part, q * ntot + o)
                            p1 = fi.load(part, (q + RB) * ntot + o)
                            p2 = fi.load(part, (q + 2 * RB) * ntot + o)
                            p3 = fi.load(part, (q + 3 * RB) * ntot + o)
                            p0 = fi.cast_like(opd(p0, p1), ID)
                            p2 = fi.cast_like(opd(p2, p3), ID)
                            acc = fi.cast_like(opd(acc, fi.cast_like(opd(p0, p2), ID)), ID)
                            q += 4 * RB
                        while q < nsp:
                            acc = fi.cast_like(opd(acc, fi.load(part, q * ntot + o)), ID)
                            q += RB
                    acc = combine(acc, tid, rho, C, RB)
                    if rho == 0 and col < nr:
                        fi.store(out, b * ob + col * orr, finish(acc))
                    if tid == 0:
                        fi.atomic_exch(tick, bt, 0)
            t += cuda.gridDim.x

    return col_kernel


# --------------------------------------------------------------------------- vectorised column kernel


def _make_lane_get(mode):
    """``(v, e) -> v[e]`` for an operand of the columns (``mode`` 1 or 2), ``v`` for a
    broadcast one."""
    if mode:
        @cuda.jit(device=True)
        def get(v, e):
            return v[e]
    else:
        @cuda.jit(device=True)
        def get(v, e):
            return v
    return get


def _make_col_loader(mode, VEC):
    """``(p, o, c0, cl, full, pre) -> value(s)`` of one row for the ``VEC`` columns ``c0 ..
    c0 + VEC - 1`` (offset ``o`` is column 0 of that row): a 128-bit load when ``full``
    (``c0``'s address is 16-byte aligned), else scalar loads at the given (clamped) columns; a
    broadcast operand (``mode`` 0) loads its one element at ``o``; an operand of the columns
    only (``mode`` 2: the same in every row, of its own item size) gives ``pre``, its values
    loaded once before the rows (:func:`_make_col_preloader`)."""
    if not mode:
        @cuda.jit(device=True)
        def ld(p, o, c0, cl, full, pre):
            return fi.load(p, o)
        return ld
    if mode == 2:
        @cuda.jit(device=True)
        def ld(p, o, c0, cl, full, pre):
            return pre
        return ld
    if VEC == 2:
        @cuda.jit(device=True)
        def ld(p, o, c0, cl, full, pre):
            if full:
                return fi.vload(p, o + c0)
            return (p[o + cl[0]], p[o + cl[1]])
    elif VEC == 4:
        @cuda.jit(device=True)
        def ld(p, o, c0, cl, full, pre):
            if full:
                return fi.vload(p, o + c0)
            return (p[o + cl[0]], p[o + cl[1]], p[o + cl[2]], p[o + cl[3]])
    else:
        raise ValueError(f"vectorised column kernel: VEC must be 2 or 4, got {VEC}")
    return ld


def _make_col_preloader(mode, VEC):
    """``(p, o, cl) -> values``: an operand of the columns only (``mode`` 2) loaded once, by
    scalar loads at the clamped columns ``cl`` of offset ``o``; 0 for any other operand."""
    if mode != 2:
        @cuda.jit(device=True)
        def pre(p, o, cl):
            return 0
    elif VEC == 2:
        @cuda.jit(device=True)
        def pre(p, o, cl):
            return (p[o + cl[0]], p[o + cl[1]])
    else:
        @cuda.jit(device=True)
        def pre(p, o, cl):
            return (p[o + cl[0]], p[o + cl[1]], p[o + cl[2]], p[o + cl[3]])
    return pre


def _make_col_fold(call, opd, K, ID, VEC, MODES):
    """``(load_all, fold, preload_all)``: ``load_all(ins, o, c0, cl, full, pre)`` loads one
    row of the ``VEC`` columns of every operand, ``fold(v, kidx, accs)`` folds ``f`` of them
    into the ``VEC`` accumulators (a tuple) and ``preload_all(ins, o, cl)`` gives ``pre``,
    the values of the operands of the columns only (mode 2), loaded once."""
    lds = [_make_col_loader(MODES[k], VEC) for k in range(K)]
    gets = [_make_lane_get(MODES[k]) for k in range(K)]
    pls = [_make_col_preloader(MODES[k], VEC) for k in range(K)]
    ld0, g0, p0 = lds[0], gets[0], pls[0]
    ld1, g1, p1 = (lds[1], gets[1], pls[1]) if K > 1 else (None, None, None)
    ld2, g2, p2 = (lds[2], gets[2], pls[2]) if K > 2 else (None, None, None)

    if K == 1:
        @cuda.jit(device=True)
        def lane(v, e, kidx):
            return call(g0(v[0], e), kidx)

        @cuda.jit(device=True)
        def load_all(ins, o, c0, cl, full, pre):
            return (ld0(ins[0], o[0], c0, cl, full, pre[0]),)

        @cuda.jit(device=True)
        def preload_all(ins, o, cl):
            return (p0(ins[0], o[0], cl),)
    elif K == 2:
        @cuda.jit(device=True)
        def lane(v, e, kidx):
            return call(g0(v[0], e), g1(v[1], e), kidx)

        @cuda.jit(device=True)
        def load_all(ins, o, c0, cl, full, pre):
            return (ld0(ins[0], o[0], c0, cl, full, pre[0]), ld1(ins[1], o[1], c0, cl, full, pre[1]))

        @cuda.jit(device=True)
        def preload_all(ins, o, cl):
            return (p0(ins[0], o[0], cl), p1(ins[1], o[1], cl))
    else:
        @cuda.jit(device=True)
        def lane(v, e, kidx):
            return call(g0(v[0], e), g1(v[1], e), g2(v[2], e), kidx)

        @cuda.jit(device=True)
        def load_all(ins, o, c0, cl, full, pre):
            return (ld0(ins[0], o[0], c0, cl, full, pre[0]), ld1(ins[1], o[1], c0, cl, full, pre[1]),
                    ld2(ins[2], o[2], c0, cl, full, pre[2]))

        @cuda.jit(device=True)
        def preload_all(ins, o, cl):
            return (p0(ins[0], o[0], cl), p1(ins[1], o[1], cl), p2(ins[2], o[2], cl))

    if VEC == 2:
        @cuda.jit(device=True)
        def fold(v, kidx, accs):
            return (fi.cast_like(opd(accs[0], lane(v, 0, kidx)), ID),
                    fi.cast_like(opd(accs[1], lane(v, 1, kidx)), ID))
    else:
        @cuda.jit(device=True)
        def fold(v, kidx, accs):
            return (fi.cast_like(opd(accs[0], lane(v, 0, kidx)), ID),
                    fi.cast_like(opd(accs[1], lane(v, 1, kidx)), ID),
                    fi.cast_like(opd(accs[2], lane(v, 2, kidx)), ID),
                    fi.cast_like(opd(accs[3], lane(v, 3, kidx)), ID))
    return load_all, fold, preload_all


def make_colvec_kernel(f, op, K, ACC, ID, FLAG, INIT, BLOCK, SPLIT, RED2, INDEX, UNROLL, VEC,
                       MODES, TAIL=True, VOUT=False, FLIGHT=2, GROUPED=False):
    """Kernel factory: reduction across the contiguous axis with ``VEC`` adjacent outputs per
    thread read by 128-bit loads (the vectorised form of :func:`make_col_kernel`).

    ``MODES[k]`` is 1 when operand ``k`` is contiguous along the outputs (``SR[k] == 1``: one
    ``VEC``-wide load per row serves ``VEC`` outputs), 0 when it is the same for every
    output (``SR[k] == 0``, e.g. ``x`` of ``x @ A``: one scalar load per row serves ``VEC``
    outputs) and 2 when it is contiguous along the outputs and the same in every row, of
    another item size or phase than the vector operands (``mu`` of float64 in ``sum((X -
    mu)**2, axis=0)`` of a float32 ``X``: ``VEC`` scalar loads, cached, per row). The host
    guarantees that every vector operand has the same 16-byte phase at column 0 of every
    row (``S0``, ``S1``, ``SB`` multiples of ``VEC``).

    The runtime argument ``aux`` is ``(GS * 2048 + CQ) * 16 + ph``: ``CQ`` (``<= BLOCK <=
    1024``) groups of ``VEC`` columns per block tile, ``ph`` the phase (in elements, ``< VEC``)
    of column 0 and ``GS`` the parts per group of a two-level combine (``GROUPED``). Column group ``q``
    covers columns ``q * VEC - ph .. q * VEC - ph + VEC - 1``; the first and last groups may
    be partial and use scalar loads at clamped columns (only the valid ones are stored).
    ``BLOCK // CQ`` threads share a group (strided rows); ``SPLIT`` blocks share a tile's
    rows (partials + last-block ticket). ``UNROLL``: rows in flight per thread (8, 4, 2 or 1;
    8 falls back to rounds of 4). ``TAIL`` (with ``UNROLL >= 4``): a thread's last 1-3
    rows go out in one round trip (else one at a time). ``VOUT``: a thread's ``VEC`` results
    go out in one 128-bit store when all its columns are valid (the host guarantees a
    contiguous result of the input's item size, 16-byte aligned at column 0 of every output
    row, and phase 0); else one store per column. ``FLIGHT`` (2, 4 or 8): rows of partials a
    thread of the last block of a split tile has in flight while it combines them.
    ``GROUPED`` (with ``GS >= 2`` and more than ``GS`` parts): two levels, as in the flat
    kernel: the last block of each group of ``GS`` consecutive parts of a tile folds their
    partial rows into a group row (rows ``nsp ..`` of ``part``; a ticket per group after the
    tiles' tickets), and the last group's combiner folds the group rows (``x @ A`` of (10^4,
    10^3) splits 8 tiles 132 ways: one block folding 132 partial rows took 17 dependent L2 round
    trips per thread). The order is fixed by the launch shape. Other parameters as for
    :func:`make_row_kernel`.

    >>> import numpy as np
    >>> k = make_colvec_kernel(lambda a: a, lambda a, b: a + b, 1, np.dtype("float32"),
    ...                        np.float32(0), False, None, 64, 1, False, False, 2, 4, (1,))
    >>> callable(k)
    True
    """
    fd, opd, ID, finish = _prepare(f, op, ID, FLAG, INIT)
    call = _make_call(fd, K, INDEX, ID, FLAG)
    offs, bases, add2 = _make_offsets(K)
    load_all, fold, preload_all = _make_col_fold(call, opd, K, ID, VEC, MODES)
    bcast = _make_bcast()
    if VEC == 2:
        @cuda.jit(device=True)
        def clamp_cols(c0, nr):
            return (min(max(c0, 0), nr - 1), min(max(c0 + 1, 0), nr - 1))

        @cuda.jit(device=True)
        def ids():
            return (ID, ID)
    else:
        @cuda.jit(device=True)
        def clamp_cols(c0, nr):
            return (min(max(c0, 0), nr - 1), min(max(c0 + 1, 0), nr - 1),
                    min(max(c0 + 2, 0), nr - 1), min(max(c0 + 3, 0), nr - 1))

        @cuda.jit(device=True)
        def ids():
            return (ID, ID, ID, ID)

    if VEC == 2:
        @cuda.jit(device=True)
        def part_row(part, o, cl):
            return (fi.load(part, o + cl[0]), fi.load(part, o + cl[1]))

        @cuda.jit(device=True)
        def comb(a, v):
            return (fi.cast_like(opd(a[0], v[0]), ID), fi.cast_like(opd(a[1], v[1]), ID))
    else:
        @cuda.jit(device=True)
        def part_row(part, o, cl):
            return (fi.load(part, o + cl[0]), fi.load(part, o + cl[1]), fi.load(part, o + cl[2]),
                    fi.load(part, o + cl[3]))

        @cuda.jit(device=True)
        def comb(a, v):
            return (fi.cast_like(opd(a[0], v[0]), ID), fi.cast_like(opd(a[1], v[1]), ID),
                    fi.cast_like(opd(a[2], v[2]), ID), fi.cast_like(opd(a[3], v[3]), ID))

    if VEC == 2:
        @cuda.jit(device=True)
        def finished(accs):
            return (finish(accs[0]), finish(accs[1]))
    else:
        @cuda.jit(device=True)
        def finished(accs):
            return (finish(accs[0]), finish(accs[1]), finish(accs[2]), finish(accs[3]))

    @cuda.jit(device=True)
    def store_out(out, o, orr, c0, nr, full, accs):
        """The results of columns ``c0 .. c0 + VEC - 1`` (the valid ones) at ``o + c * orr``."""
        if VOUT and full:
            fi.vstore(out, o + c0, finished(accs))
        else:
            for e in range(VEC):
                c = c0 + e
                if c >= 0 and c < nr:
                    fi.store(out, o + c * orr, finish(accs[e]))

    @cuda.jit(device=True)
    def row_off(base, S0, S1, m1, kb, L0, L1, j):
        if RED2:
            j0 = j // m1
            j1 = j - j0 * m1
            return add2(offs(base, S1, j1), j0, S0), kb + j0 * L0 + j1 * L1
        return offs(base, S1, j), kb + j * L1

    @cuda.jit(device=True)
    def load4(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, pre, j, T):
        """Rows ``j, j + T, j + 2T, j + 3T``: their loads (all issued before any is used) and
        their reduction indices."""
        o0, k0 = row_off(base, S0, S1, m1, kb, L0, L1, j)
        o1, k1 = row_off(base, S0, S1, m1, kb, L0, L1, j + T)
        o2, k2 = row_off(base, S0, S1, m1, kb, L0, L1, j + 2 * T)
        o3, k3 = row_off(base, S0, S1, m1, kb, L0, L1, j + 3 * T)
        return ((load_all(ins, o0, c0, cl, full, pre), load_all(ins, o1, c0, cl, full, pre),
                 load_all(ins, o2, c0, cl, full, pre), load_all(ins, o3, c0, cl, full, pre)), (k0, k1, k2, k3))

    @cuda.jit(device=True)
    def fold4(vk, accs):
        vs, ks = vk
        accs = fold(vs[0], ks[0], accs)
        accs = fold(vs[1], ks[1], accs)
        accs = fold(vs[2], ks[2], accs)
        return fold(vs[3], ks[3], accs)

    @cuda.jit(device=True)
    def col_range(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, pre, j, hi, T, accs):
        if UNROLL >= 8:
            while j + 7 * T < hi:          # eight rows in flight (short, single-wave launches)
                a = load4(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, pre, j, T)
                b = load4(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, pre, j + 4 * T, T)
                accs = fold4(b, fold4(a, accs))
                j += 8 * T
        if UNROLL >= 4:
            while j + 3 * T < hi:
                accs = fold4(load4(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, pre, j, T), accs)
                j += 4 * T
            if TAIL and j < hi:  # the last 1-3 rows in one round trip (rows past `hi` re-read row j)
                ja = j + T
                jb = j + 2 * T
                va = ja < hi
                vb = jb < hi
                if not va:
                    ja = j
                if not vb:
                    jb = j
                o0, k0 = row_off(base, S0, S1, m1, kb, L0, L1, j)
                o1, k1 = row_off(base, S0, S1, m1, kb, L0, L1, ja)
                o2, k2 = row_off(base, S0, S1, m1, kb, L0, L1, jb)
                v0 = load_all(ins, o0, c0, cl, full, pre)
                v1 = load_all(ins, o1, c0, cl, full, pre)
                v2 = load_all(ins, o2, c0, cl, full, pre)
                accs = fold(v0, k0, accs)
                if va:
                    accs = fold(v1, k1, accs)
                if vb:
                    accs = fold(v2, k2, accs)
                j = hi
        elif UNROLL >= 2:
            while j + T < hi:
                o0, k0 = row_off(base, S0, S1, m1, kb, L0, L1, j)
                o1, k1 = row_off(base, S0, S1, m1, kb, L0, L1, j + T)
                v0 = load_all(ins, o0, c0, cl, full, pre)
                v1 = load_all(ins, o1, c0, cl, full, pre)
                accs = fold(v0, k0, accs)
                accs = fold(v1, k1, accs)
                j += 2 * T
        while j < hi:
            o0, k0 = row_off(base, S0, S1, m1, kb, L0, L1, j)
            accs = fold(load_all(ins, o0, c0, cl, full, pre), k0, accs)
            j += T
        return accs

    if VEC == 2:
        @cuda.jit(device=True)
        def gather(sh, tid):
            return (fi.load(sh, tid), fi.load(sh, tid + BLOCK))
    else:
        @cuda.jit(device=True)
        def gather(sh, tid):
            return (fi.load(sh, tid), fi.load(sh, tid + BLOCK), fi.load(sh, tid + 2 * BLOCK),
                    fi.load(sh, tid + 3 * BLOCK))

    def combine_body(sh, accs, tid, rho, CQ, RB):
        """Totals over the ``RB`` threads sharing a column group (all ``VEC`` columns in one
        tree); valid where ``rho == 0``."""
        if RB == 1:
            return accs
        for e in range(VEC):
            fi.store(sh, tid + e * BLOCK, accs[e])
        cuda.syncthreads()
        d = 1
        while d < RB:                  # block-uniform
            if rho % (2 * d) == 0 and rho + d < RB:
                for e in range(VEC):
                    i = tid + e * BLOCK
                    fi.store(sh, i, fi.cast_like(opd(fi.load(sh, i), fi.load(sh, i + d * CQ)), ID))
            d *= 2
            cuda.syncthreads()
        v = gather(sh, tid)
        cuda.syncthreads()
        return v

    combine_all = fi.with_shared_scratch(BLOCK * VEC, _dtypes_of(ID), combine_body, 5)

    @cuda.jit(device=True)
    def parts4(part, w, RB, ntot, o, cl):
        """Partial rows ``w, w + RB, w + 2 RB, w + 3 RB``, all loads issued before any is used."""
        return (part_row(part, w * ntot + o, cl), part_row(part, (w + RB) * ntot + o, cl),
                part_row(part, (w + 2 * RB) * ntot + o, cl), part_row(part, (w + 3 * RB) * ntot + o, cl))

    @cuda.jit(device=True)
    def comb4(accs, rs):
        return comb(comb(comb(comb(accs, rs[0]), rs[1]), rs[2]), rs[3])

    @cuda.jit(device=True)
    def fold_parts(part, w, hi, RB, ntot, o, cl, accs):
        """Fold partial rows ``w, w + RB, ... < hi`` (row ``r`` at ``r * ntot + o``) into
        ``accs``, ``FLIGHT`` rows in flight."""
        if FLIGHT >= 8:
            while w + 7 * RB < hi:         # eight rows of partials in flight
                a = parts4(part, w, RB, ntot, o, cl)
                b = parts4(part, w + 4 * RB, RB, ntot, o, cl)
                accs = comb4(comb4(accs, a), b)
                w += 8 * RB
        if FLIGHT >= 4:
            while w + 3 * RB < hi:         # four rows of partials in flight
                accs = comb4(accs, parts4(part, w, RB, ntot, o, cl))
                w += 4 * RB
        while w + RB < hi:                 # two rows of partials in flight
            accs = comb(comb(accs, part_row(part, w * ntot + o, cl)),
                        part_row(part, (w + RB) * ntot + o, cl))
            w += 2 * RB
        if w < hi:
            accs = comb(accs, part_row(part, w * ntot + o, cl))
        return accs

    @cuda.jit(device=True)
    def store_part(part, o, c0, nr, accs):
        for e in range(VEC):
            c = c0 + e
            if c >= 0 and c < nr:
                fi.store(part, o + c, accs[e])

    def colvec_kernel(ins, out, part, tick, nb, nr, m0, m1, SB, SR, S0, S1, ob, orr,
                      kb, L0, L1, chunk, aux):
        tid = cuda.threadIdx.x
        GS = aux // 32768
        CQ = aux // 16 - GS * 2048
        ph = aux - (GS * 2048 + CQ) * 16
        RB = BLOCK // CQ
        cq = tid % CQ
        rho = tid // CQ
        nq = (nr + ph + VEC - 1) // VEC
        tiles = (nq + CQ - 1) // CQ
        J = m0 * m1
        ntot = nb * nr
        nsp = 1
        if SPLIT > 1:
            nsp = (J + chunk - 1) // chunk
        ng = 0                         # groups of the two-level combine (0: one level)
        if GROUPED and GS >= 2 and nsp > GS:
            ng = (nsp + GS - 1) // GS
        nwork = nb * tiles * nsp
        t = cuda.blockIdx.x
        while t < nwork:               # block-uniform
            bt = t // nsp
            s = t - bt * nsp
            b = bt // tiles
            q = (bt - b * tiles) * CQ + cq
            c0 = q * VEC - ph
            active = rho < RB and q < nq
            accs = ids()
            if active:
                base = bases(b, 0, SB, SR)
                full = c0 >= 0 and c0 + VEC <= nr
                cl = clamp_cols(c0, nr)
                lo = s * chunk
                hi = lo + chunk
                if hi > J:
                    hi = J
                pre = preload_all(ins, row_off(base, S0, S1, m1, kb, L0, L1, lo)[0], cl)
                accs = col_range(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, pre, lo + rho, hi,
                                 RB, accs)
            accs = combine_all(accs, tid, rho, CQ, RB)
            if SPLIT == 1:
                if rho == 0 and q < nq:
                    store_out(out, b * ob, orr, c0, nr, c0 >= 0 and c0 + VEC <= nr, accs)
            else:
                if rho == 0 and q < nq:
                    store_part(part, s * ntot + b * nr, c0, nr, accs)
                fi.fence_device()
                cuda.syncthreads()
                last = 0
                lo = 0                 # the partial rows the tile's last block folds
                hi = nsp
                if ng > 0:             # block-uniform
                    g = s // GS
                    glo = g * GS
                    ghi = min(glo + GS, nsp)
                    gt = nb * tiles + bt * ng + g
                    if tid == 0:
                        if fi.atomic_add(tick, gt, 1) == ghi - glo - 1:
                            last = 1
                    last = bcast(last)
                    if last == 1:      # the last block of this group: its group row
                        fi.fence_device()
                        accs = ids()
                        if active:
                            accs = fold_parts(part, glo + rho, ghi, RB, ntot, b * nr,
                                              clamp_cols(c0, nr), accs)
                        accs = combine_all(accs, tid, rho, CQ, RB)
                        if rho == 0 and q < nq:
                            store_part(part, (nsp + g) * ntot + b * nr, c0, nr, accs)
                        fi.fence_device()
                        cuda.syncthreads()
                        last = 0
                        if tid == 0:
                            fi.atomic_exch(tick, gt, 0)
                            if fi.atomic_add(tick, bt, 1) == ng - 1:
                                last = 1
                        last = bcast(last)
                    lo = nsp
                    hi = nsp + ng
                else:
                    if tid == 0:
                        if fi.atomic_add(tick, bt, 1) == nsp - 1:
                            last = 1
                    last = bcast(last)
                if last == 1:          # the last block of this tile combines
                    fi.fence_device()
                    accs = ids()
                    if active:
                        accs = fold_parts(part, lo + rho, hi, RB, ntot, b * nr,
                                          clamp_cols(c0, nr), accs)
                    accs = combine_all(accs, tid, rho, CQ, RB)
                    if rho == 0 and q < nq:
                        store_out(out, b * ob, orr, c0, nr, c0 >= 0 and c0 + VEC <= nr, accs)
                    if tid == 0:
                        fi.atomic_exch(tick, bt, 0)
            t += cuda.gridDim.x

    return colvec_kernel


