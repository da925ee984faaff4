"""Dask with forge_array's kernels in every worker: ``dask.array`` of CuPy chunks whose
chunk reductions, scans and matrix-vector products run on our kernels, with no change to
the Dask code.

``dask.array`` calls NumPy's functions on each chunk (``np.sum``, ``np.cumsum``,
``np.matmul``...); on a CuPy chunk those dispatch through ``__array_function__`` to the
functions of the ``cupy`` module, looked up by name at call time. So
[`forge_array.cupy.patch`][forge_array.cupy.patch] in the process that runs the chunk puts our kernels under
Dask. This module does that where the chunks run:

- distributed (``distributed.Client``, dask-cuda's ``LocalCUDACluster``, one worker per
  GPU): [`ForgeArrayPlugin`][], a worker plugin that patches CuPy in every worker
  process as it starts, and in the workers that join later. [`register`][] is the one
  line ([`unregister`][] restores CuPy everywhere); [`stats`][] gathers per worker how
  many chunk calls ran on our kernels.
- the threaded scheduler (one process): [`patched`][], or plain
  ``forge_array.cupy.patch()``.
- several reductions of one array in one graph: [`reductions`][] (one task per chunk
  computes them all, sibling reductions sharing a pass over the chunk on our kernels).

A worker that cannot import forge_array's CuPy drop-in, or has no GPU, keeps plain CuPy
and logs why; results are the same either way. A chunk our kernels do not cover (a dtype,
an ``out=`` of another shape...) runs CuPy's own function, exactly. See
[Scale-out with Dask](scale-out.md).

Needs ``dask[array]``; the worker plugin needs ``distributed`` too (``pip install
"forge-array[dask]"``), dask-cuda for one worker per GPU (``"forge-array[dask-cuda]"``).

Examples:
    On a GPU host:

    ```python
    from dask_cuda import LocalCUDACluster
    from distributed import Client
    import dask.array as da, cupy, forge_array.dask as fdask

    client = Client(LocalCUDACluster())           # one worker per GPU
    fdask.register(client)                        # our kernels in every worker
    x = da.random.random((10**7, 100), chunks=(10**6, 100)).map_blocks(cupy.asarray)
    x.std(axis=0).compute()
    fdask.stats(client)                           # {worker: {"kernel": {...}, ...}}
    ```
"""

from __future__ import annotations

import contextlib

_INSTALL = ("pip install \"forge-array[dask]\" (and \"forge-array[dask-cuda]\" for dask-cuda's "
            "LocalCUDACluster, one worker per GPU)")

try:
    import dask  # noqa: F401
except ImportError as _exc:
    raise ImportError(f"forge_array.dask needs dask: {_INSTALL}; missing: {_exc.name or _exc}"
                      ) from _exc
try:
    import distributed
except ImportError:  # the threaded scheduler (patched()) needs dask alone
    distributed = None

__all__ = ["ForgeArrayPlugin", "register", "unregister", "stats", "status", "patched",
           "worker_patch", "one_chunk_per_worker", "reductions"]

import cloudpickle as _cloudpickle  # noqa: E402  (a dependency of dask)

from . import _worker_plugin  # noqa: E402
from ._dask_reductions import reductions  # noqa: E402
from ._worker_plugin import ForgeArrayPlugin, worker_patch, worker_unpatch  # noqa: E402

# the plugin travels by value: a worker that cannot import forge_array still unpickles it,
# keeps plain CuPy and logs why
_cloudpickle.register_pickle_by_value(_worker_plugin)


def _client(client, name):
    """``client`` checked: a ``distributed.Client`` (ImportError without distributed)."""
    if distributed is None:
        raise ImportError(f"forge_array.dask.{name} needs distributed: {_INSTALL}")
    if not isinstance(client, distributed.Client):
        raise TypeError(f"{name}: expected a distributed.Client, got {type(client).__name__}")
    return client


def register(client, methods=True):
    """Register [`ForgeArrayPlugin`][] on ``client``: every worker, now and later,
    patches CuPy with our kernels. Returns [`status`][] of the workers.

    Examples:
        >>> from distributed import Client, LocalCluster              # doctest: +SKIP
        >>> register(Client(LocalCluster(n_workers=1)))               # doctest: +SKIP
        {'tcp://127.0.0.1:40001': {'patched': False, 'reason': 'plain CuPy: ...'}}
    """
    _client(client, "register")
    client.register_plugin(ForgeArrayPlugin(methods=methods), name=ForgeArrayPlugin.name)
    return status(client)


def unregister(client):
    """Remove [`ForgeArrayPlugin`][] from ``client`` and put CuPy's own functions back in
    every worker (also where the plugin's teardown has not run yet when this returns: the
    workers are restored directly). Returns [`status`][] of the workers.

    Examples:
        >>> fdask.unregister(client)         # doctest: +SKIP
        {'tcp://127.0.0.1:40001': {'patched': False, 'reason': 'not patched'}}
    """
    _client(client, "unregister")
    try:
        client.unregister_worker_plugin(ForgeArrayPlugin.name)
    except ValueError:   # not registered: restore the workers all the same
        pass
    client.run(_worker_plugin._worker_restore)
    return status(client)


def status(client):
    """Per worker: whether CuPy is patched there and why (``{address: {"patched": bool,
    "reason": str}}``).

    Examples:
        >>> status(client)                  # doctest: +SKIP
        {'tcp://127.0.0.1:40001': {'patched': True, 'reason': 'forge_array kernels on NVIDIA H200'}}
    """
    return {w: {"patched": s["patched"], "reason": s["reason"]}
            for w, s in client.run(_worker_plugin._worker_stats).items()}


def stats(client=None, reset=False):
    """How many chunk calls ran on our kernels and how many fell back to CuPy, per function:
    per worker for a ``client`` (``{address: {"patched", "reason", "kernel", "fallback"}}``),
    or for this process (threaded scheduler) without one. ``reset`` zeroes the counters
    after reading them.

    Examples:
        >>> per_worker = stats(client)["tcp://127.0.0.1:40001"]; per_worker["kernel"]   # doctest: +SKIP
        {'sum': 8, 'cumsum': 4}
    """
    if client is None:
        out = _worker_plugin._worker_stats()
        if reset:
            _worker_plugin._worker_reset_stats()
        return out
    out = client.run(_worker_plugin._worker_stats)
    if reset:
        client.run(_worker_plugin._worker_reset_stats)
    return out


@contextlib.contextmanager
def patched(methods=True):
    """For the threaded (or synchronous) scheduler: chunks computed inside the block run on
    our kernels; yields [`worker_patch`][]'s report. CuPy is restored on exit unless it
    was patched before.

    Examples:
        >>> import dask.array as da, cupy                       # doctest: +SKIP
        >>> x = da.ones((10**6, 10), chunks=(10**5, 10)).map_blocks(cupy.asarray)   # doctest: +SKIP
        >>> with patched():                                     # doctest: +SKIP
        ...     x.sum(axis=0).compute(scheduler="threads")
    """
    fcp = _worker_plugin._drop_in()
    was = fcp is not None and fcp.is_patched()
    state = worker_patch(methods=methods)
    try:
        yield state
    finally:
        if state["patched"] and not was:
            worker_unpatch()


def one_chunk_per_worker(x, client, axis=0):
    """``x`` (a ``dask.array``) in one chunk per worker along ``axis``, chunk ``i`` computed
    and kept on worker ``i`` (the workers in the order of their names: with dask-cuda's
    ``LocalCUDACluster``, worker ``i`` holds GPU ``i``). Chunk sizes differ by at most one;
    the other axes stay whole. The result is persisted.

    Examples:
        >>> client = Client(LocalCUDACluster())                       # doctest: +SKIP
        >>> x = one_chunk_per_worker(x, client)                       # doctest: +SKIP
        >>> x.chunks[0]                                               # doctest: +SKIP
        (250000000, 250000000, 250000000, 250000000)
    """
    import dask.array as da  # noqa: PLC0415

    _client(client, "one_chunk_per_worker")
    info = client.scheduler_info()["workers"]
    workers = sorted(info, key=lambda w: str(info[w].get("name", w)))
    if not workers:
        raise ValueError("one_chunk_per_worker: the client has no workers")
    ax = axis % x.ndim
    n = x.shape[ax]
    q, r = divmod(n, len(workers))
    sizes = tuple(q + 1 if i < r else q for i in range(len(workers)))
    chunks = tuple(sizes if d == ax else (x.shape[d],) for d in range(x.ndim))
    y = x.rechunk(chunks)
    parts = []
    start = 0
    for w, b in zip(workers, sizes):
        key = tuple(slice(start, start + b) if d == ax else slice(None) for d in range(x.ndim))
        parts.append(client.persist(y[key], workers=[w], allow_other_workers=False))
        start += b
    out = da.concatenate(parts, axis=ax)
    return client.persist(out)
