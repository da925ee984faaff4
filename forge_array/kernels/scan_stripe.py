"""Striped single-pass scan: the decoupled look-back scan of contiguous rows of scalars,
with every element in registers from its 128-bit load to its 128-bit store.

:func:`..scan.make_tile_scan` goes through shared memory twice per element (CUB's
BLOCK_LOAD_WARP_TRANSPOSE so that each thread owns consecutive items, then back for the
coalesced stores): about five shared-memory accesses and their address arithmetic per
element, and a padded tile in shared memory that caps the blocks per SM. Here nothing is
transposed. A warp's segment of the tile is ``NV = items / VEC`` *vector rows* of
``32 * VEC`` consecutive elements (VEC per 128-bit access); lane ``l`` holds elements
``l * VEC ... l * VEC + VEC - 1`` of every row, exactly as it loaded them. Per row:

1. the lane's VEC elements are scanned in registers (VEC - 1 operations);
2. a warp scan (5 shuffles) of the lane totals gives each lane the row's prefix before it
   (``shfl_up`` by one), and ``shfl_idx(31)`` the row total;
3. a running *carry* over the rows of the segment makes ``pres[j]``, the exclusive prefix
   of lane ``l``'s vector ``j`` inside the warp's segment (one register per row).

Then warp totals go through shared memory (one barrier), warp 0 finds the tile's prefix by
the decoupled look-back of :func:`..scan.make_tile_prefix` (same status words, tickets and
epochs as the tile scan; one more barrier), and each element gets ``op(P ⊕ pres[j], x)``
with ``P`` the tile prefix ⊕ the warps before it: one operation per element, then 128-bit
stores straight from registers. Float32 sum with 32 items per thread: ~3 operations and
~1.6 shuffles per element, no shared-memory traffic for data, ~0.3 KB of shared memory per
block.

Partial tiles (the first and last of a row, when the row is not a multiple of the tile or
not aligned) take a tagged path (``(kind, value)``, EMPTY for elements outside the row)
with scalar loads and stores; it is correct for any operator without an identity.

Only for scalar operators on one input whose rows are contiguous (unit stride, the host
aligns tiles to 16 bytes with ``lead``), with ticket ``"atomic"`` or ``"block"``; the
host takes :func:`..scan.make_tile_scan` otherwise. Kernel arguments are those of
:func:`..scan.make_tile_scan` (``s_in`` is 1 and unused).

Example (the public way in is :func:`forge_array.primitives.cumulative_sum`):

>>> from forge_array import ops
>>> k = make_stripe_scan(ops.add.fn, "float32", "float32", 64, 8, 0, False, False, True)
>>> callable(k)
True
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .. import intrinsics as fi
from .scan import (
    _ONE,
    _TWO,
    _ZERO,
    _ld_tag,
    _make_converter,
    _make_pack,
    _st_tag,
    make_tile_prefix,
    tagged_combine,
    tile_coords,
    value_op,
)

__all__ = ["make_stripe_scan", "stripe_ok"]


def stripe_ok(in_dtype, acc_dtype, items) -> bool:
    """Whether the striped scan takes this value type and tile: a scalar input of < 16
    bytes and ``items`` a positive multiple of its 128-bit vector width.

    >>> stripe_ok("float32", "float32", 16), stripe_ok("float32", "float32", 6)
    (True, False)
    >>> stripe_ok("int8", "int64", 16), stripe_ok("complex128", "complex128", 8)
    (True, False)
    """
    isz = np.dtype(in_dtype).itemsize
    return isz < 16 and items > 0 and items % (16 // isz) == 0 and np.dtype(acc_dtype).itemsize <= 16


def make_stripe_scan(fn, in_dtype, acc_dtype, block, items, shift, has_init, det, ovec,
                     ticket="atomic", wide=True, release=False, spin_ns=0, load_hint="",
                     store_hint="", lookback=4):
    """Kernel factory of the striped scan; see the module docstring.

    ``fn``: a scalar associative operator; ``items`` per thread (a multiple of the input's
    128-bit vector width, :func:`stripe_ok`); ``ovec``: 128-bit output stores (the host
    checks that output element ``start + k + shift`` is 16-byte aligned whenever input
    element ``start + k`` is, and that both have the same size); ``ticket`` ``"atomic"``
    (tile ids from the counter) or ``"block"`` (``blockIdx.x``); ``load_hint`` /
    ``store_hint``: PTX cache qualifiers of the 128-bit accesses (e.g. ``".cs"``);
    ``lookback``: predecessors per lane in a look-back round trip (fewer registers); ``det``,
    ``wide``, ``release``, ``spin_ns`` as :func:`..scan.make_tile_scan`.
    """
    in_dt = np.dtype(in_dtype)
    acc_dt = np.dtype(acc_dtype)
    assert stripe_ok(in_dt, acc_dt, items), (in_dt, acc_dt, items)
    assert ticket in ("atomic", "block"), ticket
    acc_dtypes = (acc_dt,)
    VEC = fi.VEC(in_dt)  # elements per 128-bit load
    NV = items // VEC  # vector rows per thread
    ROW = 32 * VEC  # elements of a warp-wide vector row
    WSEG = 32 * items  # elements of a warp's segment
    TILE = block * items
    NW = block // 32
    IN_T = in_dt.type
    OUT_T = acc_dt.type
    ovec = bool(ovec and acc_dt.itemsize == in_dt.itemsize)
    op_v = value_op(fn, False)
    comb = tagged_combine(op_v)
    scan_v = fi.make_warp_scan(op_v)
    scan_t = fi.make_warp_scan(comb)
    conv = _make_converter((in_dt,), acc_dtypes)
    pack = _make_pack(VEC)
    vld = fi.vload_hinted(load_hint) if load_hint else fi.vload
    vst = fi.vstore_hinted(store_hint) if store_hint else fi.vstore
    # shared scratch: kinds [0, NW) warp totals, NW the tile prefix, NW + 1 the ticket;
    # values [0, NW) warp totals, NW the tile prefix
    tile_prefix = make_tile_prefix(acc_dtypes, comb, det, wide, release, spin_ns, NW, 0, lookback)

    @cuda.jit(device=True)
    def tile(sk, sh, t, src, dst, init, n, m, nb1, b0_in, b1_in, s_out, b0_out, b1_out, lead,
             tpr, status, vals, counter, epoch, ntiles):
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        ti, r0, r1 = tile_coords(t, tpr, nb1, ntiles)
        ib = r0 * b0_in + r1 * b1_in
        ob = r0 * b0_out + r1 * b1_out
        start = ti * TILE - lead
        full = start >= 0 and start + TILE <= n
        k0 = start + warp * WSEG + lane * VEC  # row index of the thread's first element
        xs = cuda.local.array(items, OUT_T)
        pres = cuda.local.array(NV, OUT_T)  # exclusive prefix of vector j in the segment
        pkind = cuda.local.array(NV, np.int32)  # its kind (partial tiles)
        if full:
            xin = cuda.local.array(items, IN_T)  # every load in flight before the first use
            for j in range(NV):
                vv = vld(src[0], ib + k0 + j * ROW)
                for e in range(VEC):
                    xin[j * VEC + e] = vv[e]
            for q in range(items):
                xs[q] = OUT_T(xin[q])
            carry = (xs[0],)
            for j in range(NV):
                a = (xs[j * VEC],)
                for e in range(1, VEC):
                    a = op_v(a, (xs[j * VEC + e],))
                    xs[j * VEC + e] = a[0]
                inc = scan_v(a)
                up = fi.shfl_up(inc, 1)
                row_tot = fi.shfl_idx(inc, 31)
                if j == 0:
                    pres[0] = up[0]  # lane 0 has none: see the second pass
                    carry = row_tot
                else:
                    pres[j] = carry[0]
                    if lane > 0:
                        pres[j] = op_v(carry, up)[0]
                    carry = op_v(carry, row_tot)
            wagg = (_ONE,) + carry
        else:
            for j in range(NV):
                for e in range(VEC):
                    L = min(max(k0 + j * ROW + e, 0), n - 1)
                    xs[j * VEC + e] = conv(fi.load(src, ib + L))[0]
            carry_t = (_ZERO, xs[0])
            for j in range(NV):
                a = (_ZERO, xs[j * VEC])
                for e in range(VEC):
                    L = k0 + j * ROW + e
                    if L >= 0 and L < n:
                        a = comb(a, (_ONE, xs[j * VEC + e]))
                        xs[j * VEC + e] = a[1]
                inc = scan_t(a)
                up = fi.shfl_up(inc, 1)
                row_tot = fi.shfl_idx(inc, 31)
                if lane == 0:
                    up = (_ZERO, xs[0])
                q = comb(carry_t, up)
                pkind[j] = q[0]
                pres[j] = q[1]
                carry_t = comb(carry_t, row_tot)
            wagg = carry_t
        empty = (_ZERO, xs[0])
        # ---- warp totals -> every warp's exclusive prefix and the tile total
        if lane == 0:
            _st_tag(sk, warp, sh, warp, wagg)
        cuda.syncthreads()
        wp = empty
        tot = empty
        for w in range(NW):
            v = _ld_tag(sk, w, sh, w)
            if w < warp:
                wp = comb(wp, v)
            tot = comb(tot, v)
        if has_init:
            init_t = (_TWO,) + fi.load(init, 0)
        else:
            init_t = empty
        pre = tile_prefix(sk, sh, t, ti, tpr, tot, status, vals, counter, epoch, init_t, empty)
        P = comb(pre, wp)  # everything before the warp's segment
        if full:
            for j in range(NV):
                qk = P[0]
                qv = P[1:]
                if j > 0 or lane > 0:
                    if qk != 0:
                        qv = op_v(qv, (pres[j],))
                    else:
                        qv = (pres[j],)
                    qk = _ONE
                if qk != 0:
                    for e in range(VEC):
                        xs[j * VEC + e] = op_v(qv, (xs[j * VEC + e],))[0]
            if ovec and start + TILE + shift <= m:
                for j in range(NV):
                    vst(dst[0], ob + k0 + j * ROW + shift, pack(xs, j * VEC))
            else:
                for j in range(NV):
                    for e in range(VEC):
                        Pj = k0 + j * ROW + e + shift
                        if Pj < m:
                            fi.store(dst, ob + Pj * s_out, (xs[j * VEC + e],))
        else:
            for j in range(NV):
                q = comb(P, (pkind[j], pres[j]))
                for e in range(VEC):
                    L = k0 + j * ROW + e
                    if L >= 0 and L < n and L + shift < m:
                        r = xs[j * VEC + e]
                        if q[0] != 0:
                            r = op_v(q[1:], (r,))[0]
                        fi.store(dst, ob + (L + shift) * s_out, (r,))
        if shift and ti == 0 and tid == 0:
            fi.store(dst, ob, fi.load(init, 0))

    def body(sk, sh, src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out, b1_out,
             lead, tpr, status, vals, counter, base, epoch, ntiles):
        # rows of one tile have no look-back, so their tiles need no ticket
        if tpr == 1 or ticket == "block":
            t = np.int64(cuda.blockIdx.x)
        else:
            if cuda.threadIdx.x == 0:
                sk[NW + 1] = np.int64(fi.atomic_add(counter, 0, np.uint64(1))) - base
            cuda.syncthreads()
            t = sk[NW + 1]
        tile(sk, sh, t, src, dst, init, n, m, nb1, b0_in, b1_in, s_out, b0_out, b1_out, lead,
             tpr, status, vals, counter, epoch, ntiles)

    inner = fi.with_shared_scratch(NW + 2, np.int64, cuda.jit(device=True)(body), nargs=21)
    outer = fi.with_shared_scratch(NW + 1, acc_dtypes, inner, nargs=20)

    def stripe_scan(src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out, b1_out,
                    lead, tpr, status, vals, counter, base, epoch, ntiles):
        outer(src, dst, init, n, m, nb1, s_in, b0_in, b1_in, s_out, b0_out, b1_out,
              lead, tpr, status, vals, counter, base, epoch, ntiles)

    return stripe_scan
