"""Expression nodes and deferred arrays.

A :class:`Node` is one element-wise step (an operation of the namespace on nodes, leaves
and constants) or one reduction of a node; its shape and dtype are decided when it is
built, by the standard's rules, so every error is raised where eager code raises it.  A
:class:`Deferred` is the namespace's :class:`~forge_array.Array` of a node: it answers
``shape``, ``dtype``, ``ndim``, ``size`` and ``device`` at once and computes its values the
first time anything needs them (any other use of the array), together with whatever else
is pending in the same fused call.

>>> import numpy as np
>>> a = Leaf(np.arange(3.0))
>>> n = Node("add", (a, Const(1.0, np.dtype("float64"))), np.dtype("float64"), (3,))
>>> n.shape, n.dtype
((3,), dtype('float64'))
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from .._array import Array
from ..runtime.caches import Cache

__all__ = ["Leaf", "Const", "Node", "Deferred", "operand", "broadcast_shape", "pending", "pending_reductions",
           "const_key", "position", "EPOCH", "PLAIN", "ALONE", "SKIPPED"]


#: :func:`.evaluate.settle` (at first a loader of it that :mod:`.build` installs) and
#: :func:`.auto.settle_device`, set when those modules load (they import this one)
SETTLE = [None]
SETTLE_DEVICE = [None]
#: :func:`.evaluate.replayed_settlement` once that module has loaded: whether pending nodes
#: were computed by replaying an earlier settlement's launches
REPLAYED = [lambda nodes: False]
#: counts the nodes computed so far: a node built at the current count has the structure
#: its signature describes (no operand of it was computed since)
EPOCH = [0]


#: structure running eagerly -> its steps since the last deferred one (:func:`.auto.alone_eager`)
SKIPPED: dict = {}
#: structure (:attr:`Node.sig`) of a one-step expression on materialised arrays -> how many
#: times in a row plain code computed such an expression by itself (:func:`.auto.alone_eager`
#: reads it); a node built on a pending one-step node removes its structure (it was fused
#: into a consumer), but for an element-wise step on a reduction's result. Past 4,096
#: structures both tables are emptied.
ALONE = Cache("fusion.expr.ALONE", 4096, on_evict=SKIPPED.clear)


#: ``PLAIN.on``: this thread settles plain code now (:mod:`.auto`), where a structure
#: compiled with too many sets of constants is computed eagerly
#: (:data:`~.codegen.MAX_CONSTANT_SETS`)
PLAIN = threading.local()


def const_key(value):
    """A constant as it appears in structural keys: floats by their bits (``0.0`` and
    ``-0.0`` differ, a NaN equals itself), other scalars as they are."""
    return float(value).hex() if isinstance(value, float) else value


#: structures met so far -> their number (:attr:`Node.sig`); numbers are never reused, so
#: that clearing the table (past :data:`_MAX_SIGS` structures) cannot alias a new structure
#: with an old one
_MAX_SIGS = 1 << 16
_SIGS = Cache("fusion.expr.SIGS", _MAX_SIGS)
_NEXT_SIG = itertools.count()


def position(leaves, arr):
    """The index of backend array ``arr`` in the list ``leaves`` (by identity), appended
    when absent."""
    for i, b in enumerate(leaves):
        if b is arr:
            return i
    leaves.append(arr)
    return len(leaves) - 1


class Leaf:
    """A materialised backend array used by an expression."""

    __slots__ = ("array", "dtype", "shape")

    def __init__(self, array):
        self.array = array
        self.dtype = array.dtype
        self.shape = tuple(array.shape)


class Const:
    """A Python scalar of an expression, already of its dtype (compiled in as a constant)."""

    __slots__ = ("value", "dtype", "shape", "key")

    def __init__(self, value, dtype):
        self.value = value
        self.dtype = np.dtype(dtype)
        self.shape = ()
        self.key = ("c", const_key(value), self.dtype)  # its part of a node's signature


class Node:
    """One step: ``op`` (an element-wise operation's name, or ``"reduce"``) of ``args``
    (nodes, leaves, constants) with result ``dtype`` and ``shape``.  ``ctype``: the dtype
    the operands are converted to before the operation (the promoted dtype; for
    comparisons the result is bool).  ``extra``: operation parameters (a reduction's
    :class:`~forge_array.primitives.fused_reduce.Term`, axes and keepdims).  ``value``:
    the backend array once computed.

    Built with it: ``leaves``, the distinct backend arrays it reads (in the order a walk of
    its operands meets them), and ``sig``, the number of its structure (operations, dtypes,
    constants, leaves by position and dtype): equal numbers over leaves of equal layouts
    compute the same launch.  Both describe the node as it was built, and stay true while
    :data:`EPOCH` equals its ``epoch``."""

    __slots__ = ("op", "args", "dtype", "shape", "ctype", "extra", "value", "device", "ops",
                 "reads", "leaves", "sig", "epoch", "__weakref__")

    def __init__(self, op, args, dtype, shape, ctype=None, extra=None, device=None):
        self.op = op
        self.args = args
        self.dtype = np.dtype(dtype)
        self.shape = shape
        self.ctype = ctype
        self.extra = extra
        self.value = None
        self.device = device
        # the size of the pending expression: steps and array reads (shared ones counted
        # at each use: a bound, not an exact count)
        ops = 1
        reads = 0
        leaves = []
        sig = []
        for a in args:
            t = type(a)
            if t is Node and a.value is None:
                if ALONE and a.ops == 1 and (a.op != "reduce" or op == "reduce"):
                    # fused into this step: its structure stays deferred (an element-wise
                    # step on a reduction's result is its own launch after the reduction's:
                    # it gains the reduction nothing, see .auto._note_alone)
                    ALONE.pop(a.sig, None)
                ops += a.ops
                reads += a.reads
                if leaves:
                    sig.append((a.sig, tuple([position(leaves, b) for b in a.leaves])))
                else:
                    leaves.extend(a.leaves)
                    sig.append((a.sig, None))
            elif t is Const:
                sig.append(a.key)
            else:
                reads += 1
                arr = a.value if t is Node else a.array
                sig.append(("in", position(leaves, arr), arr.dtype))
        self.ops = ops
        self.reads = reads
        self.leaves = leaves
        if op == "clip":
            extra_key = tuple(map(const_key, extra))
        else:
            extra_key = extra
        key = (op, self.dtype, ctype, extra_key, tuple(sig))
        n = _SIGS.get(key)
        if n is None:
            n = _SIGS[key] = next(_NEXT_SIG)
        self.sig = n
        self.epoch = EPOCH[0]

    def __repr__(self):
        return f"Node({self.op}, {self.dtype}, {self.shape})"


def pending_reductions(roots):
    """The distinct pending reduction nodes reachable from ``roots`` (nodes), operands before
    users."""
    out = []
    seen = set()

    def walk(e):
        if not isinstance(e, Node) or e.value is not None or id(e) in seen:
            return
        seen.add(id(e))
        for a in e.args:
            walk(a)
        if e.op == "reduce":
            out.append(e)

    for r in roots:
        walk(r)
    return out


class Deferred(Array):
    """An array whose values are computed when first needed (see the module docstring)."""

    __slots__ = ("_node", "_auto")

    @classmethod
    def _of(cls, node, device, auto=False):
        obj = object.__new__(cls)
        obj._node = node
        obj._device = device
        obj._auto = auto
        return obj

    @property
    def dtype(self):
        return self._node.dtype

    @property
    def shape(self):
        return self._node.shape

    @property
    def ndim(self):
        return len(self._node.shape)

    @property
    def size(self):
        n = 1
        for s in self._node.shape:
            n *= s
        return n

    def _iop(self, other, name):
        """``self <name>= other``.  While ``self`` is pending no memory holds its values
        yet, so the in-place step becomes its expression (what used its old expression
        keeps it); once computed, its memory is written as for any array."""
        node = self._node
        if node.value is not None:
            return Array._iop(self, other, name)
        res = self._in_place_result(other, name)
        if res is NotImplemented:
            return res
        if type(res) is Deferred and res._node.value is None:
            self._node = res._node
            self._auto = res._auto
            return self
        return self._write_in_place(res)

    def __getattr__(self, name):
        if name != "_array":
            raise AttributeError(name)
        node = self._node
        if node.value is None and self._auto:  # with every other pending expression
            SETTLE_DEVICE[0](self._device)
        if node.value is None:
            SETTLE[0]([node])
        self._array = node.value
        return node.value


def pending(x):
    """The unsettled node of ``x`` (a :class:`Deferred` whose values are not computed), or
    None."""
    if type(x) is Deferred:
        n = x._node
        if n.value is None:
            return n
    return None


def operand(x):
    """The expression operand standing for array ``x``: its node while deferred, else a
    leaf of its backend array."""
    if type(x) is Deferred:
        n = x._node
        if n.value is None:
            return n
        return Leaf(n.value)
    return Leaf(x._array)


def broadcast_shape(*shapes):
    """The broadcast of ``shapes`` by the standard's rules; ValueError when they do not
    broadcast.

    >>> broadcast_shape((3, 1), (4,), ())
    (3, 4)
    """
    if len(shapes) == 2:  # the common case, without generators: equal, or one a scalar's
        a, b = shapes
        if a == b or not b:
            return a
        if not a:
            return b
    first = shapes[0]
    if all(s == first for s in shapes):
        return first
    nd = max(len(s) for s in shapes)
    out = []
    for d in range(nd):
        size = 1
        for s in shapes:
            k = d - (nd - len(s))
            if k < 0:
                continue
            v = s[k]
            if v != 1:
                if size != 1 and size != v:
                    raise ValueError("operands could not be broadcast together with shapes "
                                     + " ".join(str(tuple(t)) for t in shapes))
                size = v
        out.append(size)
    return tuple(out)
