"""Access to CuPy (optional) and the current CUDA device, without importing CuPy eagerly.

Example
-------
>>> from forge_array.runtime import backend
>>> backend.cupy() is None or hasattr(backend.cupy(), "ndarray")
True
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from . import config, originals
from .flags import FLAGS

_CUPY = None
_CUPY_TRIED = False


def cupy():
    """Return CuPy's pristine namespace (``cupy``'s attributes, with the functions that
    ``forge_array.cupy.patch()`` may replace bound to CuPy's originals, see
    :mod:`forge_array.runtime.originals`), or None when CuPy is missing or finds no GPU."""
    global _CUPY, _CUPY_TRIED
    if not _CUPY_TRIED:
        _CUPY_TRIED = True
        try:
            import cupy as cp

            if cp.cuda.runtime.getDeviceCount() > 0:
                _CUPY = originals.namespace(cp)
        except Exception:  # no CuPy, no driver, no device
            _CUPY = None
    return _CUPY


_NUMPY = originals.namespace(np)


def array_module(x):
    """The pristine namespace (see `forge_array.runtime.originals`) of backend array
    ``x``'s module: NumPy's for a ``numpy.ndarray``, CuPy's otherwise. Fallbacks call its
    ``sum``, ``cumsum``, ... so that they never reach a patched function.

    Examples:
        >>> import numpy as np
        >>> array_module(np.zeros(2)).sum.__wrapped__ is np.sum
        True
    """
    if type(x) is not np.ndarray and is_cupy_array(x):
        return cupy()
    return _NUMPY


_CUPY_TYPES: set = set()


def is_cupy_array(x) -> bool:
    """True for a ``cupy.ndarray`` (never imports CuPy to find out).

    >>> import numpy as np
    >>> is_cupy_array(np.zeros(2))
    False
    """
    t = type(x)
    if t in _CUPY_TYPES:  # the hot case: a type seen before
        return True
    if t.__module__.startswith("cupy") and hasattr(x, "data") and hasattr(x, "device"):
        _CUPY_TYPES.add(t)
        return True
    return False


def current_device() -> int:
    """The current CUDA device's ordinal (0 when simulating).

    >>> isinstance(current_device(), int) or cupy() is None
    True
    """
    if config.SIMULATE:
        return 0
    return (_STREAM_FNS or _bind_stream_fns())[0]()


def stream_key():
    """What temporaries reused across launches are keyed by: launches on one stream of one
    device are ordered, so a scratch buffer cached per (device, stream) can be reused by the
    next launch.  Simulated kernels run synchronously in the calling thread, so there it is
    the host thread.  ``(device, stream address)``, and the host thread for CUDA's
    per-thread default stream (address 2, one stream per thread under the same handle).

    >>> stream_key() == stream_key()
    True
    """
    if config.SIMULATE:
        return threading.get_ident()
    fns = _STREAM_FNS or _bind_stream_fns()
    ptr = fns[1]().ptr
    if ptr == 2:  # cudaStreamPerThread
        return (fns[0](), ptr, threading.get_ident())
    return (fns[0](), ptr)


_STREAM_FNS: tuple = ()


def _bind_stream_fns():
    global _STREAM_FNS
    cp = cupy()
    _STREAM_FNS = (cp.cuda.runtime.getDevice, cp.cuda.get_current_stream)
    return _STREAM_FNS


@functools.lru_cache(maxsize=None)
def _device_info(device_id: int) -> dict:
    cp = cupy()
    props = cp.cuda.runtime.getDeviceProperties(device_id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    return {
        "name": name,
        "cc": (int(props["major"]), int(props["minor"])),
        "sm_count": int(props["multiProcessorCount"]),
        "l2_bytes": int(props.get("l2CacheSize", 0)),
        "max_threads_per_sm": int(props.get("maxThreadsPerMultiProcessor", 2048)),
    }


_SIM_INFO = {
    "name": "numba CUDA simulator",
    "cc": (9, 0),
    "sm_count": 2,
    "l2_bytes": 0,
    "max_threads_per_sm": 2048,
}


def device_info(device_id: int | None = None) -> dict:
    """Name, compute capability, SM count and L2 size of a CUDA device (the current one by
    default), or of the simulator's pretend device when simulating.

    >>> sorted(device_info())  # doctest: +SKIP
    ['cc', 'l2_bytes', 'max_threads_per_sm', 'name', 'sm_count']
    """
    if config.SIMULATE:
        return _SIM_INFO
    if device_id is None:
        device_id = cupy().cuda.runtime.getDevice()
    return _device_info(device_id)


def target_cc() -> tuple:
    """The compute capability kernels are compiled and planned for: the current device's, or
    the ``target_cc`` flag's (``FORGE_ARRAY_TARGET_CC``) where it names an older one.

    >>> target_cc() == tuple(device_info()["cc"])  # doctest: +SKIP
    True
    """
    cc = tuple(device_info()["cc"])
    want = FLAGS["target_cc"].cell[0]
    if want is None or tuple(want) == cc:
        return cc
    if tuple(want) > cc:
        raise ValueError(f"FORGE_ARRAY_TARGET_CC={want[0]}.{want[1]} is newer than the device's compute "
                         f"capability {cc[0]}.{cc[1]}: its kernels could not load here")
    return tuple(want)


def kernels_available(x) -> bool:
    """Whether our kernels run on backend array ``x``: a CuPy array on a GPU, or a NumPy
    array under the simulator.

    Examples:
        >>> import numpy as np
        >>> kernels_available(np.zeros(3)) == config.SIMULATE and config.KERNELS_ENABLED
        True
    """
    if not config.KERNELS_ENABLED:
        return False
    if config.SIMULATE:
        return isinstance(x, np.ndarray)
    return is_cupy_array(x)


def kernels_status() -> str:
    """One line saying whether and where our kernels run in this process."""
    if not config.KERNELS_ENABLED:
        return "kernels: disabled (FORGE_ARRAY_KERNELS=0)"
    if config.SIMULATE:
        return "kernels: active in numba's CUDA simulator on NumPy buffers (FORGE_ARRAY_SIMULATE=1)"
    if cupy() is not None:
        info = device_info()
        return f"kernels: active on {info['name']} (sm_{info['cc'][0]}{info['cc'][1]})"
    return "kernels: inactive (no CUDA GPU; the CPU device uses NumPy)"
