"""One dispatch for every namespace function: sharded arguments go to the registry.

:func:`install` replaces each public function of ``forge_array`` (and of
``forge_array.linalg`` / ``forge_array.fft``) with a thin wrapper that looks at its
arguments: with no :class:`ShardedArray` among them (nor a :class:`Sharding` as a value)
it calls the function as before; otherwise it calls the function's sharded implementation
from :data:`REGISTRY`, or raises ``NotImplementedError`` naming the function and the
gather to use when there is none. Sharded implementations call the original (unwrapped)
functions on each block: :func:`original`.

The wrappers are installed when ``forge_array.sharding`` is first imported (the first use
of ``forge_array.Sharding``), so a process that never shards keeps the functions as they
are. A function reached another way (a reference taken before that, or an internal path)
meets the sharded array's own refusal (see :mod:`._core`): the same error.
"""

from __future__ import annotations

import functools

from .. import _creation
from .._array import NAMESPACE
from ..fusion import build as _build
from ..fusion import trace as _trace
from . import _core
from ._core import ShardedArray, Sharding, refusal

__all__ = ["REGISTRY", "register", "original", "implementation", "install", "fused_call"]

#: public name (``"sum"``, ``"linalg.matmul"``) -> sharded implementation
REGISTRY: dict = {}
#: public name -> the namespace's own function
_ORIGINALS: dict = {}
_INSTALLED = [False]
#: namespace names that are not functions over arrays: never wrapped
_SKIP = {"Array", "Device", "fuse", "Sharding", "ShardedArray", "flags", "get_flags", "set_flags",
         "reset_flags", "set_strict", "is_strict"}


def register(*names):
    """Decorator: the sharded implementation of the namespace functions ``names``."""
    def deco(fn):
        for n in names:
            REGISTRY[n] = fn
        return fn
    return deco


def original(name: str):
    """The namespace's own (unwrapped) function ``name``."""
    fn = _ORIGINALS.get(name)
    if fn is None:
        fn = _lookup(name)
    return fn


def _lookup(name):
    mod = NAMESPACE[0]
    parts = name.split(".")
    for p in parts[:-1]:
        mod = getattr(mod, p)
    fn = getattr(mod, parts[-1])
    return getattr(fn, "__sharding_original__", fn)


def implementation(name: str, x=None):
    """The sharded implementation of ``name`` (NotImplementedError when there is none)."""
    impl = REGISTRY.get(name)
    if impl is None:
        raise refusal(name, x)
    return impl


def _first_sharded(args, kwargs):
    for a in args:
        t = type(a)
        if t is ShardedArray:
            return a
        if t is tuple or t is list:
            for b in a:
                if type(b) is ShardedArray:
                    return b
    for v in kwargs.values():
        t = type(v)
        if t is ShardedArray or t is Sharding:
            return v
    return None


def _wrap(name, fn):
    @functools.wraps(fn)
    def dispatch(*args, **kwargs):
        for a in args:
            t = type(a)
            if t is ShardedArray or t is tuple or t is list:
                break
        else:
            if not kwargs:
                return fn(*args)
            for v in kwargs.values():
                t = type(v)
                if t is ShardedArray or t is Sharding:
                    break
            else:
                return fn(*args, **kwargs)
        hit = _first_sharded(args, kwargs)
        if hit is None:
            return fn(*args, **kwargs)
        impl = REGISTRY.get(name)
        if impl is None:
            raise refusal(name, hit if type(hit) is ShardedArray else None)
        return impl(*args, **kwargs)

    dispatch.__sharding_original__ = fn
    return dispatch


def _wrap_module(mod, prefix):
    for name, fn in list(vars(mod).items()):
        if name.startswith("_") or name in _SKIP or isinstance(fn, type):
            continue
        if not callable(fn) or not getattr(fn, "__module__", "").startswith("forge_array"):
            continue
        if hasattr(fn, "__sharding_original__"):
            continue
        public = prefix + name
        _ORIGINALS[public] = fn
        setattr(mod, name, _wrap(public, fn))


def install():
    """Wrap the public functions of the namespace (once)."""
    if _INSTALLED[0]:
        return
    namespace = NAMESPACE[0]  # set by the package before any of its modules can import this one
    _wrap_module(namespace, "")
    _wrap_module(namespace.linalg, "linalg.")
    _wrap_module(namespace.fft, "fft.")
    _trace.SHARDED_CALL[0] = fused_call
    _creation.SHARDED_CREATE[0] = _resent
    _INSTALLED[0] = True


def _resent(name, args, kwargs):
    """A creation function reached below the dispatch with a Sharding as its device."""
    return implementation(name)(*args, **kwargs)


def fused_call(fn, args, kwargs):
    """A function of :func:`forge_array.fuse` called with sharded arrays: it runs as plain
    code with every fusable step deferred in this thread, so that each block's element-wise
    steps fuse into the reduction, scan or product that consumes them (one launch per
    device, partials combined as in plain code).  ``NotImplemented`` when no argument is
    sharded (the fused call proceeds as usual)."""
    if _first_sharded(args, kwargs) is None:
        return NotImplemented
    with _build.deferring_all():
        return fn(*args, **kwargs)

_core.METHODS["implementation"] = implementation
