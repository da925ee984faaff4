"""What every scan kernel shares: status words (flag and value of a tile), tagged combines, the
input converter, and the decoupled look-back of a warp and of a tile.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ... import intrinsics as fi
from ...intrinsics import words as fw
from ...runtime.flags import FLAGS
from ..scan_spec import STAT_AGG_WINDOWS, STAT_SPINS, packable, status_words

EMPTY, AGG, PREFIX = 0, 1, 2
#: ``publish`` kind (and ``want`` of a read) of a group's aggregate in the deterministic
#: group look-back (:func:`make_group_lookback`); stored and folded as an aggregate
GROUP = 3

_ZERO, _ONE, _TWO = np.int32(0), np.int32(1), np.int32(2)

#: Count look-back events in the counter buffer: in the simulator, and on the GPU only as a
#: diagnostic (``FORGE_ARRAY_SCAN_COUNT=1``: the atomics of spinning lanes contend on one
#: word and slow the scans down; the variable is part of the kernels' cache key).
COUNT = bool(fi.SIMULATE) or FLAGS["scan_count"].cell[0]
_U32, _U2, _U3 = np.uint64(32), np.uint64(2), np.uint64(3)


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


def _make_converter(in_dtypes, acc_dtypes, mapfn=None):
    """``(v) -> v`` in the accumulation types (scalars only convert; tuples must match).
    With ``mapfn`` (a function of the loaded input values returning a 1-tuple: a fused
    element-wise expression), ``v`` is first mapped: ``(acc(mapfn(*v)[0]),)``."""
    if mapfn is not None:
        if len(acc_dtypes) != 1:
            raise TypeError("a mapped scan has one accumulator")
        f = cuda.jit(device=True)(mapfn)
        TM = np.dtype(acc_dtypes[0]).type

        @cuda.jit(device=True)
        def conv(v):
            return (TM(f(*v)[0]),)

        return conv
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


def _make_vec_loader(in_dtypes, acc_dtypes, mapfn, VEC):
    """``vload_in(src, i)``: the ``VEC`` values at elements ``i .. i + VEC - 1`` of the
    inputs as one UniTuple, from one 128-bit load per input (``i`` 16-byte aligned in each).
    Without ``mapfn`` it is input 0's vector as loaded; with it (inputs of one item size)
    ``mapfn`` of the inputs' values, converted to the accumulator type, element by element."""
    g = {"fi": fi, "cuda": cuda}
    if mapfn is None:
        src = "def vload_in(src, i):\n    return fi.vload(src[0], i)\n"
    else:
        g["f"] = cuda.jit(device=True)(mapfn)
        g["TM"] = np.dtype(acc_dtypes[0]).type
        loads = "".join(f"    a{k} = fi.vload(src[{k}], i)\n" for k in range(len(in_dtypes)))
        vals = ", ".join("TM(f(" + ", ".join(f"a{k}[{e}]" for k in range(len(in_dtypes)))
                         + ")[0])" for e in range(VEC))
        src = f"def vload_in(src, i):\n{loads}    return ({vals},)\n"
    exec(compile(src, "<forge_array.kernels.scan vload_in>", "exec"), g)
    return cuda.jit(device=True)(g["vload_in"])


def _wait_src(q, want, sw, spin_ns):
    """Source lines of a generated window: re-read packed word ``w{q}`` of predecessor
    ``p{q}`` (``sw`` 32-bit pieces, the kind ``want`` names) until it is valid."""
    L = [f"    if p{q} >= 0:",
         f"        want = {want}",
         f"        while not valid(w{q}, want, epoch):",
         "            if COUNT:",
         "                fi.atomic_add(counter, STAT_SPINS, np.uint64(1))"]
    if spin_ns:
        L += [f"            fi.nanosleep({int(spin_ns)})"]
    return L + [f"            w{q} = fw.load_relaxed_words(status, slot(p{q} * mul + add, want) "
                f"* {sw}, {sw})"]


def _fold_src(q):
    """Source lines of a generated window: fold predecessor ``p{q}``'s tagged value (``init_t``
    for ``p{q} == -1``, nothing below) into ``acc``."""
    return [f"    if p{q} >= 0:",
            f"        x = value(status, vals, p{q} * mul + add, w{q}, like)",
            f"    elif p{q} == -1:",
            "        x = init_t",
            "    else:",
            "        x = empty",
            "    acc = comb(acc, x)"]


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
    when ``pre0``; packed, it keeps three words per tile: the aggregate (``kind`` 1), the
    inclusive prefix (2) and, for the last tile of a group, the group's aggregate (published
    as ``kind`` GROUP, read as an aggregate; see :func:`make_group_lookback`). Spins are
    counted in ``counter[STAT_SPINS]`` in the simulator."""

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
                return 3 * s + (want - 1 if want > 0 else 0)
            return s

        @cuda.jit(device=True)
        def publish(status, vals, s, kind, v, epoch):
            idx = s
            tag = kind
            if det:
                idx = 3 * s + kind - 1
                if kind == GROUP:
                    tag = 1
            if release:
                fi.fence_device()
            fw.store_relaxed_words(status, idx * SW,
                                   fw.pack_words(np.uint32(epoch * 4 + tag), v, SW))

        @cuda.jit(device=True)
        def valid(w, want, epoch):
            h = w[0]
            return (h >> np.uint32(2)) == np.uint32(epoch) and (h & np.uint32(3)) >= np.uint32(
                want if 0 < want < GROUP else 1)

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
                L += _wait_src(q, f"_want({q}, pre0)", SW, spin_ns)
            L += ["    like = empty[1:]", "    acc = empty"]
            for q in range(V):
                L += _fold_src(q)
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


def make_group_lookback(acc_dtypes, comb, release, spin_ns, group, groups):
    """The deterministic look-back of packed status words in groups: ``(lookback,
    group_total)``, device functions called by all 32 lanes of a warp.

    Tiles form groups of ``group`` (``G``); the last tile of group ``h`` publishes the
    group's aggregate ``GA(h)``, the fold of its tiles' aggregates in a fixed order, read from
    their aggregates alone (``group_total(status, vals, mul, add, hi, epoch, counter, tot,
    empty)`` with ``hi`` that tile's index and ``tot`` its own tagged total). Tile ``t`` of
    group ``g`` then takes ``lookback(status, vals, mul, add, hi, epoch, counter, init_t,
    empty)`` (``hi = t``) as ``PREFIX(p0) · GA(g - groups) · … · GA(g - 1) · AGG(gG) · … ·
    AGG(t - 1)`` with ``p0 = (g - groups) G - 1`` (``init_t`` when ``p0 < 0``; groups
    before the row are empty), folded by one fixed shuffle tree: the same bits whatever the
    timing, as in the fixed-window look-back, but a tile waits for an inclusive prefix
    ``groups * G`` tiles back and reads ``1 + groups + G - 1`` words (``(1 + groups + G - 1)
    / 32`` per lane) instead of ``W`` of them for a prefix ``W`` back; the group aggregates
    depend on aggregates only, so the chain of dependent prefixes is ``groups * G`` tiles a
    hop. Slot ``p * mul + add`` holds predecessor ``p``'s state."""
    G, GS = int(group), int(groups)
    if not 2 <= G <= 32 or GS < 1:
        raise ValueError(f"group look-back: 2 <= group <= 32 and groups >= 1, got {group}, {groups}")
    publish, _ = _make_status(acc_dtypes, True, True, comb, release, spin_ns)
    SW = status_words(acc_dtypes)
    V = 1 + GS + G - 1
    LBV = -(-V // 32)
    warp_scan = fi.make_warp_scan(comb)

    @cuda.jit(device=True)
    def slot(s, want):
        return 3 * s + want - 1

    @cuda.jit(device=True)
    def valid(w, want, epoch):
        h = w[0]
        return (h >> np.uint32(2)) == np.uint32(epoch) and (h & np.uint32(3)) >= np.uint32(
            2 if want == 2 else 1)

    @cuda.jit(device=True)
    def read(status, p, want, epoch, counter):
        w = fw.load_relaxed_words(status, slot(p, want) * SW, SW)
        while not valid(w, want, epoch):
            if COUNT:
                fi.atomic_add(counter, STAT_SPINS, np.uint64(1))
            if spin_ns:
                fi.nanosleep(spin_ns)
            w = fw.load_relaxed_words(status, slot(p, want) * SW, SW)
        return w

    @cuda.jit(device=True)
    def source(k, g, hi):
        """(predecessor, want) of window slot ``k`` of tile ``hi`` in group ``g``; predecessor
        -1: ``init_t``, < -1: empty."""
        if k == 0:
            p0 = (g - GS) * G - 1
            return (p0 if p0 >= 0 else -1), 2
        if k <= GS:
            h = g - GS + k - 1
            return (h * G + G - 1 if h >= 0 else -2), GROUP
        p = g * G + k - GS - 1
        return (p if k < V and p < hi else -2), 1

    @cuda.jit(device=True)
    def value(status, vals, s, w, like):
        return (np.int32(w[0] & np.uint32(3)),) + fw.unpack_words(w, like)

    # generated: LBV words in LBV variables (a local array cannot hold tuples)
    g_ = {"cuda": cuda, "fi": fi, "fw": fw, "np": np, "source": source, "valid": valid,
          "value": value, "slot": slot, "comb": comb, "SW": SW, "ZW": (np.uint32(0),) * SW,
          "COUNT": COUNT, "STAT_SPINS": STAT_SPINS}
    L = ["def window(status, vals, mul, add, hi, epoch, counter, init_t, empty):",
         "    lane = fi.lane_id()", f"    g = hi // {G}", "    like = empty[1:]", "    acc = empty"]
    for q in range(LBV):
        L += [f"    p{q}, want{q} = source(lane * {LBV} + {q}, g, hi)",
              f"    w{q} = ZW",
              f"    if p{q} >= 0:",
              f"        w{q} = fw.load_relaxed_words(status, slot(p{q} * mul + add, want{q}) * SW, SW)"]
    for q in range(LBV):
        L += _wait_src(q, f"want{q}", SW, spin_ns)
    for q in range(LBV):
        L += _fold_src(q)
    L += ["    return acc"]
    exec(compile("\n".join(L) + "\n", "<forge_array.kernels.scan group window>", "exec"), g_)
    window = cuda.jit(device=True)(g_["window"])

    @cuda.jit(device=True)
    def lookback(status, vals, mul, add, hi, epoch, counter, init_t, empty):
        s = warp_scan(window(status, vals, mul, add, hi, epoch, counter, init_t, empty))
        return fi.shfl_idx(s, 31)

    @cuda.jit(device=True)
    def group_total(status, vals, mul, add, hi, epoch, counter, tot, empty):
        lane = fi.lane_id()
        first = hi - (G - 1)
        x = empty
        if lane < G - 1:
            w = read(status, (first + lane) * mul + add, 1, epoch, counter)
            x = (np.int32(1),) + fw.unpack_words(w, empty[1:])
        elif lane == G - 1:
            x = tot
        s = warp_scan(x)
        ga = fi.shfl_idx(s, 31)
        if lane == 0:
            publish(status, vals, hi * mul + add, GROUP, ga[1:], epoch)

    return lookback, group_total


@cuda.jit(device=True)
def _no_group_total(status, vals, mul, add, hi, epoch, counter, tot, empty):
    pass


def group_or_window_lookback(acc_dtypes, comb, det, wide, release, spin_ns, lbv, det_group):
    """``(lookback, group_total, G)``: the group look-back of :func:`make_group_lookback` for
    deterministic scans with packed status words and ``det_group``, else the warp look-back
    of :func:`make_warp_lookback` (``lbv`` predecessors per lane), a no-op ``group_total``
    and ``G = 0``."""
    if det and det_group and packable(acc_dtypes, wide):
        lookback, group_total = make_group_lookback(acc_dtypes, comb, release, spin_ns, *det_group)
        return lookback, group_total, int(det_group[0])
    return make_warp_lookback(acc_dtypes, comb, det, wide, release, spin_ns, lbv), _no_group_total, 0


def make_tile_prefix(acc_dtypes, comb, det, wide, release, spin_ns, NW, TS, lbv=4,
                     det_group=None):
    """Device function ``tile_prefix(sk, sh, t, ti, tpr, tot, status, vals, counter, epoch,
    init_t, empty) -> pre``: the exclusive prefix of tile ``t`` (the ``ti``-th of its row)
    whose own total is the tagged ``tot``, for every thread of the block. Thread 0 publishes
    the tile's aggregate, warp 0 looks back over windows of ``32 * lbv`` predecessors (a warp
    scan of the segmented operator, restarting at the last PREFIX) and publishes the
    inclusive prefix, then one block barrier hands the result to every warp through slot
    ``NW`` of the shared scratch (``sk`` kinds, ``sh`` values at ``TS + NW``). The first tile
    of a row takes ``init_t`` and publishes at once; the last one publishes nothing (no
    successor reads it; deterministic mode still publishes aggregates). ``det_group``:
    ``(group, groups)`` of the deterministic group look-back (:func:`make_group_lookback`,
    packed status words only; else the fixed window of ``32 * lbv``)."""
    packed = packable(acc_dtypes, wide)
    publish, _ = _make_status(acc_dtypes, packed, det, comb, release, spin_ns)
    lookback, group_total, G = group_or_window_lookback(acc_dtypes, comb, det, wide, release,
                                                        spin_ns, lbv, det_group)

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
            if G and ti % G == G - 1 and not last_tile:
                group_total(status, vals, 1, t - ti, ti, epoch, counter, tot, empty)
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


