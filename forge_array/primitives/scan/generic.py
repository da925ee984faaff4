"""The generic scan ``accumulate`` with any associative operator (scalars or tuples of
arrays), its host fast path ``accumulate_fast``, and the scan dispatch every scan of the
package goes through: checked arguments, a cached plan replayed, the scan kernels planned
(:mod:`.plan`), or NumPy / numba on the CPU.
"""

from __future__ import annotations

import math
from types import BuiltinFunctionType as _BuiltinFunctionType
from types import FunctionType as _FunctionType
from types import ModuleType as _ModuleType

import numpy as np

from ... import runtime
from ...dispatch.scan import ScanCall, launch, replayed
from ...ops import Operator as _Operator
from ...runtime import lazy, stored
from ...runtime.caches import Cache
from .arguments import AxisError, array_module, check_op, inputs, normalize_axis, resolve_operator, scalars_of

_cpu = lazy.module("forge_array.primitives.scan.cpu", __name__, "_cpu")  # numba: CPU operands only


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
    fn, ident, name = resolve_operator(op)
    if _holds_nothing(op):
        _RESOLVED[op] = fn
    xs, is_tuple = inputs(x)
    dtypes = tuple(np.dtype(a.dtype) for a in xs)
    return scan_arrays(fn, is_tuple, xs, dtypes, dtypes, ident, name, axis=axis, init=init,
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
    return replayed(fn, False, (x,), (x.dtype,), axis, include_initial, exclusive, reverse,
                     deterministic, True, out)[1]


def scan_arrays(fn, tuple_op, xs, in_dtypes, acc_dtypes, ident, name, *, axis, init,
                include_initial, exclusive, reverse, out, deterministic, flatten, mapfn=None):
    """The scan dispatch every scan of the package goes through (``accumulate``,
    ``cumulative_sum`` / ``prod``, mapped scans): the plan of an earlier call of the same
    layouts replayed, else the arguments checked, the output allocated and the scan kernels
    planned and launched (:func:`forge_array.dispatch.scan.launch`), or NumPy / numba on the CPU. ``xs``:
    the operands (``tuple_op``: an operator on tuples of their elements), scanned in
    ``acc_dtypes``; ``ident``: the operator's identity function or None; ``name``: the
    operation's name for errors; ``flatten``: ``axis=None`` scans the C-order flattening;
    ``mapfn``: an element-wise expression of the operands scanned in their place."""
    fkey = None
    if init is None:  # replay the plan of an earlier call
        fkey, r = replayed(fn if mapfn is None else (fn, mapfn), tuple_op, xs, acc_dtypes, axis,
                            include_initial, exclusive, reverse, deterministic, flatten, out)
        if r is not None:
            return r
    if include_initial and exclusive:
        raise ValueError("accumulate: include_initial and exclusive exclude each other")
    check_op(fn, tuple_op, acc_dtypes, name)
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
        axis = normalize_axis(axis, xs[0].ndim)
    init_batch = False
    if init is not None:
        init, init_batch = _init_values(init, xs[0], axis, acc_dtypes, tuple_op, deterministic)
    elif include_initial or exclusive:
        iv = ident(acc_dtypes if tuple_op else acc_dtypes[0]) if ident is not None else None
        if iv is None:
            raise ValueError(f"accumulate: operator {name} has no identity; pass init= for "
                             "include_initial / exclusive scans")
        init = scalars_of(iv, acc_dtypes, "identity")
    shift = 1 if (include_initial or exclusive) else 0
    shape = list(xs[0].shape)
    n = shape[axis]
    m = n + 1 if include_initial else n
    shape[axis] = m
    shape = tuple(shape)
    xp = array_module(xs[0])
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
    call = ScanCall(fn, tuple_op, in_dtypes, acc_dtypes, axis, init, shift, m, reverse,
                    deterministic, mapfn, init_batch)
    if runtime.kernels_available(xs[0]) and all(d.itemsize <= 16 for d in acc_dtypes):
        skey = None
        if (name in stored.SCAN_NAMES and mapfn is None and not tuple_op and out is None
                and len(xs) == 1 and not (exclusive or reverse or deterministic)):
            skey = stored.scan_key(name, xs[0], axis, acc_dtypes[0], include_initial)
        launch(call, xs, outs, flat, fkey, skey)
    else:
        if mapfn is not None:
            raise ValueError(f"{name}: a mapped scan needs the kernels")
        _cpu.scan_cpu(call, xs, outs)
    return tuple(outs) if tuple_op else outs[0]


def _init_values(init, x, axis, acc_dtypes, tuple_op, deterministic):
    """``(values, per_batch)``: ``init`` as NumPy scalars of ``acc_dtypes``, or, when it is an
    array of ``x``'s shape without ``axis`` (at least one dimension), as one C-contiguous 1-D
    array per component in the first accumulator dtype, one value per scan (``per_batch``)."""
    batch = tuple(x.shape[:axis]) + tuple(x.shape[axis + 1:])
    comps = init if isinstance(init, (tuple, list)) else (init,)
    if not (batch and any(getattr(c, "ndim", 0) >= 1 for c in comps)):
        return scalars_of(init, acc_dtypes, "init"), False
    if tuple_op or len(comps) != 1 or deterministic:
        raise ValueError("accumulate: one init per scan takes one array (not a tuple "
                         "operator's) and deterministic=False")
    init = comps[0]
    if tuple(init.shape) != batch:
        raise ValueError(f"accumulate: init of shape {tuple(init.shape)} does not match the "
                         f"scans of x (one value each: shape {batch})")
    if runtime.is_cupy_array(init) != runtime.is_cupy_array(x):
        raise ValueError("accumulate: init must be on the device of x")
    xp = array_module(x)
    return (xp.ascontiguousarray(init, dtype=acc_dtypes[0]).reshape(-1),), True
