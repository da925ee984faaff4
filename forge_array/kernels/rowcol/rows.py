"""Row kernels (reduction along the contiguous axis): :func:`make_row_kernel` and the multi-row
:func:`make_rowmulti_kernel` of ``A @ x``.
"""
from __future__ import annotations

from numba import cuda

from ... import intrinsics as fi
from .common import _dtypes_of, _make_bcast, _make_call, _make_group_reduce, _make_offsets, _make_range_reduce, _prepare

# --------------------------------------------------------------------------- row kernel


def make_row_kernel(f, op, K, ACC, ID, FLAG, INIT, G, BLOCK, SPLIT, RED2, INDEX, VEC, UNROLL):
    """Kernel factory: reduction along the contiguous axis (see :mod:`forge_array.kernels.rowcol` for
    the arguments).

    ``f``: map of ``K`` elements (+ the index with ``INDEX``); ``op``: associative
    operator; ``ACC``: accumulator dtype(s) (part of the cache key); ``ID``: identity of
    ``op`` (NumPy scalar or tuple of the ``ACC`` types); ``FLAG``: ``op`` has no identity
    (``ID`` is then any value of the type; values carry a "has a value" flag and ``out``
    / ``part`` are ``(bool buffer, value buffer(s))``); ``INIT``: None or a value combined
    once into every result (``op(INIT, total)``); ``G``: lanes per row (power of two
    <= 32) or ``BLOCK`` (blocks per row);
    ``SPLIT``: 1, or > 1 for several blocks per row (``G == BLOCK`` only; their number is
    ``ceil(J / chunk)``, a runtime value); ``RED2``: two reduction dims;
    ``VEC``: elements per 128-bit load (1: scalar loads); ``UNROLL``: loads in flight.
    """
    fd, opd, ID, finish = _prepare(f, op, ID, FLAG, INIT)
    _, bases, _ = _make_offsets(K)
    rr = _make_range_reduce(fd, opd, K, ID, FLAG, RED2, INDEX, VEC, UNROLL)

    if G <= 32:
        if SPLIT != 1 or 32 % G:
            raise ValueError("sub-warp row kernel: G must divide 32 and SPLIT be 1")
        group_reduce = _make_group_reduce(opd, G, ID)
        RPB = BLOCK // G      # rows per block
        RPW = 32 // G         # rows per warp

        def row_warp_kernel(ins, out, part, tick, nb, nr, m0, m1, SB, SR, S0, S1, ob, orr,
                            kb, L0, L1, chunk, aux):
            tid = cuda.threadIdx.x
            R = nb * nr
            J = m0 * m1
            lane = tid % 32
            l = lane % G
            wrow = cuda.blockIdx.x * RPB + (tid // 32) * RPW   # first row of this warp
            r = wrow + lane // G
            step = cuda.gridDim.x * RPB
            while wrow < R:            # warp-uniform
                acc = ID
                b = r // nr
                i = r - b * nr
                if r < R:
                    base = bases(b, i, SB, SR)
                    acc = rr(ins, base, S0, S1, m1, kb, L0, L1, 0, J, l, G, aux, acc)
                acc = group_reduce(acc)
                if l == 0 and r < R:
                    fi.store(out, b * ob + i * orr, finish(acc))
                wrow += step
                r += step

        return row_warp_kernel

    if G != BLOCK:
        raise ValueError("row kernel: G must be <= 32 or equal to BLOCK")
    block_reduce = fi.make_block_reduce(opd, BLOCK, _dtypes_of(ID))
    bcast = _make_bcast()

    def row_block_kernel(ins, out, part, tick, nb, nr, m0, m1, SB, SR, S0, S1, ob, orr,
                         kb, L0, L1, chunk, aux):
        tid = cuda.threadIdx.x
        R = nb * nr
        J = m0 * m1
        nsp = 1
        if SPLIT > 1:
            nsp = (J + chunk - 1) // chunk
        t = cuda.blockIdx.x
        nwork = R * nsp
        while t < nwork:               # block-uniform
            r = t // nsp
            s = t - r * nsp
            b = r // nr
            i = r - b * nr
            base = bases(b, i, SB, SR)
            lo = s * chunk
            hi = lo + chunk
            if hi > J:
                hi = J
            acc = rr(ins, base, S0, S1, m1, kb, L0, L1, lo, hi, tid, BLOCK, aux, ID)
            acc = block_reduce(acc)
            if SPLIT == 1:
                if tid == 0:
                    fi.store(out, b * ob + i * orr, finish(acc))
            else:
                last = 0
                if tid == 0:
                    fi.store(part, r * nsp + s, acc)
                    fi.fence_device()
                    old = fi.atomic_add(tick, r, 1)
                    if old == nsp - 1:
                        last = 1
                last = bcast(last)
                if last == 1:          # the last block of row r combines the partials
                    fi.fence_device()
                    acc = ID
                    q = tid
                    while q < nsp:
                        acc = fi.cast_like(opd(acc, fi.load(part, r * nsp + q)), ID)
                        q += BLOCK
                    acc = block_reduce(acc)
                    if tid == 0:
                        fi.store(out, b * ob + i * orr, finish(acc))
                        fi.atomic_exch(tick, r, 0)
            t += cuda.gridDim.x

    return row_block_kernel


# --------------------------------------------------------------------------- multi-row kernel


def _make_rows_helpers(call, opd, ID, VEC, ROWS):
    """Device functions on ``ROWS``-tuples of accumulators (generated for ``ROWS`` so that
    they stay in registers): ``ids()``, ``offsets(base, i0, nr, SR0)`` (row origins, rows past
    the last clamped to it), ``vfold`` / ``sfold`` (one 128-bit vector / one element of each
    row against the shared operand), ``pfold`` (one partial per row) and ``comb``."""
    g = {"fi": fi, "call": call, "opd": opd, "ID": ID}

    def dot(acc, a, x):
        for e in range(VEC):
            acc = fi.cast_like(opd(acc, call(a[e], x[e], 0)), ID)
        return acc

    R = range(ROWS)
    src = [
        "def ids():\n    return (" + "".join("ID, " for _ in R) + ")\n",
        "def offsets(base, i0, nr, SR0):\n    last = nr - 1\n    return ("
        + "".join(f"base + min(i0 + {r}, last) * SR0, " for r in R) + ")\n",
        "def vfold(accs, A, x, ro, ox, e):\n    xv = fi.vload(x, ox + e)\n"
        + "".join(f"    a{r} = fi.vload(A, ro[{r}] + e)\n" for r in R)
        + "    return (" + "".join(f"dot(accs[{r}], a{r}, xv), " for r in R) + ")\n",
        "def sfold(accs, A, x, ro, ox, j):\n    xs = fi.load(x, ox + j)\n    return ("
        + "".join(f"fi.cast_like(opd(accs[{r}], call(fi.load(A, ro[{r}] + j), xs, 0)), ID), " for r in R)
        + ")\n",
        "def pfold(accs, part, o, nsp, last, q):\n    return ("
        + "".join(f"fi.cast_like(opd(accs[{r}], fi.load(part, o + min({r}, last) * nsp + q)), ID), " for r in R)
        + ")\n",
        "def comb(a, b):\n    return (" + "".join(f"fi.cast_like(opd(a[{r}], b[{r}]), ID), " for r in R) + ")\n",
    ]
    exec(compile("".join(src), "<forge_array.kernels.rowcol multi-row helpers>", "exec"), g)
    g["dot"] = dot
    names = ("dot", "ids", "offsets", "vfold", "sfold", "pfold", "comb")
    for n in names:          # the generated functions find each other's device versions in g
        g[n] = cuda.jit(device=True)(g[n])
    return tuple(g[n] for n in names[1:])


def make_rowmulti_kernel(f, op, K, ACC, ID, FLAG, INIT, BLOCK, SPLIT, ROWS, VEC, UNROLL):
    """Kernel factory: ``y = A @ x`` for long rows with ``ROWS`` rows per block, so that each
    128-bit vector of the shared operand ``x`` (``SR[1] == 0``) is loaded once for ``ROWS``
    rows instead of once per row (the wide-and-short layout of KernelForge's matvec).

    ``K`` must be 2 (``A``, ``x``), both contiguous along the reduction (``S1 == 1``) with the
    same 16-byte phase in every row (``aux``: the phase of ``A``'s origin in elements); a scalar
    accumulator with an identity (``FLAG`` False). A block owns rows ``i0 .. i0 + ROWS - 1``
    of one batch (the last group clamps past the last row) and a chunk of the reduction; with
    ``SPLIT > 1`` the blocks of a group write partials and the last one (ticket) combines
    them. Other parameters as for :func:`make_row_kernel`.

    >>> import numpy as np
    >>> k = make_rowmulti_kernel(lambda a, b: a * b, lambda a, b: a + b, 2, np.dtype("float32"),
    ...                          np.float32(0), False, None, 64, 1, 4, 4, 2)
    >>> callable(k)
    True
    """
    if K != 2 or FLAG or VEC < 2 or ROWS < 1:
        raise ValueError("multi-row kernel: needs two operands, an identity and 128-bit loads")
    fd, opd, ID, finish = _prepare(f, op, ID, False, INIT)
    call = _make_call(fd, 2, False, ID)
    ids, offsets, vfold, sfold, pfold, comb = _make_rows_helpers(call, opd, ID, VEC, ROWS)
    block_reduce = fi.make_block_reduce(comb, BLOCK, (_dtypes_of(ID),) * ROWS)
    bcast = _make_bcast()

    def rowmulti_kernel(ins, out, part, tick, nb, nr, m0, m1, SB, SR, S0, S1, ob, orr,
                        kb, L0, L1, chunk, aux):
        tid = cuda.threadIdx.x
        A = ins[0]
        x = ins[1]
        J = m1
        ng = (nr + ROWS - 1) // ROWS
        nsp = 1
        if SPLIT > 1:
            nsp = (J + chunk - 1) // chunk
        nwork = nb * ng * nsp
        t = cuda.blockIdx.x
        while t < nwork:               # block-uniform
            gi = t // nsp
            s = t - gi * nsp
            b = gi // ng
            i0 = (gi - b * ng) * ROWS
            ro = offsets(b * SB[0], i0, nr, SR[0])
            ox = b * SB[1]
            lo = s * chunk
            hi = lo + chunk
            if hi > J:
                hi = J
            ph = (aux + b * SB[0] + lo) % VEC      # every row and x share this phase
            hv = lo + (VEC - ph) % VEC
            if hv > hi:
                hv = hi
            nv = (hi - hv) // VEC
            accs = ids()
            j = lo + tid
            if j < hv:                 # head (fewer than VEC elements)
                accs = sfold(accs, A, x, ro, ox, j)
            q = tid
            if UNROLL >= 2:            # two vectors of every row in flight
                while q + BLOCK < nv:
                    accs = vfold(accs, A, x, ro, ox, hv + q * VEC)
                    accs = vfold(accs, A, x, ro, ox, hv + (q + BLOCK) * VEC)
                    q += 2 * BLOCK
            while q < nv:
                accs = vfold(accs, A, x, ro, ox, hv + q * VEC)
                q += BLOCK
            j = hv + nv * VEC + tid
            if j < hi:                 # tail
                accs = sfold(accs, A, x, ro, ox, j)
            tot = block_reduce(accs)
            i = i0 + tid
            if SPLIT == 1:
                if tid < ROWS and i < nr:
                    fi.store(out, b * ob + i * orr, finish(tot[tid]))
            else:
                if tid < ROWS and i < nr:
                    fi.store(part, (b * nr + i) * nsp + s, tot[tid])
                fi.fence_device()
                cuda.syncthreads()
                last = 0
                if tid == 0:
                    old = fi.atomic_add(tick, gi, 1)
                    if old == nsp - 1:
                        last = 1
                last = bcast(last)
                if last == 1:          # the last block of this row group combines
                    fi.fence_device()
                    accs = ids()
                    o = (b * nr + i0) * nsp
                    lr = nr - 1 - i0
                    q = tid
                    while q < nsp:
                        accs = pfold(accs, part, o, nsp, lr, q)
                        q += BLOCK
                    tot = block_reduce(accs)
                    if tid < ROWS and i < nr:
                        fi.store(out, b * ob + i * orr, finish(tot[tid]))
                    if tid == 0:
                        fi.atomic_exch(tick, gi, 0)
            t += cuda.gridDim.x

    return rowmulti_kernel


