"""Argument handling of the scans: operators (checked against their accumulator dtypes), inputs,
axes and initial values.
"""
from __future__ import annotations

import numpy as np

from ... import ops as _ops
from ... import runtime
from ...runtime import lazy
from ...runtime.caches import Cache

# numba types the generic operators only: the cumulative sums and products never load it
numba = lazy.module("numba", __name__, "numba")

try:
    from numpy.exceptions import AxisError
except ImportError:  # pragma: no cover - numpy < 1.25
    from numpy import AxisError

# --------------------------------------------------------------------------- operators


def resolve_operator(op):
    """(fn, identity(dtypes) or None, name) of an Operator, a builtin or a plain function
    (:func:`forge_array.ops.as_operator`: equal functions are one operator)."""
    if not callable(getattr(op, "fn", op)):
        raise TypeError(f"accumulate: operator must be callable, got {type(op).__name__}")
    op = _ops.as_operator(op)
    fn = op.fn
    ident = getattr(op, "identity", None)
    if ident is not None and not callable(ident):
        ident = None
    name = getattr(op, "name", None) or getattr(fn, "__qualname__", repr(fn))
    return fn, ident, name


_CHECKED = Cache("primitives.scan.arguments.CHECKED")
#: operators known to return a number of their operands' kind: no typing pass (which compiles the
#: operator for the CPU, ~1 s for a process's first numba compile) before a cumulative_sum
_SAME_KIND_OPS = frozenset((_ops.add.fn, _ops.multiply.fn, _ops.maximum.fn, _ops.minimum.fn))


def check_op(fn, tuple_op, acc_dtypes, name):
    """TypeError unless ``fn`` compiles for elements of ``acc_dtypes`` and returns values that
    convert to them (same structure; same kind or narrower, as NumPy's same_kind casting)."""
    if not tuple_op and fn in _SAME_KIND_OPS and np.dtype(acc_dtypes[0]).kind in "iufc":
        return   # add / multiply / maximum / minimum of numbers: a number of the same kind
    key = (fn, tuple_op, acc_dtypes)
    try:
        if key in _CHECKED:
            return
    except TypeError:
        key = None
    types = tuple(runtime.numba_type(d) for d in acc_dtypes)
    if tuple_op:
        argt = numba.types.Tuple(types) if len(set(types)) > 1 else numba.types.UniTuple(types[0], len(types))
        ret = runtime.result_type(fn, (argt, argt))
        rets = list(getattr(ret, "types", ()))
        if not isinstance(ret, numba.types.BaseTuple) or len(rets) != len(types):
            raise TypeError(f"accumulate: operator {name} returns {ret} for elements of "
                            f"{argt}; expected a tuple of {len(types)} values")
    else:
        ret = runtime.result_type(fn, (types[0], types[0]))
        rets = [ret]
    for r, d in zip(rets, acc_dtypes):
        try:
            rd = numba.np.numpy_support.as_dtype(r)
        except Exception as exc:
            raise TypeError(f"accumulate: operator {name} returns {r}, not a number, for "
                            f"elements of {d}") from exc
        if not (np.can_cast(rd, d, "same_kind") or (d.kind == "b" and rd.kind in "iub")):
            raise TypeError(f"accumulate: operator {name} returns {rd} for elements of {d}; "
                            "the result must keep the element type")
    if key is not None:
        _CHECKED[key] = True


# --------------------------------------------------------------------------- arguments


array_module = runtime.array_module


def inputs(x):
    if isinstance(x, (tuple, list)):
        xs = list(x)
        if not xs:
            raise ValueError("accumulate: empty tuple of arrays")
        is_tuple = True
    else:
        xs = [x]
        is_tuple = False
    for a in xs:
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            raise TypeError(f"accumulate: expected NumPy or CuPy arrays, got {type(a).__name__}")
    shape = xs[0].shape
    kind = runtime.is_cupy_array(xs[0])
    for a in xs[1:]:
        if a.shape != shape:
            raise ValueError(f"accumulate: arrays of a tuple must have one shape, got {shape} "
                             f"and {a.shape}")
        if runtime.is_cupy_array(a) != kind:
            raise ValueError("accumulate: arrays of a tuple must be on one device")
        if kind and a.device != xs[0].device:
            raise ValueError("accumulate: arrays of a tuple must be on one device")
    return xs, is_tuple


def normalize_axis(axis, ndim):
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"accumulate: axis must be an int or None, got {type(axis).__name__}")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise AxisError(axis, ndim)
    return axis % ndim


def scalars_of(v, dtypes, what):
    """Tuple of NumPy scalars of ``dtypes`` from a scalar or tuple ``v``."""
    vals = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(vals) != len(dtypes):
        raise ValueError(f"accumulate: {what} has {len(vals)} components, expected {len(dtypes)}")
    out = []
    for a, d in zip(vals, dtypes):
        a = a.item() if hasattr(a, "item") and getattr(a, "size", 1) == 1 else a
        with np.errstate(all="ignore"):
            out.append(np.asarray(a).astype(d)[()])
    return tuple(out)


