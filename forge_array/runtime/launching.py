"""Kernels as the launch path sees them: the packed parameter layout a launch writes for
the kernel's argument types, a compiled specialisation (:class:`Kernel`), its launch on
CuPy's current stream through ``cuLaunchKernel`` (or in the simulator), and the description
of a launch for the stored launches.  Nothing here shapes kernel code: the compiler
(:mod:`.compiler`) builds what these launch.  Argument types are numba's
(:mod:`.kernel_types`) or the plain ones of :mod:`.param_types`, read by what they print
(``float32*``, ``int64``) and their ``types`` (a tuple's), so numba need not be loaded to
launch a kernel.

>>> from forge_array.runtime.param_types import I64, F32, ptr
>>> _param_struct((ptr("float32"), I64, F32)).format
'<Qqf'
"""

from __future__ import annotations

import threading
import time

import numpy as np

from . import backend, kernel_files, temp
from .counters import STATS
from .flags import FLAGS

__all__ = ["Kernel", "launch", "stored_form", "resident_blocks", "SIM_LOCK"]

# --------------------------------------------------------------------------- packing


def _is_tuple(t) -> bool:
    """Whether argument type ``t`` is a tuple (numba's ``BaseTuple`` or a plain tuple type)."""
    return isinstance(getattr(t, "types", None), tuple)


def _is_ptr(t) -> bool:
    return str(t).endswith("*")


def _is_complex(t) -> bool:
    return str(t) in ("complex64", "complex128")


def _converter(t):
    """Host-side conversion of one kernel argument for CuPy's launcher (flattened)."""
    if _is_ptr(t):
        return lambda v: (np.uint64(v),)
    if _is_tuple(t):
        subs = [_converter(s) for s in t.types]

        def conv(v, subs=subs):
            out = ()
            for c, x in zip(subs, v):
                out += c(x)
            return out

        return conv
    if str(t) in _FMT:
        np_t = np.dtype(str(t)).type
        return lambda v: (np_t(v),)
    raise TypeError(f"unsupported kernel argument type {t} (use pointers, integers and floats)")


_FMT = {"int8": ("b", 1), "uint8": ("B", 1), "int16": ("h", 2), "uint16": ("H", 2), "int32": ("i", 4),
        "uint32": ("I", 4), "int64": ("q", 8), "uint64": ("Q", 8), "float32": ("f", 4), "float64": ("d", 8),
        "complex64": ("ff", 4), "complex128": ("dd", 8)}


def _flat_types(argtypes):
    for t in argtypes:
        if _is_tuple(t):
            yield from _flat_types(t.types)
        else:
            yield t


def _param_struct(argtypes):
    """``struct.Struct`` packing the flattened kernel parameters with CUDA's alignment, or
    None when a parameter type has no packed form (then CuPy's launcher is used)."""
    import struct

    fmt, off = "<", 0
    for t in _flat_types(argtypes):
        if _is_ptr(t):
            code, align = "Q", 8
        elif str(t) in _FMT:
            code, align = _FMT[str(t)]
        else:
            return None
        pad = (-off) % align
        fmt += "x" * pad + code
        off += pad + struct.calcsize("<" + code)
    return struct.Struct(fmt)


def _scalar_converter(t):
    """Like :func:`_converter` for a non-tuple argument, returning the value itself."""
    if _is_ptr(t):
        return np.uint64
    return np.dtype(str(t)).type


# --------------------------------------------------------------------------- kernels

class Kernel:
    """A compiled specialisation of a kernel factory; launch it with :func:`launch`."""

    __slots__ = ("name", "argtypes", "key", "entry", "ptx", "_sim", "_fns", "_convs", "_flat", "_scalar_convs",
                 "_struct", "_tls", "_packflat", "_ptrs", "_flatten", "_dyn")

    def __init__(self, name, argtypes, key=None, entry=None, ptx=None, sim=None):
        self.name = name
        self.argtypes = tuple(argtypes)
        self.key = key
        self.entry = entry
        self.ptx = ptx
        self._sim = sim
        self._fns = {}
        self._ptrs = {}
        self._dyn = {}   # device -> dynamic shared memory the function was opened up to
        self._convs = tuple(_converter(t) for t in self.argtypes) if sim is None else ()
        self._flat = not any(_is_tuple(t) for t in self.argtypes)
        self._scalar_convs = tuple(_scalar_converter(t) for t in self.argtypes) if self._flat and sim is None else ()
        self._struct = _param_struct(self.argtypes) if sim is None else None
        self._packflat = not any(_is_tuple(t) or _is_complex(t) for t in self.argtypes)
        self._flatten = None if self._packflat or sim is not None else _make_flattener(self.argtypes)
        self._tls = threading.local()

    def param_buffer(self):
        """This thread's (buffer, extra) for ``cuLaunchKernel``'s packed-parameter launch."""
        tls = self._tls
        pb = getattr(tls, "pb", None)
        if pb is None:
            pb = tls.pb = kernel_files.param_buffer(self._struct.size)
        return pb

    def function(self):
        """The ``cupy.RawModule`` function on the current device (loaded once per device)."""
        dev = backend.cupy().cuda.runtime.getDevice()
        fn = self._fns.get(dev)
        if fn is None:
            fn = self._fns[dev] = kernel_files.load_function(self.key, self.entry, self.ptx)
        return fn

    def __repr__(self):
        return f"Kernel({self.name}, {'simulated' if self._sim is not None else self.entry})"


#: held while a simulated kernel runs and while a kernel is built for the simulator: numba's
#: simulator swaps the ``cuda`` global of a kernel's module for a fake while the kernel runs
#: (see :func:`_restore_cuda_globals`), and a factory of that module building a kernel in
#: another thread (a background build) meanwhile would find the fake
SIM_LOCK = threading.RLock()


def _restore_cuda_globals() -> None:
    """After a simulated kernel raised: put ``numba.cuda`` back into module globals.

    numba's simulator swaps the ``cuda`` global of a function's module for a fake module while
    one of its threads runs the function, and swaps it back when the thread returns. Threads of
    a failed launch that are left blocked at a barrier never return, so the fake stays, and
    every later kernel factory of that module (``cuda.jit`` at build time) would fail."""
    import sys

    deadline = time.monotonic() + 10.0  # let the aborted threads unwind (and swap back) first
    for t in threading.enumerate():
        if t is not threading.current_thread() and hasattr(t, "syncthreads_event"):
            t.join(max(0.0, deadline - time.monotonic()))
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not d:
            continue
        for k, v in list(d.items()):
            if type(v).__name__ == "FakeCUDAModule":
                d[k] = sys.modules["numba.cuda"]


def launch(kernel: Kernel, grid: int, block: int, args: tuple, shared: int = 0, on=None) -> None:
    """Launch ``kernel`` with ``grid`` blocks of ``block`` threads on CuPy's current stream
    (or in the simulator). ``args`` are buffers (see `forge_array.runtime.memory`), ints and floats
    in the order of the kernel's parameters. ``on``: `forge_array.runtime.backend.stream_key` of this moment when
    the caller has it (saves asking CuPy for the current device and stream again)."""
    if grid <= 0:
        return
    STATS["launches"] += 1
    sim = kernel._sim
    if sim is not None:
        try:
            with SIM_LOCK:
                sim[grid, block](*args)
        except BaseException:
            temp.discard()  # a kernel stopped half-way may leave counters and tickets dirty
            _restore_cuda_globals()
            raise
        return
    st = kernel._struct
    if st is not None and _FAST_LAUNCH:
        if on is None:
            dev = _get_device()
            sptr = _stream_ptr()
        else:
            dev = on[0]
            sptr = on[1]
        ptr = kernel._ptrs.get(dev)
        if ptr is None:
            fn = kernel.function()
            ptr = kernel._ptrs[dev] = kernel_files.function_handle(fn)
        if shared and kernel._dyn.get(dev, 0) < shared:
            _allow_dynamic_shared(kernel, dev, ptr, shared)
        buf, _, _, extra = kernel.param_buffer()
        if kernel._packflat:
            st.pack_into(buf, 0, *args)
        else:
            st.pack_into(buf, 0, *kernel._flatten(args))
        try:
            _launch_kernel(ptr, grid, 1, 1, block, 1, 1, shared, sptr, 0, extra)
        except Exception as exc:
            kernel_files.relaunch(exc, ptr, grid, block, shared, sptr, extra, dev)
        return
    fns = kernel._fns
    fn = fns.get(_get_device()) if fns else None
    if fn is None:
        fn = kernel.function()
    if shared:
        dev = _get_device()
        if kernel._dyn.get(dev, 0) < shared:
            _allow_dynamic_shared(kernel, dev, kernel_files.function_handle(fn), shared)
    if kernel._flat:
        cargs = tuple([c(a) for c, a in zip(kernel._scalar_convs, args)])
    else:
        cargs = ()
        for c, a in zip(kernel._convs, args):
            cargs += c(a)
    fn((grid,), (block,), cargs, shared_mem=shared)


def _allow_dynamic_shared(kernel, dev, handle, nbytes) -> None:
    """Open ``kernel``'s function on device ``dev`` up to ``nbytes`` of dynamic shared memory
    (done for every launch with dynamic shared memory)."""
    kernel_files.allow_dynamic_shared(handle, nbytes)
    kernel._dyn[dev] = int(nbytes)


def stored_form(kernel, grid, block, args, pointers, shared=0) -> dict | None:
    """The description of a launch of ``kernel`` with ``args`` for the stored launches
    (:class:`.stored.StoredLaunch`): each pointer parameter becomes ``pointers[value]`` (a
    marker such as ``["in", 0]``), a list in place of a value that marker, every other
    parameter ``["v", value]``.  None when a
    pointer is not in ``pointers``, the kernel has no packed form or no disk key (nothing
    to load in another process), or in the simulator.

    >>> stored_form(Kernel("k", (), sim=object()), 1, 32, (), {}) is None
    True
    """
    st = kernel._struct
    if st is None or kernel.key is None or kernel._sim is not None:
        return None
    flat = args if kernel._packflat else kernel._flatten(args)
    is_ptr = []
    for t in _flat_types(kernel.argtypes):
        if _is_complex(t):
            is_ptr += [False, False]
        else:
            is_ptr.append(_is_ptr(t))
    if len(is_ptr) != len(flat):
        return None
    entries = []
    for p, v in zip(is_ptr, flat):
        if p:
            m = pointers.get(int(v))
            if m is None:
                return None
            entries.append(list(m))
        elif type(v) is list:   # a marker in place of a value (a scan's base and epoch)
            entries.append(v)
        else:
            entries.append(["v", v.item() if hasattr(v, "item") else v])
    return {"key": kernel.key, "entry": kernel.entry, "fmt": st.format, "grid": int(grid),
            "block": int(block), "shared": int(shared), "args": entries}


def _flat_exprs(t, expr):
    if _is_tuple(t):
        out = []
        for k, sub in enumerate(t.types):
            out.extend(_flat_exprs(sub, f"{expr}[{k}]"))
        return out
    if _is_complex(t):
        return [f"{expr}.real", f"{expr}.imag"]
    return [expr]


def _make_flattener(argtypes):
    """A function taking the kernel's argument tuple (with nested tuples of buffers and complex
    scalars) to the flat parameter tuple, generated once per kernel so that a launch does no
    per-argument type dispatch.

    >>> from forge_array.runtime.param_types import I64, scalar, unituple
    >>> f = _make_flattener((unituple(I64, 2), scalar("complex64"), I64))
    >>> f(((1, 2), 3 + 4j, 5))
    (1, 2, 3.0, 4.0, 5)
    """
    exprs = []
    for k, t in enumerate(argtypes):
        exprs.extend(_flat_exprs(t, f"a[{k}]"))
    src = "def flatten(a):\n    return (" + "".join(e + ", " for e in exprs) + ")\n"
    scope: dict = {}
    exec(src, scope)  # generated from the argument types only: no user input
    return scope["flatten"]


def _stream_ptr() -> int:
    return _current_stream().ptr


def _current_stream():
    global _current_stream
    _current_stream = backend.cupy().cuda.get_current_stream
    return _current_stream()


def _launch_kernel(*a):
    global _launch_kernel
    _launch_kernel = backend.cupy().cuda.driver.launchKernel
    return _launch_kernel(*a)


#: ``FORGE_ARRAY_LAUNCH=cupy`` (flag ``launch``) launches through ``cupy.RawModule`` functions
#: instead of ``cuLaunchKernel`` with packed parameters.
_FAST_LAUNCH = FLAGS["launch"].cell[0] != "cupy"


def _get_device() -> int:
    global _get_device
    _get_device = backend.cupy().cuda.runtime.getDevice
    return _get_device()




_RESIDENT_BLOCKS: dict = {}


def resident_blocks(kernel, block, fallback):
    """Blocks of ``block`` threads of ``kernel`` that fit on one SM (the driver's occupancy
    calculator: registers, shared memory), or ``fallback`` where it cannot tell (simulator).

    >>> from forge_array.runtime import config
    >>> resident_blocks(None, 256, 4) if config.SIMULATE else 4
    4
    """
    from . import config  # noqa: PLC0415

    if config.SIMULATE:
        return fallback
    key = (kernel, block)
    v = _RESIDENT_BLOCKS.get(key)
    if v is None:
        v = 0
        try:
            from cupy.cuda import driver  # noqa: PLC0415

            v = int(driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.function().ptr, block, 0))
        except Exception:  # pragma: no cover - depends on the CuPy build
            try:   # by hand: registers (allocated per warp, 256 at a time), shared memory
                fn = kernel.function()
                warps = -(-block // 32)
                per_warp = -(-int(fn.num_regs) * 32 // 256) * 256
                by_regs = (65536 // max(per_warp, 1)) // warps
                by_smem = (233472 // (int(fn.shared_size_bytes) + 1024))
                v = min(by_regs, by_smem, 2048 // block, 32)
            except Exception:
                v = 0
        if v <= 0:
            v = fallback
        _RESIDENT_BLOCKS[key] = v
    return v
