"""The boundary with NumPy, CuPy and DLPack: names and errors for foreign operands, the
NumPy names of the namespace's functions, DLPack export across producer versions, and
copies of backend arrays between devices.

>>> import numpy as np
>>> is_foreign_array(np.ones(2)), type_name(np.ones(2))
(True, 'numpy.ndarray')
>>> namespace_name("power"), SYMBOLS["add"]
('pow', '+')
"""

from __future__ import annotations

import builtins

import numpy as np

from . import _devices as _dev

__all__ = ["scalar_type_name", "type_name", "is_foreign_array", "foreign_operand_error",
           "SYMBOLS", "COMPARISONS", "UFUNC_NAMES", "cupy_stream", "export_dlpack", "transfer", "transfer_together",
           "has_negative_zero", "device_full", "namespace_name", "namespace_hint"]


def scalar_type_name(v) -> str:
    """``Python float`` for a Python scalar, ``numpy.float64`` for a NumPy one."""
    if isinstance(v, np.generic):
        return f"numpy.{type(v).__name__}"
    return f"Python {type(v).__name__}"


def type_name(v) -> str:
    """The qualified name of ``v``'s type for messages: ``numpy.ndarray``, ``cupy.ndarray``,
    ``list``."""
    t = type(v)
    top = t.__module__.split(".")[0]
    return t.__name__ if top == "builtins" else f"{top}.{t.__name__}"


def is_foreign_array(v) -> builtins.bool:
    """Whether ``v`` is a NumPy or CuPy array (not a forge_array one)."""
    return isinstance(v, np.ndarray) or _dev.is_cupy_array(v)


def foreign_operand_error(v, where: str) -> TypeError:
    """The TypeError for a NumPy / CuPy array met where a forge_array array or a Python
    scalar is expected (``where``: the operator or function)."""
    return TypeError(
        f"{where}: a forge_array array cannot be combined with a {type_name(v)}; convert it "
        "first with xp.asarray(...) (import forge_array as xp), on the same device"
    )


#: operator symbols of the element-wise functions, for messages
SYMBOLS = {
    "add": "+", "subtract": "-", "multiply": "*", "divide": "/", "floor_divide": "//",
    "remainder": "%", "pow": "**", "bitwise_and": "&", "bitwise_or": "|",
    "bitwise_xor": "^", "bitwise_left_shift": "<<", "bitwise_right_shift": ">>",
    "equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">",
    "greater_equal": ">=",
}

COMPARISONS = frozenset(("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"))

#: NumPy ufuncs of two operands -> the namespace's function: a NumPy scalar on the left of
#: an operator (``np.float64(2) * x``) reaches :meth:`Array.__array_ufunc__` as one of these
UFUNC_NAMES = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "true_divide": "divide", "floor_divide": "floor_divide", "remainder": "remainder",
    "power": "pow", "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or",
    "bitwise_xor": "bitwise_xor", "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift", "equal": "equal", "not_equal": "not_equal",
    "less": "less", "less_equal": "less_equal", "greater": "greater",
    "greater_equal": "greater_equal",
}


def cupy_stream(device, stream):
    if stream is None:
        return None
    cp = _dev.backend(device)
    if isinstance(stream, int):
        return cp.cuda.ExternalStream(stream)
    return stream


def export_dlpack(arr, max_version, stream=None):
    """``arr.__dlpack__`` passing only what the producer (NumPy/CuPy version) accepts."""
    kwargs = {}
    if stream is not None:
        kwargs["stream"] = stream
    if max_version is not None:
        kwargs["max_version"] = tuple(max_version)
    try:
        return arr.__dlpack__(**kwargs)
    except TypeError:  # an older producer without max_version
        kwargs.pop("max_version", None)
        return arr.__dlpack__(**kwargs)


def transfer(arr, src, dst, stream=None):
    """Copy a backend array from device ``src`` to device ``dst``."""
    if src == dst:
        return arr
    if not src.is_cuda:  # cpu -> cuda
        # Copy the bytes: cupy.asarray fills 0-d arrays from their value (memset for
        # any value == 0), which turns -0.0 into +0.0.
        cp = _dev.backend(dst)
        host = arr if arr.flags.c_contiguous else np.array(arr, order="C")
        raw = host.reshape(-1).view(np.uint8)  # (np.ascontiguousarray would make 0-d 1-d)
        with _dev.on(dst):
            s = cupy_stream(dst, stream)
            if s is not None:
                with s:
                    dev = cp.asarray(raw)
            else:
                dev = cp.asarray(raw)
            return dev.view(host.dtype).reshape(arr.shape)
    if not dst.is_cuda:  # cuda -> cpu
        with _dev.on(src):
            return arr.get(stream=cupy_stream(src, stream))
    cp = _dev.backend(dst)  # cuda:i -> cuda:j
    with _dev.on(src):
        srcc = arr if arr.flags.c_contiguous else arr.copy(order="C")
    with _dev.on(dst):
        out = cp.empty(arr.shape, srcc.dtype)
        if srcc.nbytes:
            out.data.copy_from_device(srcc.data, srcc.nbytes)
    return out


def transfer_together(arrays, device):
    """NumPy arrays moved to GPU ``device`` in one host-to-device copy: views of one buffer,
    each starting at a 16-byte boundary.

    >>> import numpy as np
    >>> [a.tolist() for a in transfer_together([np.arange(2), np.ones(1)], None)]  # doctest: +SKIP
    [[0, 1], [1.0]]
    """
    offsets, total = [], 0
    for a in arrays:
        offsets.append(total)
        total += -(-a.nbytes // 16) * 16
    buf = np.zeros(max(total, 16), dtype=np.uint8)
    for a, off in zip(arrays, offsets):
        buf[off:off + a.nbytes] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    dev = transfer(buf, _dev.cpu, device)
    return [dev[off:off + a.nbytes].view(a.dtype).reshape(a.shape) for a, off in zip(arrays, offsets)]


def has_negative_zero(value) -> builtins.bool:
    """Whether scalar ``value`` (Python or NumPy) is -0.0 or has a -0.0 part (complex): the
    values a GPU fill cannot take as a kernel parameter, since CuPy writes any value == 0
    with a memset (+0.0).

    >>> has_negative_zero(-0.0), has_negative_zero(complex(1.0, -0.0)), has_negative_zero(0.0)
    (True, True, False)
    """
    re = value.real
    im = getattr(value, "imag", 0)
    return builtins.bool((re == 0 and np.signbit(float(re))) or (im == 0 and np.signbit(float(im))))


def device_full(shape, value, dtype, device):
    """The CuPy array of ``shape`` and ``dtype`` on GPU ``device`` holding scalar ``value``
    everywhere: CuPy's fill kernel with the value (exact, as a NumPy scalar of ``dtype``) as
    its parameter, so that nothing is copied from the host (a copy from pageable memory waits
    for the GPU's queue); a value with a -0.0 part is copied and broadcast instead.

    >>> import numpy as np
    >>> device_full((2,), 1.5, np.dtype("float32"), None)   # doctest: +SKIP
    array([1.5, 1.5], dtype=float32)
    """
    cp = _dev.backend(device)
    with _dev.on(device):
        if has_negative_zero(value):
            src = transfer(np.asarray(value, dtype=dtype), _dev.cpu, device)
            return cp.ascontiguousarray(cp.broadcast_to(src, shape)) if shape else src
        res = cp.empty(shape, dtype=dtype)
        res.fill(dtype.type(value))
        return res


def namespace_name(numpy_name: str) -> str:
    """The namespace's name of a NumPy function (``power`` -> ``pow``, ``average`` ->
    ``mean``), or the name itself."""
    return UFUNC_NAMES.get(numpy_name) or {"average": "mean", "absolute": "abs",
                                            "concatenate": "concat", "transpose":
                                            "permute_dims", "amax": "max", "amin": "min",
                                            "cumsum": "cumulative_sum",
                                            "cumprod": "cumulative_prod",
                                            "arccos": "acos", "arcsin": "asin",
                                            "arctan": "atan", "arctan2": "atan2",
                                            "invert": "bitwise_invert"}.get(numpy_name,
                                                                            numpy_name)


def namespace_hint(numpy_name: str, namespace) -> str:
    """``xp.sum(...)`` for NumPy's ``sum``: the namespace's function of that name, or the
    namespace's functions in general where it has none (``namespace``: the package)."""
    name = namespace_name(numpy_name)
    if callable(getattr(namespace, name, None)):
        return f"xp.{name}(...)"
    return "the namespace's functions (xp = forge_array)"

