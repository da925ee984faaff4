"""The Cholesky factorization of one matrix on the GPU through cuSOLVER's 64-bit API
(``cusolverDnXpotrf``), which CuPy does not bind, on the lower triangle: CuPy's
``linalg.cholesky`` asks the legacy ``cusolverDn<t>potrf`` for the upper one, which cuSOLVER
factors in over twice the time (``python -m bench.suite_linalg --only cholesky`` on an
H200, 2048 × 2048 float32: 0.76 ms here, 2.03 for CuPy's call, 0.86 for PyTorch's).

The library is the one CuPy loaded (found by name through the dynamic loader); the call
runs on CuPy's cuSOLVER handle and current stream. Like CuPy's, the factorization does not
wait for the GPU to check its ``info``: a matrix that is not positive definite gives NaNs,
not an error. Where the library or the symbol is missing, :func:`cholesky` returns None and
the caller takes CuPy's function.

>>> cholesky_available() in (True, False)
True
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

__all__ = ["cholesky", "cholesky_available"]

#: cudaDataType of each dtype cuSOLVER factors
_CUDA_TYPES = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.complex64): 4,
               np.dtype(np.complex128): 5}
_LOWER, _UPPER = 0, 1           # cublasFillMode_t
#: the triangle cuSOLVER factors (of the column-major reading of the C-order copy)
FILL = _LOWER
_LOCK = threading.Lock()
_STATE: dict = {}               # "lib": (buffer-size function, factor function, params) or None


def _library_names():
    """The cuSOLVER library this process loaded (from the loader's map), then the sonames."""
    names = []
    try:
        with open("/proc/self/maps", encoding="utf-8") as f:
            for line in f:
                path = line.split()[-1]
                if "libcusolver.so" in path and path not in names:
                    names.append(path)
    except OSError:
        pass
    return names + ["libcusolver.so.11", "libcusolver.so.12", "libcusolver.so"]


def _load():
    with _LOCK:
        if "lib" in _STATE:
            return _STATE["lib"]
        found = None
        try:   # CuPy's binding loads the library (from its wheel's folder, off the loader's path)
            import cupy_backends.cuda.libs.cusolver  # noqa: F401, PLC0415
        except ImportError:
            pass
        for name in _library_names():
            try:
                lib = ctypes.CDLL(name)
                size, factor, create = lib.cusolverDnXpotrf_bufferSize, lib.cusolverDnXpotrf, lib.cusolverDnCreateParams
            except (OSError, AttributeError):
                continue
            i64, vp, sz = ctypes.c_int64, ctypes.c_void_p, ctypes.c_size_t
            size.argtypes = [vp, vp, ctypes.c_int, i64, ctypes.c_int, vp, i64, ctypes.c_int,
                             ctypes.POINTER(sz), ctypes.POINTER(sz)]
            factor.argtypes = [vp, vp, ctypes.c_int, i64, ctypes.c_int, vp, i64, ctypes.c_int, vp, sz, vp, sz, vp]
            size.restype = factor.restype = create.restype = ctypes.c_int
            params = vp()
            if create(ctypes.byref(params)) != 0:
                continue
            found = (size, factor, params)
            break
        _STATE["lib"] = found
        return found


def cholesky_available() -> bool:
    """Whether ``cusolverDnXpotrf`` can be called here (a GPU process with CuPy's cuSOLVER)."""
    try:
        import cupy  # noqa: F401, PLC0415
    except ImportError:
        return False
    return _load() is not None


def cholesky(a, upper: bool = False):
    """The Cholesky factor of CuPy array ``a`` (one square Hermitian positive-definite matrix
    of a floating dtype): lower triangular ``L`` with ``a = L @ L^H``, or with ``upper`` its
    conjugate transpose. None where the 64-bit API is not available (the caller takes CuPy's
    ``linalg.cholesky``)."""
    code = _CUDA_TYPES.get(a.dtype)
    if code is None or a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        return None
    fns = _load()
    if fns is None:
        return None
    size, factor, params = fns
    import cupy  # noqa: PLC0415
    from cupy.cuda import device  # noqa: PLC0415
    from cupy_backends.cuda.libs import cusolver  # noqa: PLC0415

    n = a.shape[0]
    # the C-order copy read column by column is a's transpose, the conjugate of a; its lower
    # factor (conj(a) = L L^H, column-major) read row by row is L^T in the upper triangle,
    # which is U = conj(L)^H with a = U^H U: the upper factor itself, its conjugate transpose
    # the lower one (a column-major view, as PyTorch returns it)
    x = cupy.array(a, order="C", copy=True)
    handle = device.get_cusolver_handle()
    cusolver.setStream(handle, cupy.cuda.get_current_stream().ptr)
    on_device, on_host = ctypes.c_size_t(), ctypes.c_size_t()
    status = size(handle, params, FILL, n, code, x.data.ptr, n, code, ctypes.byref(on_device),
                  ctypes.byref(on_host))
    if status != 0:
        return None
    work = cupy.empty(max(on_device.value, 1), dtype=np.uint8)
    host_work = np.empty(max(on_host.value, 1), dtype=np.uint8)
    info = cupy.empty(1, dtype=np.int32)
    status = factor(handle, params, FILL, n, code, x.data.ptr, n, code, work.data.ptr, on_device.value,
                    host_work.ctypes.data, on_host.value, info.data.ptr)
    if status != 0:
        raise RuntimeError(f"linalg.cholesky: cusolverDnXpotrf failed (status {status})")
    if FILL == _LOWER:
        u = _triangle(cupy, x, upper=True)
        if upper:
            return u
        lower = u.T
        return lower.conj() if lower.dtype.kind == "c" else lower
    lower = _triangle(cupy, x, upper=False)
    if not upper:
        return lower
    u = lower.T
    return u.conj() if u.dtype.kind == "c" else u


def _triangle(cupy, x, upper):
    """``x`` with the triangle below (``upper``) or above the diagonal zeroed, in place where
    CuPy has the kernel."""
    try:
        from cupy.linalg import _util  # noqa: PLC0415

        (_util._triu if upper else _util._tril)(x, k=0)
        return x
    except (ImportError, AttributeError):
        return cupy.triu(x) if upper else cupy.tril(x)
