"""Which memory forge_array alone can write: the rule that lets element-wise results be deferred.

A deferred step (:mod:`forge_array.fusion.auto`) reads its operands later than eager code
would, so it may only read memory that nothing but forge_array can write in between.  Memory
is *shared* from the moment another library can reach it: a zero-copy import (``asarray``
of a NumPy or CuPy array or of a CUDA-array-interface object, ``from_dlpack``) or an export
(``__array__``, ``__cuda_array_interface__``, ``__dlpack__``).  Sharing is recorded on the
root array of the memory (the one a view's ``base`` chain ends at), so every view of it is
shared too; the record lives as long as that root.  Writes through forge_array itself
(``x[k] = v``, in-place operators) settle what is deferred first (``Array.BEFORE_WRITE``).

>>> import numpy as np
>>> a = np.zeros(4)
>>> is_private(a[1:])
True
>>> share(a)
>>> is_private(a[1:])
False
"""

from __future__ import annotations

import threading
import weakref

__all__ = ["share", "is_private", "root", "note_write", "writes", "BEFORE_SHARE"]

#: Called with no arguments before memory becomes shared by an export:
#: :mod:`forge_array.fusion.auto` computes what is deferred first, while the memory it
#: reads still holds the values it had.
BEFORE_SHARE = [None]

# id(root array) -> weak reference to it (the entry leaves with the root)
_SHARED: dict = {}
_LOCK = threading.Lock()
# writes into memory through forge_array so far (see note_write)
_WRITES = 0


def note_write() -> None:
    """Count a write into existing memory through forge_array (``x[k] = v``, an in-place
    operator, an ``out=`` argument): what is kept about private memory's values (a copy of it
    on another device) holds while :func:`writes` has not changed."""
    global _WRITES
    _WRITES += 1


def writes() -> int:
    """The number of writes :func:`note_write` has counted.

    >>> before = writes(); note_write(); writes() - before
    1
    """
    return _WRITES


def root(a):
    """The array that owns the memory of backend array ``a`` (``a`` itself when not a view)."""
    b = getattr(a, "base", None)
    while b is not None and hasattr(b, "dtype") and hasattr(b, "shape"):
        a = b
        b = getattr(a, "base", None)
    return a


def _forget(key):
    def drop(_ref):
        with _LOCK:
            _SHARED.pop(key, None)
    return drop


def share(a, settle=True):
    """Record that another library can reach the memory of backend array ``a``.  With
    ``settle`` (an export), :data:`BEFORE_SHARE` runs first."""
    if settle and BEFORE_SHARE[0] is not None:
        BEFORE_SHARE[0]()
    r = root(a)
    key = id(r)
    with _LOCK:
        if key in _SHARED and _SHARED[key]() is r:
            return
        try:
            _SHARED[key] = weakref.ref(r, _forget(key))
        except TypeError:  # an array type without weak references: shared for good
            _SHARED[key] = lambda r=r: r


def is_private(a):
    """Whether only forge_array can write the memory of backend array ``a``."""
    if not _SHARED:
        return True
    r = root(a)
    ref = _SHARED.get(id(r))
    return ref is None or ref() is not r
