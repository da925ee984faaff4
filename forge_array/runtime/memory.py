"""How backend arrays reach kernels: buffers indexed by element, strides in elements.

A kernel receives, for each array operand, a *buffer* ``p`` pointing at the view's first
element (``p[i]``, negative ``i`` allowed) and the view's shape and strides in elements
as integer arguments. On the GPU the buffer is the raw device address (an ``int``, typed
``CPointer(dtype)`` in the kernel); in the simulator it is a :class:`SimBuffer` over the
NumPy memory, which the simulator passes through without copying, so aliasing operands
behave as on the device.

Example
-------
>>> import numpy as np
>>> x = np.arange(10.0)[::-2]
>>> b = SimBuffer.of(x)
>>> float(b[0]), float(b[-8]), element_strides(x)
(9.0, 1.0, (-2,))
"""

from __future__ import annotations

import ctypes

import numpy as np

from . import config
from .backend import cupy, is_cupy_array


class SimBuffer:
    """Element-indexed view of NumPy memory for simulated kernels.

    ``buf[i]`` is the element ``i`` places after the origin (the view's first element);
    ``i`` may be negative. ``array`` is a 1-D NumPy array over the whole memory extent of the
    view and ``origin`` the position of element 0 in it.
    """

    __slots__ = ("array", "origin", "owner")

    def __init__(self, array: np.ndarray, origin: int, owner=None):
        self.array = array
        self.origin = origin
        self.owner = owner  # keeps the memory alive

    @classmethod
    def of(cls, x: np.ndarray) -> "SimBuffer":
        """The buffer of NumPy array ``x`` (any view; strides must be whole elements)."""
        strides = element_strides(x)
        itemsize = x.dtype.itemsize
        if x.size == 0:
            return cls(np.empty(0, dtype=x.dtype), 0, x)
        lo = sum(min(0, (n - 1) * s) for n, s in zip(x.shape, strides))
        hi = sum(max(0, (n - 1) * s) for n, s in zip(x.shape, strides))
        start = x.__array_interface__["data"][0] + lo * itemsize
        count = hi - lo + 1
        raw = (ctypes.c_char * (count * itemsize)).from_address(start)
        flat = np.frombuffer(raw, dtype=x.dtype, count=count)
        if not x.flags.writeable:
            flat = flat.view()
            flat.flags.writeable = False
        return cls(flat, -lo, x)

    def __getitem__(self, i):
        return self.array[self.origin + i]

    def __setitem__(self, i, v):
        self.array[self.origin + i] = v

    def address(self, i: int = 0) -> int:
        """Byte address of element ``i``."""
        return self.array.__array_interface__["data"][0] + (self.origin + i) * self.array.itemsize

    @property
    def dtype(self):
        return self.array.dtype

    def __repr__(self):
        return f"SimBuffer({self.array.dtype}, extent={self.array.size}, origin={self.origin})"


def element_strides(x) -> tuple:
    """Strides of ``x`` in elements; ValueError when one is not a whole number of elements."""
    itemsize = x.dtype.itemsize
    out = []
    for s in x.strides:
        if s % itemsize:
            raise ValueError(f"stride of {s} bytes is not a multiple of the itemsize {itemsize}")
        out.append(s // itemsize)
    return tuple(out)


def layout_key(x) -> tuple:
    """What a launch planned for NumPy or CuPy array ``x`` depends on besides its address:
    dtype, shape, strides, the 16-byte phase of its first element (and the GPU).

    >>> layout_key(np.zeros(3, np.float32))[:3]
    (dtype('float32'), (3,), (4,))
    """
    if type(x) is np.ndarray:
        return (x.dtype, x.shape, x.strides, x.__array_interface__["data"][0] & 15)
    if is_cupy_array(x):
        mp = x.data
        return (x.dtype, x.shape, x.strides, mp.ptr & 15, mp.device_id)
    return (x.dtype, x.shape, x.strides, data_address(x) & 15)


def data_address(x) -> int:
    """Byte address of the first element of a NumPy or CuPy array."""
    if type(x) is np.ndarray:
        return x.__array_interface__["data"][0]
    if is_cupy_array(x):
        return x.data.ptr
    return int(x.__array_interface__["data"][0])


def misalignment(x, nbytes: int = 16) -> int:
    """Byte address of ``x``'s first element modulo ``nbytes``."""
    return data_address(x) % nbytes


def device_allocator():
    """CuPy's allocator of device memory (``cupy.cuda.memory.alloc``: the current pool, on the
    current stream). A replayed launch takes its output's memory from it, launches on the
    pointer and builds the array over that memory afterwards
    (``cupy.ndarray(shape, dtype, memptr=mem)``), so that constructing the array object
    happens while the kernel runs rather than ahead of the launch (about 1 µs of host time
    per call on an H200 machine, measured with ``python -m bench.host_overhead``).

    >>> alloc = None if config.SIMULATE else device_allocator()   # none in the simulator
    >>> alloc is None or callable(alloc)
    True
    """
    if config.SIMULATE:
        raise RuntimeError("no device allocator in the simulator")
    return cupy().cuda.memory.alloc


def buffer_of(x):
    """The object passed to a kernel for array ``x``: the device address (``int``) of its
    first element on the GPU, a :class:`SimBuffer` under the simulator."""
    if config.SIMULATE:
        return SimBuffer.of(x)
    return int(x.data.ptr)
