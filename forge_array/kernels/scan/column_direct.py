"""The direct column scan :func:`make_column_direct`: each thread walks one column down its rows
(many columns, few rows: no look-back).
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ... import intrinsics as fi
from .lookback import _make_converter, value_op
from .row import _make_pack


def make_column_direct(fn, tuple_op, in_dtypes, acc_dtypes, block, rows, shift, has_init,
                       vin=False, vout=False):
    """Kernel factory of the direct column scan: columns of at most ``rows`` elements (one
    chunk per column: no look-back, no ticket, no shared memory, no barrier). Each thread
    owns ``VC`` adjacent columns (``VC = VEC(in dtype)`` with ``vin``: one 128-bit load per
    row for 4 float32 columns; else 1), issues the loads of all its rows (predicated on the
    runtime ``n <= rows``) before the first add, scans them in registers and stores them
    (128-bit with ``vout``). Scalars only (the values live in a local array).

    Kernel arguments: ``src, dst, init, n, m, nbatch, nb1, s_in, b0_in, b1_in, s_out,
    b0_out, b1_out`` as :func:`make_column_scan`, then ``lead``: thread ``k`` owns columns
    ``k * VC - lead ...`` (``vin``: the host checks that column ``-lead`` would be 16-byte
    aligned, ``b1 == 1``, ``s_in % VC == 0`` and one batch dimension; ``vout`` the same for
    the output, with the output element size equal to the input's). Partial groups at the
    ends of the batch use scalar accesses.
    """
    in_dtypes = tuple(np.dtype(d) for d in in_dtypes)
    acc_dtypes = tuple(np.dtype(d) for d in acc_dtypes)
    assert len(acc_dtypes) == 1 and len(in_dtypes) == 1
    op_v = value_op(fn, tuple_op)
    conv = _make_converter(in_dtypes, acc_dtypes)
    OUT_T = acc_dtypes[0].type
    VC = fi.VEC(in_dtypes[0]) if vin else 1
    vout = bool(vout and vin and acc_dtypes[0].itemsize == in_dtypes[0].itemsize)
    R = rows
    NX = int(R * VC)
    pack = _make_pack(VC)

    @cuda.jit(device=True)
    def base(c, nbatch, nb1, b0, b1):
        if nbatch > nb1:
            r0 = c // nb1
            return r0 * b0 + (c - r0 * nb1) * b1
        return c * b1

    def column_direct(src, dst, init, n, m, nbatch, nb1, s_in, b0_in, b1_in, s_out, b0_out,
                      b1_out, lead):
        k = np.int64(cuda.blockIdx.x) * block + cuda.threadIdx.x
        c0 = k * VC - lead
        if c0 >= nbatch:
            return
        whole = vin and c0 >= 0 and c0 + VC <= nbatch
        xs = cuda.local.array(NX, OUT_T)
        # every load in flight before the first use (rows past n predicated off)
        if whole:
            for j in range(R):
                if j < n:
                    vv = fi.vload(src[0], c0 * b1_in + j * s_in)
                    for e in range(VC):
                        xs[j * VC + e] = OUT_T(vv[e])
        else:
            for e in range(VC):
                ib = base(min(max(c0 + e, 0), nbatch - 1), nbatch, nb1, b0_in, b1_in)
                for j in range(R):
                    if j < n:
                        xs[j * VC + e] = conv(fi.load(src, ib + j * s_in))[0]
        for e in range(VC):
            a = (xs[e],)
            if has_init:
                a = op_v(fi.load(init, 0), a)
                xs[e] = a[0]
            for j in range(1, R):
                if j < n:
                    a = op_v(a, (xs[j * VC + e],))
                    xs[j * VC + e] = a[0]
        if vout and whole:
            for j in range(R):
                if j < n and j + shift < m:
                    fi.vstore(dst[0], c0 * b1_out + (j + shift) * s_out, pack(xs, j * VC))
            if shift:
                for e in range(VC):
                    fi.store(dst, (c0 + e) * b1_out, fi.load(init, 0))
        else:
            for e in range(VC):
                c = c0 + e
                if c >= 0 and c < nbatch:
                    ob = base(c, nbatch, nb1, b0_out, b1_out)
                    for j in range(R):
                        if j < n and j + shift < m:
                            fi.store(dst, ob + (j + shift) * s_out, (xs[j * VC + e],))
                    if shift:
                        fi.store(dst, ob, fi.load(init, 0))

    return column_direct
