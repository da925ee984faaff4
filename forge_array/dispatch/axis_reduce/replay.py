"""Replayable launches of axis reductions and matrix-vector products: ``Replay`` (one planned
launch, replayed on new operands of the same layout with no planning), the cache of them by
call, ``FAST``, and the named reductions' host fast path along axes (``axis_fast``).
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ... import runtime
from ...runtime.caches import Cache
from .layout import AxisReduction, layout_key, run_kernels
from .plan import execute, plan_scratch

#: Replayable launches (:class:`Replay`) by call: ``fast_key`` of axis_mapreduce, matvec
#: and vecmat calls, and the keys of the callers' own hot paths (named reductions along an
#: axis, ``matmul``)
FAST = Cache("dispatch.axis_reduce.FAST")


def fast_key(tag, f, op, arrays, axis, keepdims, out_dtype, index):
    """Key of a call whose launch plan can be replayed (no init), or None."""
    try:
        return (tag, f, op, axis, keepdims, out_dtype, index,
                tuple(layout_key(e) for e in arrays))
    except (TypeError, AttributeError):
        return None


def remember(key, ent):
    """Cache the replay ``ent`` under ``key`` (bounded: new lambdas per call would grow the
    cache without end)."""
    FAST[key] = ent


_PTR = operator.attrgetter("data.ptr")  # device address of a CuPy array
#: kernel buffer of a plain array: its device address, or a SimBuffer in the simulator
_BUF = runtime.buffer_of if runtime.SIMULATE else _PTR


class Replay:
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
        return Replay(self.plan, self.kshape, self.dtypes, self.is_tuple, fshape, self.lean,
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
                s = plan_scratch(self.plan, arrays[0], sk)
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
                s = plan_scratch(self.plan, arrays[0], sk)
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
            execute(self.plan, arrays, outs)
            if self.fshape is not None:
                outs = tuple(o.reshape(self.fshape) for o in outs)
            return outs
        out = empty(self.kshape, dtype=self.dtype)
        execute(self.plan, arrays, out)
        return out if self.fshape is None else out.reshape(self.fshape)


def replayed(f, op, arrays, axis, keepdims, out_dtype, index, alias=None):
    """``(key, result)`` of an ``axis_mapreduce`` call without ``init``: its :func:`fast_key`
    (None when unhashable) and the result of replaying the launch kept under it, or None when
    there is none. ``alias``: a caller's own key the replayed launch is also kept under."""
    fkey = fast_key("amr", f, op, arrays, axis, keepdims, out_dtype, index)
    ent = FAST.get(fkey) if fkey is not None else None
    if ent is None:
        return fkey, None
    if alias is not None:
        remember(alias, ent)
    return fkey, ent(arrays)


def launch(call: AxisReduction, arrays, outs, shape, keepdims, keys=()):
    """Plan and launch the reduction ``call`` of ``arrays`` (of ``shape``) into ``outs`` (a
    tuple of arrays: one per accumulator component when ``call.acc`` is a tuple), and keep
    the planned launch, replayable, under each of ``keys`` (None entries skipped)."""
    is_tuple = isinstance(call.acc, tuple)
    plan = run_kernels(call, arrays, outs if is_tuple else outs[0])
    keys = [k for k in keys if k is not None]
    if plan is None or not keys:
        return
    fshape = tuple(1 if d in call.axes else n for d, n in enumerate(shape)) if keepdims else None
    ent = Replay(plan, tuple(outs[0].shape), tuple(o.dtype for o in outs), is_tuple, fshape,
                 not any(isinstance(e, tuple) for e in arrays))
    for k in keys:
        remember(k, ent)


# --------------------------------------------------------------------------- named reductions

def axis_hot_key(name, x, axes, dtype, keepdims):
    try:
        key = ("axis", name, axes, dtype, keepdims, layout_key(x))
        hash(key)
    except (TypeError, AttributeError):  # an unhashable argument; not an array
        return None
    return key


def axis_fast(name, x, axes, dtype=None, keepdims=False):
    """The host fast path of the named reduction ``name`` ("sum", "prod", "max", "min",
    "any", "all") of backend array ``x`` along ``axes`` (a sorted tuple of non-negative
    ints, not all of them): replay the launch an earlier call with the same arguments
    (``dtype`` of sum / prod) left for an array of the same layout (dtype, shape, strides,
    16-byte phase, device).  Returns the result, or None when there is none (then call the
    reduction itself, which leaves one).

    >>> import numpy as np
    >>> x = np.ones((2, 3))
    >>> r = axis_fast("sum", x, (0,), np.dtype("float64"))   # None until sum(x, (0,)) ran
    >>> r is None or r.tolist() == [2.0, 2.0, 2.0]
    True
    """
    try:
        ent = FAST.get(("axis", name, axes, dtype, keepdims, layout_key(x)))
    except (TypeError, AttributeError):
        return None
    if ent is None:
        return None
    return ent((x,))
