"""Generic reductions on backend arrays (NumPy / CuPy): ``reduce``, ``mapreduce`` and the
specific reductions of the namespace (sum, prod, max, min, mean, var, std, any, all,
argmax, argmin).

Full reductions run in one launch of :mod:`forge_array.kernels.reduce` when
``runtime.kernels_available(x)``; reductions over some axes go to the axis kernels
(:mod:`forge_array.primitives.axis_reduce`) when present; otherwise NumPy / CuPy compute
the named reductions and numba on the CPU the generic ones.

Elements are scalars or tuples: pass a tuple of arrays (struct-of-arrays) and get a tuple
of arrays back.  The result type of a generic reduction is the operator's result type as
numba infers it.

>>> import numpy as np
>>> from forge_array import ops
>>> from forge_array.primitives.reduce import reduce, mapreduce
>>> x = np.arange(1.0, 5.0)
>>> float(reduce(ops.add, x))
10.0
>>> float(mapreduce(lambda v: v * v, ops.add, x))      # sum of squares, no temporary
30.0
>>> lo, hi = mapreduce(lambda v: (v, v), ops.minmax, x)   # min and max in one pass
>>> float(lo), float(hi)
(1.0, 4.0)
"""

from __future__ import annotations

import math
import operator

import numba
import numpy as np
from numba import types as nt

from .. import ops as _ops
from .. import runtime
from ..kernels import reduce as _k
from ..runtime import data_address, kernels_available, result_type, stream_key
from ..runtime.compiler import compile_error

try:  # the axis engineer's module (row / column kernels)
    from . import axis_reduce as _axis
except ImportError:  # pragma: no cover - until it lands
    _axis = None

try:
    from numpy.exceptions import AxisError
except ImportError:  # pragma: no cover
    from numpy import AxisError

#: most arrays the axis kernels take in one mapreduce
_AXIS_MAX_INPUTS = 3

__all__ = [
    "reduce",
    "mapreduce",
    "sum",
    "prod",
    "max",
    "min",
    "mean",
    "var",
    "std",
    "any",
    "all",
    "argmax",
    "argmin",
    "normalize_axis",
    "full_fast",
    "axis_fast",
]

_builtin_sum = sum
_builtin_max = max
_builtin_min = min
_builtin_all = all
_builtin_any = any


# --------------------------------------------------------------------------- helpers


#: the pristine namespace of backend array ``x``'s module (numpy or cupy), whose functions
#: are never a patched drop-in's
_xp = runtime.array_module


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


def _flatten_operands(arrays):
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


def _operand_types(flat, struct):
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


_TYPES: dict = {}


def _infer(f, op, elem_types):
    """(acc dtypes, acc is tuple) of reducing ``f(*elements)`` with ``op``."""
    key = (f, op, tuple(elem_types))
    r = _TYPES.get(key)
    if r is not None:
        return r
    if f is None:
        t0 = elem_types[0] if len(elem_types) == 1 else nt.Tuple(tuple(elem_types))
    else:
        t0 = result_type(f, tuple(elem_types))
    _dtypes_of(t0, f"map function {_name(f)}") if f is not None else None
    t1 = result_type(op.fn, (t0, t0))
    _check_shape(op, t0, t1)
    if t1 != t0:
        t2 = result_type(op.fn, (t1, t1))
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


def _py(v):
    return v.item() if hasattr(v, "item") else v


def _identity_of(op, acc, is_tuple):
    ident = op.identity(acc if is_tuple else acc[0]) if isinstance(op, _ops.Operator) else None
    if ident is None:
        return None
    if not is_tuple:
        ident = (ident,)
    return tuple(_py(np.asarray(v, dtype=d)[()]) for v, d in zip(ident, acc))


def _init_values(init, acc, is_tuple, opname):
    if is_tuple:
        if not isinstance(init, (tuple, list)) or len(init) != len(acc):
            raise TypeError(f"init for operator {opname} must be a tuple of {len(acc)} values")
        vals = tuple(init)
    else:
        if isinstance(init, (tuple, list)):
            raise TypeError(f"init for operator {opname} must be a scalar")
        vals = (init,)
    return tuple(np.asarray(v, dtype=d)[()] for v, d in zip(vals, acc))


def _wrap(xp, values, dtypes, is_tuple, shape):
    outs = tuple(xp.full(shape, v, dtype=d) for v, d in zip(values, dtypes))
    return outs if is_tuple else outs[0]


def _reshape_out(outs, is_tuple, shape):
    outs = tuple(o.reshape(shape) for o in outs)
    return outs if is_tuple else outs[0]


# --------------------------------------------------------------------------- CPU (numba)

_CPU: dict = {}


def _cpu_loop(f, opfn, struct, acc, is_tuple, K, flags):
    """An njit function ``(x0, ..., x{K-1}, out0, ...)`` over 2-D (M, R) inputs reducing each
    row into out[m] (valid-flag array first when there is no identity)."""
    key = (f, opfn, struct, acc, is_tuple, K)
    fn = _CPU.get(key)
    if fn is not None:
        return fn
    A = len(acc)
    args = [f"x{k}" for k in range(K)]
    operands, pos = [], 0
    for s in struct:
        if s == 0:
            operands.append(f"x{pos}[m, i]")
            pos += 1
        else:
            operands.append("(" + ", ".join(f"x{p}[m, i]" for p in range(pos, pos + s)) + ",)")
            pos += s
    if f is None:
        mapped = operands[0] if len(operands) == 1 else "(" + ", ".join(operands) + ",)"
    else:
        mapped = f"_f({', '.join(operands)})"

    def cast(e):
        if not is_tuple:
            return f"_A0({e})"
        return "(" + ", ".join(f"_A{k}({e}[{k}])" for k in range(A)) + ",)"

    outs = [f"o{k}" for k in range(A)]
    src = [f"def _loop({', '.join(args + outs)}, ok):",
           "    M = x0.shape[0]",
           "    R = x0.shape[1]",
           "    for m in range(M):",
           "        if R == 0:",
           "            ok[m] = False",
           "            continue",
           "        i = 0",
           f"        acc = {cast(mapped)}",
           "        for i in range(1, R):",
           f"            _v = {cast(mapped)}",
           f"            acc = {cast('_op(acc, _v)')}",
           "        ok[m] = True"]
    if is_tuple:
        src += [f"        o{k}[m] = acc[{k}]" for k in range(A)]
    else:
        src += ["        o0[m] = acc"]
    g = {"_op": numba.njit(getattr(opfn, "py_func", opfn))}
    if f is not None:
        g["_f"] = numba.njit(getattr(f, "py_func", f))
    for k, d in enumerate(acc):
        g[f"_A{k}"] = np.dtype(d).type
    loc: dict = {}
    exec(compile("\n".join(src) + "\n", "<forge_array cpu reduce>", "exec"), g, loc)
    fn = _CPU[key] = numba.njit(loc["_loop"])
    return fn


def _cpu_mapreduce(f, op, flat, struct, axes, acc, is_tuple, init, keepdims):
    x0 = flat[0]
    nd = x0.ndim
    keep = [d for d in range(nd) if d not in axes]
    out_shape = tuple(x0.shape[d] for d in keep)
    M = int(np.prod(out_shape, dtype=np.int64)) if keep else 1
    R = int(np.prod([x0.shape[d] for d in axes], dtype=np.int64)) if axes else 1
    mats = [np.ascontiguousarray(np.transpose(np.asarray(a), keep + list(axes))).reshape(M, R)
            for a in flat]
    outs = [np.empty(M, dtype=d) for d in acc]
    ok = np.empty(M, dtype=np.bool_)
    loop = _cpu_loop(f, op.fn, struct, acc, is_tuple, len(flat), False)
    try:
        loop(*mats, *outs, ok)
    except (numba.core.errors.NumbaError, TypeError) as exc:
        raise compile_error(exc, f"reduction with operator {op.name}") from exc
    ident = _identity_of(op, acc, is_tuple)
    if not ok.all():
        if ident is None and init is None:
            raise ValueError(f"reduction of an empty sequence with operator {op.name}, which "
                             "has no identity: pass init")
        fill = init if init is not None else ident
        for o, v in zip(outs, fill):
            o[~ok] = v
        if init is not None:  # init applied below for the non-empty rows only
            okm = ok
        else:
            okm = None
    else:
        okm = ok
    if init is not None:
        _apply_init_cpu(op, outs, init, okm, is_tuple, acc)
    shape = _keep_shape(x0.shape, axes) if keepdims else out_shape
    return _reshape_out(outs, is_tuple, shape)


def _apply_init_cpu(op, outs, init, okm, is_tuple, acc):
    fn = op.fn
    for m in range(outs[0].shape[0]):
        if okm is not None and not okm[m]:
            continue
        v = tuple(o[m] for o in outs) if is_tuple else outs[0][m]
        r = fn(tuple(init) if is_tuple else init[0], v)
        r = r if is_tuple else (r,)
        for o, x, d in zip(outs, r, acc):
            o[m] = np.asarray(x).astype(d)


def _keep_shape(shape, axes):
    return tuple(1 if d in axes else n for d, n in enumerate(shape))


# --------------------------------------------------------------------------- generic API


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
    user_op = op
    op = _ops.as_operator(op)
    if not arrays:
        raise TypeError("mapreduce needs at least one array")
    flat, struct = _flatten_operands(arrays)
    x0 = flat[0]
    axes = normalize_axis(axis, x0.ndim)
    elem_types = _operand_types(flat, struct)
    acc, is_tuple = _infer(f, op, elem_types)
    init_v = _init_values(init, acc, is_tuple, op.name) if init is not None else None
    full = len(axes) == x0.ndim
    if kernels_available(x0):
        if full:
            hot = (f, user_op) if len(arrays) == 1 and axis is None and init is None else None
            return _kernel_full(f, op, flat, struct, acc, is_tuple, init_v, keepdims, x0, hot)
        if _axis_kernels() and op.commutative and len(arrays) <= _AXIS_MAX_INPUTS:
            return _axis.axis_mapreduce(f, op, arrays, axes, init, keepdims,
                                        acc if is_tuple else acc[0])
        # a non-commutative operator along some axes (the axis kernels combine lanes out
        # of order): compute on the host
        xp = _xp(x0)
        host = [np.asarray(a.get() if hasattr(a, "get") else a) for a in flat]
        r = _cpu_mapreduce(f, op, host, struct, axes, acc, is_tuple, init_v, keepdims)
        return tuple(xp.asarray(o) for o in r) if is_tuple else xp.asarray(r)
    if not isinstance(x0, np.ndarray):  # CuPy array without kernels (disabled)
        host = [a.get() for a in flat]
        r = _cpu_mapreduce(f, op, host, struct, axes, acc, is_tuple, init_v, keepdims)
        xp = _xp(x0)
        return tuple(xp.asarray(o) for o in r) if is_tuple else xp.asarray(r)
    return _cpu_mapreduce(f, op, flat, struct, axes, acc, is_tuple, init_v, keepdims)


_SPECS: dict = {}


def _kernel_full(f, op, flat, struct, acc, is_tuple, init_v, keepdims, x0, hot=None):
    xp = _xp(x0)
    shape = (1,) * x0.ndim if keepdims else ()
    if x0.size == 0:
        ident = _identity_of(op, acc, is_tuple)
        if init_v is None and ident is None:
            raise ValueError(f"reduction of an empty array with operator {op.name}, which has "
                             "no identity: pass init")
        return _wrap(xp, init_v if init_v is not None else ident, acc, is_tuple, shape)
    key = (f, op, struct, acc, is_tuple, init_v is not None)
    spec = _SPECS.get(key)
    if spec is None:
        spec = _SPECS[key] = _k.ReduceSpec(
            op=op.fn, acc_dtypes=tuple(d.str for d in acc),
            identity=_identity_of(op, acc, is_tuple), f=f, struct=struct,
            acc_tuple=is_tuple, commutative=op.commutative, has_init=init_v is not None)
    init_bufs = None
    if init_v is not None:
        init_bufs = tuple(xp.asarray([v], dtype=d) for v, d in zip(init_v, acc))
    elif hot is not None and len(flat) == 1 and not struct[0]:
        p = _k.plan(spec, x0, 0.0, shape)
        if p is not None:
            try:
                _remember(_hot_key("mapreduce", x0, None, keepdims, hot), (p, is_tuple))
            except TypeError:  # an unhashable function: no fast path
                pass
            outs = _k.replay(p, x0)
            return outs if is_tuple else outs[0]
    outs = _launch(spec, flat, init_bufs, 0.0, op.name, shape)
    return outs if is_tuple else outs[0]


def mapreduce_fast(f, op, x, keepdims=False):
    """The host fast path of ``mapreduce(f, op, x, keepdims=keepdims)`` (``reduce`` when
    ``f`` is None) of one backend array ``x`` over all axes without ``init``: replay the
    launch cached by an earlier call with the same ``f`` and ``op`` (the same objects) on an
    array of the same layout.  Returns the result (a tuple when ``f`` returns tuples), or
    None when no launch is cached for the call.

    >>> import numpy as np
    >>> from forge_array import ops
    >>> x = np.arange(4.0)
    >>> r = mapreduce_fast(None, ops.add, x)   # None until reduce(ops.add, x) has run on our kernels
    >>> r is None or float(r) == 6.0
    True
    """
    try:
        key = _hot_key("mapreduce", x, None, keepdims, (f, op))
        hit = _HOT.get(key)
    except (TypeError, AttributeError):  # an unhashable function; not an array
        return None
    if hit is None:
        return None
    outs = _k.replay(hit[0], x, key[-1])
    return outs if hit[1] else outs[0]


def _launch(spec, flat, init_bufs=None, param=0.0, what="", shape=(1,)):
    try:
        return _k.full_reduce(spec, flat, init_bufs, param, shape)
    except TypeError as exc:
        msg = str(exc)
        if what and what not in msg:
            raise TypeError(f"reduction with operator {what}: {msg}") from exc
        raise


# --------------------------------------------------------------------------- named reductions

#: Launch plans of full named reductions by call: (name, array type, dtype, shape, strides,
#: address mod 16, dtype argument, keepdims, extra argument, stream) -> kernels.reduce.Launch
_HOT: dict = {}


def _hot_key(name, x, dtype, keepdims, extra):
    return (name, type(x), x.dtype, x.shape, x.strides, data_address(x) & 15, dtype, keepdims,
            extra, stream_key())


def full_fast(name, x, dtype=None, keepdims=False, extra=None):
    """The host fast path of a full named reduction (``name``: "sum", "max", "var", ...) of
    backend array ``x``: replay the launch cached by an earlier call with the same arguments
    (``dtype`` of sum / prod, ``correction`` of var / std as ``extra``) on an array of the
    same layout.  Returns the result, or None when no launch is cached for the call (then
    call the reduction itself, which caches it).

    >>> import numpy as np
    >>> x = np.arange(4.0)
    >>> r = full_fast("sum", x)          # None until sum(x) has run on our kernels
    >>> r is None or float(r) == 6.0
    True
    """
    try:
        key = _hot_key(name, x, dtype, keepdims, extra)
        p = _HOT.get(key)
    except (TypeError, AttributeError):  # an unhashable argument; not an array
        return None
    if p is None:
        return None
    return _k.replay(p, x, key[-1])[0]


def _launch_named(spec, x, param, keepdims, hot=None):
    """Full reduction of ``x`` alone with ``spec``; with ``hot = (name, dtype, extra)`` (the
    caller's arguments) its launch is cached for :func:`full_fast`."""
    shape = (1,) * x.ndim if keepdims else ()
    p = _k.plan(spec, x, param, shape)
    if p is None:
        return _launch(spec, [x], None, param, shape=shape)[0]
    if hot is not None:
        try:
            _remember(_hot_key(hot[0], x, hot[1], keepdims, hot[2]), p)
        except TypeError:  # unhashable argument: no fast path
            pass
    return _k.replay(p, x)[0]


def _remember(key, p):
    """Cache launch ``p`` for the fast paths (raises TypeError for an unhashable key)."""
    if len(_HOT) >= _k._MAX_CACHED:
        _HOT.clear()
    _HOT[key] = p


def _named_spec(name, op, acc, identity, f=None, with_index=False, acc_tuple=False, post=None,
                out_dtypes=None):
    key = (name, tuple(acc), f, post, out_dtypes)
    spec = _SPECS.get(key)
    if spec is None:
        spec = _SPECS[key] = _k.ReduceSpec(
            op=op.fn, acc_dtypes=tuple(np.dtype(d).str for d in acc), identity=identity, f=f,
            with_index=with_index, acc_tuple=acc_tuple, post=post,
            out_dtypes=None if out_dtypes is None else tuple(np.dtype(d).str for d in out_dtypes),
            commutative=True)
    return spec


def _full(x, axis):
    return axis is None or len(axis) == x.ndim


def _use_kernel(x, axis):
    return kernels_available(x) and _full(x, axis) and x.size > 0


def _axis_named(x, axis, f, op, out_dtype, keepdims, hot=None):
    """Axis reduction through the axis kernels when they exist; None otherwise. With
    ``hot = (name, dtype)`` (the caller's arguments) its launch is cached for
    :func:`axis_fast`."""
    if _axis is None or not hasattr(_axis, "axis_mapreduce") or not kernels_available(x):
        return None
    if axis is None or len(axis) == x.ndim or x.size == 0:
        return None
    key = None
    if hot is not None:
        key = _axis_hot_key(hot[0], x, axis, hot[1], keepdims)
    return _axis.axis_mapreduce(f, op, (x,), axis, None, keepdims, np.dtype(out_dtype),
                                _replay=key)


def _axis_hot_key(name, x, axes, dtype, keepdims):
    try:
        key = ("axis", name, axes, dtype, keepdims, _axis._layout_key(x))
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
    if _axis is None:
        return None
    try:
        ent = _axis._FAST.get(("axis", name, axes, dtype, keepdims, _axis._layout_key(x)))
    except (TypeError, AttributeError):
        return None
    if ent is None:
        return None
    return ent((x,))


def _axis_kernels():
    return _axis is not None and hasattr(_axis, "axis_mapreduce")


def routes(x, axis, moments=False):
    """Whether the namespace should route a reduction of ``x`` over ``axis`` (a tuple) here:
    our kernels run on ``x`` and cover it (all axes, or the axis kernels exist).

    >>> import numpy as np
    >>> routes(np.zeros(3), (0,)) == kernels_available(np.zeros(3))
    True
    """
    if not kernels_available(x):
        return False
    if moments and x.dtype.kind == "c":
        return False
    return axis is None or len(axis) == x.ndim or _axis_kernels()


def routes_arg(x, axis):
    """Whether argmax / argmin of ``x`` along ``axis`` (int or None) runs here.

    >>> import numpy as np
    >>> routes_arg(np.zeros(3), None) == kernels_available(np.zeros(3))
    True
    """
    if not kernels_available(x):
        return False
    return axis is None or x.ndim <= 1 or (_axis_kernels() and hasattr(_axis, "argmax"))


def _np_axis(axis):
    return None if axis is None else tuple(axis)


def sum(x, axis=None, dtype=None, keepdims=False):
    """Sum of the elements of backend array ``x`` over ``axis`` (a tuple of non-negative
    ints, or None), accumulated and returned in ``dtype`` (the caller applies the
    standard's defaults; None keeps NumPy's).

    >>> import numpy as np
    >>> int(sum(np.arange(5, dtype=np.uint8), dtype=np.uint64))
    10
    """
    return _sum_or_prod("sum", _ops.add, 0, x, axis, dtype, keepdims)


def _default_sum_dtype(dt):
    if dt.kind in "bi":
        return np.dtype(np.int64)
    if dt.kind == "u":
        return np.dtype(np.uint64)
    return dt


def _sum_or_prod(name, op, identity, x, axis, dtype, keepdims):
    """``sum`` / ``prod``: the cached full-reduction launch, a fresh full reduction, the axis
    kernels, or the backend, accumulating in ``dtype`` (the standard's default when None)."""
    if _full(x, axis):
        r = full_fast(name, x, dtype, keepdims)
        if r is not None:
            return r
    arg = dtype
    dtype = np.dtype(dtype) if dtype is not None else _default_sum_dtype(x.dtype)
    if _use_kernel(x, axis):
        spec = _named_spec(name, op, (dtype,), (_py(dtype.type(identity)),))
        return _launch_named(spec, x, 0.0, keepdims, (name, arg, None))
    r = _axis_named(x, axis, None, op, dtype, keepdims, (name, arg))
    if r is not None:
        return r
    return getattr(_xp(x), name)(x, axis=_np_axis(axis), dtype=dtype, keepdims=keepdims)


def prod(x, axis=None, dtype=None, keepdims=False):
    """Product of the elements over ``axis`` in ``dtype``.

    >>> import numpy as np
    >>> int(prod(np.arange(1, 6, dtype=np.int32), dtype=np.int64))
    120
    """
    return _sum_or_prod("prod", _ops.multiply, 1, x, axis, dtype, keepdims)


def _extremum(x, axis, keepdims, op, name):
    if _full(x, axis):
        r = full_fast(name, x, None, keepdims)
        if r is not None:
            return r
    if x.size == 0 and (axis is None or _builtin_any(x.shape[d] == 0 for d in axis)):
        raise ValueError(f"{name} of an empty array (zero-size reduction) has no identity")
    if _use_kernel(x, axis):
        ident = op.identity(x.dtype)
        spec = _named_spec(name, op, (x.dtype,), (_py(ident),))
        return _launch_named(spec, x, 0.0, keepdims, (name, None, None))
    r = _axis_named(x, axis, None, op, x.dtype, keepdims, (name, None))
    if r is not None:
        return r
    return getattr(_xp(x), name)(x, axis=_np_axis(axis), keepdims=keepdims)


def max(x, axis=None, keepdims=False):
    """Largest element over ``axis``; NaN propagates; ValueError for an empty reduction.

    >>> import numpy as np
    >>> float(max(np.array([1.0, 7.0, 3.0])))
    7.0
    """
    return _extremum(x, axis, keepdims, _ops.maximum, "max")


def min(x, axis=None, keepdims=False):
    """Smallest element over ``axis``; NaN propagates; ValueError for an empty reduction.

    >>> import numpy as np
    >>> int(min(np.array([4, -2, 9])))
    -2
    """
    return _extremum(x, axis, keepdims, _ops.minimum, "min")


def _logical(x, axis, keepdims, op, name):
    if _full(x, axis):
        r = full_fast(name, x, None, keepdims)
        if r is not None:
            return r
    if _use_kernel(x, axis):
        spec = _named_spec(name, op, (np.bool_,), (_py(op.identity(np.dtype(np.bool_))),))
        return _launch_named(spec, x, 0.0, keepdims, (name, None, None))
    r = _axis_named(x, axis, _TRUTH, op, np.bool_, keepdims, (name, None))
    if r is not None:
        return r
    return getattr(_xp(x), name)(x, axis=_np_axis(axis), keepdims=keepdims)


def _truth(v):
    return v != 0


_TRUTH = _truth


def any(x, axis=None, keepdims=False):
    """Whether any element over ``axis`` is nonzero (NaN counts as nonzero).

    >>> import numpy as np
    >>> bool(any(np.array([0, 0, 3])))
    True
    """
    return _logical(x, axis, keepdims, _ops.logical_or, "any")


def all(x, axis=None, keepdims=False):
    """Whether every element over ``axis`` is nonzero.

    >>> import numpy as np
    >>> bool(all(np.array([1.0, 0.0])))
    False
    """
    return _logical(x, axis, keepdims, _ops.logical_and, "all")


# ---- mean / var / std: one pass with the Welford / Chan triple


def _mean_post(t, p):
    return t / p


def _var_post(t, p):
    return t[2] / p


def _std_post(t, p):
    return math.sqrt(t[2] / p)




def _welford_map(dt):
    """``x -> (1, x, (x - x)**2)`` in float type ``dt`` (see :func:`forge_array.ops.welford_map`)."""
    return _ops.welford_map(dt)


def _float_result(dt):
    if dt.kind in "fc":
        return dt
    return np.dtype(np.float64)


def mean(x, axis=None, keepdims=False):
    """Arithmetic mean over ``axis`` (sum in the float dtype, divided by the count); NaN for
    an empty reduction.

    >>> import numpy as np
    >>> float(mean(np.array([1.0, 2.0, 6.0])))
    3.0
    """
    if _full(x, axis):
        r = full_fast("mean", x, None, keepdims)
        if r is not None:
            return r
    dt = _float_result(x.dtype)
    if _use_kernel(x, axis):
        spec = _named_spec("mean", _ops.add, (dt,), (_py(dt.type(0)),), post=_mean_post,
                           out_dtypes=(dt,))
        return _launch_named(spec, x, float(x.size), keepdims, ("mean", None, None))
    r = _axis_named(x, axis, None, _ops.add, dt, keepdims)
    if r is not None:
        r /= math.prod(x.shape[d] for d in axis)
        return r
    xp = _xp(x)
    return xp.mean(x, axis=_np_axis(axis), keepdims=keepdims, dtype=dt).astype(dt, copy=False)


def _moments(x, axis, correction, keepdims, post, name):
    if _full(x, axis):
        r = full_fast(name, x, None, keepdims, correction)
        if r is not None:
            return r
    dt = _float_result(x.dtype)
    if dt.kind == "c":
        xp = _xp(x)
        fn = xp.var if name == "var" else xp.std
        return fn(x, axis=_np_axis(axis), ddof=correction, keepdims=keepdims)
    if _use_kernel(x, axis):
        spec = _named_spec(name, _ops.welford, (dt, dt, dt), (0.0, 0.0, 0.0),
                           f=_welford_map(dt), acc_tuple=True, post=post, out_dtypes=(dt,))
        p = float(x.size) - float(correction)
        if p < 0:
            p = 0.0
        # no fast path for a degenerate count (the namespace silences its warnings)
        return _launch_named(spec, x, p, keepdims, (name, None, correction) if p > 0 else None)
    if _axis_kernels() and kernels_available(x) and x.size > 0:
        m2 = _axis.axis_mapreduce(_welford_map(dt), _ops.welford, (x,), axis, None, keepdims,
                                  (dt, dt, dt))[2]
        m2 /= _builtin_max(math.prod(x.shape[d] for d in axis) - correction, 0)
        if name == "std":
            _xp(x).sqrt(m2, out=m2)
        return m2
    xp = _xp(x)
    fn = xp.var if name == "var" else xp.std
    return fn(x, axis=_np_axis(axis), ddof=correction, keepdims=keepdims,
              dtype=dt).astype(dt, copy=False)


def var(x, axis=None, correction=0.0, keepdims=False):
    """Variance over ``axis`` with ``correction`` (ddof), in one pass (Welford / Chan).

    >>> import numpy as np
    >>> float(var(np.array([1.0, 2.0, 3.0, 4.0])))
    1.25
    """
    return _moments(x, axis, correction, keepdims, _var_post, "var")


def std(x, axis=None, correction=0.0, keepdims=False):
    """Standard deviation over ``axis`` with ``correction``, in one pass.

    >>> import numpy as np
    >>> float(std(np.array([1.0, 3.0])))
    1.0
    """
    return _moments(x, axis, correction, keepdims, _std_post, "std")


# ---- argmax / argmin on (value, index) pairs


def _pair(v, i):
    return (v, i)


def _index_post(t, p):
    return t[1]


def _arg(x, axis, keepdims, op, name):
    """``axis`` is None or an int."""
    if axis is None:
        r = full_fast(name, x, None, keepdims)
        if r is not None:
            return r
    if x.size == 0 and (axis is None or x.shape[axis] == 0):
        raise ValueError(f"{name} of an empty sequence")
    xp = _xp(x)
    if kernels_available(x) and (axis is None or x.ndim <= 1):
        xv = x.view(np.uint8) if x.dtype.kind == "b" else x
        vdt = xv.dtype
        ident = op.identity((vdt, _ops.INDEX_DTYPE))
        spec = _named_spec(name, op, (vdt, _ops.INDEX_DTYPE), tuple(_py(v) for v in ident),
                           f=_pair, with_index=True, acc_tuple=True, post=_index_post,
                           out_dtypes=(_ops.INDEX_DTYPE,))
        # the fast path replays on x itself: not for a bool array (viewed as uint8 here)
        hot = (name, None, None) if axis is None and xv is x else None
        return _launch_named(spec, xv, 0.0, keepdims, hot)
    if (_axis is not None and hasattr(_axis, "axis_mapreduce") and kernels_available(x)
            and hasattr(_axis, name)):
        return getattr(_axis, name)(x, axis, keepdims)
    fn = getattr(xp, name)
    if keepdims:
        return fn(x, axis=axis, keepdims=True)
    return fn(x, axis=axis)


def argmax(x, axis=None, keepdims=False):
    """Index of the largest element (the first one; the first NaN wins), flat when ``axis``
    is None.

    >>> import numpy as np
    >>> int(argmax(np.array([1.0, 9.0, 9.0])))
    1
    """
    return _arg(x, axis, keepdims, _ops.argmax, "argmax")


def argmin(x, axis=None, keepdims=False):
    """Index of the smallest element (the first one; the first NaN wins).

    >>> import numpy as np
    >>> int(argmin(np.array([3, 1, 1])))
    1
    """
    return _arg(x, axis, keepdims, _ops.argmin, "argmin")
