"""An array module's own functions and ``ndarray`` methods, as they were before
``forge_array.cupy.patch()`` replaced any of them: every fallback inside forge_array calls
through here, so a patched ``cupy.sum`` never calls itself back.

:func:`capture` records the functions named in :data:`FUNCTIONS` and the methods named in
:data:`METHODS` of a module (``cupy``, or ``numpy`` in the simulator) the first time it
meets the module; the drop-in calls it before it patches anything, and
:func:`namespace` calls it when it builds a module's pristine namespace, so whichever
comes first records the originals. :func:`namespace` gives a module-like object whose
attributes are the module's own, except that the patchable names resolve to the recorded
originals: the primitives do all their backend work (``xp.empty``, ``xp.sum`` as a
fallback, ...) on it.

An original may itself call a patched name: CuPy's ``cupy.sum`` is ``a.sum(...)``, the
method, which ``patch(methods=True)`` replaces. So every original is handed out wrapped:
while it runs, :func:`in_original` is true in that thread, and the drop-in's functions and
methods then pass straight to the originals.

>>> import numpy as np, types
>>> fake = types.ModuleType("fake"); fake.sum = np.sum; fake.empty = np.empty
>>> fake.ndarray = np.ndarray
>>> ns = namespace(fake)
>>> fake.sum = lambda *a, **k: "patched"
>>> ns.sum.__wrapped__ is np.sum, ns.empty is np.empty, int(function(fake, "sum")([1, 2]))
(True, True, 3)
"""

from __future__ import annotations

import threading

__all__ = ["FUNCTIONS", "METHODS", "capture", "function", "guarded", "in_original", "method",
           "namespace"]

#: module functions ``forge_array.cupy.patch()`` may replace (``amax``/``amin`` are
#: ``max``/``min``)
FUNCTIONS = ("sum", "prod", "max", "amax", "min", "amin", "mean", "var", "std", "argmax",
             "argmin", "any", "all", "cumsum", "cumprod", "nansum", "nanmax", "nanmin", "dot",
             "matmul", "vdot", "inner")

#: ``ndarray`` methods ``forge_array.cupy.patch()`` may replace
METHODS = ("sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin", "any",
           "all", "cumsum", "cumprod", "dot")

_MISSING = object()
_LOCK = threading.Lock()
#: id(module) -> (module, {name: function}, {name: method})
_RECORDS: dict = {}
#: id(module) -> its pristine namespace
_NAMESPACES: dict = {}
#: how deep this thread is inside original (unpatched) calls
_TLS = threading.local()
#: id(original) -> (original, its guarded wrapper)
_GUARDED: dict = {}


def in_original():
    """Whether this thread is running inside an original function or method handed out
    here (the drop-in then passes every call straight to the originals).

    >>> in_original()
    False
    """
    return getattr(_TLS, "depth", 0) > 0


def guarded(f):
    """``f`` wrapped so that :func:`in_original` is true while it runs (one wrapper per
    ``f``; the wrapper's ``__wrapped__`` is ``f``).

    >>> import numpy as np
    >>> g = guarded(np.sum); int(g([1, 2])), g is guarded(np.sum), g.__wrapped__ is np.sum
    (3, True, True)
    """
    hit = _GUARDED.get(id(f))
    if hit is not None and hit[0] is f:
        return hit[1]

    def original(*args, **kwargs):
        tls = _TLS
        tls.depth = getattr(tls, "depth", 0) + 1
        try:
            return f(*args, **kwargs)
        finally:
            tls.depth -= 1

    original.__wrapped__ = f
    original.__name__ = getattr(f, "__name__", "original")
    original.__doc__ = getattr(f, "__doc__", None)
    _GUARDED[id(f)] = (f, original)
    return original


def capture(module):
    """Record ``module``'s functions of :data:`FUNCTIONS` and its ``ndarray``'s methods of
    :data:`METHODS` unless recorded already (the first record wins: later calls, after a
    patch, change nothing). Returns ``(functions, methods)``, two dicts.

    >>> import numpy as np
    >>> funcs, meths = capture(np)
    >>> funcs["sum"] is np.sum, meths["sum"] is np.ndarray.sum
    (True, True)
    """
    rec = _RECORDS.get(id(module))
    if rec is None or rec[0] is not module:
        with _LOCK:
            rec = _RECORDS.get(id(module))
            if rec is None or rec[0] is not module:   # (an id can be reused by a new object)
                funcs = {n: getattr(module, n) for n in FUNCTIONS if hasattr(module, n)}
                cls = getattr(module, "ndarray", None)
                meths = {}
                if cls is not None:
                    for n in METHODS:
                        m = getattr(cls, n, _MISSING)
                        if m is not _MISSING:
                            meths[n] = m
                rec = _RECORDS[id(module)] = (module, funcs, meths)
    return rec[1], rec[2]


def function(module, name):
    """``module``'s own function ``name`` as it was before any patch (its current one for a
    name patch() never replaces), :func:`guarded`.

    >>> import numpy as np
    >>> function(np, "cumsum").__wrapped__ is np.cumsum
    True
    """
    f = capture(module)[0].get(name)
    return guarded(f) if f is not None else getattr(module, name)


def method(module, name):
    """``module.ndarray``'s own method ``name`` (unbound) as it was before any patch,
    :func:`guarded`.

    >>> import numpy as np
    >>> method(np, "max").__wrapped__ is np.ndarray.max
    True
    """
    m = capture(module)[1].get(name)
    return guarded(m) if m is not None else getattr(module.ndarray, name)


class _Pristine:
    """``module``'s namespace with the patchable names bound to the recorded originals.
    Attributes are looked up once and kept, so an access costs what a module's does."""

    def __init__(self, module):
        funcs, _ = capture(module)
        self.__dict__.update({n: guarded(f) for n, f in funcs.items()})
        self.__dict__["__wrapped__"] = module
        self.__dict__["__name__"] = getattr(module, "__name__", "?")

    def __getattr__(self, name):
        value = getattr(self.__dict__["__wrapped__"], name)
        if not name.startswith("__"):
            self.__dict__[name] = value
        return value

    def __repr__(self):
        return f"<pristine namespace of {self.__name__!r}>"


def namespace(module):
    """The pristine namespace of ``module`` (one object per module): its attributes are the
    module's, with the names of :data:`FUNCTIONS` as they were before any patch.

    >>> import numpy as np
    >>> namespace(np).sum.__wrapped__ is np.sum and namespace(np) is namespace(np)
    True
    """
    ns = _NAMESPACES.get(id(module))
    if ns is None or ns.__wrapped__ is not module:
        ns = _Pristine(module)
        with _LOCK:
            old = _NAMESPACES.get(id(module))
            if old is not None and old.__wrapped__ is module:
                return old
            _NAMESPACES[id(module)] = ns
    return ns
