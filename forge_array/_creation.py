"""Creation functions of the standard; every one takes ``device=``.

>>> import forge_array as xp
>>> xp.zeros((2, 2), device="cpu").dtype
dtype('float64')
"""

from __future__ import annotations

import builtins
import functools

import numpy as np

from . import _devices as _dev
from . import _dtypes as _dt
from . import _routing
from ._array import Array, is_scalar, py_scalar, values_read
from ._helpers import as_int, check_array, normalize_shape
from ._interop import device_full, has_negative_zero, transfer
from ._ownership import share

__all__ = [
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like",
    "linspace", "meshgrid", "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
]


#: set by :mod:`forge_array.sharding` when it is first used: ``(name, args, kwargs)`` -> the
#: result of creation function ``name``'s sharded implementation.  A call whose function was
#: looked up before that first use (``xp.asarray(a, device=xp.Sharding(...))`` as a
#: program's first line) reaches the function below the sharded dispatch with a Sharding
#: as its device: it is handed on from here.
SHARDED_CREATE = [None]


def _sharding_aware(fn):
    name = fn.__name__

    @functools.wraps(fn)
    def create(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except _dev.ShardingGiven:
            resend = SHARDED_CREATE[0]
            if resend is None:
                raise
            return resend(name, args, kwargs)

    return create


def _dtype_or(dtype, default):
    return default if dtype is None else _dt.to_dtype(dtype)


def _place(host, dev):
    """Move a freshly made NumPy array to ``dev`` (no copy on the CPU; one value, as from a
    Python scalar, is filled in on the GPU, see :func:`.._interop.device_full`)."""
    if dev.is_cuda:
        if host.ndim == 0:
            return device_full((), host[()], host.dtype, dev)
        return transfer(host, _dev.cpu, dev)
    return host


def _no_copy_error(what):
    return ValueError(f"asarray(copy=False): {what} requires a copy")


def _from_backend(arr, dtype, device, copy, foreign=False):
    """``arr`` (a NumPy or CuPy array) as an array of ``dtype`` on ``device``; ``foreign``:
    ``arr`` comes from outside forge_array, so memory shared with it is recorded as shared
    (see :mod:`forge_array._ownership`)."""
    src = _dev.device_of(arr)
    dev = src if device is None else _dev.as_device(device)
    if arr.dtype not in _dt.all_dtypes and dtype is None:
        raise TypeError(f"unsupported dtype {arr.dtype}")
    copied = False
    if dev != src:
        if copy is False:
            raise _no_copy_error(f"moving from {src} to {dev}")
        arr = transfer(arr, src, dev)
        copied = True
    if dtype is not None and arr.dtype != dtype:
        if copy is False:
            raise _no_copy_error(f"converting {arr.dtype} to {dtype}")
        with _dev.on(dev):
            arr = arr.astype(dtype)
        copied = True
    if copy is True and not copied:
        with _dev.on(dev):
            arr = _routing.copy(arr)
    elif foreign and not copied:
        share(arr, settle=False)
    return Array._new(arr, dev)


def _host_nested(obj):
    """Replace forge_array arrays inside nested sequences by host values."""
    if isinstance(obj, Array):
        return obj._host()
    if isinstance(obj, (list, tuple, range)):
        return [_host_nested(o) for o in obj]
    return obj


def _infer_python_dtype(obj):
    """Default dtype of Python scalars / nested sequences (bool < int < float < complex)."""
    kinds = set()

    def walk(o):
        if isinstance(o, (list, tuple)):
            for e in o:
                walk(e)
        elif isinstance(o, builtins.bool) or isinstance(o, np.bool_):
            kinds.add(0)
        elif isinstance(o, (int, np.integer)):
            kinds.add(1)
        elif isinstance(o, (float, np.floating)):
            kinds.add(2)
        elif isinstance(o, (complex, np.complexfloating)):
            kinds.add(3)
        elif isinstance(o, np.ndarray):
            kinds.add({"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}.get(o.dtype.kind, 2))
        else:
            raise TypeError(f"asarray(): unsupported element {o!r} of type {type(o).__name__}")

    walk(obj)
    k = max(kinds) if kinds else 2
    return (_dt.bool, _dt.default_int, _dt.default_float, _dt.default_complex)[k]


@_sharding_aware
def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """Convert ``obj`` (array, NumPy/CuPy array, DLPack or CUDA-array-interface object,
    buffer, Python scalar or nested sequence) to an array.

    ``copy=None`` shares memory when possible (NumPy and CuPy arrays are not copied),
    ``copy=True`` always copies, ``copy=False`` raises ValueError if a copy is needed.

    >>> import numpy as np, forge_array as xp
    >>> a = np.arange(3.0)
    >>> x = xp.asarray(a)
    >>> a[0] = 7.0; float(x[0])
    7.0
    """
    if dtype is not None:
        dtype = _dt.to_dtype(dtype)
    if copy not in (None, True, False):
        raise ValueError(f"asarray(): copy must be True, False or None, got {copy!r}")
    if isinstance(obj, Array):
        return _from_backend(obj._array, dtype, device, copy)
    if isinstance(obj, np.generic):  # a NumPy scalar keeps its dtype
        obj = np.asarray(obj)
    if isinstance(obj, np.ndarray) or _dev.is_cupy_array(obj):
        return _from_backend(obj, dtype, device, copy, True)
    if hasattr(obj, "__cuda_array_interface__") and not isinstance(obj, (list, tuple)):
        cp = _dev.cupy_module()
        if cp is None:
            raise ValueError("asarray(): a CUDA array needs CuPy, which is not available")
        return _from_backend(cp.asarray(obj), dtype, device, copy, True)
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (list, tuple)):
        arr = from_dlpack(obj, copy=None)
        return _from_backend(arr._array, dtype, device, copy)
    dev = _dev.as_device(device)
    if isinstance(obj, (bytes, bytearray, memoryview)) or (
        hasattr(obj, "__buffer__") and not isinstance(obj, (list, tuple))
    ):
        host = np.asarray(memoryview(obj)) if not isinstance(obj, (bytes, bytearray)) \
            else np.frombuffer(obj, dtype=dtype or np.uint8)
        return _from_backend(host, dtype, dev, copy, True)
    if copy is False:
        raise _no_copy_error("converting a Python object")
    obj = _host_nested(obj)
    if dtype is None:
        dtype = _infer_python_dtype(obj)
    if is_scalar(obj) and dtype in _dt.integer_dtypes:
        v = py_scalar(obj)
        if isinstance(v, int):
            info = np.iinfo(dtype)
            if not info.min <= v <= info.max:
                raise OverflowError(f"asarray(): {v} is out of bounds for {dtype}")
    try:
        host = np.array(obj, dtype=dtype)
    except OverflowError:
        raise
    except (ValueError, TypeError) as e:
        raise type(e)(f"asarray(): cannot convert {type(obj).__name__} to an array: {e}") \
            from None
    return Array._new(_place(host, dev), dev)


def _filled(name, shape, value, dtype, device):
    shape = normalize_shape(shape, name)
    dev = _dev.as_device(device)
    m = _dev.backend(dev)
    with _dev.on(dev):
        if value is None:
            res = m.empty(shape, dtype=dtype)
        elif value == 0 and not has_negative_zero(value):
            res = m.zeros(shape, dtype=dtype)
        elif dev.is_cuda:
            res = device_full(shape, value, dtype, dev)
        else:
            res = np.full(shape, value, dtype=dtype)
    return Array._new(res, dev)


@_sharding_aware
def empty(shape, *, dtype=None, device=None):
    """Uninitialised array of ``shape``.

    >>> import forge_array as xp
    >>> xp.empty((2, 3), device="cpu").shape
    (2, 3)
    """
    return _filled("empty", shape, None, _dtype_or(dtype, _dt.default_float), device)


@_sharding_aware
def zeros(shape, *, dtype=None, device=None):
    """Array of zeros.

    >>> import forge_array as xp
    >>> xp.zeros(2, dtype=xp.int32, device="cpu")
    Array([0, 0], dtype=int32, device=cpu)
    """
    return _filled("zeros", shape, 0, _dtype_or(dtype, _dt.default_float), device)


@_sharding_aware
def ones(shape, *, dtype=None, device=None):
    """Array of ones.

    >>> import forge_array as xp
    >>> xp.ones(2, device="cpu")
    Array([1., 1.], dtype=float64, device=cpu)
    """
    dtype = _dtype_or(dtype, _dt.default_float)
    return _filled("ones", shape, True if dtype == _dt.bool else 1, dtype, device)


def _fill_dtype(fill_value, name):
    v = py_scalar(fill_value)
    if isinstance(v, builtins.bool):
        return _dt.bool
    if isinstance(v, int):
        return _dt.default_int
    if isinstance(v, float):
        return _dt.default_float
    if isinstance(v, complex):
        return _dt.default_complex
    raise TypeError(f"{name}(): fill_value must be a Python scalar, got {type(v).__name__}")


def _check_fill(fill_value, dtype, name):
    v = py_scalar(fill_value)
    if isinstance(v, Array):
        values_read()
        v = v._array.item()
    if not isinstance(v, (builtins.bool, int, float, complex)):
        raise TypeError(f"{name}(): fill_value must be a Python scalar, got {type(v).__name__}")
    if isinstance(v, complex) and dtype not in _dt.complex_floating_dtypes:
        raise TypeError(f"{name}(): complex fill_value with dtype {dtype}")
    if isinstance(v, float) and dtype in _dt.integer_dtypes + (_dt.bool,):
        raise TypeError(f"{name}(): float fill_value {v!r} with dtype {dtype}")
    if isinstance(v, int) and not isinstance(v, builtins.bool) and dtype in _dt.integer_dtypes:
        info = np.iinfo(dtype)
        if not info.min <= v <= info.max:
            raise OverflowError(f"{name}(): fill_value {v} is out of bounds for {dtype}")
    return v


@_sharding_aware
def full(shape, fill_value, *, dtype=None, device=None):
    """Array of ``shape`` filled with ``fill_value`` (dtype inferred from it by default).

    >>> import forge_array as xp
    >>> xp.full(2, 7, device="cpu")
    Array([7, 7], dtype=int64, device=cpu)
    """
    if isinstance(fill_value, Array):
        values_read()
        fill_value = fill_value._array.item()
    dtype = _fill_dtype(fill_value, "full") if dtype is None else _dt.to_dtype(dtype)
    v = _check_fill(fill_value, dtype, "full")
    return _filled("full", shape, v, dtype, device)


def _like(x, name, dtype, device):
    check_array(x, name)
    dtype = x.dtype if dtype is None else _dt.to_dtype(dtype)
    dev = x.device if device is None else _dev.as_device(device)
    return x.shape, dtype, dev


@_sharding_aware
def empty_like(x, /, *, dtype=None, device=None):
    """Uninitialised array with the shape of ``x`` (and its dtype/device by default).

    >>> import forge_array as xp
    >>> xp.empty_like(xp.ones(3, device="cpu")).shape
    (3,)
    """
    shape, dtype, dev = _like(x, "empty_like", dtype, device)
    return _filled("empty_like", shape, None, dtype, dev)


@_sharding_aware
def zeros_like(x, /, *, dtype=None, device=None):
    """Zeros with the shape of ``x``.

    >>> import forge_array as xp
    >>> xp.zeros_like(xp.ones(2, device="cpu"))
    Array([0., 0.], dtype=float64, device=cpu)
    """
    shape, dtype, dev = _like(x, "zeros_like", dtype, device)
    return _filled("zeros_like", shape, 0, dtype, dev)


@_sharding_aware
def ones_like(x, /, *, dtype=None, device=None):
    """Ones with the shape of ``x``.

    >>> import forge_array as xp
    >>> xp.ones_like(xp.zeros(2, device="cpu"))
    Array([1., 1.], dtype=float64, device=cpu)
    """
    shape, dtype, dev = _like(x, "ones_like", dtype, device)
    return _filled("ones_like", shape, True if dtype == _dt.bool else 1, dtype, dev)


@_sharding_aware
def full_like(x, /, fill_value, *, dtype=None, device=None):
    """``fill_value`` with the shape of ``x``.

    >>> import forge_array as xp
    >>> xp.full_like(xp.zeros(2, device="cpu"), 3.0)
    Array([3., 3.], dtype=float64, device=cpu)
    """
    shape, dtype, dev = _like(x, "full_like", dtype, device)
    if isinstance(fill_value, Array):
        values_read()
        fill_value = fill_value._array.item()
    v = _check_fill(fill_value, dtype, "full_like")
    return _filled("full_like", shape, v, dtype, dev)


@_sharding_aware
def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """Evenly spaced values in ``[start, stop)``.

    >>> import forge_array as xp
    >>> xp.arange(1, 7, 2, device="cpu")
    Array([1, 3, 5], dtype=int64, device=cpu)
    """
    dtype = arange_dtype(start, stop, step, dtype)
    if stop is None:
        start, stop = 0, start
    dev = _dev.as_device(device)
    m = _dev.backend(dev)
    with _dev.on(dev):
        if dtype in _dt.real_numeric_dtypes:
            res = m.arange(start, stop, step, dtype=dtype)
        else:
            raise TypeError(f"arange(): dtype {dtype} is not a real numeric dtype")
    return Array._new(res, dev)


def arange_dtype(start, stop, step, dtype):
    """The checked arguments' result dtype of ``arange``: ``dtype``, else the default float
    when one of them is a float, else the default integer."""
    args = [a for a in (start, stop, step) if a is not None]
    for a in args:
        if isinstance(a, builtins.bool) or not isinstance(py_scalar(a), (int, float)):
            raise TypeError(f"arange(): start/stop/step must be ints or floats, got {a!r}")
    if step == 0:
        raise ValueError("arange(): step must not be zero")
    if dtype is None:
        return (_dt.default_float if builtins.any(isinstance(py_scalar(a), float)
                                                  for a in args) else _dt.default_int)
    return _dt.to_dtype(dtype)


@_sharding_aware
def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """2-D array with ones on the ``k``-th diagonal.

    >>> import forge_array as xp
    >>> xp.eye(2, device="cpu")
    Array([[1., 0.],
           [0., 1.]], dtype=float64, device=cpu)
    """
    n_rows = as_int(n_rows, "eye", "n_rows")
    n_cols = n_rows if n_cols is None else as_int(n_cols, "eye", "n_cols")
    if n_rows < 0 or n_cols < 0:
        raise ValueError("eye(): n_rows and n_cols must be non-negative")
    k = as_int(k, "eye", "k")
    dtype = _dtype_or(dtype, _dt.default_float)
    dev = _dev.as_device(device)
    with _dev.on(dev):
        res = _dev.backend(dev).eye(n_rows, n_cols, k=k, dtype=dtype)
    return Array._new(res, dev)


@_sharding_aware
def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """``num`` evenly spaced samples from ``start`` to ``stop``.

    >>> import forge_array as xp
    >>> xp.linspace(0, 1, 3, device="cpu")
    Array([0. , 0.5, 1. ], dtype=float64, device=cpu)
    """
    num = as_int(num, "linspace", "num")
    if num < 0:
        raise ValueError("linspace(): num must be non-negative")
    for v in (start, stop):
        if not isinstance(py_scalar(v), (int, float, complex)) or isinstance(v, builtins.bool):
            raise TypeError(f"linspace(): start and stop must be numbers, got {v!r}")
    is_complex = builtins.any(isinstance(py_scalar(v), complex) for v in (start, stop))
    if dtype is None:
        dtype = _dt.default_complex if is_complex else _dt.default_float
    else:
        dtype = _dt.to_dtype(dtype)
        if is_complex and dtype not in _dt.complex_floating_dtypes:
            raise TypeError(f"linspace(): complex start/stop need a complex dtype, got {dtype}")
    dev = _dev.as_device(device)
    m = _dev.backend(dev)
    with _dev.on(dev):
        res = m.linspace(start, stop, num, dtype=dtype, endpoint=endpoint)
    return Array._new(res, dev)


def meshgrid(*arrays, indexing="xy"):
    """Coordinate matrices from 1-D coordinate vectors (a tuple of arrays).

    >>> import forge_array as xp
    >>> a, b = xp.meshgrid(xp.arange(2, device="cpu"), xp.arange(3, device="cpu"))
    >>> a.shape
    (3, 2)
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid(): indexing must be 'xy' or 'ij', got {indexing!r}")
    if not arrays:
        return ()
    for a in arrays:
        check_array(a, "meshgrid", "arrays")
        if a.ndim != 1:
            raise ValueError(f"meshgrid(): inputs must be 1-D, got shape {a.shape}")
    dev = _dev.check_same_device(*[a.device for a in arrays])
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) > 1:
        raise TypeError(f"meshgrid(): all arrays must have the same dtype, got {dtypes}")
    m = _dev.backend(dev)
    with _dev.on(dev):
        res = m.meshgrid(*[a._array for a in arrays], indexing=indexing)
        return tuple(Array._new(r.copy(), dev) for r in res)


def _tri(name, x, k):
    check_array(x, name)
    if x.ndim < 2:
        raise ValueError(f"{name}(): x must have at least 2 dimensions, got {x.ndim}")
    k = as_int(k, name, "k")
    m = _dev.backend(x.device)
    with _dev.on(x.device):
        return Array._new(getattr(m, name)(x._array, k=k), x.device)


def tril(x, /, *, k=0):
    """Lower triangle of (a stack of) matrices, zeros above the ``k``-th diagonal.

    >>> import forge_array as xp
    >>> xp.tril(xp.ones((2, 2), device="cpu"))
    Array([[1., 0.],
           [1., 1.]], dtype=float64, device=cpu)
    """
    return _tri("tril", x, k)


def triu(x, /, *, k=0):
    """Upper triangle of (a stack of) matrices, zeros below the ``k``-th diagonal.

    >>> import forge_array as xp
    >>> xp.triu(xp.ones((2, 2), device="cpu"))
    Array([[1., 1.],
           [0., 1.]], dtype=float64, device=cpu)
    """
    return _tri("triu", x, k)


_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED = 1, 2, 3, 13


@_sharding_aware
def from_dlpack(x, /, *, device=None, copy=None):
    """Array from any object implementing ``__dlpack__`` (a PyTorch tensor, a NumPy
    or CuPy array, ...). Shares memory unless a copy is requested or needed.

    >>> import numpy as np, forge_array as xp
    >>> xp.from_dlpack(np.arange(3)).device
    cpu
    """
    if copy not in (None, True, False):
        raise ValueError(f"from_dlpack(): copy must be True, False or None, got {copy!r}")
    if isinstance(x, Array):
        return _from_backend(x._array, None, device, copy)
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack(): {type(x).__name__} does not implement __dlpack__")
    try:
        dl_type, dl_id = (int(v) for v in x.__dlpack_device__())
    except AttributeError:
        dl_type, dl_id = _DL_CPU, 0
    src = (_dev.Device("cuda", dl_id) if dl_type in (_DL_CUDA, _DL_CUDA_MANAGED)
           else _dev.cpu)
    dev = src if device is None else _dev.as_device(device)
    if src.is_cuda:
        cp = _dev.backend(src)
        with _dev.on(src):
            arr = cp.from_dlpack(x)
        if dev != src:
            if copy is False:
                raise ValueError(f"from_dlpack(copy=False): moving from {src} to {dev} "
                                 "requires a copy")
            return Array._new(transfer(arr, src, dev), dev)
        if copy is True:
            with _dev.on(dev):
                arr = _routing.copy(arr)
        else:
            share(arr, settle=False)
        return Array._new(arr, dev)
    # a CPU producer
    try:
        arr = np.from_dlpack(x, copy=copy) if copy is not None else np.from_dlpack(x)
    except TypeError:
        arr = np.from_dlpack(x)
        if copy:
            arr = arr.copy()
    if dev != src:
        if copy is False:
            raise ValueError(f"from_dlpack(copy=False): moving from {src} to {dev} "
                             "requires a copy")
        return Array._new(transfer(arr, src, dev), dev)
    if not copy:
        share(arr, settle=False)
    return Array._new(arr, dev)
