"""CUDA implementation of the intrinsics: numba ``@intrinsic`` functions emitting NVVM IR
and inline PTX, for kernels compiled by numba-cuda to PTX, by family: :mod:`.cuda_warp`,
:mod:`.cuda_memory`, :mod:`.cuda_async` (on the types of :mod:`.cuda_types`).

Every public name here has a plain-Python twin in :mod:`.sim_impl`; kernels import them from
:mod:`forge_array.intrinsics`, which picks one of the two.

Example (inside a kernel compiled for the GPU)
-------
>>> from forge_array import intrinsics as fi                      # doctest: +SKIP
>>> def kernel(p, n):                                              # doctest: +SKIP
...     v = fi.shfl_down(p[fi.lane_id()], 1)
"""

from __future__ import annotations

from .cuda_async import (
    bar_sync,
    bulk_commit,
    bulk_load,
    bulk_store,
    bulk_wait_read,
    device_op,
    fence_proxy_async,
    mbar_arrive,
    mbar_arrive_tx,
    mbar_fence_init,
    mbar_init,
    mbar_try_wait,
    with_shared_scratch,
)
from .cuda_float import ftz_add, ftz_div, ftz_f32, ftz_mul, ftz_sub
from .cuda_memory import (
    atomic_add,
    atomic_cas,
    atomic_exch,
    load,
    load_acquire,
    load_relaxed,
    store,
    store_release,
    vload,
    vload_hinted,
    vload_shared,
    vstore,
    vstore_hinted,
    vstore_shared,
)
from .cuda_types import VEC, WARP
from .cuda_warp import (
    ballot,
    cast_like,
    fence_block,
    fence_device,
    fence_system,
    globaltimer,
    lane_id,
    nanosleep,
    shfl_down,
    shfl_idx,
    shfl_up,
    shfl_xor,
    syncwarp,
    warp_id,
)
from .names import NAMES

__all__ = list(NAMES)
