"""Reductions along any axes of any strided view, on the row / column kernels.

Signature (used by :mod:`forge_array.primitives.reductions` and :mod:`.matvec`)::

    axis_mapreduce(f, op, arrays, axis, init, keepdims, out_dtype, *, index=False)

- ``f``: ``f(e_0, ..., e_{K-1})`` of one element of each array (an element of a tuple of
  arrays is a tuple), or None (identity for one array, the tuple of the elements for
  several); with ``index=True`` ``f`` also receives the position of the element in the
  reduced axes (C order over them, as ``numpy.argmax`` along one axis).
- ``op``: an :class:`forge_array.ops.Operator` or a Python function, associative and
  commutative (the kernels combine lanes' strided partial results).
- ``arrays``: tuple of ``K <= 3`` backend arrays (NumPy or CuPy; one device), or tuples of
  them (struct-of-arrays); all of one shape (broadcast views with zero strides are fine).
- ``axis``: None, an int or a tuple of ints (negative allowed).
- ``init``: None, or a value combined once into every result (``op(init, total)``); it is
  also the result of an empty reduction. Without ``init`` the identity of ``op`` is used
  (``ops`` operators have one); an operator without identity needs ``init`` for empty
  reductions, and otherwise costs a flag per value.
- ``out_dtype``: accumulator and result dtype, or a tuple of dtypes for tuple values
  (the result is then a tuple of arrays).

Kept axes become the kernels' output rows (collapsed where the strides of every operand
allow, at most two dims, more are looped on the host), reduced axes the reduction index
(collapsed, at most two dims in the kernel, more are made contiguous). Negative strides
are flipped (views, not copies). The row kernel runs when the smallest stride of the
first array is along a reduced axis, the column kernel otherwise.

Example
-------
>>> import numpy as np
>>> from forge_array import ops
>>> x = np.arange(12.0).reshape(3, 4)
>>> axis_mapreduce(None, ops.add, (x,), 0, None, False, np.dtype("float64")).tolist()
[12.0, 15.0, 18.0, 21.0]
>>> axis_mapreduce(lambda v: v * v, ops.add, (x,), (1,), None, True, np.dtype("float64")).tolist()
[[14.0], [126.0], [366.0]]
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ... import ops as _ops
from ... import runtime
from ...runtime import lazy
from ...runtime.caches import Cache
from ...runtime.functions import compilable
from .arguments import (
    _DEFAULT_F,
    _comps,
    _dt_tuple,
    _f_identity,  # noqa: F401 - the matvec map
    _f_pair_index,
    _first,
    _value_of,
    _xp,
    normalize_axes,
)
from .cpu import _run_cpu
from .layout import (
    _PLANS,  # noqa: F401 - cleared by tests and tuning
    _layout_key,
    _run_kernels,
)
from .plan import _buf_t, _compile, _execute, _plan_scratch  # noqa: F401 - kernel argument types

# the kernel modules (numba.cuda) load at first use: CPU arrays never need them
_k = lazy.module("forge_array.kernels.rowcol", __name__, "_k")
#: the row and column kernels' ``MAX_INPUTS`` (checked against it where they are built)
_MAX_INPUTS = 3

__all__ = ["axis_mapreduce", "argmax", "argmin", "normalize_axes"]

# --------------------------------------------------------------------------- public


#: Replayable launches (:class:`_Replay`) by call: ``_fast_key`` of axis_mapreduce, matvec
#: and vecmat calls, and the keys of the callers' own hot paths (named reductions along an
#: axis, ``matmul``)
_FAST = Cache("primitives.axis_reduce.FAST")


def _fast_key(tag, f, op, arrays, axis, keepdims, out_dtype, index):
    """Key of a call whose launch plan can be replayed (no init), or None."""
    try:
        return (tag, f, op, axis, keepdims, out_dtype, index,
                tuple(_layout_key(e) for e in arrays))
    except (TypeError, AttributeError):
        return None


def _remember(key, ent):
    """Cache the replay ``ent`` under ``key`` (bounded: new lambdas per call would grow the
    cache without end)."""
    _FAST[key] = ent


_PTR = operator.attrgetter("data.ptr")  # device address of a CuPy array
#: kernel buffer of a plain array: its device address, or a SimBuffer in the simulator
_BUF = runtime.buffer_of if runtime.SIMULATE else _PTR


class _Replay:
    """The replayable launch of one axis reduction (or matrix-vector product): everything
    but the operands' and the result's addresses and the per-stream scratch (partials and
    tickets) is fixed by the layout it was planned for. ``replay(arrays)`` allocates the
    result and launches; the common case (plain operands, a scalar result, no moved
    origins, no validity flags) builds nothing else.  ``swap``: the operands come in the
    other order (``x @ A`` of ``matmul`` replays ``vecmat``'s ``(A, x)``)."""

    __slots__ = ("plan", "kernel", "grid", "block", "scalars", "empty", "kshape", "dtypes",
                 "dtype", "is_tuple", "fshape", "lean", "split", "scratch", "swap", "alloc", "nbytes",
                 "wrap")

    def __init__(self, plan, kshape, dtypes, is_tuple, fshape, plain, swap=False):
        self.plan = plan
        self.kernel = plan["kernel"]
        self.grid = plan["grid"]
        self.block = plan["block"]
        self.scalars = plan["scalars"]
        self.empty = plan["empty"]
        self.kshape = kshape
        self.dtypes = dtypes
        self.dtype = dtypes[0]
        self.is_tuple = is_tuple
        self.fshape = fshape
        self.lean = plain and not is_tuple and not plan["flag"] and not plan["moved"]
        self.split = plan["split"] > 1
        self.scratch = plan["scratch"]
        self.swap = swap
        # on the GPU the lean path allocates the result's memory, launches, and builds the
        # array over the memory after the launch (host time the kernel hides)
        self.alloc = None if runtime.SIMULATE else runtime.device_allocator()
        self.wrap = None if runtime.SIMULATE else runtime.cupy().ndarray
        self.nbytes = math.prod(kshape) * np.dtype(self.dtype).itemsize

    def variant(self, fshape, swap=False):
        """The same launch with another final shape of the result / order of the operands."""
        return _Replay(self.plan, self.kshape, self.dtypes, self.is_tuple, fshape, self.lean,
                       swap)

    def __call__(self, arrays):
        if not self.lean:
            return self._general(arrays)
        alloc = self.alloc
        if alloc is None:   # simulator
            out = self.empty(self.kshape, self.dtype)
            ob = _BUF(out)
        else:
            mem = alloc(self.nbytes)
            ob = mem.ptr
        ins_b = tuple([_BUF(a) for a in arrays])
        if self.split:
            sk = runtime.stream_key()
            s = self.scratch.get(sk)
            if s is None:
                s = _plan_scratch(self.plan, arrays[0], sk)
            runtime.launch(self.kernel, self.grid, self.block, (ins_b, ob, s[1], s[2]) + self.scalars,
                           on=sk)
        else:
            # one block per output: no partials and no tickets (the kernel never reads them)
            runtime.launch(self.kernel, self.grid, self.block, (ins_b, ob, ob, ob) + self.scalars)
        if alloc is not None:
            out = self.wrap(self.kshape, self.dtype, memptr=mem)
        return out if self.fshape is None else out.reshape(self.fshape)

    def stored_form(self, arrays, operands):
        """The description of this launch for the stored launches
        (:mod:`forge_array.runtime.stored`) when replayed on ``arrays`` (CuPy arrays in the
        kernel's order), whose addresses are those of ``operands`` (in the order of the
        call's key); None where it is not one lean launch or two operands share an address."""
        if not self.lean or runtime.SIMULATE:
            return None
        pointers = {}
        for k, a in enumerate(operands):
            pointers[a.data.ptr] = ("in", k)
        if len(pointers) != len(operands):
            return None
        ins_b = tuple([_PTR(a) for a in arrays])
        ob = -1   # a stand-in for the result's address
        pointers[ob] = ("out", 0)
        if self.split:
            sk = runtime.stream_key()
            s = self.scratch.get(sk)
            if s is None:
                s = _plan_scratch(self.plan, arrays[0], sk)
            for j, part in enumerate(s[0][1]):
                pointers[part.data.ptr] = ("uninit", j, int(part.nbytes))
            pointers[s[2]] = ("counter", int(self.plan["nticks"]), "uint32")
            args = (ins_b, ob, s[1], s[2]) + self.scalars
        else:
            args = (ins_b, ob, ob, ob) + self.scalars
        desc = runtime.stored_form(self.kernel, self.grid, self.block, args, pointers)
        if desc is not None:
            desc["outs"] = [[list(self.kshape), np.dtype(self.dtype).str]]
            desc["reshape"] = None if self.fshape is None else list(self.fshape)
        return desc

    def _general(self, arrays):
        empty = self.empty
        if self.is_tuple:
            outs = tuple(empty(self.kshape, dtype=d) for d in self.dtypes)
            _execute(self.plan, arrays, outs)
            if self.fshape is not None:
                outs = tuple(o.reshape(self.fshape) for o in outs)
            return outs
        out = empty(self.kshape, dtype=self.dtype)
        _execute(self.plan, arrays, out)
        return out if self.fshape is None else out.reshape(self.fshape)


def axis_mapreduce(f, op, arrays, axis, init, keepdims, out_dtype, *, index=False,
                   _replay=None):
    """Map ``f`` over the elements of ``arrays`` and reduce with ``op`` along ``axis``; see
    the module docstring for the arguments. Returns a backend array (a tuple of them for a
    tuple ``out_dtype``) of the kept axes (kept as size 1 with ``keepdims``).

    >>> import numpy as np
    >>> from forge_array import ops
    >>> a = np.arange(6).reshape(2, 3)
    >>> axis_mapreduce(lambda u, v: u * v, ops.add, (a, a), -1, None, False, np.dtype("int64")).tolist()
    [5, 50]
    >>> axis_mapreduce(_f_pair_index, ops.argmax, (np.array([[1., 5., 5.], [7., 0., 1.]]),),
    ...                1, None, False, (np.dtype("float64"), np.dtype("int64")), index=True)[1].tolist()
    [1, 0]
    """
    fkey = None
    if init is None and isinstance(arrays, tuple):
        # replay a cached launch plan: same operators, axes and operand layouts
        fkey = _fast_key("amr", f, op, arrays, axis, keepdims, out_dtype, index)
        ent = _FAST.get(fkey) if fkey is not None else None
        if ent is not None:
            if _replay is not None:
                _remember(_replay, ent)
            return ent(arrays)
    op = _ops.as_operator(op)
    if not isinstance(arrays, (tuple, list)) or not arrays:
        raise TypeError("arrays must be a non-empty tuple of arrays")
    arrays = tuple(arrays)
    K = len(arrays)
    if K > _MAX_INPUTS:
        raise ValueError(f"at most {_MAX_INPUTS} arrays, got {K}")
    if f is None:
        if index:
            raise TypeError("index=True needs a map function f(element, index)")
        f = _DEFAULT_F[K]
    elif not callable(f):
        raise TypeError(f"map function must be callable, got {type(f).__name__}")
    else:
        f = compilable(f, K + (1 if index else 0))
    x0 = _first(arrays[0])
    xp = _xp(x0)
    shape = tuple(x0.shape)
    for e in arrays:
        for c in _comps(e):
            if _xp(c) is not xp:
                raise ValueError("arrays are on different devices (NumPy and CuPy arrays mixed)")
            if not isinstance(c, np.ndarray) and c.device != x0.device:
                raise ValueError(f"arrays are on different devices: {c.device} and {x0.device}")
            if tuple(c.shape) != shape:
                raise ValueError(f"arrays of different shapes: {tuple(c.shape)} and {shape}")
    ndim = len(shape)
    axes = normalize_axes(axis, ndim)
    acc = _dt_tuple(out_dtype)
    is_tuple = isinstance(acc, tuple)
    kept = [d for d in range(ndim) if d not in axes]
    out_shape = tuple(shape[d] for d in kept)
    J = math.prod(shape[d] for d in axes)
    ident = op.identity(acc)
    init_v = None if init is None else _value_of(init, acc)
    outs = tuple(xp.empty(out_shape, dtype=d) for d in (acc if is_tuple else (acc,)))
    if math.prod(out_shape) > 0:
        if J == 0:
            fill = init_v if init_v is not None else ident
            if fill is None:
                raise ValueError(f"reduction over an empty axis with operator {op.name}, which "
                                 "has no identity: pass init")
            for o, v in zip(outs, fill if is_tuple else (fill,)):
                o[...] = v
        elif runtime.kernels_available(x0):
            plan = _run_kernels(f, op, arrays, outs if is_tuple else outs[0], axes, acc, ident,
                                init_v, index)
            if plan is not None and init is None:
                fshape = tuple(1 if d in axes else n for d, n in enumerate(shape)) if keepdims else None
                ent = _Replay(plan, out_shape, tuple(o.dtype for o in outs), is_tuple, fshape,
                              not any(isinstance(e, tuple) for e in arrays))
                for k in (fkey, _replay):
                    if k is not None:
                        _remember(k, ent)
        else:
            _run_cpu(f, op, arrays, outs if is_tuple else outs[0], axes, acc, ident, init_v,
                     index)
    if keepdims:
        ks = tuple(1 if d in axes else n for d, n in enumerate(shape))
        outs = tuple(o.reshape(ks) for o in outs)
    return outs if is_tuple else outs[0]


def _arg(x, axis, keepdims, op):
    xv = x.view(np.uint8) if x.dtype.kind == "b" else x
    if axis is None:
        xv = xv.reshape(-1)
        axis = 0
    acc = (xv.dtype, _ops.INDEX_DTYPE)
    r = axis_mapreduce(_f_pair_index, op, (xv,), axis, None, False, acc, index=True)[1]
    if keepdims:
        shape = list(x.shape)
        if len(shape):
            shape[normalize_axes(axis, x.ndim)[0]] = 1
        r = r.reshape(tuple(shape) if x.ndim else ())
    return r


def argmax(x, axis, keepdims=False):
    """Index of the largest element along ``axis`` (an int; the first one, the first NaN
    wins), on the axis kernels.

    >>> import numpy as np
    >>> argmax(np.array([[1, 9, 9], [4, 2, 4]]), 1).tolist()
    [1, 0]
    """
    if x.shape and axis is not None and x.shape[normalize_axes(axis, x.ndim)[0]] == 0:
        raise ValueError("argmax of an empty sequence")
    return _arg(x, axis, keepdims, _ops.argmax)


def argmin(x, axis, keepdims=False):
    """Index of the smallest element along ``axis`` (an int; the first one, the first NaN
    wins), on the axis kernels.

    >>> import numpy as np
    >>> argmin(np.array([[1, 9, 0], [4, 2, 2]]), 1).tolist()
    [2, 1]
    """
    if x.shape and axis is not None and x.shape[normalize_axes(axis, x.ndim)[0]] == 0:
        raise ValueError("argmin of an empty sequence")
    return _arg(x, axis, keepdims, _ops.argmin)


