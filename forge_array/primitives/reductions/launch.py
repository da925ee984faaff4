"""The full reductions' dispatch: launching the full reduction kernel
(:mod:`forge_array.kernels.reduce`) from the host.

- :func:`plan` / :func:`replay`: the launch of a full reduction of one array, or of the
  arrays of a mapreduce, is a :class:`Launch` (kernel, grid, block and every argument but
  the arrays' and outputs' addresses), cached per layout of the arrays; replaying it costs
  a dictionary look-up, the output allocations and the launch.
- :func:`full_reduce`: the general path (any number of arrays, an ``init``, views that
  need a copy first).

>>> import numpy as np
>>> from forge_array import ops
>>> from forge_array.kernels.reduce import ReduceSpec
>>> spec = ReduceSpec(op=ops.add.fn, acc_dtypes=("float64",), identity=(0.0,))
>>> full_reduce(spec, [np.arange(10.0)])   # doctest: +SKIP
(array([45.]),)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...kernels.reduce import MODE_STRIDED, _normalise_commutative, buffer_dtype, kernel_plan, layout, scratch
from ...runtime import buffer_of, data_address, device_allocator, launch, stream_key
from ...runtime import stored_form as stored_form_of
from ...runtime.caches import Cache
from ...runtime.config import SIMULATE as _SIM

__all__ = ["Launch", "plan", "replay", "stored_form", "full_reduce"]


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
_REPLAY = Cache("primitives.reductions.launch.REPLAY", _MAX_CACHED)


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
    if spec.commutative:
        grid = max(1, min(gmax, (n + per_block - 1) // per_block))
    else:
        grid = max(1, min(gmax, (n + block - 1) // block))
    head = (n, peel)
    if mode == MODE_STRIDED:
        head += tuple(shape) + tuple(s for st in strides for s in st)
    partials, pf, ticket = scratch(spec.acc_dtypes, gmax, x0)
    tail = tuple(buffer_of(b) for b in partials) + (buffer_of(pf), buffer_of(ticket))
    out_dtypes = tuple(np.dtype(d) for d in (spec.out_dtypes or spec.acc_dtypes))
    bufs = tuple(buffer_dtype(d) for d in out_dtypes)
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
    if spec.commutative:
        grid = max(1, min(gmax, (n + per_block - 1) // per_block))
    else:
        grid = max(1, min(gmax, (n + block - 1) // block))
    partials, pf, ticket = scratch(spec.acc_dtypes, gmax, x0)
    out_dtypes = [np.dtype(d) for d in (spec.out_dtypes or spec.acc_dtypes)]
    xp = np if isinstance(x0, np.ndarray) else _cupy()
    outs = [xp.empty(out_shape, buffer_dtype(d)) for d in out_dtypes]
    args = [buffer_of(a) for a in arrays] + [n, peel]
    if mode == MODE_STRIDED:
        args += list(shape) + [s for st in strides for s in st]
    args += [buffer_of(p) for p in partials] + [buffer_of(pf), buffer_of(ticket)]
    args += [buffer_of(o) for o in outs]
    if spec.has_init:
        args += [buffer_of(i.view(np.uint8) if i.dtype.kind == "b" else i) for i in init]
    args.append(float(param))
    launch(kernel, grid, block, tuple(args))
    return tuple(o.view(d) if o.dtype != d else o for o, d in zip(outs, out_dtypes))


def _cupy():
    from ...runtime import cupy  # noqa: PLC0415

    return cupy()
