"""The full reduction's dispatch tier: the kernel specification of a call, the launch plan of a
layout, the plan caches, compiling (through :mod:`forge_array.kernels.reduce`) and launching.

- :func:`named_spec` / :func:`generic_spec`: the kernel specification
  (``kernels.reduce.ReduceSpec``) of a named reduction or of ``reduce`` / ``mapreduce``,
  cached per call;
- :func:`plan` / :func:`replay`: the launch of a full reduction of one array, or of the
  arrays of a mapreduce, is a :class:`Launch` (kernel, grid, block and every argument but
  the arrays' and outputs' addresses), cached per layout of the arrays; replaying it costs
  a dictionary look-up, the output allocations and the launch;
- :func:`full_fast` / :func:`mapreduce_fast`: the host fast paths, a call's cached plan
  (``HOT``) replayed with no planning; :func:`launch_named` / :func:`launch_generic` plan,
  remember and launch a call (and describe it for a later process, :mod:`..runtime.stored`);
- :func:`full_reduce`: the general path (any number of arrays, an ``init``, views that
  need a copy first).

Planning needs no numba: the specification and argument types come from
:mod:`forge_array.kernels.reduce_spec`, and the kernel from :func:`..runtime.factories.kernel`,
which imports the kernel module (numba's CUDA target) only where the kernel must be built.

>>> import numpy as np
>>> from forge_array import ops
>>> spec = named_spec("sum", ops.add, ("float64",), (0.0,))
>>> full_reduce(spec, [np.arange(10.0)])   # doctest: +SKIP
(array([45.]),)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import ops as _ops
from ..kernels import reduce_spec as _k
from ..runtime import (
    buffer_of,
    data_address,
    device_allocator,
    device_info,
    element_strides,
    factories,
    launch,
    stored,
    stream_key,
    temp,
    tuning,
)
from ..runtime import stored_form as stored_form_of
from ..runtime.caches import Cache
from ..runtime.config import SIMULATE as _SIM
from ..runtime.functions import compilable
from ..runtime.memory import misalignment
from ._common import collapse, uniform_operands

__all__ = ["Launch", "plan", "replay", "stored_form", "full_reduce", "named_spec", "generic_spec",
           "full_fast", "mapreduce_fast", "launch_named", "launch_generic", "launch_full", "HOT",
           "layout", "kernel_plan", "scratch"]

#: the kernel factory (its module imported where a kernel is built)
_FACTORY = factories.factory("forge_array.kernels.reduce", "make_reduce_kernel")
#: whether a call's launch is described for a later process's first call (on a GPU)
STORES = not _SIM


class Launch(NamedTuple):
    """A replayable launch of a full reduction (see :func:`plan`): everything but the
    inputs' and the outputs' addresses is fixed by the inputs' layout."""

    kernel: object
    grid: int
    block: int
    fixed: tuple  # n, peel (shape, strides of the strided path), partials, flags, ticket
    out_shape: tuple
    out_dtypes: tuple  # the result's dtypes (bool results are written as uint8)
    empty: object  # allocator of the outputs: numpy.ndarray or cupy.ndarray
    param: float
    in_view: object  # simulator only: dtype one input is viewed as (bool -> uint8), or None
    out_views: object  # simulator only: buffer dtypes of the outputs when they differ
    out_nbytes: tuple  # bytes of each output
    alloc: object  # GPU only: CuPy's device allocator (the outputs are built after the launch)
    scratch_bytes: tuple  # bytes of the uninitialised scratch at the end of ``fixed`` (the
    #                       partials and flags), which the ticket (zeroed counters) follows
    in_offset: int  # bytes from the input's address to that of the view the kernel reads
    #                 (an order-free reduction of a reversed or transposed view reads it
    #                 forwards, from its lowest address); the simulator takes that view again
    in_normalised: bool  # whether the kernel reads that view rather than the input as given


_MAX_CACHED = 4096
_REPLAY = Cache("dispatch.reduce.REPLAY", _MAX_CACHED)


def plan(spec, x, param=0.0, out_shape=(1,)):
    """The :class:`Launch` of a full reduction (no ``init``) of backend array ``x``, or of
    the tuple ``x`` of same-shape arrays of a mapreduce, cached per (spec, layout of each
    array: type, dtype, shape, strides, address mod 16; output shape, ``param``, stream);
    None when the input is empty or needs a copy first (then
    :func:`full_reduce` takes its general path).

    >>> import numpy as np
    >>> from forge_array import ops
    >>> from forge_array.kernels.reduce import ReduceSpec
    >>> spec = ReduceSpec(op=ops.add.fn, acc_dtypes=("float64",), identity=(0.0,))
    >>> p = plan(spec, np.arange(10.0))          # doctest: +SKIP
    >>> replay(p, np.arange(10.0))               # doctest: +SKIP
    (array([45.]),)
    """
    many = type(x) is tuple
    if many:
        key = (spec, out_shape, param, stream_key()) + tuple(
            (type(a), a.dtype, a.shape, a.strides, data_address(a) & 15) for a in x)
        x0 = x[0]
    else:
        key = (spec, type(x), x.dtype, x.shape, x.strides, data_address(x) & 15, out_shape,
               param, stream_key())
        x0 = x
    p = _REPLAY.get(key)
    if p is not None:
        return p
    if x0.size == 0:
        return None
    xv = x0.view(np.uint8) if spec.f is None and x0.dtype.kind == "b" else x0
    arrays = list(x) if many else [xv]
    if many and spec.f is None and any(a.dtype.kind == "b" for a in arrays):
        return None
    try:
        mode, ndim, strides, shape, peel, uniform = layout(spec, arrays)
    except ValueError:  # too many dims after collapsing, or strides not whole elements
        return None
    # an order-free reduction of a reversed or transposed view reads the view layout()
    # chose, whose address is the input's plus a constant of the layout
    normalised = not many and arrays[0] is not xv
    offset = data_address(arrays[0]) - data_address(xv) if normalised else 0
    kernel, block, per_block, gmax = kernel_plan(spec, tuple(a.dtype.str for a in arrays), mode,
                                                 ndim, uniform)
    n = x0.size
    grid = _grid(spec, n, block, per_block, gmax)
    head = (n, peel)
    if mode == _k.MODE_STRIDED:
        head += tuple(shape) + tuple(s for st in strides for s in st)
    partials, pf, ticket = scratch(spec.acc_dtypes, gmax, x0)
    tail = tuple(buffer_of(b) for b in partials) + (buffer_of(pf), buffer_of(ticket))
    out_dtypes = tuple(np.dtype(d) for d in (spec.out_dtypes or spec.acc_dtypes))
    bufs = tuple(_k.buffer_dtype(d) for d in out_dtypes)
    empty = np.ndarray if isinstance(x0, np.ndarray) else _cupy().ndarray
    count = int(np.prod(out_shape, dtype=np.int64))
    p = Launch(kernel, grid, block, head + tail, tuple(out_shape), out_dtypes, empty, float(param),
               xv.dtype if xv is not x0 else None, None if bufs == out_dtypes else bufs,
               tuple(count * d.itemsize for d in out_dtypes), None if _SIM else device_allocator(),
               tuple(int(b.nbytes) for b in partials) + (int(pf.nbytes),), offset, normalised)
    _REPLAY[key] = p
    return p


def replay(p, x, on=None):
    """Run the :class:`Launch` ``p`` on ``x`` (an array, or the tuple of arrays, of the
    layout it was planned for); returns the tuple of output arrays.  The only difference
    between the GPU and the simulator is how arrays become kernel arguments (a device
    address or a ``SimBuffer``); on the GPU the outputs' memory is allocated before the
    launch and the arrays are built over it after (host time the kernel hides).  ``on``:
    the caller's ``stream_key()`` of this moment, if it has one (saves asking CuPy again)."""
    kernel, grid, block, fixed, shape, dtypes, empty, param, in_view, out_views, nbytes, alloc, _, off, norm = p
    if not _SIM:
        ins = tuple([a.data.ptr for a in x]) if type(x) is tuple else (x.data.ptr + off,)
        if len(nbytes) == 1:
            mem = alloc(nbytes[0])
            launch(kernel, grid, block, ins + fixed + (mem.ptr, param), 0, on)
            return (empty(shape, dtypes[0], memptr=mem),)
        mems = [alloc(nb) for nb in nbytes]
        launch(kernel, grid, block, ins + fixed + tuple([m.ptr for m in mems]) + (param,), 0, on)
        return tuple([empty(shape, d, memptr=m) for d, m in zip(dtypes, mems)])
    outs = tuple([empty(shape, d) for d in dtypes])
    if type(x) is tuple:
        ins = tuple(map(buffer_of, x))
    else:
        xv = x if in_view is None else x.view(in_view)
        ins = (buffer_of(_normalise_commutative([xv])[0] if norm else xv),)
    if out_views is None:
        obs = tuple(map(buffer_of, outs))
    else:
        obs = tuple([buffer_of(o.view(d)) for o, d in zip(outs, out_views)])
    launch(kernel, grid, block, ins + fixed + obs + (param,), 0, on)
    return outs


def stored_form(p, x):
    """The description of :class:`Launch` ``p`` on the CuPy array ``x`` for the stored
    launches (:mod:`forge_array.runtime.stored`), or None (in the simulator; for a tuple of
    arrays)."""
    if _SIM or type(x) is tuple or p.in_normalised:
        return None
    fixed = p.fixed
    nscr = len(p.scratch_bytes)
    pointers = {x.data.ptr: ("in", 0), fixed[-1]: ("counter", 1, "uint32")}
    for j, nb in enumerate(p.scratch_bytes):
        pointers[fixed[-1 - nscr + j]] = ("uninit", j, nb)
    outs = tuple(-(j + 1) for j in range(len(p.out_dtypes)))   # stand-ins for their addresses
    for j, o in enumerate(outs):
        pointers[o] = ("out", j)
    desc = stored_form_of(p.kernel, p.grid, p.block, (x.data.ptr,) + fixed + outs + (p.param,), pointers)
    if desc is not None:
        desc["outs"] = [[list(p.out_shape), d.str] for d in p.out_dtypes]
        desc["reshape"] = None
    return desc


def full_reduce(spec, arrays, init=None, param=0.0, out_shape=(1,)):
    """Reduce every element of the backend arrays ``arrays`` (same shape; flattened
    struct-of-arrays, see :class:`ReduceSpec`) in one launch; returns a tuple of 1-element
    backend arrays, one per output component (``spec.out_dtypes``).  ``init`` is a tuple of
    1-element backend arrays of the accumulator dtypes when ``spec.has_init``.  The caller
    handles empty inputs.  The outputs have shape ``out_shape`` (one element).

    Arrays without ``init`` replay a cached :class:`Launch` (:func:`plan`).
    """
    if init is None:
        p = plan(spec, arrays[0] if len(arrays) == 1 else tuple(arrays), param, out_shape)
        if p is not None:
            return replay(p, arrays[0] if len(arrays) == 1 else tuple(arrays))
    arrays = list(arrays)
    if spec.f is None:
        arrays = [a.view(np.uint8) if a.dtype.kind == "b" else a for a in arrays]
    x0 = arrays[0]
    n = x0.size
    try:
        mode, ndim, strides, shape, peel, uniform = layout(spec, arrays)
    except ValueError:  # too many dims after collapsing, or strides not whole elements
        arrays = [a.copy() for a in arrays]
        mode, ndim, strides, shape, peel, uniform = layout(spec, arrays)
    in_dtypes = tuple(a.dtype.str for a in arrays)
    kernel, block, per_block, gmax = kernel_plan(spec, in_dtypes, mode, ndim, uniform)
    grid = _grid(spec, n, block, per_block, gmax)
    partials, pf, ticket = scratch(spec.acc_dtypes, gmax, x0)
    out_dtypes = [np.dtype(d) for d in (spec.out_dtypes or spec.acc_dtypes)]
    xp = np if isinstance(x0, np.ndarray) else _cupy()
    outs = [xp.empty(out_shape, _k.buffer_dtype(d)) for d in out_dtypes]
    args = [buffer_of(a) for a in arrays] + [n, peel]
    if mode == _k.MODE_STRIDED:
        args += list(shape) + [s for st in strides for s in st]
    args += [buffer_of(p) for p in partials] + [buffer_of(pf), buffer_of(ticket)]
    args += [buffer_of(o) for o in outs]
    if spec.has_init:
        args += [buffer_of(i.view(np.uint8) if i.dtype.kind == "b" else i) for i in init]
    args.append(float(param))
    launch(kernel, grid, block, tuple(args))
    return tuple(o.view(d) if o.dtype != d else o for o, d in zip(outs, out_dtypes))


def _grid(spec, n, block, per_block, gmax):
    """Blocks of a launch over ``n`` elements, at most ``gmax``: an order-free reduction's
    blocks take ``per_block`` elements each, an ordered one's ``block`` (one per thread)."""
    return max(1, min(gmax, -(-n // (per_block if spec.commutative else block))))


def _cupy():
    from ..runtime import cupy  # noqa: PLC0415

    return cupy()


# --------------------------------------------------------------------------- specifications

#: kernel specifications (``kernels.reduce.ReduceSpec``) of named reductions by call
NAMED_SPECS = Cache("dispatch.reduce.NAMED_SPECS")
#: kernel specifications of ``reduce`` / ``mapreduce`` by (function, operator, operands)
GENERIC_SPECS = Cache("dispatch.reduce.GENERIC_SPECS")


def named_spec(name, op, acc, identity, f=None, with_index=False, acc_tuple=False, post=None,
               out_dtypes=None):
    """The commutative kernel specification of named reduction ``name`` (operator ``op``,
    accumulator dtypes ``acc``, ``identity``, element map ``f``, finishing step ``post``),
    cached per call."""
    key = (name, tuple(acc), f, post, out_dtypes)
    spec = NAMED_SPECS.get(key)
    if spec is None:
        spec = NAMED_SPECS[key] = _k.ReduceSpec(
            op=op.fn, acc_dtypes=tuple(np.dtype(d).str for d in acc), identity=identity, f=f,
            with_index=with_index, acc_tuple=acc_tuple, post=post,
            out_dtypes=None if out_dtypes is None else tuple(np.dtype(d).str for d in out_dtypes),
            commutative=True)
    return spec


def generic_spec(f, op, struct, acc, is_tuple, has_init, identity):
    """The kernel specification of ``mapreduce(f, op, ...)`` over operands of structure
    ``struct`` accumulating in ``acc`` (a tuple when ``is_tuple``), cached per call;
    ``identity()`` gives the operator's identity in those dtypes (called for a new call only)."""
    key = (f, op, struct, acc, is_tuple, has_init)
    spec = GENERIC_SPECS.get(key)
    if spec is None:
        spec = GENERIC_SPECS[key] = _k.ReduceSpec(
            op=op.fn, acc_dtypes=tuple(d.str for d in acc), identity=identity(), f=f, struct=struct,
            acc_tuple=is_tuple, commutative=op.commutative, has_init=has_init)
    return spec


# --------------------------------------------------------------------------- the fast paths

#: Launch plans of full reductions by call: (name, array type, dtype, shape, strides,
#: address mod 16, dtype argument, keepdims, extra argument, stream) -> :class:`Launch` for
#: the named reductions, (:class:`Launch`, whether the result is a tuple) under "mapreduce"
HOT = Cache("dispatch.reduce.HOT", 4096)


def hot_key(name, x, dtype, keepdims, extra):
    return (name, type(x), x.dtype, x.shape, x.strides, data_address(x) & 15, dtype, keepdims,
            extra, stream_key())


def full_fast(name, x, dtype=None, keepdims=False, extra=None):
    """The host fast path of a full named reduction (``name``: "sum", "max", "var", ...) of
    backend array ``x``: replay the launch cached by an earlier call with the same arguments
    (``dtype`` of sum / prod, ``correction`` of var / std as ``extra``) on an array of the
    same layout.  Returns the result, or None when no launch is cached for the call (then
    call the reduction itself, which caches it).

    >>> import numpy as np
    >>> x = np.arange(4.0)
    >>> r = full_fast("sum", x)          # None until sum(x) has run on our kernels
    >>> r is None or float(r) == 6.0
    True
    """
    try:
        key = hot_key(name, x, dtype, keepdims, extra)
        p = HOT.get(key)
    except (TypeError, AttributeError):  # an unhashable argument; not an array
        return None
    if p is None:
        return None
    return replay(p, x, key[-1])[0]


def mapreduce_fast(f, op, x, keepdims=False):
    """The host fast path of ``mapreduce(f, op, x, keepdims=keepdims)`` (``reduce`` when
    ``f`` is None) of one backend array ``x`` over all axes without ``init``: replay the
    launch cached by an earlier call with the same ``f`` and ``op`` (the same objects) on an
    array of the same layout.  Returns the result (a tuple when ``f`` returns tuples), or
    None when no launch is cached for the call.

    >>> import numpy as np
    >>> from forge_array import ops
    >>> x = np.arange(4.0)
    >>> r = mapreduce_fast(None, ops.add, x)   # None until reduce(ops.add, x) has run on our kernels
    >>> r is None or float(r) == 6.0
    True
    """
    try:
        key = hot_key("mapreduce", x, None, keepdims, (None if f is None else compilable(f, 1),
                                                        _ops.as_operator(op)))
        hit = HOT.get(key)
    except (TypeError, AttributeError):  # an unhashable function; not an array
        return None
    if hit is None:
        return None
    outs = replay(hit[0], x, key[-1])
    return outs if hit[1] else outs[0]


# --------------------------------------------------------------------------- launching a call

def launch_named(spec, x, param, keepdims, hot=None):
    """Full reduction of backend array ``x`` alone with ``spec``; with ``hot = (name, dtype,
    extra)`` (the caller's arguments) its launch is cached for :func:`full_fast` and described
    for a later process's first call (:mod:`forge_array.runtime.stored`)."""
    shape = (1,) * x.ndim if keepdims else ()
    p = plan(spec, x, param, shape)
    if p is None:
        return launch_full(spec, [x], None, param, shape=shape)[0]
    if hot is not None:
        try:
            HOT[hot_key(hot[0], x, hot[1], keepdims, hot[2])] = p
        except TypeError:  # unhashable argument: no fast path
            pass
        else:
            if STORES:
                stored.save(stored.reduction_key(hot[0], x, None, hot[1], keepdims, hot[2]), stored_form(p, x))
    return replay(p, x)[0]


def launch_generic(spec, x, shape, keepdims, is_tuple, hot=None):
    """Full ``mapreduce`` of backend array ``x`` alone with ``spec`` (no ``init``); with
    ``hot = (f, op)`` (the caller's objects) its launch is cached for :func:`mapreduce_fast`.
    Returns the tuple of outputs, or None when the layout has no plan (then
    :func:`launch_full`)."""
    p = plan(spec, x, 0.0, shape)
    if p is None:
        return None
    if hot is not None:
        try:
            HOT[hot_key("mapreduce", x, None, keepdims, hot)] = (p, is_tuple)
        except TypeError:  # an unhashable function: no fast path
            pass
    return replay(p, x)


def launch_full(spec, flat, init_bufs=None, param=0.0, what="", shape=(1,)):
    """:func:`full_reduce`, with the operator's name ``what`` in a TypeError from the kernel's
    compilation."""
    try:
        return full_reduce(spec, flat, init_bufs, param, shape)
    except TypeError as exc:
        msg = str(exc)
        if what and what not in msg:
            raise TypeError(f"reduction with operator {what}: {msg}") from exc
        raise


# --------------------------------------------------------------------------- a call's layout


def layout(spec, arrays):
    """(mode, ndim, strides per array, shape, peel, uniform) of the kernel for ``arrays``:
    one of the kernel's modes (:data:`~forge_array.kernels.reduce.MODE_VEC`: contiguous,
    one item size and 16-byte phase, 128-bit loads after ``peel`` scalar elements;
    ``MODE_FLAT``: contiguous otherwise; ``MODE_STRIDED``: any view, up to ``MAX_DIMS``
    collapsed dims), the uniform arrays (:func:`._common.uniform_operands`) left out of
    the strides.  An order-free reduction of one view may replace ``arrays[0]`` by the
    view with its negative strides reversed and its dims in decreasing stride order.
    ValueError: more dims than the strided path takes."""
    uniform = uniform_operands(arrays)
    lay = [a for k, a in enumerate(arrays) if k not in uniform]
    if all(a.flags.c_contiguous for a in lay):
        return _contig_layout(lay) + (uniform,)
    if spec.commutative and not spec.with_index and len(arrays) == 1:
        arrays[:] = _normalise_commutative(arrays)
        if arrays[0].flags.c_contiguous:
            return _contig_layout(arrays) + (uniform,)
        lay = list(arrays)
    strides = [element_strides(a) for a in lay]
    shape, st = collapse(lay[0].shape, strides)
    if len(shape) <= 1 and all(not s or s[0] == 1 for s in st):
        return _contig_layout(lay) + (uniform,)
    if len(shape) > _k.MAX_DIMS:
        raise ValueError(f"{len(shape)} dims after collapsing (the strided path takes {_k.MAX_DIMS})")
    return _k.MODE_STRIDED, len(shape), st, shape, 0, uniform


def _contig_layout(arrays):
    a0 = arrays[0]
    if a0.dtype.kind == "c" or a0.dtype.itemsize > 8:
        return _k.MODE_FLAT, 1, None, None, 0
    mis = misalignment(a0)
    size = a0.dtype.itemsize
    for a in arrays[1:]:
        if a.dtype.itemsize != size or misalignment(a) != mis or a.dtype.kind == "c":
            return _k.MODE_FLAT, 1, None, None, 0
    if mis % size:
        return _k.MODE_FLAT, 1, None, None, 0
    peel = ((16 - mis) % 16) // size
    return _k.MODE_VEC, 1, None, None, peel


def _normalise_commutative(arrays):
    """For an order-free reduction of one array: reverse negative strides and put dims in
    decreasing stride order (a view, no copy), so transposes and reversed views become
    contiguous where they can."""
    x = arrays[0]
    if x.ndim <= 1 and (x.ndim == 0 or x.strides[0] >= 0):
        return arrays
    idx = tuple(slice(None, None, -1) if s < 0 else slice(None) for s in x.strides)
    if any(s < 0 for s in x.strides):
        x = x[idx]
    order = sorted(range(x.ndim), key=lambda d: -abs(x.strides[d]))
    if order != list(range(x.ndim)):
        x = x.transpose(order)
    return [x]


_PLANS = Cache("dispatch.reduce.PLANS")
_GRID = Cache("dispatch.reduce.GRID")


def _grid_max(block):
    g = _GRID.get(block)
    if g is None:
        p = tuning.params("reduce")
        g = _GRID[block] = max(1, device_info()["sm_count"] * p["blocks_per_sm"])
    return g


def kernel_plan(spec, in_dtypes, mode, ndim, uniform=()):
    """(kernel, block, elements per block, grid cap) of one specialisation: the tuning
    table's block and items per thread, the kernel compiled (or loaded) once per key."""
    key = (spec, in_dtypes, mode, ndim, uniform)
    kp = _PLANS.get(key)
    if kp is None:
        p = tuning.params("reduce")
        block = p["block"]
        lead = next((k for k in range(len(in_dtypes)) if k not in uniform), 0)
        itemsize = np.dtype(in_dtypes[lead]).itemsize
        vec = 16 // itemsize if mode == _k.MODE_VEC else 1
        items = p["items"]
        if mode == _k.MODE_VEC:
            items = max(1, min(items, 16 // vec))
        argtypes = _k.kernel_argtypes(spec, in_dtypes, mode, ndim, uniform)
        kernel = factories.kernel(_FACTORY, (spec, in_dtypes, mode, ndim, items, vec, block, uniform),
                                  tuple(argtypes))
        kp = _PLANS[key] = (kernel, block, block * items * vec, _grid_max(block))
    return kp


_SCRATCH: dict = {}


def scratch(acc_dtypes, gmax, like):
    """Partials, validity flags and the ticket of a launch, cached per (stream, acc dtypes):
    launches on one stream are ordered, so reuse is safe (in the simulator: per host
    thread, whose kernels run synchronously)."""
    key = (stream_key(), type(like), acc_dtypes, gmax)
    r = _SCRATCH.get(key)
    if r is None:
        parts = [temp.empty(gmax, _k.buffer_dtype(d), like) for d in acc_dtypes]
        r = (parts, temp.empty(gmax, np.uint8, like), temp.counters(1, like))
        # two threads on one stream (CuPy's null stream is shared) may both get here: the
        # first entry wins, so a plan never keeps the address of buffers nobody holds
        r = _SCRATCH.setdefault(key, r)
    return r
