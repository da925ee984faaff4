"""User functions as the kernels' caches see them: equal functions are one object, and
builtins become functions numba can compile.

Every cache of compiled kernels and launch plans is keyed by the operator and map function
objects. A lambda written inside a loop is a new object at every pass, so without this module
it would miss every in-memory cache. :func:`canonical` returns, for a plain Python function,
the first function seen with the same code, closure values, defaults and referenced globals
(each value with its type, so ``1`` and ``1.0`` differ); a function closing over a different
value, or one whose global was rebound, is a different function. Builtins (``abs``,
``math.sqrt``, ``operator.add``, ...) are not Python functions numba can compile as device
functions: :func:`compilable` wraps them in a generated function of a given arity that calls
them (numba compiles a call of a builtin it supports).

>>> f, g = [canonical(lambda v: v * 2) for _ in range(2)]   # a new lambda at each pass
>>> (f is g, f(3))
(True, 6)
>>> import math
>>> h = compilable(math.sqrt, 1)
>>> h(4.0), h is compilable(math.sqrt, 1)
(2.0, True)
"""

from __future__ import annotations

import threading
import types

from .caches import Cache

__all__ = ["canonical", "compilable", "fingerprint"]

_LIMIT = 4096                 # a loop of lambdas closing over ever new values must not grow it forever
_REGISTERED: dict = {}        # function -> the fingerprint it stands for in _FUNCTIONS (emptied with it)
_FUNCTIONS = Cache("runtime.functions.FUNCTIONS", _LIMIT,  # fingerprint -> the first function seen with it
                   on_evict=_REGISTERED.clear)
_WRAPPERS: dict = {}          # (builtin, arity) -> generated function
_LOCK = threading.Lock()
_MISSING = object()


def _typed(v):
    """``v`` with its type, recursively through tuples: a hashable key that tells ``1`` from
    ``1.0`` and ``True``."""
    if type(v) is tuple:
        return (tuple, tuple(_typed(e) for e in v))
    return (type(v), v)


def fingerprint(f):
    """A hashable key of what decides the code numba makes of plain function ``f`` (code,
    closure values, defaults, the values of the globals it names), or None when ``f`` is not a
    plain function or one of those values is unhashable (an array, a list).

    >>> a, b = [fingerprint(lambda v: v + 1) for _ in range(2)]
    >>> a == b, fingerprint(len)
    (True, None)
    """
    if type(f) is not types.FunctionType:
        return None
    code = f.__code__
    try:
        cells = tuple(_typed(c.cell_contents) for c in (f.__closure__ or ()))
    except ValueError:  # an empty cell: a closure variable assigned after the function was made
        return None
    g = f.__globals__
    names = tuple((n, _typed(g.get(n, _MISSING))) for n in code.co_names if n in g)
    kwd = tuple(sorted((k, _typed(v)) for k, v in (f.__kwdefaults__ or {}).items()))
    key = (code, cells, _typed(f.__defaults__ or ()), kwd, names)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def canonical(f):
    """The function the caches should see for ``f``: the first plain function seen with
    ``f``'s fingerprint (so an equal lambda written anew hits every cache), ``f`` itself for
    anything else (builtins, operators, callables whose fingerprint is unhashable).

    A function whose global was rebound since it was first seen gets a fresh twin for its new
    fingerprint (same code and globals, another object), so that no cache keyed by the old
    object serves kernels compiled with the old value.

    >>> def make(c):
    ...     return lambda v: v + c
    >>> canonical(make(1)) is canonical(make(1)), canonical(make(1)) is canonical(make(2))
    (True, False)
    >>> canonical(make(1)) is canonical(make(1.0))   # same value, another type: another kernel
    False
    """
    key = fingerprint(f)
    if key is None:
        return f
    first = _FUNCTIONS.get(key)
    if first is not None and (first is f or fingerprint(first) == key):
        return first
    with _LOCK:
        old = _REGISTERED.get(f)
        if old is not None and old != key:   # f's globals changed since f stood for ``old``
            twin = types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
            twin.__kwdefaults__, twin.__qualname__ = f.__kwdefaults__, f.__qualname__
            f = twin
        _FUNCTIONS[key] = f
        _REGISTERED[f] = key
        return f


def is_builtin(f) -> bool:
    """Whether ``f`` is a builtin function (``max``, ``abs``, ``math.exp``, ``operator.mul``).

    >>> import operator
    >>> is_builtin(max), is_builtin(operator.add), is_builtin(lambda a: a)
    (True, True, False)
    """
    return isinstance(f, types.BuiltinFunctionType)


def compilable(f, nargs: int):
    """``f`` as a function numba can compile as a device function taking ``nargs`` values:
    a builtin is wrapped in a generated plain function calling it (one per builtin and
    arity), a plain function is :func:`canonical`, anything else is returned unchanged.

    >>> import operator
    >>> compilable(operator.mul, 2)(6, 7), compilable(abs, 1)(-3)
    (42, 3)
    """
    if not is_builtin(f):
        return canonical(f)
    key = (f, int(nargs))
    w = _WRAPPERS.get(key)
    if w is not None:
        return w
    args = ", ".join(f"a{i}" for i in range(int(nargs)))
    name = getattr(f, "__name__", "builtin")
    src = f"def {name}_call({args}):\n    return _builtin({args})\n"
    g = {"_builtin": f}
    exec(compile(src, f"<forge_array {name} wrapper>", "exec"), g)
    w = g[f"{name}_call"]
    w.__qualname__ = name
    with _LOCK:
        return _WRAPPERS.setdefault(key, w)
