"""Creation functions with ``device=Sharding(...)``: every block made on its own device
(filled arrays, ranges, identity matrices) or copied there from the source (``asarray``,
``from_dlpack``)."""

from __future__ import annotations

import builtins
import math

from .. import _devices as _dev
from .. import _dtypes as _dt
from .._array import Array, py_scalar
from .._creation import arange_dtype
from .._helpers import as_int, normalize_shape
from ._core import ShardedArray, Sharding, refusal
from ._dispatch import original, register
from ._transfer import gather, reshard, scatter

__all__ = []


def _blocks(shape, sh: Sharding):
    axis = sh.resolve_axis(len(shape))
    out = []
    for b in sh.blocks(shape[axis]):
        s = list(shape)
        s[axis] = b
        out.append(tuple(s))
    return axis, out


def _made(sh, axis, shape, make):
    """A sharded array whose block ``i`` is ``make(i, device, offset, block shape)``."""
    _, shapes = _blocks(shape, sh)
    shards = []
    off = 0
    for i, (d, s) in enumerate(zip(sh.devices, shapes)):
        with _dev.on(d):
            shards.append(make(i, d, off, s))
        off += s[axis]
    return ShardedArray._from_shards(shards, sh, axis, tuple(shape))


def _filled(name):
    fn = original(name)

    def impl(shape, *args, dtype=None, device=None):
        sh = device
        shape = normalize_shape(shape, name)
        axis, _ = _blocks(shape, sh)
        return _made(sh, axis, shape,
                     lambda i, d, off, s: fn(s, *args, dtype=dtype, device=d))

    return impl


for _name in ("zeros", "ones", "empty", "full"):
    register(_name)(_filled(_name))


def _like(name):
    fn = original(name)
    filled = original(name[:-len("_like")])

    def impl(x, /, *args, dtype=None, device=None):
        if isinstance(device, Sharding):
            dt = x.dtype if dtype is None else dtype
            return _filled(name[:-len("_like")])(x.shape, *args, dtype=dt, device=device)
        if device is not None:  # an unsharded array of x's shape on one device
            return filled(x.shape, *args, dtype=x.dtype if dtype is None else dtype,
                          device=device)
        shards = []
        for s in x._shards:
            with _dev.on(s.device):
                shards.append(fn(s, *args, dtype=dtype))
        return ShardedArray._from_shards(shards, x._sharding, x._axis, x.shape)

    return impl


for _name in ("zeros_like", "ones_like", "empty_like", "full_like"):
    register(_name)(_like(_name))


@register("asarray")
def asarray(obj, /, *, dtype=None, device=None, copy=None):
    fn = original("asarray")
    if isinstance(obj, ShardedArray):
        if device is not None and not isinstance(device, Sharding):
            if copy is False:
                raise ValueError("asarray(copy=False): gathering a sharded array requires a copy")
            return fn(gather(obj, _dev.as_device(device)), dtype=dtype, copy=False)
        res = obj
        if dtype is not None and _dt.to_dtype(dtype) != obj.dtype:
            if copy is False:
                raise ValueError("asarray(copy=False): converting the dtype requires a copy")
            res = _astype(obj, dtype)
        elif copy:
            res = _astype(obj, obj.dtype)
        if device is not None:
            res = reshard(res, device)
        return res
    if copy is False:
        raise ValueError("asarray(copy=False): splitting an array over a Sharding requires a "
                         "copy")
    if isinstance(obj, (list, tuple)) and any(isinstance(o, ShardedArray) for o in obj):
        raise refusal("asarray of a sequence holding sharded arrays", None)
    x = obj if isinstance(obj, Array) and dtype is None else None
    if x is None:
        src = None if _dev.is_cupy_array(obj) or isinstance(obj, Array) else "cpu"
        x = fn(obj, dtype=dtype, device=src)
    return scatter(x, device)


def _astype(x, dtype):
    from ._elementwise import astype  # noqa: PLC0415

    return astype(x, dtype, copy=True)


@register("from_dlpack")
def from_dlpack(x, /, *, device=None, copy=None):
    if copy is False:
        raise ValueError("from_dlpack(copy=False): splitting over a Sharding requires a copy")
    return scatter(original("from_dlpack")(x), device)


@register("arange")
def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    sh = device
    dtype = arange_dtype(start, stop, step, dtype)
    if dtype not in _dt.real_numeric_dtypes:
        raise TypeError(f"arange(): dtype {dtype} is not a real numeric dtype")
    if stop is None:
        start, stop = 0, start
    n = builtins.max(0, math.ceil((stop - start) / step))
    fn = original("arange")
    exact = all(isinstance(py_scalar(a), int) for a in (start, stop, step))

    def make(i, d, off, s):
        b = s[0]
        if exact:
            return fn(start + off * step, start + (off + b) * step, step, dtype=dtype, device=d)
        idx = fn(off, off + b, dtype=_dt.float64, device=d)
        return original("astype")(idx * step + start, dtype)

    return _made(sh, sh.resolve_axis(1), (n,), make)


@register("linspace")
def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    sh = device
    num = as_int(num, "linspace", "num")
    if num < 0:
        raise ValueError("linspace(): num must be non-negative")
    is_complex = any(isinstance(py_scalar(v), complex) for v in (start, stop))
    if dtype is None:
        dtype = _dt.default_complex if is_complex else _dt.default_float
    dtype = _dt.to_dtype(dtype)
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    fn = original("arange")

    def make(i, d, off, s):
        b = s[0]
        y = fn(off, off + b, dtype=_dt.float64, device=d) * step + start
        if endpoint and num > 1 and off <= num - 1 < off + b:
            y[num - 1 - off] = stop
        return original("astype")(y, dtype)

    return _made(sh, sh.resolve_axis(1), (num,), make)


@register("eye")
def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    sh = device
    n_rows = as_int(n_rows, "eye", "n_rows")
    n_cols = n_rows if n_cols is None else as_int(n_cols, "eye", "n_cols")
    k = as_int(k, "eye", "k")
    fn = original("eye")
    axis = sh.resolve_axis(2)

    def make(i, d, off, s):
        kk = k + off if axis == 0 else k - off
        return fn(s[0], s[1], k=kk, dtype=dtype, device=d)

    return _made(sh, axis, (n_rows, n_cols), make)
