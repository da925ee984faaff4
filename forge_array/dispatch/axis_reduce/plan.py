"""Launch planning of the axis reductions: which row / column kernel, its vector width, block,
split and grid for a layout, and the compiled kernel with its arguments.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import runtime
from ...runtime import factories, temp, tuning
from ...runtime.caches import Cache
from ...runtime.param_types import I64, ptr, tuple_of, unituple
from .._common import first_component, hashable_key, zeros_of


class _Factories:
    """The row and column kernels' factories (:mod:`forge_array.kernels.rowcol`), named without
    importing them: their modules (numba's CUDA target) load where a kernel is built."""

    make_col_kernel = factories.factory("forge_array.kernels.rowcol.columns", "make_col_kernel")
    make_colvec_kernel = factories.factory("forge_array.kernels.rowcol.columns", "make_colvec_kernel")
    make_colflat_kernel = factories.factory("forge_array.kernels.rowcol.colflat", "make_colflat_kernel")
    make_row_kernel = factories.factory("forge_array.kernels.rowcol.rows", "make_row_kernel")
    make_rowmulti_kernel = factories.factory("forge_array.kernels.rowcol.rows", "make_rowmulti_kernel")
    make_rowtile_kernel = factories.factory("forge_array.kernels.rowcol.rowtile", "make_rowtile_kernel")


_k = _Factories

# --------------------------------------------------------------------------- launch


def _buf_t(dt):
    if isinstance(dt, tuple):
        return tuple_of(tuple(_buf_t(d) for d in dt))
    return ptr(dt)


def entry_dtype(entry):
    if isinstance(entry, tuple):
        return tuple(c.dtype for c in entry)
    return entry.dtype


def _buffer(entry):
    if isinstance(entry, tuple):
        return tuple(_buffer(c) for c in entry)
    return runtime.buffer_of(entry)


def _next_pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def _vec_phase(ins, K, nb, nr, SB, SR, S1, J):
    """(VEC, misalignment of operand 0 in elements) for the row kernel, VEC 1 when 128-bit
    loads do not apply."""
    if any(isinstance(e, tuple) for e in ins):
        return 1, 0
    dts = [e.dtype for e in ins]
    if any(d.kind not in "iuf" for d in dts) or len({d.itemsize for d in dts}) != 1:
        return 1, 0
    size = dts[0].itemsize
    vec = 16 // size
    if vec < 2 or J < 2 * vec or any(S1[k] != 1 for k in range(K)):
        return 1, 0
    mis = []
    for e in ins:
        m = runtime.misalignment(e)
        if m % size:
            return 1, 0
        mis.append(m // size)
    for k in range(1, K):
        if (mis[k] - mis[0]) % vec:
            return 1, 0
        if nb > 1 and (SB[k] - SB[0]) % vec:
            return 1, 0
        if nr > 1 and (SR[k] - SR[0]) % vec:
            return 1, 0
    return vec, mis[0]


def _rowtile_modes(ins, K, nb, nr, J, SB, SR, S1):
    """(VEC, MODES, dtypes, packed phases) for the staged short-row kernel, or None: operand 0
    and every other operand with ``MODES[k] == 1`` is a plain integer / float array whose
    rows are contiguous and adjacent (one run of ``nb * nr * J`` elements), the others are
    constant along the rows (``SR == 0``: ``x`` of ``A @ x``)."""
    modes = []
    for k in range(K):
        e = ins[k]
        flat = (not isinstance(e, tuple) and S1[k] == 1 and (nr == 1 or SR[k] == J)
                and (nb == 1 or SB[k] == nr * J))
        if flat:
            modes.append(1)
        elif SR[k] == 0 or nr == 1 and nb == 1:
            modes.append(0)
        else:
            return None
    if not modes[0]:
        return None
    staged = [ins[k] for k in range(K) if modes[k]]
    dts = [e.dtype for e in staged]
    if any(d.kind not in "iuf" for d in dts) or len({d.itemsize for d in dts}) != 1:
        return None
    size = dts[0].itemsize
    aux = 0
    for k in range(K):
        if modes[k]:
            m = runtime.misalignment(ins[k])
            if m % size:
                return None
            aux |= (m // size) << (4 * k)
    return 16 // size, tuple(modes), tuple(ins[k].dtype if modes[k] else None for k in range(K)), aux


def _vector_rows(pb, vec, modes, aux):
    """Whether the staged short-row kernel can read whole 128-bit vectors of every row
    (``VROW``): rows of a multiple of ``vec`` elements, every staged operand's origin 16-byte
    aligned (``aux == 0``), and every operand read from global memory a plain array of the
    staged item size, contiguous along the row from a 16-byte aligned address with batch
    strides of whole vectors."""
    if vec < 2 or pb.J % vec or aux:
        return False
    size = 16 // vec
    for k in range(pb.K):
        if modes[k]:
            continue
        e = pb.ins[k]
        if (isinstance(e, tuple) or e.dtype.kind not in "iuf" or e.dtype.itemsize != size
                or pb.S1[k] != 1 or runtime.misalignment(e) or pb.SB[k] % vec):
            return False
    return True


#: the most shared memory (bytes per block) a fitted short-row tile may take
_FIT_SHARED = 40 * 1024


def _fitted_vectors(J, vec, G, tile):
    """16-byte vectors per lane of a warp's staged tile holding a whole number of rounds of
    rows of ``J`` elements (a round: ``32 // G`` rows), as near ``tile`` elements as that
    allows.

    >>> _fitted_vectors(100, 4, 4, 1024)   # 8 rows of 100 float32: one round of 8 groups
    7
    >>> _fitted_vectors(16, 4, 4, 1024)    # 64 rows of 16: already whole rounds
    8
    """
    per_round = 32 // G
    rows = per_round * max(1, round(tile / (J * per_round)))
    return -(-rows * J // (32 * vec))


def _held_vectors(pb, vec, modes, G, most):
    """How many 128-bit vectors of ``x`` each lane of ``A @ x``'s staged short-row kernel
    holds in registers (1, 2, 4 or 8; 0: none): two operands of one dtype, ``A`` staged, ``x``
    the same for every row of the launch, and rows of at most ``most * G`` vectors."""
    if not most or pb.K != 2 or tuple(modes) != (1, 0) or pb.ins[0].dtype != pb.ins[1].dtype:
        return 0
    if pb.nb > 1 and pb.SB[1] or pb.nr > 1 and pb.SR[1]:
        return 0
    per_lane = -(-(pb.J // vec) // G)
    rv = _next_pow2(per_lane)
    return rv if rv <= min(most, 8) else 0


def _colvec_phase(ins, K, nb, nr, m0, red2, SB, SR, S0, S1, preload=False):
    """(VEC, phase of column 0 in elements, MODES) for the vectorised column kernel, or None
    when it does not apply: every operand is contiguous along the outputs (``SR == 1``,
    a plain array of 4- or 8-byte integers or floats, all of one item size: mode 1) or
    constant along them (``SR == 0``, e.g. ``x`` of ``x @ A``: mode 0), and the vector
    operands have the same 16-byte phase at column 0 of every row; an operand contiguous
    along the outputs and the same in every row whose item size or phase differs from
    theirs is read by scalar loads once per thread (mode 2: a float64 mean beside float32
    data), and with ``preload`` (the ``col_preload`` tuning key) every operand the same in
    every row is (the pivot row of ``var`` / ``std``), instead of a vector load per row."""
    if any(SR[k] not in (0, 1) for k in range(K)):
        return None
    if any(isinstance(e, tuple) for k, e in enumerate(ins) if SR[k] == 1):
        return None

    def row_const(k):   # the same element in every row of the reduction
        return S1[k] == 0 and (not red2 or m0 == 1 or S0[k] == 0)

    lead = [k for k in range(K) if SR[k] == 1 and not row_const(k)]
    if not lead:
        lead = [k for k in range(K) if SR[k] == 1][:1]
        if not lead:
            return None
    size = ins[lead[0]].dtype.itemsize
    if size not in (4, 8):
        return None
    vec = 16 // size
    if nr < vec:
        return None

    def phase(k):   # the 16-byte phase (elements) of operand k, or None when it has none
        e = ins[k]
        if e.dtype.kind not in "iuf" or e.dtype.itemsize != size:
            return None
        if S1[k] % vec or (red2 and m0 > 1 and S0[k] % vec) or (nb > 1 and SB[k] % vec):
            return None
        m = runtime.misalignment(e)
        return None if m % size else (m // size) % vec

    ph = phase(lead[0])
    if ph is None:
        return None
    modes = []
    for k in range(K):
        if SR[k] == 0:
            modes.append(0)
        elif k in lead:
            if phase(k) != ph:
                return None
            modes.append(1)
        else:
            modes.append(1 if phase(k) == ph and not preload else 2)
    return vec, ph, tuple(modes)


def _rows_per_block(nr, most):
    """Rows per block of the multi-row kernel for ``nr`` rows: the largest divisor of ``nr``
    in ``2 .. most`` (no clamped duplicate rows), else ``most``; 1 (off) when ``most < 2``."""
    if most < 2:
        return 1
    for r in range(min(most, nr), 1, -1):
        if nr % r == 0:
            return r
    return min(most, nr)


def _colflat_modes(ins, K, nr, J, SR, S1, limit):
    """(VEC, MODES, head) for the flat column kernel, or None when it does not apply: operand
    0 is a C-contiguous matrix (``SR == 1``, row stride ``S1 == nr``) of 4- or 8-byte
    integers or floats with ``VEC <= nr <= limit`` columns; every other operand is laid out
    the same way with the same item size and 16-byte phase (``MODES[k] = 1``) or is indexed
    by the row only (``SR == 0``: ``x`` of ``x @ A``, ``MODES[k] = 0``). ``head``: elements
    before operand 0's first 16-byte boundary."""
    if any(isinstance(e, tuple) for e in ins):
        return None
    size = ins[0].dtype.itemsize
    if ins[0].dtype.kind not in "iuf" or size not in (4, 8):
        return None
    vec = 16 // size
    if not vec <= nr <= limit or J < 2:
        return None
    ph = None
    modes = []
    for k in range(K):
        e = ins[k]
        if SR[k] == 1 and S1[k] == nr:
            if e.dtype.kind not in "iuf" or e.dtype.itemsize != size:
                return None
            m = runtime.misalignment(e)
            if m % size:
                return None
            m = (m // size) % vec
            if ph is not None and m != ph:
                return None
            ph = m
            modes.append(1)
        elif SR[k] == 0:
            modes.append(0)
        else:
            return None
    if not modes[0]:
        return None
    return vec, tuple(modes), (vec - ph) % vec


class _Problem(NamedTuple):
    """One reduction as the planner reads it: the operator ``f`` / ``op`` and operands
    ``ins`` (``K`` of them); ``nb`` batches of ``nr`` output rows, each reducing ``m0 * m1 =
    J`` elements (``red2``: two reduced dims); per-operand strides of the batch, row and
    reduced dims (``SB``, ``SR``, ``S0``, ``S1``) and the output's (``ob``, ``orr``,
    ``L0``, ``L1``); ``R = nb * nr`` rows; the accumulator ``acc``, its identity ``ID``
    (``ident_missing``: none, a flag beside each partial), the initial value, ``index``
    (arg-reductions), ``kb`` and ``out_ok`` (the result 16-byte aligned)."""

    f: object
    op: object
    ins: tuple
    K: int
    nb: int
    nr: int
    m0: int
    m1: int
    red2: bool
    SB: tuple
    SR: tuple
    S0: tuple
    S1: tuple
    ob: int
    orr: int
    L0: int
    L1: int
    R: int
    J: int
    row: bool
    acc: object
    ID: object
    ident_missing: bool
    init_v: object
    index: bool
    kb: int
    out_ok: bool

    @property
    def head(self) -> tuple:
        """The factory constants every kernel family starts with."""
        return (self.f, self.op.fn, self.K, self.acc, self.ID, self.ident_missing, self.init_v)


def _problem(f, op, ins, kdims, rdims, kb, acc, ident, init_v, index, out_ok) -> _Problem:
    """The :class:`_Problem` of a reduction given by its kept dims ``kdims`` and reduced dims
    ``rdims`` (``[size, strides per operand + output]`` each); ``row``: operand 0 is
    contiguous along the reduction, so a row kernel reads it."""
    K = len(ins)
    # output rows (b, i) and reduction (j0, j1); strides per operand, then out / index
    if len(kdims) == 2:
        (nb, sb), (nr, sr) = kdims
    elif len(kdims) == 1:
        nb, sb = 1, (0,) * (K + 1)
        nr, sr = kdims[0]
    else:
        nb, sb, nr, sr = 1, (0,) * (K + 1), 1, (0,) * (K + 1)
    if not rdims:
        rdims = [[1, (0,) * (K + 1)]]
    red2 = len(rdims) == 2
    if red2:
        (m0, s0), (m1, s1) = rdims
    else:
        m0, s0 = 1, (0,) * (K + 1)
        m1, s1 = rdims[0]
    SB, SR, S0, S1 = (tuple(int(v) for v in s[:K]) for s in (sb, sr, s0, s1))
    R = nb * nr
    J = m0 * m1
    min_red = abs(S1[0])
    min_kept = min([abs(v[0]) for v in (sb, sr)] if kdims else [np.inf])
    if len(kdims) == 1:
        min_kept = abs(sr[0])
    row = min_red < min_kept or not kdims or (min_red == min_kept and J >= R)
    ident_missing = ident is None
    return _Problem(f, op, ins, K, nb, nr, m0, m1, red2, SB, SR, S0, S1, int(sb[K]), int(sr[K]),
                    int(s0[K]), int(s1[K]), R, J, row, acc, zeros_of(acc) if ident_missing else ident,
                    ident_missing, init_v, index, kb, out_ok)


class _Choice(NamedTuple):
    """A kernel family's answer for a :class:`_Problem`: its ``factory``, the factory's
    constants (``fargs``: a tuple, or a function of the split and, for the column kernel,
    the rows in flight), the launch shape as a function of the blocks that fit at once
    (``shape(cap) -> (grid, split, chunk)``), ``aux``, the tickets ``nticks``, the
    ``block``; for the column kernels also the tiles ``units``, rows per block ``RB``,
    rows in flight ``cu`` and ``group_size(split)`` of the two-level combine."""

    factory: object
    fargs: object
    shape: object
    aux: int
    nticks: int
    block: int
    units: int = 0
    RB: int = 0
    cu: int = 0
    group_size: object = None


def _rowtile_choice(pb, p, sm):
    """Short rows: tiles of whole rows staged through shared memory by 128-bit loads, or None
    where the rows do not fit a tile (or their operands cannot be staged)."""
    if pb.red2 or pb.J > p.get("row_tile_max", 0):
        return None
    rowtile = _rowtile_modes(pb.ins, pb.K, pb.nb, pb.nr, pb.J, pb.SB, pb.SR, pb.S1)
    if rowtile is None:
        return None
    block, J = p["block"], pb.J
    vec, modes, dts, aux = rowtile
    tv = p.get("row_tile_vecs", 2)
    if sum(modes) > 1:   # several staged operands: keep shared memory per block <= 24 KiB
        tv = max(1, tv // 2)
    warp = bool(p.get("row_tile_warp", False))
    span = (32 if warp else block)
    tile = tv * span * vec
    if tile < J:
        return None
    vrow = int(p.get("row_tile_vrow", 0))
    held = 0
    jv = J // vec
    G = min(_next_pow2(vrow), 32, _next_pow2(jv))
    if (vrow and _vector_rows(pb, vec, modes, aux)
            and jv >= p.get("row_tile_vrow_fill", 0) * G * -(-jv // G)):
        # lanes read whole 128-bit vectors of a row: groups of up to `row_tile_vrow` lanes,
        # where the lanes' share of the vectors of a row is at least `row_tile_vrow_fill`
        accs = int(p.get("row_tile_vrow_accs", 1))
        held = _held_vectors(pb, vec, modes, G, p.get("row_tile_held", 0))
        if warp and p.get("row_tile_vrow_fit", False):
            # a warp's tile of whole rounds of rows (32 // G rows a round, no round part idle)
            tv_fit = _fitted_vectors(J, vec, G, tile)
            if tv_fit * block * 16 * sum(modes) <= _FIT_SHARED:
                tv, tile = tv_fit, tv_fit * span * vec
    else:
        vrow = 0
        G = 1
        while G < 32 and 2 * G <= span // max(1, tile // J):
            G *= 2
        if p.get("row_tile_banks", False):
            # groups of gcd(J, 32) lanes: the lanes of a round read distinct banks (J = 10:
            # pairs instead of a thread per row, whose stride-10 reads conflict 2-way)
            G = max(G, math.gcd(J, 32))
        # partial results per lane: for single-operand rows of <= 16 elements only, where
        # they won (docs/tuning.md, `row_tile_accs`)
        accs = int(p.get("row_tile_accs", 1)) if pb.K == 1 and J <= 16 else 1
    rt = tile // J if warp else min(tile // J, block // G)
    ntile = -(-pb.R // rt)
    fargs = pb.head + (G, block, pb.index, vec, modes, dts, tv, warp, warp and bool(p.get("row_tile_v4", False)),
                            tv >= 8 and bool(p.get("row_tile_wide", False)), accs, bool(vrow), held)

    def shape(cap):
        if warp:   # persistent: one wave, every warp loops over its tiles
            return max(1, min(-(-ntile // (block // 32)), cap)), 1, J
        return max(1, min(ntile, sm * p["max_blocks_per_sm"] * 4)), 1, J
    return _Choice(_k.make_rowtile_kernel, fargs, shape, aux, 1, block)


def _row_choice(pb, p, sm):
    """Rows read along their contiguous reduction: a warp (or part of one) per row, or whole
    blocks per long row, split across blocks where the rows are few; ``A @ x`` with several
    rows per block sharing each vector of ``x``."""
    block, J, R, occupancy = p["block"], pb.J, pb.R, p.get("occupancy", False)
    vec, mis = (1, 0) if pb.red2 else _vec_phase(pb.ins, pb.K, pb.nb, pb.nr, pb.SB, pb.SR, pb.S1, J)
    per_lane = p["row_items"] * vec
    if J <= 32 * per_lane or R >= sm * p["warp_rows"]:
        G = min(32, _next_pow2(-(-J // per_lane)))

        def shape(cap):
            return max(1, min(-(-R // (block // G)), sm * p["max_blocks_per_sm"] * 4)), 1, J
        rows = 1
    else:
        G = block
        most = max(1, J // (block * p["min_items"] * vec))
        rows = 1
        if (pb.K == 2 and vec > 1 and pb.SR[1] == 0 and pb.nr > 1 and not pb.red2 and not pb.index
                and not pb.ident_missing and not isinstance(pb.acc, tuple)):
            rows = _rows_per_block(pb.nr, p.get("row_multi", 0))
        units = pb.nb * -(-pb.nr // rows)
        # few groups of long rows (fewer than a quarter of the SMs: A @ x of (10, 10^6),
        # (100, 10^5)): split them further, down to a vector per thread, until there are
        # row_fill blocks per SM; min_items alone left those with 122 and 78 blocks on 132
        # SMs. (10^3, 10^4) (125 groups of 8 rows, each with loads enough in flight) was
        # slower split (docs/tuning.md, `row_fill`)
        if 4 * units <= sm:
            fill = -(-sm * p.get("row_fill", 0) // units)
            most = max(most, min(fill, max(1, J // (block * vec))))

        def shape(cap):
            # occupancy: one wave of blocks (the last of a second wave would run alone)
            split = max(1, min(cap // units if occupancy else -(-cap // units), most))
            chunk = -(-J // split)
            chunk = -(-chunk // vec) * vec
            split = -(-J // chunk)
            return units * split, split, chunk
    if rows > 1:
        # A @ x: several rows per block share each vector of x
        fargs = lambda split: pb.head + (block, min(split, 2), rows, vec,  # noqa: E731
                                              p.get("row_multi_unroll", 2))
        return _Choice(_k.make_rowmulti_kernel, fargs, shape, mis, units, block)
    fargs = lambda split: pb.head + (G, block, min(split, 2), pb.red2, pb.index, vec,  # noqa: E731
                                          p["unroll"])
    return _Choice(_k.make_row_kernel, fargs, shape, mis, R, block)


def _colflat_choice(pb, p, flat):
    """A thin C-contiguous matrix: one flat run of 128-bit vectors; T * VEC must be a
    multiple of p so that every thread's lanes keep their columns."""
    block = p["block"]
    vec, modes, head = flat
    gq = pb.nr // math.gcd(pb.nr, vec * block)
    nvec = max(1, (pb.J * pb.nr - head) // vec)
    # col_flat_group R: groups of R * U blocks (U = VEC * block // p blocks' partials per
    # column position) combine their partials first, R rows per position (0 = one level)
    group = p.get("col_flat_group", 0) * (vec * block // pb.nr)

    def shape(cap):
        want = max(1, min(cap, -(-nvec // block)))
        grid = max(gq, want // gq * gq)
        return grid, max(grid, 2), group
    fargs = pb.head + (block, vec, modes, p.get("col_unroll") or p["unroll"], group > 0)
    return _Choice(_k.make_colflat_kernel, fargs, shape, head, 1, block)


def _col_choice(pb, p, sm, colvec):
    """Columns: tiles of ``CQ`` threads (``VEC`` adjacent outputs each with ``colvec``: the
    vectorised column kernel, 128-bit loads) side by side, ``RB`` rows at a time, the rows
    split across blocks until the blocks fill the GPU."""
    block, J, min_items = p["block"], pb.J, p["min_items"]
    occupancy = p.get("occupancy", False)
    if colvec is not None:
        block = p.get("col_block") or block
        vec, ph, modes = colvec
        nq = -(-(pb.nr + ph) // vec)
    else:
        # column kernel: the output index i must be the contiguous kept dim
        vec, ph, nq = 1, 0, pb.nr
    ct = p.get("col_tile", 0)
    col_items = min_items if p.get("col_min_items") is None else p["col_min_items"]
    if nq <= block // 4:
        CQ = nq
    elif ct:
        # tiles of ct threads side by side (ct * VEC columns), RB = block / ct rows at a
        # time, fewer rows per thread when J is short (RB = 1: no combine in the block)
        def tile_width(items):   # CQ when a thread takes at least `items` rows
            rb = max(1, min(block // ct, J // items))
            return min(block >> (rb.bit_length() - 1), -(-nq // 32) * 32)
        CQ = tile_width(col_items)
        if col_items > min_items and 2 * pb.nb * -(-nq // CQ) < sm * p["blocks_per_sm"]:
            CQ = tile_width(min_items)   # col_min_items only where its tiles fill half a wave
    else:
        CQ = min(block, -(-nq // 32) * 32)
    RB = block // CQ
    units = pb.nb * -(-nq // CQ)
    most = max(1, J // (RB * min_items))   # splits of the rows: min_items rows per thread
    waves = p.get("col_waves", 0)
    cu = p.get("col_unroll") or p["unroll"]
    col_round = p.get("col_round", False)

    def shape(cap, cu=cu):
        # col_round: a thread's rows of a split part in whole rounds of the kernel's unroll
        step = RB * (8 if cu >= 8 else 4 if cu >= 4 else 2 if cu >= 2 else 1) if col_round else 1
        if occupancy:
            split = 1 if units >= cap else max(1, min(cap // units, most))
            if units >= cap and waves > 1:
                # a second, partly filled wave of long blocks: split the rows so that the
                # last wave is as full as possible (e.g. 782 tiles on 528 slots: 2 x 782)
                split = max(range(1, min(waves, most) + 1),
                            key=lambda s: (units * s / cap / -(-units * s // cap), -s))
        else:
            split = max(1, min(-(-cap // units), most))
        chunk = -(-J // split)
        if split > 1:   # whole unrolled rounds of rows per thread
            chunk = -(-chunk // step) * step
        split = -(-J // chunk)
        return units * split, split, chunk
    # col_split_group S: tiles split into at least S parts combine their partial rows in
    # two levels, groups of ceil(sqrt(parts)) parts (0: the tile's last block folds them all)
    split_group = p.get("col_split_group", 0) if colvec is not None else 0

    def group_size(split):
        return math.isqrt(split - 1) + 1 if split_group and split >= max(split_group, 4) else 0
    if colvec is None:
        fargs = lambda split: pb.head + (block, min(split, 2), pb.red2, pb.index, cu)  # noqa: E731
        return _Choice(_k.make_col_kernel, fargs, shape, CQ, units, block, units, RB, cu, group_size)
    osize = np.dtype(pb.acc).itemsize if not isinstance(pb.acc, tuple) and not pb.ident_missing else 0
    vout = (bool(p.get("col_vstore", False)) and pb.out_ok and ph == 0 and pb.orr == 1
            and (pb.nb == 1 or pb.ob % vec == 0) and osize * vec == 16 and not pb.index)
    fargs = lambda split, cu=cu: pb.head + (block, min(split, 2), pb.red2, pb.index, cu, vec, modes,  # noqa: E731
                                                 bool(p.get("col_tail", True)) and all(modes), vout,
                                                 _flight(p.get("col_combine", 2)), bool(split_group))
    # aux: + the group size (* 32768) once the split is known
    return _Choice(_k.make_colvec_kernel, fargs, shape, CQ * 16 + ph, units, block, units, RB, cu, group_size)


def _choose(pb, p, sm) -> _Choice:
    """The kernel family of a reduction: short rows in tiles, rows, a thin matrix's flat run
    of columns, or columns (vectorised where the operands allow)."""
    if pb.row:
        return _rowtile_choice(pb, p, sm) or _row_choice(pb, p, sm)
    if (pb.nb == 1 and not pb.red2 and not pb.index and not pb.ident_missing
            and not isinstance(pb.acc, tuple) and p.get("col_flat", 0)):
        flat = _colflat_modes(pb.ins, pb.K, pb.nr, pb.J, pb.SR, pb.S1, min(p["block"], p["col_flat"]))
        if flat is not None:
            return _colflat_choice(pb, p, flat)
    colvec = None
    if p.get("col_vec", True):
        colvec = _colvec_phase(pb.ins, pb.K, pb.nb, pb.nr, pb.m0, pb.red2, pb.SB, pb.SR, pb.S0, pb.S1,
                               bool(p.get("col_preload", False)))
    return _col_choice(pb, p, sm, colvec)


def plan_launch(f, op, ins, kdims, rdims, kb, acc, ident, init_v, index, out_ok=False):
    """Kernel, launch shape and scalar arguments of one reduction (a dict). ``out_ok``: the
    result is 16-byte aligned at its first element (128-bit stores may write it)."""
    pb = _problem(f, op, ins, kdims, rdims, kb, acc, ident, init_v, index, out_ok)
    p = tuning.params("rowcol")
    sm = runtime.device_info()["sm_count"]
    c = _choose(pb, p, sm)
    factory, block = c.factory, c.block
    acc_full = (np.dtype(bool), acc) if pb.ident_missing else acc
    ins_t = tuple_of(tuple(_buf_t(entry_dtype(e)) for e in ins))
    out_t = _buf_t(acc_full)
    argtypes = (ins_t, out_t, out_t, ptr(np.uint32), I64, I64, I64, I64) + (unituple(I64, pb.K),) * 4 + (I64,) * 7
    lb = _launch_bounds(factory, p, block, not isinstance(acc, tuple) and not pb.ident_missing)

    def build(split, *deep):
        fa = c.fargs(split, *deep) if callable(c.fargs) else c.fargs
        fkey = fa[:4] + (hashable_key(pb.ID),) + (fa[5], hashable_key(init_v)) + fa[7:]
        return _compile(factory, fa, fkey, argtypes, op, None if deep else lb)

    kernel, grid, split, chunk, depth = _sized(c, p, sm, build)
    grid = min(grid, 2**31 - 1)
    nslots, nticks, aux = pb.R * split, c.nticks, c.aux
    if factory is _k.make_colflat_kernel and chunk:
        ngroups = -(-grid // chunk)   # group rows after the blocks' rows; a ticket per group
        nslots = pb.R * (grid + ngroups)
        nticks = 1 + ngroups
    elif factory is _k.make_colvec_kernel and c.group_size(split):
        gs = c.group_size(split)
        ngroups = -(-split // gs)     # per tile: group rows after the parts' rows, a ticket each
        aux += gs * 32768
        nslots = pb.R * (split + ngroups)
        nticks = c.units * (1 + ngroups)
    rowtile = factory is _k.make_rowtile_kernel
    return {"kernel": kernel, "kind": factory.name, "grid": grid,
            "vector_rows": rowtile and bool(c.fargs[-2]), "held_vectors": c.fargs[-1] if rowtile else 0,
            "block": block, "split": split,
            "nslots": nslots,
            "nticks": nticks, "acc_full": acc_full, "flag": pb.ident_missing, "depth": depth,
            "scalars": (pb.nb, pb.nr, pb.m0, pb.m1, pb.SB, pb.SR, pb.S0, pb.S1, pb.ob, pb.orr, int(kb),
                        pb.L0, pb.L1, chunk, aux)}


def _launch_bounds(factory, p, block, scalar_acc):
    """The launch bounds a kernel family is compiled with, or None."""
    if factory is _k.make_rowtile_kernel and p.get("row_tile_min_blocks") and scalar_acc:
        return (block, p["row_tile_min_blocks"])   # caps registers so that blocks stay resident
    if factory is _k.make_colvec_kernel and p.get("col_min_blocks") and scalar_acc:
        return (block, p["col_min_blocks"])
    if factory is _k.make_colflat_kernel and p.get("col_flat_min_blocks"):
        return (block, p["col_flat_min_blocks"])   # the two-level combine needs more registers
    return None


def _sized(c, p, sm, build):
    """``(kernel, grid, split, chunk, depth)``: the launch shape for a provisional number of
    resident blocks and its kernel, then (``occupancy``) the shape for the number the
    compiled kernel really gets (registers, shared memory), and where a column kernel's
    tiles are few, the deep kernel with more rows in flight if its launch qualifies."""
    occupancy = p.get("occupancy", False)
    grid, split, chunk = c.shape(sm * p["blocks_per_sm"])
    kernel = build(split)
    depth = p.get("col_unroll") or p["unroll"]   # rows in flight per thread of a column kernel
    if not occupancy:
        return kernel, grid, split, chunk, depth
    res = min(runtime.resident_blocks(kernel, c.block, p["blocks_per_sm"]), p["blocks_per_sm"])
    grid, split2, chunk = c.shape(sm * res)
    if min(split2, 2) != min(split, 2):
        kernel = build(split2)
    split = split2
    deep = p.get("col_deep", 0) if c.factory is _k.make_colvec_kernel else 0
    # (the deep kernel is compiled only where its launch could qualify: its residency is
    # at most blocks_per_sm)
    if deep and deep > c.cu and 2 * c.units <= sm * p["blocks_per_sm"]:
        # col_deep D: where the tiles are few enough that the rows split across blocks in
        # one wave (tall x @ A, n*p = 10^7 shapes), the kernel with D rows in flight per
        # thread and no launch bound (more registers, fewer blocks per SM); wide, short
        # matrices (many tiles, few rows per thread) keep the bounded kernel
        kd = build(2, deep)
        resd = min(runtime.resident_blocks(kd, c.block, p["blocks_per_sm"]), p["blocks_per_sm"])
        gd, sd, cd = c.shape(sm * resd, deep)
        if 2 * c.units <= sm * resd and cd >= 2 * deep * c.RB:
            kernel = kd if min(sd, 2) == 2 else build(sd, deep)
            grid, split, chunk = gd, sd, cd
            depth = deep
    return kernel, grid, split, chunk, depth


def _flight(n):
    """Rows of partials in flight per thread of a split tile's combiner: 8, 4 or 2 (the
    ``col_combine`` tuning entry, rounded down).

    >>> [_flight(n) for n in (1, 2, 4, 6, 8, 16)]
    [2, 2, 4, 4, 8, 8]
    """
    return 8 if n >= 8 else 4 if n >= 4 else 2


def _buf_at(x, off):
    """Kernel buffer of array ``x`` whose origin is moved by ``off`` elements."""
    if runtime.SIMULATE:
        b = runtime.SimBuffer.of(x)
        return runtime.SimBuffer(b.array, b.origin + off, b.owner) if off else b
    return int(x.data.ptr) + off * x.dtype.itemsize


def _bufs_at(entry, off):
    if isinstance(entry, tuple):
        return tuple(_bufs_at(c, off) for c in entry)
    return _buf_at(entry, off)


def plan_scratch(plan, like, sk):
    """(buffers kept alive, partials' kernel buffers, ticket buffer) of ``plan`` on the stream
    of key ``sk``, made once per plan and stream: the partials are carved out of the stream's
    scratch bytes (:func:`forge_array.runtime.temp.scratch`, uninitialised: every block writes
    its slot before the last one reads them all), the tickets are the stream's counters
    (zero, and left zero by the kernels)."""
    like = first_component(like)
    dts = _flat_dtypes(plan["acc_full"])
    n = plan["nslots"]
    sizes = [-(-n * np.dtype(d).itemsize // 256) * 256 for d in dts]
    raw = temp.scratch(sum(sizes), like, sk)
    parts = []
    off = 0
    for d, size in zip(dts, sizes):
        parts.append(raw[off:off + n * np.dtype(d).itemsize].view(d))
        off += size
    part_b = _unflatten([runtime.buffer_of(t) for t in parts], plan["acc_full"])
    tick = temp.counters(plan["nticks"], like)
    cache = plan["scratch"]
    if len(cache) >= 64:  # many streams (or simulator threads) over time
        cache.clear()
    s = cache[sk] = ((raw, parts, tick), part_b, runtime.buffer_of(tick))
    return s


def execute(plan, ins, out):
    if plan["flag"]:
        out = (plan["empty"](first_component(out).shape, dtype=bool), out)
    if plan["moved"]:
        out_b = _bufs_at(out, plan["out_off"])
        ins_b = tuple(_bufs_at(e, o) for e, o in zip(ins, plan["in_off"]))
    else:
        out_b = _buffer(out)
        ins_b = tuple(_buffer(e) for e in ins)
    if plan["split"] > 1:
        sk = runtime.stream_key()
        s = plan["scratch"].get(sk)
        if s is None:
            s = plan_scratch(plan, ins[0], sk)
        runtime.launch(plan["kernel"], plan["grid"], plan["block"], (ins_b, out_b, s[1], s[2]) + plan["scalars"],
                       on=sk)
    else:
        # one block per output: no partials and no tickets (the kernel never reads them)
        tick = _first_leaf(out_b)
        runtime.launch(plan["kernel"], plan["grid"], plan["block"], (ins_b, out_b, out_b, tick) + plan["scalars"])


def _first_leaf(b):
    while isinstance(b, tuple):
        b = b[0]
    return b


def _flat_dtypes(dt):
    if isinstance(dt, tuple):
        out = []
        for d in dt:
            out.extend(_flat_dtypes(d))
        return out
    return [dt]


def _unflatten(items, dt):
    it = iter(items)

    def rec(d):
        if isinstance(d, tuple):
            return tuple(rec(x) for x in d)
        return next(it)

    return rec(dt)


_KERNELS = Cache("dispatch.axis_reduce.KERNELS")


def _compile(factory, fargs, fkey, argtypes, op, launch_bounds=None):
    key = (factory, fkey, argtypes, launch_bounds)
    k = _KERNELS.get(key)
    if k is None:
        try:
            k = factories.kernel(factory, fargs, argtypes, launch_bounds=launch_bounds)
        except TypeError as exc:
            msg = str(exc)
            if op.name not in msg:
                raise TypeError(f"axis reduction with operator {op.name}: {msg}") from exc
            raise
        _KERNELS[key] = k
    return k


