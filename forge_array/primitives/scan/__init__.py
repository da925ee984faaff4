"""Scans on backend arrays: generic ``accumulate`` and ``cumulative_sum`` / ``cumulative_prod``.

On our kernels (:mod:`forge_array.kernels.scan`, single pass with decoupled look-back) when
``runtime.kernels_available(x)``; otherwise NumPy (``cumsum`` / ufunc ``accumulate``) or a
numba loop on the CPU for generic operators.

Example
-------
>>> import numpy as np
>>> from forge_array import ops
>>> from forge_array.primitives import accumulate, cumulative_sum
>>> cumulative_sum(np.array([1, 2, 3], dtype=np.int32), include_initial=True).tolist()
[0, 1, 3, 6]
>>> a, b = np.array([0.5, 0.5, 0.5]), np.array([1.0, 1.0, 1.0])
>>> accumulate(ops.affine, (a, b))[1].tolist()      # h_t = 0.5 h_(t-1) + 1, h_(-1) = 0
[1.0, 1.5, 1.75]
"""

from __future__ import annotations

import math
import threading
from types import BuiltinFunctionType as _BuiltinFunctionType
from types import FunctionType as _FunctionType
from types import ModuleType as _ModuleType

import numpy as np

from ... import runtime
from ...ops import Operator as _Operator
from ...runtime import SIMULATE, stored
from ...runtime.accumulation import accumulation_dtype
from ...runtime.caches import Cache
from .arguments import AxisError, _check_op, _inputs, _normalize_axis, _resolve, _value, _xp
from .cpu import _scan_cpu
from .plan import (  # noqa: F401 - tests count plans
    _fast_key,
    _fast_plans,
    _layout_key,
    _out_key,
    _plan_narrow,
    _plan_rows,
    _remember,
    _run_fast,
    _run_into,
    _scan_kernel,
)
from .state import _fit_items, _items_for, _local, _reset_states, _state_key, _zeros16, scan_statistics  # noqa: F401

__all__ = ["accumulate", "accumulate_fast", "cumulative_sum", "cumulative_prod", "cumulative_mapped", "mapped_launch",
           "scan_statistics"]

# --------------------------------------------------------------------------- public API


def accumulate(op, x, /, *, axis=None, init=None, include_initial=False, exclusive=False,
               reverse=False, out=None, deterministic=False):
    """Inclusive scan of ``x`` with the associative operator ``op`` along ``axis``.

    ``op`` is a :class:`forge_array.ops.Operator` or any plain Python function of two
    elements that numba compiles (commutative or not); elements are scalars, or tuples when
    ``x`` is a tuple of arrays (struct-of-arrays: the result is then a tuple of arrays).
    ``axis=None`` scans the C-order flattening (as ``numpy.cumsum``). The result at ``k`` is
    ``op(...op(op(init, x_0), x_1)..., x_k)`` (``init`` left out when None).

    ``include_initial``: the output is one longer along ``axis`` and starts with ``init``
    (the operator's identity when ``init`` is None). ``exclusive``: element ``k`` gets the
    combination of the elements before it (``init`` / identity first). ``reverse``: scan
    from the end (the result is ``flip(accumulate(op, flip(x)))``). ``out``: backend
    array(s) of the result's shape and dtype(s), possibly views. ``deterministic``:
    bitwise-identical results run to run for floating-point operators (the look-back then
    combines in a fixed order; see docs/scans.md for the cost).

    >>> import numpy as np
    >>> accumulate(lambda a, b: max(a, b), np.array([3, 1, 4, 1, 5])).tolist()
    [3, 3, 4, 4, 5]
    >>> matmul2 = lambda p, q: (p[0] * q[0] + p[1] * q[2], p[0] * q[1] + p[1] * q[3],
    ...                         p[2] * q[0] + p[3] * q[2], p[2] * q[1] + p[3] * q[3])
    >>> m = tuple(np.array([v, v]) for v in (1.0, 1.0, 0.0, 1.0))   # [[1,1],[0,1]] twice
    >>> [c.tolist() for c in accumulate(matmul2, m)]
    [[1.0, 1.0], [1.0, 2.0], [0.0, 0.0], [1.0, 1.0]]
    """
    fn, ident, name = _resolve(op)
    if _holds_nothing(op):
        _RESOLVED[op] = fn
    xs, is_tuple = _inputs(x)
    dtypes = tuple(np.dtype(a.dtype) for a in xs)
    return _accumulate(fn, is_tuple, xs, dtypes, dtypes, ident, name, axis=axis, init=init,
                       include_initial=include_initial, exclusive=exclusive, reverse=reverse,
                       out=out, deterministic=deterministic, flatten=True)


#: operator objects -> the function :func:`accumulate` resolved them to
_RESOLVED = Cache("primitives.scan.RESOLVED", 1024)


def _holds_nothing(op):
    """Whether keeping ``op`` in :data:`_RESOLVED` keeps nothing else alive: an operator of
    :mod:`forge_array.ops`, a builtin, or a plain function without captured variables or
    defaults (a closure written anew at each call could hold arrays)."""
    if isinstance(op, _Operator):
        return True
    if type(op) is _BuiltinFunctionType:  # max, operator.add; not a bound method of an object
        return op.__self__ is None or isinstance(op.__self__, _ModuleType)
    return (type(op) is _FunctionType and op.__closure__ is None and not op.__defaults__
            and not op.__kwdefaults__)


def accumulate_fast(op, x, axis, include_initial, exclusive, reverse, out, deterministic):
    """:func:`accumulate` of ONE backend array ``x`` with no ``init`` (``out``: one array or
    None) when an earlier call of the same operator object, flags and layouts left a launch
    plan to replay; None otherwise (the caller then takes :func:`accumulate`'s full path,
    which checks the arguments).

    >>> import numpy as np
    >>> from forge_array import ops
    >>> x = np.arange(4.0)
    >>> r = accumulate_fast(ops.add, x, None, False, False, False, None, False)
    >>> r is None or r.tolist() == [0.0, 1.0, 3.0, 6.0]
    True
    """
    try:
        fn = _RESOLVED.get(op)
    except TypeError:
        return None
    if fn is None:
        return None
    return _replayed(fn, False, (x,), (x.dtype,), axis, include_initial, exclusive, reverse,
                     deterministic, True, out)[1]


def _replayed(key_fn, tuple_op, xs, acc_dtypes, axis, include_initial, exclusive, reverse,
              deterministic, flatten, out):
    """``(key, result)``: the plan key of a call without ``init`` (with the outputs' layouts
    when ``out`` is given; None when unhashable) and the result of replaying the plan kept
    under it, or None when there is none (or the fresh output is not aligned as planned)."""
    fkey = _fast_key(key_fn, tuple_op, xs, acc_dtypes, axis, include_initial, exclusive,
                     reverse, deterministic, flatten)
    if fkey is None:
        return None, None
    if out is None:
        plan = _fast_plans().get(fkey)
        return fkey, (None if plan is None else _run_fast(plan, xs, acc_dtypes, tuple_op, fkey[-1]))
    okey = _out_key(fkey, out, tuple_op)
    plan = _fast_plans().get(okey) if okey is not None else None
    return okey, (None if plan is None else _run_into(plan, xs, out, tuple_op, fkey[-1]))


#: the scans whose launches are stored (runtime.stored)
_STORED = frozenset(("cumulative_sum", "cumulative_prod"))


def _accumulate(fn, tuple_op, xs, in_dtypes, acc_dtypes, ident, name, *, axis, init,
                include_initial, exclusive, reverse, out, deterministic, flatten, mapfn=None):
    fkey = None
    if init is None:  # replay the plan of an earlier call
        fkey, r = _replayed(fn if mapfn is None else (fn, mapfn), tuple_op, xs, acc_dtypes, axis,
                            include_initial, exclusive, reverse, deterministic, flatten, out)
        if r is not None:
            return r
    if include_initial and exclusive:
        raise ValueError("accumulate: include_initial and exclusive exclude each other")
    _check_op(fn, tuple_op, acc_dtypes, name)
    flat = False
    if axis is None:
        if xs[0].ndim != 1:
            if not flatten:
                raise ValueError(f"{name}: axis must be given for a {xs[0].ndim}-D array")
            xs = [a.reshape(-1) for a in xs]
            flat = True
        axis = 0
    elif xs[0].ndim == 0:
        raise AxisError(axis, 0)
    else:
        axis = _normalize_axis(axis, xs[0].ndim)
    if init is not None:
        init = _value(init, acc_dtypes, "init")
    elif include_initial or exclusive:
        iv = ident(acc_dtypes if tuple_op else acc_dtypes[0]) if ident is not None else None
        if iv is None:
            raise ValueError(f"accumulate: operator {name} has no identity; pass init= for "
                             "include_initial / exclusive scans")
        init = _value(iv, acc_dtypes, "identity")
    shift = 1 if (include_initial or exclusive) else 0
    shape = list(xs[0].shape)
    n = shape[axis]
    m = n + 1 if include_initial else n
    shape[axis] = m
    shape = tuple(shape)
    xp = _xp(xs[0])
    if out is None:
        outs = [xp.empty(shape, dtype=d) for d in acc_dtypes]
    else:
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(acc_dtypes) or (isinstance(out, (tuple, list)) != tuple_op):
            want = f"a tuple of {len(acc_dtypes)} arrays" if tuple_op else "one array"
            raise ValueError(f"accumulate: out must be {want}")
        for o, d in zip(outs, acc_dtypes):
            if tuple(o.shape) != shape or np.dtype(o.dtype) != d:
                raise ValueError(f"accumulate: out has shape {tuple(o.shape)} and dtype {o.dtype}, "
                                 f"expected {shape} and {d}")
            if runtime.is_cupy_array(o) != runtime.is_cupy_array(xs[0]):
                raise ValueError("accumulate: out must be on the device of x")
    if n == 0 or math.prod(shape) == 0:
        if shift and math.prod(shape) > 0:
            for o, v in zip(outs, init):
                idx = [slice(None)] * len(shape)
                idx[axis] = -1 if reverse else 0
                o[tuple(idx)] = v
        return tuple(outs) if tuple_op else outs[0]
    if runtime.kernels_available(xs[0]) and all(d.itemsize <= 16 for d in acc_dtypes):
        plan = _scan_kernel(fn, tuple_op, xs, outs, in_dtypes, acc_dtypes, axis, init, shift,
                            m, reverse, deterministic, mapfn)
        if plan is not None and fkey is not None:
            plan.flat = flat
            _remember(fkey, plan)
            if (not SIMULATE and name in _STORED and mapfn is None and not tuple_op and out is None
                    and len(xs) == 1 and not (exclusive or reverse or deterministic)):
                stored.save(stored.scan_key(name, xs[0], axis, acc_dtypes[0], include_initial),
                            plan.stored_form(xs[0], outs[0]))   # for a later process's first call
    else:
        if mapfn is not None:
            raise ValueError(f"{name}: a mapped scan needs the kernels")
        _scan_cpu(fn, tuple_op, xs, outs, acc_dtypes, axis, init, shift, m, reverse)
    return tuple(outs) if tuple_op else outs[0]


_CUMULATIVE = Cache("primitives.scan.CUMULATIVE")


def _op_and_acc(opname, value_dtype, dtype):
    """The operator of ``cumulative_sum`` / ``cumulative_prod`` (``opname``) and its
    accumulator dtypes for values of ``value_dtype`` accumulated in ``dtype``."""
    from ... import ops

    op = ops.add if opname == "cumulative_sum" else ops.multiply
    return op, (accumulation_dtype(value_dtype, dtype, opname),)


def _cumulative(opname, x, axis, dtype, include_initial, out, init=None):
    if x.ndim == 0:
        raise ValueError(f"{opname}: x must have at least one dimension")
    if axis is None and x.ndim > 1:
        raise ValueError(f"{opname}: axis must be given for a {x.ndim}-D array")
    try:
        key = (opname, x.dtype, dtype)
        op, ind, acc = _CUMULATIVE[key]
    except (KeyError, TypeError):
        op, acc = _op_and_acc(opname, x.dtype, dtype)
        ind = (np.dtype(x.dtype),)
        try:
            _CUMULATIVE[key] = (op, ind, acc)
        except TypeError:
            pass
    return _accumulate(op.fn, False, [x], ind, acc, op.identity, opname,
                       axis=axis, init=init, include_initial=include_initial, exclusive=False,
                       reverse=False, out=out, deterministic=False, flatten=False)


def cumulative_mapped(opname, mapfn, leaves, value_dtype, dtype, include_initial):
    """``cumulative_sum`` / ``cumulative_prod`` (``opname``) of the element-wise expression
    ``mapfn(*leaves)`` (values of ``value_dtype``; a function returning a 1-tuple, as
    :func:`forge_array.fusion.codegen.function_of` builds) over 1-D backend arrays
    ``leaves`` of one length, accumulated in ``dtype`` (None: the standard's rule for
    ``value_dtype``): the expression is computed as the scan loads it, never written.  Needs
    the kernels (``runtime.kernels_available``).

    >>> import numpy as np
    >>> from forge_array import runtime
    >>> x, y = np.arange(4.0), np.full(4, 2.0)
    >>> f = lambda a, b: (a * b,)
    >>> r = cumulative_mapped("cumulative_sum", f, [x, y], x.dtype, None, False) \
    ...     if runtime.kernels_available(x) else np.cumsum(x * y)
    >>> r.tolist()
    [0.0, 2.0, 6.0, 12.0]
    """
    op, acc = _op_and_acc(opname, value_dtype, dtype)
    in_dtypes = tuple(np.dtype(a.dtype) for a in leaves)
    return _accumulate(op.fn, False, list(leaves), in_dtypes, acc, op.identity, opname,
                       axis=0, init=None, include_initial=include_initial, exclusive=False,
                       reverse=False, out=None, deterministic=False, flatten=False,
                       mapfn=mapfn)


def mapped_launch(opname, mapfn, leaves, value_dtype, dtype, include_initial):
    """The replay of the launch :func:`cumulative_mapped` just made with these arguments, for
    leaves of the same layouts on this thread and stream: ``replay(leaves)`` returns the
    scan (taking the full path when the fresh output is not aligned as planned, or on another
    thread, whose tile states are its own); None when no plan was kept."""
    op, acc = _op_and_acc(opname, value_dtype, dtype)
    fkey = _fast_key((op.fn, mapfn), False, list(leaves), acc, 0, include_initial, False, False,
                     False, False)
    plan = _fast_plans().get(fkey) if fkey is not None else None
    if plan is None:
        return None
    return _MappedReplay(plan, acc, fkey[-1], (opname, mapfn, value_dtype, dtype, include_initial))


class _MappedReplay:
    __slots__ = ("plan", "acc", "skey", "args", "thread")

    def __init__(self, plan, acc, skey, args):
        self.plan = plan
        self.acc = acc
        self.skey = skey
        self.args = args
        self.thread = threading.get_ident()

    def __call__(self, leaves):
        if threading.get_ident() == self.thread:
            r = _run_fast(self.plan, leaves, self.acc, False, self.skey)
            if r is not None:
                return r
        opname, mapfn, value_dtype, dtype, include_initial = self.args
        return cumulative_mapped(opname, mapfn, leaves, value_dtype, dtype, include_initial)


def cumulative_fast(opname, x, axis, dtype, include_initial):
    """``cumulative_sum`` / ``cumulative_prod`` (``opname``) of backend array ``x`` along
    ``axis`` (a normalized int) in ``dtype`` when an earlier call of the same kind and layout
    left a launch plan to replay; None otherwise (the caller then takes the full path).

    >>> import numpy as np
    >>> x = np.arange(4.0)
    >>> r = cumulative_fast("cumulative_sum", x, 0, np.dtype("float64"), False)
    >>> r is None or r.tolist() == [0.0, 1.0, 3.0, 6.0]
    True
    """
    ent = _CUMULATIVE.get((opname, x.dtype, dtype))
    if ent is None:
        return None
    op, _, acc = ent
    # the key _fast_key builds for this call (one operand, no flags but include_initial)
    fkey = (op.fn, False, acc, axis, include_initial, False, False, False, False,
            (_layout_key(x),), _state_key(x))
    plan = _fast_plans().get(fkey)
    if plan is None:
        return None
    return _run_fast(plan, (x,), acc, False, fkey[-1])


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False, out=None, init=None):
    """Cumulative sum of backend array ``x`` along ``axis`` (optional for 1-D), accumulated in
    ``dtype`` (default: the standard's rule, int64 / uint64 for smaller integers and bool),
    without converting a copy of ``x`` first. ``include_initial`` prepends a 0 (``init`` when
    given); ``init``, a scalar, is added on the left of every element (a carry from before).

    >>> import numpy as np
    >>> cumulative_sum(np.array([[1, 2], [3, 4]], dtype=np.int8), axis=0).tolist()
    [[1, 2], [4, 6]]
    """
    return _cumulative("cumulative_sum", x, axis, dtype, include_initial, out, init)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False, out=None, init=None):
    """Cumulative product of backend array ``x`` along ``axis`` (optional for 1-D); dtype
    rules as :func:`cumulative_sum`; ``include_initial`` prepends a 1 (``init`` when given);
    ``init`` multiplies every element on the left.

    >>> import numpy as np
    >>> cumulative_prod(np.array([1.0, 2.0, 3.0]), include_initial=True).tolist()
    [1.0, 1.0, 2.0, 6.0]
    """
    return _cumulative("cumulative_prod", x, axis, dtype, include_initial, out, init)


