"""Row and column kernels: ``out[r] = op-reduce_j f(A0[r, j], A1[r, j], ...)``.

One implementation serves the axis reductions (``x = None``: one input) and the
matrix-vector products (``y = A @ x`` is the row reduction of ``f = multiply`` over the
inputs ``(A, x)`` where ``x`` has row stride 0). KernelForge's layout (its Figure 2):

- :func:`make_row_kernel` reduces along the *contiguous* axis (each output reads one
  row of consecutive elements).

  * ``G <= 32`` (short rows): lanes split into groups of ``G`` lanes; a group owns one
    row (``G = 32``: one warp per row; ``G = 8``: four rows per warp, e.g. ``p = 10``).
    Group totals by ``shfl_down`` inside the warp. Grid-stride over rows.
  * ``G == BLOCK`` (long rows): ``SPLIT`` blocks per row; each reduces its chunk with a
    block reduction; for ``SPLIT > 1`` each writes a partial, takes an atomic ticket,
    and the last block of the row combines the partials and resets the ticket. No float
    atomics: results are the same run to run.
  * 128-bit loads (``VEC > 1``) when the rows are contiguous: scalar head up to the
    16-byte boundary, vector body, scalar tail.

- :func:`make_col_kernel` reduces *across* the contiguous axis: a block owns a tile of
  ``C`` consecutive outputs; thread ``t`` owns output ``t % C`` and rows ``t // C`` +
  ``k * (BLOCK // C)``, so a warp reads consecutive elements (coalesced) even when
  there are few outputs (``C = 10``: a warp covers 3.2 rows; the "warp-cooperative"
  layout of tall, narrow matrices). Per-output partials are combined through shared
  memory; ``SPLIT`` blocks share a tile's rows (partials + last-block ticket as above).

- :func:`make_rowtile_kernel` (short rows, adjacent and contiguous: a block stages tiles of
  whole rows into shared memory with 128-bit loads, groups of ``G`` lanes reduce a row each)
  and :func:`make_colvec_kernel` (``VEC`` adjacent outputs per thread, one 128-bit load per
  row and operand) are the vectorised fast paths of the two; the host picks them when the
  layout allows (see :mod:`forge_array.primitives.axis_reduce`).

- :func:`make_rowmulti_kernel` is the long-row kernel of ``A @ x`` with several rows per
  block, so that each vector of ``x`` is loaded once for all of them.
- :func:`make_colflat_kernel` reduces across the rows of a thin C-contiguous matrix
  (``p = 10``: ``x @ A``, ``sum(A, axis=0)``) read as one flat run of 128-bit vectors, each
  thread's lanes keeping their columns from step to step (the grid is sized for that).

Layout of every kernel's arguments (the host flattens any view into this, see
:mod:`forge_array.primitives.axis_reduce`):

``(ins, out, part, tick, nb, nr, m0, m1, SB, SR, S0, S1, ob, orr, kb, L0, L1, chunk, aux)``

- ``ins``: tuple of the ``K`` input buffers (each a buffer or a tuple of buffers).
- ``out``: result buffer(s) of the accumulator type; element ``(b, i)`` at
  ``b * ob + i * orr``. ``part``: partials (``SPLIT > 1``; else any buffer of that
  type); ``tick``: zeroed uint32 tickets, left zeroed.
- output rows ``(b, i)`` in ``nb x nr``; reduction index ``j`` in ``m0 * m1`` =
  ``(j0, j1)``. Input ``k``'s element is at
  ``b * SB[k] + i * SR[k] + j0 * S0[k] + j1 * S1[k]``.
- with ``INDEX``, ``f`` also receives ``kb + j0 * L0 + j1 * L1`` (the position of the
  element in the reduced axes, for argmax / argmin).
- ``chunk``: reduction elements per split block. ``aux``: the 16-byte misalignment of
  input 0's origin in elements (row kernel with ``VEC > 1``), or ``C`` (column kernel).

Values are scalars or tuples (struct-of-arrays in memory, tuples in registers): ``ID``
(the identity of ``op``, a NumPy scalar or tuple of them) fixes the accumulator type, and
every ``f`` / ``op`` result is converted to it. ``op`` must be associative; the kernels
combine in index order inside a lane/group/block but lanes take strided elements, so a
non-commutative ``op`` is only correct where the primitive says so (it is the caller's
contract that ``op`` is commutative).

Example
-------
>>> import numpy as np
>>> k = make_row_kernel(lambda a, b: a * b, lambda a, b: a + b, 2, np.dtype("float32"),
...                     np.float32(0), False, None, 32, 64, 1, False, False, 1, 1)
>>> callable(k)
True
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from .. import intrinsics as fi
from .staging import make_tile_loader

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


# --------------------------------------------------------------------------- row kernel


def make_row_kernel(f, op, K, ACC, ID, FLAG, INIT, G, BLOCK, SPLIT, RED2, INDEX, VEC, UNROLL):
    """Kernel factory: reduction along the contiguous axis (see the module docstring for
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


# --------------------------------------------------------------------------- column kernel


def make_col_kernel(f, op, K, ACC, ID, FLAG, INIT, BLOCK, SPLIT, RED2, INDEX, UNROLL):
    """Kernel factory: reduction across the contiguous axis (see the module docstring).

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
    """``(v, e) -> v[e]`` for a vector operand (``mode`` 1), ``v`` for a broadcast one."""
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
    """``(p, o, c0, full) -> value(s)`` of one row for the ``VEC`` columns ``c0 .. c0 + VEC - 1``
    (offset ``o`` is column 0 of that row): a 128-bit load when ``full`` (``c0``'s address is
    16-byte aligned), else scalar loads at the given (clamped) columns; a broadcast operand
    (``mode`` 0) loads its one element at ``o``."""
    if not mode:
        @cuda.jit(device=True)
        def ld(p, o, c0, cl, full):
            return fi.load(p, o)
        return ld
    if VEC == 2:
        @cuda.jit(device=True)
        def ld(p, o, c0, cl, full):
            if full:
                return fi.vload(p, o + c0)
            return (p[o + cl[0]], p[o + cl[1]])
    elif VEC == 4:
        @cuda.jit(device=True)
        def ld(p, o, c0, cl, full):
            if full:
                return fi.vload(p, o + c0)
            return (p[o + cl[0]], p[o + cl[1]], p[o + cl[2]], p[o + cl[3]])
    else:
        raise ValueError(f"vectorised column kernel: VEC must be 2 or 4, got {VEC}")
    return ld


def _make_col_fold(call, opd, K, ID, VEC, MODES):
    """``(ins, o, c0, cl, full, kidx, accs) -> accs``: loads one row of the ``VEC`` columns of
    every operand and folds ``f`` of them into the ``VEC`` accumulators (a tuple)."""
    lds = [_make_col_loader(MODES[k], VEC) for k in range(K)]
    gets = [_make_lane_get(MODES[k]) for k in range(K)]
    ld0 = lds[0]
    g0 = gets[0]
    ld1 = lds[1] if K > 1 else None
    g1 = gets[1] if K > 1 else None
    ld2 = lds[2] if K > 2 else None
    g2 = gets[2] if K > 2 else None

    if K == 1:
        @cuda.jit(device=True)
        def lane(v, e, kidx):
            return call(g0(v[0], e), kidx)

        @cuda.jit(device=True)
        def load_all(ins, o, c0, cl, full):
            return (ld0(ins[0], o[0], c0, cl, full),)
    elif K == 2:
        @cuda.jit(device=True)
        def lane(v, e, kidx):
            return call(g0(v[0], e), g1(v[1], e), kidx)

        @cuda.jit(device=True)
        def load_all(ins, o, c0, cl, full):
            return (ld0(ins[0], o[0], c0, cl, full), ld1(ins[1], o[1], c0, cl, full))
    else:
        @cuda.jit(device=True)
        def lane(v, e, kidx):
            return call(g0(v[0], e), g1(v[1], e), g2(v[2], e), kidx)

        @cuda.jit(device=True)
        def load_all(ins, o, c0, cl, full):
            return (ld0(ins[0], o[0], c0, cl, full), ld1(ins[1], o[1], c0, cl, full),
                    ld2(ins[2], o[2], c0, cl, full))

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
    return load_all, fold


def make_colvec_kernel(f, op, K, ACC, ID, FLAG, INIT, BLOCK, SPLIT, RED2, INDEX, UNROLL, VEC,
                       MODES, TAIL=True, VOUT=False, FLIGHT=2, GROUPED=False):
    """Kernel factory: reduction across the contiguous axis with ``VEC`` adjacent outputs per
    thread read by 128-bit loads (the vectorised form of :func:`make_col_kernel`).

    ``MODES[k]`` is 1 when operand ``k`` is contiguous along the outputs (``SR[k] == 1``: one
    ``VEC``-wide load per row serves ``VEC`` outputs) and 0 when it is the same for every
    output (``SR[k] == 0``, e.g. ``x`` of ``x @ A``: one scalar load per row serves ``VEC``
    outputs). The host guarantees that every vector operand has the same 16-byte phase at
    column 0 of every row (``S0``, ``S1``, ``SB`` multiples of ``VEC``).

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
    load_all, fold = _make_col_fold(call, opd, K, ID, VEC, MODES)
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
    def load4(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, j, T):
        """Rows ``j, j + T, j + 2T, j + 3T``: their loads (all issued before any is used) and
        their reduction indices."""
        o0, k0 = row_off(base, S0, S1, m1, kb, L0, L1, j)
        o1, k1 = row_off(base, S0, S1, m1, kb, L0, L1, j + T)
        o2, k2 = row_off(base, S0, S1, m1, kb, L0, L1, j + 2 * T)
        o3, k3 = row_off(base, S0, S1, m1, kb, L0, L1, j + 3 * T)
        return ((load_all(ins, o0, c0, cl, full), load_all(ins, o1, c0, cl, full),
                 load_all(ins, o2, c0, cl, full), load_all(ins, o3, c0, cl, full)), (k0, k1, k2, k3))

    @cuda.jit(device=True)
    def fold4(vk, accs):
        vs, ks = vk
        accs = fold(vs[0], ks[0], accs)
        accs = fold(vs[1], ks[1], accs)
        accs = fold(vs[2], ks[2], accs)
        return fold(vs[3], ks[3], accs)

    @cuda.jit(device=True)
    def col_range(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, j, hi, T, accs):
        if UNROLL >= 8:
            while j + 7 * T < hi:          # eight rows in flight (short, single-wave launches)
                a = load4(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, j, T)
                b = load4(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, j + 4 * T, T)
                accs = fold4(b, fold4(a, accs))
                j += 8 * T
        if UNROLL >= 4:
            while j + 3 * T < hi:
                accs = fold4(load4(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, j, T), accs)
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
                v0 = load_all(ins, o0, c0, cl, full)
                v1 = load_all(ins, o1, c0, cl, full)
                v2 = load_all(ins, o2, c0, cl, full)
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
                v0 = load_all(ins, o0, c0, cl, full)
                v1 = load_all(ins, o1, c0, cl, full)
                accs = fold(v0, k0, accs)
                accs = fold(v1, k1, accs)
                j += 2 * T
        while j < hi:
            o0, k0 = row_off(base, S0, S1, m1, kb, L0, L1, j)
            accs = fold(load_all(ins, o0, c0, cl, full), k0, accs)
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
                accs = col_range(ins, base, S0, S1, m1, kb, L0, L1, c0, cl, full, lo + rho, hi,
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
    _, fold = _make_col_fold(call, opd, K, ID, VEC, (1,) * K)
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


def make_rowtile_kernel(f, op, K, ACC, ID, FLAG, INIT, G, BLOCK, INDEX, VEC, MODES, DTS, TV, WARP=False,
                        V4=False, WIDE=False, ACCS=1):
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

    >>> import numpy as np
    >>> k = make_rowtile_kernel(lambda a: a, lambda a, b: a + b, 1, np.dtype("float32"),
    ...                         np.float32(0), False, None, 1, 64, False, 4, (1,),
    ...                         (np.dtype("float32"),), 2)
    >>> callable(k)
    True
    """
    if ACCS not in (1, 2, 4):
        raise ValueError(f"partial results per lane: 1, 2 or 4, got {ACCS}")
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

    @cuda.jit(device=True)
    def elem(s, ins, e, xb, S1, kb, L1, j, po):
        return value(s, ins, e + j, offs(xb, S1, j), kb + j * L1, po)

    @cuda.jit(device=True)
    def row_total(s, ins, e, b, SB, S1, kb, L1, j, J, po):
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

    def body(s, ins, out, nb, nr, m1, SB, S1, ob, orr, kb, L1, aux):
        tid = cuda.threadIdx.x
        R = nb * nr
        J = m1
        RT = TILE // J
        if RT > BLOCK // G:
            RT = BLOCK // G
        rl = tid // G
        l = tid - rl * G
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
                acc = row_total(s, ins, rl * J, b, SB, S1, kb, L1, l, J, 0)
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
                    acc = row_total(s, ins, so + rl * J, b, SB, S1, kb, L1, l, J, po)
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
