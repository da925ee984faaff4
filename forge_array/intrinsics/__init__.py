"""Device functions for kernels: warp shuffles of any scalar or tuple, warp/block reduce and
scan factories, fences, acquire/release loads and stores, atomics on pointers, 128-bit
vector loads/stores, tuple-of-buffer element access and float32 arithmetic with the
GPU's flush-to-zero rule.

On the GPU they are numba ``@intrinsic`` functions emitting NVVM IR / inline PTX
(:mod:`.cuda_impl`); under numba's CUDA simulator (``FORGE_ARRAY_SIMULATE=1``) they are
plain Python stand-ins (:mod:`.sim_impl`). The operator-generic factories of
:mod:`.blocks` are written once on top of them. See ``docs/kernel-api.md``.

Example
-------
>>> from forge_array import intrinsics as fi
>>> fi.WARP, fi.VEC("float32")
(32, 4)
>>> warp_sum = fi.make_warp_reduce(lambda a, b: a + b)   # a device function for kernels
"""

from __future__ import annotations

from ._impl import (  # noqa: F401
    SIMULATE,
    VEC,
    WARP,
    atomic_add,
    atomic_cas,
    atomic_exch,
    ballot,
    bar_sync,
    bulk_commit,
    bulk_load,
    bulk_store,
    bulk_wait_read,
    cast_like,
    fence_block,
    fence_device,
    fence_proxy_async,
    fence_system,
    ftz_add,
    ftz_div,
    ftz_f32,
    ftz_mul,
    ftz_sub,
    globaltimer,
    lane_id,
    load,
    load_acquire,
    load_relaxed,
    mbar_arrive,
    mbar_arrive_tx,
    mbar_fence_init,
    mbar_init,
    mbar_try_wait,
    nanosleep,
    shfl_down,
    shfl_idx,
    shfl_up,
    shfl_xor,
    store,
    store_release,
    syncwarp,
    vload,
    vload_hinted,
    vload_shared,
    vstore,
    vstore_hinted,
    vstore_shared,
    warp_id,
    with_shared_scratch,
)
from .blocks import (  # noqa: F401
    as_device,
    make_block_exclusive_scan,
    make_block_reduce,
    make_block_scan,
    make_warp_exclusive_scan,
    make_warp_reduce,
    make_warp_scan,
)
