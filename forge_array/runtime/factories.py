"""Kernel factories by name, and the kernels of the standard operations found without numba.

A dispatch tier names the factory of a kernel with :func:`factory` (its module and function,
imported only where the kernel must be built) and its argument types with
:mod:`.param_types`, and asks :func:`kernel` for the specialisation.  The cache key of a
specialisation (:func:`.compiler._key`) digests the factory's *fingerprint* (its code and
everything it refers to, :mod:`.fingerprint`), which needs the factory's module, and so
numba.  The fingerprints of the package's factories are therefore kept in a table, valid per
factory while the hash of its kernel sources (:func:`.kernel_sources.module_hash`), the
Python version and numba's versions stay those it was made with: the prebuild ships one
(``prebuilt/factories.json``), and a process that loaded a factory writes its fingerprint
into the disk cache for later processes.  With a valid fingerprint the key is computed here
without numba, and the kernel is taken from this process's memory, the disk cache or the
shipped archive (:mod:`.prebuilt`: the machine code for this GPU where the archive has it);
only where none holds it is the factory imported and the kernel compiled
(:func:`.compiler.compile_kernel`).  Inside :func:`shipped_only` a kernel that is not found
that way raises :class:`.background.Pending` instead (the routing's first calls while
numba loads).

>>> f = factory("forge_array.kernels.reduce", "make_reduce_kernel")
>>> f
<factory forge_array.kernels.reduce.make_reduce_kernel>
>>> f is factory("forge_array.kernels.reduce", "make_reduce_kernel")
True
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import sys
import threading
import zlib

from . import backend, background, config, kernel_files, kernel_lookup, kernel_sources, lazy, prebuilt
from .caches import Cache
from .counters import STATS
from .fingerprint import Unfingerprintable, Verbatim, digest, fingerprint
from .launching import Kernel

__all__ = ["Factory", "factory", "known", "kernel", "key", "prepare", "shipped_only", "table_entries", "write_table",
           "TABLE"]

#: the shipped table of factory fingerprints (made by ``python -m forge_array prebuild``)
TABLE = os.path.join(os.path.dirname(prebuilt.ARCHIVE), "factories.json.z")
_FORMAT = 1
_KEY_TAG = "forge_array-kernel-v2"   # the first part of every kernel key (:func:`.compiler._key`)

_LOCK = threading.Lock()
_FACTORIES: dict = {}
_TABLES: dict = {}      # "shipped" / "disk" -> {name: (module hash, text)}
_WRITTEN: set = set()   # factories whose fingerprint this process wrote to the disk cache
_MEMORY = Cache("runtime.factories.MEMORY")
_TLS = threading.local()


class Factory:
    """A kernel factory named by its module and function (see :func:`factory`); ``fn()`` is
    the function, its module imported at the first call."""

    __slots__ = ("module", "name", "qualname", "_fn")

    def __init__(self, module: str, name: str):
        self.module = module
        self.name = name
        self.qualname = f"{module}.{name}"
        self._fn = None

    def fn(self):
        f = self._fn
        if f is None:
            f = self._fn = getattr(importlib.import_module(self.module), self.name)
        return f

    @property
    def __name__(self):   # noqa: PLW3201  (named as the function it stands for)
        return self.name

    def __repr__(self):
        return f"<factory {self.qualname}>"

    def __reduce__(self):
        return factory, (self.module, self.name)


def known() -> list:
    """The factories named so far in this process (by the dispatch modules imported)."""
    return list(_FACTORIES.values())


def factory(module: str, name: str) -> Factory:
    """The factory ``name`` of kernel module ``module`` (one object per factory)."""
    f = _FACTORIES.get((module, name))
    if f is None:
        with _LOCK:
            f = _FACTORIES.setdefault((module, name), Factory(module, name))
    return f


# --------------------------------------------------------------------------- versions


def _dist_version(package: str, dist: str):
    """The version of the installed distribution ``dist`` that provides ``package``, from
    its ``.dist-info`` folder's name beside the package (no import of it; ``importlib.metadata``
    costs tens of milliseconds at its first use), or None where it cannot tell."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.dirname(os.path.abspath(list(spec.submodule_search_locations)[0]))
    prefix = dist.replace("-", "_").lower() + "-"
    found = []
    try:
        with os.scandir(folder) as entries:
            for e in entries:
                n = e.name.lower()
                if n.startswith(prefix) and n.endswith(".dist-info"):
                    found.append(e.name[len(prefix):-len(".dist-info")])
    except OSError:
        return None
    return found[0] if len(found) == 1 else None


_VERSIONS: list = []


def versions():
    """(Python major.minor, numba's version, numba-cuda's version) of this install; a version
    that cannot be told is None (then no fingerprint is valid)."""
    if not _VERSIONS:
        # (numba's own version where it is imported; another thread may be importing it)
        numba_v = getattr(sys.modules.get("numba"), "__version__", None) or _dist_version("numba", "numba")
        _VERSIONS.append(("%d.%d" % sys.version_info[:2], numba_v, _dist_version("numba_cuda", "numba-cuda")))
    return _VERSIONS[0]


# --------------------------------------------------------------------------- the table


def _environment() -> str:
    return "-".join(str(v) for v in versions())


def _read_table(path: str, compressed: bool) -> dict:
    """{qualname: (module hash, fingerprint)} of a table file made for this environment;
    {} where it is missing, damaged or made for another Python or numba."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if compressed:
            data = zlib.decompress(data)
        doc = json.loads(data)
    except (OSError, ValueError, zlib.error):
        return {}
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT or doc.get("environment") != _environment():
        return {}
    entries = doc.get("factories")
    if not isinstance(entries, dict):
        return {}
    return {k: (v[0], v[1]) for k, v in entries.items() if isinstance(v, list) and len(v) == 2}


def _disk_path() -> str:
    return os.path.join(config.CACHE_DIR, "factories", _environment() + ".json")


def _table(which: str) -> dict:
    t = _TABLES.get(which)
    if t is None:
        t = _read_table(TABLE, True) if which == "shipped" else _read_table(_disk_path(), False)
        _TABLES[which] = t
    return t


def _module_hash(module: str):
    path = kernel_sources.module_file(module)
    return None if path is None else kernel_sources.module_hash(path)


def _fingerprint_of(f: Factory):
    """The factory's fingerprint from a table whose entry is valid for this install, or None."""
    if None in versions():
        return None
    h = _module_hash(f.module)
    if h is None:
        return None
    for which in ("shipped", "disk"):
        ent = _table(which).get(f.qualname)
        if ent is not None and ent[0] == h:
            return ent[1]
    return None


def prepare() -> None:
    """Read what finding kernels without numba needs (the versions, the fingerprint tables,
    the kernel sources' hashes, the shipped archive's index), so that the first call that
    looks finds it read (the routing's load of the kernel layer starts with this)."""
    if None in versions():
        return
    for which in ("shipped", "disk"):
        for name in _table(which):
            _module_hash(name.rpartition(".")[0])
    prebuilt.open_index()


def table_entries(factories) -> dict:
    """{qualname: [module hash, fingerprint]} of ``factories`` (imported here): what a table
    holds."""
    out = {}
    for f in factories:
        h = _module_hash(f.module)
        if h is not None:
            out[f.qualname] = [h, fingerprint(f.fn())]
    return out


def write_table(path: str, entries: dict, compressed: bool = True) -> None:
    """Write a table of ``entries`` (see :func:`table_entries`) for this environment to ``path``."""
    data = json.dumps({"format": _FORMAT, "environment": _environment(), "factories": entries},
                      sort_keys=True).encode()
    kernel_files.write_atomic_bytes(path, zlib.compress(data, 9) if compressed else data)


def _note(f: Factory) -> None:
    """After ``f`` was imported: put its fingerprint into the disk cache's table where no
    valid one is known, for later processes (once per factory and process)."""
    if f.qualname in _WRITTEN or config.SIMULATE or None in versions():
        return
    _WRITTEN.add(f.qualname)
    if _fingerprint_of(f) is not None:
        return
    try:
        entry = table_entries([f])
    except Unfingerprintable:
        return
    with _LOCK:
        disk = dict(_read_table(_disk_path(), False))
        disk.update({k: tuple(v) for k, v in entry.items()})
        try:
            write_table(_disk_path(), {k: list(v) for k, v in disk.items()}, compressed=False)
        except OSError:
            return
        _TABLES["disk"] = disk


# --------------------------------------------------------------------------- keys and kernels


def key(f: Factory, fargs: tuple, argtypes: tuple, launch_bounds, cc):
    """The cache key of a specialisation (the same as :func:`.compiler._key`'s), computed
    without the factory's module; None without a valid fingerprint or where the constants
    cannot be fingerprinted."""
    text = _fingerprint_of(f)
    if text is None:
        return None
    _, numba_v, numba_cuda_v = versions()
    try:
        return digest(_KEY_TAG, _module_hash(f.module), Verbatim(text), fargs, str(tuple(argtypes)),
                      repr(launch_bounds), numba_v, numba_cuda_v, cc)
    except Unfingerprintable:
        return None


@contextlib.contextmanager
def shipped_only():
    """Within: :func:`kernel` takes kernels from the caches and the shipped archive alone, and
    raises :class:`.background.Pending` for one it would have to build; so does the import
    of a kernel module, of the compiler or of numba through a stand-in (:mod:`.lazy`), so
    numba stays unloaded in this thread."""
    prev = getattr(_TLS, "shipped_only", False)
    _TLS.shipped_only = True
    try:
        yield
    finally:
        _TLS.shipped_only = prev


#: modules whose import needs numba (the kernel modules' numba-free specifications aside)
_NEEDS_NUMBA = ("numba", "forge_array.kernels.", "forge_array.runtime.compiler", "forge_array.runtime.kernel_types",
                "forge_array.runtime.linking", "forge_array.runtime.cpu_cache")
_NUMBA_FREE = ("forge_array.kernels.reduce_spec", "forge_array.kernels.scan_spec")


def _guard(name: str) -> None:
    if getattr(_TLS, "shipped_only", False) and name not in _NUMBA_FREE and (
            name == "numba" or name.startswith(_NEEDS_NUMBA)):
        raise background.Pending(name)


lazy.GUARDS.append(_guard)


def _found(f: Factory, fargs, argtypes, launch_bounds):
    """The kernel from the disk cache or the shipped archive, found without numba, or None."""
    k = key(f, fargs, argtypes, launch_bounds, backend.target_cc())
    if k is None:
        return None
    return kernel_lookup.find(k, f.name, argtypes, lambda target: key(f, fargs, argtypes, launch_bounds, target))


def kernel(f: Factory, fargs: tuple, argtypes: tuple, launch_bounds=None) -> Kernel:
    """The kernel ``f.fn()(*fargs)`` for argument types ``argtypes`` (:mod:`.param_types`):
    from this process's memory, else found without numba (:func:`_found`), else compiled
    (:func:`.compiler.compile_kernel`, which queues the build and raises
    :class:`.background.Pending` where the call has a fallback); inside
    :func:`shipped_only`, Pending instead of a build."""
    mkey = (f, fargs, argtypes, launch_bounds)
    try:
        k = _MEMORY.get(mkey)
    except TypeError:   # an unhashable constant
        mkey, k = None, None
    if k is not None:
        return k
    if not config.SIMULATE:
        k = _found(f, fargs, argtypes, launch_bounds)
        if k is not None:
            STATS["numba_free_kernels"] += 1
            if mkey is not None:
                _MEMORY[mkey] = k
            return k
    if getattr(_TLS, "shipped_only", False):
        raise background.Pending(f.name)
    from . import compiler  # noqa: PLC0415  (numba loads here)
    from .param_types import to_numba  # noqa: PLC0415

    k = compiler.compile_kernel(f.fn(), fargs, to_numba(tuple(argtypes)), launch_bounds=launch_bounds)
    _note(f)
    if mkey is not None:
        _MEMORY[mkey] = k
    return k
