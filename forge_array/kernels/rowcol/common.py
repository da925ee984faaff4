"""Building blocks shared by the row and column kernels: the map call, vector apply, range and group
reductions, flags, finish and broadcast helpers.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ... import intrinsics as fi

#: largest number of input arrays a kernel takes
MAX_INPUTS = 3

_TRUE = np.bool_(True)
_FALSE = np.bool_(False)


# --------------------------------------------------------------------------- helpers


def _make_call(f, K, INDEX, ID, FLAG=False):
    """``(v_0, ..., v_{K-1}, kidx) -> f(v_0, ..., [kidx])`` converted to the type of ``ID``
    (with ``FLAG``: ``(True, value)``, ``ID`` being the flagged identity)."""
    if FLAG:
        inner = _make_call(f, K, INDEX, ID[1])
        if K == 1:
            def call(a, kidx):
                return (_TRUE, inner(a, kidx))
        elif K == 2:
            def call(a, x, kidx):
                return (_TRUE, inner(a, x, kidx))
        else:
            def call(a, x, y, kidx):
                return (_TRUE, inner(a, x, y, kidx))
        return cuda.jit(device=True)(call)
    if K == 1:
        if INDEX:
            def call(a, kidx):
                return fi.cast_like(f(a, kidx), ID)
        else:
            def call(a, kidx):
                return fi.cast_like(f(a), ID)
    elif K == 2:
        if INDEX:
            def call(a, x, kidx):
                return fi.cast_like(f(a, x, kidx), ID)
        else:
            def call(a, x, kidx):
                return fi.cast_like(f(a, x), ID)
    elif K == 3:
        if INDEX:
            def call(a, x, y, kidx):
                return fi.cast_like(f(a, x, y, kidx), ID)
        else:
            def call(a, x, y, kidx):
                return fi.cast_like(f(a, x, y), ID)
    else:
        raise ValueError(f"at most {MAX_INPUTS} input arrays, got {K}")
    return cuda.jit(device=True)(call)


def _make_apply(call, K):
    """``(ins, o, kidx) -> call(ins[0][o[0]], ..., kidx)``."""
    if K == 1:
        def apply(ins, o, kidx):
            return call(fi.load(ins[0], o[0]), kidx)
    elif K == 2:
        def apply(ins, o, kidx):
            return call(fi.load(ins[0], o[0]), fi.load(ins[1], o[1]), kidx)
    else:
        def apply(ins, o, kidx):
            return call(fi.load(ins[0], o[0]), fi.load(ins[1], o[1]), fi.load(ins[2], o[2]), kidx)
    return cuda.jit(device=True)(apply)


def _make_offsets(K):
    """``(base, S, j) -> tuple(base[k] + j * S[k])`` and ``(b, i, SB, SR)`` row bases."""
    if K == 1:
        def offs(base, S, j):
            return (base[0] + j * S[0],)

        def bases(b, i, SB, SR):
            return (b * SB[0] + i * SR[0],)

        def add2(o, j0, S0):
            return (o[0] + j0 * S0[0],)
    elif K == 2:
        def offs(base, S, j):
            return (base[0] + j * S[0], base[1] + j * S[1])

        def bases(b, i, SB, SR):
            return (b * SB[0] + i * SR[0], b * SB[1] + i * SR[1])

        def add2(o, j0, S0):
            return (o[0] + j0 * S0[0], o[1] + j0 * S0[1])
    elif K == 3:
        def offs(base, S, j):
            return (base[0] + j * S[0], base[1] + j * S[1], base[2] + j * S[2])

        def bases(b, i, SB, SR):
            return (b * SB[0] + i * SR[0], b * SB[1] + i * SR[1], b * SB[2] + i * SR[2])

        def add2(o, j0, S0):
            return (o[0] + j0 * S0[0], o[1] + j0 * S0[1], o[2] + j0 * S0[2])
    else:
        raise ValueError(f"at most {MAX_INPUTS} input arrays, got {K}")
    dev = cuda.jit(device=True)
    return dev(offs), dev(bases), dev(add2)


def _make_vapply(call, opd, K, ID, VEC):
    """``(ins, o, kidx, L1, acc) -> acc`` folding ``VEC`` consecutive elements read with
    128-bit loads at offsets ``o`` (16-byte aligned)."""
    if K == 1:
        def vapply(ins, o, kidx, L1, acc):
            a = fi.vload(ins[0], o[0])
            for e in range(VEC):
                acc = fi.cast_like(opd(acc, call(a[e], kidx + e * L1)), ID)
            return acc
    elif K == 2:
        def vapply(ins, o, kidx, L1, acc):
            a = fi.vload(ins[0], o[0])
            x = fi.vload(ins[1], o[1])
            for e in range(VEC):
                acc = fi.cast_like(opd(acc, call(a[e], x[e], kidx + e * L1)), ID)
            return acc
    else:
        def vapply(ins, o, kidx, L1, acc):
            a = fi.vload(ins[0], o[0])
            x = fi.vload(ins[1], o[1])
            y = fi.vload(ins[2], o[2])
            for e in range(VEC):
                acc = fi.cast_like(opd(acc, call(a[e], x[e], y[e], kidx + e * L1)), ID)
            return acc
    return cuda.jit(device=True)(vapply)


def _make_range_reduce(fd, opd, K, ID, FLAG, RED2, INDEX, VEC, UNROLL):
    """Device function ``(ins, base, S0, S1, m1, kb, L0, L1, lo, hi, t, T, mis, acc) ->
    acc`` folding the elements ``j = lo + t, lo + t + T, ...`` below ``hi`` of one output.

    With ``VEC > 1`` (requires ``S1[k] == 1`` for every input, no ``RED2`` and the same
    16-byte phase for every input) thread ``t`` of the ``T`` folds whole 128-bit vectors.
    """
    call = _make_call(fd, K, INDEX, ID, FLAG)
    apply = _make_apply(call, K)
    offs, _, add2 = _make_offsets(K)
    vapply = _make_vapply(call, opd, K, ID, VEC) if VEC > 1 else None

    @cuda.jit(device=True)
    def elem(ins, base, S0, S1, m1, kb, L0, L1, j):
        if RED2:
            j0 = j // m1
            j1 = j - j0 * m1
            o = add2(offs(base, S1, j1), j0, S0)
            return apply(ins, o, kb + j0 * L0 + j1 * L1)
        return apply(ins, offs(base, S1, j), kb + j * L1)

    @cuda.jit(device=True)
    def scalar_range(ins, base, S0, S1, m1, kb, L0, L1, j, hi, T, acc):
        if UNROLL >= 8:
            while j + 7 * T < hi:
                v0 = elem(ins, base, S0, S1, m1, kb, L0, L1, j)
                v1 = elem(ins, base, S0, S1, m1, kb, L0, L1, j + T)
                v2 = elem(ins, base, S0, S1, m1, kb, L0, L1, j + 2 * T)
                v3 = elem(ins, base, S0, S1, m1, kb, L0, L1, j + 3 * T)
                v4 = elem(ins, base, S0, S1, m1, kb, L0, L1, j + 4 * T)
                v5 = elem(ins, base, S0, S1, m1, kb, L0, L1, j + 5 * T)
                v6 = elem(ins, base, S0, S1, m1, kb, L0, L1, j + 6 * T)
                v7 = elem(ins, base, S0, S1, m1, kb, L0, L1, j + 7 * T)
                acc = fi.cast_like(opd(acc, v0), ID)
                acc = fi.cast_like(opd(acc, v1), ID)
                acc = fi.cast_like(opd(acc, v2), ID)
                acc = fi.cast_like(opd(acc, v3), ID)
                acc = fi.cast_like(opd(acc, v4), ID)
                acc = fi.cast_like(opd(acc, v5), ID)
                acc = fi.cast_like(opd(acc, v6), ID)
                acc = fi.cast_like(opd(acc, v7), ID)
                j += 8 * T
        if UNROLL >= 4:
            while j + 3 * T < hi:
                v0 = elem(ins, base, S0, S1, m1, kb, L0, L1, j)
                v1 = elem(ins, base, S0, S1, m1, kb, L0, L1, j + T)
                v2 = elem(ins, base, S0, S1, m1, kb, L0, L1, j + 2 * T)
                v3 = elem(ins, base, S0, S1, m1, kb, L0, L1, j + 3 * T)
                acc = fi.cast_like(opd(acc, v0), ID)
                acc = fi.cast_like(opd(acc, v1), ID)
                acc = fi.cast_like(opd(acc, v2), ID)
                acc = fi.cast_like(opd(acc, v3), ID)
                j += 4 * T
        elif UNROLL >= 2:
            while j + T < hi:
                v0 = elem(ins, base, S0, S1, m1, kb, L0, L1, j)
                v1 = elem(ins, base, S0, S1, m1, kb, L0, L1, j + T)
                acc = fi.cast_like(opd(acc, v0), ID)
                acc = fi.cast_like(opd(acc, v1), ID)
                j += 2 * T
        while j < hi:
            acc = fi.cast_like(opd(acc, elem(ins, base, S0, S1, m1, kb, L0, L1, j)), ID)
            j += T
        return acc

    if VEC <= 1:
        @cuda.jit(device=True)
        def range_reduce(ins, base, S0, S1, m1, kb, L0, L1, lo, hi, t, T, mis, acc):
            return scalar_range(ins, base, S0, S1, m1, kb, L0, L1, lo + t, hi, T, acc)

        return range_reduce

    @cuda.jit(device=True)
    def range_reduce_vec(ins, base, S0, S1, m1, kb, L0, L1, lo, hi, t, T, mis, acc):
        # first element index >= lo whose address is 16-byte aligned
        ph = (mis + base[0] + lo) % VEC
        hv = lo + (VEC - ph) % VEC
        if hv > hi:
            hv = hi
        nv = (hi - hv) // VEC
        tail = hv + nv * VEC
        j = lo + t
        while j < hv:              # head (up to VEC - 1 elements)
            acc = fi.cast_like(opd(acc, elem(ins, base, S0, S1, m1, kb, L0, L1, j)), ID)
            j += T
        q = t
        if UNROLL >= 8:            # four vectors (16 elements) in flight per thread
            while q + 3 * T < nv:
                e0 = hv + q * VEC
                e1 = e0 + T * VEC
                e2 = e1 + T * VEC
                e3 = e2 + T * VEC
                a0 = vapply(ins, offs(base, S1, e0), kb + e0 * L1, L1, ID)
                a1 = vapply(ins, offs(base, S1, e1), kb + e1 * L1, L1, ID)
                a2 = vapply(ins, offs(base, S1, e2), kb + e2 * L1, L1, ID)
                a3 = vapply(ins, offs(base, S1, e3), kb + e3 * L1, L1, ID)
                a0 = fi.cast_like(opd(a0, a1), ID)
                a2 = fi.cast_like(opd(a2, a3), ID)
                acc = fi.cast_like(opd(acc, fi.cast_like(opd(a0, a2), ID)), ID)
                q += 4 * T
        if UNROLL >= 2:            # two vectors in flight
            while q + T < nv:
                e0 = hv + q * VEC
                e1 = e0 + T * VEC
                acc = vapply(ins, offs(base, S1, e0), kb + e0 * L1, L1, acc)
                acc = vapply(ins, offs(base, S1, e1), kb + e1 * L1, L1, acc)
                q += 2 * T
        while q < nv:
            e0 = hv + q * VEC
            acc = vapply(ins, offs(base, S1, e0), kb + e0 * L1, L1, acc)
            q += T
        j = tail + t
        while j < hi:              # tail (up to VEC - 1 elements)
            acc = fi.cast_like(opd(acc, elem(ins, base, S0, S1, m1, kb, L0, L1, j)), ID)
            j += T
        return acc

    return range_reduce_vec


def _make_group_reduce(opd, G, ID):
    """``(v) -> total`` over groups of ``G`` consecutive lanes (``G`` a power of two
    <= 32), in lane order; the group's first lane gets the total. All 32 lanes call."""

    @cuda.jit(device=True)
    def group_reduce(v):
        l = fi.lane_id() % G
        d = 1
        while d < G:
            u = fi.shfl_down(v, d)
            if l + d < G:
                v = fi.cast_like(opd(v, u), ID)
            d *= 2
        return v

    return group_reduce


def _make_flagged(fd, opd, ID):
    """Wrap ``f`` / ``op`` for operators without identity: values become ``(has, v)``
    pairs whose identity is ``(False, ID)``."""
    FID = (_FALSE, ID)

    @cuda.jit(device=True)
    def op2(p, q):
        if p[0] and q[0]:
            return (_TRUE, fi.cast_like(opd(p[1], q[1]), ID))
        if p[0]:
            return p
        return q

    return op2, FID


def _make_finish(opd, ID, FLAG, INIT):
    """``(acc) -> value stored``: ``op(INIT, acc)`` when an initial value is given."""
    if INIT is None:
        @cuda.jit(device=True)
        def finish(acc):
            return acc
    elif FLAG:
        @cuda.jit(device=True)
        def finish(acc):
            if acc[0]:
                return (_TRUE, fi.cast_like(opd(INIT, acc[1]), ID))
            return (_TRUE, fi.cast_like(INIT, ID))
    else:
        @cuda.jit(device=True)
        def finish(acc):
            return fi.cast_like(opd(INIT, acc), ID)
    return finish


@cuda.jit(device=True)
def _bcast_body(s, v):
    if cuda.threadIdx.x == 0:
        s[0] = v
    cuda.syncthreads()
    r = s[0]
    cuda.syncthreads()
    return r


def _make_bcast():
    """``(v) -> thread 0's v`` on every thread of the block (all threads call)."""
    return fi.with_shared_scratch(1, "int32", _bcast_body, 1)


def _dtypes_of(ID):
    """NumPy dtype (or nested tuple of dtypes) of the identity value ``ID``."""
    if isinstance(ID, tuple):
        return tuple(_dtypes_of(v) for v in ID)
    return ID.dtype


def _prepare(f, op, ID, FLAG, INIT):
    """Device functions and the accumulator identity of a kernel specialisation."""
    fd = fi.as_device(f)
    opd0 = fi.as_device(op)
    if FLAG:
        opd, IDF = _make_flagged(fd, opd0, ID)
    else:
        opd, IDF = opd0, ID
    return fd, opd, IDF, _make_finish(opd0, ID, FLAG, INIT)


