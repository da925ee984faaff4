"""The flat column kernel :func:`make_colflat_kernel`: thin C-contiguous matrices reduced across
their rows as one run of 128-bit vectors.
"""
from __future__ import annotations

from numba import cuda

from ... import intrinsics as fi
from .columns import _make_col_fold
from .common import _dtypes_of, _make_bcast, _make_call, _prepare

# --------------------------------------------------------------------------- flat column kernel


def _make_flat_loader(mode, VEC):
    """``(p, f, r, S, w) -> VEC values`` of one operand for the flat elements ``f .. f + VEC - 1``
    of a C-contiguous matrix: a 128-bit load at ``f`` (``mode`` 1: the operand is laid out
    like the matrix), or the row values ``p[r * S]`` (elements ``k < w``, still in row ``r``)
    and ``p[(r + 1) * S]`` (the others) of an operand indexed by the row (``mode`` 0: ``x``
    of ``x @ A``)."""
    if mode:
        @cuda.jit(device=True)
        def ld(p, f, r, S, w):
            return fi.vload(p, f)
    elif VEC == 2:
        @cuda.jit(device=True)
        def ld(p, f, r, S, w):
            a = fi.load(p, r * S)
            b = a
            if w < 2:
                b = fi.load(p, r * S + S)
            return (a, b)
    elif VEC == 4:
        @cuda.jit(device=True)
        def ld(p, f, r, S, w):
            a = fi.load(p, r * S)
            b = a
            if w < 4:
                b = fi.load(p, r * S + S)
            return (a, a if w > 1 else b, a if w > 2 else b, b)
    else:
        raise ValueError(f"flat column kernel: VEC must be 2 or 4, got {VEC}")
    return ld


def _make_flat_elem(mode):
    """``(p, f, r, S) -> value`` of one operand at flat element ``f`` (row ``r``)."""
    if mode:
        @cuda.jit(device=True)
        def el(p, f, r, S):
            return fi.load(p, f)
    else:
        @cuda.jit(device=True)
        def el(p, f, r, S):
            return fi.load(p, r * S)
    return el


def _make_flat_access(call, K, VEC, MODES):
    """``load_all(ins, f, r, S1, w)`` (a tuple of ``VEC``-tuples, one per operand) and
    ``elem(ins, f, r, S1)`` (``f`` of one flat element, converted to the accumulator)."""
    lds = [_make_flat_loader(MODES[k], VEC) for k in range(K)]
    els = [_make_flat_elem(MODES[k]) for k in range(K)]
    l0, e0 = lds[0], els[0]
    l1, e1 = (lds[1], els[1]) if K > 1 else (None, None)
    l2, e2 = (lds[2], els[2]) if K > 2 else (None, None)
    if K == 1:
        def load_all(ins, f, r, S1, w):
            return (l0(ins[0], f, r, S1[0], w),)

        def elem(ins, f, r, S1):
            return call(e0(ins[0], f, r, S1[0]), 0)
    elif K == 2:
        def load_all(ins, f, r, S1, w):
            return (l0(ins[0], f, r, S1[0], w), l1(ins[1], f, r, S1[1], w))

        def elem(ins, f, r, S1):
            return call(e0(ins[0], f, r, S1[0]), e1(ins[1], f, r, S1[1]), 0)
    else:
        def load_all(ins, f, r, S1, w):
            return (l0(ins[0], f, r, S1[0], w), l1(ins[1], f, r, S1[1], w),
                    l2(ins[2], f, r, S1[2], w))

        def elem(ins, f, r, S1):
            return call(e0(ins[0], f, r, S1[0]), e1(ins[1], f, r, S1[1]), e2(ins[2], f, r, S1[2]), 0)
    dev = cuda.jit(device=True)
    return dev(load_all), dev(elem)


def make_colflat_kernel(f, op, K, ACC, ID, FLAG, INIT, BLOCK, VEC, MODES, UNROLL, GROUPED=False):
    """Kernel factory: reduction across the rows of a thin C-contiguous matrix read as one flat
    run of 128-bit vectors (``x @ A`` and ``sum(A, axis=0)`` for ``A`` of shape ``(n, p)`` with
    ``VEC <= p <= BLOCK``, e.g. ``p = 10``, where a thread per column would load 40-byte rows).

    Thread ``g`` of the ``T = gridDim * BLOCK`` loads the vectors ``g, g + T, ...`` of the
    matrix, whose flat elements start at the 16-byte boundary ``aux`` (the head before it
    and the tail after the last whole vector are folded in by the last block). The host
    makes ``T * VEC`` a multiple of ``p``, so a thread's ``VEC`` lanes keep their columns
    ``(f + e) % p`` on every step and fold into ``VEC`` accumulators, with no index
    arithmetic in the loop beyond two additions. ``MODES[k]`` 1: operand ``k`` is laid out
    like the matrix (``SR == 1``, ``S1 == p``, same 16-byte phase); 0: it is indexed by the
    row only (``SR == 0``, row stride ``S1[k]``: ``x`` of ``x @ A``).

    Each block combines its ``VEC * BLOCK`` lane totals per column in shared memory
    (positions congruent modulo ``p`` share a column) into ``p`` partials; the last block to
    take the ticket combines the ``gridDim * p`` partials the same way, adds the head and
    tail, writes ``out`` and resets the ticket. ``GROUPED``: two levels instead, for many
    partials (one block reading 650 x 100 of them took ~36 dependent L2 round trips per
    thread): the last block of each group of ``chunk`` consecutive blocks (a runtime argument)
    combines its group's partials into a group row (rows ``gridDim ..`` of ``part``;
    tickets ``1 ..``), and the last group's combiner totals the group rows. The order is
    fixed by the launch shape: the same results run to run. ``FLAG`` must be False (operators with an identity) and the
    accumulator a scalar; no batch (``nb == 1``). Arguments as for :func:`make_row_kernel`.

    >>> import numpy as np
    >>> k = make_colflat_kernel(lambda a: a, lambda a, b: a + b, 1, np.dtype("float32"),
    ...                         np.float32(0), False, None, 64, 4, (1,), 2)
    >>> callable(k)
    True
    """
    if FLAG:
        raise ValueError("flat column kernel: operators without an identity are not supported")
    if BLOCK % 32:
        raise ValueError(f"flat column kernel: BLOCK must be a multiple of 32, got {BLOCK}")
    fd, opd, ID, finish = _prepare(f, op, ID, False, INIT)
    call = _make_call(fd, K, False, ID)
    _, fold, _ = _make_col_fold(call, opd, K, ID, VEC, (1,) * K)
    load_all, elem = _make_flat_access(call, K, VEC, MODES)
    bcast = _make_bcast()
    NP = VEC * BLOCK

    @cuda.jit(device=True)
    def col_part(part, m, p, G, U):
        """Total of the partials of position ``m`` (column ``m % p``): blocks ``m // p``,
        ``m // p + U``, ... of the ``G``."""
        v = ID
        if m < U * p:
            c = m % p
            q = m // p
            # eight loads in flight, then their fold in the same order as one at a time
            # (p = 100: 65 partials per position, each load an L2 round trip)
            while q + 7 * U < G:
                a0 = fi.load(part, q * p + c)
                a1 = fi.load(part, (q + U) * p + c)
                a2 = fi.load(part, (q + 2 * U) * p + c)
                a3 = fi.load(part, (q + 3 * U) * p + c)
                a4 = fi.load(part, (q + 4 * U) * p + c)
                a5 = fi.load(part, (q + 5 * U) * p + c)
                a6 = fi.load(part, (q + 6 * U) * p + c)
                a7 = fi.load(part, (q + 7 * U) * p + c)
                v = fi.cast_like(opd(v, a0), ID)
                v = fi.cast_like(opd(v, a1), ID)
                v = fi.cast_like(opd(v, a2), ID)
                v = fi.cast_like(opd(v, a3), ID)
                v = fi.cast_like(opd(v, a4), ID)
                v = fi.cast_like(opd(v, a5), ID)
                v = fi.cast_like(opd(v, a6), ID)
                v = fi.cast_like(opd(v, a7), ID)
                q += 8 * U
            while q < G:
                v = fi.cast_like(opd(v, fi.load(part, q * p + c)), ID)
                q += U
        return v

    if VEC == 2:
        @cuda.jit(device=True)
        def ids():
            return (ID, ID)

        @cuda.jit(device=True)
        def parts(part, tid, p, G, U):
            m = VEC * tid
            return (col_part(part, m, p, G, U), col_part(part, m + 1, p, G, U))
    else:
        @cuda.jit(device=True)
        def ids():
            return (ID, ID, ID, ID)

        @cuda.jit(device=True)
        def parts(part, tid, p, G, U):
            m = VEC * tid
            return (col_part(part, m, p, G, U), col_part(part, m + 1, p, G, U),
                    col_part(part, m + 2, p, G, U), col_part(part, m + 3, p, G, U))

    @cuda.jit(device=True)
    def fold_if(v, x, ok):
        if ok:
            v = fi.cast_like(opd(v, x), ID)
        return v

    # GROUPED: totals of position m over the rows lo + m // p, lo + m // p + U, ... < hi, in
    # ascending order. Row r, column c of the partials is element r * p + c, so position m's
    # rows are the elements lo * p + m + k * U * p below hi * p: a thread's VEC consecutive
    # positions go in lock step from one offset, two rows each per round trip (elements past
    # the end are clamped to the last: loaded, never folded)
    if VEC == 2:
        @cuda.jit(device=True)
        def lane_loads(part, o, L1):
            return (fi.load(part, min(o, L1)), fi.load(part, min(o + 1, L1)))

        @cuda.jit(device=True)
        def lane_folds(accs, x, m, o, D, L):
            return (fold_if(accs[0], x[0], o < L), fold_if(accs[1], x[1], m + 1 < D and o + 1 < L))
    else:
        @cuda.jit(device=True)
        def lane_loads(part, o, L1):
            return (fi.load(part, min(o, L1)), fi.load(part, min(o + 1, L1)),
                    fi.load(part, min(o + 2, L1)), fi.load(part, min(o + 3, L1)))

        @cuda.jit(device=True)
        def lane_folds(accs, x, m, o, D, L):
            return (fold_if(accs[0], x[0], o < L), fold_if(accs[1], x[1], m + 1 < D and o + 1 < L),
                    fold_if(accs[2], x[2], m + 2 < D and o + 2 < L),
                    fold_if(accs[3], x[3], m + 3 < D and o + 3 < L))

    @cuda.jit(device=True)
    def range_parts(part, tid, p, lo, hi, U):
        m = VEC * tid
        D = U * p
        L = hi * p
        L1 = L - 1
        o = lo * p + m
        accs = ids()
        while o < L and m < D:
            x0 = lane_loads(part, o, L1)
            x1 = lane_loads(part, o + D, L1)
            accs = lane_folds(accs, x0, m, o, D, L)
            accs = lane_folds(accs, x1, m, o + D, D, L)
            o += 2 * D
        return accs

    def cols_body(sh, accs, tid, p):
        """Per-column totals of the block's ``VEC * BLOCK`` values (value ``e`` of thread
        ``tid`` at position ``VEC * tid + e``; positions congruent modulo ``p`` share a
        column): returns position ``tid``'s total, valid for ``tid < p``."""
        for e in range(VEC):
            fi.store(sh, VEC * tid + e, accs[e])
        cuda.syncthreads()
        L = (BLOCK // p) * p
        v = accs[0]
        if tid < L:
            v = fi.load(sh, tid)
            m = tid + L
            while m < NP:
                v = fi.cast_like(opd(v, fi.load(sh, m)), ID)
                m += L
        cuda.syncthreads()
        if tid < L:
            fi.store(sh, tid, v)
        cuda.syncthreads()
        q = BLOCK // p
        while q > 1:                   # block-uniform: groups of p positions, halved
            hq = (q + 1) // 2
            if tid < (q - hq) * p:
                fi.store(sh, tid, fi.cast_like(opd(fi.load(sh, tid), fi.load(sh, tid + hq * p)), ID))
            cuda.syncthreads()
            q = hq
        v = fi.load(sh, tid)
        cuda.syncthreads()
        return v

    cols = fi.with_shared_scratch(NP, _dtypes_of(ID), cols_body, 3)

    def colflat_kernel(ins, out, part, tick, nb, nr, m0, m1, SB, SR, S0, S1, ob, orr,
                       kb, L0, L1, chunk, aux):
        tid = cuda.threadIdx.x
        p = nr
        N = m1 * nr
        h = aux
        nvec = 0
        if N > h:
            nvec = (N - h) // VEC
        G = cuda.gridDim.x
        T = G * BLOCK
        g = cuda.blockIdx.x * BLOCK + tid
        f = h + g * VEC
        r = f // p
        w = p - (f - r * p)            # lanes of a vector still in its first row
        step = T * VEC
        dr = step // p                 # rows per grid step (T * VEC is a multiple of p)
        accs = ids()
        k = g
        if UNROLL >= 4:
            while k + 3 * T < nvec:
                v0 = load_all(ins, f, r, S1, w)
                v1 = load_all(ins, f + step, r + dr, S1, w)
                v2 = load_all(ins, f + 2 * step, r + 2 * dr, S1, w)
                v3 = load_all(ins, f + 3 * step, r + 3 * dr, S1, w)
                accs = fold(v0, 0, accs)
                accs = fold(v1, 0, accs)
                accs = fold(v2, 0, accs)
                accs = fold(v3, 0, accs)
                k += 4 * T
                f += 4 * step
                r += 4 * dr
        elif UNROLL >= 2:
            while k + T < nvec:
                v0 = load_all(ins, f, r, S1, w)
                v1 = load_all(ins, f + step, r + dr, S1, w)
                accs = fold(v0, 0, accs)
                accs = fold(v1, 0, accs)
                k += 2 * T
                f += 2 * step
                r += 2 * dr
        while k < nvec:
            accs = fold(load_all(ins, f, r, S1, w), 0, accs)
            k += T
            f += step
            r += dr
        v = cols(accs, tid, p)
        if tid < p:
            c = (h + cuda.blockIdx.x * NP) % p + tid
            if c >= p:
                c -= p
            fi.store(part, cuda.blockIdx.x * p + c, v)
        fi.fence_device()
        cuda.syncthreads()
        last = 0
        if GROUPED:
            S = chunk                  # blocks per group
            grp = cuda.blockIdx.x // S
            lo = grp * S
            hi = min(lo + S, G)
            ng = (G + S - 1) // S
            if tid == 0:
                if fi.atomic_add(tick, 1 + grp, 1) == hi - lo - 1:
                    last = 1
            last = bcast(last)
            if last == 1:              # the group's last block: its group row
                fi.fence_device()
                v = cols(range_parts(part, tid, p, lo, hi, NP // p), tid, p)
                if tid < p:
                    fi.store(part, (G + grp) * p + tid, v)
                fi.fence_device()
                cuda.syncthreads()
                last = 0
                if tid == 0:
                    fi.atomic_exch(tick, 1 + grp, 0)
                    if fi.atomic_add(tick, 0, 1) == ng - 1:
                        last = 1
                last = bcast(last)
        else:
            if tid == 0:
                old = fi.atomic_add(tick, 0, 1)
                if old == G - 1:
                    last = 1
            last = bcast(last)
        if last == 1:                  # the last block (of the last group) combines the partials
            fi.fence_device()
            if GROUPED:
                v = cols(range_parts(part, tid, p, G, G + (G + chunk - 1) // chunk, NP // p), tid, p)
            else:
                v = cols(parts(part, tid, p, G, NP // p), tid, p)
            if tid < p:
                if tid < h and tid < N:          # head: flat element tid, row 0
                    v = fi.cast_like(opd(v, elem(ins, tid, 0, S1)), ID)
                e = h + nvec * VEC              # tail: fewer than VEC elements
                while e < N:
                    re = e // p
                    if e - re * p == tid:
                        v = fi.cast_like(opd(v, elem(ins, e, re, S1)), ID)
                    e += 1
                fi.store(out, tid * orr, finish(v))
            if tid == 0:
                fi.atomic_exch(tick, 0, 0)

    return colflat_kernel


