"""Simulator implementation of the intrinsics: plain Python for numba's CUDA simulator.

numba's simulator runs every thread of a block as a Python thread
(``threading.current_thread()`` is a ``BlockThread`` with ``thread_id``, ``threadIdx``,
``blockIdx`` and ``_manager``, the ``BlockManager`` of the running block), one block after
the other. Warp shuffles exchange values through per-warp slots kept on the block manager
and a barrier of the 32 lanes; fences are no-ops; atomics take a lock; and
``load_acquire`` / ``load_relaxed`` model weak visibility by sometimes returning an older
value written at the same address by ``store_release`` or an atomic (seeded by
``FORGE_ARRAY_SIM_SEED``; probability ``FORGE_ARRAY_SIM_STALE``, default 1/3), so look-back
code meets predecessors that "have not published yet".

By family: :mod:`.sim_threads`, :mod:`.sim_warp`, :mod:`.sim_memory`, :mod:`.sim_async`.

Example
-------
>>> VEC("float32"), VEC("int8")
(4, 16)
"""

from __future__ import annotations

from .names import NAMES
from .sim_async import (
    bar_sync,
    bulk_commit,
    bulk_load,
    bulk_store,
    bulk_wait_read,
    fence_proxy_async,
    mbar_arrive,
    mbar_arrive_tx,
    mbar_fence_init,
    mbar_init,
    mbar_try_wait,
    with_shared_scratch,
)
from .sim_float import ftz_add, ftz_div, ftz_f32, ftz_mul, ftz_sub
from .sim_memory import (
    atomic_add,
    atomic_cas,
    atomic_exch,
    load,
    load_acquire,
    load_relaxed,
    memory_model,
    store,
    store_release,
    vload,
    vload_hinted,
    vload_shared,
    vstore,
    vstore_hinted,
    vstore_shared,
)
from .sim_threads import VEC, WARP, lane_id, warp_id
from .sim_warp import (
    ballot,
    cast_like,
    device_op,
    fence_block,
    fence_device,
    fence_system,
    globaltimer,
    nanosleep,
    shfl_down,
    shfl_idx,
    shfl_up,
    shfl_xor,
    syncwarp,
)

__all__ = [*NAMES, "memory_model"]
