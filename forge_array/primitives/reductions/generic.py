"""The generic reductions ``reduce`` and ``mapreduce`` on backend arrays (NumPy / CuPy) with
any associative operator: a full reduction in one launch of :mod:`forge_array.kernels.reduce`,
reductions along some axes through :mod:`forge_array.primitives.axis_reduce`, numba on the CPU
otherwise.
"""

from __future__ import annotations

import numpy as np

from ... import ops as _ops
from ...runtime import kernels_available, lazy
from ...runtime.functions import compilable
from .. import axis_reduce as _axis
from .arguments import (
    array_module,
    flatten_operands,
    full_outputs,
    identity_of,
    infer_accumulation,
    init_values,
    normalize_axis,
    operand_types,
)

_cpu = lazy.module("forge_array.primitives.reductions.cpu", __name__, "_cpu")  # numba: CPU operands only

# the dispatch tier (and with it numba.cuda) loads at first use: CPU arrays never need it
_kl = lazy.module("forge_array.dispatch.reduce", __name__, "_kl")

#: most arrays the axis kernels take in one mapreduce
_AXIS_MAX_INPUTS = 3


def reduce(op, x, *, axis=None, init=None, keepdims=False):
    """Reduce the elements of backend array ``x`` (or of a tuple of arrays,
    struct-of-arrays: elements are tuples) with the associative operator ``op`` (an
    :class:`forge_array.ops.Operator` or a plain Python function numba compiles).

    ``axis``: None (all), an int or a tuple; ``init`` is combined once on the left of
    each result: ``op(init, total)``.  Empty reductions give the identity (or ``init``);
    ValueError when the operator has none.

    >>> import numpy as np
    >>> from forge_array import ops
    >>> float(reduce(ops.maximum, np.array([1.0, 5.0, 2.0])))
    5.0
    >>> reduce(lambda a, b: a + b, np.arange(6).reshape(2, 3), axis=1).tolist()
    [3, 12]
    >>> v, i = reduce(ops.argmax, (np.array([1.0, 3.0, 3.0]), np.arange(3)))
    >>> float(v), int(i)
    (3.0, 1)
    """
    return mapreduce(None, op, x, axis=axis, init=init, keepdims=keepdims)


def mapreduce(f, op, *arrays, axis=None, init=None, keepdims=False):
    """Apply ``f`` to each element (one argument per array, in order; a tuple of arrays
    gives a tuple argument) and reduce the results with ``op``, in one pass without
    temporaries.  ``f`` None is the identity (a tuple of the elements for several arrays).

    >>> import numpy as np, math
    >>> from forge_array import ops
    >>> x = np.array([1.0, 2.0, float("nan"), 4.0])
    >>> int(mapreduce(lambda v: 1 if v != v else 0, ops.add, x))         # count NaNs
    1
    >>> y = np.array([0.5, 1.0, 2.0])
    >>> float(mapreduce(lambda a, b: a * b, ops.add, y, y))              # dot product
    5.25
    >>> round(float(mapreduce(None, ops.logaddexp, np.log(np.array([1.0, 3.0])))), 6)
    1.386294
    """
    if f is not None and not callable(f):
        raise TypeError(f"map function must be callable, got {type(f).__name__}")
    if f is not None:
        f = compilable(f, len(arrays))   # an equal function finds the kernels of the first
    op = _ops.as_operator(op)
    if not arrays:
        raise TypeError("mapreduce needs at least one array")
    flat, struct = flatten_operands(arrays)
    x0 = flat[0]
    axes = normalize_axis(axis, x0.ndim)
    elem_types = operand_types(flat, struct)
    acc, is_tuple = infer_accumulation(f, op, elem_types)
    init_v = init_values(init, acc, is_tuple, op.name) if init is not None else None
    full = len(axes) == x0.ndim
    if kernels_available(x0):
        if full:
            hot = (f, op) if len(arrays) == 1 and axis is None and init is None else None
            return _kernel_full(f, op, flat, struct, acc, is_tuple, init_v, keepdims, x0, hot)
        if op.commutative and len(arrays) <= _AXIS_MAX_INPUTS:
            return _axis.axis_mapreduce(f, op, arrays, axes, init, keepdims,
                                        acc if is_tuple else acc[0])
        # a non-commutative operator along some axes (the axis kernels combine lanes out
        # of order): compute on the host
        xp = array_module(x0)
        host = [np.asarray(a.get() if hasattr(a, "get") else a) for a in flat]
        r = _cpu.cpu_mapreduce(f, op, host, struct, axes, acc, is_tuple, init_v, keepdims)
        return tuple(xp.asarray(o) for o in r) if is_tuple else xp.asarray(r)
    if not isinstance(x0, np.ndarray):  # CuPy array without kernels (disabled)
        host = [a.get() for a in flat]
        r = _cpu.cpu_mapreduce(f, op, host, struct, axes, acc, is_tuple, init_v, keepdims)
        xp = array_module(x0)
        return tuple(xp.asarray(o) for o in r) if is_tuple else xp.asarray(r)
    return _cpu.cpu_mapreduce(f, op, flat, struct, axes, acc, is_tuple, init_v, keepdims)



def _kernel_full(f, op, flat, struct, acc, is_tuple, init_v, keepdims, x0, hot=None):
    xp = array_module(x0)
    shape = (1,) * x0.ndim if keepdims else ()
    if x0.size == 0:
        ident = identity_of(op, acc, is_tuple)
        if init_v is None and ident is None:
            raise ValueError(f"reduction of an empty array with operator {op.name}, which has "
                             "no identity: pass init")
        return full_outputs(xp, init_v if init_v is not None else ident, acc, is_tuple, shape)
    spec = _kl.generic_spec(f, op, struct, acc, is_tuple, init_v is not None,
                            lambda: identity_of(op, acc, is_tuple))
    init_bufs = None
    if init_v is not None:
        init_bufs = tuple(xp.asarray([v], dtype=d) for v, d in zip(init_v, acc))
    elif hot is not None and len(flat) == 1 and not struct[0]:
        outs = _kl.launch_generic(spec, x0, shape, keepdims, is_tuple, hot)
        if outs is not None:
            return outs if is_tuple else outs[0]
    outs = _kl.launch_full(spec, flat, init_bufs, 0.0, op.name, shape)
    return outs if is_tuple else outs[0]

