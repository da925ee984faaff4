"""numba's CPU compilations on disk, shared by every process of the machine.

The CPU device runs generic operators (a user's function) through loops compiled by numba
for the CPU, and every device types an operator by compiling it for the CPU
(:func:`.compiler.result_type`).  numba's own ``cache=True`` keys a function by its source
file and cannot serve functions built at run time (closures over the operator, loops
generated from source text), so this module keys them as the kernel cache does
(:mod:`.fingerprint`): the operator's bytecode, constants, closure values and referenced
globals, the loop's own source and constants, the argument types (numba adds them and the
CPU's name and features), numba's and llvmlite's versions.

- :func:`cached_njit` gives an ``njit`` dispatcher whose compiled specialisations are stored
  under ``CACHE_DIR/cpu/`` with numba's cache files (object code and type information) and
  loaded from there by a later process, without typing or LLVM.
- :func:`result_type_cached` stores the numba type an operator returns for given argument
  types (a pickle of the type).

A function that cannot be fingerprinted (its closure holds an object whose ``repr`` names an
address) is compiled as before, in every process.  ``STATS["cpu_compiled"]`` counts the
specialisations compiled here, ``STATS["cpu_disk_hits"]`` those loaded from the disk.

>>> import numba
>>> from forge_array.runtime import cpu_cache
>>> f = cpu_cache.cached_njit(lambda a, b: a + b, ("doc",))
>>> isinstance(f, numba.core.registry.CPUDispatcher)
True
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
import warnings

import numba
from numba.core import caching

from . import config, kernel_files
from .counters import STATS
from .fingerprint import Unfingerprintable, digest

try:
    import llvmlite

    _LLVMLITE_VERSION = llvmlite.__version__
except Exception:  # pragma: no cover
    _LLVMLITE_VERSION = "unknown"

_FORMAT = "forge_array-cpu-v1"


def cache_dir() -> str:
    """Directory of the CPU compilations (under the kernel cache's directory)."""
    return os.path.join(config.CACHE_DIR, "cpu")


def key_of(*parts) -> str | None:
    """The disk key of a compilation described by ``parts`` (functions, constants, source
    text), or None when one of them cannot be fingerprinted."""
    try:
        return digest(_FORMAT, numba.__version__, _LLVMLITE_VERSION, sys.version_info[:2], *parts)
    except (Unfingerprintable, RecursionError):
        return None


_FILE_HASHES: dict = {}


def file_hash(path: str) -> str:
    """SHA-256 of a source file's bytes (for loops whose code is a module's function)."""
    h = _FILE_HASHES.get(path)
    if h is None:
        with open(path, "rb") as f:
            h = _FILE_HASHES[path] = hashlib.sha256(f.read()).hexdigest()
    return h


# ----------------------------------------------------------------------------- numba's cache


class _Locator(caching._CacheLocator):
    """Files of one key under ``CACHE_DIR/cpu/<key[:2]>``; the key is the source stamp."""

    def __init__(self, key):
        self._key = key
        self._cache_path = os.path.join(cache_dir(), key[:2])
        self._py_file = "<forge_array cpu>"

    def ensure_cache_path(self):
        os.makedirs(self._cache_path, exist_ok=True)

    def get_cache_path(self):
        return self._cache_path

    def get_source_stamp(self):
        return self._key

    def get_disambiguator(self):
        return ""

    @classmethod
    def from_function(cls, py_func, py_file):  # pragma: no cover - never searched for
        return None


class _Impl(caching.CompileResultCacheImpl):
    def __init__(self, py_func, key):  # noqa: D107  (no locator search: the key places the files)
        self._lineno = py_func.__code__.co_firstlineno
        self._locator = _Locator(key)
        abi = getattr(sys, "abiflags", "")
        self._filename_base = f"{key}.py{sys.version_info[0]}{sys.version_info[1]}{abi}"

    def check_cachable(self, cres):
        # a function holding dynamic globals (a large global array, ctypes pointers) stays
        # in memory only, without numba's warning
        return not any(not x.can_cache for x in cres.lifted) and not cres.library.has_dynamic_globals


class _Cache(caching.Cache):
    """numba's per-function cache, placed and keyed by our fingerprint."""

    _impl_class = _Impl

    def __init__(self, py_func, key):  # noqa: D107
        self._name = repr(py_func)
        self._py_func = py_func
        self._key = key
        self._impl = _Impl(py_func, key)
        self._cache_path = self._impl.locator.get_cache_path()
        self._cache_file = caching.IndexDataCacheFile(cache_path=self._cache_path,
                                                      filename_base=self._impl.filename_base,
                                                      source_stamp=key)
        self.enable()

    def _index_key(self, sig, codegen):
        return (sig, codegen.magic_tuple(), self._key)

    def load_overload(self, sig, target_context):
        # numba's own load first refreshes the target (its lowering registries: a third of a
        # second in a fresh process), which a compiled function does not need; what it needs
        # are the symbols that registries add to LLVM's table: the runtime's (NRT) and the
        # hash secrets (numba.cpython.hashing).  A compilation refreshes the target itself.
        try:
            import numba.cpython.hashing  # noqa: F401, PLC0415
            from numba.core.runtime import rtsys  # noqa: PLC0415

            rtsys.initialize(target_context)
            cres = self._load_overload(sig, target_context)
        except Exception:  # a damaged or foreign file: compile (and overwrite it)
            cres = None
        if cres is not None:
            STATS["cpu_disk_hits"] += 1
        return cres

    def save_overload(self, sig, data):
        STATS["cpu_compiled"] += 1
        try:
            super().save_overload(sig, data)
        except OSError as exc:
            kernel_files.warn_unwritable(exc)
        except Exception:  # a damaged index: start it afresh
            try:
                os.unlink(self._cache_file._index_path)
                super().save_overload(sig, data)
            except Exception:  # noqa: BLE001  (the compiled function works all the same)
                pass


def attach(dispatcher, *parts):
    """Give numba dispatcher ``dispatcher`` (``numba.njit`` of a function) the disk cache
    keyed by ``parts``; returns it.  ``parts`` must name everything its code depends on
    beyond the argument types: the operators, constants, the loop's source.  Without a key
    (``parts`` cannot be fingerprinted) the dispatcher compiles in every process."""
    key = key_of(*parts)
    if key is None:
        STATS["cpu_uncached"] += 1
        return dispatcher
    try:
        dispatcher._cache = _Cache(dispatcher.py_func, key)
    except Exception as exc:  # pragma: no cover - another numba's cache machinery
        _warn_once(f"forge_array: numba's CPU compilations are not cached on disk ({exc})")
    return dispatcher


def cached_njit(py_func, parts):
    """``numba.njit(py_func)`` with the disk cache keyed by ``parts`` (see :func:`attach`)."""
    return attach(numba.njit(py_func), *parts)


_WARNED: list = []


def _warn_once(msg):
    if not _WARNED:
        _WARNED.append(True)
        warnings.warn(msg, RuntimeWarning, stacklevel=3)


# ----------------------------------------------------------------------------- result types


_TYPE_ONLY: list = []


def _type_only_pipeline():
    """numba's nopython pipeline up to its type inference: what a type costs without
    lowering and LLVM (about half an operator's CPU compilation)."""
    if _TYPE_ONLY:
        return _TYPE_ONLY[0]
    from numba.core import compiler  # noqa: PLC0415
    from numba.core.compiler_machinery import FunctionPass, register_pass  # noqa: PLC0415
    from numba.core.typed_passes import NopythonTypeInference  # noqa: PLC0415

    @register_pass(mutates_CFG=False, analysis_only=True)
    class ForgeArrayStopAfterTyping(FunctionPass):
        _name = "forge_array_stop_after_typing"

        def __init__(self):
            FunctionPass.__init__(self)

        def run_pass(self, state):
            state.cr = state.return_type
            return False

    class TypeOnly(compiler.CompilerBase):
        def define_pipelines(self):
            pm = compiler.DefaultPassBuilder.define_nopython_pipeline(self.state)
            last = [cls for cls, _ in pm.passes].index(NopythonTypeInference)
            pm.passes = pm.passes[: last + 1]
            pm.add_pass(ForgeArrayStopAfterTyping, "stop after type inference")
            pm.finalize()
            return [pm]

    _TYPE_ONLY.append(TypeOnly)
    return TypeOnly


def infer_return_type(py_func, argtypes):
    """The numba type plain function ``py_func`` returns for numba argument types
    ``argtypes`` on the CPU target (numba's errors propagate).

    >>> from numba import types
    >>> str(infer_return_type(lambda a, b: (a + b, a * 2), (types.int32, types.float32)))
    'Tuple(float64, int64)'
    """
    from numba.core import compiler  # noqa: PLC0415
    from numba.core.compiler_lock import global_compiler_lock  # noqa: PLC0415
    from numba.core.registry import cpu_target  # noqa: PLC0415

    with global_compiler_lock:
        return compiler.compile_extra(cpu_target.typing_context, cpu_target.target_context, py_func,
                                      tuple(argtypes), None, compiler.Flags(), {},
                                      pipeline_class=_type_only_pipeline())


def _type_path(key):
    return os.path.join(cache_dir(), key[:2], key + ".type")


def result_type_cached(fn, argtypes, compute):
    """``compute()`` (the numba type ``fn`` returns for ``argtypes``), stored on disk under
    the fingerprint of ``fn`` and the argument types and read back by later processes."""
    key = key_of("result-type", fn, tuple(str(t) for t in argtypes))
    if key is None:
        return compute()
    path = _type_path(key)
    try:
        with open(path, "rb") as f:
            data = f.read()
        digest_hex, _, body = data.partition(b"\n")
        if hashlib.sha256(body).hexdigest().encode() == digest_hex:
            STATS["cpu_disk_hits"] += 1
            return pickle.loads(body)
    except FileNotFoundError:
        pass
    except Exception:  # damaged: compute and overwrite
        pass
    ret = compute()
    STATS["cpu_compiled"] += 1
    try:
        body = pickle.dumps(ret, protocol=4)
    except Exception:
        return ret
    kernel_files.write_atomic_bytes(path, hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    return ret
