"""Scans on backend arrays: generic ``accumulate`` and ``cumulative_sum`` / ``cumulative_prod``.

On our kernels (:mod:`forge_array.kernels.scan`, single pass with decoupled look-back) when
``runtime.kernels_available(x)``; otherwise NumPy (``cumsum`` / ufunc ``accumulate``) or a
numba loop on the CPU for generic operators.

Example
-------
>>> import numpy as np
>>> from forge_array import ops
>>> from forge_array.primitives import accumulate, cumulative_sum
>>> cumulative_sum(np.array([1, 2, 3], dtype=np.int32), include_initial=True).tolist()
[0, 1, 3, 6]
>>> a, b = np.array([0.5, 0.5, 0.5]), np.array([1.0, 1.0, 1.0])
>>> accumulate(ops.affine, (a, b))[1].tolist()      # h_t = 0.5 h_(t-1) + 1, h_(-1) = 0
[1.0, 1.5, 1.75]
"""

from __future__ import annotations

import math
import threading

import numba
import numpy as np

from .. import runtime
from ..kernels import narrow_scan as knarrow
from ..kernels import scan as kscan
from ..kernels import scan_pipeline as kpipe
from ..runtime import tuning
from ._layout import collapse

__all__ = ["accumulate", "cumulative_sum", "cumulative_prod", "scan_statistics"]

try:
    from numpy.exceptions import AxisError
except ImportError:  # pragma: no cover - numpy < 1.25
    from numpy import AxisError

_EPOCH_LIMIT = (1 << 30) - 1


# --------------------------------------------------------------------------- operators


def _resolve(op):
    """(fn, identity(dtypes) or None, name) of an Operator or a plain function."""
    fn = getattr(op, "fn", op)
    if not callable(fn):
        raise TypeError(f"accumulate: operator must be callable, got {type(op).__name__}")
    ident = getattr(op, "identity", None)
    if ident is not None and not callable(ident):
        ident = None
    name = getattr(op, "name", None) or getattr(fn, "__qualname__", repr(fn))
    return fn, ident, name


_CHECKED: dict = {}


def _check_op(fn, tuple_op, acc_dtypes, name):
    """TypeError unless ``fn`` compiles for elements of ``acc_dtypes`` and returns values that
    convert to them (same structure; same kind or narrower, as NumPy's same_kind casting)."""
    key = (fn, tuple_op, acc_dtypes)
    try:
        if key in _CHECKED:
            return
    except TypeError:
        key = None
    types = tuple(runtime.numba_type(d) for d in acc_dtypes)
    if tuple_op:
        argt = numba.types.Tuple(types) if len(set(types)) > 1 else numba.types.UniTuple(types[0], len(types))
        ret = runtime.result_type(fn, (argt, argt))
        rets = list(getattr(ret, "types", ()))
        if not isinstance(ret, numba.types.BaseTuple) or len(rets) != len(types):
            raise TypeError(f"accumulate: operator {name} returns {ret} for elements of "
                            f"{argt}; expected a tuple of {len(types)} values")
    else:
        ret = runtime.result_type(fn, (types[0], types[0]))
        rets = [ret]
    for r, d in zip(rets, acc_dtypes):
        try:
            rd = numba.np.numpy_support.as_dtype(r)
        except Exception as exc:
            raise TypeError(f"accumulate: operator {name} returns {r}, not a number, for "
                            f"elements of {d}") from exc
        if not (np.can_cast(rd, d, "same_kind") or (d.kind == "b" and rd.kind in "iub")):
            raise TypeError(f"accumulate: operator {name} returns {rd} for elements of {d}; "
                            "the result must keep the element type")
    if key is not None:
        _CHECKED[key] = True


# --------------------------------------------------------------------------- arguments


_xp = runtime.array_module


def _inputs(x):
    if isinstance(x, (tuple, list)):
        xs = list(x)
        if not xs:
            raise ValueError("accumulate: empty tuple of arrays")
        is_tuple = True
    else:
        xs = [x]
        is_tuple = False
    for a in xs:
        if not hasattr(a, "shape") or not hasattr(a, "dtype"):
            raise TypeError(f"accumulate: expected NumPy or CuPy arrays, got {type(a).__name__}")
    shape = xs[0].shape
    kind = runtime.is_cupy_array(xs[0])
    for a in xs[1:]:
        if a.shape != shape:
            raise ValueError(f"accumulate: arrays of a tuple must have one shape, got {shape} "
                             f"and {a.shape}")
        if runtime.is_cupy_array(a) != kind:
            raise ValueError("accumulate: arrays of a tuple must be on one device")
        if kind and a.device != xs[0].device:
            raise ValueError("accumulate: arrays of a tuple must be on one device")
    return xs, is_tuple


def _normalize_axis(axis, ndim):
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"accumulate: axis must be an int or None, got {type(axis).__name__}")
    axis = int(axis)
    if not -ndim <= axis < ndim:
        raise AxisError(axis, ndim)
    return axis % ndim


def _value(v, dtypes, what):
    """Tuple of NumPy scalars of ``dtypes`` from a scalar or tuple ``v``."""
    vals = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(vals) != len(dtypes):
        raise ValueError(f"accumulate: {what} has {len(vals)} components, expected {len(dtypes)}")
    out = []
    for a, d in zip(vals, dtypes):
        a = a.item() if hasattr(a, "item") and getattr(a, "size", 1) == 1 else a
        with np.errstate(all="ignore"):
            out.append(np.asarray(a).astype(d)[()])
    return tuple(out)


# --------------------------------------------------------------------------- public API


def accumulate(op, x, /, *, axis=None, init=None, include_initial=False, exclusive=False,
               reverse=False, out=None, deterministic=False):
    """Inclusive scan of ``x`` with the associative operator ``op`` along ``axis``.

    ``op`` is a :class:`forge_array.ops.Operator` or any plain Python function of two
    elements that numba compiles (commutative or not); elements are scalars, or tuples when
    ``x`` is a tuple of arrays (struct-of-arrays: the result is then a tuple of arrays).
    ``axis=None`` scans the C-order flattening (as ``numpy.cumsum``). The result at ``k`` is
    ``op(...op(op(init, x_0), x_1)..., x_k)`` (``init`` left out when None).

    ``include_initial``: the output is one longer along ``axis`` and starts with ``init``
    (the operator's identity when ``init`` is None). ``exclusive``: element ``k`` gets the
    combination of the elements before it (``init`` / identity first). ``reverse``: scan
    from the end (the result is ``flip(accumulate(op, flip(x)))``). ``out``: backend
    array(s) of the result's shape and dtype(s), possibly views. ``deterministic``:
    bitwise-identical results run to run for floating-point operators (the look-back then
    combines in a fixed order; see docs/scans.md for the cost).

    >>> import numpy as np
    >>> accumulate(lambda a, b: max(a, b), np.array([3, 1, 4, 1, 5])).tolist()
    [3, 3, 4, 4, 5]
    >>> matmul2 = lambda p, q: (p[0] * q[0] + p[1] * q[2], p[0] * q[1] + p[1] * q[3],
    ...                         p[2] * q[0] + p[3] * q[2], p[2] * q[1] + p[3] * q[3])
    >>> m = tuple(np.array([v, v]) for v in (1.0, 1.0, 0.0, 1.0))   # [[1,1],[0,1]] twice
    >>> [c.tolist() for c in accumulate(matmul2, m)]
    [[1.0, 1.0], [1.0, 2.0], [0.0, 0.0], [1.0, 1.0]]
    """
    fn, ident, name = _resolve(op)
    xs, is_tuple = _inputs(x)
    dtypes = tuple(np.dtype(a.dtype) for a in xs)
    return _accumulate(fn, is_tuple, xs, dtypes, dtypes, ident, name, axis=axis, init=init,
                       include_initial=include_initial, exclusive=exclusive, reverse=reverse,
                       out=out, deterministic=deterministic, flatten=True)


def _accumulate(fn, tuple_op, xs, in_dtypes, acc_dtypes, ident, name, *, axis, init,
                include_initial, exclusive, reverse, out, deterministic, flatten):
    fkey = None
    if init is None and out is None:  # replay the plan of an earlier call of the same layout
        fkey = _fast_key(fn, tuple_op, xs, acc_dtypes, axis, include_initial, exclusive,
                         reverse, deterministic, flatten)
        plan = _fast_plans().get(fkey) if fkey is not None else None
        if plan is not None:
            r = _run_fast(plan, xs, acc_dtypes, tuple_op, fkey[-1])
            if r is not None:
                return r
    if include_initial and exclusive:
        raise ValueError("accumulate: include_initial and exclusive exclude each other")
    _check_op(fn, tuple_op, acc_dtypes, name)
    flat = False
    if axis is None:
        if xs[0].ndim != 1:
            if not flatten:
                raise ValueError(f"{name}: axis must be given for a {xs[0].ndim}-D array")
            xs = [a.reshape(-1) for a in xs]
            flat = True
        axis = 0
    elif xs[0].ndim == 0:
        raise AxisError(axis, 0)
    else:
        axis = _normalize_axis(axis, xs[0].ndim)
    if init is not None:
        init = _value(init, acc_dtypes, "init")
    elif include_initial or exclusive:
        iv = ident(acc_dtypes if tuple_op else acc_dtypes[0]) if ident is not None else None
        if iv is None:
            raise ValueError(f"accumulate: operator {name} has no identity; pass init= for "
                             "include_initial / exclusive scans")
        init = _value(iv, acc_dtypes, "identity")
    shift = 1 if (include_initial or exclusive) else 0
    shape = list(xs[0].shape)
    n = shape[axis]
    m = n + 1 if include_initial else n
    shape[axis] = m
    shape = tuple(shape)
    xp = _xp(xs[0])
    if out is None:
        outs = [xp.empty(shape, dtype=d) for d in acc_dtypes]
    else:
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != len(acc_dtypes) or (isinstance(out, (tuple, list)) != tuple_op):
            want = f"a tuple of {len(acc_dtypes)} arrays" if tuple_op else "one array"
            raise ValueError(f"accumulate: out must be {want}")
        for o, d in zip(outs, acc_dtypes):
            if tuple(o.shape) != shape or np.dtype(o.dtype) != d:
                raise ValueError(f"accumulate: out has shape {tuple(o.shape)} and dtype {o.dtype}, "
                                 f"expected {shape} and {d}")
            if runtime.is_cupy_array(o) != runtime.is_cupy_array(xs[0]):
                raise ValueError("accumulate: out must be on the device of x")
    if n == 0 or math.prod(shape) == 0:
        if shift and math.prod(shape) > 0:
            for o, v in zip(outs, init):
                idx = [slice(None)] * len(shape)
                idx[axis] = -1 if reverse else 0
                o[tuple(idx)] = v
        return tuple(outs) if tuple_op else outs[0]
    if runtime.kernels_available(xs[0]) and all(d.itemsize <= 16 for d in acc_dtypes):
        plan = _scan_kernel(fn, tuple_op, xs, outs, in_dtypes, acc_dtypes, axis, init, shift,
                            m, reverse, deterministic)
        if plan is not None and fkey is not None:
            plan.flat = flat
            _remember(fkey, plan)
    else:
        _scan_cpu(fn, tuple_op, xs, outs, acc_dtypes, axis, init, shift, m, reverse)
    return tuple(outs) if tuple_op else outs[0]


def _sum_dtype(dt, dtype, name):
    if dtype is not None:
        dtype = np.dtype(dtype)
        if np.dtype(dt).kind == "c" and dtype.kind != "c":
            raise TypeError(f"{name}: cannot accumulate {dt} in {dtype}")
        return dtype
    dt = np.dtype(dt)
    if dt.kind == "b" or (dt.kind == "i" and dt.itemsize < 8):
        return np.dtype(np.int64)
    if dt.kind == "u" and dt.itemsize < 8:
        return np.dtype(np.uint64)
    return dt


_CUMULATIVE: dict = {}


def _cumulative(opname, x, axis, dtype, include_initial, out):
    if x.ndim == 0:
        raise ValueError(f"{opname}: x must have at least one dimension")
    if axis is None and x.ndim > 1:
        raise ValueError(f"{opname}: axis must be given for a {x.ndim}-D array")
    try:
        key = (opname, x.dtype, dtype)
        op, ind, acc = _CUMULATIVE[key]
    except (KeyError, TypeError):
        from .. import ops

        op = ops.add if opname == "cumulative_sum" else ops.multiply
        ind, acc = (np.dtype(x.dtype),), (_sum_dtype(x.dtype, dtype, opname),)
        try:
            _CUMULATIVE[key] = (op, ind, acc)
        except TypeError:
            pass
    return _accumulate(op.fn, False, [x], ind, acc, op.identity, opname,
                       axis=axis, init=None, include_initial=include_initial, exclusive=False,
                       reverse=False, out=out, deterministic=False, flatten=False)


def cumulative_fast(opname, x, axis, dtype, include_initial):
    """``cumulative_sum`` / ``cumulative_prod`` (``opname``) of backend array ``x`` along
    ``axis`` (a normalized int) in ``dtype`` when an earlier call of the same kind and layout
    left a launch plan to replay; None otherwise (the caller then takes the full path).

    >>> import numpy as np
    >>> x = np.arange(4.0)
    >>> r = cumulative_fast("cumulative_sum", x, 0, np.dtype("float64"), False)
    >>> r is None or r.tolist() == [0.0, 1.0, 3.0, 6.0]
    True
    """
    ent = _CUMULATIVE.get((opname, x.dtype, dtype))
    if ent is None:
        return None
    op, _, acc = ent
    # the key _fast_key builds for this call (one operand, no flags but include_initial)
    fkey = (op.fn, False, acc, axis, include_initial, False, False, False, False,
            (_layout_key(x),), _state_key(x))
    plan = _fast_plans().get(fkey)
    if plan is None:
        return None
    return _run_fast(plan, (x,), acc, False, fkey[-1])


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False, out=None):
    """Cumulative sum of backend array ``x`` along ``axis`` (optional for 1-D), accumulated in
    ``dtype`` (default: the standard's rule, int64 / uint64 for smaller integers and bool),
    without converting a copy of ``x`` first. ``include_initial`` prepends a 0.

    >>> import numpy as np
    >>> cumulative_sum(np.array([[1, 2], [3, 4]], dtype=np.int8), axis=0).tolist()
    [[1, 2], [4, 6]]
    """
    return _cumulative("cumulative_sum", x, axis, dtype, include_initial, out)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False, out=None):
    """Cumulative product of backend array ``x`` along ``axis`` (optional for 1-D); dtype
    rules as :func:`cumulative_sum`; ``include_initial`` prepends a 1.

    >>> import numpy as np
    >>> cumulative_prod(np.array([1.0, 2.0, 3.0]), include_initial=True).tolist()
    [1.0, 1.0, 2.0, 6.0]
    """
    return _cumulative("cumulative_prod", x, axis, dtype, include_initial, out)


# --------------------------------------------------------------------------- CPU path


_CPU_FNS: dict = {}


def _cpu_scanner(fn, tuple_op, dtypes):
    key = (fn, tuple_op, dtypes)
    try:
        f = _CPU_FNS.get(key)
    except TypeError:
        key, f = None, None
    if f is not None:
        return f
    K = len(dtypes)
    g = {"njit": numba.njit, "f": numba.njit(getattr(fn, "py_func", fn))}
    for k, d in enumerate(dtypes):
        g[f"T{k}"] = d.type
    ld = ", ".join(f"xs[{k}][b, i]" for k in range(K))
    st = "\n".join(f"    outs[{k}][b, i] = v[{k}]" for k in range(K))
    cast = ", ".join(f"T{k}(r[{k}])" for k in range(K))
    call = "f(a, x)" if tuple_op else "(f(a[0], x[0]),)"
    src = f"""
@njit
def ld(xs, b, i):
    return ({ld},)

@njit
def st(outs, b, i, v):
{st}

@njit
def op(a, x):
    r = {call}
    return ({cast},)

@njit
def scan(xs, outs, init, has_init, shift):
    nb, n = xs[0].shape
    m = outs[0].shape[1]
    for b in range(nb):
        acc = init
        if has_init and shift:
            st(outs, b, 0, acc)
        for i in range(n):
            x = ld(xs, b, i)
            if i == 0 and not has_init:
                acc = x
            else:
                acc = op(acc, x)
            if i + shift < m:
                st(outs, b, i + shift, acc)
"""
    exec(compile(src, "<forge_array.primitives.scan cpu>", "exec"), g)
    f = g["scan"]
    if key is not None:
        _CPU_FNS[key] = f
    return f


def _scan_cpu(fn, tuple_op, xs, outs, acc_dtypes, axis, init, shift, m, reverse):
    """CPU scan (NumPy arrays; CuPy arrays go through the host)."""
    on_gpu = runtime.is_cupy_array(xs[0])
    hx = [a.get() if on_gpu else a for a in xs]
    hx = [np.moveaxis(a, axis, -1) for a in hx]
    if reverse:
        hx = [a[..., ::-1] for a in hx]
    bshape = hx[0].shape[:-1]
    n = hx[0].shape[-1]
    nb = math.prod(bshape)
    xs2 = tuple(np.ascontiguousarray(a, dtype=a.dtype).reshape(nb, n) for a in hx)
    res = tuple(np.empty((nb, m), dtype=d) for d in acc_dtypes)
    has_init = init is not None
    iv = init if has_init else tuple(d.type(0) for d in acc_dtypes)
    from .. import ops

    ufn = {ops.add.fn: np.add, ops.multiply.fn: np.multiply}.get(fn) if not tuple_op else None
    if ufn is not None:
        r = ufn.accumulate(xs2[0], axis=1, dtype=acc_dtypes[0])
        if has_init:
            r = ufn(iv[0], r, dtype=acc_dtypes[0])
            if shift:
                res[0][:, 0] = iv[0]
        res[0][:, shift:] = r[:, : m - shift]
    else:
        xs2 = tuple(a.astype(d, copy=False) for a, d in zip(xs2, acc_dtypes))
        with np.errstate(all="ignore"):
            _cpu_scanner(fn, tuple_op, acc_dtypes)(xs2, res, iv, has_init, shift)
    for o, r in zip(outs, res):
        r = r.reshape(bshape + (m,))
        if reverse:
            r = r[..., ::-1]
        r = np.moveaxis(r, -1, axis)
        if on_gpu:
            o[...] = runtime.cupy().asarray(r)
        else:
            o[...] = r


# --------------------------------------------------------------------------- kernel path


class _State:
    """Tile-status storage of one (device, stream, value type, host thread): reused by every
    launch; the epoch makes old words read as INVALID, the base turns the monotone ticket
    counter into tile ids, so nothing is ever cleared between launches. It grows in place
    (launch plans keep a reference to it)."""

    __slots__ = ("xp", "packed", "acc_dtypes", "status", "vals", "counter", "base", "epoch",
                 "slots", "_bufs")

    def __init__(self, like, packed, acc_dtypes, slots):
        self.xp = _xp(like)
        self.packed = packed  # 32-bit pieces per packed status word (2 or 4), 0: flag + slots
        self.acc_dtypes = acc_dtypes
        self.counter = self.xp.zeros(kscan.STAT_WORDS, dtype=np.uint64)
        self.base = 0
        self.epoch = 1
        self.slots = 0
        self.grow(slots)

    def grow(self, slots):
        """Room for ``slots`` tile states (fresh zeroed words: epoch 0 is never used)."""
        xp = self.xp
        if self.packed:  # 2 words per tile (deterministic mode: aggregate and prefix)
            self.status = _zeros16(xp, 2 * slots * self.packed, np.uint32)
            self.vals = tuple(xp.zeros(1, dtype=d) for d in self.acc_dtypes)
        else:
            self.status = xp.zeros(slots, dtype=np.uint32)
            self.vals = tuple(xp.zeros(2 * slots, dtype=d) for d in self.acc_dtypes)
        self.slots = slots
        self._bufs = None

    def counter_room(self, words):
        """At least ``words`` words in the counter buffer (a traced pipeline launch writes
        its time stamps after the statistics words), the counts kept."""
        if self.counter.size < words:
            grown = self.xp.zeros(words, dtype=np.uint64)
            grown[: self.counter.size] = self.counter
            self.counter = grown
            self._bufs = None

    def reset(self):
        """Back to a fresh state in place (after a failed launch took an unknown number of
        tickets and left words half-published); the plans that hold it stay valid."""
        self.counter[...] = 0
        self.status[...] = 0
        self.base = 0
        self.epoch = 1

    def buffers(self):
        """Kernel buffers ``(status, vals, counter)`` (built once per allocation)."""
        b = self._bufs
        if b is None:
            b = self._bufs = (runtime.buffer_of(self.status),
                              tuple(runtime.buffer_of(v) for v in self.vals),
                              runtime.buffer_of(self.counter))
        return b


def _zeros16(xp, n, dtype):
    """Zeroed 1-D array of ``n`` elements starting on a 16-byte boundary (CuPy allocations
    always do; NumPy ones are over-allocated and sliced)."""
    if getattr(xp, "__wrapped__", xp) is not np:
        return xp.zeros(n, dtype=dtype)
    isz = np.dtype(dtype).itemsize
    raw = np.zeros(n + 16 // isz, dtype=dtype)
    k = (-raw.__array_interface__["data"][0] % 16) // isz
    return raw[k:k + n]


_local = threading.local()


def _state_key(like):
    if runtime.is_cupy_array(like):
        return runtime.stream_key()  # (device, stream)
    return ("host",)


def _state(like, acc_dtypes, slots, wide=True, flags=False):
    """The :class:`_State` of this stream and value type with room for ``slots`` tile
    states; ``flags``: a flag word per tile plus separate value slots even when the value
    would fit a packed word (the narrow scan keeps ``p`` values per tile)."""
    cache = getattr(_local, "states", None)
    if cache is None:
        cache = _local.states = {}
    packed = 0 if flags else (kscan.status_words(acc_dtypes) if kscan.packable(acc_dtypes, wide) else 0)
    key = _state_key(like) + (packed, acc_dtypes)
    st = cache.get(key)
    if st is None:
        st = cache[key] = _State(like, packed, acc_dtypes, max(slots, 1024))
    elif st.slots < slots:
        st.grow(max(slots, 2 * st.slots))
    return st


def _reset_states():
    for st in getattr(_local, "states", {}).values():
        st.reset()


# a failed launch (simulator) may have taken fewer tickets than its tiles
runtime.temp.on_discard(_reset_states)


def _after_launch(st, ntiles):
    st.base += ntiles
    st.epoch += 1
    if st.epoch >= _EPOCH_LIMIT:
        st.status[...] = 0
        st.epoch = 1


def scan_statistics():
    """Look-back statistics of this thread's scans so far (simulator and GPU): ``spins``
    (reads of a predecessor that had not published yet) and ``agg_steps`` (look-back steps
    that found only aggregates and went further back). Reads device memory (syncs).

    >>> sorted(scan_statistics())
    ['agg_steps', 'spins']
    """
    spins = agg = 0
    for st in getattr(_local, "states", {}).values():
        c = st.counter.get() if runtime.is_cupy_array(st.counter) else st.counter
        spins += int(c[kscan.STAT_SPINS])
        agg += int(c[kscan.STAT_AGG_WINDOWS])
    return {"spins": spins, "agg_steps": agg}


_INIT_CACHE: dict = {}


def _init_buffers(like, acc_dtypes, init):
    key = (_state_key(like), acc_dtypes, None if init is None else tuple(v.tobytes() for v in init))
    b = _INIT_CACHE.get(key)
    if b is None:
        xp = _xp(like)
        vals = init if init is not None else tuple(d.type(0) for d in acc_dtypes)
        b = tuple(xp.asarray(np.array([v], dtype=d)) for v, d in zip(vals, acc_dtypes))
        if len(_INIT_CACHE) > 256:
            _INIT_CACHE.clear()
        _INIT_CACHE[key] = b
    return b


_SMEM_LIMIT = 46 * 1024  # static shared memory of a block: 48 KiB, less the small arrays


def _items_for(p, acc_dtypes):
    """Items per thread of the tile scan: ``item_bytes`` (``item_bytes_8`` for values of
    8 bytes or more when given) over the value size, capped by ``items_max`` and by the
    padded tile's static shared memory, rounded down to a power of two."""
    nbytes = sum(d.itemsize for d in acc_dtypes)
    ib = p.get("item_bytes_8", p["item_bytes"]) if nbytes >= 8 else p["item_bytes"]
    items = max(1, min(p.get("items_max", 32), ib // nbytes,
                       _SMEM_LIMIT * 32 // (33 * p["block"] * nbytes)))
    return 1 << (items.bit_length() - 1)  # a power of two


def _fit_items(p, items, n, in_dtypes, acc_dtypes, tuple_op):
    """Items per thread so that a row's tiles are about equally full (``fit_items``): the
    fewest tiles of at most ``items`` per thread, then the fewest items (a multiple of the
    128-bit vector width) that still cover the row in that many tiles, allowing for the
    alignment lead. A row of 10^4 float32 with tiles of 8192 gets 2 tiles of 5120 instead
    of one full tile and one of 1808 elements (half the blocks of a batch idle).

    >>> p = {"block": 256, "fit_items": True}
    >>> f32 = (np.dtype("float32"),)
    >>> _fit_items(p, 32, 10**4, f32, f32, False), _fit_items(p, 32, 10**8, f32, f32, False)
    (20, 32)
    """
    if not p.get("fit_items", True) or tuple_op:
        return items
    v = max(16 // in_dtypes[0].itemsize, 16 // acc_dtypes[0].itemsize, 1)
    if items % v or items <= v:
        return items
    block = p["block"]
    span = n + v - 1  # the lead (< v elements) shifts the first tile
    nt = -(-span // (block * items))
    fit = -(-span // (nt * block))
    fit = -(-fit // v) * v
    return min(items, fit)


def _common_layout(arrs):
    """Element strides shared by all arrays, or None."""
    try:
        ss = [runtime.element_strides(a) for a in arrs]
    except ValueError:
        return None
    return ss[0] if all(s == ss[0] for s in ss) else None


# ---- launch plans: everything but the operands' addresses, replayed by a dict lookup


class _Plan:
    """One planned launch: kernel, grid and block, the init buffers (kept alive), the scalar
    arguments between ``init`` and the tile states, the status storage and the number of
    slots and tiles it needs. For replay (``_FAST``): the origin offsets (elements) of the
    input and output views, the result shape, whether the input was flattened, and the
    output misalignment the kernel was specialised for."""

    __slots__ = ("kernel", "grid", "block", "init", "initb", "scalars", "state", "slots",
                 "ntiles", "in_off", "out_off", "shape", "flat", "out_mis", "tail", "empty",
                 "shared")

    def __init__(self):
        self.shared = 0  # bytes of dynamic shared memory per block

    def launch(self, src, dst, on=None):
        st = self.state
        if st is None:  # no tile states (direct column scan)
            runtime.launch(self.kernel, self.grid, self.block, (src, dst, self.initb) + self.scalars,
                           0, on)
            return
        if st.slots < self.slots:
            st.grow(max(self.slots, 2 * st.slots))
        status, vals, counter = st.buffers()
        runtime.launch(self.kernel, self.grid, self.block,
                       (src, dst, self.initb) + self.scalars
                       + (status, vals, counter, st.base, st.epoch) + self.tail, self.shared, on)
        _after_launch(st, self.ntiles)  # tickets taken from the counter


def _buf_at(x, off):
    """Kernel buffer of array ``x`` with its origin moved by ``off`` elements."""
    if runtime.SIMULATE:
        b = runtime.SimBuffer.of(x)
        return runtime.SimBuffer(b.array, b.origin + off, b.owner) if off else b
    return int(x.data.ptr) + off * x.dtype.itemsize


def _layout_key(a):
    if isinstance(a, np.ndarray):
        return (a.dtype.str, a.shape, a.strides, a.__array_interface__["data"][0] % 16)
    mp = a.data
    return (a.dtype.str, a.shape, a.strides, mp.ptr % 16, mp.device_id)


def _fast_plans():
    d = getattr(_local, "plans", None)
    if d is None:
        d = _local.plans = {}
    return d


def _fast_key(fn, tuple_op, xs, acc_dtypes, axis, include_initial, exclusive, reverse, det,
              flatten):
    """Key of a call whose plan can be replayed: operator, dtypes, flags and the operands'
    layouts (shape, strides, 16-byte phase, device) on this stream; None if unhashable."""
    if not (axis is None or type(axis) is int) or not runtime.kernels_available(xs[0]):
        return None
    try:
        key = (fn, tuple_op, acc_dtypes, axis, include_initial, exclusive, reverse, det,
               flatten, tuple(_layout_key(a) for a in xs), _state_key(xs[0]))
        hash(key)
    except (TypeError, AttributeError):
        return None
    return key


def _run_fast(plan, xs, acc_dtypes, tuple_op, key=None):
    """Replay ``plan`` on new operands of the planned layouts; None when the fresh output is
    not aligned as planned (the caller then takes the full path). ``key``: the operands'
    :func:`_state_key` when the caller has it (the launch then asks CuPy for no stream)."""
    on = key if type(key) is tuple and len(key) > 1 else None
    empty = plan.empty
    if not tuple_op and len(xs) == 1:  # one operand, one output: no generators
        x = xs[0].reshape(-1) if plan.flat else xs[0]
        out = empty(plan.shape, dtype=acc_dtypes[0])
        if runtime.misalignment(out) != plan.out_mis:
            return None
        plan.launch((_buf_at(x, plan.in_off),), (_buf_at(out, plan.out_off),), on)
        return out
    if plan.flat:
        xs = [a.reshape(-1) for a in xs]
    outs = [empty(plan.shape, dtype=d) for d in acc_dtypes]
    if runtime.misalignment(outs[0]) != plan.out_mis:
        return None
    plan.launch(tuple(_buf_at(a, plan.in_off) for a in xs),
                tuple(_buf_at(o, plan.out_off) for o in outs), on)
    return tuple(outs) if tuple_op else outs[0]


def _remember(key, plan):
    if key is None or plan is None:
        return
    d = _fast_plans()
    if len(d) > 1024:
        d.clear()
    d[key] = plan


def _scan_kernel(fn, tuple_op, xs, outs, in_dtypes, acc_dtypes, axis, init, shift, m,
                 reverse, det):
    """Map the scan of any views onto the kernels and launch. Returns the plan when it can
    be replayed for operands of the same layouts (no temporary copies were needed)."""
    xp = _xp(xs[0])
    xv = [xp.moveaxis(a, axis, -1) for a in xs]
    ov = [xp.moveaxis(o, axis, -1) for o in outs]
    if reverse:
        xv = [a[..., ::-1] for a in xv]
        ov = [o[..., ::-1] for o in ov]
    copied = False
    sx = _common_layout(xv)
    if sx is None:
        xv = [xp.ascontiguousarray(a) for a in xv]
        sx = runtime.element_strides(xv[0])
        copied = True
    so = _common_layout(ov)
    tmp = None
    if so is None:
        tmp, ov = ov, [xp.empty(o.shape, dtype=o.dtype) for o in ov]
        so = runtime.element_strides(ov[0])
    n = xv[0].shape[-1]
    bshape, (bx, bo) = collapse(xv[0].shape[:-1], [sx[:-1], so[:-1]])
    if len(bshape) > 2:  # rare: make the batch dimensions collapsible
        xv = [xp.ascontiguousarray(a) for a in xv]
        sx = runtime.element_strides(xv[0])
        copied = True
        if tmp is None:
            tmp, ov = ov, [xp.empty(o.shape, dtype=o.dtype) for o in ov]
            so = runtime.element_strides(ov[0])
        bshape, (bx, bo) = collapse(xv[0].shape[:-1], [sx[:-1], so[:-1]])
    pad = 2 - len(bshape)
    bshape = (1,) * pad + tuple(bshape)
    bx = (0,) * pad + tuple(bx)
    bo = (0,) * pad + tuple(bo)
    nbatch = bshape[0] * bshape[1]
    s_in, s_out = sx[-1], so[-1]
    plan = plan_scan(fn, tuple_op, xv, ov, in_dtypes, acc_dtypes, init, shift, n, m, nbatch,
                     bshape[1], s_in, bx, s_out, bo, det)
    plan.launch(tuple(runtime.buffer_of(a) for a in xv), tuple(runtime.buffer_of(o) for o in ov))
    if tmp is not None:
        for t, o in zip(tmp, ov):
            t[...] = o
        return None
    if copied:
        return None
    plan.in_off = (n - 1) * runtime.element_strides(xs[0])[axis] if reverse else 0
    plan.out_off = (m - 1) * runtime.element_strides(outs[0])[axis] if reverse else 0
    plan.shape = tuple(outs[0].shape)
    plan.out_mis = runtime.misalignment(outs[0])
    plan.empty = xp.empty
    return plan


def _row_lead(xv, isz, bx, nbatch, nb1):
    """Elements before a 16-byte boundary at the start of every contiguous row of ``xv``
    (the tiles' ``lead``), or None when the rows cannot all start in one 16-byte phase
    (misaligned elements, batch strides not multiples of the vector)."""
    V = 16 // isz
    mis = runtime.misalignment(xv[0])
    if mis % isz or any(b % V for b, sz in zip(bx, (nbatch // nb1, nb1)) if sz > 1):
        return None
    return mis // isz


def _output_in_phase(ov, osz, V, shift, lead, bo, nbatch, nb1):
    """Whether output element ``start + k + shift`` is 16-byte aligned whenever input element
    ``start + k`` is (``k`` a multiple of ``V``): the same phase, batch strides multiples of
    ``V`` (then whole output tiles go out as 16-byte vectors or bulk stores)."""
    omis = runtime.misalignment(ov[0])
    return (omis % osz == 0 and (omis // osz + shift - lead) % V == 0
            and all(b % V == 0 for b, sz in zip(bo, (nbatch // nb1, nb1)) if sz > 1))


def _tile_argtypes(in_dtypes, acc_dtypes, st):
    """Argument types of the tile and pipelined scans (buffers, 11 scalars, tile states)."""
    I64 = runtime.i64
    return (runtime.tuple_ptr_t(in_dtypes), runtime.tuple_ptr_t(acc_dtypes),
            runtime.tuple_ptr_t(acc_dtypes)) + (I64,) * 11 + (
        runtime.ptr_t(st.status.dtype), runtime.tuple_ptr_t(acc_dtypes),
        runtime.ptr_t(np.uint64), I64, I64, I64)


def plan_scan(fn, tuple_op, xv, ov, in_dtypes, acc_dtypes, init, shift, n, m, nbatch, nb1,
              s_in, bx, s_out, bo, det):
    """Choose the kernel and launch shape for a batched scan of ``nbatch`` rows of ``n``
    elements (strides in elements; ``xv`` / ``ov`` the row-major views, for alignment) and
    return the :class:`_Plan` (host side of :mod:`..kernels.scan`)."""
    like = xv[0]
    pt = tuning.params("scan")
    pc = tuning.params("scan_columns")
    items = _items_for(pt, acc_dtypes)
    tile = pt["block"] * items
    # columns: the batch runs along the contiguous axis; a scan of length 1 is one too,
    # whatever its stride (a row of one-element scans, e.g. axis 0 of a (1, p) matrix)
    columns = nb1 > 1 and abs(bx[1]) == 1 and (n == 1 or (abs(s_in) != 1 and n > 1))
    # many short rows go to the column kernel (a thread per row); rows_column_max caps their
    # length (default: a quarter of the tile scan's tile)
    rcm = pc.get("rows_column_max")
    short_rows = nbatch >= 64 and (n * 4 < tile if rcm is None else n <= int(rcm))
    has_init = init is not None
    wide = bool(pt.get("wide", True))
    sync = (wide, bool(pt.get("release", False)), int(pt.get("spin_ns", 0)))
    p = _Plan()
    p.init = _init_buffers(like, acc_dtypes, init)
    p.initb = tuple(runtime.buffer_of(b) for b in p.init)
    p.flat = False
    I64 = runtime.i64
    if (columns and not tuple_op and pc.get("direct", True) and abs(bx[1]) == 1
            and n <= int(pc.get("direct_rows", 16))):
        return _plan_direct(p, pc, fn, in_dtypes, acc_dtypes, xv, ov, shift, has_init, n, m,
                            nbatch, nb1, s_in, bx, s_out, bo)
    if nbatch >= 64 and not tuple_op and _rows_staged_fit(pc, in_dtypes, acc_dtypes, xv, ov, shift,
                                                         n, m, nbatch, nb1, s_in, bx, s_out, bo):
        return _plan_rows(p, pc, fn, acc_dtypes[0], xv, ov, has_init, n, nbatch, in_dtypes[0],
                          shift, m, s_in < 0)
    if (columns and not tuple_op and not det
            and _narrow_fit(pc, in_dtypes, acc_dtypes, xv, ov, shift, n, m, nbatch, nb1, s_in, bx,
                            s_out, bo)):
        return _plan_narrow(p, pc, fn, acc_dtypes, xv, ov, has_init, shift, n, m, nbatch)
    if columns or short_rows:
        block = pc["block"]
        items = pc["items"] if columns else int(pc.get("rows_items", pc["items"]))
        cb = min(block, nbatch)
        G = block // cb
        nstrips = -(-nbatch // cb)
        nchunks = -(-n // (G * items))
        ntiles = nstrips * nchunks
        st = _state(like, acc_dtypes, ntiles * cb, wide)
        staged = 0
        if pc.get("staged", True) and nbatch == nb1 and s_in > 0 and bx[1] > 0:
            # each block's elements are ONE dense range: stage it through shared memory
            # with coalesced loads (and stores when the output has the same layout)
            if (bx[1] == 1 and s_in == nbatch and nstrips == 1) or (s_in == 1 and bx[1] == n and nchunks == 1):
                staged = 2 if (shift == 0 and s_out == s_in and bo[1] == bx[1]) else 1
        # few columns per block: a warp per column's look-back (32 chunks per round trip)
        wlb = nchunks > 1 and cb <= int(pc.get("warp_lookback_cols", 16))
        argtypes = (runtime.tuple_ptr_t(in_dtypes), runtime.tuple_ptr_t(acc_dtypes),
                    runtime.tuple_ptr_t(acc_dtypes)) + (I64,) * 13 + (
            runtime.ptr_t(st.status.dtype), runtime.tuple_ptr_t(acc_dtypes),
            runtime.ptr_t(np.uint64), I64, I64)
        p.kernel = runtime.compile_kernel(
            kscan.make_column_scan,
            (fn, tuple_op, in_dtypes, acc_dtypes, block, items, shift, has_init, bool(det)) + sync
            + (staged, int(pc.get("lookback", 0)), wlb), argtypes)
        p.scalars = (n, m, nbatch, nb1, s_in, bx[0], bx[1], s_out, bo[0], bo[1], cb, nstrips,
                     nchunks)
        p.tail = ()
        p.grid, p.block, p.state, p.slots = ntiles, block, st, ntiles * cb
        p.ntiles = ntiles if nchunks > 1 else 0  # one chunk per column: tiles = blockIdx.x
        return p
    if pt.get("pipeline", False) and not det and n * nbatch >= int(pt.get("pipe_min", 0)):
        pp = _plan_pipeline(p, pt, fn, tuple_op, xv, ov, in_dtypes, acc_dtypes, shift, has_init,
                            n, m, nbatch, nb1, s_in, bx, s_out, bo, sync)
        if pp is not None:
            return pp
    ticket = pt.get("ticket", "atomic")
    # 128-bit loads: contiguous rows of one value of < 16 bytes, tiles shifted by `lead`
    # elements to start 16-byte aligned, batch strides multiples of the vector
    lead = 0
    aligned = False
    isz = in_dtypes[0].itemsize
    if not tuple_op and s_in == 1 and len(in_dtypes) == 1 and isz < 16 and pt.get("vector", True):
        rl = _row_lead(xv, isz, bx, nbatch, nb1)
        if rl is not None:
            aligned, lead = True, rl
    block = pt["block"]
    items = _fit_items(pt, items, n, in_dtypes, acc_dtypes, tuple_op)
    tile = block * items
    vec = aligned and kscan._vec_ok(in_dtypes, acc_dtypes, block, items)
    if not vec:
        lead = 0
    ovec = False
    if vec and s_out == 1 and kscan.ovec_ok(in_dtypes, acc_dtypes, items):
        # output element start + k + shift must be 16-byte aligned whenever input element
        # start + k is (k a multiple of V): same phase, batch strides multiples of V
        ovec = _output_in_phase(ov, acc_dtypes[0].itemsize, 16 // isz, shift, lead, bo, nbatch, nb1)
    tpr = -(-(n + lead) // tile)
    ntiles = tpr * nbatch
    st = _state(like, acc_dtypes, ntiles, wide)
    argtypes = _tile_argtypes(in_dtypes, acc_dtypes, st)
    # launch bound (min_blocks resident blocks per SM) for 128-bit paths of <= 4-byte
    # scalars with <= 64 bytes per thread: float32 x 16 needs 48 registers without
    # keep_items (5 blocks of 256 per SM without spilling), 64 with it (ptxas -v)
    mb = pt.get("min_blocks")
    small = len(acc_dtypes) == 1 and acc_dtypes[0].itemsize <= 4 and items * acc_dtypes[0].itemsize <= 64
    lb = (block, mb) if mb and vec and small and block * mb <= 2048 else None
    p.kernel = runtime.compile_kernel(
        kscan.make_tile_scan,
        (fn, tuple_op, in_dtypes, acc_dtypes, block, items, shift, has_init, bool(det), vec,
         ovec, ticket) + sync + (bool(pt.get("keep_items", False)), int(pt.get("lookback", 4)),
                                 bool(pt.get("shared_vec", False))),
        argtypes, launch_bounds=lb)
    p.scalars = (n, m, nb1, s_in, bx[0], bx[1], s_out, bo[0], bo[1], lead, tpr)
    p.tail = (ntiles,)
    grid = ntiles
    if ticket == "persist":
        per_sm = int(pt.get("persist", 0)) or (mb or 4)
        grid = min(ntiles, per_sm * runtime.device_info()["sm_count"])
    p.grid, p.block, p.state, p.slots = grid, block, st, ntiles
    # tickets taken from the counter: one per tile, plus one per block that finds none left
    # ("persist"); none when tiles come from blockIdx.x (rows of one tile, or "block")
    p.ntiles = 0 if (tpr == 1 or ticket == "block") else ntiles + (grid if ticket == "persist" else 0)
    return p


#: static shared memory of one block (the pipeline's buffers must fit without opting in to
#: dynamic shared memory)
_STATIC_SHARED = 48 * 1024


def _plan_pipeline(p, pt, fn, tuple_op, xv, ov, in_dtypes, acc_dtypes, shift, has_init, n, m,
                   nbatch, nb1, s_in, bx, s_out, bo, sync):
    """Plan of :func:`..kernels.scan_pipeline.make_pipeline_scan` (``scan.pipeline``): one
    scalar operand of 2, 4 or 8 bytes scanned in its own type along contiguous rows whose
    tiles can start 16-byte aligned (the same phase in every row), on sm_90 or later; a grid
    of persistent blocks. None when the scan does not qualify (the tile scan takes it)."""
    if tuple_op or len(in_dtypes) != 1 or len(acc_dtypes) != 1 or in_dtypes[0] != acc_dtypes[0]:
        return None
    acc = acc_dtypes[0]
    isz = acc.itemsize
    if isz not in (2, 4, 8) or s_in != 1 or runtime.device_info()["cc"] < (9, 0):
        return None
    lead = _row_lead(xv, isz, bx, nbatch, nb1)
    if lead is None:
        return None
    warps, vectors, stages = int(pt["pipe_warps"]), int(pt["pipe_vectors"]), int(pt["pipe_stages"])
    lookers = int(pt.get("pipe_lookers", 1))
    group = max(1, int(pt.get("pipe_group", 1)))
    block, tile, nbytes = kpipe.pipeline_shape(acc, warps, vectors, stages, lookers)
    if nbatch > 1 and n < float(pt.get("pipe_row_tiles", 16)) * tile:
        # short rows: mostly partial tiles; below about half a tile per row the tile scan is
        # faster (H200, float32 rows of 3000: 420 against 566 us; rows of 1.5 tiles: 257-261
        # against 316, since partial tiles move by bulk copies of their aligned middle)
        return None
    # tile buffers beyond the static limit: dynamic shared memory (not in the simulator)
    extra = kpipe.pipeline_scratch_bytes(acc, warps, stages)
    dynamic = nbytes + extra + 256 > _STATIC_SHARED or bool(pt.get("pipe_dynamic", False))
    if dynamic and (runtime.SIMULATE or nbytes + extra > 227 * 1024):
        return None
    ovec = s_out == 1 and _output_in_phase(ov, isz, 16 // isz, shift, lead, bo, nbatch, nb1)
    tpr = -(-(n + lead) // tile)
    ntiles = tpr * nbatch
    wide = sync[0]
    st = _state(xv[0], acc_dtypes, ntiles, wide)
    if kpipe.TRACE:
        st.counter_room(kpipe.trace_words(group * (-(-ntiles // group))))
    argtypes = _tile_argtypes(in_dtypes, acc_dtypes, st)
    p.kernel = runtime.compile_kernel(
        kpipe.make_pipeline_scan,
        (fn, acc, warps, vectors, stages, shift, has_init, ovec) + sync
        + (int(pt.get("pipe_lookback", 1)), dynamic, lookers, group, bool(kpipe.TRACE)), argtypes)
    p.shared = nbytes if dynamic else 0
    p.scalars = (n, m, nb1, s_in, bx[0], bx[1], s_out, bo[0], bo[1], lead, tpr)
    p.tail = (ntiles,)
    # blocks per SM: as many as the shared memory of an sm_90 SM (228 KB, 1 KB reserved per
    # block) holds, unless the tables say otherwise
    per_sm = int(pt.get("pipe_blocks_per_sm", 0)) or max(1, 228 * 1024 // (nbytes + extra + 1024))
    per_sm = min(per_sm, max(1, 2048 // block))
    grid = max(1, min(ntiles, per_sm * runtime.device_info()["sm_count"]))
    p.grid, p.block, p.state, p.slots = grid, block, st, ntiles
    # tickets of `group` tiles; every block takes one ticket past the last tile (its
    # producer's stop signal) except the one whose group holds the last tile, if partial
    p.ntiles = group * (-(-ntiles // group) + grid - (1 if ntiles % group else 0))
    return p


def _rows_staged_fit(pc, in_dtypes, acc_dtypes, xv, ov, shift, n, m, nbatch, nb1, s_in, bx,
                     s_out, bo):
    """Whether :func:`..kernels.scan.make_row_scan` takes this batched scan: one operand of
    a 4- or 8-byte integer or float dtype scanned in its own dtype or one it casts to safely
    (int32 -> int64, float32 -> float64), inclusive, exclusive or with ``include_initial``,
    forwards or reversed, rows of at most ``rows_staged_max`` elements,
    adjacent and contiguous in the input and in the output (``R * n`` consecutive elements,
    ``R * m`` out, both running in the scan's direction or both against it), naturally
    aligned."""
    vecs = int(pc.get("rows_staged_vecs", 0))
    if not vecs or len(in_dtypes) != 1 or len(acc_dtypes) != 1:
        return False
    ind, acc = np.dtype(in_dtypes[0]), np.dtype(acc_dtypes[0])
    if ind != acc and not (ind.kind in "iuf" and acc.kind in "iuf" and ind.itemsize in (4, 8)
                           and np.can_cast(ind, acc, "safe")):
        return False
    isz = acc.itemsize
    if isz not in (4, 8) or (m != n and not shift):
        return False
    if (shift or s_in < 0) and not pc.get("rows_staged_flags", True):
        return False
    longv = int(pc.get("rows_staged_long_vecs", 0))
    while 2 * vecs <= longv:            # the longest tile: vecs doubled (see _plan_rows)
        vecs *= 2
    if n > min(int(pc.get("rows_staged_max", 128)), vecs * 32 * (16 // isz)):
        return False
    if nbatch != nb1 or abs(s_in) != 1 or s_out != s_in or bx[1] != n or bo[1] != m:
        return False
    return runtime.misalignment(xv[0]) % ind.itemsize == 0 and runtime.misalignment(ov[0]) % isz == 0


def _plan_rows(p, pc, fn, acc, xv, ov, has_init, n, nbatch, ind=None, shift=0, m=None,
               reverse=False):
    """Plan of :func:`..kernels.scan.make_row_scan` (see :func:`_rows_staged_fit`): one wave
    of persistent blocks whose warps take tiles of whole rows in turn. Rows longer than a
    tile of ``rows_staged_vecs`` vectors per lane take tiles of twice, four times ... as many
    vectors, up to ``rows_staged_long_vecs``: the smallest that holds a row, in
    proportionally smaller blocks and more of them per SM (the same shared memory per
    block and per SM). A converted input (``ind``) has its own tile beside the result's:
    half-size blocks, twice as many per SM. ``shift``: output rows of ``m`` elements starting
    with the init (gathered from the scanned tile as it is stored); ``reverse``: the rows run
    backwards in memory."""
    m = n if m is None else m
    block = int(pc.get("rows_staged_block", 256))
    vecs = int(pc["rows_staged_vecs"])
    per_sm = int(pc.get("rows_staged_blocks_per_sm", 4))
    isz = acc.itemsize
    longv = int(pc.get("rows_staged_long_vecs", 0))
    v = vecs
    while n > v * 32 * (16 // isz) and 2 * v <= longv:
        v *= 2
    block, per_sm, vecs = max(32, block * vecs // v), per_sm * v // vecs, v
    ind = acc if ind is None else np.dtype(ind)
    if ind != acc and block > 32:
        block, per_sm = block // 2, per_sm * 2
    tw = vecs * 32 * (16 // isz)
    tiles = -(-nbatch // (tw // n))
    wpb = block // 32
    I64 = runtime.i64
    argtypes = (runtime.tuple_ptr_t((ind,)), runtime.tuple_ptr_t((acc,)),
                runtime.tuple_ptr_t((acc,)), I64, I64, I64, I64)
    fargs = (fn, acc, block, vecs, has_init, ind if ind != acc else None, bool(shift), bool(reverse))
    p.kernel = runtime.compile_kernel(kscan.make_row_scan, fargs, argtypes)
    # rows_staged_bound: where registers keep some of the grid's blocks per SM from being
    # resident together (shifted rows: 80 registers, 3 blocks of 256 per SM of the grid's 4;
    # the persistent grid's last blocks would then run after the others), the kernel with a
    # launch bound that fits them all, if it does
    if (pc.get("rows_staged_bound", True) and block * per_sm <= 2048
            and runtime.resident_blocks(p.kernel, block, per_sm) < per_sm):
        kb = runtime.compile_kernel(kscan.make_row_scan, fargs, argtypes,
                                    launch_bounds=(block, per_sm))
        if runtime.resident_blocks(kb, block, per_sm) >= per_sm:
            p.kernel = kb
    aux = runtime.misalignment(xv[0]) // ind.itemsize + 16 * (runtime.misalignment(ov[0]) // isz)
    p.scalars = (n, m, nbatch, aux)
    p.grid = max(1, min(-(-tiles // wpb), per_sm * runtime.device_info()["sm_count"]))
    p.block = block
    p.state, p.slots, p.ntiles = None, 0, 0
    p.tail = ()
    return p


def _narrow_fit(pc, in_dtypes, acc_dtypes, xv, ov, shift, n, m, nbatch, nb1, s_in, bx, s_out,
                bo):
    """Whether :func:`..kernels.narrow_scan.make_narrow_scan` takes this batched scan: axis 0
    of a C-contiguous ``(n, p)`` block (input and output alike: row stride ``p``, unit column
    stride) of ``2 .. narrow_max`` columns, one 4- or 8-byte dtype scanned in itself, both
    naturally aligned (inclusive, exclusive or with ``include_initial``)."""
    cols = min(int(pc.get("narrow_max", 0)), knarrow.MAX_COLUMNS, int(pc.get("narrow_block", 256)))
    if not 2 <= nbatch <= cols or len(in_dtypes) != 1 or in_dtypes[0] != acc_dtypes[0]:
        return False
    isz = acc_dtypes[0].itemsize
    if isz not in (4, 8):
        return False
    if nbatch != nb1 or bx[1] != 1 or s_in != nbatch or bo[1] != 1 or s_out != nbatch:
        return False
    return runtime.misalignment(xv[0]) % isz == 0 and runtime.misalignment(ov[0]) % isz == 0


def _plan_narrow(p, pc, fn, acc_dtypes, xv, ov, has_init, shift, n, m, nbatch):
    """Plan of :func:`..kernels.narrow_scan.make_narrow_scan` (see :func:`_narrow_fit`): one
    block per tile of ``T`` whole rows, tile ids from the ticket counter, ``p`` value slots
    per tile behind one flag word."""
    acc = acc_dtypes[0]
    block = int(pc.get("narrow_block", 256))
    items = max(1, int(pc.get("narrow_bytes", 128)) // acc.itemsize)
    _, _, T = knarrow.tile_rows(block, items, nbatch)
    ntiles = -(-n // T)
    packed = int(pc.get("narrow_packed", 0))  # > 0: packed word per (tile, column)
    st = _state(xv[0], acc_dtypes, ntiles * nbatch, flags=not packed)
    I64 = runtime.i64
    argtypes = (runtime.tuple_ptr_t((acc,)),) * 3 + (I64,) * 4 + (
        runtime.ptr_t(st.status.dtype), runtime.tuple_ptr_t((acc,)), runtime.ptr_t(np.uint64),
        I64, I64)
    p.kernel = runtime.compile_kernel(
        knarrow.make_narrow_scan,
        (fn, acc, block, items, has_init, int(pc.get("narrow_prefix_every", 1)), packed,
         bool(pc.get("narrow_wide", False)), int(shift)),
        argtypes)
    isz = acc.itemsize
    aux = runtime.misalignment(xv[0]) // isz + 16 * (runtime.misalignment(ov[0]) // isz)
    p.scalars = (n, m, nbatch, aux)
    p.tail = ()
    p.grid, p.block, p.state = ntiles, block, st
    p.slots, p.ntiles = ntiles * nbatch, ntiles
    return p


def _plan_direct(p, pc, fn, in_dtypes, acc_dtypes, xv, ov, shift, has_init, n, m, nbatch, nb1,
                 s_in, bx, s_out, bo):
    """Plan of :func:`..kernels.scan.make_column_direct`: short columns (``n <=
    direct_rows``) adjacent in memory, one chunk per column, so no look-back: each thread
    scans ``VC`` adjacent columns in registers (128-bit loads / stores where the layout
    allows: one batch dimension, unit column stride, row strides multiples of the vector,
    the same 16-byte phase for every group of ``VC`` columns)."""
    block = int(pc.get("direct_block", pc["block"]))
    rows = n  # compiled for the exact length ("direct_exact"), else a power of two >= n
    if not pc.get("direct_exact", True):
        rows = 4
        while rows < n:
            rows *= 2
    isz = in_dtypes[0].itemsize
    V = 16 // isz
    vin = vout = False
    lead = 0
    if (pc.get("direct_vec", True) and 4 <= isz <= 8 and nbatch == nb1 and bx[1] == 1
            and s_in % V == 0 and nbatch >= V):
        mis = runtime.misalignment(xv[0])
        if mis % isz == 0:
            vin = True
            lead = mis // isz
            osz = acc_dtypes[0].itemsize
            omis = runtime.misalignment(ov[0])
            vout = (osz == isz and bo[1] == 1 and s_out % V == 0 and omis % osz == 0
                    and omis // osz == lead)
    VC = V if vin else 1
    I64 = runtime.i64
    argtypes = (runtime.tuple_ptr_t(in_dtypes), runtime.tuple_ptr_t(acc_dtypes),
                runtime.tuple_ptr_t(acc_dtypes)) + (I64,) * 11
    p.kernel = runtime.compile_kernel(
        kscan.make_column_direct,
        (fn, False, in_dtypes, acc_dtypes, block, rows, shift, has_init, vin, vout), argtypes)
    p.scalars = (n, m, nbatch, nb1, s_in, bx[0], bx[1], s_out, bo[0], bo[1], lead)
    groups = -(-(nbatch + lead) // VC)
    p.grid, p.block = -(-groups // block), block
    p.state, p.slots, p.ntiles = None, 0, 0
    p.tail = ()
    return p
