"""The disk cache's kernel files and launching their functions, without numba.

A compiled kernel is one PTX file under :data:`.config.CACHE_DIR`, named by its key and
headed by its entry point and a checksum.  This module reads and writes those files (a
damaged file is removed and rebuilt, never loaded), loads a file's function through
``cupy.RawModule`` on the current device, and launches it with packed parameters through
``cuLaunchKernel`` on a given stream.  It imports neither numba nor the kernel modules, so
launches stored on disk (:mod:`.stored`) run before numba has loaded.

>>> p = cache_path("ab" + "0" * 62)
>>> p.endswith(".ptx")
True
"""

from __future__ import annotations

import os
import re
import threading
import time
import warnings

from . import backend, config
from .counters import STATS

HEADER = "// forge_array kernel v1 "
_WARNED: list = []


def cache_path(key: str) -> str:
    """The kernel file of cache key ``key`` (hex digest)."""
    return os.path.join(config.CACHE_DIR, key[:2], key + ".ptx")


def read_cached(path: str):
    """The cached ``(entry, ptx)``, or None when the file is missing or damaged: truncated,
    zeroed, not UTF-8, of another format version, or with a wrong checksum. A damaged file is
    removed, so the caller rebuilds it (and replaces it atomically with :func:`write_cached`).
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    import hashlib  # noqa: PLC0415  (at first use: import forge_array stays lean)

    try:
        text = data.decode("utf-8")
        first, _, body = text.partition("\n")
        m = re.fullmatch(re.escape(HEADER) + r"(\S+) ([0-9a-f]{64})", first)
        if m and hashlib.sha256(body.encode()).hexdigest() == m.group(2):
            return m.group(1), body
    except (UnicodeDecodeError, ValueError):
        pass
    try:
        os.unlink(path)
    except OSError:
        pass
    return None


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file of this process and thread,
    then a rename): readers never see half a file, and processes filling the same file at
    once both succeed. A read-only or unusable cache directory only costs rebuilds, with one
    warning per process."""
    write_atomic_bytes(path, text.encode("utf-8"))


def write_atomic_bytes(path: str, data: bytes) -> None:
    """:func:`write_atomic` of bytes."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        warn_unwritable(exc)


def warn_unwritable(exc) -> None:
    """Warn, once per process, that the cache directory cannot be written."""
    if not _WARNED:
        _WARNED.append(True)
        warnings.warn(f"forge_array: the kernel cache {config.CACHE_DIR} is not writable ({exc}); "
                      "kernels are compiled again in every process (set FORGE_ARRAY_CACHE_DIR)",
                      RuntimeWarning, stacklevel=4)


def write_cached(path: str, entry: str, ptx: str) -> None:
    """Write a kernel file (see :func:`write_atomic`)."""
    import hashlib  # noqa: PLC0415

    write_atomic(path, f"{HEADER}{entry} {hashlib.sha256(ptx.encode()).hexdigest()}\n{ptx}")


def cubin_path(key: str) -> str:
    """The machine code beside kernel file ``key`` (a cubin for the device's compute
    capability, written from the shipped archive: :mod:`.prebuilt`)."""
    return os.path.join(config.CACHE_DIR, key[:2], key + ".cubin")


def write_cubin(key: str, cubin: bytes) -> None:
    """Write the cubin of kernel file ``key`` (atomically; the device loads it instead of
    compiling the file's PTX)."""
    write_atomic_bytes(cubin_path(key), cubin)


def remove(key: str) -> None:
    """Remove kernel file ``key`` and its cubin (missing ones are fine)."""
    for path in (cache_path(key), cubin_path(key)):
        try:
            os.unlink(path)
        except OSError:
            pass


def load_function(key, entry: str, ptx=None):
    """The ``cupy.RawModule`` function ``entry`` of kernel file ``key`` on the current
    device, or of the PTX text ``ptx`` where the file is missing or cannot be loaded; None
    when neither can.  A cubin beside the file (:func:`cubin_path`) comes first: the driver
    loads it as it is, where PTX is compiled at load (tens to hundreds of milliseconds per
    kernel on a machine whose driver cache is empty); a cubin that does not load is removed."""
    cp = backend.cupy()
    t0 = time.perf_counter()
    fn = None
    path = cache_path(key) if key else None
    cubin = cubin_path(key) if key else None
    if cubin and os.path.exists(cubin):
        try:
            fn = cp.RawModule(path=cubin).get_function(entry)
            STATS["cubin_loads"] += 1
        except Exception:
            fn = None
            try:
                os.unlink(cubin)
            except OSError:
                pass
    if fn is None and path and os.path.exists(path):
        try:
            fn = cp.RawModule(path=path).get_function(entry)
        except Exception:
            fn = None
    if fn is None and ptx is not None:
        import tempfile  # noqa: PLC0415

        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(ptx)
        try:
            fn = cp.RawModule(path=f.name).get_function(entry)
        finally:
            os.unlink(f.name)
    STATS["load_seconds"] += time.perf_counter() - t0
    return fn


def function_handle(fn) -> int:
    """The ``CUfunction`` handle of a loaded CuPy kernel (a ``RawKernel`` wraps a
    ``cupy.cuda.function.Function`` in ``.kernel``)."""
    ptr = getattr(fn, "ptr", None)
    if ptr is None:
        ptr = fn.kernel.ptr
    return int(ptr)


def param_buffer(size: int):
    """``(buffer, extra, size_t, address of extra)`` for ``cuLaunchKernel``'s packed-parameter
    launch of ``size`` bytes of parameters (``CU_LAUNCH_PARAM_BUFFER_POINTER`` / ``_SIZE``)."""
    import ctypes  # noqa: PLC0415  (not at import: a CPU-only process never launches)

    buf = ctypes.create_string_buffer(max(size, 8))
    size_t = ctypes.c_size_t(size)
    extra = (ctypes.c_void_p * 5)(1, ctypes.addressof(buf), 2, ctypes.addressof(size_t), 0)
    return buf, extra, size_t, ctypes.addressof(extra)


def allow_dynamic_shared(handle: int, nbytes: int) -> None:
    """Open function ``handle`` up to ``nbytes`` of dynamic shared memory
    (``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``: needed once static and dynamic
    shared memory together pass 48 KB)."""
    backend.cupy().cuda.driver.funcSetAttribute(handle, 8, int(nbytes))


def launch_packed(handle, grid, block, shared, stream_ptr, extra_address, device) -> None:
    """``cuLaunchKernel`` of ``handle`` with the packed parameters at ``extra_address``;
    makes the device's primary context current first where this thread has none."""
    try:
        backend.cupy().cuda.driver.launchKernel(handle, grid, 1, 1, block, 1, 1, shared, stream_ptr, 0,
                                                extra_address)
    except Exception as exc:
        relaunch(exc, handle, grid, block, shared, stream_ptr, extra_address, device)


def relaunch(exc, handle, grid, block, shared, stream_ptr, extra_address, device) -> None:
    """After ``cuLaunchKernel`` raised ``exc``: launch again once the device's primary
    context is current, where a missing context was the cause; else raise ``exc``."""
    if not make_context_current(exc, device):
        raise exc
    backend.cupy().cuda.driver.launchKernel(handle, grid, 1, 1, block, 1, 1, shared, stream_ptr, 0,
                                            extra_address)


def make_context_current(exc, dev) -> bool:
    """After ``CUDA_ERROR_INVALID_CONTEXT`` from a driver launch (a thread whose first CUDA
    call is ours has no current context until the runtime API makes the device's primary
    context current): make it current and say whether to retry."""
    if "CUDA_ERROR_INVALID_CONTEXT" not in str(exc):
        return False
    backend.cupy().cuda.runtime.setDevice(dev)
    return True
