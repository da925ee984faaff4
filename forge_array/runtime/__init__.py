"""The runtime layer: numba -> PTX compilation with a pointer ABI, the disk cache, module
loading and lean launches through CuPy on the current stream, temporary storage, tuning
tables, and the simulator switch (``FORGE_ARRAY_SIMULATE=1``).

See ``docs/kernel-api.md`` for how kernels are written against it.
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
)
from .compiler import (
    STATS,
    Kernel,
    compile_error,
    compile_kernel,
    compile_ptx_offline,
    f32,
    f64,
    i32,
    i64,
    launch,
    numba_type,
    ptr_t,
    resident_blocks,
    result_type,
    tuple_ptr_t,
    u32,
    u64,
)
from .config import SIMULATE
from .memory import SimBuffer, buffer_of, data_address, device_allocator, element_strides, layout_key, misalignment

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
    "stream_key",
    "tuple_ptr_t",
    "u32",
    "u64",
]
