"""Building expression nodes from namespace calls: while a fused call is traced, and in plain
code under automatic fusion (:mod:`.auto`).

The namespace's element-wise functions, ``where``, ``astype``, ``clip`` and reductions read
:data:`ON` first (one global read) and, when it is set, hand their arguments here.  A
builder returns a :class:`~.expr.Deferred` array, or None when the step is not deferred (a
dtype or an operation without a kernel form, a device without kernels, operands that do
not broadcast, and in plain code the rules of :mod:`.auto`): the namespace then computes
it eagerly, which reads the operands' values and so settles them — a break in the plan,
never an error.
"""

from __future__ import annotations

import contextlib
import weakref

import numpy as np

from .._array import Array, py_scalar
from .._kernel_layer import binding
from .._ownership import is_private
from ..runtime.caches import Cache
from ..runtime.config import SIMULATE
from . import auto as _auto
from . import expr as _expr
from . import state as _state
from .expr import ALONE as _ALONE
from .expr import Const, Deferred, Leaf, Node, broadcast_shape, const_key, operand, pending
from .fusible import BINARY, FLOAT_ONLY, INT_EAGER, UNARY
from .state import (  # noqa: F401 - the builders' switches, read through this module
    ACTIVE,
    ON,
    begin_trace,
    current,
    end_trace,
    sync_switch,
    tracing,
    untraced,
)

_fr = binding("fused_reduce", __name__, "_fr")  # loads numba at first use

__all__ = ["ACTIVE", "ON", "PY_SCALARS", "tracing", "wanted", "binary", "unary", "where",
           "astype", "clip", "wanted_mode", "reduction", "scan", "Trace", "current", "begin_trace",
           "end_trace", "sync_switch", "untraced", "cut", "deferring_all", "TRACE_MAX_OPS",
           "TRACE_MAX_READS"]

_TRACE = 1
_AUTO = 2


def _settle_loading(nodes):
    """Load :mod:`.evaluate` (it imports numba, so not before a first settlement), which
    replaces this entry of :data:`.expr.SETTLE` with its ``settle``, and settle ``nodes``."""
    from . import evaluate  # noqa: PLC0415 - numba loads at the first settlement

    return evaluate.settle(nodes)


if _expr.SETTLE[0] is None:  # deferred arrays exist only once this module has loaded
    _expr.SETTLE[0] = _settle_loading


@contextlib.contextmanager
def deferring_all():
    """Plain code in this thread defers every fusable step whatever its size (automatic
    fusion switched off or not) until the block ends; other threads are unaffected.  How
    :func:`forge_array.fuse` runs a function of sharded arrays: the function runs as plain
    code, and each block's element-wise steps fuse into the reduction, scan or step that
    consumes them (one launch per device).

    >>> with deferring_all():
    ...     pass
    """
    prev = _state.set_defer_all(True)
    try:
        yield
    finally:
        _state.set_defer_all(prev)
        if not prev:
            _auto.settle_all()


_PREDICATES = frozenset(["equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                         "logical_and", "logical_or", "logical_xor", "isnan", "isinf",
                         "isfinite", "signbit", "logical_not"])
_KINDS = frozenset("biuf")


class Trace:
    """The state of one fused call: weak references to the deferred arrays it made (those
    still alive when it ends are settled then), a log of early settlements, whether any
    value was computed while the function ran (``forced``) or written through the
    namespace (``wrote``), and the views it took of materialised arrays, ``(source,
    view_of, view)`` of backend arrays; ``rec``: the :class:`~.replay.Recorder` of the
    call's launches, when it records a plan."""

    __slots__ = ("arrays", "log", "forced", "wrote", "views", "rec")

    def __init__(self, rec=None):
        self.arrays = []
        self.log = []
        self.forced = False
        self.wrote = False
        self.views = []
        self.rec = rec


def _kernels_on(device):
    return device.is_cuda or SIMULATE


def _mode(xs, device=None):
    """_TRACE, _AUTO or None (computed eagerly) for a step on ``xs`` (arrays and scalars) on
    ``device`` (default: the first array's).  In plain code a step is deferred when an
    operand is pending or an array operand holds at least :data:`.auto.MIN_SIZE` elements
    (checked first: small eager calls pay two type checks per operand)."""
    limit = _auto.MIN_SIZE[0]
    explicit = False
    if ACTIVE[0]:
        if _state.current() is not None:
            dev = device or _first_device(xs)
            return _TRACE if dev is not None and _kernels_on(dev) else None
        if _state.defer_all():
            limit, explicit = 0, True
    for x in xs:
        t = type(x)
        if t is Array:
            if x._array.size >= limit:
                break
        elif t is Deferred:
            if x._node.value is None or x.size >= limit:
                break
        elif isinstance(x, Array) and x.size >= limit:
            break
    else:
        return None
    dev = device or _first_device(xs)
    if dev is not None and _auto.applies(dev, explicit) and _kernels_on(dev):
        return _AUTO
    return None


#: Python scalar types: operands a plain-code step is never deferred for.  A step is computed
#: eagerly whatever its operation when no thread traces and every operand is a materialised
#: array of fewer than :data:`.auto.MIN_SIZE` elements or one of these (:func:`_mode`'s
#: answer for them): the namespace's binary steps and ``where`` check that inline, before
#: calling into this module
PY_SCALARS = frozenset((int, float, bool, complex))


def wanted(*xs):
    """Whether a namespace call on the arrays ``xs`` (the first one an array) should go to a
    builder rather than to its eager fast path (in plain code: not when the first is a
    materialised array of shared memory, which is never deferred)."""
    return _unless_shared(_mode(xs), xs[0]) is not None


def wanted_mode(x):
    """:func:`wanted` of one array, as the mode to hand to :func:`reduction` (None: not
    wanted)."""
    return _unless_shared(_mode((x,)), x)


def _unless_shared(mode, x):
    """``mode``, or None in plain code when ``x`` is a materialised array of shared memory."""
    if mode == _AUTO and type(x) is Array and not is_private(x._array):
        return None
    return mode


def _operand(x, mode):
    """The operand standing for array ``x``; in plain code None when ``x`` reads shared
    memory."""
    if mode == _TRACE:
        return operand(x)
    if type(x) is Deferred:
        n = x._node
        if n.value is None:
            return n
        arr = n.value
    else:
        arr = x._array
    return Leaf(arr) if is_private(arr) else None


#: (operation, operand kinds) of a one-step expression on materialised arrays -> its
#: structure (:attr:`~.expr.Node.sig`), so that a builder finds a structure that runs
#: eagerly (:func:`.auto.alone_eager`) before it builds the node
_PRE = Cache("fusion.build.PRE")


def _eager_kind(x):
    """What a one-step structure records of operand ``x``: a materialised array's dtype, a
    Python scalar's type and value; None for anything else."""
    t = type(x)
    if t is Array:
        return x._array.dtype
    if t in PY_SCALARS:
        return (t, const_key(x))
    return None


def _runs_eagerly(pk):
    """``(whether the one-step structure known by ``pk`` runs eagerly now, whether it is
    known)``."""
    sig = _PRE.get(pk)
    if sig is None:
        return False, False
    return _auto.alone_eager(sig), True


def _deferred(node, mode, pk=None, known=False):
    """The deferred array of ``node`` (None: computed eagerly).  ``pk``: the key of a
    one-step structure in :data:`_PRE` (noted here); ``known``: its builder asked
    :func:`.auto.alone_eager` already."""
    if mode == _TRACE:
        if node.ops > TRACE_MAX_OPS or node.reads > TRACE_MAX_READS:
            node = cut(node)
        d = Deferred._of(node, node.device)
        _state.current().arrays.append(weakref.ref(d))
        return d
    if node.ops > _auto.MAX_OPS or node.reads > _auto.MAX_LEAVES:
        return None
    if pk is not None:
        _PRE[pk] = node.sig
    if node.ops == 1 and not known and _ALONE and _auto.alone_eager(node.sig):
        return None
    d = Deferred._of(node, node.device, True)
    _auto.register(d)
    return d


#: most steps and array reads of one expression built while a fused call is traced: a step
#: that would make more computes its pending operands first (launches of the call's plan),
#: so that no launch reads more than a kernel's parameters hold and no walk of an
#: expression goes deeper than this
TRACE_MAX_OPS = 64
TRACE_MAX_READS = 24


def cut(node):
    """``node`` rebuilt on the values of its pending operands, computed now as launches of
    the traced call (its plan records them; its values were not read by Python)."""
    from .evaluate import settle  # noqa: PLC0415 - evaluate imports this module

    t = _state.current()
    for a in node.args:
        if type(a) is Node and a.value is None:
            settle([a], t.rec, forced=False)
    t.log.append(f"an expression of {node.ops} steps and {node.reads} array reads computed "
                 "before its next step")
    return Node(node.op, node.args, node.dtype, node.shape, node.ctype, node.extra,
                device=node.device)


def _first_device(xs):
    for x in xs:
        if isinstance(x, Array):
            return x._device
    return None


def _scalar_const(value, dtype):
    v = py_scalar(value)
    dtype.type(v)  # the eager path's conversion: the same OverflowError for a bad value
    return Const(v, dtype)


def binary(name, x1, x2, kinds):
    """The deferred ``name(x1, x2)``, or None (see the module docstring)."""
    if name not in BINARY:
        return None
    mode = _mode((x1, x2))
    if mode is None:
        return None
    pk, known = None, False
    if _ALONE and mode == _AUTO:  # a one-step structure that runs eagerly: not built
        k1, k2 = _eager_kind(x1), _eager_kind(x2)
        if k1 is not None and k2 is not None:
            pk = (name, k1, k2, type(x1) is Array and type(x2) is Array and x1._array is x2._array)
            eager, known = _runs_eagerly(pk)
            if eager:
                return None
    dt, dev, s1, s2 = _binary_types(name, x1, x2, kinds)
    if dt.kind not in _KINDS or (name in FLOAT_ONLY and dt.kind != "f"):
        return None
    a = _scalar_const(x1, s1) if s1 is not None else _operand(x1, mode)
    b = _scalar_const(x2, s2) if s2 is not None else _operand(x2, mode)
    if a is None or b is None:
        return None
    try:
        shape = broadcast_shape(a.shape, b.shape)
    except ValueError:  # eager code raises its own error
        return None
    rdt = _BOOL if name in _PREDICATES else dt
    return _deferred(Node(name, (a, b), rdt, shape, dt, device=dev), mode, pk, known)


#: The namespace's validation of two operands, ``(name, x1, x2, kinds) -> (dtype, device,
#: scalar dtype of x1, scalar dtype of x2)``, registered by the namespace's element-wise
#: module as it loads (it sits above this module): one rule for eager and deferred steps.
BINARY_TYPES = [None]


def _binary_types(name, x1, x2, kinds):
    return BINARY_TYPES[0](name, x1, x2, kinds)


_BOOL = np.dtype(np.bool_)


def unary(name, x):
    """The deferred ``name(x)`` of a validated array ``x``, or None."""
    if name not in UNARY:
        return None
    mode = _mode((x,))
    if mode is None:
        return None
    pk, known = None, False
    if _ALONE and mode == _AUTO and type(x) is Array:
        pk = (name, x._array.dtype)
        eager, known = _runs_eagerly(pk)
        if eager:
            return None
    dev = x._device
    dt = x.dtype
    if (dt.kind not in _KINDS or (name in FLOAT_ONLY and dt.kind != "f")
            or (name in INT_EAGER and dt.kind in "iu")):
        return None
    rdt = _BOOL if name in _PREDICATES else dt
    e = _operand(x, mode)
    if e is None:
        return None
    return _deferred(Node(name, (e,), rdt, e.shape, dt, device=dev), mode, pk, known)


def where(condition, x1, x2, dt, dev, s1, s2):
    """The deferred ``where(condition, x1, x2)`` (validated: result dtype ``dt``, scalar
    dtypes ``s1`` / ``s2``), or None."""
    mode = _mode((condition, x1, x2), dev)
    if mode is None or dt.kind not in _KINDS:
        return None
    c = _operand(condition, mode)
    a = _scalar_const(x1, s1) if s1 is not None else _operand(x1, mode)
    b = _scalar_const(x2, s2) if s2 is not None else _operand(x2, mode)
    if a is None or b is None or c is None:
        return None
    try:
        shape = broadcast_shape(c.shape, a.shape, b.shape)
    except ValueError:
        return None
    return _deferred(Node("where", (c, a, b), dt, shape, dt, device=dev), mode)


def astype(x, dtype):
    """The deferred ``astype(x, dtype)`` on ``x``'s device, or None."""
    dev = x._device
    mode = _mode((x,))
    if mode is None or x.dtype.kind not in _KINDS or dtype.kind not in _KINDS:
        return None
    e = _operand(x, mode)
    if e is None:
        return None
    return _deferred(Node("astype", (e,), dtype, e.shape, x.dtype, device=dev), mode)


def clip(x, lo, hi):
    """The deferred ``clip(x, lo, hi)`` for Python-scalar (or None) bounds already
    converted to ``x``'s dtype and not NaN, or None."""
    dev = x._device
    mode = _mode((x,))
    if mode is None or x.dtype.kind not in "iuf":
        return None
    e = _operand(x, mode)
    if e is None:
        return None
    return _deferred(Node("clip", (e,), x.dtype, e.shape, x.dtype, (lo, hi), device=dev), mode)


def reduction(name, x, axes, dtype, keepdims, correction=0.0, mode=None):
    """The deferred reduction ``name`` (see :data:`~forge_array.primitives.fused_reduce.TERM_NAMES`)
    of ``x`` over the normalised ``axes`` accumulating in ``dtype`` (the values' dtype for
    argmax / argmin), or None (empty reductions and complex data run eagerly).  ``mode``:
    :func:`wanted_mode` of ``x`` when the caller has it."""
    if mode is None:
        mode = _mode((x,))
        if mode is None:
            return None
    pk, known = None, False
    if _ALONE and mode == _AUTO and type(x) is Array:
        pk = ("reduce", name, x._array.dtype, axes, dtype, keepdims, correction)
        eager, known = _runs_eagerly(pk)
        if eager:
            return None
    tk = (name, dtype, correction)
    hit = _TERMS.get(tk)
    if hit is None:
        term = _fr.Term(name, np.dtype(dtype), float(correction))
        _TERMS[tk] = hit = (term, _fr.term_dtype(term), term.dtype.kind in _KINDS)
    term, rdt, kind_ok = hit
    if not kind_ok or x.dtype.kind not in _KINDS:
        return None
    shape = x.shape
    if 0 in shape:  # empty reductions run eagerly
        return None
    e = _operand(x, mode)
    if e is None:
        return None
    if len(axes) == len(shape):
        out_shape = (1,) * len(shape) if keepdims else ()
        extra = (term, None, bool(keepdims))
    else:
        if keepdims:
            out_shape = tuple(1 if d in axes else s for d, s in enumerate(shape))
        else:
            out_shape = tuple(s for d, s in enumerate(shape) if d not in axes)
        extra = (term, tuple(axes), bool(keepdims))
    return _deferred(Node("reduce", (e,), rdt, out_shape, None, extra, device=x._device), mode,
                     pk, known)


#: (name, dtype, correction) -> (Term, result dtype) of the reductions met
_TERMS = Cache("fusion.build.TERMS")  # many distinct corrections evict


def scan(name, x, dtype, include_initial):
    """``cumulative_sum`` / ``cumulative_prod`` (``name``) of ``x`` with its pending 1-D
    expression fused into the scan (:func:`.evaluate.scan_of`), as an array; None when ``x``
    is not such an expression (the namespace then scans its values)."""
    n = pending(x)
    if n is None or len(n.shape) != 1 or not _kernels_on(n.device):
        return None
    from .evaluate import scan_of  # noqa: PLC0415 - evaluate imports this module

    r = scan_of(name, n, dtype, include_initial)
    return None if r is None else Array._new(r, n.device)
