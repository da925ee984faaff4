"""A built kernel found by its cache key, without numba: in this process's memory, in the disk
cache (:mod:`.kernel_files`) or in the shipped archive (:mod:`.prebuilt`: the machine code for
this GPU where the archive has it and the driver loads it, else the PTX of the newest target
the device runs).  The compiler (:mod:`.compiler`) and the numba-free kernel factories
(:mod:`.factories`) look kernels up here before building one.

>>> from_caches("0" * 64, "k", ()) is None   # no such kernel anywhere
True
"""

from __future__ import annotations

from . import backend, kernel_files, prebuilt
from .counters import STATS
from .flags import FLAGS
from .launching import Kernel

__all__ = ["BY_KEY", "from_caches", "from_prebuilt", "find"]

#: the kernels of this process by cache key
BY_KEY: dict = {}


def _load(kern: Kernel, key: str, entry: str) -> bool:
    """Load the machine code of the kernel file ``key`` (no PTX) on the current device into
    ``kern``; False where the cubin is gone or the driver refuses it."""
    fn = kernel_files.load_function(key, entry)
    if fn is None:
        return False
    _adopt(kern, fn)
    return True


def _adopt(kern: Kernel, fn) -> None:
    """Give kernel ``kern`` its function ``fn``, loaded on the current device."""
    kern._fns[backend.cupy().cuda.runtime.getDevice()] = fn


def from_caches(key: str, name: str, argtypes) -> Kernel | None:
    """The kernel of cache key ``key`` from memory or the disk cache, or None.  A kernel file
    of machine code alone whose cubin is gone or refused by this driver is removed."""
    k = BY_KEY.get(key)
    if k is not None:
        return k
    cached = kernel_files.read_cached(kernel_files.cache_path(key))
    if cached is None:
        return None
    entry, ptx = cached
    k = Kernel(name, argtypes, key=key, entry=entry, ptx=ptx)
    if not ptx and not _load(k, key, entry):
        kernel_files.remove(key)
        return None
    STATS["disk_hits"] += 1
    BY_KEY[key] = k
    return k


def from_prebuilt(key: str, name: str, argtypes, key_for) -> Kernel | None:
    """The shipped kernel of cache key ``key`` (``key_for(target)``: the key the same
    specialisation has for an older compile target, or None), written into the disk cache
    under ``key``; None where there is none or the ``prebuilt`` flag is off (``"exact"``: the
    kernel made for the compile target itself only, never an older target's PTX: what a
    prebuild reuses)."""
    mode = FLAGS["prebuilt"].cell[0]
    if not mode:
        return None
    cc = backend.target_cc()
    targets = [cc] if mode == "exact" else sorted((t for t in prebuilt.TARGETS if t <= cc), reverse=True)
    device_cc = tuple(backend.device_info()["cc"])
    for target in targets:
        tk = key if target == cc else key_for(target)
        if tk is None:
            continue
        if target in prebuilt.CUBIN_TARGETS and prebuilt.runs_cubin(target, device_cc):
            machine = prebuilt.lookup_cubin(tk)
            if machine is not None:
                entry, cubin = machine
                kernel_files.write_cubin(key, cubin)
                k = Kernel(name, argtypes, key=key, entry=entry, ptx="")
                if _load(k, key, entry):   # the driver takes it
                    kernel_files.write_cached(kernel_files.cache_path(key), entry, "")
                    BY_KEY[key] = k
                    return k
        found = prebuilt.lookup(tk)
        if found is not None:
            entry, ptx = found
            kernel_files.write_cached(kernel_files.cache_path(key), entry, ptx)
            k = BY_KEY[key] = Kernel(name, argtypes, key=key, entry=entry, ptx=ptx)
            return k
    return None


def find(key: str, name: str, argtypes, key_for) -> Kernel | None:
    """:func:`from_caches`, else :func:`from_prebuilt`."""
    return from_caches(key, name, argtypes) or from_prebuilt(key, name, argtypes, key_for)
