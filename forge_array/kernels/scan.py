"""Single-pass scans with decoupled look-back (Merrill & Garland, NVR-2016-002).

Two kernels, both generic over the operator (any associative ``op``, commutative or not,
on scalars or tuples) and the value type, specialised at compile time by their factories:

``make_tile_scan``  (rows: the scan axis is walked in tiles of ``block * items`` elements)
    1. A tile id from an atomic counter (``atomic_add``), so that every predecessor of a
       tile is already running: correctness never depends on block scheduling. Tile ``t``
       is tile ``t % tiles_per_row`` of row ``t // tiles_per_row``; look-back stops at the
       row's first tile, so a batch of rows (any strides) is scanned in ONE launch.
    2. Warp-striped coalesced loads (128-bit ``vload`` when the row is contiguous; tiles
       are shifted by ``lead`` elements so that they start 16-byte aligned), all of a
       thread's loads issued before the first use, then through the warp's part of shared
       memory so that each thread owns ``items`` consecutive elements (CUB's
       BLOCK_LOAD_WARP_TRANSPOSE; padded against bank conflicts; a warp barrier only).
    3. Thread-sequential reduce (a scalar's items stay in registers for step 5), warp scan
       through shuffles, block combine.
    4. Warp 0 looks back over a window of ``32 * lookback`` predecessor tiles (lane ``l``
       reads ``lookback`` consecutive ones; 1 by default: on an H200 a window of 32 beat
       one of 128 by 17-19%, see docs/scans.md); a status word per tile
       says INVALID (0), AGGREGATE (1, the tile's own total) or PREFIX (2, inclusive of
       every tile before it). For values of <= 12 bytes, status and value share ONE 8- or
       16-byte word (CUB's transaction word), written and read with ONE relaxed vector
       access (:mod:`..intrinsics.words`: no fence, no release store); larger values use a
       flag word plus separate aggregate and prefix slots (values written before the flag's
       release; one fence after the flags are read, before the values are). The window is folded by a warp scan of a
       *segmented* operator that restarts at the last PREFIX lane.
    5. Second thread-sequential pass with the prefix; results go back through the warp's
       part of shared memory and out with warp-striped coalesced stores, 128-bit when the
       output tile has the input's 16-byte phase (``ovec``). Every input element is read
       once, every output element written once. Block barriers per tile: the ticket, the
       warp totals and the look-back result (three).

``make_column_scan``  (columns: threads own columns, walk down the scan axis)
    For scans whose batch axis is the contiguous one (axis 0 of a C-contiguous matrix):
    a block covers ``cb`` columns x ``block // cb`` groups of ``items`` rows; loads are
    coalesced across columns; groups combine through shared memory and each column looks
    back (serially) over the chunks above it.

Status words carry an *epoch* (launch generation, kept on the host per status buffer):
a word from an older launch reads as INVALID, so no launch ever zeroes the status array.
Tile ids come from a monotone 64-bit counter minus a host-kept ``base``: no reset either.

Exclusive results and ``include_initial`` are an output shift (``shift = 1``): element
``k``'s inclusive result is written at ``k + 1`` and the initial value at 0 (the last one
is dropped for exclusive scans, ``m = n``). ``reverse`` is a negative-stride view.

``det`` (deterministic): the exclusive prefix of tile ``t`` is always
``PREFIX(t - 32) . AGG(t - 31) . ... . AGG(t - 1)``, combined in a fixed tree, whatever
the timing; the chain of waits is 32 tiles long per hop, so the cost is a longer
critical path (see docs/scans.md).

Values are tuples inside the kernels (a scalar is a 1-tuple); statuses travel as *tagged*
tuples ``(kind, *value)`` with kind EMPTY (0, no value: operators need no identity),
AGG (1) or PREFIX (2).

Example (the public way in is :func:`forge_array.primitives.accumulate`):

>>> import numpy as np
>>> from forge_array.kernels.scan import tagged_combine
>>> comb = tagged_combine(lambda a, b: (a[0] + b[0],), device=False)
>>> comb((1, 2.0), (1, 3.0)), comb((2, 2.0), (0, 9.0)), comb((1, 2.0), (2, 5.0))
((1, 5.0), (2, 2.0), (2, 5.0))
"""

from __future__ import annotations

import os

import numpy as np
from numba import cuda

from .. import intrinsics as fi
from ..intrinsics import words as fw
from .staging import make_gather, make_tile_loader, make_tile_storer, make_vector_split

__all__ = [
    "EMPTY", "AGG", "PREFIX", "packable", "value_op", "tagged_combine",
    "make_tile_scan", "make_column_scan", "make_column_direct", "STAT_SPINS", "STAT_AGG_WINDOWS", "STAT_WORDS",
]

EMPTY, AGG, PREFIX = 0, 1, 2

#: Counter buffer layout: [0] tile ticket, [1] spins on a not-yet-published predecessor,
#: [2] look-back steps that combined an AGGREGATE (went further back).
STAT_SPINS, STAT_AGG_WINDOWS, STAT_WORDS = 1, 2, 4

_ZERO, _ONE, _TWO = np.int32(0), np.int32(1), np.int32(2)

#: Count look-back events in the counter buffer: in the simulator, and on the GPU only as a
#: diagnostic (``FORGE_ARRAY_SCAN_COUNT=1``: the atomics of spinning lanes contend on one
#: word and slow the scans down; the variable is part of the kernels' cache key).
COUNT = bool(fi.SIMULATE) or os.environ.get("FORGE_ARRAY_SCAN_COUNT", "") not in ("", "0")
_U32, _U2, _U3 = np.uint64(32), np.uint64(2), np.uint64(3)


def packable(acc_dtypes, wide: bool = True) -> bool:
    """Whether status and value share one word: 8 bytes for one value of <= 4 bytes, 16
    bytes (one 128-bit access, CUB's ``longlong2`` transaction word) for values of <= 12
    bytes (float64, int64, complex64, (float32, float32) pairs, ...) when ``wide``.

    >>> packable(("float32",)), packable(("float64",)), packable(("float32", "float32"))
    (True, True, True)
    >>> packable(("float64",), wide=False), packable(("float64", "float64"))
    (False, False)
    """
    sw = status_words(acc_dtypes)
    return sw is not None and (wide or sw == 2)


def status_words(acc_dtypes):
    """32-bit pieces of a packed status word (2 or 4), None when the value needs flag + slots.

    >>> status_words(("int8",)), status_words(("int64",)), status_words(("float64", "float64"))
    (2, 4, None)
    """
    return fw.words_for(tuple(np.dtype(d) for d in acc_dtypes))


def _jit(device):
    return cuda.jit(device=True) if device else (lambda f: f)


def value_op(fn, tuple_op: bool, device: bool = True):
    """``op`` on value tuples: ``fn`` itself for tuple operators, ``(fn(a[0], b[0]),)`` for
    scalar ones; results are cast back to the left operand's types (``cast_like``).

    >>> value_op(lambda a, b: a * b, False, device=False)((2.0,), (4.0,))
    (8.0,)
    """
    f = fi.as_device(fn) if device else fn
    cast = fi.cast_like if device else (lambda v, like: v)
    if tuple_op:

        @_jit(device)
        def op_v(a, b):
            return cast(f(a, b), a)

    else:

        @_jit(device)
        def op_v(a, b):
            return cast((f(a[0], b[0]),), a)

    return op_v


def tagged_combine(op_v, device: bool = True):
    """The look-back operator on tagged values ``(kind, *value)``: EMPTY is an identity,
    a PREFIX on the right restarts the fold (segmented scan), else ``op`` with the larger
    kind. Associative whenever ``op`` is.
    """

    @_jit(device)
    def comb(a, b):
        ka = a[0]
        kb = b[0]
        if kb == 0:
            return a
        if ka == 0 or kb == 2:
            return b
        k = ka if ka > kb else kb
        return (k,) + op_v(a[1:], b[1:])

    return comb


@cuda.jit(device=True)
def _st_tag(sk, ki, sv, vi, t):
    """Store tagged value ``t``: its kind at ``sk[ki]``, its value at ``sv[vi]``."""
    sk[ki] = t[0]
    fi.store(sv, vi, t[1:])


@cuda.jit(device=True)
def _ld_tag(sk, ki, sv, vi):
    return (np.int32(sk[ki]),) + fi.load(sv, vi)


def _make_converter(in_dtypes, acc_dtypes):
    """``(v) -> v`` in the accumulation types (scalars only convert; tuples must match)."""
    if tuple(np.dtype(d) for d in in_dtypes) == tuple(np.dtype(d) for d in acc_dtypes):

        @cuda.jit(device=True)
        def conv(v):
            return v

        return conv
    if len(acc_dtypes) != 1:
        raise TypeError("tuple scans convert no types: input and accumulator dtypes must match")
    T = np.dtype(acc_dtypes[0]).type

    @cuda.jit(device=True)
    def conv(v):
        return (T(v[0]),)

    return conv


def _make_status(acc_dtypes, packed: bool, det: bool, comb, release: bool = False,
                 spin_ns: int = 0):
    """``publish(status, vals, s, kind, value, epoch)`` and ``window(status, vals, mul, add,
    first, V, pre0, epoch, counter, init_t, empty)``: the in-order fold of the tagged states
    of tiles ``first .. first + V - 1`` (slot ``p * mul + add`` for tile ``p``; ``p == -1``
    is ``init_t``, ``p < -1`` empty). The ``V`` status words are read with independent
    relaxed loads (all in flight at once), then each still INVALID one is re-read until
    published (``spin_ns``: a ``nanosleep`` back-off between re-reads).

    ``packed``: status and value share ONE word of ``SW`` 32-bit pieces (8 or 16 bytes,
    :func:`status_words`), written with one relaxed vector store and read with one relaxed
    vector load; the reader gets the value of the store whose status it sees, so no fence
    is needed (``release``: a device fence before each store anyway, to compare). Otherwise
    a 32-bit flag word plus separate value slots: values written before the flag's
    ``store_release``, one fence after the flags are read and before the value slots are.
    Deterministic mode reads aggregate slots only, except the prefix slot of the first tile
    when ``pre0``. Spins are counted in ``counter[STAT_SPINS]`` in the simulator."""

    @cuda.jit(device=True)
    def _want(q, pre0):
        if not det:
            return 0
        if pre0 and q == 0:
            return 2
        return 1

    if packed:
        SW = status_words(acc_dtypes)

        @cuda.jit(device=True)
        def slot(s, want):
            if det:
                return 2 * s + (1 if want == 2 else 0)
            return s

        @cuda.jit(device=True)
        def publish(status, vals, s, kind, v, epoch):
            idx = s
            if det:
                idx = 2 * s + (1 if kind == 2 else 0)
            if release:
                fi.fence_device()
            fw.store_relaxed_words(status, idx * SW,
                                   fw.pack_words(np.uint32(epoch * 4 + kind), v, SW))

        @cuda.jit(device=True)
        def valid(w, want, epoch):
            h = w[0]
            return (h >> np.uint32(2)) == np.uint32(epoch) and (h & np.uint32(3)) >= np.uint32(
                want if want > 0 else 1)

        @cuda.jit(device=True)
        def value(status, vals, s, w, like):
            return (np.int32(w[0] & np.uint32(3)),) + fw.unpack_words(w, like)

        # generated: V words in V variables (a local array cannot hold tuples)
        def make_window(V):
            g = {"cuda": cuda, "fi": fi, "fw": fw, "np": np, "slot": slot, "valid": valid,
                 "value": value, "_want": _want, "comb": comb, "COUNT": COUNT,
                 "STAT_SPINS": STAT_SPINS, "ZW": (np.uint32(0),) * SW}
            L = ["def window(status, vals, mul, add, first, pre0, epoch, counter, init_t, empty):"]
            for q in range(V):
                L += [f"    p{q} = first + {q}",
                      f"    w{q} = ZW",
                      f"    if p{q} >= 0:",
                      f"        w{q} = fw.load_relaxed_words(status, slot(p{q} * mul + add, "
                      f"_want({q}, pre0)) * {SW}, {SW})"]
            for q in range(V):
                L += [f"    if p{q} >= 0:",
                      f"        want = _want({q}, pre0)",
                      f"        while not valid(w{q}, want, epoch):",
                      "            if COUNT:",
                      "                fi.atomic_add(counter, STAT_SPINS, np.uint64(1))"]
                if spin_ns:
                    L += [f"            fi.nanosleep({int(spin_ns)})"]
                L += [f"            w{q} = fw.load_relaxed_words(status, slot(p{q} * mul + add, want) "
                      f"* {SW}, {SW})"]
            L += ["    like = empty[1:]", "    acc = empty"]
            for q in range(V):
                L += [f"    if p{q} >= 0:",
                      f"        x = value(status, vals, p{q} * mul + add, w{q}, like)",
                      f"    elif p{q} == -1:",
                      "        x = init_t",
                      "    else:",
                      "        x = empty",
                      "    acc = comb(acc, x)"]
            L += ["    return acc"]
            exec(compile("\n".join(L) + "\n", "<forge_array.kernels.scan window>", "exec"), g)
            return cuda.jit(device=True)(g["window"])

        return publish, make_window

    WT = np.uint32

    @cuda.jit(device=True)
    def slot(s, want):
        return s

    @cuda.jit(device=True)
    def publish(status, vals, s, kind, v, epoch):
        fi.store(vals, 2 * s + (1 if kind == 2 else 0), v)
        fi.store_release(status, s, np.uint32(epoch * 4 + kind))

    @cuda.jit(device=True)
    def valid(w, want, epoch):
        return (w >> np.uint32(2)) == np.uint32(epoch) and (w & np.uint32(3)) >= np.uint32(
            want if want > 0 else 1)

    @cuda.jit(device=True)
    def value(status, vals, s, w, want):
        kind = np.int32(w & np.uint32(3))
        if want == 1:
            kind = np.int32(1)
        return (kind,) + fi.load(vals, 2 * s + (1 if kind == 2 else 0))

    def make_window(V):
        @cuda.jit(device=True)
        def window(status, vals, mul, add, first, pre0, epoch, counter, init_t, empty):
            words = cuda.local.array(V, WT)
            for q in range(V):
                p = first + q
                if p >= 0:
                    words[q] = fi.load_relaxed(status, slot(p * mul + add, _want(q, pre0)))
            for q in range(V):
                p = first + q
                if p >= 0:
                    want = _want(q, pre0)
                    w = words[q]
                    while not valid(w, want, epoch):
                        if COUNT:
                            fi.atomic_add(counter, STAT_SPINS, np.uint64(1))
                        if spin_ns:
                            fi.nanosleep(spin_ns)
                        w = fi.load_relaxed(status, slot(p * mul + add, want))
                    words[q] = w
            fi.fence_device()
            acc = empty
            for q in range(V):
                p = first + q
                if p >= 0:
                    x = value(status, vals, p * mul + add, words[q], _want(q, pre0))
                elif p == -1:
                    x = init_t
                else:
                    x = empty
                acc = comb(acc, x)
            return acc

        return window

    return publish, make_window


def _vec_ok(in_dtypes, acc_dtypes, block, items):
    return len(in_dtypes) == 1 and np.dtype(in_dtypes[0]).itemsize < 16 and (
        items % fi.VEC(in_dtypes[0]) == 0)


def ovec_ok(in_dtypes, acc_dtypes, items) -> bool:
    """Whether 128-bit output stores are possible at all: one value whose size is the
    input's (so that input and output tiles have the same 16-byte phase).

    >>> ovec_ok(("float32",), ("float32",), 16), ovec_ok(("int8",), ("int64",), 8)
    (True, False)
    """
    return (len(acc_dtypes) == 1 and len(in_dtypes) == 1
            and np.dtype(acc_dtypes[0]).itemsize == np.dtype(in_dtypes[0]).itemsize < 16
            and items % fi.VEC(acc_dtypes[0]) == 0)


def _make_gather(n):
    """``gather(sh, k) -> (sh[p(k)], ..., sh[p(k + n - 1)])`` from padded shared memory
    (``p(q) = q + q // 32``) as a UniTuple of scalars, for ``vstore``; ``k`` is a multiple
    of ``n`` and ``n`` divides 32, so ``p(k + e) = p(k) + e``."""
    g = {"cuda": cuda, "fi": fi}
    items = ", ".join(f"fi.load(sh, p + {e})[0]" for e in range(n))
    src = f"def gather(sh, k):\n    p = k + (k >> 5)\n    return ({items},)\n"
    exec(compile(src, "<forge_array.kernels.scan gather>", "exec"), g)
    return cuda.jit(device=True)(g["gather"])


@cuda.jit(device=True)
def tile_coords(t, tpr, nb1, ntiles):
    """``(ti, r0, r1)`` of tile ``t``: its index in its row (``tpr`` tiles per row) and the
    row's outer / inner batch indices (``nb1`` rows per outer index). The 64-bit divisions
    (~100 instructions each) are skipped when they are trivial."""
    row = t
    ti = t - t
    if tpr != 1:
        row = t - t
        ti = t
        if ntiles != tpr:
            row = t // tpr
            ti = t - row * tpr
    r0 = row - row
    r1 = row
    if ntiles > tpr * nb1:  # more rows than the inner batch dimension holds
        r0 = row // nb1
        r1 = row - r0 * nb1
    return ti, r0, r1


def make_warp_lookback(acc_dtypes, comb, det, wide, release, spin_ns, lbv=1):
    """Device function ``lookback(status, vals, mul, add, hi, epoch, counter, init_t, empty)
    -> exclusive prefix``, called by all 32 lanes of a warp: the fold of the states of
    predecessors ``0 .. hi - 1`` of a chain whose predecessor ``p`` keeps its state in slot
    ``p * mul + add`` (``p == -1`` is ``init_t``). Lane ``l`` reads ``lbv`` consecutive
    predecessors of a window of ``32 * lbv`` (all in flight at once, each re-read until
    published); a warp scan of the segmented operator (a PREFIX restarts the fold) folds the
    window; without a PREFIX in it the warp moves one window further back. Deterministic
    mode: the window's first word is the PREFIX of its tile, the rest aggregates."""
    packed = packable(acc_dtypes, wide)
    _, make_window = _make_status(acc_dtypes, packed, det, comb, release, spin_ns)
    warp_scan = fi.make_warp_scan(comb)
    LBV = int(lbv)
    W = 32 * LBV
    window = make_window(LBV)

    @cuda.jit(device=True)
    def lookback(status, vals, mul, add, hi, epoch, counter, init_t, empty):
        lane = fi.lane_id()
        acc = empty
        while True:
            x = window(status, vals, mul, add, hi - W + lane * LBV, lane == 0, epoch, counter,
                       init_t, empty)
            s = warp_scan(x)
            last = fi.shfl_idx(s, 31)
            acc = comb(last, acc)
            if det or last[0] == 2 or hi <= W:
                break
            if COUNT and lane == 0:
                fi.atomic_add(counter, STAT_AGG_WINDOWS, np.uint64(1))
            hi -= W
        return acc

    return lookback


def make_tile_prefix(acc_dtypes, comb, det, wide, release, spin_ns, NW, TS, lbv=4):
    """Device function ``tile_prefix(sk, sh, t, ti, tpr, tot, status, vals, counter, epoch,
    init_t, empty) -> pre``: the exclusive prefix of tile ``t`` (the ``ti``-th of its row)
    whose own total is the tagged ``tot``, for every thread of the block. Thread 0 publishes
    the tile's aggregate, warp 0 looks back over windows of ``32 * lbv`` predecessors (a warp
    scan of the segmented operator, restarting at the last PREFIX) and publishes the
    inclusive prefix, then one block barrier hands the result to every warp through slot
    ``NW`` of the shared scratch (``sk`` kinds, ``sh`` values at ``TS + NW``). The first tile
    of a row takes ``init_t`` and publishes at once; the last one publishes nothing (no
    successor reads it; deterministic mode still publishes aggregates)."""
    packed = packable(acc_dtypes, wide)
    publish, _ = _make_status(acc_dtypes, packed, det, comb, release, spin_ns)
    lookback = make_warp_lookback(acc_dtypes, comb, det, wide, release, spin_ns, lbv)

    @cuda.jit(device=True)
    def tile_prefix(sk, sh, t, ti, tpr, tot, status, vals, counter, epoch, init_t, empty):
        tid = cuda.threadIdx.x
        last_tile = ti + 1 >= tpr
        if ti == 0:
            pre = init_t
            if tid == 0 and not last_tile:
                if det:
                    publish(status, vals, t, 1, tot[1:], epoch)
                publish(status, vals, t, 2, comb(pre, tot)[1:], epoch)
            return pre
        if tid == 0 and (det or not last_tile):
            publish(status, vals, t, 1, tot[1:], epoch)
        if (tid >> 5) == 0:
            lb = lookback(status, vals, 1, t - ti, ti, epoch, counter, init_t, empty)
            if tid == 0:
                _st_tag(sk, NW, sh, TS + NW, lb)
                if not last_tile:
                    publish(status, vals, t, 2, comb(lb, tot)[1:], epoch)
        cuda.syncthreads()
        return _ld_tag(sk, NW, sh, TS + NW)

    return tile_prefix


def _make_shared_vec(op_v, items, VEC, OUT_T, SV):
    """Device helpers of the tile scan's vector layout of shared memory (``shared_vec``).

    A thread's ``items`` elements are a row of ``RV = items / VEC`` 16-byte vectors; vector
    ``c`` of row ``r`` sits at column ``(c + r // max(1, 8 / RV)) % RV`` of its row (rotated:
    no padding). A quarter-warp's 8 vectors then fall in 8 distinct 16-byte bank groups both
    when 8 lanes write consecutive vectors (the warp-striped transposes) and when 8 threads
    read vector ``c`` of their own rows (the thread-blocked passes).

    ``pos(k)`` (the position of tile element ``k``), ``at(k, v)`` (``pos`` when ``v``, else
    the scalar layout ``k + k // 32``), ``vconv(xs, b)`` (``xs[b .. b + VEC - 1]`` converted
    to the accumulator type, a UniTuple), ``vfirst(run, v)`` / ``vstep(r, v)`` (a thread's
    running values over one vector ``v``: ``(last as a 1-tuple, the VEC results)``;
    ``vfirst`` starts from the tagged prefix ``run``, or from ``v[0]`` itself when ``run`` is
    EMPTY, so that operators need no identity)."""
    n = VEC if SV else 1
    RV = max(1, items // n)
    LV, LR = n.bit_length() - 1, RV.bit_length() - 1
    S = max(0, 3 - LR)
    rs = ", ".join(f"r{e}[0]" for e in range(n))
    steps = "".join(f"    r{e} = op_v(r{e - 1}, (v[{e}],))\n" for e in range(1, n))
    pos = (f"    u = k >> {LV}\n    row = u >> {LR}\n"
           f"    c = (u + (row >> {S})) & {RV - 1}\n"
           f"    return (((row << {LR}) + c) << {LV}) + (k & {n - 1})\n")
    src = (f"def pos(k):\n{pos}"
           f"def at(k, v):\n    if v:\n        return pos(k)\n    return k + (k >> 5)\n"
           f"def vconv(xs, b):\n    return ({', '.join(f'OUT_T(xs[b + {e}])' for e in range(n))},)\n"
           f"def vfirst(run, v):\n    r0 = (v[0],)\n    if run[0] != 0:\n        r0 = op_v(run[1:], r0)\n"
           f"{steps}    return r{n - 1}, ({rs},)\n"
           f"def vstep(r, v):\n    r0 = op_v(r, (v[0],))\n{steps}    return r{n - 1}, ({rs},)\n")
    g = {"op_v": op_v, "OUT_T": OUT_T}
    exec(compile(src, "<forge_array.kernels.scan shared_vec>", "exec"), g)
    for k in ("pos", "at", "vconv", "vfirst", "vstep"):   # `at` calls the device `pos`
        g[k] = cuda.jit(device=True)(g[k])
    return g["pos"], g["at"], g["vconv"], g["vfirst"], g["vstep"]


def make_tile_scan(fn, tuple_op, in_dtypes, acc_dtypes, block, items, shift, has_init,
                   det, vec, ovec=False, ticket="atomic", wide=True, release=False, spin_ns=0,
                   keep_items=False, lookback=4, shared_vec=False):
    """Kernel factory of the row (tile) scan; see the module docstring.

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

    ``shared_vec`` (with ``vec``, one value of the input's size, 2 or 4 per 16 bytes, a
    power-of-two number of vectors per thread): whole tiles go through shared memory as
    128-bit vectors, each thread's row of vectors rotated so that the warp-striped and the
    thread-blocked vector accesses are both conflict-free (:func:`_make_shared_vec`): the
    load transpose, both passes over a thread's items and the store transpose issue one
    ``st/ld.shared.v4`` per 16 bytes instead of ``VEC`` scalar accesses. Partial tiles keep
    the scalar layout.
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
    conv = _make_converter(in_dtypes, acc_dtypes)
    assert ticket in ("atomic", "block", "persist"), ticket
    VEC = fi.VEC(in_dtypes[0]) if vec else 1
    RV = items // VEC
    SV = bool(shared_vec and vec and K == 1 and len(in_dtypes) == 1 and VEC >= 2
              and in_dtypes[0].itemsize == acc_dtypes[0].itemsize and items % VEC == 0
              and RV & (RV - 1) == 0 and not keep_items)
    TS = TILE + TILE // 32  # padded tile (whole tiles of shared_vec: rotated rows, unpadded),
    # then NW warp totals, then the tile prefix
    NVALS = TS + NW + 1
    NKINDS = NW + 2  # kinds of the warp totals and the prefix, then the tile id
    NV = items // VEC
    OUT_T = acc_dtypes[0].type
    IN_T = in_dtypes[0].type
    REG = K == 1  # a scalar accumulator: strided loads land in registers first
    # keep_items: a scalar's items also stay in registers from the first pass to the second
    # (16 fewer shared loads per thread, but 16+ more registers live across the look-back:
    # 64 instead of 48 for float32 x 16, 72 instead of 56 for float64 x 8; ptxas -v)
    KEEP = REG and keep_items
    ovec = bool(ovec and vec and ovec_ok(in_dtypes, acc_dtypes, items))
    VO = fi.VEC(acc_dtypes[0]) if ovec else 1
    NVO = items // VO
    gather = _make_gather(VO)
    assert K >= 1 and (not vec or _vec_ok(in_dtypes, acc_dtypes, block, items))

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

    tile_prefix = make_tile_prefix(acc_dtypes, comb, det, wide, release, spin_ns, NW, TS, lookback)
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
                vv = fi.vload(src[0], ib + start + wseg + (j * 32 + lane) * VEC)
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
                    vv = fi.vload(src[0], ib + L)
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


def make_column_scan(fn, tuple_op, in_dtypes, acc_dtypes, block, items, shift, has_init,
                     det, wide=True, release=False, spin_ns=0, staged=0, lookback=0,
                     warp_lookback=False):
    """Kernel factory of the column scan; see the module docstring.

    Kernel arguments: ``src, dst, init, n, m, nbatch, nb1, s_in, b0_in, b1_in, s_out,
    b0_out, b1_out`` (as :func:`make_tile_scan`, plus the number of columns ``nbatch``),
    ``cb`` (columns per block), ``nstrips`` (blocks across the columns), ``nchunks``
    (chunks of ``(block // cb) * items`` rows down the scan axis), ``status, vals,
    counter, base, epoch``. Tile ``t`` is chunk ``t // nstrips`` of strip
    ``t % nstrips``; column ``c`` of tile ``t`` keeps its state in slot ``t * cb + c``.
    Launches of one chunk per column (no look-back) take tiles from ``blockIdx.x`` (no
    ticket); ``wide``, ``release``, ``spin_ns`` as :func:`make_tile_scan`.

    ``staged`` (the host checks that each block's elements form ONE dense range: a single
    strip of contiguous rows (``b1 == 1, s == nbatch == cb``) or contiguous short rows of
    one chunk (``s == 1, b1 == n``)): 1 = the block's range is read with warp-striped
    coalesced loads (all ``items`` of a thread in flight) into shared memory, in the
    range's own order, and each thread reads its column from there; 2 = the results go
    out the same way (needs the output's layout equal to the input's and ``shift == 0``).
    Instead of strided loads that touch 4-10 lines per warp access. ``lookback``: chunks a
    column's look-back reads per round trip (0: 8, or 4 for 16-byte status words).

    ``warp_lookback`` (for few columns per block, e.g. axis 0 of (10^7, 10)): each column's
    look-back is done by a whole warp over windows of 32 chunks (:func:`make_warp_lookback`;
    warp ``w`` takes columns ``w, w + NW, ...``) instead of by one thread ``lookback``
    chunks at a time: long chains of chunks settle in one or two round trips. One more
    block barrier (the column totals go through shared memory first).
    """
    in_dtypes = tuple(np.dtype(d) for d in in_dtypes)
    acc_dtypes = tuple(np.dtype(d) for d in acc_dtypes)
    R = items
    REG = len(acc_dtypes) == 1
    OUT_T = acc_dtypes[0].type
    packed = packable(acc_dtypes, wide)
    op_v = value_op(fn, tuple_op)
    comb = tagged_combine(op_v)
    conv = _make_converter(in_dtypes, acc_dtypes)
    publish, make_window = _make_status(acc_dtypes, packed, det, comb, release, spin_ns)
    # chunks read per round trip of a column's look-back (16-byte words: 4, for registers)
    LBV = int(lookback) or (4 if packed and status_words(acc_dtypes) == 4 else 8)
    window = make_window(LBV)
    NW = block // 32
    WLB = bool(warp_lookback)
    wlookback = make_warp_lookback(acc_dtypes, comb, det, wide, release, spin_ns, 1)
    # staged items (padded by one slot per 32 when staged: a warp's threads of one column
    # and different groups read positions 32 * k apart), then group aggregates, then
    # column prefixes
    GV = block * R + (block * R // 32 + 1 if staged else 0)
    CV = GV + block

    @cuda.jit(device=True)
    def pad(i):
        if staged:
            return i + (i >> 5)
        return i

    @cuda.jit(device=True)
    def spos(pc, j, s_in, tid):
        if staged:
            i = pc + j * s_in
            return i + (i >> 5)
        return j * block + tid

    @cuda.jit(device=True)
    def lookback(status, vals, chunk, strip, nstrips, cb, c, epoch, counter, init_t, empty):
        acc = empty
        hi = chunk
        mul = nstrips * cb
        add = strip * cb + c
        while True:
            x = window(status, vals, mul, add, hi - LBV, True, epoch, counter, init_t, empty)
            acc = comb(x, acc)
            if det or x[0] == 2 or hi <= LBV:
                return acc
            if COUNT:
                fi.atomic_add(counter, STAT_AGG_WINDOWS, np.uint64(1))
            hi -= LBV

    def body(sk, sh, src, dst, init, n, m, nbatch, nb1, s_in, b0_in, b1_in, s_out, b0_out,
             b1_out, cb, nstrips, nchunks, status, vals, counter, base, epoch):
        tid = cuda.threadIdx.x
        if nchunks == 1:  # no look-back: no ticket either
            t = np.int64(cuda.blockIdx.x)
        else:
            if tid == 0:
                sk[2 * block] = np.int64(fi.atomic_add(counter, 0, np.uint64(1))) - base
            cuda.syncthreads()
            t = sk[2 * block]
        chunk = t - t
        strip = t
        if nstrips != 1:
            chunk = t // nstrips
            strip = t - chunk * nstrips
        elif nchunks != 1:
            chunk = t
            strip = t - t
        G = block // cb
        g = tid // cb
        c = tid - g * cb
        col = strip * cb + c
        active = g < G and col < nbatch
        ib = 0
        ob = 0
        if active:
            r0 = col - col
            r1 = col
            if nbatch > nb1:
                r0 = col // nb1
                r1 = col - r0 * nb1
            ib = r0 * b0_in + r1 * b1_in
            ob = r0 * b0_out + r1 * b1_out
        rows0 = (chunk * G + g) * R
        x0 = conv(fi.load(src, ib))
        empty = (_ZERO,) + x0
        agg = empty
        # shared position of (row rows0 + j, this column): staged in the block's range
        # order (c * b1 + row * s relative to the range's start), else j * block + tid
        pc = c * b1_in + g * R * s_in
        span = 0
        if staged:
            # the block's dense range [lo, lo + span): coalesced warp-striped loads, all in
            # flight (clamped), then one block barrier before threads read their columns
            c0 = strip * cb
            r0s = chunk * G * R
            ncol = min(cb, nbatch - c0)
            nrow = min(G * R, n - r0s)
            lo = c0 * b1_in + r0s * s_in
            span = (ncol - 1) * b1_in + (nrow - 1) * s_in + 1
            # (rounds past the range are skipped: short rows fill few of the R rounds)
            if REG:
                xs = cuda.local.array(R, OUT_T)
                for j in range(R):
                    if j * block < span:
                        xs[j] = conv(fi.load(src, lo + min(j * block + tid, span - 1)))[0]
                for j in range(R):
                    if j * block < span:
                        fi.store(sh, pad(j * block + tid), (xs[j],))
            else:
                for j in range(R):
                    if j * block < span:
                        fi.store(sh, pad(j * block + tid), conv(fi.load(src, lo + min(j * block + tid, span - 1))))
            cuda.syncthreads()
        elif REG:
            # every load in flight before the first use: branch-free (rows clamped, inactive
            # threads read column 0), through registers for scalars; then the valid rows' fold
            xs = cuda.local.array(R, OUT_T)
            for j in range(R):
                xs[j] = conv(fi.load(src, ib + min(rows0 + j, n - 1) * s_in))[0]
            for j in range(R):
                fi.store(sh, j * block + tid, (xs[j],))
        else:
            for j in range(R):
                fi.store(sh, j * block + tid, conv(fi.load(src, ib + min(rows0 + j, n - 1) * s_in)))
        full = active and rows0 + R <= n  # the group's rows are all in the column
        if full:  # untagged: no kind tests per element
            a = fi.load(sh, spos(pc, 0, s_in, tid))
            for j in range(1, R):
                a = op_v(a, fi.load(sh, spos(pc, j, s_in, tid)))
            agg = (_ONE,) + a
        else:
            for j in range(R):
                if active and rows0 + j < n:
                    agg = comb(agg, (_ONE,) + fi.load(sh, spos(pc, j, s_in, tid)))
        _st_tag(sk, tid, sh, GV + tid, agg)
        cuda.syncthreads()
        gex = empty
        if active:
            for h in range(g):  # the groups above this one
                gex = comb(gex, _ld_tag(sk, h * cb + c, sh, GV + h * cb + c))
        if has_init:
            init_t = (_TWO,) + fi.load(init, 0)
        else:
            init_t = empty
        last = chunk + 1 >= nchunks
        if g == G - 1 and active:
            tot = comb(gex, agg)
            s = t * cb + c
            if chunk == 0:
                pre = init_t
                if not last:
                    if det:
                        publish(status, vals, s, 1, tot[1:], epoch)
                    publish(status, vals, s, 2, comb(pre, tot)[1:], epoch)
            else:
                if det or not last:
                    publish(status, vals, s, 1, tot[1:], epoch)
                if WLB:
                    pre = tot  # the column total, for the warp that looks back
                else:
                    pre = lookback(status, vals, chunk, strip, nstrips, cb, c, epoch, counter,
                                   init_t, empty)
                    if not last:
                        publish(status, vals, s, 2, comb(pre, tot)[1:], epoch)
            _st_tag(sk, block + c, sh, CV + c, pre)
        cuda.syncthreads()
        if WLB and chunk > 0:  # warp w looks back for columns w, w + NW, ...
            lane = tid & 31
            ncol = min(cb, nbatch - strip * cb)
            for cc in range(tid >> 5, ncol, NW):
                ctot = _ld_tag(sk, block + cc, sh, CV + cc)
                lb = wlookback(status, vals, nstrips * cb, strip * cb + cc, chunk, epoch,
                               counter, init_t, empty)
                if lane == 0:
                    _st_tag(sk, block + cc, sh, CV + cc, lb)
                    if not last:
                        publish(status, vals, t * cb + cc, 2, comb(lb, ctot)[1:], epoch)
            cuda.syncthreads()
        if full:  # untagged, as the fold
            run = comb(_ld_tag(sk, block + c, sh, CV + c), gex)
            for j in range(R):
                q = spos(pc, j, s_in, tid)
                v = fi.load(sh, q)
                if j > 0 or run[0] != 0:
                    v = op_v(run[1:], v)
                run = (_ONE,) + v
                if staged == 2:  # back in place: every position is this thread's own
                    fi.store(sh, q, v)
                else:
                    P = rows0 + j + shift
                    if P < m:
                        fi.store(dst, ob + P * s_out, v)
            if shift and chunk == 0 and g == 0:
                fi.store(dst, ob, fi.load(init, 0))
        elif active:
            run = comb(_ld_tag(sk, block + c, sh, CV + c), gex)
            for j in range(R):
                r = rows0 + j
                if r < n:
                    q = spos(pc, j, s_in, tid)
                    run = comb(run, (_ONE,) + fi.load(sh, q))
                    if staged == 2:  # back in place: every position is this thread's own
                        fi.store(sh, q, run[1:])
                    else:
                        P = r + shift
                        if P < m:
                            fi.store(dst, ob + P * s_out, run[1:])
            if shift and chunk == 0 and g == 0:
                fi.store(dst, ob, fi.load(init, 0))
        if staged == 2:  # coalesced warp-striped stores of the block's range (same layout)
            cuda.syncthreads()
            olo = strip * cb * b1_out + chunk * G * R * s_out
            for j in range(R):
                i = j * block + tid
                if i < span:
                    fi.store(dst, olo + i, fi.load(sh, pad(i)))

    inner = fi.with_shared_scratch(2 * block + 1, np.int64, cuda.jit(device=True)(body), nargs=22)
    outer = fi.with_shared_scratch(CV + block, acc_dtypes, inner, nargs=21)

    def column_scan(src, dst, init, n, m, nbatch, nb1, s_in, b0_in, b1_in, s_out, b0_out,
                    b1_out, cb, nstrips, nchunks, status, vals, counter, base, epoch):
        outer(src, dst, init, n, m, nbatch, nb1, s_in, b0_in, b1_in, s_out, b0_out,
              b1_out, cb, nstrips, nchunks, status, vals, counter, base, epoch)

    return column_scan


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
