"""The worker side of [`forge_array.dask`][]: the plugin and the functions that run in
each Dask worker. Pickled by value (``cloudpickle.register_pickle_by_value``), so a worker
unpickles it even where forge_array cannot be imported: it then keeps plain CuPy and logs
why. Imports nothing of forge_array at module level.

>>> _worker_stats()["patched"]
False
"""

from __future__ import annotations

import logging

try:
    from distributed import WorkerPlugin as _WorkerPlugin
except ImportError:  # dask alone: the threaded scheduler's helpers need no plugin base
    _WorkerPlugin = object

_LOGGER = "forge_array.dask"

#: what [`worker_patch`][forge_array.dask.worker_patch] found in this process (empty before it ran)
_STATE: dict = {}


def worker_patch(methods=True):
    """Patch CuPy with forge_array's kernels in this process, or say why not.

    Returns ``{"patched": bool, "reason": str, "functions": [...], "methods": [...],
    "failed": {...}}``; never raises: a process without forge_array, without CuPy or
    without a GPU keeps plain CuPy, with the reason logged at WARNING.

    Examples:
        >>> r = worker_patch()            # doctest: +SKIP
        >>> r["patched"], r["reason"]     # doctest: +SKIP
        (True, 'forge_array kernels on NVIDIA H200')
    """
    try:
        import forge_array.runtime as runtime  # noqa: PLC0415

        if runtime.cupy() is None:
            raise RuntimeError("CuPy finds no CUDA GPU in this process")
        import forge_array.cupy as fcp  # noqa: PLC0415  (needs CuPy)

        rep = fcp.patch(methods=methods)
        state = {"patched": True,
                 "reason": f"forge_array kernels on {runtime.device_info()['name']}",
                 "functions": rep["functions"], "methods": rep["methods"],
                 "failed": rep["failed"]}
    except Exception as exc:  # noqa: BLE001 - any failure keeps plain CuPy
        state = {"patched": False, "reason": f"plain CuPy: {type(exc).__name__}: {exc}",
                 "functions": [], "methods": [], "failed": {}}
        logging.getLogger(_LOGGER).warning("forge_array: this process keeps plain CuPy (%s: %s)",
                                           type(exc).__name__, exc)
    _STATE.clear()
    _STATE.update(state)
    return dict(state)


def _drop_in():
    try:
        import forge_array.cupy as fcp  # noqa: PLC0415

        return fcp
    except Exception:  # noqa: BLE001 - no forge_array or no CuPy: nothing was patched
        return None


def worker_unpatch(state=None):
    """Undo [`worker_patch`][forge_array.dask.worker_patch] in this process (``state``: the report it returned, when
    this module's own record may be another copy's: the plugin keeps its own)."""
    fcp = _drop_in()
    if fcp is not None and (state if state is not None else _STATE).get("patched"):
        fcp.unpatch()
    _STATE.clear()


def _worker_restore():
    """CuPy's own functions in this process again, whoever patched them (run on every worker
    by [`forge_array.dask.unregister`][])."""
    fcp = _drop_in()
    if fcp is not None and fcp.is_patched():
        fcp.unpatch()
    _STATE.clear()
    return fcp is not None and fcp.is_patched()


def _worker_stats(dask_worker=None):
    """This process's patch state and drop-in counters (``dask_worker``: the worker,
    passed by ``Client.run``, whose plugin holds the state: functions shipped by value
    carry their own copy of this module's globals)."""
    state = _STATE
    if dask_worker is not None:
        plugin = getattr(dask_worker, "plugins", {}).get(ForgeArrayPlugin.name)
        state = getattr(plugin, "state", {})
    fcp = _drop_in()
    patched = fcp is not None and fcp.is_patched()
    reason = state.get("reason") or ("forge_array.cupy.patch() in effect" if patched
                                      else "not patched")
    out = {"patched": patched, "reason": reason, "kernel": {}, "fallback": {}}
    if fcp is not None:
        out.update(fcp.stats())
    return out


def _worker_reset_stats():
    fcp = _drop_in()
    if fcp is not None:
        fcp.reset_stats()


class ForgeArrayPlugin(_WorkerPlugin):
    """A worker plugin: ``setup`` patches CuPy with forge_array's kernels in the worker
    process (see [`worker_patch`][forge_array.dask.worker_patch]), ``teardown`` restores CuPy.

    ``methods``: also patch the ``cupy.ndarray`` methods (``x.sum()``...).

    Examples:
        >>> from distributed import Client              # doctest: +SKIP
        >>> client = Client(LocalCUDACluster())         # doctest: +SKIP
        >>> client.register_plugin(ForgeArrayPlugin())  # doctest: +SKIP
    """

    name = "forge-array"

    def __init__(self, methods=True):
        self.methods = bool(methods)
        self.state = {}

    def setup(self, worker):
        self.state = state = worker_patch(methods=self.methods)
        logging.getLogger(_LOGGER).info("forge_array on worker %s: %s",
                                        getattr(worker, "address", "?"), state["reason"])

    def teardown(self, worker):
        worker_unpatch(self.state)
        self.state = {}
