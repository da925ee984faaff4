"""Compiling for a compute capability without its GPU: numba asks the driver for the current
device's compute capability when it types a call to a device function; within
:func:`pretend_device` it sees a device of the given capability instead (no driver, no
context: compiling needs libNVVM only).  The build process, the prebuilt archive's builds for
other targets and the offline compiles of the tests use it.
"""

from __future__ import annotations

import contextlib
import threading


class _FakeDevice:
    def __init__(self, cc):
        self.compute_capability = cc


@contextlib.contextmanager
def pretend_device(cc):
    """numba asks the driver for the current device's compute capability when it types a
    call to a device function; within this, it sees a device of capability ``cc`` instead
    (no driver, no context: compiling needs libNVVM only)."""
    import numba.cuda.compiler as ccomp  # noqa: PLC0415
    import numba.cuda.dispatcher as cdisp  # noqa: PLC0415

    with _PRETEND_LOCK:
        saved = (cdisp.get_current_device, ccomp.get_current_device)
        fake = _FakeDevice(tuple(cc))
        cdisp.get_current_device = ccomp.get_current_device = lambda: fake
        try:
            yield
        finally:
            cdisp.get_current_device, ccomp.get_current_device = saved


_PRETEND_LOCK = threading.Lock()
