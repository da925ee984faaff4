"""Devices: ``cpu`` (NumPy buffers) and ``cuda:N`` (CuPy buffers).

CuPy is imported lazily and only once; without CuPy, or without a visible GPU,
forge_array works on the CPU alone.

>>> from forge_array._devices import cpu, Device
>>> cpu
cpu
>>> Device("cuda", 1)
cuda:1
"""

from __future__ import annotations

import contextlib
import sys

import numpy as np

from .runtime.flags import FLAGS

__all__ = ["Device", "cpu", "devices", "default_device", "as_device"]

#: ``[name]`` of the default device, ``""`` to choose: the ``device`` flag's cell
#: (``FORGE_ARRAY_DEVICE``)
_DEVICE = FLAGS["device"].cell


#: (kind, index) -> the one Device object of that device
_INTERNED: dict = {}


class Device:
    """A device: ``Device("cpu")`` or ``Device("cuda", index)``.

    There is one object per device (``Device("cuda", 0) is Device("cuda", 0)``), so that the
    namespace's host paths compare devices by identity.

    >>> Device("cuda", 0) == Device("cuda", 0)
    True
    >>> Device("cuda", 1) is Device("cuda", 1)
    True
    >>> str(Device("cpu"))
    'cpu'
    """

    __slots__ = ("_kind", "_index")

    def __new__(cls, kind: str, index: int = 0):
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"unknown device kind {kind!r}: expected 'cpu' or 'cuda'")
        key = (kind, 0 if kind == "cpu" else int(index))
        dev = _INTERNED.get(key)
        if dev is None or type(dev) is not cls:
            dev = object.__new__(cls)
            dev._kind, dev._index = key
            if cls is Device:
                _INTERNED[key] = dev
        return dev

    @property
    def kind(self) -> str:
        """``'cpu'`` or ``'cuda'``."""
        return self._kind

    @property
    def index(self) -> int:
        """The GPU ordinal (0 for the CPU)."""
        return self._index

    @property
    def is_cuda(self) -> bool:
        return self._kind == "cuda"

    def __repr__(self) -> str:
        return "cpu" if self._kind == "cpu" else f"cuda:{self._index}"

    __str__ = __repr__

    def __eq__(self, other) -> bool:
        if isinstance(other, Device):
            return self._kind == other._kind and self._index == other._index
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self._kind, self._index))

    def __reduce__(self):
        return (Device, (self._kind, self._index))


cpu = Device("cpu")

_cupy_state: dict = {}


def cupy_module():
    """The ``cupy`` module when it imports and sees at least one GPU, else None."""
    if "mod" not in _cupy_state:
        mod = None
        try:
            import cupy  # noqa: PLC0415

            if cupy.cuda.runtime.getDeviceCount() > 0:
                mod = cupy
        except Exception:  # ImportError, CUDARuntimeError, driver problems
            mod = None
        _cupy_state["mod"] = mod
    return _cupy_state["mod"]


def cuda_device_count() -> int:
    cp = cupy_module()
    if cp is None:
        return 0
    try:
        return int(cp.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def devices() -> tuple:
    """All devices available now: the GPUs first, then ``cpu``.

    >>> cpu in devices()
    True
    """
    return tuple(Device("cuda", i) for i in range(cuda_device_count())) + (cpu,)


def _parse(spec: str) -> Device:
    s = spec.strip().lower()
    if s == "cpu":
        return cpu
    if s == "cuda":
        return Device("cuda", 0)
    if s.startswith("cuda:"):
        try:
            return Device("cuda", int(s[len("cuda:"):]))
        except ValueError:
            pass
    raise ValueError(f"unknown device {spec!r}: device strings are 'cpu', 'cuda' and "
                     f"'cuda:N'; the devices here are {_names_here()}")


def _names_here() -> str:
    return ", ".join(repr(str(d)) for d in devices())


#: called once, the first time this process names an available GPU or wraps a CuPy array
#: (the routing seam loads the kernel layer's numba-free planning modules then)
ON_FIRST_GPU: list = []
_GPU_SEEN = [False]


def _first_gpu() -> None:
    _GPU_SEEN[0] = True
    for hook in ON_FIRST_GPU:
        hook()


def _check_available(dev: Device) -> Device:
    if dev.is_cuda:
        n = cuda_device_count()
        if dev.index >= n or dev.index < 0:
            why = "CuPy is not importable or sees no GPU" if n == 0 else f"{n} GPU(s) visible"
            raise ValueError(f"device {dev} is not available ({why}); the devices here are "
                             f"{_names_here()}")
        if not _GPU_SEEN[0]:
            _first_gpu()
    return dev


_default_state: dict = {}


def default_device() -> Device:
    """The default device: ``$FORGE_ARRAY_DEVICE`` if set, else ``cuda:0`` when
    CuPy finds a GPU, else ``cpu``.

    >>> default_device() in devices()
    True
    """
    env = _DEVICE[0]
    key = env or ""
    dev = _default_state.get(key)
    if dev is None:
        if env:
            dev = _check_available(_parse(env))
        else:
            dev = Device("cuda", 0) if cuda_device_count() > 0 else cpu
        _default_state[key] = dev
        if dev.is_cuda and not _GPU_SEEN[0]:
            _first_gpu()
    return dev


def as_device(device) -> Device:
    """Normalise a ``device=`` argument (None means the default device).

    Accepts a :class:`Device`, a string (``"cpu"``, ``"cuda:1"``) or a
    ``cupy.cuda.Device``.

    >>> as_device("cpu")
    cpu
    """
    if device is None:
        return default_device()
    if isinstance(device, Device):
        return _check_available(device)
    if isinstance(device, str):
        return _check_available(_parse(device))
    cp = cupy_module()
    if cp is not None and isinstance(device, cp.cuda.Device):
        return _check_available(Device("cuda", device.id))
    if hasattr(device, "_place_array"):  # a forge_array.Sharding: the sharded creators' call
        raise ShardingGiven(f"{device!r} names several devices: a function that makes one "
                            "array cannot place it there")
    raise ValueError(f"unsupported device {device!r}: expected a forge_array device, "
                     f"'cpu', 'cuda' or 'cuda:N'; the devices here are {_names_here()}")


class ShardingGiven(ValueError):
    """A :class:`forge_array.Sharding` given as the ``device`` of a function that makes one
    array: the namespace's creation functions hand such a call to their sharded
    implementation (see ``_creation.SHARDED_CREATE``)."""


def device_of(arr) -> Device:
    """The device holding a backend array (NumPy -> cpu, CuPy -> cuda:N)."""
    if isinstance(arr, (np.ndarray, np.generic)):
        return cpu
    cp = cupy_module()
    if cp is not None and isinstance(arr, cp.ndarray):
        if not _GPU_SEEN[0]:
            _first_gpu()
        return Device("cuda", arr.device.id)
    raise TypeError(f"not a NumPy or CuPy array: {type(arr).__name__}")


def is_cupy_array(arr) -> bool:
    if "mod" not in _cupy_state:
        if "cupy" not in sys.modules:  # nobody imported CuPy: cannot be a CuPy array
            return False
        cupy_module()
    cp = _cupy_state.get("mod")
    return cp is not None and isinstance(arr, cp.ndarray)


def backend(device: Device):
    """The array library (``numpy`` or ``cupy``) for a device."""
    if device.is_cuda:
        cp = cupy_module()
        if cp is None:
            raise ValueError(f"device {device} needs CuPy, which is not available")
        return cp
    return np


def compat(device: Device):
    """The array-api-compat namespace (numpy or cupy flavour) for a device."""
    if device.is_cuda:
        import array_api_compat.cupy as ns  # noqa: PLC0415

        return ns
    import array_api_compat.numpy as ns  # noqa: PLC0415

    return ns


_STAY = contextlib.nullcontext()
_GET_DEVICE: list = []


def on(device: Device):
    """Context manager making ``device`` current for CuPy allocations (nothing to do, and
    no CuPy ``Device`` entered, when it is current already).

    >>> with on(cpu):
    ...     pass
    """
    if device.is_cuda:
        if current_cuda_index() == device.index:
            return _STAY
        return backend(device).cuda.Device(device.index)
    return _STAY


def current_cuda_index() -> int:
    """The index of the GPU CuPy allocates on now (ValueError when CuPy is not available)."""
    if not _GET_DEVICE:
        _GET_DEVICE.append(backend(Device("cuda", 0)).cuda.runtime.getDevice)
    return _GET_DEVICE[0]()


def check_same_device(*devs) -> Device:
    """Raise ValueError naming both devices when they differ; return the common one."""
    first = devs[0]
    for d in devs[1:]:
        if d != first:
            raise ValueError(
                f"arrays are on different devices: {first} and {d}; "
                "move one with to_device() first"
            )
    return first
