"""The runtime layer: numba -> PTX compilation with a pointer ABI, the disk cache, module
loading and lean launches through CuPy on the current stream, background compiles,
temporary storage, tuning tables, and the simulator switch (``FORGE_ARRAY_SIMULATE=1``).

numba loads only when a kernel is first built: the compiler's names below are imported
from :mod:`.compiler` at their first use.  See ``docs/kernel-api.md`` for how kernels are
written against it.
"""

from . import config  # noqa: F401  (first: sets up the simulator before numba.cuda loads)
from .backend import (
    array_module,
    cupy,
    current_device,
    device_info,
    is_cupy_array,
    kernels_available,
    kernels_status,
    stream_key,
    target_cc,
)
from .config import SIMULATE
from .counters import STATS
from .memory import SimBuffer, buffer_of, data_address, device_allocator, element_strides, layout_key, misalignment

#: names of the modules imported at their first use (the compiler and the numba types load
#: numba; the launch path imports the driver's bindings through CuPy), by module
_LAZY_NAMES = {
    "compiler": ("compile_error", "compile_kernel", "compile_ptx_offline", "result_type"),
    "launching": ("Kernel", "launch", "stored_form", "resident_blocks"),
    "kernel_types": ("f32", "f64", "i32", "i64", "numba_type", "ptr_t", "tuple_ptr_t", "u32", "u64"),
}
_HOME = {name: module for module, names in _LAZY_NAMES.items() for name in names}


def __getattr__(name):
    module = _HOME.get(name)
    if module is not None:
        from importlib import import_module  # noqa: PLC0415  (numba loads here, not at import)

        from .lazy import GUARDS  # noqa: PLC0415

        for guard in GUARDS:
            guard(f"{__name__}.{module}")
        value = getattr(import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "SIMULATE",
    "STATS",
    "Kernel",
    "SimBuffer",
    "array_module",
    "buffer_of",
    "compile_error",
    "compile_kernel",
    "compile_ptx_offline",
    "cupy",
    "current_device",
    "data_address",
    "layout_key",
    "device_allocator",
    "device_info",
    "target_cc",
    "element_strides",
    "f32",
    "f64",
    "i32",
    "i64",
    "is_cupy_array",
    "kernels_available",
    "kernels_status",
    "launch",
    "resident_blocks",
    "misalignment",
    "numba_type",
    "ptr_t",
    "result_type",
    "stored_form",
    "stream_key",
    "tuple_ptr_t",
    "u32",
    "u64",
]
