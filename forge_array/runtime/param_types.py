"""Kernel parameter types as plain data: what the dispatch tiers describe a kernel's arguments
with, so that a shipped kernel is named, found and launched without numba.

A type here prints as numba prints the type it stands for (``float32*``, ``int64``,
``UniTuple(int64, 4)``, ``Tuple((float32*, float64*))``), so a kernel's cache key (which
digests the printed argument types) is the same whether it was computed from these or from
numba's types; :func:`to_numba` gives numba's types where a kernel is compiled.  Types are
interned: equal types are the same object.

>>> ptr("float32"), I64, tuple_of((ptr("float32"), ptr("float64")))
(float32*, int64, Tuple((float32*, float64*)))
>>> tuple_of((I64, I64)) is unituple(I64, 2)
True
"""

from __future__ import annotations

import numpy as np

__all__ = ["ParamType", "scalar", "ptr", "tuple_of", "unituple", "tuple_ptr", "to_numba",
           "I64", "I32", "U64", "U32", "F64", "F32"]

_INTERNED: dict = {}


class ParamType:
    """One kernel parameter type: ``kind`` is ``"scalar"`` (``name`` a NumPy dtype name),
    ``"ptr"`` (a buffer of dtype ``name``) or ``"tuple"`` (``types``, a tuple of types, as
    numba's tuple types have; None for the others)."""

    __slots__ = ("kind", "name", "types", "_text")

    def __init__(self, kind, name, types, text):
        self.kind = kind
        self.name = name
        self.types = types
        self._text = text

    def __repr__(self):
        return self._text

    __str__ = __repr__

    def __reduce__(self):   # pickled (the build process) as the call that makes it
        if self.kind == "scalar":
            return scalar, (self.name,)
        if self.kind == "ptr":
            return ptr, (self.name,)
        return tuple_of, (self.types,)


def _intern(kind, name, types, text):
    key = (kind, name, types)
    t = _INTERNED.get(key)
    if t is None:
        t = _INTERNED.setdefault(key, ParamType(kind, name, types, text))
    return t


def _dtype_name(dtype) -> str:
    dt = np.dtype(dtype)
    if dt.kind == "V" or dt.hasobject:
        raise TypeError(f"no kernel parameter type for dtype {dt}")
    return dt.name


def scalar(dtype) -> ParamType:
    """A scalar parameter of ``dtype`` (``scalar("int64")`` prints ``int64``)."""
    name = _dtype_name(dtype)
    return _intern("scalar", name, None, name)


def ptr(dtype) -> ParamType:
    """A buffer of ``dtype`` (numba's ``CPointer``: ``float32*``)."""
    name = _dtype_name(dtype)
    return _intern("ptr", name, None, name + "*")


def tuple_of(types) -> ParamType:
    """A tuple of parameter types; numba's ``UniTuple`` when every item is the same type, as
    ``numba.types.Tuple`` makes it.

    >>> tuple_of(()), tuple_of((ptr("bool"),)), tuple_of((I64, tuple_of((F32, F32))))
    (Tuple(()), UniTuple(bool*, 1), Tuple((int64, UniTuple(float32, 2))))
    """
    types = tuple(types)
    for t in types:
        if not isinstance(t, ParamType):
            raise TypeError(f"a tuple's items must be parameter types, got {t!r}")
    if types and all(t is types[0] for t in types[1:]):
        return unituple(types[0], len(types))
    return _intern("tuple", None, types, "Tuple((" + ", ".join(map(repr, types)) + "))")


def unituple(t: ParamType, count: int) -> ParamType:
    """``count`` items of type ``t`` (numba's ``UniTuple``)."""
    count = int(count)
    if count <= 0:
        return tuple_of(())
    return _intern("tuple", None, (t,) * count, f"UniTuple({t!r}, {count})")


def tuple_ptr(dtypes) -> ParamType:
    """A tuple of buffers of ``dtypes`` (struct-of-arrays operands)."""
    return tuple_of(tuple(ptr(d) for d in dtypes))


def to_numba(t):
    """numba's type for parameter type ``t`` (a tuple of them: a tuple of numba's types);
    numba loads here."""
    if isinstance(t, tuple):
        return tuple(to_numba(x) for x in t)
    from .kernel_types import numba_type, ptr_t  # noqa: PLC0415  (numba: only where a kernel builds)

    if t.kind == "scalar":
        return numba_type(t.name)
    if t.kind == "ptr":
        return ptr_t(t.name)
    from numba import types as nt  # noqa: PLC0415

    return nt.Tuple(tuple(to_numba(x) for x in t.types))


I64, I32, U64, U32, F64, F32 = (scalar(d) for d in ("int64", "int32", "uint64", "uint32", "float64", "float32"))
