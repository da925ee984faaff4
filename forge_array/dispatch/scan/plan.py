"""Launch planning of the scans: which kernel (tile, pipeline, row, narrow, column, direct) for a
layout, its shape, and plans replayed by a dictionary lookup.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import runtime
from ...kernels import scan_spec as _spec
from ...runtime import factories, tuning
from ...runtime.param_types import I64, ptr, tuple_ptr
from .._common import collapse
from .state import (
    after_launch,
    common_layout,
    fit_items,
    init_buffers,
    items_for,
    items_for_size,
    tile_state,
)

# the kernel factories (their modules, and numba, load where a kernel must be built)
_COLUMN = factories.factory("forge_array.kernels.scan.column", "make_column_scan")
_DIRECT = factories.factory("forge_array.kernels.scan.column_direct", "make_column_direct")
_NARROW = factories.factory("forge_array.kernels.scan.narrow", "make_narrow_scan")
_PIPELINE = factories.factory("forge_array.kernels.scan.pipeline", "make_pipeline_scan")
_ROW = factories.factory("forge_array.kernels.scan.row", "make_row_scan")
_TILE = factories.factory("forge_array.kernels.scan.tile", "make_tile_scan")

# ---- launch plans: everything but the operands' addresses, replayed by a dict lookup


class _Plan:
    """One planned launch: kernel, grid and block, the init buffers (kept alive), the scalar
    arguments between ``init`` and the tile states, the status storage and the number of
    slots and tiles it needs. For replay (``_FAST``): the origin offsets (elements) of the
    input and output views, the result shape, whether the input was flattened, the output
    misalignment the kernel was specialised for and, for one CuPy output, what the replay
    builds it with (the device allocator, ``cupy.ndarray``, its bytes and the byte offset of
    its origin)."""

    __slots__ = ("kernel", "grid", "block", "init", "initb", "scalars", "state", "slots",
                 "ntiles", "in_off", "out_off", "shape", "flat", "out_mis", "tail", "empty",
                 "shared", "alloc", "ndarray", "nbytes", "out_boff")

    def __init__(self):
        self.shared = 0  # bytes of dynamic shared memory per block
        self.alloc = None  # on the GPU: the device allocator a replay takes its output from

    def launch(self, src, dst, on=None):
        st = self.state
        if st is None:  # no tile states (direct column scan)
            runtime.launch(self.kernel, self.grid, self.block, (src, dst, self.initb) + self.scalars,
                           0, on)
            return
        if st.slots < self.slots:
            st.grow(max(self.slots, 2 * st.slots))
        status, vals, counter = st.buffers()
        runtime.launch(self.kernel, self.grid, self.block,
                       (src, dst, self.initb) + self.scalars
                       + (status, vals, counter, st.base, st.epoch) + self.tail, self.shared, on)
        after_launch(st, self.ntiles)  # tickets taken from the counter


    def stored_form(self, x, out):
        """The description of this plan replayed on the CuPy array ``x`` into ``out`` for
        the stored launches (:mod:`forge_array.runtime.stored`): the tile state becomes the
        store's own (status words, value slots, counter, base and epoch), the init values
        constants; None in the simulator or for a flattened operand."""
        if runtime.SIMULATE or self.flat:
            return None
        in_off = self.in_off * x.dtype.itemsize
        out_off = self.out_off * out.dtype.itemsize
        src, dst = x.data.ptr + in_off, out.data.ptr + out_off
        pointers = {src: ("in", 0, in_off), dst: ("out", 0, out_off)}
        consts = []
        for j, (b, address) in enumerate(zip(self.init, self.initb)):
            pointers[address] = ("const", j)
            consts.append([b.dtype.str, b.get().tobytes().hex()])
        st = self.state
        state = None
        args = ((src,), (dst,), self.initb) + self.scalars
        if st is not None:
            status, vals, counter = st.buffers()
            pointers[status] = ("state", "status")
            pointers[counter] = ("state", "counter")
            for j, v in enumerate(vals):
                pointers[v] = ("state", "vals", j)
            args += (status, vals, counter, ["state", "base"], ["state", "epoch"]) + self.tail
            state = {"packed": st.packed, "acc": [np.dtype(d).str for d in st.acc_dtypes],
                     "slots": int(self.slots), "ntiles": int(self.ntiles),
                     "counter_words": int(st.counter.size)}
        if len(pointers) != 2 + len(consts) + (0 if st is None else 2 + len(st.vals)):
            return None   # two parameters at one address
        desc = runtime.stored_form(self.kernel, self.grid, self.block, args, pointers, self.shared)
        if desc is not None:
            desc.update(outs=[[list(self.shape), out.dtype.str]], reshape=None, consts=consts,
                        state=state)
        return desc


class ScanCall(NamedTuple):
    """What a scan call asks for, before its operands' layouts are read: the operator ``fn``
    (on tuples of the operands' elements when ``tuple_op``), the operands' dtypes
    ``in_dtypes`` scanned in ``acc_dtypes`` along ``axis`` (``reverse``: from its end), from
    ``init`` (None, one scalar per operand, or with ``init_batch`` one C-contiguous 1-D array
    per operand of a value per batch row: the rows of ``moveaxis(x, axis, -1)`` in C order),
    ``shift`` (1: the initial value first, as ``include_initial`` / ``exclusive`` place it),
    ``m`` outputs along the axis, ``det`` (the deterministic scan), ``mapfn`` (an element-wise
    expression of the operands scanned in their place)."""
    fn: object
    tuple_op: bool
    in_dtypes: object   # a sequence of dtypes, one per operand
    acc_dtypes: object
    axis: int
    init: object
    shift: int
    m: int
    reverse: bool
    det: bool
    mapfn: object = None
    init_batch: bool = False


def launch_scan(call: ScanCall, xs, outs):
    """Map the scan ``call`` of any views ``xs`` into ``outs`` onto the kernels and launch.
    Returns the plan when it can be replayed for operands of the same layouts (no temporary
    copies were needed)."""
    fn, tuple_op, in_dtypes, acc_dtypes, axis, init, shift, m, reverse, det, mapfn, init_batch = call
    xp = runtime.array_module(xs[0])
    xv = [xp.moveaxis(a, axis, -1) for a in xs]
    ov = [xp.moveaxis(o, axis, -1) for o in outs]
    if reverse:
        xv = [a[..., ::-1] for a in xv]
        ov = [o[..., ::-1] for o in ov]
    copied = False
    sx = common_layout(xv)
    if sx is None:
        xv = [xp.ascontiguousarray(a) for a in xv]
        sx = runtime.element_strides(xv[0])
        copied = True
    so = common_layout(ov)
    tmp = None
    if so is None:
        tmp, ov = ov, [xp.empty(o.shape, dtype=o.dtype) for o in ov]
        so = runtime.element_strides(ov[0])
    n = xv[0].shape[-1]
    bshape, (bx, bo) = collapse(xv[0].shape[:-1], [sx[:-1], so[:-1]])
    if len(bshape) > 2:  # rare: make the batch dimensions collapsible
        xv = [xp.ascontiguousarray(a) for a in xv]
        sx = runtime.element_strides(xv[0])
        copied = True
        if tmp is None:
            tmp, ov = ov, [xp.empty(o.shape, dtype=o.dtype) for o in ov]
            so = runtime.element_strides(ov[0])
        bshape, (bx, bo) = collapse(xv[0].shape[:-1], [sx[:-1], so[:-1]])
    pad = 2 - len(bshape)
    bshape = (1,) * pad + tuple(bshape)
    bx = (0,) * pad + tuple(bx)
    bo = (0,) * pad + tuple(bo)
    nbatch = bshape[0] * bshape[1]
    s_in, s_out = sx[-1], so[-1]
    plan = plan_scan(Scan(fn, tuple_op, xv, ov, in_dtypes, acc_dtypes, init, shift, n, m, nbatch,
                          bshape[1], s_in, bx, s_out, bo, det, mapfn, init_batch))
    plan.launch(tuple(runtime.buffer_of(a) for a in xv), tuple(runtime.buffer_of(o) for o in ov))
    if tmp is not None:
        for t, o in zip(tmp, ov):
            t[...] = o
        return None
    if copied:
        return None
    plan.in_off = (n - 1) * runtime.element_strides(xs[0])[axis] if reverse else 0
    plan.out_off = (m - 1) * runtime.element_strides(outs[0])[axis] if reverse else 0
    plan.shape = tuple(outs[0].shape)
    plan.out_mis = runtime.misalignment(outs[0])
    plan.empty = xp.empty
    if not runtime.SIMULATE and len(outs) == 1 and xp is not np:
        plan.alloc = runtime.device_allocator()
        plan.ndarray = xp.ndarray
        plan.nbytes = outs[0].size * outs[0].dtype.itemsize
        plan.out_boff = plan.out_off * outs[0].dtype.itemsize
    return plan


def _row_lead(xv, isz, bx, nbatch, nb1):
    """Elements before a 16-byte boundary at the start of every contiguous row of ``xv``
    (the tiles' ``lead``), or None when the rows cannot all start in one 16-byte phase
    (misaligned elements, batch strides not multiples of the vector)."""
    V = 16 // isz
    mis = runtime.misalignment(xv[0])
    if mis % isz or any(b % V for b, sz in zip(bx, (nbatch // nb1, nb1)) if sz > 1):
        return None
    return mis // isz


def _one_phase(xv):
    """Whether the leaves ``xv`` of a mapped scan start in one 16-byte phase (with one item
    size, see :func:`~forge_array.kernels.scan_spec.vec_ok`, one 128-bit load per leaf reads
    the same elements of each)."""
    mis = runtime.misalignment(xv[0])
    return all(runtime.misalignment(a) == mis for a in xv[1:])


def _output_in_phase(ov, osz, V, shift, lead, bo, nbatch, nb1):
    """Whether output element ``start + k + shift`` is 16-byte aligned whenever input element
    ``start + k`` is (``k`` a multiple of ``V``): the same phase, batch strides multiples of
    ``V`` (then whole output tiles go out as 16-byte vectors or bulk stores)."""
    omis = runtime.misalignment(ov[0])
    return (omis % osz == 0 and (omis // osz + shift - lead) % V == 0
            and all(b % V == 0 for b, sz in zip(bo, (nbatch // nb1, nb1)) if sz > 1))


def _tile_argtypes(in_dtypes, acc_dtypes, st):
    """Argument types of the tile and pipelined scans (buffers, 11 scalars, tile states)."""
    return (tuple_ptr(in_dtypes), tuple_ptr(acc_dtypes), tuple_ptr(acc_dtypes)) + (I64,) * 11 + (
        ptr(st.status.dtype), tuple_ptr(acc_dtypes), ptr(np.uint64), I64, I64, I64)


class Scan(NamedTuple):
    """A batched scan as the planner reads it: ``nbatch`` rows of ``n`` elements (``m`` out)
    in ``nb1``-row groups, element strides ``s_in`` / ``s_out`` along a row and ``bx`` /
    ``bo`` between rows and groups; ``xv`` / ``ov`` the row-major views (for alignment);
    ``shift`` 1 where the output starts with the init (exclusive or ``include_initial``);
    ``mapfn`` an element-wise expression of the inputs scanned in their place."""

    fn: object
    tuple_op: bool
    xv: list
    ov: list
    in_dtypes: object   # a sequence of dtypes, one per operand
    acc_dtypes: object
    init: object
    shift: int
    n: int
    m: int
    nbatch: int
    nb1: int
    s_in: int
    bx: tuple
    s_out: int
    bo: tuple
    det: bool
    mapfn: object = None
    init_batch: bool = False  # init: one value per batch row (arrays), not one for all

    @property
    def has_init(self) -> bool:
        return self.init is not None


def plan_scan(s: Scan):
    """Choose the kernel and launch shape for the batched scan ``s`` and return the
    :class:`_Plan` (host side of :mod:`..kernels.scan`): the direct column kernel for short
    columns, the row kernel for many short contiguous rows, the narrow kernel for axis 0 of a
    few columns, the column kernel for batches along the contiguous axis and many short
    rows, else the pipelined (sm_90) or the tile scan.  A mapped scan (``s.mapfn``) takes
    the tile kernel, whatever the batch (128-bit loads when its leaves share an item size
    and a 16-byte phase)."""
    pt = tuning.params("scan")
    pc = tuning.params("scan_columns")
    tile = pt["block"] * items_for(pt, s.acc_dtypes)
    n, nbatch, bx = s.n, s.nbatch, s.bx
    # columns: the batch runs along the contiguous axis; a scan of length 1 is one too,
    # whatever its stride (a row of one-element scans, e.g. axis 0 of a (1, p) matrix)
    columns = s.nb1 > 1 and abs(bx[1]) == 1 and (n == 1 or (abs(s.s_in) != 1 and n > 1))
    # many short rows go to the column kernel (a thread per row); rows_column_max caps their
    # length (default: a quarter of the tile scan's tile)
    rcm = pc.get("rows_column_max")
    short_rows = nbatch >= 64 and (n * 4 < tile if rcm is None else n <= int(rcm))
    sync = (bool(pt.get("wide", True)), bool(pt.get("release", False)), int(pt.get("spin_ns", 0)))
    p = _Plan()
    p.init = s.init if s.init_batch else init_buffers(s.xv[0], s.acc_dtypes, s.init)
    p.initb = tuple(runtime.buffer_of(b) for b in p.init)
    p.flat = False
    if s.init_batch:  # the narrow and column kernels read one init per batch row
        if columns and not s.tuple_op and not s.det and _narrow_fit(pc, s):
            return _plan_narrow(p, pc, s)
        return _plan_columns(p, pc, s, columns, sync)
    if s.mapfn is None:  # only the tile kernel maps its loads
        plain = not s.tuple_op
        if (columns and plain and pc.get("direct", True) and abs(bx[1]) == 1
                and n <= int(pc.get("direct_rows", 16))):
            return _plan_direct(p, pc, s)
        if nbatch >= 64 and plain and _rows_staged_fit(pc, s):
            return _plan_rows(p, pc, s)
        if columns and plain and not s.det and _narrow_fit(pc, s):
            return _plan_narrow(p, pc, s)
        if columns or short_rows:
            return _plan_columns(p, pc, s, columns, sync)
        if pt.get("pipeline", False) and n * nbatch >= int(pt.get("pipe_min", 0)):
            pp = _plan_pipeline(p, pt, s, sync)
            if pp is not None:
                return pp
    return _plan_tile(p, pt, s, sync)


def _plan_columns(p, pc, s: Scan, columns: bool, sync: tuple):
    """Plan of :func:`..kernels.scan.make_column_scan`: a thread per column (or short row),
    blocks of ``cb`` columns in strips, each column's chunks chained by a look-back."""
    n, nbatch, bx = s.n, s.nbatch, s.bx
    block = pc["block"]
    if columns and nbatch <= block and sum(d.itemsize for d in s.acc_dtypes) <= 8:
        block = int(pc.get("strip_block") or block)  # one strip of columns: its own block size
    items = pc["items"] if columns else int(pc.get("rows_items", pc["items"]))
    cb = min(block, nbatch)
    G = block // cb
    nstrips = -(-nbatch // cb)
    nchunks = -(-n // (G * items))
    ntiles = nstrips * nchunks
    st = tile_state(s.xv[0], s.acc_dtypes, ntiles * cb, sync[0])
    staged = 0
    if pc.get("staged", True) and nbatch == s.nb1 and s.s_in > 0 and bx[1] > 0:
        # each block's elements are ONE dense range: stage it through shared memory
        # with coalesced loads (and stores when the output has the same layout)
        strip = bx[1] == 1 and s.s_in == nbatch and nstrips == 1
        if (strip and pc.get("staged_strip", True)) or (s.s_in == 1 and bx[1] == n and nchunks == 1):
            staged = 2 if (s.shift == 0 and s.s_out == s.s_in and s.bo[1] == bx[1]) else 1
    # few columns per block: a warp per column's look-back (32 chunks per round trip)
    wlb = nchunks > 1 and cb <= int(pc.get("warp_lookback_cols", 16))
    argtypes = (tuple_ptr(s.in_dtypes), tuple_ptr(s.acc_dtypes),
                tuple_ptr(s.acc_dtypes)) + (I64,) * 13 + (
        ptr(st.status.dtype), tuple_ptr(s.acc_dtypes),
        ptr(np.uint64), I64, I64)
    p.kernel = factories.kernel(
        _COLUMN,
        (s.fn, s.tuple_op, s.in_dtypes, s.acc_dtypes, block, items, s.shift, s.has_init, bool(s.det))
        + sync + (staged, int(pc.get("lookback", 0)), wlb) + ((True,) if s.init_batch else ()),
        argtypes)
    p.scalars = (n, s.m, nbatch, s.nb1, s.s_in, bx[0], bx[1], s.s_out, s.bo[0], s.bo[1], cb, nstrips,
                 nchunks)
    p.tail = ()
    p.grid, p.block, p.state, p.slots = ntiles, block, st, ntiles * cb
    p.ntiles = ntiles if nchunks > 1 else 0  # one chunk per column: tiles = blockIdx.x
    return p


def _plan_tile(p, pt, s: Scan, sync: tuple):
    """Plan of :func:`..kernels.scan.make_tile_scan`: tiles of ``block * items`` elements of
    every row chained by a decoupled look-back, 128-bit loads (and stores) where the rows
    can start 16-byte aligned."""
    in_dtypes, acc_dtypes, n, nbatch, nb1 = s.in_dtypes, s.acc_dtypes, s.n, s.nbatch, s.nb1
    ticket = pt.get("ticket", "atomic")
    # 128-bit loads: contiguous rows of one value of < 16 bytes, tiles shifted by `lead`
    # elements to start 16-byte aligned, batch strides multiples of the vector
    lead = 0
    aligned = False
    isz = in_dtypes[0].itemsize
    # (a mapped scan: every leaf in one 16-byte phase; vec_ok checks their item sizes)
    mapped = s.mapfn is not None
    if (not s.tuple_op and s.s_in == 1 and isz < 16 and pt.get("vector", True)
            and (len(in_dtypes) == 1 or (mapped and _one_phase(s.xv)))):
        rl = _row_lead(s.xv, isz, s.bx, nbatch, nb1)
        if rl is not None:
            aligned, lead = True, rl
    block = pt["block"]
    items = items_for_size(pt, items_for(pt, acc_dtypes), n * nbatch, acc_dtypes)
    items = fit_items(pt, items, n, in_dtypes, acc_dtypes, s.tuple_op)
    tile = block * items
    vec = aligned and _spec.vec_ok(in_dtypes, acc_dtypes, block, items, mapped)
    if not vec:
        lead = 0
    ovec = False
    if vec and s.s_out == 1 and _spec.ovec_ok(in_dtypes, acc_dtypes, items, mapped):
        # output element start + k + shift must be 16-byte aligned whenever input element
        # start + k is (k a multiple of V): same phase, batch strides multiples of V
        ovec = _output_in_phase(s.ov, acc_dtypes[0].itemsize, 16 // isz, s.shift, lead, s.bo, nbatch, nb1)
    tpr = -(-(n + lead) // tile)
    ntiles = tpr * nbatch
    st = tile_state(s.xv[0], acc_dtypes, ntiles, sync[0])
    argtypes = _tile_argtypes(in_dtypes, acc_dtypes, st)
    # launch bound (min_blocks resident blocks per SM) for 128-bit paths of <= 4-byte
    # scalars with <= 64 bytes per thread: float32 x 16 needs 48 registers without
    # keep_items (5 blocks of 256 per SM without spilling), 64 with it (ptxas -v)
    mb = pt.get("min_blocks")
    small = len(acc_dtypes) == 1 and acc_dtypes[0].itemsize <= 4 and items * acc_dtypes[0].itemsize <= 64
    # (not for a mapped scan: each leaf's loads are in flight at once)
    lb = (block, mb) if mb and vec and small and not mapped and block * mb <= 2048 else None
    det = bool(s.det)
    p.kernel = factories.kernel(
        _TILE,
        (s.fn, s.tuple_op, in_dtypes, acc_dtypes, block, items, s.shift, s.has_init, det, vec,
         ovec, ticket) + sync + (bool(pt.get("keep_items", False)),
                                 int(pt.get("det_lookback" if det else "lookback", 4)),
                                 bool(pt.get("shared_vec", False)))
        + _optional_args(s.mapfn, _det_group(pt) if det else None),
        argtypes, lb)
    p.scalars = (n, s.m, nb1, s.s_in, s.bx[0], s.bx[1], s.s_out, s.bo[0], s.bo[1], lead, tpr)
    p.tail = (ntiles,)
    grid = ntiles
    if ticket == "persist":
        per_sm = int(pt.get("persist", 0)) or (mb or 4)
        grid = min(ntiles, per_sm * runtime.device_info()["sm_count"])
    p.grid, p.block, p.state, p.slots = grid, block, st, ntiles
    # tickets taken from the counter: one per tile, plus one per block that finds none left
    # ("persist"); none when tiles come from blockIdx.x (rows of one tile, or "block")
    p.ntiles = 0 if (tpr == 1 or ticket == "block") else ntiles + (grid if ticket == "persist" else 0)
    return p


def _optional_args(*args):
    """The trailing optional factory arguments ``args`` up to the last one that is not None
    (so that a kernel built without them keeps its cache key).

    >>> _optional_args(None, (32, 32)), _optional_args(None, None), _optional_args(len)
    ((None, (32, 32)), (), (<built-in function len>,))
    """
    while args and args[-1] is None:
        args = args[:-1]
    return args


def _det_group(pt):
    """``(group, groups)`` of the deterministic group look-back (tuning ``det_group``,
    ``det_groups``; a group of 0: the fixed window of ``det_lookback``), or None."""
    g = int(pt.get("det_group", 0))
    return (g, int(pt.get("det_groups", 1))) if g else None


#: static shared memory of one block (the pipeline's buffers must fit without opting in to
#: dynamic shared memory)
_STATIC_SHARED = 48 * 1024


def _plan_pipeline(p, pt, s: Scan, sync: tuple):
    """Plan of :func:`..kernels.scan.pipeline.make_pipeline_scan` (``scan.pipeline``): one
    scalar operand of 2, 4 or 8 bytes scanned in its own type along contiguous rows whose
    tiles can start 16-byte aligned (the same phase in every row), on sm_90 or later; a grid
    of persistent blocks. None when the scan does not qualify (the tile scan takes it)."""
    in_dtypes, acc_dtypes, xv, n, nbatch, nb1, bx = s.in_dtypes, s.acc_dtypes, s.xv, s.n, s.nbatch, s.nb1, s.bx
    det = bool(s.det)
    if s.tuple_op or len(in_dtypes) != 1 or len(acc_dtypes) != 1 or in_dtypes[0] != acc_dtypes[0]:
        return None
    acc = acc_dtypes[0]
    isz = acc.itemsize
    if isz not in (2, 4, 8) or s.s_in != 1 or runtime.target_cc() < (9, 0):
        return None
    lead = _row_lead(xv, isz, bx, nbatch, nb1)
    if lead is None:
        return None
    warps, vectors, stages = int(pt["pipe_warps"]), int(pt["pipe_vectors"]), int(pt["pipe_stages"])
    lookers = int(pt.get("pipe_lookers", 1))
    group = max(1, int(pt.get("pipe_group", 1)))
    block, tile, nbytes = _spec.pipeline_shape(acc, warps, vectors, stages, lookers)
    if nbatch > 1 and n < float(pt.get("pipe_row_tiles", 16)) * tile:
        # short rows: mostly partial tiles; below about half a tile per row the tile scan is
        # faster (H200, float32 rows of 3000: 420 against 566 us; rows of 1.5 tiles: 257-261
        # against 316, since partial tiles move by bulk copies of their aligned middle)
        return None
    # tile buffers beyond the static limit: dynamic shared memory (not in the simulator)
    extra = _spec.pipeline_scratch_bytes(acc, warps, stages)
    dynamic = nbytes + extra + 256 > _STATIC_SHARED or bool(pt.get("pipe_dynamic", False))
    if dynamic and (runtime.SIMULATE or nbytes + extra > 227 * 1024):
        return None
    ovec = s.s_out == 1 and _output_in_phase(s.ov, isz, 16 // isz, s.shift, lead, s.bo, nbatch, nb1)
    tpr = -(-(n + lead) // tile)
    ntiles = tpr * nbatch
    wide = sync[0]
    st = tile_state(xv[0], acc_dtypes, ntiles, wide)
    if _spec.TRACE:
        st.counter_room(_spec.trace_words(group * (-(-ntiles // group))))
    argtypes = _tile_argtypes(in_dtypes, acc_dtypes, st)
    p.kernel = factories.kernel(
        _PIPELINE,
        (s.fn, acc, warps, vectors, stages, s.shift, s.has_init, ovec) + sync
        + (int(pt.get("det_lookback" if det else "pipe_lookback", 1)), dynamic, lookers, group,
           bool(_spec.TRACE), det) + _optional_args(_det_group(pt) if det else None), argtypes)
    p.shared = nbytes if dynamic else 0
    p.scalars = (n, s.m, nb1, s.s_in, bx[0], bx[1], s.s_out, s.bo[0], s.bo[1], lead, tpr)
    p.tail = (ntiles,)
    # blocks per SM: as many as the shared memory of an sm_90 SM (228 KB, 1 KB reserved per
    # block) holds, unless the tables say otherwise
    per_sm = int(pt.get("pipe_blocks_per_sm", 0)) or max(1, 228 * 1024 // (nbytes + extra + 1024))
    per_sm = min(per_sm, max(1, 2048 // block))
    grid = max(1, min(ntiles, per_sm * runtime.device_info()["sm_count"]))
    p.grid, p.block, p.state, p.slots = grid, block, st, ntiles
    # tickets of `group` tiles; every block takes one ticket past the last tile (its
    # producer's stop signal) except the one whose group holds the last tile, if partial
    p.ntiles = group * (-(-ntiles // group) + grid - (1 if ntiles % group else 0))
    return p


def _rows_staged_fit(pc, s: Scan):
    """Whether :func:`..kernels.scan.make_row_scan` takes this batched scan: one operand of
    a 4- or 8-byte integer or float dtype scanned in its own dtype or one it casts to safely
    (int32 -> int64, float32 -> float64), inclusive, exclusive or with ``include_initial``,
    forwards or reversed, rows of at most ``rows_staged_max`` elements,
    adjacent and contiguous in the input and in the output (``R * n`` consecutive elements,
    ``R * m`` out, both running in the scan's direction or both against it), naturally
    aligned."""
    in_dtypes, acc_dtypes, n, m, s_in = s.in_dtypes, s.acc_dtypes, s.n, s.m, s.s_in
    vecs = int(pc.get("rows_staged_vecs", 0))
    if not vecs or len(in_dtypes) != 1 or len(acc_dtypes) != 1:
        return False
    ind, acc = np.dtype(in_dtypes[0]), np.dtype(acc_dtypes[0])
    if ind != acc and not (ind.kind in "iuf" and acc.kind in "iuf" and ind.itemsize in (4, 8)
                           and np.can_cast(ind, acc, "safe")):
        return False
    isz = acc.itemsize
    if isz not in (4, 8) or (m != n and not s.shift):
        return False
    if (s.shift or s_in < 0) and not pc.get("rows_staged_flags", True):
        return False
    longv = int(pc.get("rows_staged_long_vecs", 0))
    while 2 * vecs <= longv:            # the longest tile: vecs doubled (see _plan_rows)
        vecs *= 2
    if n > min(int(pc.get("rows_staged_max", 128)), vecs * 32 * (16 // isz)):
        return False
    if s.nbatch != s.nb1 or abs(s_in) != 1 or s.s_out != s_in or s.bx[1] != n or s.bo[1] != m:
        return False
    return runtime.misalignment(s.xv[0]) % ind.itemsize == 0 and runtime.misalignment(s.ov[0]) % isz == 0


def _plan_rows(p, pc, s: Scan):
    """Plan of :func:`..kernels.scan.make_row_scan` (see :func:`_rows_staged_fit`): one wave
    of persistent blocks whose warps take tiles of whole rows in turn. Rows longer than a
    tile of ``rows_staged_vecs`` vectors per lane take tiles of twice, four times ... as many
    vectors, up to ``rows_staged_long_vecs``: the smallest that holds a row, in
    proportionally smaller blocks and more of them per SM (the same shared memory per
    block and per SM). A converted input (``ind``) has its own tile beside the result's:
    half-size blocks, twice as many per SM. ``shift``: output rows of ``m`` elements starting
    with the init (gathered from the scanned tile as it is stored); ``reverse``: the rows run
    backwards in memory."""
    acc, n, m, nbatch = s.acc_dtypes[0], s.n, s.m, s.nbatch
    block = int(pc.get("rows_staged_block", 256))
    vecs = int(pc["rows_staged_vecs"])
    per_sm = int(pc.get("rows_staged_blocks_per_sm", 4))
    isz = acc.itemsize
    longv = int(pc.get("rows_staged_long_vecs", 0))
    v = vecs
    while n > v * 32 * (16 // isz) and 2 * v <= longv:
        v *= 2
    block, per_sm, vecs = max(32, block * vecs // v), per_sm * v // vecs, v
    ind = np.dtype(s.in_dtypes[0])
    if ind != acc and block > 32:
        block, per_sm = block // 2, per_sm * 2
    tw = vecs * 32 * (16 // isz)
    tiles = -(-nbatch // (tw // n))
    wpb = block // 32
    argtypes = (tuple_ptr((ind,)), tuple_ptr((acc,)),
                tuple_ptr((acc,)), I64, I64, I64, I64)
    fargs = (s.fn, acc, block, vecs, s.has_init, ind if ind != acc else None, bool(s.shift), s.s_in < 0)
    p.kernel = factories.kernel(_ROW, fargs, argtypes)
    # rows_staged_bound: where registers keep some of the grid's blocks per SM from being
    # resident together (shifted rows: 80 registers, 3 blocks of 256 per SM of the grid's 4;
    # the persistent grid's last blocks would then run after the others), the kernel with a
    # launch bound that fits them all, if it does
    if (pc.get("rows_staged_bound", True) and block * per_sm <= 2048
            and runtime.resident_blocks(p.kernel, block, per_sm) < per_sm):
        kb = factories.kernel(_ROW, fargs, argtypes, (block, per_sm))
        if runtime.resident_blocks(kb, block, per_sm) >= per_sm:
            p.kernel = kb
    aux = runtime.misalignment(s.xv[0]) // ind.itemsize + 16 * (runtime.misalignment(s.ov[0]) // isz)
    p.scalars = (n, m, nbatch, aux)
    p.grid = max(1, min(-(-tiles // wpb), per_sm * runtime.device_info()["sm_count"]))
    p.block = block
    p.state, p.slots, p.ntiles = None, 0, 0
    p.tail = ()
    return p


def _narrow_fit(pc, s: Scan):
    """Whether :func:`..kernels.scan.narrow.make_narrow_scan` takes this batched scan: axis 0
    of a C-contiguous ``(n, p)`` block (input and output alike: row stride ``p``, unit column
    stride) of ``2 .. narrow_max`` columns (at most 32 with flag words, ``narrow_packed`` 0),
    one 4- or 8-byte dtype scanned in itself, both naturally aligned (inclusive, exclusive or
    with ``include_initial``; one ``init`` or one per column)."""
    in_dtypes, acc_dtypes, nbatch = s.in_dtypes, s.acc_dtypes, s.nbatch
    widest = _spec.MAX_PACKED_COLUMNS if int(pc.get("narrow_packed", 0)) else _spec.MAX_COLUMNS
    cols = min(int(pc.get("narrow_max", 0)), widest)
    if not 2 <= nbatch <= cols or len(in_dtypes) != 1 or in_dtypes[0] != acc_dtypes[0]:
        return False
    isz = acc_dtypes[0].itemsize
    if isz not in (4, 8):
        return False
    if nbatch != s.nb1 or s.bx[1] != 1 or s.s_in != nbatch or s.bo[1] != 1 or s.s_out != nbatch:
        return False
    return runtime.misalignment(s.xv[0]) % isz == 0 and runtime.misalignment(s.ov[0]) % isz == 0


def _plan_narrow(p, pc, s: Scan):
    """Plan of :func:`..kernels.scan.narrow.make_narrow_scan` (see :func:`_narrow_fit`): one
    block per tile of ``T`` whole rows, tile ids from the ticket counter, ``p`` value slots
    per tile behind one flag word."""
    acc_dtypes, n, nbatch = s.acc_dtypes, s.n, s.nbatch
    acc = acc_dtypes[0]
    block, items = narrow_shape(pc, nbatch, acc.itemsize)
    _, _, T = _spec.tile_rows(block, items, nbatch)
    ntiles = -(-n // T)
    packed = int(pc.get("narrow_packed", 0))  # > 0: packed word per (tile, column)
    st = tile_state(s.xv[0], acc_dtypes, ntiles * nbatch, flags=not packed)
    argtypes = (tuple_ptr((acc,)),) * 3 + (I64,) * 4 + (
        ptr(st.status.dtype), tuple_ptr((acc,)), ptr(np.uint64),
        I64, I64)
    p.kernel = factories.kernel(
        _NARROW,
        (s.fn, acc, block, items, s.has_init, int(pc.get("narrow_prefix_every", 1)), packed,
         bool(pc.get("narrow_wide", False)), int(s.shift)) + ((True,) if s.init_batch else ()),
        argtypes)
    isz = acc.itemsize
    aux = runtime.misalignment(s.xv[0]) // isz + 16 * (runtime.misalignment(s.ov[0]) // isz)
    p.scalars = (n, s.m, nbatch, aux)
    p.tail = ()
    p.grid, p.block, p.state = ntiles, block, st
    p.slots, p.ntiles = ntiles * nbatch, ntiles
    return p


def narrow_shape(pc, p: int, isz: int) -> tuple[int, int]:
    """Threads per block and elements per thread of the narrow kernel's tile for ``p``
    columns of ``isz`` bytes: ``narrow_block`` threads and ``narrow_bytes`` per thread; a
    matrix of more columns than ``narrow_block`` (packed status words) takes blocks of
    ``narrow_max`` threads rounded up to a warp (one specialisation for all of them), with
    fewer elements per thread where the tile and three values per thread would overflow a
    block's 48 KiB of static shared memory.

    >>> narrow_shape({"narrow_block": 160, "narrow_bytes": 272, "narrow_max": 256}, 100, 4)
    (160, 68)
    >>> narrow_shape({"narrow_block": 160, "narrow_bytes": 272, "narrow_max": 256}, 200, 4)
    (256, 44)
    """
    block = int(pc.get("narrow_block", 256))
    items = max(1, int(pc.get("narrow_bytes", 128)) // isz)
    if p > block:
        block = -(-max(int(pc.get("narrow_max", 0)), p) // 32) * 32
    # the tile, the group totals, the column aggregates and prefixes (the tile id and the
    # alignment in the last 64 bytes)
    fit = (_STATIC_SHARED - 64 - (3 * block + 2) * isz) // (block * isz)
    return block, max(1, min(items, fit))


def _plan_direct(p, pc, s: Scan):
    """Plan of :func:`..kernels.scan.make_column_direct`: short columns (``n <=
    direct_rows``) adjacent in memory, one chunk per column, so no look-back: each thread
    scans ``VC`` adjacent columns in registers (128-bit loads / stores where the layout
    allows: one batch dimension, unit column stride, row strides multiples of the vector,
    the same 16-byte phase for every group of ``VC`` columns)."""
    in_dtypes, acc_dtypes, n, nbatch, nb1, bx, bo = s.in_dtypes, s.acc_dtypes, s.n, s.nbatch, s.nb1, s.bx, s.bo
    s_in, s_out = s.s_in, s.s_out
    block = int(pc.get("direct_block") or pc["block"])
    rows = n  # compiled for the exact length ("direct_exact"), else a power of two >= n
    if not pc.get("direct_exact", True):
        rows = 4
        while rows < n:
            rows *= 2
    isz = in_dtypes[0].itemsize
    V = 16 // isz
    vin = vout = False
    lead = 0
    if (pc.get("direct_vec", True) and 4 <= isz <= 8 and nbatch == nb1 and bx[1] == 1
            and s_in % V == 0 and nbatch >= V):
        mis = runtime.misalignment(s.xv[0])
        if mis % isz == 0:
            vin = True
            lead = mis // isz
            osz = acc_dtypes[0].itemsize
            omis = runtime.misalignment(s.ov[0])
            vout = (osz == isz and bo[1] == 1 and s_out % V == 0 and omis % osz == 0
                    and omis // osz == lead)
    VC = V if vin else 1
    argtypes = (tuple_ptr(in_dtypes), tuple_ptr(acc_dtypes),
                tuple_ptr(acc_dtypes)) + (I64,) * 11
    p.kernel = factories.kernel(
        _DIRECT,
        (s.fn, False, in_dtypes, acc_dtypes, block, rows, s.shift, s.has_init, vin, vout), argtypes)
    p.scalars = (n, s.m, nbatch, nb1, s_in, bx[0], bx[1], s_out, bo[0], bo[1], lead)
    groups = -(-(nbatch + lead) // VC)
    p.grid, p.block = -(-groups // block), block
    p.state, p.slots, p.ntiles = None, 0, 0
    p.tail = ()
    return p
