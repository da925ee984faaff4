"""Argument handling of the reductions: axes, operands flattened to buffers, accumulator
inference from the map and operator, identities, initial values and result shapes.
"""
from __future__ import annotations

import operator

import numpy as np

from ... import ops as _ops
from ... import runtime
from ...runtime import lazy
from ...runtime.caches import Cache

# numba types the generic operators only: the named reductions never load it
numba = lazy.module("numba", __name__, "numba")
nt = lazy.module("numba.core.types", __name__, "nt")

try:
    from numpy.exceptions import AxisError
except ImportError:  # pragma: no cover
    from numpy import AxisError



# --------------------------------------------------------------------------- helpers


#: the pristine namespace of backend array ``x``'s module (numpy or cupy), whose functions
#: are never a patched drop-in's
array_module = runtime.array_module


def normalize_axis(axis, ndim):
    """``axis`` (None, int or tuple) as a sorted tuple of non-negative ints.

    >>> normalize_axis(-1, 3), normalize_axis(None, 2), normalize_axis((0, -1), 3)
    ((2,), (0, 1), (0, 2))
    >>> normalize_axis(3, 2)
    Traceback (most recent call last):
    ...
    numpy.exceptions.AxisError: axis 3 is out of bounds for array of dimension 2
    """
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        axes = tuple(axis)
    else:
        axes = (axis,)
    out = []
    for a in axes:
        try:
            a = operator.index(a)
        except TypeError:
            raise TypeError(f"axis must be an int or a tuple of ints, got {a!r}") from None
        if not -ndim <= a < ndim:
            raise AxisError(f"axis {a} is out of bounds for array of dimension {ndim}")
        out.append(a % ndim if ndim else a)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {axis!r}")
    return tuple(sorted(out))


def flatten_operands(arrays):
    """Operands (arrays or tuples of arrays) -> (flat list of arrays, struct)."""
    flat, struct = [], []
    for a in arrays:
        if isinstance(a, (tuple, list)):
            if len(a) == 0:
                raise ValueError("an empty tuple of arrays is not an operand")
            flat.extend(a)
            struct.append(len(a))
        else:
            flat.append(a)
            struct.append(0)
    for a in flat:
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            raise TypeError(f"expected backend arrays (numpy or cupy), got {type(a).__name__}")
    shape = flat[0].shape
    for a in flat[1:]:
        if a.shape != shape:
            raise ValueError(f"arrays of different shapes: {shape} and {a.shape}")
    mods = {type(a).__module__.split(".")[0] for a in flat}
    if len(mods) > 1:
        raise ValueError(f"arrays on different devices / backends: {sorted(mods)}")
    return flat, tuple(struct)


def _nb(dt):
    return numba.from_dtype(np.dtype(dt))


def operand_types(flat, struct):
    types, pos = [], 0
    for s in struct:
        if s == 0:
            types.append(_nb(flat[pos].dtype))
            pos += 1
        else:
            types.append(nt.Tuple(tuple(_nb(a.dtype) for a in flat[pos:pos + s])))
            pos += s
    return types


def _dtypes_of(t, what):
    """numba type -> (tuple of numpy dtypes, is_tuple)."""
    if isinstance(t, nt.BaseTuple):
        out = []
        for s in t.types:
            if isinstance(s, nt.BaseTuple) or not isinstance(s, (nt.Number, nt.Boolean)):
                raise TypeError(f"{what} returns {t}: components must be numeric scalars")
            out.append(np.dtype(numba.np.numpy_support.as_dtype(s)))
        return tuple(out), True
    if isinstance(t, (nt.Number, nt.Boolean)):
        return (np.dtype(numba.np.numpy_support.as_dtype(t)),), False
    raise TypeError(f"{what} returns {t}, not a numeric scalar or a tuple of them")


def _name(fn):
    if isinstance(fn, _ops.Operator):
        return fn.name
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))


_TYPES = Cache("primitives.reductions.arguments.TYPES")


def infer_accumulation(f, op, elem_types):
    """(acc dtypes, acc is tuple) of reducing ``f(*elements)`` with ``op``."""
    key = (f, op, tuple(elem_types))
    r = _TYPES.get(key)
    if r is not None:
        return r
    if f is None:
        t0 = elem_types[0] if len(elem_types) == 1 else nt.Tuple(tuple(elem_types))
    else:
        t0 = runtime.result_type(f, tuple(elem_types))
    _dtypes_of(t0, f"map function {_name(f)}") if f is not None else None
    t1 = runtime.result_type(op.fn, (t0, t0))
    _check_shape(op, t0, t1)
    if t1 != t0:
        t2 = runtime.result_type(op.fn, (t1, t1))
        _check_shape(op, t1, t2)
        if t2 != t1:
            raise TypeError(f"operator {op.name} is not type-stable: returns {t1} for {t0} "
                            f"and {t2} for {t1}")
    r = _TYPES[key] = _dtypes_of(t1, f"operator {op.name}")
    return r


def _check_shape(op, t_in, t_out):
    a = isinstance(t_in, nt.BaseTuple)
    b = isinstance(t_out, nt.BaseTuple)
    if a != b or (a and len(t_in.types) != len(t_out.types)):
        raise TypeError(f"operator {op.name} returns {t_out} for elements of type {t_in}: the "
                        "result must have the type of the elements (a scalar for scalars, a "
                        "tuple of the same length for tuples)")


def python_scalar(v):
    return v.item() if hasattr(v, "item") else v


def identity_of(op, acc, is_tuple):
    ident = op.identity(acc if is_tuple else acc[0]) if isinstance(op, _ops.Operator) else None
    if ident is None:
        return None
    if not is_tuple:
        ident = (ident,)
    return tuple(python_scalar(np.asarray(v, dtype=d)[()]) for v, d in zip(ident, acc))


def init_values(init, acc, is_tuple, opname):
    if is_tuple:
        if not isinstance(init, (tuple, list)) or len(init) != len(acc):
            raise TypeError(f"init for operator {opname} must be a tuple of {len(acc)} values")
        vals = tuple(init)
    else:
        if isinstance(init, (tuple, list)):
            raise TypeError(f"init for operator {opname} must be a scalar")
        vals = (init,)
    return tuple(np.asarray(v, dtype=d)[()] for v, d in zip(vals, acc))


def full_outputs(xp, values, dtypes, is_tuple, shape):
    outs = tuple(xp.full(shape, v, dtype=d) for v, d in zip(values, dtypes))
    return outs if is_tuple else outs[0]


def reshape_outputs(outs, is_tuple, shape):
    outs = tuple(o.reshape(shape) for o in outs)
    return outs if is_tuple else outs[0]


