"""Compile kernels for one specialisation and launch them lean.

On the GPU a kernel factory's function is compiled by numba to PTX with pointer and integer
arguments (no numba dispatcher on the launch path), cached on disk, loaded through
``cupy.RawModule`` and launched on CuPy's current stream. In the simulator the same
function runs through numba's CUDA simulator.

Example
-------
>>> import numpy as np
>>> from numba import cuda
>>> from forge_array.runtime import compile_kernel, launch, ptr_t, i64, buffer_of
>>> def make_scale(factor):
...     def scale(src, dst, n):
...         i = cuda.grid(1)
...         if i < n:
...             dst[i] = src[i] * factor
...     return scale
>>> k = compile_kernel(make_scale, (2.0,), (ptr_t("float64"), ptr_t("float64"), i64))  # doctest: +SKIP
>>> # launch(k, 1, 64, (buffer_of(x), buffer_of(y), x.size))   # x, y backend arrays
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time

import numba
import numpy as np

from . import backend, background, config, cpu_cache, kernel_files, kernel_lookup, kernel_sources, lazy, linking
from .caches import Cache
from .counters import STATS
from .fingerprint import Unfingerprintable, digest
from .flags import FLAGS
from .launching import SIM_LOCK, Kernel
from .pretend import pretend_device as _pretend_device

#: numba's CUDA target, imported at its first use: the CPU device types operators and runs
#: its loops with numba's CPU target alone
cuda = lazy.module("numba.cuda", __name__, "cuda")

try:
    from importlib.metadata import version as _pkg_version

    _NUMBA_CUDA_VERSION = _pkg_version("numba-cuda")
except Exception:  # pragma: no cover
    _NUMBA_CUDA_VERSION = "unknown"

_MEMORY: dict = {}
_BY_KEY = kernel_lookup.BY_KEY
_LOCK = threading.RLock()


def _callables(obj):
    if isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _callables(o)
    elif callable(obj) and not isinstance(obj, (type, np.dtype)):
        yield obj


def _describe_callables(factory_args) -> str:
    names = [getattr(getattr(c, "fn", c), "__qualname__", repr(c)) for c in _callables(factory_args)]
    return ", ".join(names)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def compile_error(exc: Exception, what: str) -> TypeError:
    """A TypeError naming ``what`` and carrying numba's message (without the terminal's
    colour codes numba adds to it)."""
    msg = _ANSI.sub("", str(exc)).strip()
    return TypeError(f"cannot compile {what} with numba: {msg}")


def compile_kernel(factory, factory_args: tuple, argtypes: tuple, *, launch_bounds=None) -> Kernel:
    """Compile (or fetch from the caches) the kernel ``factory(*factory_args)`` for the numba
    argument types ``argtypes``.

    ``factory_args`` are the compile-time constants of the specialisation: dtypes, ints,
    and callables (operators). Errors from numba become a TypeError naming the operators.
    """
    # numba types hash slowly; the kernel keeps its argtypes alive, so their ids are stable keys
    mkey = (factory, factory_args, tuple(map(id, argtypes)), launch_bounds)
    try:
        k = _MEMORY.get(mkey)
    except TypeError:  # unhashable factory argument
        mkey = None
        k = None
    if k is not None:
        return k
    if background.deferring() and mkey is not None:
        # a call with a fallback: take what the caches hold, queue a build, never wait for one
        job = ("kernel", mkey)
        if background.state(job) in ("queued", "failed"):   # the disk was read when it was queued
            raise background.Pending(getattr(factory, "__name__", "kernel"))
        k = _cached(factory, factory_args, tuple(argtypes), launch_bounds)
        if k is None:
            background.submit(job, lambda: compile_kernel(
                factory, factory_args, argtypes, launch_bounds=launch_bounds))
            _prestart_build_process()
            raise background.Pending(getattr(factory, "__name__", "kernel"))
        _MEMORY[mkey] = k
        return k
    if mkey is not None and background.on_worker_thread():
        # the background builds' thread: the build process compiles, this thread waits for it
        # without holding the interpreter (see build_process)
        _build_elsewhere(factory, factory_args, tuple(argtypes), launch_bounds)
    with _LOCK:
        k = _MEMORY.get(mkey) if mkey is not None else None  # built by another thread meanwhile
        if k is None:
            k = _compile(factory, factory_args, tuple(argtypes), launch_bounds)
            if mkey is not None:
                _MEMORY[mkey] = k
    return k


def _key(factory, factory_args, argtypes, launch_bounds, cc):
    """The disk cache's key of a specialisation, or None when it cannot be fingerprinted."""
    try:
        return digest(
            "forge_array-kernel-v2",
            kernel_sources.factory_hash(factory),
            factory,
            factory_args,
            str(argtypes),
            repr(launch_bounds),
            numba.__version__,
            _NUMBA_CUDA_VERSION,
            cc,
        )
    except Unfingerprintable:
        return None


def _cached(factory, factory_args, argtypes, launch_bounds):
    """The kernel from the in-memory or the disk cache, or None when it must be built (in
    the simulator, building is all there is)."""
    if config.SIMULATE:
        return None
    key = _key(factory, factory_args, argtypes, launch_bounds, backend.target_cc())
    return None if key is None else _built(factory, factory_args, argtypes, launch_bounds, key)


def _built(factory, factory_args, argtypes, launch_bounds, key):
    """The kernel of cache key ``key`` from memory, the disk cache or the package's prebuilt
    archive (:mod:`.kernel_lookup`), or None when it must be compiled."""
    name = getattr(factory, "__name__", "kernel")
    return _from_caches(key, name, argtypes) or _from_prebuilt(factory, factory_args, argtypes, launch_bounds,
                                                               name, key)


_from_caches = kernel_lookup.from_caches


def _from_prebuilt(factory, factory_args, argtypes, launch_bounds, name, key):
    """The shipped kernel of this specialisation (:func:`.kernel_lookup.from_prebuilt`)."""
    return kernel_lookup.from_prebuilt(
        key, name, argtypes, lambda target: _key(factory, factory_args, argtypes, launch_bounds, target))


#: The kernels built in this process: (name, operators, seconds), at most the last 1000.
COMPILES: list = []


def _compile(factory, factory_args, argtypes, launch_bounds) -> Kernel:
    name = getattr(factory, "__name__", "kernel")
    if config.SIMULATE:
        with SIM_LOCK:
            fn = factory(*factory_args)
            return Kernel(name, argtypes, sim=cuda.jit(fn))
    cc = backend.target_cc()
    key = _key(factory, factory_args, argtypes, launch_bounds, cc)
    if key is not None:
        k = _built(factory, factory_args, argtypes, launch_bounds, key)
        if k is not None:
            return k
    t0 = time.perf_counter()
    ptx = _build_ptx(factory, factory_args, argtypes, launch_bounds, cc,
                     cc != tuple(backend.device_info()["cc"]))
    seconds = time.perf_counter() - t0
    STATS["compile_seconds"] += seconds
    if len(COMPILES) >= 1000:
        del COMPILES[:500]
    COMPILES.append((name, _describe_callables(factory_args), seconds))
    entry = _entry_name(ptx)
    k = Kernel(name, argtypes, key=key, entry=entry, ptx=ptx)
    if key is not None:
        kernel_files.write_cached(kernel_files.cache_path(key), entry, ptx)
        _BY_KEY[key] = k
    return k


def _prestart_build_process() -> None:
    from . import build_process  # noqa: PLC0415

    build_process.prestart()


def _build_elsewhere(factory, factory_args, argtypes, launch_bounds) -> None:
    """Have the build process compile this specialisation into the disk cache (where its
    constants can be sent there); :func:`_compile` then finds the file.  Does nothing where
    the file is there already or the build process is not available (then :func:`_compile`
    builds in this thread)."""
    from . import build_process  # noqa: PLC0415

    if config.SIMULATE:
        build_process.build(factory, factory_args, argtypes, launch_bounds, None, None)
        return
    cc = backend.target_cc()
    key = _key(factory, factory_args, argtypes, launch_bounds, cc)
    if key is None or key in _BY_KEY or os.path.exists(kernel_files.cache_path(key)):
        return
    if _from_prebuilt(factory, factory_args, argtypes, launch_bounds, getattr(factory, "__name__", "kernel"), key):
        return
    build_process.build(factory, factory_args, argtypes, launch_bounds, cc, key)


def build_to_disk(factory, factory_args: tuple, argtypes: tuple, launch_bounds, cc, pretend=True):
    """Compile a specialisation for compute capability ``cc`` into the disk cache (the build
    process's work) and return its key; in the simulator, build the simulated kernel and
    return None.  With ``pretend`` numba is shown a device of capability ``cc`` (no GPU, no
    CUDA context); without, numba asks the driver."""
    name = getattr(factory, "__name__", "kernel")
    if config.SIMULATE:
        with SIM_LOCK:
            cuda.jit(factory(*factory_args))
        return None
    key = _key(factory, factory_args, argtypes, launch_bounds, cc)
    if key is None:
        raise ValueError(f"{name}: its constants cannot be fingerprinted")
    path = kernel_files.cache_path(key)
    if kernel_files.read_cached(path) is not None:
        return key
    t0 = time.perf_counter()
    ptx = _build_ptx(factory, factory_args, argtypes, launch_bounds, cc, pretend)
    STATS["compile_seconds"] += time.perf_counter() - t0
    kernel_files.write_cached(path, _entry_name(ptx), ptx)
    return key


def _build_ptx(factory, factory_args, argtypes, launch_bounds, cc, pretend) -> str:
    """The PTX of a specialisation for compute capability ``cc`` (numba shown a device of
    that capability where ``pretend``): its operators linked into a skeleton of the same
    kernel (:mod:`.linking`: built here before, or shipped) where there is one, else numba's
    full build, which leaves a skeleton for later operators.  Counts it in ``STATS``
    (``compiled``, and ``linked`` too for a linked one); numba's errors become a TypeError
    naming the operators."""
    name = getattr(factory, "__name__", "kernel")
    users, skey, sk = [], None, None
    if FLAGS["link"].cell[0]:
        marked = linking.mark(factory_args, users)
        if users:
            skey, sk = linking.find(lambda target: _key(factory, marked, argtypes, launch_bounds, target), cc)
    try:
        with _pretend_device(cc) if pretend else contextlib.nullcontext():
            ptx = None if sk is None else linking.link(sk, users, cc)
            if ptx is not None:
                STATS["linked"] += 1
            elif skey is not None:
                pyfunc = factory(*factory_args)
                lib = linking.full_build(pyfunc, argtypes, cc, launch_bounds)
                ptx = lib.get_asm_strs(cc=cc)[0]
                linking.keep(skey, lib, pyfunc, users)
            else:
                ptx, _ = cuda.compile_ptx(factory(*factory_args), argtypes, cc=cc, opt=True,
                                          launch_bounds=launch_bounds)
    except (numba.core.errors.NumbaError, TypeError, ValueError, NotImplementedError) as exc:
        what = _describe_callables(factory_args) or name
        raise compile_error(exc, f"{name} for {what}") from exc
    STATS["compiled"] += 1
    return align_shared(ptx)


_SHARED_ALIGN = re.compile(r"^((?:\.visible\s+|\.extern\s+)?\.shared\s+)\.align\s+(?:1|2|4|8)(\s)", re.M)


def align_shared(ptx: str) -> str:
    """``ptx`` with every block-shared array 16-byte aligned: the kernels' 128-bit shared
    accesses (``ld/st.shared.v4``, :func:`..intrinsics.vload_shared`) need it, and numba
    declares a shared array with its element's alignment only.

    >>> align_shared(".visible .shared .align 4 .b8 _cudapy_smem_2[36900];")
    '.visible .shared .align 16 .b8 _cudapy_smem_2[36900];'
    """
    return _SHARED_ALIGN.sub(r"\1.align 16\2", ptx)


def _entry_name(ptx: str) -> str:
    m = re.search(r"\.entry\s+([A-Za-z0-9_$]+)\s*\(", ptx)
    if not m:
        raise RuntimeError("no kernel entry point in the compiled PTX")
    return m.group(1)


# --------------------------------------------------------------------------- offline


def compile_ptx_offline(factory, factory_args: tuple, argtypes: tuple, cc=(9, 0), launch_bounds=None) -> str:
    """Compile a kernel specialisation to PTX without a GPU (for tests of the GPU code path).

    Needs libNVVM and NVRTC (``CUDA_HOME``), and a process that does not simulate. numba asks
    the driver for the current device's compute capability when it types a call to a device
    function; this pretends a device of capability ``cc`` while compiling.
    """
    if config.SIMULATE:
        raise RuntimeError("compile_ptx_offline needs a process without FORGE_ARRAY_SIMULATE=1")
    with _pretend_device(cc):
        ptx, _ = cuda.compile_ptx(factory(*factory_args), tuple(argtypes), cc=cc, opt=True,
                                  launch_bounds=launch_bounds)
    return align_shared(ptx)


# --------------------------------------------------------------------------- typing


_RESULT_TYPES = Cache("runtime.compiler.RESULT_TYPES")


def result_type(fn, argtypes: tuple):
    """The numba type that ``fn`` returns for arguments of numba types ``argtypes``, found by
    numba's type inference for the CPU (same typing rules as on the GPU; stored on disk for
    later processes, see :mod:`.cpu_cache`). Raises TypeError with numba's
    message when ``fn`` cannot be compiled, or is not callable.

    >>> from numba import types
    >>> str(result_type(lambda a, b: a + b, (types.float32, types.float32)))
    'float32'
    """
    if not callable(fn):
        raise TypeError(f"operator must be callable, got {type(fn).__name__}")
    key = (fn, tuple(argtypes))
    try:
        return _RESULT_TYPES[key]
    except (KeyError, TypeError):
        pass
    py_func = getattr(fn, "py_func", fn)
    try:
        ret = cpu_cache.result_type_cached(py_func, argtypes, lambda: cpu_cache.infer_return_type(py_func, argtypes))
    except Exception as exc:  # numba raises many kinds
        what = getattr(fn, "__qualname__", repr(fn))
        raise compile_error(exc, f"operator {what} for arguments {tuple(str(t) for t in argtypes)}") from exc
    try:
        _RESULT_TYPES[key] = ret
    except TypeError:
        pass
    return ret
