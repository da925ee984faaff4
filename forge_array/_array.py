"""The array object of the standard, wrapping a NumPy (cpu) or CuPy (cuda:N) ndarray.

Arrays are made by the creation functions, never by calling ``Array`` directly:

>>> import forge_array as xp
>>> x = xp.asarray([1.0, 2.0, 3.0], device="cpu")
>>> (x * 2 + 1).shape
(3,)
"""

from __future__ import annotations

import builtins
import operator

import numpy as np

from . import _devices as _dev
from . import _dtypes as _dt
from . import _ownership, _routing
from ._backend_indexing import indices_outside, masked_fill
from ._interop import (
    COMPARISONS,
    SYMBOLS,
    UFUNC_NAMES,
    cupy_stream,
    device_full,
    export_dlpack,
    foreign_operand_error,
    has_negative_zero,
    is_foreign_array,
    namespace_hint,
    scalar_type_name,
    transfer,
    type_name,
)
from ._ownership import share

_SUPPORTED_API_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12")

# The supported dtypes as a set: a tuple's `in` compares dtypes one by one (~0.3 us).
_ALL_DTYPES = frozenset(_dt.all_dtypes)

# Python scalar types accepted as the other operand of an operator.
_SCALARS = (builtins.bool, int, float, complex)


def is_scalar(v) -> builtins.bool:
    return isinstance(v, _SCALARS) or isinstance(v, np.generic)


def py_scalar(v):
    """Python scalar for ``v`` (NumPy scalars become Python ones)."""
    if isinstance(v, np.generic):
        return v.item()
    return v


def scalar_dtype(value, dtype, what: str = "operand"):
    """The dtype a Python scalar takes next to an array of ``dtype`` (the standard's
    "mixing arrays with Python scalars" rules); TypeError/OverflowError otherwise.
    NumPy scalars count as the Python scalars of their value."""
    original = value
    value = py_scalar(value)
    if isinstance(value, builtins.bool):
        if dtype == _dt.bool:
            return dtype
    elif isinstance(value, int):
        if dtype in _dt.integer_dtypes:
            info = np.iinfo(dtype)
            if not (info.min <= value <= info.max):
                raise OverflowError(f"Python int {value} is out of bounds for {dtype}")
            return dtype
        if dtype in _dt.floating_dtypes:
            return dtype
    elif isinstance(value, float):
        if dtype in _dt.floating_dtypes:
            return dtype
    elif isinstance(value, complex):
        if dtype in _dt.complex_floating_dtypes:
            return dtype
        if dtype in _dt.real_floating_dtypes:
            return _dt.complex_of(dtype)
    else:
        raise TypeError(f"{what} must be an array or a Python scalar, got "
                        f"{type(value).__name__}")
    raise TypeError(
        f"{scalar_type_name(original)} {what} {value!r} cannot be combined with an array "
        f"of dtype {dtype} under the array API standard"
        + (" (NumPy scalars count as Python scalars of their value)"
           if isinstance(original, np.generic) else "")
    )


def scalar_to_backend(value, dtype, device):
    """A 0-d backend array holding ``value`` (signed zeros kept on CuPy too)."""
    host = np.asarray(py_scalar(value), dtype=dtype)
    if device.is_cuda:
        return device_full((), host[()], host.dtype, device)
    return host


#: The namespace's functions behind the operators (``add``, ``abs``, ``matmul``, ...), by
#: name: the namespace's modules register them as they load (they sit above this module).
OPERATORS: dict = {}

#: Called as ``f(x, other, name)`` by the in-place operators (``x += other`` has ``name``
#: ``"add"``): writes the result into ``x``'s memory and returns True, or returns False when
#: the general way (the operator's value, checked, then copied into ``x``) must run;
#: registered by :mod:`forge_array._elementwise`.
IN_PLACE = [None]

#: The namespace module (``forge_array``), registered by the package as it loads: what
#: ``__array_namespace__`` returns and where error messages look up function names.
NAMESPACE = [None]

#: Called before a write into an array's memory through the namespace (``x[k] = v``,
#: in-place operators): :mod:`forge_array.fusion` computes what is pending first, so that
#: no deferred step reads values written after it.
BEFORE_WRITE = [None]

def before_write() -> None:
    """What every write into existing memory through the namespace does first: run
    :data:`BEFORE_WRITE` and count the write (:func:`forge_array._ownership.note_write`)."""
    if BEFORE_WRITE[0] is not None:
        BEFORE_WRITE[0]()
    _ownership.note_write()


#: Called as ``f(source, view_of, view)`` when a view of an array is taken through the
#: namespace (basic indexing, ``.T``, ``permute_dims``...): ``view_of(source)`` gives the
#: view of a source backend array; :mod:`forge_array.fusion` records it so that a fused
#: function's plan can take the same view of the next call's arguments.
VIEW_TAKEN = [None]

#: Called when the values of an array reach Python or decide a shape (``bool(x)``,
#: ``float(x)``, an index taken from an array, a printout, an export, a boolean mask,
#: ``nonzero``): :mod:`forge_array.fusion` notes that a fused function's trace depended
#: on values, so that its plan is not replayed for other values.
VALUE_READ = [None]


def values_read():
    """Tell :data:`VALUE_READ` that array values reach Python (see there)."""
    f = VALUE_READ[0]
    if f is not None:
        f()


def mask_indices(mask, dims, axis):
    """The index arrays (:func:`forge_array._routing.nonzero`) that select what backend
    boolean array ``mask`` selects of the dimensions ``dims`` starting at ``axis``; an
    IndexError, as NumPy's, where their shapes differ (a mask dimension of 0 matches any
    size: the mask selects nothing).

    >>> import numpy as np
    >>> [a.tolist() for a in mask_indices(np.array([True, False, True]), (3,), 0)]
    [[0, 2]]
    """
    for d, (m, n) in enumerate(zip(mask.shape, dims)):
        if m != n and m != 0:
            raise IndexError(f"boolean index did not match indexed array along axis {axis + d}; "
                             f"size of axis is {n} but size of corresponding boolean axis is {m}")
    if len(dims) != mask.ndim:
        raise IndexError(f"too many indices for array: a {mask.ndim}-D boolean index at axis {axis}")
    return list(_routing.nonzero(mask))


def _basic_key(k):
    if isinstance(k, tuple):
        return all(_basic_key(i) for i in k)
    return k is None or k is Ellipsis or isinstance(k, (int, slice))


def take_view(x, view_of):
    """``Array`` of ``view_of(x._array)`` on ``x``'s device, told to :data:`VIEW_TAKEN`."""
    src = x._array
    res = view_of(src)
    if VIEW_TAKEN[0] is not None:
        VIEW_TAKEN[0](src, view_of, res)
    return Array._new(res, x._device)


def _transpose(a):
    return a.T


def _swap_last(a):
    return a.swapaxes(-1, -2)


class Array:
    """An n-dimensional array of the array API standard.

    Wraps a ``numpy.ndarray`` (device ``cpu``) or a ``cupy.ndarray``
    (device ``cuda:N``); create one with :func:`forge_array.asarray` and friends.

    >>> import forge_array as xp
    >>> a = xp.ones((2, 3), device="cpu")
    >>> a.T.shape
    (3, 2)
    """

    __slots__ = ("_array", "_device", "__weakref__")
    __array_priority__ = 1000

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's ufuncs do not take forge_array arrays (TypeError), except a NumPy scalar
        beside an array in an operator (``np.float64(2) * x``), which counts as a Python
        scalar.

        ```python
        import numpy as np
        import forge_array as xp

        x = xp.asarray([1.0, 2.0], device="cpu")
        np.float64(2.0) * x           # Array([2., 4.]): the scalar is taken by value
        np.ones(2) + x                # TypeError: convert with xp.asarray(...)
        ```
        """
        name = UFUNC_NAMES.get(ufunc.__name__)
        if name is not None and method == "__call__" and not kwargs and len(inputs) == 2:
            if name in COMPARISONS:
                # NumPy hands a scalar on the left of a comparison over as a 0-d array
                inputs = tuple(v[()] if type(v) is np.ndarray and v.ndim == 0 else v
                               for v in inputs)
            p, q = inputs
            if ((isinstance(p, np.generic) and isinstance(q, Array))
                    or (isinstance(q, np.generic) and isinstance(p, Array))):
                return OPERATORS[name](p, q)
        foreign = [v for v in inputs if is_foreign_array(v)]
        if foreign:
            raise foreign_operand_error(foreign[0], f"numpy.{ufunc.__name__}")
        raise TypeError(
            f"numpy.{ufunc.__name__} does not take forge_array arrays; use "
            f"{namespace_hint(ufunc.__name__, NAMESPACE[0])} on arrays made with xp.asarray(...), or "
            "convert explicitly to NumPy (np.asarray(x.to_device('cpu')))"
        )

    def __array_function__(self, func, types, args, kwargs):
        """NumPy's functions (``np.mean(x)``, ``np.unique(x)``, ...) take CPU arrays as
        NumPy arrays of the same memory, as they take anything NumPy can view, and return
        NumPy results; a GPU array is never converted implicitly (TypeError naming the
        namespace's function).  NumPy's ufuncs and operators between NumPy and forge_array
        arrays raise instead (see ``__array_ufunc__``).

        ```python
        import numpy as np
        import forge_array as xp

        x = xp.asarray([1.0, 2.0], device="cpu")
        np.mean(x)                    # np.float64(1.5): a NumPy result
        float(xp.mean(x))             # 1.5, with the namespace
        ```
        """
        fname = getattr(func, "__name__", str(func))
        if _holds_gpu_array((args, kwargs)):
            raise TypeError(
                f"numpy.{fname}() does not take forge_array GPU arrays; use "
                f"{namespace_hint(fname, NAMESPACE[0])}, converting NumPy inputs with xp.asarray(...), "
                "or copy to NumPy explicitly (np.asarray(x.to_device('cpu')))")
        values_read()
        args, kwargs = _as_numpy((args, kwargs))
        return func(*args, **kwargs)

    def __new__(cls, *args, **kwargs):
        raise TypeError(
            "forge_array.Array cannot be constructed directly; use forge_array.asarray()"
        )

    @classmethod
    def _new(cls, x, device=None):
        """Wrap a backend array (NumPy or CuPy) without copying."""
        if isinstance(x, np.generic):
            x = np.asarray(x)
        if device is None:
            device = _dev.device_of(x)
        if x.dtype not in _ALL_DTYPES:
            raise TypeError(f"forge_array does not support the dtype {x.dtype}")
        obj = object.__new__(cls)
        obj._array = x
        obj._device = device
        return obj

    # ------------------------------------------------------------------ attributes
    @property
    def dtype(self):
        """Data type of the array elements."""
        return self._array.dtype  # NumPy's builtin dtypes are singletons: these are ours

    @property
    def device(self):
        """The device holding the array (``cpu`` or ``cuda:N``)."""
        return self._device

    @property
    def shape(self) -> tuple:
        """Array dimensions."""
        return tuple(self._array.shape)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self._array.ndim

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(self._array.size)

    @property
    def T(self):
        """Transpose of a two-dimensional array (ValueError otherwise)."""
        if self.ndim != 2:
            raise ValueError(f"x.T requires a 2-D array, got {self.ndim}-D; use "
                             "permute_dims() or x.mT for stacks of matrices")
        return take_view(self, _transpose)

    @property
    def mT(self):
        """Transpose of the last two axes (needs ndim >= 2)."""
        if self.ndim < 2:
            raise ValueError(f"x.mT requires at least 2 dimensions, got {self.ndim}")
        return take_view(self, _swap_last)

    # ------------------------------------------------------------------ protocols
    def __array_namespace__(self, /, *, api_version=None):
        """The forge_array module (the namespace of this array).

        >>> import forge_array as xp
        >>> xp.asarray(1).__array_namespace__() is xp
        True
        """
        if api_version is not None and api_version not in _SUPPORTED_API_VERSIONS:
            raise ValueError(f"unsupported api_version {api_version!r}; supported: "
                             f"{_SUPPORTED_API_VERSIONS}")
        return NAMESPACE[0]

    def __repr__(self) -> str:
        host = self._host()
        body = np.array2string(host, separator=", ", prefix="Array(")
        return f"Array({body}, dtype={self.dtype}, device={self._device})"

    __str__ = __repr__

    def _host(self):
        values_read()
        if self._device.is_cuda:
            return self._array.get()
        return self._array

    def __array__(self, dtype=None, copy=None):
        values_read()
        if self._device.is_cuda:
            raise TypeError(
                "implicit conversion of a GPU array to NumPy is not allowed; use "
                "x.to_device('cpu') or numpy.from_dlpack(x.to_device('cpu'))"
            )
        if copy is True:
            return np.array(self._array, dtype=dtype, copy=True)
        arr = self._array
        if copy is False and dtype is not None and np.dtype(dtype) != arr.dtype:
            raise ValueError("copy=False but a dtype conversion is required")
        out = np.asarray(arr, dtype=dtype)
        if np.may_share_memory(out, arr):
            share(arr)
        return out

    @property
    def __cuda_array_interface__(self):
        """CUDA array interface of the underlying CuPy buffer (GPU arrays only)."""
        if not self._device.is_cuda:
            raise AttributeError("__cuda_array_interface__ is only defined for GPU arrays")
        arr = self._array
        share(arr)
        values_read()
        return arr.__cuda_array_interface__

    def __dlpack_device__(self):
        """``(device_type, device_id)`` as DLPack enums (1 = CPU, 2 = CUDA).

        >>> import forge_array as xp
        >>> xp.asarray([1], device="cpu").__dlpack_device__()
        (1, 0)
        """
        if self._device.is_cuda:
            t, i = self._array.__dlpack_device__()
            return (int(t), int(i))
        return (1, 0)

    def __dlpack__(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export the array as a DLPack capsule (see the standard for arguments).

        ``copy=True`` always exports a fresh copy; ``dl_device=(1, 0)`` on a GPU array
        exports a host copy (BufferError with ``copy=False``).

        >>> import numpy as np, forge_array as xp
        >>> np.from_dlpack(xp.asarray([1, 2], device="cpu")).tolist()
        [1, 2]
        """
        values_read()
        arr = self._array
        if dl_device is not None:
            dl_device = (int(dl_device[0]), int(dl_device[1]))
            if dl_device != self.__dlpack_device__():
                if dl_device != (1, 0) or not self._device.is_cuda:
                    raise BufferError(f"cannot export an array on {self._device} to DLPack "
                                      f"device {dl_device}")
                if copy is False:
                    raise BufferError(f"copy=False, but exporting an array on {self._device} "
                                      "to the CPU needs a copy")
                with _dev.on(self._device):
                    host = arr.get(stream=cupy_stream(self._device, stream))
                return export_dlpack(host, max_version)
        if copy is True:
            with _dev.on(self._device):
                arr = arr.copy()
        else:
            share(arr)
        if self._device.is_cuda:
            with _dev.on(self._device):
                return export_dlpack(arr, max_version, stream)
        return export_dlpack(arr, max_version)

    def to_device(self, device, /, *, stream=None):
        """Copy the array to ``device`` (returns ``self`` when already there); a
        ``Sharding`` splits it over several devices.

        >>> import forge_array as xp
        >>> xp.asarray([1, 2], device="cpu").to_device("cpu").device
        cpu
        """
        place = getattr(device, "_place_array", None)  # a Sharding splits the array itself
        if place is not None:
            return place(self)
        target = _dev.as_device(device)
        if target == self._device:
            return self
        values_read()
        return Array._new(transfer(self._array, self._device, target, stream), target)

    # ------------------------------------------------------------------ conversions
    def _scalar_value(self, what):
        if self.ndim != 0:
            raise TypeError(f"{what}() only works on 0-dimensional arrays, got shape "
                            f"{self.shape}")
        values_read()
        return self._array.item()

    def __bool__(self):
        """``bool(x)`` for a 0-d array."""
        return builtins.bool(self._scalar_value("bool"))

    def __int__(self):
        """``int(x)`` for a 0-d real array."""
        if self.dtype in _dt.complex_floating_dtypes:
            raise TypeError("int() is not defined for complex arrays")
        return int(self._scalar_value("int"))

    def __float__(self):
        """``float(x)`` for a 0-d real array."""
        if self.dtype in _dt.complex_floating_dtypes:
            raise TypeError("float() is not defined for complex arrays")
        return float(self._scalar_value("float"))

    def __complex__(self):
        """``complex(x)`` for a 0-d array."""
        return complex(self._scalar_value("complex"))

    def __index__(self):
        """``operator.index(x)`` for a 0-d integer array."""
        if self.dtype not in _dt.integer_dtypes:
            raise TypeError(f"__index__ requires an integer dtype, got {self.dtype}")
        return int(self._scalar_value("__index__"))

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        for i in range(self.shape[0]):
            yield self[i]

    # ------------------------------------------------------------------ indexing
    def _key(self, key, setting=False):
        """Validate an index per the standard and convert it for the backend."""
        items = key if isinstance(key, tuple) else (key,)
        out = []
        consumed = 0
        ellipses = 0
        int_arrays = []
        for k in items:
            if k is None:
                out.append(None)
            elif k is Ellipsis:
                ellipses += 1
                out.append(k)
            elif isinstance(k, builtins.bool) or isinstance(k, np.bool_):
                out.append(builtins.bool(k))
            elif isinstance(k, slice):
                for part in (k.start, k.stop, k.step):
                    if part is not None:
                        try:
                            operator.index(part)
                        except TypeError:
                            raise IndexError(f"slice bounds must be integers or None, got "
                                             f"{part!r}") from None
                if k.step is not None and operator.index(k.step) == 0:
                    raise ValueError("slice step cannot be zero")
                consumed += 1
                out.append(k)
            elif isinstance(k, Array) or isinstance(k, np.ndarray) or _dev.is_cupy_array(k):
                if isinstance(k, Array):
                    _dev.check_same_device(self._device, k._device)
                    k = k._array
                else:  # a NumPy (CPU) or CuPy (GPU) index array of the array's device
                    _check_index_device(k, self._device)
                if k.dtype == _dt.bool:  # the mask's values decide the result's shape
                    values_read()
                    consumed += k.ndim
                elif k.dtype in _dt.integer_dtypes:
                    if k.ndim == 0:
                        # a 0-d integer array behaves like a Python int
                        values_read()
                        idx = int(k.item())
                        out.append(idx)
                        consumed += 1
                        continue
                    int_arrays.append((consumed, k))
                    consumed += 1
                else:
                    raise IndexError(f"array indices must have an integer or boolean dtype, "
                                     f"got {k.dtype}")
                out.append(k)
            else:
                try:
                    out.append(operator.index(k))
                except TypeError:
                    raise IndexError(f"unsupported index {k!r} of type {type(k).__name__}; "
                                     "use ints, slices, ..., None or arrays") from None
                consumed += 1
        if ellipses > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if consumed > self.ndim:
            raise IndexError(f"too many indices for array: array is {self.ndim}-dimensional, "
                             f"but {consumed} were indexed")
        # explicit bounds checks (CuPy wraps silently); on a GPU a boolean mask becomes the
        # index arrays of its true elements (our scan: NumPy's rule, mask == mask.nonzero())
        pos = 0
        ell_span = self.ndim - consumed
        masks = []
        for i, k in enumerate(out):
            if k is Ellipsis:
                pos += ell_span
            elif k is None or isinstance(k, builtins.bool):
                continue
            elif isinstance(k, int):
                n = self.shape[pos]
                if not (-n <= k < n):
                    raise IndexError(f"index {k} is out of bounds for axis {pos} with size {n}")
                pos += 1
            elif isinstance(k, slice):
                pos += 1
            elif k.dtype == np.bool_:
                if not setting and k.ndim and self._device.is_cuda:
                    with _dev.on(self._device):   # our scan runs on the mask's GPU
                        masks.append((i, mask_indices(k, self.shape[pos:pos + k.ndim], pos)))
                pos += k.ndim  # else the backend checks the mask's shape
            else:
                n = self.shape[pos]
                if k.size and self._device.is_cuda:
                    if indices_outside(k, n):
                        raise IndexError(f"integer array index out of bounds for axis {pos} "
                                         f"with size {n}")
                pos += 1
        for i, indices in reversed(masks):
            out[i:i + 1] = indices
        return tuple(out)

    def __getitem__(self, key, /):
        """``x[key]`` with the standard's indexing (ints, slices, ``...``, ``None``,
        integer arrays, boolean masks).

        >>> import forge_array as xp
        >>> x = xp.reshape(xp.arange(6, device="cpu"), (2, 3))
        >>> x[1, ::2]
        Array([3, 5], dtype=int64, device=cpu)
        """
        if type(key) is Array and self._device.is_cuda and key.ndim == 1 and self.ndim >= 2 \
                and key.dtype == _dt.bool and key._device == self._device and key.shape[0] == self.shape[0]:
            # a row mask: our scan and row gather (the backend's indexing otherwise)
            values_read()
            with _dev.on(self._device):
                rows = _routing.compress_rows(self._array, key._array)
            if rows is not None:
                return Array._new(rows, self._device)
        k = self._key(key)
        src = self._array
        res = src[k]
        if VIEW_TAKEN[0] is not None and _basic_key(k):
            VIEW_TAKEN[0](src, lambda a: a[k], res)
        return Array._new(res, self._device)

    def __setitem__(self, key, value, /):
        """``x[key] = value``; ``value`` must promote to ``x.dtype``.

        >>> import forge_array as xp
        >>> x = xp.zeros(3, device="cpu")
        >>> x[1] = 5.0
        >>> x
        Array([0., 5., 0.], dtype=float64, device=cpu)
        """
        k = self._key(key, setting=True)
        if isinstance(value, Array):
            _dev.check_same_device(self._device, value._device)
            if _dt.promote(value.dtype, self.dtype) != self.dtype:
                raise TypeError(f"cannot assign values of dtype {value.dtype} into an array "
                                f"of dtype {self.dtype} (it would change the dtype)")
            v = value._array
        elif is_scalar(value):
            dt = scalar_dtype(value, self.dtype, "value")
            if dt != self.dtype:
                raise TypeError(f"cannot assign {value!r} into an array of dtype {self.dtype}")
            v = np.asarray(py_scalar(value), dtype=dt)[()]   # a NumPy scalar: no transfer yet
        else:
            raise TypeError(f"value must be an array or a Python scalar, got "
                            f"{type(value).__name__}")
        before_write()
        if self._device.is_cuda:
            # a single value goes to CuPy's kernel as a parameter (no copy from the host,
            # which would wait for the GPU), but for -0.0: CuPy writes any value == 0 with a
            # memset (+0.0), so that one goes as a 0-d array
            if masked_fill(self._array, k, v):
                return
            if isinstance(v, np.generic) and has_negative_zero(v):
                v = transfer(np.asarray(v), _dev.cpu, self._device)
        self._array[k] = v

    # ------------------------------------------------------------------ operators
    def _binop(self, other, name, reflected=False):
        if not isinstance(other, Array) and not is_scalar(other):
            if is_foreign_array(other):
                raise foreign_operand_error(other, f"operator {SYMBOLS[name]}")
            return NotImplemented
        fn = OPERATORS[name]
        return fn(other, self) if reflected else fn(self, other)

    def _iop(self, other, name):
        f = IN_PLACE[0]
        if f is not None and f(self, other, name):
            return self
        res = self._in_place_result(other, name)
        if res is NotImplemented:
            return res
        return self._write_in_place(res)

    def _in_place_result(self, other, name):
        """The value ``self <name>= other`` gives ``self`` (checked: same dtype and shape)."""
        if not isinstance(other, Array) and not is_scalar(other):
            if is_foreign_array(other):
                raise foreign_operand_error(other, f"operator {SYMBOLS[name]}=")
            return NotImplemented
        res = OPERATORS[name](self, other)
        if res.dtype != self.dtype:
            raise TypeError(f"in-place operation would change the dtype of the left operand "
                            f"from {self.dtype} to {res.dtype}")
        if res.shape != self.shape:
            raise ValueError(f"in-place operation would change the shape of the left operand "
                             f"from {self.shape} to {res.shape}")
        return res

    def _write_in_place(self, res):
        r = res._array
        before_write()
        self._array[...] = r
        return self

    def __abs__(self):
        return OPERATORS["abs"](self)

    def __neg__(self):
        return OPERATORS["negative"](self)

    def __pos__(self):
        return OPERATORS["positive"](self)

    def __invert__(self):
        return OPERATORS["bitwise_invert"](self)

    __hash__ = None

    def __matmul__(self, other, /):
        if not isinstance(other, Array):
            if is_foreign_array(other):
                raise foreign_operand_error(other, "operator @")
            return NotImplemented
        return OPERATORS["matmul"](self, other)

    def __rmatmul__(self, other, /):
        if not isinstance(other, Array):
            if is_foreign_array(other):
                raise foreign_operand_error(other, "operator @")
            return NotImplemented
        return OPERATORS["matmul"](other, self)

    def __imatmul__(self, other, /):
        if not isinstance(other, Array):
            if is_foreign_array(other):
                raise foreign_operand_error(other, "operator @=")
            return NotImplemented
        res = OPERATORS["matmul"](self, other)
        if res.dtype != self.dtype or res.shape != self.shape:
            raise ValueError("in-place matmul would change the shape or dtype of the left "
                             "operand")
        r = res._array
        before_write()
        self._array[...] = r
        return self


def _check_index_device(k, device):
    """ValueError naming both devices unless the NumPy / CuPy index array ``k`` lives on
    ``device`` (NumPy arrays index CPU arrays, CuPy arrays the GPU arrays of their GPU)."""
    kdev = _dev.device_of(k)
    if kdev != device:
        raise ValueError(
            f"a {type_name(k)} index lives on {kdev} and cannot index an array on {device}; "
            f"move it first (xp.asarray(index, device={str(device)!r}))"
        )


def _holds_gpu_array(v) -> builtins.bool:
    """Whether ``v`` (arguments, through tuples, lists and dicts) holds a GPU Array."""
    if isinstance(v, Array):
        return v._device.is_cuda
    if isinstance(v, (tuple, list)):
        return builtins.any(map(_holds_gpu_array, v))
    if isinstance(v, dict):
        return builtins.any(map(_holds_gpu_array, v.values()))
    return False


def _as_numpy(v):
    """``v`` with every (CPU) Array replaced by the NumPy array of its memory."""
    if isinstance(v, Array):
        arr = v._array
        share(arr)  # NumPy code may write it from now on
        return arr
    if type(v) is tuple or type(v) is list:
        return type(v)(map(_as_numpy, v))
    if type(v) is dict:
        return {k: _as_numpy(x) for k, x in v.items()}
    return v


# The operators: (dunder stem, namespace function); ``__x__`` and ``__rx__`` call the function
# through :meth:`Array._binop`, ``__ix__`` writes in place through :meth:`Array._iop`; the
# comparisons have no reflected or in-place form.
_ARITHMETIC = (("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "divide"),
               ("floordiv", "floor_divide"), ("mod", "remainder"), ("pow", "pow"),
               ("and", "bitwise_and"), ("or", "bitwise_or"), ("xor", "bitwise_xor"),
               ("lshift", "bitwise_left_shift"), ("rshift", "bitwise_right_shift"))
_COMPARISONS = (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"),
                ("gt", "greater"), ("ge", "greater_equal"))


def _operator(stem, name, kind):
    if kind == "i":
        def op(self, other, /):
            return self._iop(other, name)
    elif kind == "r":
        def op(self, other, /):
            return self._binop(other, name, True)
    else:
        def op(self, other, /):
            return self._binop(other, name)
    op.__name__ = f"__{kind}{stem}__"
    op.__qualname__ = f"Array.{op.__name__}"
    form = {"i": "in place", "r": "reflected"}.get(kind, "x OP y")
    op.__doc__ = f"``{name}`` as an operator ({form})."
    return op


for _stem, _name in _ARITHMETIC:
    for _kind in ("", "r", "i"):
        setattr(Array, f"__{_kind}{_stem}__", _operator(_stem, _name, _kind))
for _stem, _name in _COMPARISONS:
    setattr(Array, f"__{_stem}__", _operator(_stem, _name, ""))
