"""Building expression nodes from namespace calls while a fused call is traced.

The namespace's element-wise functions, ``where``, ``astype``, ``clip`` and reductions ask
:func:`tracing` first (one global counter read when nothing is traced) and, while a fused
call runs in this thread, hand their validated arguments here.  A builder returns a
:class:`~.expr.Deferred` array, or None when the step does not fuse (a dtype or an
operation without a kernel form, a device without kernels, operands that do not
broadcast): the namespace then computes it eagerly, which reads the operands' values and
so settles them — a break in the plan, never an error.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from .._array import py_scalar
from ..primitives.fused_reduce import Term, term_dtype
from ..runtime.config import SIMULATE
from .codegen import BINARY, FLOAT_ONLY, UNARY
from .expr import Const, Deferred, Node, broadcast_shape, operand

__all__ = ["ACTIVE", "tracing", "binary", "unary", "where", "astype", "clip", "reduction",
           "Trace", "current"]

#: number of threads tracing a fused call now (read first, so that plain code pays one
#: global look-up)
ACTIVE = [0]
_TLS = threading.local()

_PREDICATES = frozenset(["equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                         "logical_and", "logical_or", "logical_xor", "isnan", "isinf",
                         "isfinite", "signbit", "logical_not"])
_KINDS = frozenset("biuf")


class Trace:
    """The state of one fused call: weak references to the deferred arrays it made (those
    still alive when it ends are settled then), a log of early settlements, whether any
    value was computed while the function ran (``forced``) or written through the
    namespace (``wrote``), and the views it took of materialised arrays, ``(source,
    view_of, view)`` of backend arrays."""

    __slots__ = ("arrays", "log", "forced", "wrote", "views")

    def __init__(self):
        self.arrays = []
        self.log = []
        self.forced = False
        self.wrote = False
        self.views = []


def current():
    """This thread's :class:`Trace`, or None."""
    return getattr(_TLS, "trace", None)


def tracing():
    """Whether this thread is tracing a fused call."""
    return getattr(_TLS, "trace", None) is not None


def _kernels_on(device):
    return device.is_cuda or SIMULATE


def _deferred(node):
    d = Deferred._of(node, node.device)
    t = _TLS.trace
    t.arrays.append(weakref.ref(d))
    return d


def _scalar_const(value, dtype):
    v = py_scalar(value)
    dtype.type(v)  # the eager path's conversion: the same OverflowError for a bad value
    return Const(v, dtype)


def binary(name, x1, x2, kinds):
    """The deferred ``name(x1, x2)``, or None (see the module docstring)."""
    if name not in BINARY:
        return None
    from .._elementwise import _binary_types  # noqa: PLC0415 - the namespace's validation

    dt, dev, s1, s2 = _binary_types(name, x1, x2, kinds)
    if not _kernels_on(dev) or dt.kind not in _KINDS or (name in FLOAT_ONLY and dt.kind != "f"):
        return None
    a = _scalar_const(x1, s1) if s1 is not None else operand(x1)
    b = _scalar_const(x2, s2) if s2 is not None else operand(x2)
    try:
        shape = broadcast_shape(a.shape, b.shape)
    except ValueError:  # eager code raises its own error
        return None
    rdt = np.dtype(np.bool_) if name in _PREDICATES else dt
    return _deferred(Node(name, (a, b), rdt, shape, dt, device=dev))


def unary(name, x):
    """The deferred ``name(x)`` of a validated array ``x``, or None."""
    if name not in UNARY:
        return None
    dt = x.dtype
    dev = x._device
    if not _kernels_on(dev) or dt.kind not in _KINDS or (name in FLOAT_ONLY and dt.kind != "f"):
        return None
    rdt = np.dtype(np.bool_) if name in _PREDICATES else dt
    e = operand(x)
    return _deferred(Node(name, (e,), rdt, e.shape, dt, device=dev))


def where(condition, x1, x2, dt, dev, s1, s2):
    """The deferred ``where(condition, x1, x2)`` (validated: result dtype ``dt``, scalar
    dtypes ``s1`` / ``s2``), or None."""
    if not _kernels_on(dev) or dt.kind not in _KINDS:
        return None
    c = operand(condition)
    a = _scalar_const(x1, s1) if s1 is not None else operand(x1)
    b = _scalar_const(x2, s2) if s2 is not None else operand(x2)
    try:
        shape = broadcast_shape(c.shape, a.shape, b.shape)
    except ValueError:
        return None
    return _deferred(Node("where", (c, a, b), dt, shape, dt, device=dev))


def astype(x, dtype):
    """The deferred ``astype(x, dtype)`` on ``x``'s device, or None."""
    dev = x._device
    if not _kernels_on(dev) or x.dtype.kind not in _KINDS or dtype.kind not in _KINDS:
        return None
    e = operand(x)
    return _deferred(Node("astype", (e,), dtype, e.shape, x.dtype, device=dev))


def clip(x, lo, hi):
    """The deferred ``clip(x, lo, hi)`` for Python-scalar (or None) bounds already
    converted to ``x``'s dtype and not NaN, or None."""
    dev = x._device
    if not _kernels_on(dev) or x.dtype.kind not in "iuf":
        return None
    e = operand(x)
    return _deferred(Node("clip", (e,), x.dtype, e.shape, x.dtype, (lo, hi), device=dev))


def reduction(name, x, axes, dtype, keepdims, correction=0.0):
    """The deferred reduction ``name`` (see :data:`~forge_array.primitives.fused_reduce.TERM_NAMES`)
    of ``x`` over the normalised ``axes`` accumulating in ``dtype`` (the values' dtype for
    argmax / argmin), or None (empty reductions and complex data run eagerly)."""
    dev = x._device
    if not _kernels_on(dev) or x.dtype.kind not in _KINDS or np.dtype(dtype).kind not in _KINDS:
        return None
    shape = x.shape
    count = 1
    for d in axes:
        count *= shape[d]
    if count == 0 or x.size == 0:
        return None
    e = operand(x)
    full = len(axes) == len(shape)
    term = Term(name, np.dtype(dtype), float(correction))
    if keepdims:
        out_shape = tuple(1 if d in axes else s for d, s in enumerate(shape))
    else:
        out_shape = tuple(s for d, s in enumerate(shape) if d not in axes)
    node = Node("reduce", (e,), term_dtype(term), out_shape, None,
                (term, None if full else tuple(axes), bool(keepdims)), device=dev)
    return _deferred(node)
