"""``Sharding`` (a list of devices and an axis) and ``ShardedArray`` (one block per device).

A sharded array is split along one axis into contiguous blocks, block ``i`` on
``sharding.devices[i]``. Its blocks are ordinary arrays of the namespace (``Array``), so
every operation that has a sharded implementation runs the namespace's own function on each
block, on the block's device.

A ``ShardedArray`` is an ``Array`` without a single backend buffer: a namespace function
that reaches for one (``x._array`` / ``x._device``) raises ``NotImplementedError`` naming
itself and the gather to use, so nothing gathers silently.
"""

from __future__ import annotations

import builtins
import operator
import sys

import numpy as np

from .. import _devices as _dev
from .._array import Array

#: what the methods of :class:`Sharding` and :class:`ShardedArray` call, registered by the
#: modules that implement it (they import this one, never the other way round):
#: ``scatter``/``reshard``/``gather`` (:mod:`._transfer`), ``getitem``/``setitem``/
#: ``in_place`` (:mod:`._elementwise`), ``implementation`` (:mod:`._dispatch`)
METHODS: dict = {}

__all__ = ["Sharding", "ShardedArray", "block_sizes", "refusal"]


def block_sizes(n: int, k: int) -> tuple:
    """Sizes of ``k`` contiguous blocks of ``n`` items, the first ``n % k`` one larger.

    >>> block_sizes(10, 4)
    (3, 3, 2, 2)
    >>> block_sizes(2, 4)
    (1, 1, 0, 0)
    """
    q, r = divmod(n, k)
    return tuple(q + 1 if i < r else q for i in range(k))


def _offsets(sizes) -> tuple:
    out = [0]
    for s in sizes:
        out.append(out[-1] + s)
    return tuple(out)


class Sharding:
    """Where a sharded array lives: one contiguous block along ``axis`` per device.

    ``devices`` is a sequence of devices (``"cuda:0"``, ``"cpu"``, :class:`Device`); a
    device may be listed more than once. Pass a ``Sharding`` wherever the standard takes a
    device: ``asarray(data, device=sh)``, the creation functions' ``device=``,
    ``x.to_device(sh)``. ``x.device`` of a sharded array is its sharding.

    ```python
    import forge_array as xp

    sh = xp.Sharding(["cuda:0", "cuda:1"], axis=0)
    x = xp.ones((10**8, 100), dtype=xp.float32, device=sh)  # rows split over two GPUs
    total = xp.sum(x)                 # per-GPU partial sums, combined on cuda:0
    mu = xp.mean(x, axis=0)           # combined along the split axis
    y = x.to_device("cuda:0")         # gather into one array
    ```

    >>> sh = Sharding(["cpu", "cpu"], axis=0)
    >>> sh
    Sharding(['cpu', 'cpu'], axis=0)
    >>> sh.num_shards
    2
    """

    __slots__ = ("_devices", "_axis")

    def __init__(self, devices, axis=0):
        if isinstance(devices, (str, _dev.Device)):
            devices = [devices]
        try:
            devs = tuple(_dev.as_device(d) for d in devices)
        except TypeError:
            raise TypeError(f"Sharding(): devices must be a sequence of devices, got "
                            f"{type(devices).__name__}") from None
        if not devs:
            raise ValueError("Sharding(): at least one device is needed")
        if isinstance(axis, builtins.bool):
            raise TypeError("Sharding(): axis must be an integer, got a bool")
        try:
            axis = operator.index(axis)
        except TypeError:
            raise TypeError(f"Sharding(): axis must be an integer, got "
                            f"{type(axis).__name__}") from None
        self._devices = devs
        self._axis = axis

    @property
    def devices(self) -> tuple:
        """The devices, one per block, in block order."""
        return self._devices

    @property
    def axis(self) -> int:
        """The axis split into blocks (negative counts from the end)."""
        return self._axis

    @property
    def num_shards(self) -> int:
        """The number of blocks."""
        return len(self._devices)

    def resolve_axis(self, ndim: int) -> int:
        """The split axis for an array of ``ndim`` dimensions (ValueError when it has none).

        >>> Sharding(["cpu"], axis=-1).resolve_axis(2)
        1
        """
        if ndim == 0:
            raise ValueError("a 0-d array cannot be sharded: it has no axis to split")
        if not -ndim <= self._axis < ndim:
            raise ValueError(f"Sharding axis {self._axis} is out of bounds for an array of "
                             f"dimension {ndim}")
        return self._axis % ndim

    def blocks(self, n: int) -> tuple:
        """Block sizes of ``n`` items (see :func:`block_sizes`).

        >>> Sharding(["cpu"] * 3).blocks(7)
        (3, 2, 2)
        """
        return block_sizes(n, len(self._devices))

    def with_axis(self, axis: int) -> Sharding:
        """The same devices split along ``axis``."""
        if axis == self._axis:
            return self
        return Sharding(self._devices, axis)

    def __eq__(self, other):
        if isinstance(other, Sharding):
            return self._devices == other._devices and self._axis == other._axis
        return NotImplemented

    def __hash__(self):
        return hash((self._devices, self._axis))

    def __repr__(self):
        return f"Sharding({[str(d) for d in self._devices]!r}, axis={self._axis})"

    def __reduce__(self):
        return (Sharding, ([str(d) for d in self._devices], self._axis))

    def _place_array(self, x):
        """``x.to_device(self)`` of an unsharded array: its blocks copied to the devices."""
        return METHODS["scatter"](x, self)


def _caller_name() -> str:
    """The namespace function (outermost frame of forge_array outside this package) that
    reached for a sharded array's single buffer."""
    f = sys._getframe(2)
    name = None
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if mod.startswith("forge_array") and not mod.startswith("forge_array.sharding"):
            code = f.f_code
            name = code.co_name
            if name.startswith("__"):  # a method: Class.__call__ ...
                name = getattr(code, "co_qualname", name)
        elif name is not None and not mod.startswith("forge_array"):
            break
        f = f.f_back
    return name or "this operation"


def refusal(name: str, x) -> NotImplementedError:
    """The error of an operation without a sharded path: it names the operation and the
    gather to use."""
    dev = x._sharding.devices[0] if isinstance(x, ShardedArray) else "cuda:0"
    what = f"{name}()" if name.replace(".", "_").isidentifier() else name
    return NotImplementedError(
        f"{what} has no sharded implementation (the array is split over "
        f"{x.device if isinstance(x, ShardedArray) else 'several devices'}); gather it into "
        f"one array first with x.to_device({str(dev)!r}), or use an operation that shards")


class ShardedArray(Array):
    """An array split along one axis into contiguous blocks, one per device of its
    :class:`Sharding`; made by the creation functions with ``device=Sharding(...)`` or by
    ``x.to_device(sharding)``, never directly.

    ```python
    import forge_array as xp

    x = xp.arange(10, device=xp.Sharding(["cpu"] * 3))
    x.device            # Sharding(['cpu', 'cpu', 'cpu'], axis=0)
    x.shards            # three arrays of 4, 3 and 3 elements
    int(xp.sum(x))      # 45
    ```

    Examples:
        >>> import forge_array as xp
        >>> x = xp.arange(10, device=xp.Sharding(["cpu"] * 3))
        >>> [s.shape for s in x.shards]
        [(4,), (3,), (3,)]
    """

    __slots__ = ("_shards", "_sharding", "_axis", "_offsets", "_shape", "_dtype")

    @classmethod
    def _from_shards(cls, shards, sharding, axis, shape=None):
        """Wrap per-device blocks (arrays on ``sharding.devices``, in order) split along
        ``axis`` (non-negative)."""
        shards = tuple(shards)
        if len(shards) != sharding.num_shards:
            raise ValueError(f"{len(shards)} blocks for {sharding.num_shards} devices")
        s0 = shards[0]
        dtype = s0.dtype
        if shape is None:
            shape = list(s0.shape)
            shape[axis] = builtins.sum(s.shape[axis] for s in shards)
            shape = tuple(shape)
        obj = object.__new__(cls)
        obj._shards = shards
        ax_given = sharding.axis
        if ax_given != axis and not (ax_given < 0 and ax_given % len(shape) == axis):
            sharding = sharding.with_axis(axis)
        obj._sharding = sharding
        obj._axis = axis
        obj._offsets = _offsets([s.shape[axis] for s in shards])
        obj._shape = tuple(shape)
        obj._dtype = dtype
        return obj

    # ---- the single buffer a namespace function expects: not there
    def __getattr__(self, name):
        if name in ("_array", "_device"):
            raise refusal(_caller_name(), self)
        raise AttributeError(name)

    # ---- attributes
    @property
    def dtype(self):
        """Data type of the elements."""
        return self._dtype

    @property
    def device(self):
        """The array's :class:`Sharding`."""
        return self._sharding

    @property
    def sharding(self) -> Sharding:
        """The array's :class:`Sharding` (its ``device``)."""
        return self._sharding

    @property
    def shards(self) -> tuple:
        """The blocks, in order: arrays on the sharding's devices."""
        return self._shards

    @property
    def block_offsets(self) -> tuple:
        """Start of every block along the split axis, and the axis length at the end."""
        return self._offsets

    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def ndim(self) -> int:
        return len(self._shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self._shape:
            n *= s
        return n

    @property
    def T(self):
        if self.ndim != 2:
            raise ValueError(f"x.T requires a 2-D array, got {self.ndim}-D")
        return _call("permute_dims", self, (1, 0))

    @property
    def mT(self):
        if self.ndim < 2:
            raise ValueError(f"x.mT requires at least 2 dimensions, got {self.ndim}")
        return _call("matrix_transpose", self)

    def __repr__(self):
        sizes = [self._offsets[i + 1] - self._offsets[i] for i in range(len(self._shards))]
        return (f"ShardedArray(shape={self._shape}, dtype={self._dtype}, "
                f"device={self._sharding}, blocks={sizes})")

    __str__ = __repr__

    def same_layout(self, other) -> bool:
        """Whether ``other`` is split over the same devices along the same axis with the
        same blocks (so the two combine block by block)."""
        return (isinstance(other, ShardedArray) and other._axis == self._axis
                and other._sharding.devices == self._sharding.devices
                and other._offsets == self._offsets)

    def to_device(self, device, /, *, stream=None):
        """Gather into one array on ``device`` (``"cuda:0"``, ``"cpu"``), or re-split
        along another :class:`Sharding`.

        >>> import forge_array as xp
        >>> x = xp.asarray([1, 2, 3], device=xp.Sharding(["cpu", "cpu"]))
        >>> x.to_device("cpu")
        Array([1, 2, 3], dtype=int64, device=cpu)
        """
        if isinstance(device, Sharding):
            return METHODS["reshard"](self, device)
        return METHODS["gather"](self, _dev.as_device(device))

    # ---- operators: through the sharded implementations
    def _binop(self, other, name, reflected=False):
        if not isinstance(other, Array) and not _is_scalar(other):
            return NotImplemented
        return _call(name, other, self) if reflected else _call(name, self, other)

    def _iop(self, other, name):
        if not isinstance(other, Array) and not _is_scalar(other):
            return NotImplemented
        return METHODS["in_place"](self, other, name)

    def __abs__(self):
        return _call("abs", self)

    def __neg__(self):
        return _call("negative", self)

    def __pos__(self):
        return _call("positive", self)

    def __invert__(self):
        return _call("bitwise_invert", self)

    def __matmul__(self, other, /):
        if not isinstance(other, Array):
            return NotImplemented
        return _call("matmul", self, other)

    def __rmatmul__(self, other, /):
        if not isinstance(other, Array):
            return NotImplemented
        return _call("matmul", other, self)

    def __imatmul__(self, other, /):
        raise refusal("__imatmul__", self)

    def __getitem__(self, key, /):
        return METHODS["getitem"](self, key)

    def __setitem__(self, key, value, /):
        METHODS["setitem"](self, key, value)


def _is_scalar(v):
    return isinstance(v, (builtins.bool, int, float, complex, np.generic))


def _call(name, *args, **kwargs):
    return METHODS["implementation"](name, args[0])(*args, **kwargs)


# Reflected operators (and comparisons) defined on the subclass itself, so that Python
# tries them first when the left operand is an unsharded Array.
_BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "pow", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift",
}


def _forward(fname):
    def op(self, other, /):
        return self._binop(other, fname)
    return op


def _reflected(fname):
    def op(self, other, /):
        return self._binop(other, fname, True)
    return op


for _short, _fname in _BINARY.items():
    setattr(ShardedArray, f"__{_short}__", _forward(_fname))
    setattr(ShardedArray, f"__r{_short}__", _reflected(_fname))
for _short, _fname in {"eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
                       "gt": "greater", "ge": "greater_equal"}.items():
    setattr(ShardedArray, f"__{_short}__", _forward(_fname))
ShardedArray.__hash__ = None
