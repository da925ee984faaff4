"""Data types of the standard (NumPy dtype objects), the promotion rule and dtype
categories.

This module is the one home of type promotion: :func:`promote` (every function that
combines dtypes asks it, the fusion layer included, through the element-wise functions'
checks) and :func:`true_division` (the result dtype of ``/``). Pairs of dtypes the
standard's table leaves out (mixed kinds: integer with floating point, boolean with
numbers, ``uint64`` with signed integers) promote as NumPy 2 and CuPy do, unless strict
promotion is on (``FORGE_ARRAY_STRICT=1`` or :func:`set_strict`): then they raise
TypeError, as the standard allows.

>>> from forge_array._dtypes import int8, uint8, int64, float32, promote
>>> promote(int8, uint8)
dtype('int16')
>>> promote(int64, float32)
dtype('float64')
"""

from __future__ import annotations

import builtins

import numpy as np

from .runtime.flags import FLAGS as _FLAGS
from .runtime.flags import on_change as _on_change
from .runtime.flags import set_flags as _set_flags

bool = np.dtype("bool")  # noqa: A001
int8 = np.dtype("int8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
uint8 = np.dtype("uint8")
uint16 = np.dtype("uint16")
uint32 = np.dtype("uint32")
uint64 = np.dtype("uint64")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
complex64 = np.dtype("complex64")
complex128 = np.dtype("complex128")

signed_integer_dtypes = (int8, int16, int32, int64)
unsigned_integer_dtypes = (uint8, uint16, uint32, uint64)
integer_dtypes = signed_integer_dtypes + unsigned_integer_dtypes
real_floating_dtypes = (float32, float64)
complex_floating_dtypes = (complex64, complex128)
floating_dtypes = real_floating_dtypes + complex_floating_dtypes
real_numeric_dtypes = integer_dtypes + real_floating_dtypes
numeric_dtypes = real_numeric_dtypes + complex_floating_dtypes
all_dtypes = (bool,) + numeric_dtypes

default_int = int64
default_uint = uint64
default_float = float64
default_complex = complex128
default_index = int64

_by_name = {str(d): d for d in all_dtypes}
#: the standard's dtypes by themselves (dtypes equal to one of them, e.g. with byte order "=")
_CANONICAL = {d: d for d in all_dtypes}
_BY_TYPE = {d.type: d for d in all_dtypes}

# The categories used to validate arguments, by the phrase the standard uses.
categories = {
    "any": all_dtypes,
    "all": all_dtypes,
    "boolean": (bool,),
    "integer": integer_dtypes,
    "integer or boolean": integer_dtypes + (bool,),
    "real numeric": real_numeric_dtypes,
    "numeric": numeric_dtypes,
    "floating-point": floating_dtypes,
    "real floating-point": real_floating_dtypes,
    "complex floating-point": complex_floating_dtypes,
    "real-valued": (bool,) + real_numeric_dtypes,
}


def _build_table():
    t = {}
    signed = [int8, int16, int32, int64]
    unsigned = [uint8, uint16, uint32, uint64]
    for i, a in enumerate(signed):
        for j, b in enumerate(signed):
            t[a, b] = signed[max(i, j)]
    for i, a in enumerate(unsigned):
        for j, b in enumerate(unsigned):
            t[a, b] = unsigned[max(i, j)]
    # mixed signed/unsigned: the smallest signed type holding both
    for i, u in enumerate(unsigned[:3]):
        for j, s in enumerate(signed):
            r = signed[max(i + 1, j)]
            t[u, s] = t[s, u] = r
    floats = [float32, float64]
    complexes = [complex64, complex128]
    for i, a in enumerate(floats + complexes):
        for j, b in enumerate(floats + complexes):
            prec = max(i % 2, j % 2)
            is_complex = i >= 2 or j >= 2
            t[a, b] = (complexes if is_complex else floats)[prec]
    t[bool, bool] = bool
    return t


promotion_table = _build_table()

#: pairs of dtypes outside the standard's table -> NumPy 2's promotion of them (CuPy's too)
mixed_kind_table = {(a, b): np.promote_types(a, b) for a in all_dtypes for b in all_dtypes
                    if (a, b) not in promotion_table}


#: ``[True]`` while promotion follows the standard's table alone (mixed kinds raise and
#: integer ``/`` needs floating-point operands): the ``strict`` flag's cell
#: (``FORGE_ARRAY_STRICT``, :func:`set_strict`, ``set_flags(strict=...)``)
STRICT = _FLAGS["strict"].cell

#: functions called with no arguments when :data:`STRICT` changes (caches of promoted dtypes
#: empty themselves)
ON_SWITCH: list = []


@_on_change("strict")
def _switched(old, new):
    for f in ON_SWITCH:
        f()


class _StrictSetting:
    """What :func:`set_strict` returns: the setting before the call (``previous``); as a
    context manager, restores it on exit."""

    __slots__ = ("previous",)

    def __init__(self, previous):
        self.previous = previous

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(self.previous)
        return False

    def __repr__(self):
        return f"set_strict(previous={self.previous})"


def _set(flag):
    _set_flags(strict=builtins.bool(flag))


def set_strict(flag: builtins.bool = True):
    """Turn strict type promotion on or off for the whole process.

    Strict promotion is the standard's table alone: arrays of mixed kinds (an integer and a
    floating-point array, a boolean and a numeric one, ``uint64`` and a signed integer
    array) raise TypeError, and ``divide`` (``/``) requires floating-point operands. Off
    (the default unless ``FORGE_ARRAY_STRICT=1`` is set), such pairs promote as NumPy 2
    and CuPy do, and ``/`` of integers gives the default floating-point dtype. Python
    scalars follow the standard's rules either way. The call returns the previous setting
    (``.previous``); used as a context manager, it restores that setting on exit.

    ```python
    import forge_array as xp

    i = xp.asarray([1, 2], device="cpu")
    f = xp.asarray([0.5, 0.5], dtype=xp.float32, device="cpu")
    (i + f).dtype                 # float64, as NumPy 2
    with xp.set_strict(True):
        i + f                     # TypeError: int64 and float32 cannot be type-promoted
    ```
    """
    previous = STRICT[0]
    _set(flag)
    return _StrictSetting(previous)


def is_strict() -> builtins.bool:
    """Whether strict type promotion is on (see :func:`set_strict`).

    ```python
    import forge_array as xp

    xp.is_strict()                # False unless FORGE_ARRAY_STRICT=1
    ```
    """
    return STRICT[0]


def to_dtype(dtype, what: str = "dtype"):
    """Validate a dtype argument and return the canonical NumPy dtype object.

    Accepts the namespace's dtype objects (NumPy dtypes) and NumPy scalar types;
    anything else raises TypeError.
    """
    if isinstance(dtype, np.dtype):
        d = _CANONICAL.get(dtype)  # a look-up by hash: str(dtype) costs ~1 us
        if d is None:
            d = _by_name.get(str(dtype))
        if d is not None and dtype.isnative:
            return d
    elif isinstance(dtype, type) and issubclass(dtype, np.generic):
        d = _BY_TYPE.get(dtype) or _by_name.get(str(np.dtype(dtype)))
        if d is not None:
            return d
    raise TypeError(f"{what}={dtype!r} is not a data type of the array API standard")


def promote(t1, t2):
    """Promote two dtypes: the standard's table, then (unless strict promotion is on, see
    :func:`set_strict`) NumPy 2's promotion of mixed kinds; TypeError otherwise."""
    try:
        return promotion_table[t1, t2]
    except KeyError:
        pass
    if not STRICT[0]:
        r = mixed_kind_table.get((t1, t2))
        if r is not None:
            return r
    raise TypeError(
        f"{t1} and {t2} cannot be type-promoted together under the array API "
        "standard (mixed-kind promotion is not defined); cast one explicitly "
        "with astype()"
        + ("" if not STRICT[0] else
           " (strict promotion is on: FORGE_ARRAY_STRICT=1 or forge_array.set_strict())")
    ) from None


def true_division(dtype):
    """The result dtype of true division (``divide``, ``/``) of operands promoted to
    ``dtype``: integers and booleans divide into the default floating-point dtype (as in
    NumPy, CuPy and PyTorch) unless strict promotion is on; other dtypes are kept.

    >>> true_division(int8), true_division(float32)
    (dtype('float64'), dtype('float32'))
    """
    if (dtype in integer_dtypes or dtype == bool) and not STRICT[0]:
        return default_float
    return dtype


def kind_of(dtype) -> str:
    if dtype == bool:
        return "bool"
    if dtype in integer_dtypes:
        return "int"
    if dtype in real_floating_dtypes:
        return "float"
    return "complex"


def complex_of(dtype):
    """The complex dtype of the same precision as a real floating dtype."""
    return complex64 if dtype == float32 else complex128


def real_of(dtype):
    """The real dtype of the same precision as a complex dtype."""
    if dtype == complex64:
        return float32
    if dtype == complex128:
        return float64
    return dtype


_kind_names = {
    "bool": (bool,),
    "signed integer": signed_integer_dtypes,
    "unsigned integer": unsigned_integer_dtypes,
    "integral": integer_dtypes,
    "real floating": real_floating_dtypes,
    "complex floating": complex_floating_dtypes,
    "numeric": numeric_dtypes,
}


def isdtype(dtype, kind) -> builtins.bool:
    """Whether ``dtype`` is of the kind(s) given (a dtype, a kind name or a tuple).

    >>> import forge_array as xp
    >>> xp.isdtype(xp.float32, "real floating")
    True
    >>> xp.isdtype(xp.int8, ("bool", "unsigned integer"))
    False
    """
    dtype = to_dtype(dtype)
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        try:
            return dtype in _kind_names[kind]
        except KeyError:
            raise ValueError(f"unknown dtype kind {kind!r}; expected one of "
                             f"{sorted(_kind_names)}") from None
    return dtype == to_dtype(kind, "kind")


class finfo_object:
    """Machine limits of a floating-point dtype (Python floats, per the standard)."""

    def __init__(self, dtype):
        fi = np.finfo(dtype)
        self.bits = int(fi.bits)
        self.eps = float(fi.eps)
        self.max = float(fi.max)
        self.min = float(fi.min)
        self.smallest_normal = float(fi.smallest_normal)
        self.dtype = real_of(dtype)

    def __repr__(self):
        return (f"finfo(bits={self.bits}, eps={self.eps}, max={self.max}, min={self.min}, "
                f"smallest_normal={self.smallest_normal}, dtype={self.dtype})")


class iinfo_object:
    """Machine limits of an integer dtype (Python ints)."""

    def __init__(self, dtype):
        ii = np.iinfo(dtype)
        self.bits = int(ii.bits)
        self.max = int(ii.max)
        self.min = int(ii.min)
        self.dtype = dtype

    def __repr__(self):
        return f"iinfo(bits={self.bits}, max={self.max}, min={self.min}, dtype={self.dtype})"
