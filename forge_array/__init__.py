# ruff: noqa: F401, E402
"""forge_array: an Array API standard (2025.12) namespace over CuPy (GPU) and NumPy (CPU).

>>> import forge_array as xp
>>> x = xp.arange(5, device="cpu")
>>> int(xp.sum(x))
10
"""

import sys as _sys

from ._version import __version__

__array_api_version__ = "2025.12"

from . import _array, fft, fusion, linalg, ops
from ._array import Array
from ._constants import e, inf, nan, newaxis, pi
from ._creation import (
    arange,
    asarray,
    empty,
    empty_like,
    eye,
    from_dlpack,
    full,
    full_like,
    linspace,
    meshgrid,
    ones,
    ones_like,
    tril,
    triu,
    zeros,
    zeros_like,
)
from ._data_type import astype, can_cast, finfo, iinfo, isdtype, result_type
from ._devices import Device, cpu
from ._dtypes import (
    bool,
    complex64,
    complex128,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    is_strict,
    set_strict,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._elementwise import (
    abs,
    acos,
    acosh,
    add,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_and,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    ceil,
    clip,
    conj,
    copysign,
    cos,
    cosh,
    divide,
    equal,
    exp,
    expm1,
    floor,
    floor_divide,
    greater,
    greater_equal,
    hypot,
    imag,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    multiply,
    negative,
    nextafter,
    not_equal,
    positive,
    pow,
    real,
    reciprocal,
    remainder,
    round,
    sign,
    signbit,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    trunc,
)
from ._generic import mapreduce, reduce
from ._generic_matvec import matvec, vecmat
from ._generic_scan import accumulate
from ._indexing import take, take_along_axis
from ._info import __array_namespace_info__
from ._linear_algebra import matmul, matrix_transpose, tensordot, vecdot
from ._manipulation import (
    broadcast_arrays,
    broadcast_shapes,
    broadcast_to,
    concat,
    expand_dims,
    flip,
    moveaxis,
    permute_dims,
    repeat,
    reshape,
    roll,
    squeeze,
    stack,
    tile,
    unstack,
)
from ._searching import argmax, argmin, count_nonzero, nonzero, searchsorted, where
from ._sets import isin, unique_all, unique_counts, unique_inverse, unique_values
from ._sorting import argsort, sort
from ._statistical import (
    cumulative_prod,
    cumulative_sum,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
)
from ._utility import all, any, diff
from .fusion import fuse
from .runtime.flags import flags, get_flags, reset_flags, set_flags

# the layers below reach the namespace only through these hooks
_array.NAMESPACE[0] = fusion.auto.NAMESPACE[0] = _sys.modules[__name__]


def __getattr__(name):
    # ``Sharding`` loads forge_array.sharding at first use, which routes sharded arguments
    # of the namespace's functions (a process that never shards keeps them unwrapped)
    if name in ("Sharding", "sharding"):
        import importlib

        mod = importlib.import_module(".sharding", __name__)
        globals()["Sharding"] = mod.Sharding
        return mod if name == "sharding" else mod.Sharding
    raise AttributeError(f"module 'forge_array' has no attribute {name!r}")
