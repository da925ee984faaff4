"""The single-pass tile scan :func:`make_tile_scan`: contiguous (or strided) 1-D and batched scans
with a decoupled look-back between tiles.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ... import intrinsics as fi
from ..scan_spec import ovec_ok, vec_ok
from .lookback import (
    _ONE,
    _TWO,
    _ZERO,
    _ld_tag,
    _make_converter,
    _make_gather,
    _make_shared_vec,
    _make_vec_loader,
    _st_tag,
    make_tile_prefix,
    tagged_combine,
    tile_coords,
    value_op,
)


def make_tile_scan(fn, tuple_op, in_dtypes, acc_dtypes, block, items, shift, has_init,
                   det, vec, ovec=False, ticket="atomic", wide=True, release=False, spin_ns=0,
                   keep_items=False, lookback=4, shared_vec=False, mapfn=None, det_group=None):
    """Kernel factory of the row (tile) scan; see :mod:`forge_array.kernels.scan`.

    Kernel arguments: ``src, dst, init`` (tuples of buffers; ``init`` holds one value),
    ``n`` (scan length), ``m`` (output length along the axis), ``nb1`` (inner batch size),
    ``s_in, b0_in, b1_in, s_out, b0_out, b1_out`` (element strides: scan axis, outer and
    inner batch axes), ``lead`` (elements before the first tile's start, for 128-bit
    alignment; 0 without ``vec``), ``tpr`` (tiles per row), ``status, vals`` (tile states),
    ``counter`` (uint64: ticket and statistics), ``base`` (ticket of this launch's tile 0),
    ``epoch``, ``ntiles`` (tiles of the launch).

    ``ticket`` (how a block gets its tiles): ``"atomic"`` one tile per block, its id from
    the atomic counter (a barrier broadcasts it); ``"block"`` one tile per block, tile =
    ``blockIdx.x`` (CUB's way: no atomic, no barrier, loads start at once; relies on blocks
    being dispatched in index order); ``"persist"`` a grid of resident blocks that loop,
    thread 0 fetching the NEXT ticket at the start of a tile so that its latency hides under
    the tile's work (progress never depends on scheduling; ``ntiles + grid`` tickets per
    launch). Whatever ``ticket`` says, launches whose rows are one tile each (no look-back)
    use ``blockIdx.x`` (grid-stride for ``"persist"``). ``wide``: 16-byte status words for
    values of 5-12 bytes (else flag + slots); ``release`` / ``spin_ns``: see
    :func:`_make_status`. ``keep_items``: a scalar's items stay in registers between the two
    passes over the tile (else they are read back from shared memory). ``lookback``:
    predecessors per lane in one look-back round trip (:func:`make_tile_prefix`).

    ``vec``: 128-bit input loads (contiguous rows, ``lead`` aligns the tiles). ``ovec``:
    128-bit output stores as well (the host checks that output element ``start + k +
    shift`` is 16-byte aligned whenever input element ``start + k`` is, see
    :func:`ovec_ok`).

    ``mapfn``: a fused element-wise expression of the inputs, applied to each element as it
    is loaded (the inputs are then its leaves, any number and dtypes; with ``vec`` they
    have one item size and one 16-byte phase, and each input is read with 128-bit loads).

    ``shared_vec`` (with ``vec``, one value of the input's size, 2 or 4 per 16 bytes, a
    power-of-two number of vectors per thread): whole tiles go through shared memory as
    128-bit vectors, each thread's row of vectors rotated so that the warp-striped and the
    thread-blocked vector accesses are both conflict-free (:func:`_make_shared_vec`): the
    load transpose, both passes over a thread's items and the store transpose issue one
    ``st/ld.shared.v4`` per 16 bytes instead of ``VEC`` scalar accesses. Partial tiles keep
    the scalar layout.

    ``det_group``: ``(group, groups)`` of the deterministic group look-back
    (:func:`.lookback.make_group_lookback`) for packed status words; None: the fixed window.
    """
    in_dtypes = tuple(np.dtype(d) for d in in_dtypes)
    acc_dtypes = tuple(np.dtype(d) for d in acc_dtypes)
    K = len(acc_dtypes)
    TILE = block * items
    NW = block // fi.WARP
    WSEG = fi.WARP * items  # a warp's segment of the tile
    op_v = value_op(fn, tuple_op)
    comb = tagged_combine(op_v)
    warp_scan = fi.make_warp_scan(comb)
    conv = _make_converter(in_dtypes, acc_dtypes, mapfn)
    assert ticket in ("atomic", "block", "persist"), ticket
    MAPPED = mapfn is not None
    VEC = fi.VEC(in_dtypes[0]) if vec else 1
    RV = items // VEC
    SV = bool(shared_vec and vec and K == 1 and (len(in_dtypes) == 1 or MAPPED) and VEC >= 2
              and all(d.itemsize == acc_dtypes[0].itemsize for d in in_dtypes)
              and items % VEC == 0 and RV & (RV - 1) == 0 and not keep_items)
    TS = TILE + TILE // 32  # padded tile (whole tiles of shared_vec: rotated rows, unpadded),
    # then NW warp totals, then the tile prefix
    NVALS = TS + NW + 1
    NKINDS = NW + 2  # kinds of the warp totals and the prefix, then the tile id
    NV = items // VEC
    OUT_T = acc_dtypes[0].type
    IN_T = OUT_T if MAPPED else in_dtypes[0].type  # the type of a vector load's values
    REG = K == 1  # a scalar accumulator: strided loads land in registers first
    # keep_items: a scalar's items also stay in registers from the first pass to the second
    # (16 fewer shared loads per thread, but 16+ more registers live across the look-back:
    # 64 instead of 48 for float32 x 16, 72 instead of 56 for float64 x 8; ptxas -v)
    KEEP = REG and keep_items
    ovec = bool(ovec and vec and ovec_ok(in_dtypes, acc_dtypes, items, MAPPED))
    VO = fi.VEC(acc_dtypes[0]) if ovec else 1
    NVO = items // VO
    gather = _make_gather(VO)
    assert K >= 1 and (not vec or vec_ok(in_dtypes, acc_dtypes, block, items, MAPPED))
    vload_in = _make_vec_loader(in_dtypes, acc_dtypes, mapfn, VEC)

    if KEEP:
        @cuda.jit(device=True)
        def item(sh, xr, kb, j):
            return (xr[j],)

        @cuda.jit(device=True)
        def keep(sh, xr, kb, j):
            k = kb + j
            xr[j] = fi.load(sh, k + (k >> 5))[0]
    else:
        @cuda.jit(device=True)
        def item(sh, xr, kb, j):
            k = kb + j
            return fi.load(sh, k + (k >> 5))

        @cuda.jit(device=True)
        def keep(sh, xr, kb, j):
            pass

    tile_prefix = make_tile_prefix(acc_dtypes, comb, det, wide, release, spin_ns, NW, TS, lookback,
                                   det_group)
    vpos, at, vconv, vfirst, vstep = _make_shared_vec(op_v, items, VEC, OUT_T, SV)

    @cuda.jit(device=True)
    def tile(sk, sh, t, src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out, b1_out,
             lead, tpr, status, vals, counter, epoch, ntiles):
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        ti, r0, r1 = tile_coords(t, tpr, nb1, ntiles)
        ib = r0 * b0_in + r1 * b1_in
        ob = r0 * b0_out + r1 * b1_out
        start = ti * TILE - lead
        full = start >= 0 and start + TILE <= n
        wseg = warp * WSEG
        # ---- warp-striped coalesced loads into the warp's part of shared memory, converted
        # to the accumulator type (CUB's BLOCK_LOAD_WARP_TRANSPOSE; padded against bank
        # conflicts); only the warp reads them back, so a warp barrier suffices
        fullv = SV and full  # this tile in the vector layout of shared memory
        if vec and full:
            xin = cuda.local.array(items, IN_T)  # every load in flight before the first use
            for j in range(NV):
                vv = vload_in(src, ib + start + wseg + (j * 32 + lane) * VEC)
                for e in range(VEC):
                    xin[j * VEC + e] = vv[e]
            for j in range(NV):
                q = wseg + (j * 32 + lane) * VEC
                if SV:
                    fi.vstore_shared(sh[0], vpos(q), vconv(xin, j * VEC))
                else:
                    q += q >> 5  # VEC divides 32: the VEC elements share one padding offset
                    for e in range(VEC):
                        fi.store(sh, q + e, (OUT_T(xin[j * VEC + e]),))
        elif vec:
            for j in range(NV):
                k = wseg + (j * 32 + lane) * VEC
                L = start + k
                if L >= 0 and L + VEC <= n:
                    vv = vload_in(src, ib + L)
                    for e in range(VEC):
                        q = k + e
                        fi.store(sh, q + (q >> 5), (OUT_T(vv[e]),))
                else:
                    for e in range(VEC):
                        q = k + e
                        Lq = min(max(L + e, 0), n - 1)
                        fi.store(sh, q + (q >> 5), conv(fi.load(src, ib + Lq)))
        elif REG:
            xs = cuda.local.array(items, OUT_T)  # every load in flight before the first use
            for j in range(items):
                L = min(max(start + wseg + j * 32 + lane, 0), n - 1)
                xs[j] = conv(fi.load(src, ib + L * s_in))[0]
            for j in range(items):
                k = wseg + j * 32 + lane
                fi.store(sh, k + (k >> 5), (xs[j],))
        else:
            for j in range(items):
                k = wseg + j * 32 + lane
                L = min(max(start + k, 0), n - 1)
                fi.store(sh, k + (k >> 5), conv(fi.load(src, ib + L * s_in)))
        fi.syncwarp()
        # ---- thread reduce over its `items` consecutive elements (blocked), kept in
        # registers for the second pass when the value is a scalar
        kb = tid * items
        xr = cuda.local.array(items, OUT_T)
        for j in range(items):
            keep(sh, xr, kb, j)
        if SV:
            x0 = fi.load(sh, at(kb, fullv))
        else:
            x0 = item(sh, xr, kb, 0)
        empty = (_ZERO,) + x0
        if fullv:
            a = x0
            for i in range(NV):
                v = fi.vload_shared(sh[0], vpos(kb + i * VEC))
                for e in range(VEC):
                    if i > 0 or e > 0:
                        a = op_v(a, (v[e],))
            agg = (_ONE,) + a
        elif full:
            a = x0
            for j in range(1, items):
                a = op_v(a, item(sh, xr, kb, j))
            agg = (_ONE,) + a
        else:
            agg = empty
            for j in range(items):
                L = start + kb + j
                if L >= 0 and L < n:
                    agg = comb(agg, (_ONE,) + item(sh, xr, kb, j))
        # ---- block scan of the thread aggregates (exclusive per thread + block total)
        inc = warp_scan(agg)
        up = fi.shfl_up(inc, 1)
        if lane == 31:
            _st_tag(sk, warp, sh, TS + warp, inc)
        cuda.syncthreads()
        wp = empty
        tot = empty
        for w in range(NW):
            v = _ld_tag(sk, w, sh, TS + w)
            if w < warp:
                wp = comb(wp, v)
            tot = comb(tot, v)
        texcl = wp
        if lane > 0:
            texcl = comb(wp, up)
        # ---- tile prefix: decoupled look-back by warp 0 while the others wait at a barrier
        if has_init:
            init_t = (_TWO,) + fi.load(init, 0)
        else:
            init_t = empty
        pre = tile_prefix(sk, sh, t, ti, tpr, tot, status, vals, counter, epoch, init_t, empty)
        # ---- second pass: running values back into the thread's slots of shared memory
        run = comb(pre, texcl)
        if fullv:
            r, w = vfirst(run, fi.vload_shared(sh[0], vpos(kb)))
            fi.vstore_shared(sh[0], vpos(kb), w)
            for i in range(1, NV):
                kv = vpos(kb + i * VEC)
                r, w = vstep(r, fi.vload_shared(sh[0], kv))
                fi.vstore_shared(sh[0], kv, w)
        elif full:
            r = x0
            if run[0] != 0:
                r = op_v(run[1:], x0)
            fi.store(sh, kb + (kb >> 5), r)
            for j in range(1, items):
                k = kb + j
                r = op_v(r, item(sh, xr, kb, j))
                fi.store(sh, k + (k >> 5), r)
        else:
            for j in range(items):
                k = kb + j
                L = start + k
                if L >= 0 and L < n:
                    run = comb(run, (_ONE,) + item(sh, xr, kb, j))
                    fi.store(sh, k + (k >> 5), run[1:])
        fi.syncwarp()
        # ---- warp-striped coalesced stores (shifted by one for include_initial / exclusive):
        # 128-bit when the output tile is aligned and whole
        if ovec and full and start + TILE + shift <= m:
            for j in range(NVO):
                k = wseg + (j * 32 + lane) * VO
                if SV:
                    fi.vstore(dst[0], ob + start + k + shift, fi.vload_shared(sh[0], vpos(k)))
                else:
                    fi.vstore(dst[0], ob + start + k + shift, gather(sh, k))
        else:
            for j in range(items):
                k = wseg + j * 32 + lane
                L = start + k
                P = L + shift
                if L >= 0 and L < n and P < m:
                    fi.store(dst, ob + P * s_out, fi.load(sh, at(k, fullv)))
        if shift and ti == 0 and tid == 0:
            fi.store(dst, ob, fi.load(init, 0))

    def body(sk, sh, src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out, b1_out,
             lead, tpr, status, vals, counter, base, epoch, ntiles):
        tid = cuda.threadIdx.x
        # rows of one tile have no look-back, so their tiles need no ticket
        if tpr == 1 or ticket == "block":
            t = np.int64(cuda.blockIdx.x)
        else:
            if tid == 0:
                sk[NW + 1] = np.int64(fi.atomic_add(counter, 0, np.uint64(1))) - base
            cuda.syncthreads()
            t = sk[NW + 1]
        if ticket != "persist":
            tile(sk, sh, t, src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out,
                 b1_out, lead, tpr, status, vals, counter, epoch, ntiles)
            return
        while t < ntiles:
            nxt = t + np.int64(cuda.gridDim.x)
            if tpr != 1 and tid == 0:  # the next ticket, fetched now, needed after this tile
                nxt = np.int64(fi.atomic_add(counter, 0, np.uint64(1))) - base
            tile(sk, sh, t, src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out,
                 b1_out, lead, tpr, status, vals, counter, epoch, ntiles)
            if tid == 0:  # every thread read sk[NW + 1] before the tile's first barrier
                sk[NW + 1] = nxt
            cuda.syncthreads()  # also: shared memory is reused by the next tile
            t = sk[NW + 1]

    inner = fi.with_shared_scratch(NKINDS, np.int64, cuda.jit(device=True)(body), nargs=21)
    outer = fi.with_shared_scratch(NVALS, acc_dtypes, inner, nargs=20)

    def tile_scan(src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out, b1_out,
                  lead, tpr, status, vals, counter, base, epoch, ntiles):
        outer(src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out, b1_out,
              lead, tpr, status, vals, counter, base, epoch, ntiles)

    return tile_scan


