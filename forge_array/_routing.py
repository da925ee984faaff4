"""The routing seam: one function per routed operation, on BACKEND arrays.

The namespace layer (``_statistical.py``, ``_utility.py``, ``_searching.py``,
``_linear_algebra.py``, ``_creation.py``) has already done all of the standard's
semantics before calling here: argument validation, axes normalised to a sorted
tuple of distinct non-negative ints, the result dtype resolved, empty-reduction
errors raised, operands of matmul/vecdot/tensordot promoted to a common dtype
and checked for matching shapes. ``x``, ``a`` and ``b`` are ``numpy.ndarray`` or
``cupy.ndarray``; ``x`` is the ORIGINAL input (not converted to ``dtype``).

Each function returns a backend array of exactly the right dtype and shape: from our
kernels (:mod:`forge_array.primitives`) when they take the array, else from NumPy / CuPy.
The kernel layer is imported at the first call that needs it; in background compile mode
(:mod:`forge_array.runtime.background`) a call whose kernels are not built yet, or that
comes while the layer is still loading, also takes the NumPy / CuPy path.
The NumPy / CuPy calls go through the module's pristine namespace
(:func:`forge_array.runtime.array_module`), never through a function that
``forge_array.cupy.patch()`` may have replaced.

>>> import numpy as np
>>> from forge_array import _routing
>>> _routing.reduce_sum(np.arange(4, dtype=np.int32), (0,), np.dtype("int64"), False)
array(6)
"""

from __future__ import annotations

import importlib
import os

import numpy as np

from . import _devices
from ._kernel_layer import binding
from .runtime import array_module as _xp
from .runtime import background, config, kernels_available
from .runtime.lazy import module as _lazy

# the kernel layer, imported at first use (it loads numba); ``primitives.reductions`` is the
# module, not the generic function of the same name
_red = binding("reductions", __name__, "_red")
_scan = binding("scan", __name__, "_scan")
_mv = binding("matvec", __name__, "_mv")
_copy = binding("strided_copy", __name__, "_copy")
_compaction = binding("compaction", __name__, "_compaction")
_stored_mod = binding("stored", __name__, "_stored_mod")
_factories = _lazy("forge_array.runtime.factories", __name__, "_factories")

#: imports the layers above this module register to run with the kernel layer's load, off
#: the calling thread in background compile mode
LAYER_LOADS: list = []

#: whether the kernel layer has loaded (``background.state("kernel layer") == "done"``,
#: kept as one flag for the hot paths below)
_LAYER = [False]
#: whether its numba-free part has (:func:`_load_planning`): the replays of cached launch
#: plans below take calls from then on
_PLANNING = [False]


def _load_planning() -> None:
    """The kernel layer's numba-free part: the stored launches' index, the factories'
    fingerprint table, the kernel sources' hashes, the shipped archive's index and the
    primitives' modules, with which the standard reductions, products and scans plan and
    find their shipped kernels with numba unloaded."""
    if not config.SIMULATE:
        _stored_mod.prepare()
        _factories.prepare()
    for m in (_red, _scan, _mv, _copy, _compaction):
        if isinstance(m, _lazy):
            m.load()
    _PLANNING[0] = True


def _load_layer() -> None:
    _load_planning()   # first what the calls need to run without numba meanwhile
    importlib.import_module("forge_array.primitives").load_kernels()
    if background.mode() == "background":
        # off the calling thread: what the layers above register (the fusion layer's
        # execution modules, which a fused function's first call would otherwise import)
        for load in LAYER_LOADS:
            load()


def _layer_loaded() -> None:
    _LAYER[0] = _PLANNING[0] = True


def layer_ready() -> bool:
    """Whether the kernel layer is loaded.  In background compile mode the first call queues
    its import (numba, the kernel modules) and the calls until it is done return False (and
    use their fallbacks); in sync mode it is imported now.

    >>> layer_ready() in (True, False)
    True
    """
    if _LAYER[0]:
        return True
    if background.ready("kernel layer", _load_layer):
        _layer_loaded()
        return True
    return False


def _prefetch_layer() -> None:
    """The first GPU of the process is named: in background compile mode, load the kernel
    layer's numba-free part now, in this thread (:func:`_load_planning`, about 50 ms on an
    H200 host), so that the first standard calls find the planning modules and the shipped
    kernels' indexes loaded.  Not on the worker thread: while the calling thread creates its
    first arrays, CuPy's context and copies hold the interpreter, and a first call then found
    the worker's load unfinished and did it itself, 20-30 ms (``python -m bench.suite_startup``).
    numba loads at the first call that needs it (a kernel to build, an operation whose
    planning is not numba-free), on the worker: its import allocates enough for a full
    collection of the garbage collector, which holds the interpreter 30-40 ms whatever
    thread runs it."""
    if not _PLANNING[0] and not _LAYER[0] and config.KERNELS_ENABLED and background.mode() == "background":
        try:
            _load_planning()
        except Exception:  # noqa: BLE001  (the layer's load meets it again and reports it)
            pass


_devices.ON_FIRST_GPU.append(_prefetch_layer)


def _kernels(x) -> bool:
    """Whether our kernels take backend array ``x`` now: they run on it and the kernel
    layer is loaded (:func:`layer_ready`)."""
    if not kernels_available(x):
        return False
    return _LAYER[0] or layer_ready()


_PENDING = background.PENDING
_attempt = background.attempt


__all__ = [
    "layer_ready", "reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_mean", "reduce_var",
    "reduce_std", "reduce_any", "reduce_all", "argmax", "argmin", "cumulative_sum",
    "cumulative_prod", "matmul", "vecdot", "tensordot", "copy", "full_fast", "axis_fast",
    "matmul_fast", "vecdot_fast", "tensordot_fast", "nonzero", "compress_rows", "unique",
]


def _ns(x):
    """array-api-compat namespace (numpy or cupy flavour) for a backend array."""
    if isinstance(x, np.ndarray):
        import array_api_compat.numpy as ns  # noqa: PLC0415
    else:
        import array_api_compat.cupy as ns  # noqa: PLC0415
    return ns


def _out(x, res, dtype, shape=None):
    """Backend array (not a NumPy scalar) of ``dtype``."""
    if isinstance(res, np.generic) or not hasattr(res, "dtype"):
        res = np.asarray(res)
    if res.dtype != dtype:
        res = res.astype(dtype)
    return res


def _cupy_inf_fix(x, res, axis, keepdims, target):
    """CuPy's CUB min/max use +-max-finite as identity: an all-(+-inf) slice
    comes back as +-max-finite (cupy/cupy#7424, #8180). Put the infinity back."""
    if isinstance(x, np.ndarray) or x.dtype.kind != "f" or x.size == 0:
        return res
    if res.ndim == 0 and abs(float(res)) != np.finfo(x.dtype).max:
        return res   # one read of the result instead of three more kernels (compiled by CuPy)
    ns = _xp(x)
    # the ufunc, not ``x == target``: CuPy's comparison operator imports cupyx.scipy (and so
    # SciPy, 1-5 s) on its first use, to defer to sparse matrices
    allinf = ns.all(ns.equal(x, target), axis=axis, keepdims=keepdims)
    return ns.where(allinf, x.dtype.type(target), res)


def full_fast(name, x, dtype, keepdims, extra):
    """The replay of a full named reduction's cached launch, or None (see
    :func:`forge_array.primitives.reductions.full_fast`); the namespace calls it only with
    arguments it has checked before.  None until the planning modules have loaded."""
    if _PLANNING[0]:
        return _red.full_fast(name, x, dtype, keepdims, extra)
    return None


def axis_fast(name, x, axis, dtype, keepdims):
    """The replay of a named reduction's cached launch along ``axis`` (a sorted tuple of
    non-negative ints) when our kernels are on, or None (see
    :func:`forge_array.primitives.reductions.axis_fast`); the namespace calls it only with
    arguments it has checked before."""
    if _PLANNING[0] and config.KERNELS_ENABLED:
        return _red.axis_fast(name, x, axis, dtype, keepdims)
    return None


def matmul_fast(a, b):
    """The replay of ``a @ b``'s cached launch when our kernels are on, or None (see
    :func:`forge_array.primitives.matvec.matmul_fast`); the caller has checked that both
    operands are on the current device."""
    if _PLANNING[0] and config.KERNELS_ENABLED:
        return _mv.matmul_fast(a, b)
    return None


def vecdot_fast(a, b, axis):
    """The replay of ``vecdot``'s cached launch along the negative ``axis`` when our kernels
    are on, or None (see :func:`forge_array.primitives.matvec.vecdot_fast`)."""
    if _PLANNING[0] and config.KERNELS_ENABLED:
        return _mv.vecdot_fast(a, b, axis)
    return None


def tensordot_fast(a, b, axes):
    """The replay of ``tensordot``'s cached launch over ``axes`` (a pair of tuples of
    non-negative ints) when our kernels are on, or None (see
    :func:`forge_array.primitives.matvec.tensordot_fast`)."""
    if _PLANNING[0] and config.KERNELS_ENABLED:
        return _mv.tensordot_fast(a, b, axes)
    return None


def _ours(x, name, *args, moments=False):
    """The primitive ``name`` of ``primitives.reductions`` on ``(x, *args)``, or
    :data:`_PENDING` when our kernels do not take ``x`` now (not on its device, complex
    moments, the layer or a kernel still being built).  While numba is not loaded (background
    mode), a reduction whose kernels the disk cache or the shipped archive holds runs them,
    or one whose launch an earlier process stored runs that (:func:`_without_numba`); a
    call without either queues the layer's load and waits for it where its fallback would
    compile (:func:`_await_layer`), else runs on the fallback and is prepared for later."""
    if not kernels_available(x) or (moments and x.dtype.kind == "c"):
        return _PENDING
    if not _LAYER[0]:
        if _layer_loading():
            if x.size == 0:   # nothing stored, nothing to prepare: the fallback's result at once
                return _PENDING
            r = _without_numba(lambda: getattr(_red, name)(x, *args), lambda: _stored_full(x, name, args))
            if r is not None:
                return r
            if not (layer_ready() or _await_layer(_cub_reduction(name, x, args[0]))):
                _prepare_later(_full_key(x, name, args), lambda: getattr(_red, name)(x, *args), x.nbytes)
                return _PENDING
        elif not layer_ready():
            return _PENDING
    r = _attempt(getattr(_red, name), x, *args)
    if r is _PENDING and not config.SIMULATE:   # a kernel is being built: this call again behind it
        _prepare_later((name, _stored_mod.layout(x), repr(args)), lambda: getattr(_red, name)(x, *args),
                       x.nbytes)
    return r


def _shipped(call):
    """``call()`` with numba unloaded, or :data:`_PENDING`: the reductions, products and
    scans plan without numba and find their kernels in the disk cache or the shipped archive
    (:func:`.runtime.factories.shipped_only`); a call that would import a kernel module or
    build a kernel stops there and takes the steps below."""
    with _factories.shipped_only():
        try:
            return call()
        except background.Pending:
            return _PENDING


def _without_numba(call, stored):
    """A call's result while numba is not loaded, or None: ``call()`` on the shipped kernels
    (:func:`_shipped`) once the planning modules have loaded, else first the launch an
    earlier process stored (``stored()``, None where there is none: it needs no planning
    module).  Neither queues numba's load: a process whose calls all find their kernels
    never loads it."""
    if _PLANNING[0]:
        r = _shipped(call)
        return stored() if r is _PENDING else r
    r = stored()
    if r is None:
        r = _shipped(call)
    return None if r is _PENDING else r


def _before_numba(x, call):
    """``call()`` on the shipped kernels while numba is not loaded (background mode, see
    :func:`_without_numba`), or None: then the caller queues the layer's load and falls back."""
    if kernels_available(x) and _layer_loading():
        return _without_numba(call, lambda: None)
    return None


def _full_key(x, name, args):
    """The stored-launch key of the reduction ``name`` on ``(x, *args)`` (the arguments of
    the routed function), or None where such launches are not stored."""
    dtype = extra = None
    if name == "sum" or name == "prod":
        axis, dtype, keepdims = args
    elif name == "var" or name == "std":
        axis, extra, keepdims = args
    else:
        axis, keepdims = args
    return _stored_mod.reduction_key(name, x, axis, dtype, keepdims, extra)


def _stored_full(x, name, args):
    """The result of the stored launch of the reduction ``name`` on ``(x, *args)``, or
    None when there is none."""
    key = _full_key(x, name, args)
    return None if key is None else _stored(key, (x,))


#: how long, in seconds, a call that finds no stored launch while the kernel layer loads
#: waits for the load when its fallback would compile (:func:`_await_layer`); past it the
#: call runs on the fallback
LAYER_WAIT_S = 5.0
_FALLBACK_COMPILES: list = []   # [bool], decided once per process


def _fallback_compiles() -> bool:
    """Whether CuPy's fallback would compile its kernels with NVRTC now: its kernel cache
    (``CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache``, CuPy's rule) holds nothing, as on a
    fresh machine.  Decided at the first call that asks, once per process."""
    if not _FALLBACK_COMPILES:
        folder = os.environ.get("CUPY_CACHE_DIR") or os.path.expanduser(os.path.join("~", ".cupy", "kernel_cache"))
        try:
            with os.scandir(folder) as entries:
                empty = next(entries, None) is None
        except OSError:   # missing or unreadable: nothing cached there
            empty = True
        _FALLBACK_COMPILES.append(empty)
    return _FALLBACK_COMPILES[0]


def _cub_reduction(name, x, axis) -> bool:
    """Whether CuPy runs the reduction ``name`` of ``x`` over ``axis`` (None or a tuple) with
    CUB's reductions built into it, compiling nothing: ``sum``, ``prod``, ``max``, ``min``
    of a C-contiguous array over all its axes or its trailing ones."""
    if name not in ("sum", "prod", "max", "min") or not x.flags.c_contiguous:
        return False
    return axis is None or tuple(axis) == tuple(range(x.ndim - len(axis), x.ndim))


def _await_layer(built_in=False) -> bool:
    """For a call that found no stored launch while the kernel layer loads: wait for the
    load (at most :data:`LAYER_WAIT_S`) where the call's fallback would compile, i.e. CuPy
    does not run it from kernels built into it (``built_in``: CUB's reductions and scans)
    and its kernel cache is empty (:func:`_fallback_compiles`); True when the layer is
    loaded now.

    On a fresh machine CuPy compiles a reduction kernel at its first use (0.2-0.8 s each on
    an H200: a first ``mean`` 0.48 s, ``std`` 0.82 s, ``sum(axis=0)`` 0.21 s), holding the
    interpreter while the layer's load (numba and the kernel modules, about half a second)
    waits for it; once loaded, the shipped kernels (:mod:`.runtime.prebuilt`) run those
    calls with no compile (``python -m bench.suite_startup``: the first ``mean`` + ``std``
    of an empty-cache process 0.005 s, CuPy's 0.79).  A fallback that is quick takes the
    call as before."""
    if built_in or not _fallback_compiles():
        return False
    layer_ready()   # queued, if it was not
    background.wait_for("kernel layer", LAYER_WAIT_S)
    return layer_ready()


#: calls prepared for later in this process (see :func:`_prepare_later`), at most MAX_PREPARED,
#: each on operands of at most PREPARE_MAX_BYTES (its run allocates outputs beside the caller's)
_PREPARED = [0]
MAX_PREPARED = 64
PREPARE_MAX_BYTES = 1 << 28


def _prepare_later(key, call, nbytes):
    """A call that runs on its fallback because the kernel layer is still loading or one of
    its kernels is being built: queue ``call()`` (the primitive on the same arrays) behind
    the load and the builds, so that its launch is cached and stored before the next such
    call, in this process or the next; its result is dropped.  The arrays stay referenced until it has
    run; at most :data:`MAX_PREPARED` calls per process, each on ``nbytes`` <=
    :data:`PREPARE_MAX_BYTES` of operands (its outputs take memory beside the caller's)."""
    if (_PREPARED[0] >= MAX_PREPARED or nbytes > PREPARE_MAX_BYTES
            or background.state(("prepare", key)) is not None):
        return
    _PREPARED[0] += 1
    layer_ready()   # the layer's load first
    background.submit(("prepare", key), call)


def _stored(key, operands):
    """The result of the stored launch of ``key`` on ``operands``, or None (then the caller
    takes its fallback; a stored launch that fails is dropped, with one warning)."""
    try:
        ent = _stored_mod.lookup(key)
    except (TypeError, AttributeError):   # an argument without a stored form
        return None
    if ent is None:
        return None
    try:
        return ent(operands)
    except Exception as exc:  # noqa: BLE001  (the fallback gives the result)
        _stored_mod.drop(key, exc)
        return None


def reduce_sum(x, axis, dtype, keepdims):
    """Sum over ``axis`` (tuple), accumulated and returned in ``dtype``."""
    r = _ours(x, "sum", axis, dtype, keepdims)
    if r is not _PENDING:
        return r
    return _out(x, _xp(x).sum(x, axis=axis, dtype=dtype, keepdims=keepdims), dtype)


def reduce_prod(x, axis, dtype, keepdims):
    """Product over ``axis`` (tuple), accumulated and returned in ``dtype``."""
    r = _ours(x, "prod", axis, dtype, keepdims)
    if r is not _PENDING:
        return r
    return _out(x, _xp(x).prod(x, axis=axis, dtype=dtype, keepdims=keepdims), dtype)


def reduce_max(x, axis, keepdims):
    """Maximum over ``axis`` (tuple, no empty reductions); NaN propagates."""
    r = _ours(x, "max", axis, keepdims)
    if r is not _PENDING:
        return r
    res = _xp(x).max(x, axis=axis, keepdims=keepdims)
    return _out(x, _cupy_inf_fix(x, res, axis, keepdims, -np.inf), x.dtype)


def reduce_min(x, axis, keepdims):
    """Minimum over ``axis`` (tuple, no empty reductions); NaN propagates."""
    r = _ours(x, "min", axis, keepdims)
    if r is not _PENDING:
        return r
    res = _xp(x).min(x, axis=axis, keepdims=keepdims)
    return _out(x, _cupy_inf_fix(x, res, axis, keepdims, np.inf), x.dtype)


def reduce_mean(x, axis, keepdims):
    """Arithmetic mean over ``axis`` (tuple) of a floating-point array."""
    r = _ours(x, "mean", axis, keepdims)
    if r is not _PENDING:
        return r
    return _out(x, _xp(x).mean(x, axis=axis, keepdims=keepdims), x.dtype)


def reduce_var(x, axis, correction, keepdims):
    """Variance over ``axis`` (tuple) with ``correction`` degrees of freedom removed."""
    r = _ours(x, "var", axis, correction, keepdims, moments=True)
    if r is not _PENDING:
        return r
    res = _xp(x).var(x, axis=axis, ddof=correction, keepdims=keepdims)
    return _out(x, res, x.dtype)


def reduce_std(x, axis, correction, keepdims):
    """Standard deviation over ``axis`` (tuple) with ``correction``."""
    r = _ours(x, "std", axis, correction, keepdims, moments=True)
    if r is not _PENDING:
        return r
    res = _xp(x).std(x, axis=axis, ddof=correction, keepdims=keepdims)
    return _out(x, res, x.dtype)


def reduce_any(x, axis, keepdims):
    """Logical OR over ``axis`` (tuple) -> bool."""
    r = _ours(x, "any", axis, keepdims)
    if r is not _PENDING:
        return r
    return _out(x, _xp(x).any(x, axis=axis, keepdims=keepdims), np.dtype(bool))


def reduce_all(x, axis, keepdims):
    """Logical AND over ``axis`` (tuple) -> bool."""
    r = _ours(x, "all", axis, keepdims)
    if r is not _PENDING:
        return r
    return _out(x, _xp(x).all(x, axis=axis, keepdims=keepdims), np.dtype(bool))


def _arg_inf_fix(x, res, axis, keepdims, target):
    # see _cupy_inf_fix: an all-(+-inf) slice must give index 0
    if isinstance(x, np.ndarray) or x.dtype.kind != "f" or x.size == 0:
        return res
    if res.ndim == 0 and 0 <= int(res) < x.size and float(x[np.unravel_index(int(res), x.shape)]) != target:
        return res   # the element found is not the infinity: not an all-infinity input
    ns = _xp(x)
    allinf = ns.all(ns.equal(x, target), axis=axis, keepdims=keepdims)   # see _cupy_inf_fix
    return ns.where(allinf, 0, res)


def argmax(x, axis, keepdims):
    """Index of the first maximum along ``axis`` (int, or None for the flattened
    array) -> int64; NaN counts as the maximum."""
    r = _ours(x, "argmax", axis, keepdims)
    if r is not _PENDING:
        return r
    res = _xp(x).argmax(x, axis=axis, keepdims=keepdims)
    return _out(x, _arg_inf_fix(x, res, axis, keepdims, -np.inf), np.dtype(np.int64))


def argmin(x, axis, keepdims):
    """Index of the first minimum along ``axis`` (int or None) -> int64."""
    r = _ours(x, "argmin", axis, keepdims)
    if r is not _PENDING:
        return r
    res = _xp(x).argmin(x, axis=axis, keepdims=keepdims)
    return _out(x, _arg_inf_fix(x, res, axis, keepdims, np.inf), np.dtype(np.int64))


def cumulative_fast(name, x, axis, dtype, include_initial):
    """The replayed launch of ``name`` (cumulative_sum / cumulative_prod) when our kernels
    run on ``x`` and a plan for its layout exists; None otherwise."""
    if _PLANNING[0] and kernels_available(x):
        return _scan.cumulative_fast(name, x, axis, dtype, include_initial)
    return None


def _layer_loading() -> bool:
    """Whether calls look for stored launches now: on a GPU, in background mode, the kernel
    layer not loaded (see :func:`_ours`)."""
    return not _LAYER[0] and not config.SIMULATE and not background.usable("kernel layer")


def _cub_scannable(x, dtype) -> bool:
    """Whether the backend's scan of ``x`` in ``dtype`` runs from CUB's scan built into CuPy,
    with nothing to compile (:func:`_backend_scan`): a C-contiguous 1-D CuPy array scanned in
    its own dtype."""
    return (x.ndim == 1 and not isinstance(x, np.ndarray) and x.flags.c_contiguous
            and np.dtype(dtype) == x.dtype and x.dtype.kind in "iuf")


def _cub_scan(x, name):
    """CuPy's CUB scan (``cupy.cuda.cub.cub_scan``) of a copy of the 1-D array ``x``, or None
    where CuPy has none for it.  CuPy's own ``cumsum`` makes that copy with ``astype``, an
    element-wise kernel it compiles at first use (about 0.2 s on an H200 with its kernel
    cache empty); a device-to-device copy of the memory compiles nothing."""
    try:
        from cupy.cuda import cub  # noqa: PLC0415
    except ImportError:
        return None
    op = cub.CUPY_CUB_CUMSUM if name == "cumsum" else cub.CUPY_CUB_CUMPROD
    out = _xp(x).empty_like(x)
    if x.nbytes:
        out.data.copy_from_device_async(x.data, x.nbytes)
    return cub.cub_scan(out, op)


def _backend_scan(x, name, initial, axis, dtype, include_initial):
    """NumPy's / CuPy's ``cumsum`` / ``cumprod`` along ``axis``, with a leading
    ``initial`` when ``include_initial``."""
    xp = _xp(x)
    # a 1-D scan: CuPy's CUB scan; with an axis CuPy compiles a batched scan kernel at first
    # use (a first cumsum of 10^5 float32 with axis=0 took 343-472 ms on an H100, CuPy's own
    # cumsum(x) 0.3 ms: bench.suite_compile)
    res = _cub_scan(x, name) if _cub_scannable(x, dtype) else None
    if res is None:
        res = getattr(xp, name)(x, axis=None if x.ndim == 1 else axis, dtype=dtype)
    if include_initial:
        shape = list(res.shape)
        shape[axis] = 1
        res = xp.concatenate([xp.full(shape, initial, dtype=res.dtype), res], axis=axis)
    return res


def _routed_scan(name, backend_name, initial, x, axis, dtype, include_initial):
    """``name`` (cumulative_sum / cumulative_prod) on our kernels, a stored launch while the
    layer loads, or the backend's ``backend_name`` with ``initial`` in front."""
    def ours():
        return getattr(_scan, name)(x, axis=axis, dtype=dtype, include_initial=include_initial)

    if kernels_available(x) and _layer_loading():
        key = _stored_mod.scan_key(name, x, axis, dtype, include_initial)
        r = _without_numba(ours, lambda: _stored(key, (x,)))
        if r is not None:
            return r
        if not (layer_ready() or _await_layer(_cub_scannable(x, dtype))):
            _prepare_later(key, ours, x.nbytes)
    if _kernels(x):
        r = _attempt(ours)
        if r is not _PENDING:
            return r
        if not config.SIMULATE:   # a kernel is being built: this call again behind it
            _prepare_later(_stored_mod.scan_key(name, x, axis, dtype, include_initial), ours, x.nbytes)
    res = _backend_scan(x, backend_name, initial, axis, dtype, include_initial)
    return _out(x, res, dtype)


def cumulative_sum(x, axis, dtype, include_initial):
    """Inclusive scan with + along ``axis`` (non-negative int) in ``dtype``; with
    ``include_initial`` the output starts with a 0 and is one longer."""
    return _routed_scan("cumulative_sum", "cumsum", 0, x, axis, dtype, include_initial)


def cumulative_prod(x, axis, dtype, include_initial):
    """Inclusive scan with * along ``axis`` in ``dtype`` (leading 1 with include_initial)."""
    return _routed_scan("cumulative_prod", "cumprod", 1, x, axis, dtype, include_initial)


def matmul(a, b):
    """Matrix product; ``a`` and ``b`` share one dtype, shapes already checked."""
    r = None
    if kernels_available(a):
        if _layer_loading():   # the shipped kernels or a stored launch (see _ours)
            key = _stored_mod.pair_key("matmul", a, b)
            r = _without_numba(lambda: _mv.route_matmul(a, b), lambda: _stored(key, (a, b)))
            if r is None:   # cuBLAS runs it meanwhile, with no compile: no wait
                _prepare_later(key, lambda: _mv.route_matmul(a, b), a.nbytes + b.nbytes)
        if r is None and (_LAYER[0] or layer_ready()):
            r = _attempt(_mv.route_matmul, a, b)
            if r is _PENDING and not config.SIMULATE:   # a kernel is being built: the call again behind it
                _prepare_later(_stored_mod.pair_key("matmul", a, b), lambda: _mv.route_matmul(a, b),
                               a.nbytes + b.nbytes)
    if r is not None and r is not _PENDING:
        return _out(a, r, a.dtype)
    return backend_matmul(a, b)


def backend_matmul(a, b):
    """``a @ b`` by the backend (cuBLAS through CuPy, or NumPy); ``a`` and ``b`` share one
    dtype. The namespace's ``matmul`` calls it directly for a product of two matrices (more
    than one row in ``a`` and one column in ``b``: nothing for the matrix-vector kernels)."""
    return _out(a, _xp(a).matmul(a, b), a.dtype)


def vecdot(a, b, axis):
    """sum(conj(a) * b) along ``axis`` (a NEGATIVE int, counted from the end of the
    broadcast shape, so operands of different ndim need no broadcasting copy)."""
    r = _before_numba(a, lambda: _mv.route_vecdot(a, b, axis))
    if r is None and _kernels(a):
        r = _attempt(_mv.route_vecdot, a, b, axis)
    if r is not None and r is not _PENDING:
        return _out(a, r, a.dtype)
    return _out(a, _ns(a).vecdot(a, b, axis=axis), a.dtype)


def tensordot(a, b, axes):
    """Tensor contraction over ``axes = (axes_of_a, axes_of_b)`` (tuples of
    non-negative ints of equal length and matching sizes)."""
    r = _before_numba(a, lambda: _mv.route_tensordot(a, b, axes))
    if r is None and _kernels(a):
        r = _attempt(_mv.route_tensordot, a, b, axes)
    if r is not None and r is not _PENDING:
        return _out(a, r, a.dtype)
    return _out(a, _ns(a).tensordot(a, b, axes=axes), a.dtype)


def nonzero(x):
    """NumPy's ``nonzero`` of ``x`` (at least 1-D) as int64 index arrays: the positions of
    the true elements through our scan (:mod:`forge_array.primitives.compaction`)."""
    if _kernels(x):
        r = _attempt(_compaction.nonzero, x)
        if r is not _PENDING:
            return r
    return tuple(r.astype(np.int64, copy=False) for r in _xp(x).nonzero(x))


#: the shortest rows (elements) :func:`compress_rows` copies with our kernels, a warp per row;
#: narrower rows take the backend's indexing
ROW_GATHER_MIN = 32


def compress_rows(x, mask):
    """``x[mask]`` for a 1-D bool ``mask`` over the first axis of C-contiguous ``x`` (2 or more
    dimensions, rows of at least :data:`ROW_GATHER_MIN` elements) through our scan and row
    gather (:func:`forge_array.primitives.compaction.compress_rows`), or None where our
    kernels do not take it now (the caller indexes as usual)."""
    if (x.ndim >= 2 and x.shape[0] and x.size // x.shape[0] >= ROW_GATHER_MIN and x.flags.c_contiguous
            and _kernels(x)):
        r = _attempt(_compaction.compress_rows, x, mask)
        if r is not _PENDING:
            return r
    return None


def unique(x, index, inverse, counts):
    """``(values, index, inverse, counts)`` of ``x`` flattened through our scan's compaction
    (:func:`forge_array.primitives.compaction.unique`: each of the last three None unless
    asked), or None where our kernels do not take ``x`` now (the caller takes the backend's
    own function)."""
    if _kernels(x):
        r = _attempt(_compaction.unique, x, index, inverse, counts)
        if r is not _PENDING:
            return r
    return None


def copy(x):
    """A C-contiguous copy of ``x`` on its device."""
    if _kernels(x):
        r = _attempt(_copy.copy, x)
        if r is not _PENDING:
            return r
    if isinstance(x, np.ndarray):
        return np.array(x, copy=True, order="C")
    return _ns(x).asarray(x).copy(order="C")
