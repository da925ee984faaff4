"""Stable fingerprints of everything that changes a kernel's code, for the disk cache.

A fingerprint covers a Python function's bytecode, constants, closure values and the globals
it refers to (recursively, a few levels deep), so two lambdas with the same code and the
same captured values share one compiled kernel, across processes.

Example
-------
>>> fingerprint(lambda a, b: a + b) == fingerprint(lambda a, b: a + b)
True
>>> fingerprint(lambda a, b: a + b) == fingerprint(lambda a, b: a * b)
False
"""

from __future__ import annotations

import hashlib
import types as pytypes

import numpy as np

_MAX_DEPTH = 4


class Unfingerprintable(Exception):
    """Raised for a value whose identity cannot be made stable across processes."""


def _code(code: pytypes.CodeType, depth: int) -> str:
    consts = []
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            consts.append(_code(c, depth))
        else:
            consts.append(repr(c))
    return "|".join(
        (code.co_code.hex(), ",".join(consts), ",".join(code.co_names), ",".join(code.co_varnames))
    )


class Verbatim:
    """A fingerprint computed before (:func:`fingerprint` of an object not at hand): it
    stands for that object in :func:`digest`, so a key can be made without importing it.

    >>> f = lambda a: a + 1
    >>> digest(Verbatim(fingerprint(f)), 2) == digest(f, 2)
    True
    """

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _fp(obj, depth: int) -> str:
    if type(obj) is Verbatim:
        return obj.text
    if depth > _MAX_DEPTH:
        return f"<deep {type(obj).__qualname__}>"
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return f"{type(obj).__name__}:{obj!r}"
    if isinstance(obj, np.dtype):
        return f"dtype:{obj.str}"
    if isinstance(obj, np.generic):
        return f"np:{obj.dtype.str}:{obj!r}"
    if isinstance(obj, type):
        return f"type:{obj.__module__}.{obj.__qualname__}"
    if isinstance(obj, (tuple, list)):
        return "(" + ",".join(_fp(o, depth) for o in obj) + ")"
    if isinstance(obj, dict):
        return "{" + ",".join(f"{_fp(k, depth)}:{_fp(v, depth)}" for k, v in sorted(obj.items(), key=repr)) + "}"
    if isinstance(obj, pytypes.ModuleType):
        return f"module:{obj.__name__}"
    py_func = getattr(obj, "py_func", None)  # numba dispatchers
    if isinstance(py_func, pytypes.FunctionType):
        return "jit:" + _fp(py_func, depth)
    if isinstance(obj, pytypes.FunctionType):
        parts = [obj.__module__ or "", obj.__qualname__, _code(obj.__code__, depth)]
        if obj.__defaults__:
            parts.append(_fp(obj.__defaults__, depth + 1))
        if obj.__closure__:
            cells = []
            for cell in obj.__closure__:
                try:
                    cells.append(_fp(cell.cell_contents, depth + 1))
                except ValueError:  # empty cell
                    cells.append("<empty>")
            parts.append("closure:" + ",".join(cells))
        g = obj.__globals__
        refs = []
        for name in _global_names(obj.__code__):
            if name in g and g[name] is not obj:
                refs.append(f"{name}={_fp(g[name], depth + 1)}")
        parts.append("globals:" + ",".join(refs))
        return "fn:" + "#".join(parts)
    if isinstance(obj, (pytypes.BuiltinFunctionType, np.ufunc)):
        return f"builtin:{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', obj.__name__)}"
    fingerprint_method = getattr(obj, "__forge_fingerprint__", None)
    if fingerprint_method is not None:
        return _fp(fingerprint_method(), depth)
    mod = type(obj).__module__ or ""
    if mod.startswith("numba"):
        return f"numba:{obj}"
    r = repr(obj)
    if " at 0x" in r:
        raise Unfingerprintable(r)
    return f"{mod}.{type(obj).__qualname__}:{r}"


def _global_names(code: pytypes.CodeType):
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, pytypes.CodeType):
            names |= set(_global_names(c))
    return sorted(names)


def fingerprint(obj) -> str:
    """A string that changes whenever ``obj`` would compile to different code."""
    return _fp(obj, 0)


def digest(*parts) -> str:
    """SHA-256 hex digest of the fingerprints of ``parts``."""
    h = hashlib.sha256()
    for p in parts:
        h.update(fingerprint(p).encode())
        h.update(b"\0")
    return h.hexdigest()
