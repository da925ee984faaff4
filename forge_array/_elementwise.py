"""Element-wise functions of the standard.

Each checks the dtype category the standard names, applies the type promotion
rules (Python scalars take the array's dtype), checks devices, calls NumPy or
CuPy and repairs the special cases (signed zeros, infinities, NaNs) where
they differ from the standard.

>>> import forge_array as xp
>>> x = xp.asarray([1.0, -2.0], device="cpu")
>>> xp.add(x, 1)
Array([ 2., -1.], dtype=float64, device=cpu)
"""

from __future__ import annotations

from builtins import abs as builtins_abs

import numpy as np

from . import _array as _array_module
from . import _devices as _dev
from . import _dtypes as _dt
from ._array import (
    Array,
    is_scalar,
    py_scalar,
    scalar_dtype,
    scalar_to_backend,
)
from ._interop import foreign_operand_error, is_foreign_array, type_name
from ._special_values import (
    acosh_special,
    expm1_special,
    fix_complex_unary,
    fix_floor_divide,
    fix_remainder,
    log_special,
    tanh_special,
)
from .fusion import auto as _fusion_auto
from .fusion import build as _fusion
from .fusion.expr import Deferred
from .runtime.caches import Cache

__all__ = [
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh",
    "bitwise_and", "bitwise_left_shift", "bitwise_invert", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "conj", "copysign", "cos",
    "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater",
    "greater_equal", "hypot", "imag", "isfinite", "isinf", "isnan", "less", "less_equal",
    "log", "log1p", "log2", "log10", "logaddexp", "logical_and", "logical_not",
    "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "real", "reciprocal", "remainder",
    "round", "sign", "signbit", "sin", "sinh", "square", "sqrt", "subtract", "tan",
    "tanh", "trunc",
]

_fn_cache: dict = {}


def _backend_fn(device, name):
    key = (device.kind, name)
    fn = _fn_cache.get(key)
    if fn is None:
        own = _WITHOUT_SYNC.get(name) if device.is_cuda else None
        fn = own(_dev.backend(device)) if own is not None else getattr(_dev.compat(device), name)
        _fn_cache[key] = fn
    return fn


def _sign_without_sync(m):
    """``sign`` of CuPy arrays with NaNs kept and ``sign(0j) == 0``, as array-api-compat's
    ``sign`` makes CuPy's, but selected with ``where`` where array-api-compat writes through a
    boolean mask (a wait for the GPU in every call)."""
    def sign(x):
        if x.dtype.kind == "c":
            return m.where(x == 0, x.dtype.type(0), x / m.abs(x))
        res = m.sign(x)
        return m.where(m.isnan(x), x, res) if x.dtype.kind == "f" else res
    return sign


#: the element-wise functions of GPU arrays that are ours rather than array-api-compat's
#: (name -> maker taking the CuPy module): the same values, without waiting for the GPU
_WITHOUT_SYNC = {"sign": _sign_without_sync}


def _check_kind(name, dtype, kinds, arg="x"):
    if dtype not in _dt.categories[kinds]:
        raise TypeError(f"{name}() requires {arg} of a {kinds} dtype, got {dtype}")


def _scalar_operand(value, dtype, device):
    """A typed scalar operand for the backend: a 0-d NumPy array on the CPU, a
    NumPy scalar (a kernel parameter, exact bits) for CuPy."""
    value = py_scalar(value)
    if device.is_cuda:
        return dtype.type(value)
    return np.asarray(value, dtype=dtype)


#: (operation, kinds, the operands' dtypes or scalar types) -> (dtype, s1, s2) of
#: :func:`binary_types`, for operands whose validation depends on nothing else
_TYPES = Cache("_elementwise.TYPES")


def types_key(name, kinds, x1, x2):
    """The key of ``x1`` and ``x2`` in :data:`_TYPES`, or None: two arrays of one device,
    or an array and a Python float (or a Python int beside floating point, which has no
    range to check)."""
    t1 = type(x1)
    t2 = type(x2)
    if t1 is Array or t1 is Deferred:
        if t2 is Array or t2 is Deferred:
            return (name, kinds, x1.dtype, x2.dtype) if x1._device is x2._device else None
        if t2 is float or (t2 is int and x1.dtype.kind == "f"):
            return (name, kinds, x1.dtype, t2)
    elif (t2 is Array or t2 is Deferred) and (t1 is float or (t1 is int and x2.dtype.kind == "f")):
        return (name, kinds, t1, x2.dtype)
    return None


def binary_types(name, x1, x2, kinds):
    """Validate two operands without reading their values; return (dtype, device, s1, s2):
    the promoted dtype, the device, and the dtype of ``x1`` / ``x2`` where it is a Python
    scalar (else None).  Operand kinds that passed before are looked up (:data:`_TYPES`)."""
    key = types_key(name, kinds, x1, x2)
    if key is not None:
        hit = _TYPES.get(key)
        if hit is not None:
            return hit[0], (x1._device if hit[1] is None else x2._device), hit[1], hit[2]
    r = _validated_types(name, x1, x2, kinds)
    if key is not None:
        _TYPES[key] = (r[0], r[2], r[3])
    return r


def _validated_types(name, x1, x2, kinds):
    if not _dt.STRICT[0]:
        return _promoted_types(name, x1, x2, kinds)
    if isinstance(x1, Array):
        _check_kind(name, x1.dtype, kinds, "x1")
        if isinstance(x2, Array):
            _check_kind(name, x2.dtype, kinds, "x2")
            dev = x1._device
            if x2._device is not dev:
                dev = _dev.check_same_device(dev, x2._device)
            return _dt.promote(x1.dtype, x2.dtype), dev, None, None
        if is_scalar(x2):
            sdt = scalar_dtype(x2, x1.dtype, "x2")
            return _dt.promote(x1.dtype, sdt), x1._device, None, sdt
        raise _operand_error(name, "x2", x2)
    if isinstance(x2, Array):
        _check_kind(name, x2.dtype, kinds, "x2")
        if not is_scalar(x1):
            raise _operand_error(name, "x1", x1)
        sdt = scalar_dtype(x1, x2.dtype, "x1")
        return _dt.promote(sdt, x2.dtype), x2._device, sdt, None
    raise _neither_error(name, x1, x2)


def _promoted_types(name, x1, x2, kinds):
    """:func:`_validated_types` without strict promotion: two arrays promote by
    :func:`.._dtypes.promote` (mixed kinds as NumPy 2), ``divide`` takes integers and
    booleans (:func:`.._dtypes.true_division`), and an operand outside the dtype category
    the function requires is accepted when the result's dtype is in it (``atan2(int,
    float)``). Python scalars follow the standard's rules."""
    cat = _dt.categories[kinds]
    div = name == "divide"
    if isinstance(x1, Array):
        if isinstance(x2, Array):
            dev = x1._device
            if x2._device is not dev:
                dev = _dev.check_same_device(dev, x2._device)
            dt = _dt.promote(x1.dtype, x2.dtype)
            if div:
                dt = _dt.true_division(dt)
            if dt not in cat:
                _check_kind(name, x1.dtype, kinds, "x1")
                _check_kind(name, x2.dtype, kinds, "x2")
                raise TypeError(f"{name}() cannot take x1 of dtype {x1.dtype} with x2 of dtype "
                                f"{x2.dtype}: they promote to {dt}, not a {kinds} dtype")
            return dt, dev, None, None
        if not div or x1.dtype not in _TRUE_DIVISION_KINDS:
            _check_kind(name, x1.dtype, kinds, "x1")
        if is_scalar(x2):
            sdt = scalar_dtype(x2, x1.dtype, "x2")
            dt = _dt.promote(x1.dtype, sdt)
            return (_dt.true_division(dt) if div else dt), x1._device, None, sdt
        raise _operand_error(name, "x2", x2)
    if isinstance(x2, Array):
        if not div or x2.dtype not in _TRUE_DIVISION_KINDS:
            _check_kind(name, x2.dtype, kinds, "x2")
        if not is_scalar(x1):
            raise _operand_error(name, "x1", x1)
        sdt = scalar_dtype(x1, x2.dtype, "x1")
        dt = _dt.promote(sdt, x2.dtype)
        return (_dt.true_division(dt) if div else dt), x2._device, sdt, None
    raise _neither_error(name, x1, x2)


def _operand_error(name, arg, v):
    if is_foreign_array(v):
        return foreign_operand_error(v, f"{name}() argument {arg}")
    return TypeError(f"{name}(): {arg} must be an array or a Python scalar, got "
                     f"{type(v).__name__}")


def _neither_error(name, x1, x2):
    for arg, v in (("x1", x1), ("x2", x2)):
        if is_foreign_array(v):
            return TypeError(f"{name}() takes forge_array arrays, got a {type_name(v)} as "
                             f"{arg}; convert it first with xp.asarray(...) "
                             "(import forge_array as xp)")
    return TypeError(f"{name}(): at least one of x1, x2 must be an array")


#: the dtypes ``divide`` takes beside floating point without strict promotion
_TRUE_DIVISION_KINDS = frozenset(_dt.categories["integer or boolean"])

# promoted dtypes cached by operand kinds depend on the strict switch
_dt.ON_SWITCH.append(_TYPES.clear)


def binary_operands(name, x1, x2, kinds, native=True):
    """Validate and promote two operands; return (a, b, dtype, device).  ``native``: two
    arrays of different dtypes stay as they are where the backend's kernel, converting each
    element as it reads it, gives the very bits of the converted operands
    (:func:`_native_pair`), instead of a converted copy of a whole operand first (False: both
    converted, for functions that need one dtype)."""
    dt, dev, s1, s2 = binary_types(name, x1, x2, kinds)
    a = _scalar_operand(x1, s1, dev) if s1 is not None else x1._array
    b = _scalar_operand(x2, s2, dev) if s2 is not None else x2._array
    if a.dtype != dt or b.dtype != dt:
        if native and s1 is None and s2 is None and _native_pair(name, a.dtype, b.dtype, dt):
            return a, b, dt, dev
        if a.dtype != dt:
            a = a.astype(dt)
        if b.dtype != dt:
            b = b.astype(dt)
    return a, b, dt, dev


#: functions of real floating-point operands whose result is one correctly rounded step (or
#: none), so that a kernel computing them on converted elements cannot round differently
#: from one on converted arrays; functions with several steps (``atan2``, ``hypot``,
#: ``pow``, ...) may be compiled differently for the mixed kernel (contracted multiply-adds:
#: a GPU's complex128 * complex64 differs from complex128 * complex128 in the last bit), so
#: their operands are converted first, as are complex ones
_ONE_STEP = frozenset(("add", "subtract", "multiply", "divide", "maximum", "minimum",
                       "copysign", "equal", "not_equal", "less", "less_equal", "greater",
                       "greater_equal", "where"))

#: (function, dtype, dtype, promoted dtype) -> whether the two go to the backend unconverted:
#: the backends' promotion of them (NumPy's ``result_type``, by which NumPy's and CuPy's
#: functions pick the loop they compute in) is the standard's, and the function is exact on
#: integers or one step on real floats (:data:`_ONE_STEP`)
_NATIVE = Cache("_elementwise.NATIVE")


def _native_pair(name, d1, d2, dt):
    key = (name, d1, d2, dt)
    hit = _NATIVE.get(key)
    if hit is None:
        hit = (np.result_type(d1, d2) == dt
               and (dt.kind in "iub" or (dt.kind == "f" and name in _ONE_STEP)))
        _NATIVE[key] = hit
    return hit


_PY = _fusion.PY_SCALARS
_MIN = _fusion_auto.MIN_SIZE  # automatic fusion's size threshold (a one-element list)


#: (function, dtype, device kind) -> the backend's function, for two arrays of that one dtype
#: that passed every check before and went to the backend unconverted with no fix-up: such
#: a call's checks and promotion cannot come out otherwise, so :func:`_binary` calls the
#: function at once (host time of ``x + y``); emptied when the strict switch changes
_SAME = Cache("_elementwise.SAME")
_dt.ON_SWITCH.append(_SAME.clear)
#: (function, array dtype, ``float`` or ``int``, device kind) -> (the backend's function, the
#: scalar's dtype) for an array and a Python scalar of that type whose validation depends on
#: the types alone (:func:`types_key`) and that went to the backend with the array
#: unconverted: ``x > 0.5``, ``x * 2.0``
_WITH_SCALAR = Cache("_elementwise.WITH_SCALAR")
_dt.ON_SWITCH.append(_WITH_SCALAR.clear)
_new_array = object.__new__
_current_cuda_index = _dev.current_cuda_index
_ndarray = np.ndarray


def _wrap(res, dev):
    """``Array._new(res, dev)`` for the result of a backend function called on operands that
    passed the checks before (its dtype is one of ours): NumPy's 0-d results become arrays."""
    if type(res) is not _ndarray and dev._kind != "cuda":
        res = np.asarray(res)
    out = _new_array(Array)
    out._array = res
    out._device = dev
    return out


def _binary(name, x1, x2, kinds, fix=None):
    if type(x1) is Array and type(x2) is Array:
        a = x1._array
        b = x2._array
        # asks the builder unless the step is small and eager (the rule beside
        # fusion.build.PY_SCALARS, inlined: small eager calls pay these checks only)
        if _fusion.ON[0] and (_fusion.ACTIVE[0] or a.size >= _MIN[0] or b.size >= _MIN[0]):
            r = _fusion.binary(name, x1, x2, kinds)
            if r is not None:
                return r
        else:
            dev = x1._device
            if dev is x2._device:
                fn = _SAME.get((name, a.dtype, dev._kind)) if a.dtype == b.dtype else None
                if fn is not None:
                    if dev._kind == "cuda" and _current_cuda_index() != dev._index:
                        with _dev.on(dev):
                            res = fn(a, b)
                    else:
                        res = fn(a, b)
                    return _wrap(res, dev)
    elif type(x1) is Array and (type(x2) is float or type(x2) is int) and fix is None and not (
            _fusion.ON[0] and (_fusion.ACTIVE[0] or x1._array.size >= _MIN[0])):
        a = x1._array
        dev = x1._device
        hit = _WITH_SCALAR.get((name, a.dtype, type(x2), dev._kind))
        if hit is not None:
            fn, sdt = hit
            if dev._kind == "cuda":
                b = sdt.type(x2)
                if _current_cuda_index() != dev._index:
                    with _dev.on(dev):
                        res = fn(a, b)
                else:
                    res = fn(a, b)
            else:
                res = fn(a, np.asarray(x2, dtype=sdt))
            return _wrap(res, dev)
    elif _fusion.ON[0] and (
            _fusion.ACTIVE[0]
            or not (type(x1) is Array and x1._array.size < _MIN[0] or type(x1) in _PY)
            or not (type(x2) is Array and x2._array.size < _MIN[0] or type(x2) in _PY)):
        r = _fusion.binary(name, x1, x2, kinds)
        if r is not None:
            return r
    a, b, dt, dev = binary_operands(name, x1, x2, kinds)
    fn = _backend_fn(dev, name)
    with _dev.on(dev):
        res = fn(a, b)
        if fix is not None:
            res = fix(_dev.backend(dev), a, b, res, dt)
    if fix is None and type(x1) is Array and a is x1._array and a.dtype == dt:
        # remembered once (steps that automatic fusion sends here come again every call)
        if type(x2) is Array:
            if b is x2._array and b.dtype == dt and (key := (name, dt, dev._kind)) not in _SAME:
                _SAME[key] = fn
        elif ((key := (name, dt, type(x2), dev._kind)) not in _WITH_SCALAR
              and types_key(name, kinds, x1, x2) is not None):
            _WITH_SCALAR[key] = (fn, b.dtype)
    return Array._new(res, dev)


#: the in-place operators written straight into the left operand (name -> the dtype kinds
#: the function takes and the backend's ufunc): one pass with ``out=``, no temporary
_IN_PLACE = {"add": ("numeric", "add"), "subtract": ("numeric", "subtract"),
             "multiply": ("numeric", "multiply"), "divide": ("floating-point", "true_divide"),
             "bitwise_and": ("integer or boolean", "bitwise_and"),
             "bitwise_or": ("integer or boolean", "bitwise_or"),
             "bitwise_xor": ("integer or boolean", "bitwise_xor")}


def binary_in_place(x1, x2, name):
    """``x1 <op>= x2`` for the functions of :data:`_IN_PLACE`, written into ``x1`` by the
    backend's ufunc (``out=``: one pass, no temporary, no copy); on a GPU its axes are ordered
    as ``x1``'s memory is (CuPy walks the output in C order: an F-ordered ``U *= s[None, :]``
    runs 8x slower unpermuted).  Returns True when written (a deferred ``x2`` computed first).
    False leaves the general way to the caller (the value computed, checked, then copied in;
    it raises the errors): another function, a deferred ``x1``, inside ``xp.fuse``, a result
    of another dtype or shape, and on a GPU an operand sharing memory with ``x1`` other than
    ``x1`` itself (NumPy buffers such operands itself).

    >>> import forge_array as xp
    >>> x = xp.ones(2, device="cpu")
    >>> binary_in_place(x, 1.0, "add"), x
    (True, Array([2., 2.], dtype=float64, device=cpu))
    """
    if type(x1) is not Array:
        return False
    op = _IN_PLACE.get(name)
    t2 = type(x2)
    if op is None or not (t2 is Array or t2 is Deferred or t2 in _PY) or (_fusion.ON[0] and _fusion.ACTIVE[0]):
        return False
    dt, dev, _, s2 = binary_types(name, x1, x2, op[0])
    a = x1._array
    if dt != a.dtype:
        return False
    m = _dev.backend(dev)
    cuda = dev.is_cuda
    if s2 is not None:
        b = _scalar_operand(x2, s2, dev)
    else:
        b = x2._array
        if b.ndim > a.ndim or any(q != p and q != 1 for p, q in zip(a.shape[::-1], b.shape[::-1])):
            return False
        if cuda and b is not a and (b.data.ptr != a.data.ptr or b.shape != a.shape or b.strides != a.strides) \
                and m.may_share_memory(a, b):
            return False
        if b.dtype != dt and not _native_pair(name, a.dtype, b.dtype, dt):
            with _dev.on(dev):
                b = b.astype(dt)
    _array_module.before_write()
    if a.size == 0:
        return True
    if cuda and a.ndim > 1 and not a.flags.c_contiguous:
        order = sorted(range(a.ndim), key=lambda i: -builtins_abs(a.strides[i]))
        if s2 is None:
            b = m.broadcast_to(b, a.shape).transpose(order)
        a = a.transpose(order)
    with _dev.on(dev):
        getattr(m, op[1])(a, b, out=a)
    return True


_array_module.IN_PLACE[0] = binary_in_place


def _unary(name, x, kinds, fix=None, backend_name=None):
    if type(x) is Array and fix is None and not (
            _fusion.ON[0] and (_fusion.ACTIVE[0] or x._array.size >= _MIN[0])):
        a = x._array
        dev = x._device
        fn = _UNARY.get((name, a.dtype, dev._kind))
        if fn is not None:   # a dtype that passed the kind check before: no check can fail
            if dev._kind == "cuda" and _current_cuda_index() != dev._index:
                with _dev.on(dev):
                    res = fn(a)
            else:
                res = fn(a)
            return _wrap(res, dev)
    if not isinstance(x, Array):
        raise TypeError(f"{name}() requires an array, got {type(x).__name__}")
    _check_kind(name, x.dtype, kinds)
    if _fusion.ON[0] and (_fusion.ACTIVE[0] or type(x) is not Array or x._array.size >= _MIN[0]):
        r = _fusion.unary(name, x)
        if r is not None:
            return r
    dev = x._device
    fn = _backend_fn(dev, backend_name or name)
    with _dev.on(dev):
        res = fn(x._array)
        if fix is not None:
            res = fix(_dev.backend(dev), x._array, res, x.dtype)
    out = Array._new(res, dev)
    if fix is None and type(x) is Array and (key := (name, x.dtype, dev._kind)) not in _UNARY:
        _UNARY[key] = fn
    return out


#: (function, dtype, device kind) -> the backend's function, for arrays of a dtype that passed
#: the function's kind check before and needs no fix-up (the host time of ``exp(x)``)
_UNARY = Cache("_elementwise.UNARY")


# --------------------------------------------------------------------------- unary
def abs(x, /):
    """Absolute value (magnitude for complex input, returned as real).

    >>> import forge_array as xp
    >>> xp.abs(xp.asarray([-1, 2], device="cpu"))
    Array([1, 2], dtype=int64, device=cpu)
    """
    return _unary("abs", x, "numeric")


def _make_unary(name, kinds, doc, fix=None, backend_name=None, example="[0.5]"):
    def f(x, /):
        return _unary(name, x, kinds, fix, backend_name)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"{doc}\n\n    >>> import forge_array as xp\n"
                 f"    >>> xp.{name}(xp.asarray({example}, device='cpu')).shape\n    (1,)\n")
    return f


acos = _make_unary("acos", "floating-point", "Inverse cosine, element-wise.")
acosh = _make_unary("acosh", "floating-point", "Inverse hyperbolic cosine, element-wise.",
                    fix_complex_unary(acosh_special))
asin = _make_unary("asin", "floating-point", "Inverse sine, element-wise.")
asinh = _make_unary("asinh", "floating-point", "Inverse hyperbolic sine, element-wise.")
atan = _make_unary("atan", "floating-point", "Inverse tangent, element-wise.")
atanh = _make_unary("atanh", "floating-point", "Inverse hyperbolic tangent, element-wise.")
cos = _make_unary("cos", "floating-point", "Cosine, element-wise.")
cosh = _make_unary("cosh", "floating-point", "Hyperbolic cosine, element-wise.")
exp = _make_unary("exp", "floating-point", "Exponential, element-wise.")
expm1 = _make_unary("expm1", "floating-point", "exp(x) - 1, accurate near zero.",
                    fix_complex_unary(expm1_special))
log = _make_unary("log", "floating-point", "Natural logarithm, element-wise.",
                  fix_complex_unary(log_special))
log1p = _make_unary("log1p", "floating-point", "log(1 + x), accurate near zero.",
                    fix_complex_unary(log_special))
log2 = _make_unary("log2", "floating-point", "Base-2 logarithm, element-wise.")
log10 = _make_unary("log10", "floating-point", "Base-10 logarithm, element-wise.")
sin = _make_unary("sin", "floating-point", "Sine, element-wise.")
sinh = _make_unary("sinh", "floating-point", "Hyperbolic sine, element-wise.")
sqrt = _make_unary("sqrt", "floating-point", "Square root, element-wise.")
tan = _make_unary("tan", "floating-point", "Tangent, element-wise.")
tanh = _make_unary("tanh", "floating-point", "Hyperbolic tangent, element-wise.",
                   fix_complex_unary(tanh_special))
reciprocal = _make_unary("reciprocal", "floating-point", "1 / x, element-wise.")
signbit = _make_unary("signbit", "real floating-point", "Whether the sign bit is set.")
sign = _make_unary("sign", "numeric", "Sign of each element (x/|x| for complex).")
square = _make_unary("square", "numeric", "x * x, element-wise.")
negative = _make_unary("negative", "numeric", "-x, element-wise.")
isfinite = _make_unary("isfinite", "numeric", "Whether each element is finite.")
isinf = _make_unary("isinf", "numeric", "Whether each element is infinite.")
isnan = _make_unary("isnan", "numeric", "Whether each element is NaN.")
logical_not = _make_unary("logical_not", "boolean", "Logical NOT, element-wise.",
                          example="[True]")
bitwise_invert = _make_unary("bitwise_invert", "integer or boolean",
                             "Bitwise NOT (~x), element-wise.", example="[5]")
conj = _make_unary("conj", "numeric", "Complex conjugate, element-wise.")


def positive(x, /):
    """+x, element-wise (a copy).

    >>> import forge_array as xp
    >>> xp.positive(xp.asarray([-1], device="cpu"))
    Array([-1], dtype=int64, device=cpu)
    """
    if not isinstance(x, Array):
        raise TypeError(f"positive() requires an array, got {type(x).__name__}")
    _check_kind("positive", x.dtype, "numeric")
    with _dev.on(x._device):
        return Array._new(x._array.copy(), x._device)


def _rounding(name):
    def f(x, /):
        kinds = "numeric" if name == "round" else "real numeric"
        if not isinstance(x, Array):
            raise TypeError(f"{name}() requires an array, got {type(x).__name__}")
        _check_kind(name, x.dtype, kinds)
        if x.dtype in _dt.integer_dtypes:
            with _dev.on(x._device):
                return Array._new(x._array.copy(), x._device)
        return _unary(name, x, kinds)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"{name.capitalize()} each element (integers are returned unchanged).\n\n"
                 f"    >>> import forge_array as xp\n"
                 f"    >>> xp.{name}(xp.asarray([1.5], device='cpu')).dtype\n"
                 f"    dtype('float64')\n")
    return f


ceil = _rounding("ceil")
floor = _rounding("floor")
trunc = _rounding("trunc")
round = _rounding("round")  # noqa: A001


def real(x, /):
    """Real part (real input is returned as a copy).

    >>> import forge_array as xp
    >>> xp.real(xp.asarray([1 + 2j], device="cpu"))
    Array([1.], dtype=float64, device=cpu)
    """
    if not isinstance(x, Array):
        raise TypeError(f"real() requires an array, got {type(x).__name__}")
    _check_kind("real", x.dtype, "numeric")
    with _dev.on(x._device):
        if x.dtype in _dt.complex_floating_dtypes:
            return Array._new(x._array.real.copy(), x._device)
        return Array._new(x._array.copy(), x._device)


def imag(x, /):
    """Imaginary part (zeros for real input).

    >>> import forge_array as xp
    >>> xp.imag(xp.asarray([1 + 2j], device="cpu"))
    Array([2.], dtype=float64, device=cpu)
    """
    if not isinstance(x, Array):
        raise TypeError(f"imag() requires an array, got {type(x).__name__}")
    _check_kind("imag", x.dtype, "numeric")
    with _dev.on(x._device):
        if x.dtype in _dt.complex_floating_dtypes:
            return Array._new(x._array.imag.copy(), x._device)
        return Array._new(_dev.backend(x._device).zeros_like(x._array), x._device)


# --------------------------------------------------------------------------- binary
def _make_binary(name, kinds, doc, fix=None, example="x, 2.0"):
    def f(x1, x2, /):
        return _binary(name, x1, x2, kinds, fix)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"{doc}\n\n    Python scalars are accepted for either argument.\n\n"
                 f"    >>> import forge_array as xp\n"
                 f"    >>> x = xp.asarray([1.0, 4.0], device='cpu')\n"
                 f"    >>> xp.{name}({example}).shape\n    (2,)\n")
    return f


add = _make_binary("add", "numeric", "x1 + x2, element-wise.")
subtract = _make_binary("subtract", "numeric", "x1 - x2, element-wise.")
multiply = _make_binary("multiply", "numeric", "x1 * x2, element-wise.")
divide = _make_binary("divide", "floating-point",
                      "x1 / x2 (true division), element-wise.\n\n    Integer and boolean "
                      "operands give the default floating-point dtype (float64) unless "
                      "strict\n    promotion is on (see ``set_strict``).")
floor_divide = _make_binary("floor_divide", "real numeric", "floor(x1 / x2), element-wise.",
                            fix_floor_divide)
remainder = _make_binary("remainder", "real numeric",
                         "x1 mod x2 with the sign of x2 (Python %), element-wise.",
                         fix_remainder)
pow = _make_binary("pow", "numeric", "x1 ** x2, element-wise.")  # noqa: A001
atan2 = _make_binary("atan2", "real floating-point", "Quadrant-aware arctan(x1 / x2).")
copysign = _make_binary("copysign", "real floating-point",
                        "Magnitude of x1 with the sign of x2.")
hypot = _make_binary("hypot", "real floating-point", "sqrt(x1**2 + x2**2) without overflow.")
logaddexp = _make_binary("logaddexp", "real floating-point", "log(exp(x1) + exp(x2)).")
nextafter = _make_binary("nextafter", "real floating-point",
                         "Next representable value after x1 towards x2.")
maximum = _make_binary("maximum", "real numeric", "Element-wise maximum (NaN propagates).")
minimum = _make_binary("minimum", "real numeric", "Element-wise minimum (NaN propagates).")
bitwise_and = _make_binary("bitwise_and", "integer or boolean", "x1 & x2, element-wise.",
                           example="xp.astype(x, xp.int64), 3")
bitwise_or = _make_binary("bitwise_or", "integer or boolean", "x1 | x2, element-wise.",
                          example="xp.astype(x, xp.int64), 3")
bitwise_xor = _make_binary("bitwise_xor", "integer or boolean", "x1 ^ x2, element-wise.",
                           example="xp.astype(x, xp.int64), 3")
logical_and = _make_binary("logical_and", "boolean", "Logical AND, element-wise.",
                           example="x > 2, True")
logical_or = _make_binary("logical_or", "boolean", "Logical OR, element-wise.",
                          example="x > 2, True")
logical_xor = _make_binary("logical_xor", "boolean", "Logical XOR, element-wise.",
                           example="x > 2, True")
equal = _make_binary("equal", "any", "x1 == x2, element-wise.")
not_equal = _make_binary("not_equal", "any", "x1 != x2, element-wise.")
less = _make_binary("less", "real numeric", "x1 < x2, element-wise.")
less_equal = _make_binary("less_equal", "real numeric", "x1 <= x2, element-wise.")
greater = _make_binary("greater", "real numeric", "x1 > x2, element-wise.")
greater_equal = _make_binary("greater_equal", "real numeric", "x1 >= x2, element-wise.")


def _shift(name):
    def f(x1, x2, /):
        a, b, dt, dev = binary_operands(name, x1, x2, "integer")
        m = _dev.backend(dev)
        with _dev.on(dev):
            if m.any(b < 0) if not dev.is_cuda else bool((b < 0).any()):
                raise ValueError(f"{name}(): shift amounts must be non-negative")
            res = _backend_fn(dev, name)(a, b)
        return Array._new(res, dev)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"Bitwise {'left' if 'left' in name else 'right'} shift of x1 by x2 bits.\n\n"
                 f"    >>> import forge_array as xp\n"
                 f"    >>> xp.{name}(xp.asarray([4], device='cpu'), 1).dtype\n"
                 f"    dtype('int64')\n")
    return f


bitwise_left_shift = _shift("bitwise_left_shift")
bitwise_right_shift = _shift("bitwise_right_shift")


def clip(x, /, min=None, max=None):  # noqa: A002
    """Clamp each element to ``[min, max]`` (scalars or arrays; NaN propagates).

    >>> import forge_array as xp
    >>> xp.clip(xp.asarray([1, 5, 9], device="cpu"), 2, 6)
    Array([2, 5, 6], dtype=int64, device=cpu)
    """
    if not isinstance(x, Array):
        raise TypeError(f"clip() requires an array, got {type(x).__name__}")
    _check_kind("clip", x.dtype, "real numeric")
    dev = x._device
    m = _dev.backend(dev)
    bounds = []
    scalars = []
    for bound, what in ((min, "min"), (max, "max")):
        if bound is None:
            bounds.append(None)
            scalars.append(None)
            continue
        if isinstance(bound, Array):
            _dev.check_same_device(dev, bound._device)
            _check_kind("clip", bound.dtype, "real numeric", what)
            if _dt.kind_of(bound.dtype) != _dt.kind_of(x.dtype):
                raise TypeError(f"clip(): {what} of dtype {bound.dtype} does not match x of "
                                f"dtype {x.dtype}")
            b = bound
            scalars.append(bound)
        elif is_scalar(bound):
            v = py_scalar(bound)
            if isinstance(v, (bool, complex)) or (isinstance(v, float) and
                                                  x.dtype in _dt.integer_dtypes):
                raise TypeError(f"clip(): {what}={v!r} does not match x of dtype {x.dtype}")
            if x.dtype in _dt.integer_dtypes:
                info = np.iinfo(x.dtype)
                v = int(np.clip(v, info.min, info.max))
            b = v
            scalars.append(v)
        else:
            raise TypeError(f"clip(): {what} must be an array, a Python scalar or None")
        bounds.append(b)
    if (_fusion.ON[0]
            and not any(isinstance(v, Array) or v != v for v in scalars if v is not None)):
        r = _fusion.clip(x, *scalars)
        if r is not None:
            return r
    res = x._array
    lo, hi = (b._array if isinstance(b, Array) else
              None if b is None else scalar_to_backend(b, x.dtype, dev) for b in bounds)
    with _dev.on(dev):
        if lo is not None:
            res = m.where(res < lo, lo.astype(x.dtype), res)
        if hi is not None:
            res = m.where(res > hi, hi.astype(x.dtype), res)
        if x.dtype in _dt.real_floating_dtypes:
            nan = m.isnan(x._array)
            if lo is not None:
                nan = nan | m.isnan(lo)
            if hi is not None:
                nan = nan | m.isnan(hi)
            res = m.where(nan, x.dtype.type(np.nan), res)
        res = m.asarray(res, dtype=x.dtype)
        if res is x._array:
            res = res.copy()
    return Array._new(res, dev)


_array_module.OPERATORS.update({n: globals()[n] for n in __all__})
_fusion.BINARY_TYPES[0] = binary_types
