"""The staged short-row kernel :func:`make_rowtile_kernel`: tiles of whole rows staged into
shared memory with 128-bit loads, groups of lanes reducing a row each.
"""
from __future__ import annotations

from numba import cuda

from ... import intrinsics as fi
from ..staging import make_tile_loader
from .common import _make_call, _make_group_reduce, _make_offsets, _prepare

# --------------------------------------------------------------------------- staged short-row kernel


def _make_stage(load_tile, k, ks, mode):
    """``(s, so, ins, start, n, aux, tid)``: stages operand ``k`` into scratch ``s[ks]`` at
    ``so`` (``mode`` 1) or does nothing (``mode`` 0: the operand is read from global memory)."""
    if mode:
        @cuda.jit(device=True)
        def stage(s, so, ins, start, n, aux, tid):
            load_tile(s[ks], so, ins[k], start, n, (aux >> (4 * k)) & 15, tid)
    else:
        @cuda.jit(device=True)
        def stage(s, so, ins, start, n, aux, tid):
            pass
    return stage


def _make_get(k, ks, mode):
    """``(s, ins, e, o, po) -> value``: element ``e`` of the staged tile (``mode`` 1; shifted
    by the operand's 4-bit phase in ``po``) or the global element at offset ``o`` (``mode`` 0)."""
    if mode:
        @cuda.jit(device=True)
        def get(s, ins, e, o, po):
            return fi.load(s[ks], e + ((po >> (4 * k)) & 15))
    else:
        @cuda.jit(device=True)
        def get(s, ins, e, o, po):
            return fi.load(ins[k], o)
    return get


def _make_vget(k, ks, mode):
    """``(s, ins, e, o) -> VEC-tuple``: the 128-bit vector of the staged tile at element ``e``
    (``mode`` 1, ``ld.shared.v4``) or of the global operand at offset ``o`` (``mode`` 0); both
    16-byte aligned."""
    if mode:
        @cuda.jit(device=True)
        def vget(s, ins, e, o):
            return fi.vload_shared(s[ks], e)
    else:
        @cuda.jit(device=True)
        def vget(s, ins, e, o):
            return fi.vload(ins[k], o)
    return vget


def _make_vfold(call, opd, K, ID, VEC, sidx, MODES):
    """``(acc, s, ins, e, xo, kidx, L1) -> acc`` folding the ``VEC`` elements of a row from
    element ``e`` of the staged tile (operands read from global memory: at offsets ``xo``)
    into ``acc``, every operand read as one 128-bit vector."""
    g0 = _make_vget(0, sidx[0], MODES[0])
    if K == 1:
        @cuda.jit(device=True)
        def vfold(acc, s, ins, e, xo, kidx, L1):
            a = g0(s, ins, e, xo[0])
            for q in range(VEC):
                acc = fi.cast_like(opd(acc, call(a[q], kidx + q * L1)), ID)
            return acc
    elif K == 2:
        g1 = _make_vget(1, sidx[1], MODES[1])

        @cuda.jit(device=True)
        def vfold(acc, s, ins, e, xo, kidx, L1):
            a = g0(s, ins, e, xo[0])
            x = g1(s, ins, e, xo[1])
            for q in range(VEC):
                acc = fi.cast_like(opd(acc, call(a[q], x[q], kidx + q * L1)), ID)
            return acc
    else:
        g1 = _make_vget(1, sidx[1], MODES[1])
        g2 = _make_vget(2, sidx[2], MODES[2])

        @cuda.jit(device=True)
        def vfold(acc, s, ins, e, xo, kidx, L1):
            a = g0(s, ins, e, xo[0])
            x = g1(s, ins, e, xo[1])
            y = g2(s, ins, e, xo[2])
            for q in range(VEC):
                acc = fi.cast_like(opd(acc, call(a[q], x[q], y[q], kidx + q * L1)), ID)
            return acc
    return vfold


def _make_hold(G, VEC, RV, zero):
    """``(ins, l, J) -> tuple``: the ``RV`` 128-bit vectors ``l, l + G, ...`` of operand 1 (a
    row every row of the launch shares, 16-byte aligned) that lane ``l`` of a group folds,
    held in registers for the whole kernel; vectors past the row's ``J`` elements are
    ``zero`` (never read). ``RV`` 0: no vectors held."""
    @cuda.jit(device=True)
    def one(ins, l, m, J):
        c = (l + m * G) * VEC
        if c < J:
            return fi.vload(ins[1], c)
        return zero

    if RV == 0:
        @cuda.jit(device=True)
        def hold(ins, l, J):
            return 0
    elif RV == 1:
        @cuda.jit(device=True)
        def hold(ins, l, J):
            return (one(ins, l, 0, J),)
    elif RV == 2:
        @cuda.jit(device=True)
        def hold(ins, l, J):
            return (one(ins, l, 0, J), one(ins, l, 1, J))
    elif RV == 4:
        @cuda.jit(device=True)
        def hold(ins, l, J):
            return (one(ins, l, 0, J), one(ins, l, 1, J), one(ins, l, 2, J), one(ins, l, 3, J))
    elif RV == 8:
        @cuda.jit(device=True)
        def hold(ins, l, J):
            return (one(ins, l, 0, J), one(ins, l, 1, J), one(ins, l, 2, J), one(ins, l, 3, J),
                    one(ins, l, 4, J), one(ins, l, 5, J), one(ins, l, 6, J), one(ins, l, 7, J))
    else:
        raise ValueError(f"vectors held per lane: 0, 1, 2, 4 or 8, got {RV}")
    return hold


def make_rowtile_kernel(f, op, K, ACC, ID, FLAG, INIT, G, BLOCK, INDEX, VEC, MODES, DTS, TV, WARP=False,
                        V4=False, WIDE=False, ACCS=1, VROW=False, RV=0):
    """Kernel factory: reduction along short contiguous rows (``J`` of a few to a few hundred
    elements, e.g. ``A @ x`` or ``sum(axis=1)`` of a (10^7, 10) matrix) with coalesced
    128-bit loads.

    The rows of every staged operand (``MODES[k] == 1``: dtype ``DTS[k]``, rows contiguous and
    adjacent, ``S1 == 1``, ``SR == J``, ``SB == nr * J``) form one contiguous run of
    ``R * J`` elements. A block copies a tile of ``RT = min(TILE // J, BLOCK // G)`` whole
    rows (``TILE = TV * BLOCK * VEC`` elements: ``TV`` 16-byte vectors per thread, 16 KiB per
    operand for ``TV = 4``, ``BLOCK = 256``) into shared memory with 128-bit loads, then
    groups of ``G`` lanes reduce one row each from shared memory (``G = 1``: a thread per
    row) and combine by ``shfl_down``. Operands with ``MODES[k] == 0``
    are read from global memory at ``b * SB + j * S1`` (``x`` of ``A @ x``: a few hundred
    bytes, cached). ``aux`` packs the 16-byte phase (in elements) of each staged operand's
    origin, 4 bits per operand. Other parameters as for :func:`make_row_kernel`.

    ``WARP``: every warp works alone on its own tiles of ``RT = TW // J`` rows (``TW = TV * 32
    * VEC`` elements, its slice of the block's shared memory), synchronised by ``syncwarp``
    only: no block barrier couples the warps, so while one warp reduces its tile from shared
    memory the others' loads are in flight. Groups of ``G`` lanes take the tile's rows in
    rounds of ``32 // G``.

    ``V4`` (with ``WARP``): tiles laid out from the 16-byte boundary in shared memory (each
    warp's slice ``TW + VEC`` elements), stored with ``st.shared.v4`` (see
    :func:`.staging.make_tile_loader` with ``V4``); reads shift by the tile's phase.

    ``WIDE``: eight 128-bit loads in flight per lane while staging instead of four (tiles of
    ``TV >= 8`` vectors per lane).

    ``ACCS`` (1, 2 or 4): a lane folds its elements of a row into that many partial results
    (elements ``j, j + G, ..., j + (ACCS - 1) * G`` of a round into separate accumulators,
    combined at the end), so that the loads of a round are in flight together and the
    operator's latency is not one chain per row (the reduction is commutative, as the lanes
    of a group already fold interleaved elements).

    ``VROW``: lanes read whole 128-bit vectors of a row (lane ``l`` of a group the vectors
    ``l, l + G, ...``), one ``ld.shared.v4`` per staged operand and one 128-bit global load
    per other operand for ``VEC`` elements, instead of a load per element and operand.
    Requires rows of a multiple of ``VEC`` elements, every staged operand's origin 16-byte
    aligned (``aux == 0``: every tile and row then starts on a 16-byte boundary) and every
    operand read from global memory contiguous along the row (``S1 == 1``) from a 16-byte
    aligned address, with batch strides of whole vectors. ``G`` of 8 makes a quarter-warp's
    vectors one contiguous 128 bytes (no bank conflicts).

    ``RV`` (with ``VROW``, two operands, operand 1 read from global memory and the same for
    every row: ``x`` of ``A @ x``): each lane loads its ``RV`` vectors of operand 1 once
    and holds them in registers for the whole kernel (rows of at most ``RV * G * VEC``
    elements), so a vector of a row costs one shared load.

    >>> import numpy as np
    >>> k = make_rowtile_kernel(lambda a: a, lambda a, b: a + b, 1, np.dtype("float32"),
    ...                         np.float32(0), False, None, 1, 64, False, 4, (1,),
    ...                         (np.dtype("float32"),), 2)
    >>> callable(k)
    True
    """
    if ACCS not in (1, 2, 4):
        raise ValueError(f"partial results per lane: 1, 2 or 4, got {ACCS}")
    if RV and not (VROW and K == 2 and tuple(MODES) == (1, 0)):
        raise ValueError("vectors held in registers need VROW and operands (staged, global)")
    fd, opd, ID, finish = _prepare(f, op, ID, FLAG, INIT)
    call = _make_call(fd, K, INDEX, ID, FLAG)
    group_reduce = _make_group_reduce(opd, G, ID)
    TILE = TV * BLOCK * VEC
    TW = TV * 32 * VEC        # elements per warp tile (WARP)
    NG = 32 // G              # row groups per warp
    WPB = BLOCK // 32         # warps per block
    V4 = bool(V4 and WARP)
    TWS = TW + VEC if V4 else TW   # shared elements per warp slice
    load_tile = make_tile_loader(32 if WARP else BLOCK, VEC, V4, WIDE)
    sdts = tuple(DTS[k] for k in range(K) if MODES[k])
    sidx = []
    n = 0
    for k in range(K):
        sidx.append(n)
        n += MODES[k]
    st0 = _make_stage(load_tile, 0, sidx[0], MODES[0])
    gt0 = _make_get(0, sidx[0], MODES[0])
    st1 = _make_stage(load_tile, 1, sidx[1], MODES[1]) if K > 1 else None
    gt1 = _make_get(1, sidx[1], MODES[1]) if K > 1 else None
    st2 = _make_stage(load_tile, 2, sidx[2], MODES[2]) if K > 2 else None
    gt2 = _make_get(2, sidx[2], MODES[2]) if K > 2 else None

    if K == 1:
        @cuda.jit(device=True)
        def stage_all(s, so, ins, start, n, aux, tid):
            st0(s, so, ins, start, n, aux, tid)

        @cuda.jit(device=True)
        def value(s, ins, e, xo, kidx, po):
            return call(gt0(s, ins, e, xo[0], po), kidx)
    elif K == 2:
        @cuda.jit(device=True)
        def stage_all(s, so, ins, start, n, aux, tid):
            st0(s, so, ins, start, n, aux, tid)
            st1(s, so, ins, start, n, aux, tid)

        @cuda.jit(device=True)
        def value(s, ins, e, xo, kidx, po):
            return call(gt0(s, ins, e, xo[0], po), gt1(s, ins, e, xo[1], po), kidx)
    else:
        @cuda.jit(device=True)
        def stage_all(s, so, ins, start, n, aux, tid):
            st0(s, so, ins, start, n, aux, tid)
            st1(s, so, ins, start, n, aux, tid)
            st2(s, so, ins, start, n, aux, tid)

        @cuda.jit(device=True)
        def value(s, ins, e, xo, kidx, po):
            return call(gt0(s, ins, e, xo[0], po), gt1(s, ins, e, xo[1], po), gt2(s, ins, e, xo[2], po), kidx)

    _, bases, _ = _make_offsets(K)
    offs, _, _ = _make_offsets(K)
    vfold = _make_vfold(call, opd, K, ID, VEC, sidx, MODES) if VROW else None

    @cuda.jit(device=True)
    def elem(s, ins, e, xb, S1, kb, L1, j, po):
        return value(s, ins, e + j, offs(xb, S1, j), kb + j * L1, po)

    @cuda.jit(device=True)
    def row_total(s, ins, e, b, SB, S1, kb, L1, j, J, po, xs):
        """Fold of this lane's elements ``j, j + G, ...`` of the staged row at ``e``."""
        acc = ID
        xb = bases(b, 0, SB, SB)   # broadcast operands: batch b, element j at j * S1
        if ACCS == 4:
            a1 = ID
            a2 = ID
            a3 = ID
            while j + 3 * G < J:
                v0 = elem(s, ins, e, xb, S1, kb, L1, j, po)
                v1 = elem(s, ins, e, xb, S1, kb, L1, j + G, po)
                v2 = elem(s, ins, e, xb, S1, kb, L1, j + 2 * G, po)
                v3 = elem(s, ins, e, xb, S1, kb, L1, j + 3 * G, po)
                acc = fi.cast_like(opd(acc, v0), ID)
                a1 = fi.cast_like(opd(a1, v1), ID)
                a2 = fi.cast_like(opd(a2, v2), ID)
                a3 = fi.cast_like(opd(a3, v3), ID)
                j += 4 * G
            acc = fi.cast_like(opd(opd(acc, a1), opd(a2, a3)), ID)
        elif ACCS == 2:
            a1 = ID
            while j + G < J:
                v0 = elem(s, ins, e, xb, S1, kb, L1, j, po)
                v1 = elem(s, ins, e, xb, S1, kb, L1, j + G, po)
                acc = fi.cast_like(opd(acc, v0), ID)
                a1 = fi.cast_like(opd(a1, v1), ID)
                j += 2 * G
            acc = fi.cast_like(opd(acc, a1), ID)
        while j < J:
            acc = fi.cast_like(opd(acc, elem(s, ins, e, xb, S1, kb, L1, j, po)), ID)
            j += G
        return acc

    GV = G * VEC   # elements a group's lanes take in one step (VROW)

    @cuda.jit(device=True)
    def row_total_vec(s, ins, e, b, SB, S1, kb, L1, j, J, po, xs):
        """Fold of this lane's vectors ``j, j + G, ...`` of the staged row at ``e`` (``VROW``)."""
        acc = ID
        xb = bases(b, 0, SB, SB)
        c = j * VEC
        if ACCS >= 2:
            a1 = ID
            while c + GV < J:
                acc = vfold(acc, s, ins, e + c, offs(xb, S1, c), kb + c * L1, L1)
                a1 = vfold(a1, s, ins, e + c + GV, offs(xb, S1, c + GV), kb + (c + GV) * L1, L1)
                c += 2 * GV
            acc = fi.cast_like(opd(acc, a1), ID)
        while c < J:
            acc = vfold(acc, s, ins, e + c, offs(xb, S1, c), kb + c * L1, L1)
            c += GV
        return acc

    @cuda.jit(device=True)
    def row_total_held(s, ins, e, b, SB, S1, kb, L1, j, J, po, xs):
        """Fold of this lane's vectors ``j, j + G, ...`` of the staged row at ``e`` with
        operand 1's vectors ``xs`` held in registers (``RV``)."""
        acc = ID
        for m in range(RV):
            c = (j + m * G) * VEC
            if c < J:
                a = fi.vload_shared(s[0], e + c)
                x = xs[m]
                for q in range(VEC):
                    acc = fi.cast_like(opd(acc, call(a[q], x[q], kb + (c + q) * L1)), ID)
        return acc

    row_fold = row_total_held if RV else row_total_vec if VROW else row_total
    hold = _make_hold(G, VEC, RV, tuple(DTS[0].type(0) for _ in range(VEC)) if RV else None)

    def body(s, ins, out, nb, nr, m1, SB, S1, ob, orr, kb, L1, aux):
        tid = cuda.threadIdx.x
        R = nb * nr
        J = m1
        RT = TILE // J
        if RT > BLOCK // G:
            RT = BLOCK // G
        rl = tid // G
        l = tid - rl * G
        xs = hold(ins, l, J)
        tiles = (R + RT - 1) // RT
        t = cuda.blockIdx.x
        while t < tiles:               # block-uniform
            r0 = t * RT
            nrows = R - r0
            if nrows > RT:
                nrows = RT
            stage_all(s, 0, ins, r0 * J, nrows * J, aux, tid)
            cuda.syncthreads()
            r = r0 + rl
            acc = ID
            b = 0
            i = r
            if rl < nrows:
                if nb > 1:
                    b = r // nr
                    i = r - b * nr
                acc = row_fold(s, ins, rl * J, b, SB, S1, kb, L1, l, J, 0, xs)
            if G > 1:
                acc = group_reduce(acc)
            if l == 0 and rl < nrows:
                fi.store(out, b * ob + i * orr, finish(acc))
            cuda.syncthreads()
            t += cuda.gridDim.x

    def body_warp(s, ins, out, nb, nr, m1, SB, S1, ob, orr, kb, L1, aux):
        tid = cuda.threadIdx.x
        lane = tid % 32
        wib = tid // 32
        so = wib * TWS
        R = nb * nr
        J = m1
        RT = TW // J
        grp = lane // G
        l = lane - grp * G
        xs = hold(ins, l, J)
        tiles = (R + RT - 1) // RT
        t = cuda.blockIdx.x * WPB + wib
        step = cuda.gridDim.x * WPB
        while t < tiles:               # warp-uniform
            r0 = t * RT
            nrows = R - r0
            if nrows > RT:
                nrows = RT
            stage_all(s, so, ins, r0 * J, nrows * J, aux, lane)
            po = 0
            if V4:   # per staged operand: (origin phase + tile start) % VEC, 4 bits each
                st = r0 * J
                po = (((aux & 15) + st) % VEC) | (((((aux >> 4) & 15) + st) % VEC) << 4) | (
                    ((((aux >> 8) & 15) + st) % VEC) << 8)
            fi.syncwarp()
            rb = 0
            while rb < nrows:          # warp-uniform: rounds of NG rows
                rl = rb + grp
                r = r0 + rl
                acc = ID
                b = 0
                i = r
                if rl < nrows:
                    if nb > 1:
                        b = r // nr
                        i = r - b * nr
                    acc = row_fold(s, ins, so + rl * J, b, SB, S1, kb, L1, l, J, po, xs)
                if G > 1:
                    acc = group_reduce(acc)
                if l == 0 and rl < nrows:
                    fi.store(out, b * ob + i * orr, finish(acc))
                rb += NG
            fi.syncwarp()
            t += step

    run = fi.with_shared_scratch(TILE + (WPB * VEC if V4 else 0), sdts, body_warp if WARP else body, 12)

    def rowtile_kernel(ins, out, part, tick, nb, nr, m0, m1, SB, SR, S0, S1, ob, orr,
                       kb, L0, L1, chunk, aux):
        run(ins, out, nb, nr, m1, SB, S1, ob, orr, kb, L1, aux)

    return rowtile_kernel
