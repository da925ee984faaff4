"""Hypothesis strategies for arrays *and their views*.

Hypothesis's own array strategies (``hypothesis.extra.numpy.arrays`` and the
array-API ones) only build fresh C-contiguous arrays.  GPU kernels break on views:
start offsets that are not 16-byte aligned, negative steps, zero strides from
broadcasting, transposes.  [`views`][] draws those, and shrinks to the plain
contiguous array when a failure does not depend on the layout.

All strategies work for NumPy, CuPy and forge_array (or any Array API namespace):
values are drawn on the host with NumPy, then moved with ``xp.asarray`` and sliced,
permuted and broadcast with the namespace's own functions, so the result is a real
view in that namespace.

Examples:
    >>> import numpy as np
    >>> from hypothesis import given
    >>> from forge_array.testing import views, shapes
    >>> @given(views(np.float32, shapes(min_dims=1)))
    ... def test_sum(x):
    ...     np.testing.assert_allclose(x.sum(), np.asarray(x, dtype=np.float64).sum(),
    ...                                rtol=1e-4, atol=1e-2)
"""

from __future__ import annotations

import importlib
import math
import operator
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = [
    "DTYPE_KINDS",
    "DEFAULT_EDGES",
    "dtypes",
    "shapes",
    "axes",
    "elements_for",
    "arrays",
    "views",
    "view_layouts",
    "ViewLayout",
]

# --------------------------------------------------------------------------- dtypes

_BOOL = ("bool",)
_SIGNED = ("int8", "int16", "int32", "int64")
_UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
_REAL = ("float32", "float64")
_COMPLEX = ("complex64", "complex128")

#: dtype names of the Array API standard, per kind (the standard's kind names).
DTYPE_KINDS: dict[str, tuple[str, ...]] = {
    "bool": _BOOL,
    "signed integer": _SIGNED,
    "unsigned integer": _UNSIGNED,
    "integral": _SIGNED + _UNSIGNED,
    "real floating": _REAL,
    "complex floating": _COMPLEX,
    "numeric": _SIGNED + _UNSIGNED + _REAL + _COMPLEX,
    "all": _BOOL + _SIGNED + _UNSIGNED + _REAL + _COMPLEX,
}

#: Side lengths that the shape strategies favour: empty, single, one warp +- 1.
DEFAULT_EDGES: tuple[int, ...] = (0, 1, 31, 32, 33)


def _dtype_names(kind: str | Iterable[str]) -> list[str]:
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    names: list[str] = []
    for k in kinds:
        if k in DTYPE_KINDS:
            group = DTYPE_KINDS[k]
        else:
            try:
                group = (np.dtype(k).name,)
            except TypeError:
                raise ValueError(
                    f"unknown dtype kind {k!r}; expected one of {sorted(DTYPE_KINDS)} "
                    "or a dtype name"
                ) from None
        names.extend(n for n in group if n not in names)
    if not names:
        raise ValueError("dtypes(): empty kind tuple")
    return names


def dtypes(kind: str | Sequence[str] = "numeric", *, xp: Any = None) -> st.SearchStrategy:
    """Strategy for dtypes of an Array API kind.

    ``kind`` is one of ``"bool"``, ``"signed integer"``, ``"unsigned integer"``,
    ``"integral"``, ``"real floating"``, ``"complex floating"``, ``"numeric"``,
    ``"all"``, a dtype name such as ``"float32"``, or a tuple of these.

    Without ``xp`` (or with NumPy / CuPy) the values are ``numpy.dtype`` objects,
    which CuPy accepts too.  With another namespace (e.g. forge_array) they are that
    namespace's dtype objects (``xp.float32`` ...).  Shrinks toward the first dtype of
    the kind (bool, then int8, ..., float32, ...).

    Examples:
        >>> from forge_array.testing import dtypes
        >>> dtypes("real floating").example() in (np.dtype("float32"), np.dtype("float64"))
        True
    """
    names = _dtype_names(kind)
    mod = _resolve_xp(xp)
    if mod is None or _module_name(mod) in ("numpy", "cupy"):
        return st.sampled_from([np.dtype(n) for n in names])
    return st.sampled_from([getattr(mod, n) for n in names])


def _as_numpy_dtype(dtype: Any) -> np.dtype:
    """A NumPy dtype from a NumPy/CuPy dtype, a name, or another namespace's dtype."""
    try:
        return np.dtype(dtype)
    except TypeError:
        pass
    for attr in ("name", "__name__"):
        name = getattr(dtype, attr, None)
        if isinstance(name, str):
            try:
                return np.dtype(name)
            except TypeError:
                pass
    text = str(dtype).rsplit(".", 1)[-1].strip("'>\"")
    return np.dtype(text)


# --------------------------------------------------------------------------- shapes


def _side(lo: int, hi: int, edges: Iterable[int]) -> st.SearchStrategy[int]:
    hi = max(lo, hi)
    usable = sorted({e for e in edges if lo <= e <= hi})
    plain = st.integers(lo, hi)
    # one_of shrinks toward its first branch: a small plain integer.
    return st.one_of(plain, st.sampled_from(usable)) if usable else plain


def shapes(
    min_dims: int = 0,
    max_dims: int = 3,
    min_side: int = 0,
    max_side: int = 40,
    *,
    edges: Iterable[int] = (),
    max_size: int | None = 1 << 16,
) -> st.SearchStrategy[tuple[int, ...]]:
    """Strategy for shapes, biased toward edge sizes.

    Each side is, about half the time, one of ``DEFAULT_EDGES`` (0, 1, 31, 32, 33)
    plus the caller's ``edges`` (e.g. a kernel's tile size and its neighbours) that
    lie in ``[min_side, max_side]``; otherwise any integer in that range.  The number
    of elements stays at most ``max_size`` (``None``: no cap): later sides are capped
    by what the earlier ones leave.  Shrinks toward ``(min_side,) * min_dims``.

    Examples:
        >>> from forge_array.testing import shapes
        >>> s = shapes(min_dims=1, max_dims=2, max_side=300, edges=(255, 256, 257))
        >>> all(0 <= n <= 300 for n in s.example())
        True
    """
    if min_dims < 0 or max_dims < min_dims:
        raise ValueError(f"shapes(): need 0 <= min_dims <= max_dims, got {min_dims}, {max_dims}")
    if min_side < 0 or max_side < min_side:
        raise ValueError(f"shapes(): need 0 <= min_side <= max_side, got {min_side}, {max_side}")
    all_edges = tuple(DEFAULT_EDGES) + tuple(int(e) for e in edges)

    @st.composite
    def _shapes(draw):
        ndim = draw(st.integers(min_dims, max_dims))
        shape = []
        size = 1
        for i in range(ndim):
            hi = max_side
            if max_size is not None:
                # leave room for min_side in the remaining dims
                rest = max(min_side, 1) ** (ndim - i - 1)
                hi = min(hi, max(min_side, max_size // max(size * rest, 1)))
            n = draw(_side(min_side, hi, all_edges))
            shape.append(n)
            size *= max(n, 1)
        return tuple(shape)

    return _shapes()


# ----------------------------------------------------------------------------- axes


def axes(
    ndim: int,
    *,
    allow_none: bool = True,
    allow_int: bool = True,
    allow_tuple: bool = True,
    allow_negative: bool = True,
    min_size: int = 0,
) -> st.SearchStrategy:
    """Strategy for ``axis`` arguments of an ``ndim``-dimensional array.

    Draws ``None``, a single int in ``[-ndim, ndim)`` and tuples of distinct axes
    (distinct after normalisation, in any order, some negative).  Shrinks toward
    ``None``, then ``0``.  For ``ndim == 0`` only ``None`` and ``()`` are drawn.

    Examples:
        >>> from forge_array.testing import axes
        >>> a = axes(3).example()
        >>> a is None or isinstance(a, (int, tuple))
        True
    """
    if ndim < 0:
        raise ValueError("axes(): ndim must be >= 0")
    options: list[st.SearchStrategy] = []
    if allow_none:
        options.append(st.none())
    lo = -ndim if allow_negative else 0
    if allow_int and ndim > 0 and min_size <= 1:
        options.append(st.integers(0, ndim - 1) | st.integers(lo, ndim - 1))
    if allow_tuple and min_size <= ndim:

        @st.composite
        def _tuple(draw):
            picked = draw(
                st.lists(
                    st.integers(0, ndim - 1), min_size=min_size, max_size=ndim, unique=True
                )
                if ndim > 0
                else st.just([])
            )
            if allow_negative:
                flips = draw(st.lists(st.booleans(), min_size=len(picked), max_size=len(picked)))
                picked = [a - ndim if f else a for a, f in zip(picked, flips)]
            return tuple(picked)

        options.append(_tuple())
    if not options:
        raise ValueError("axes(): every option is disallowed")
    return st.one_of(options)


# ------------------------------------------------------------------------- elements


def elements_for(dtype: Any, elements: Any = None) -> st.SearchStrategy:
    """The element strategy used for ``dtype``.

    ``elements`` may be a strategy (returned as is), ``None`` (defaults) or a dict of
    keyword arguments for ``hypothesis.extra.numpy.from_dtype`` that override the
    defaults, e.g. ``{"allow_nan": True}`` or ``{"min_value": 0, "max_value": 255}``.

    Defaults: integers and bools span the dtype; floats are finite, not subnormal,
    in ``[-1000, 1000]``; complex numbers are finite with magnitude ``<= 1000`` (up to
    rounding in complex64).
    """
    if isinstance(elements, st.SearchStrategy):
        return elements
    dt = _as_numpy_dtype(dtype)
    kwargs: dict[str, Any] = {}
    if dt.kind == "f":
        kwargs = dict(
            allow_nan=False,
            allow_infinity=False,
            allow_subnormal=False,
            min_value=-1000.0,
            max_value=1000.0,
        )
    elif dt.kind == "c":
        kwargs = dict(
            allow_nan=False, allow_infinity=False, allow_subnormal=False, max_magnitude=1000.0
        )
    if elements is not None:
        if not isinstance(elements, Mapping):
            raise TypeError(
                f"elements must be a hypothesis strategy or a dict, got {type(elements).__name__}"
            )
        kwargs.update(elements)
        # asking for nan/inf means dropping the default finite bounds
        if kwargs.get("allow_nan") or kwargs.get("allow_infinity"):
            for key in ("min_value", "max_value", "max_magnitude"):
                if key not in elements:
                    kwargs.pop(key, None)
    return hnp.from_dtype(dt, **kwargs)


# -------------------------------------------------------------------------- modules


def _module_name(mod: Any) -> str:
    return getattr(mod, "__name__", "").split(".")[0]


def _resolve_xp(xp: Any) -> Any:
    if xp is None:
        return None
    if isinstance(xp, str):
        return importlib.import_module(xp)
    return xp


def _to_namespace(host: np.ndarray, xp: Any, device: Any) -> Any:
    """Move a NumPy array into namespace ``xp`` (a copy that we then view into)."""
    if xp is None or xp is np:
        return host if device is None else np.asarray(host, device=device)
    if _module_name(xp) == "cupy":
        if device is None:
            return xp.asarray(host)
        with _cupy_device(xp, device):
            return xp.asarray(host)
    if device is None:
        device = _default_device(xp)
    if device is None:
        return xp.asarray(host)
    return xp.asarray(host, device=device)


def _default_device(xp: Any) -> Any:
    """The namespace's default device (Array API inspection), or None.

    ``xp.asarray(numpy_array)`` may keep the data on the host (forge_array does); the
    strategies want the namespace's default device, a GPU when there is one.
    """
    info = getattr(xp, "__array_namespace_info__", None)
    if info is None:
        return None
    try:
        return info().default_device()
    except Exception:
        return None


def _cupy_device(cupy: Any, device: Any):
    if isinstance(device, int):
        return cupy.cuda.Device(device)
    return device  # a cupy.cuda.Device is a context manager already


def _resolve_shape(draw, shape) -> tuple[int, ...]:
    if isinstance(shape, st.SearchStrategy):
        shape = draw(shape)
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(operator.index(n) for n in shape)


def _resolve_dtype(draw, dtype):
    if isinstance(dtype, st.SearchStrategy):
        dtype = draw(dtype)
    return dtype


# --------------------------------------------------------------------------- arrays


def arrays(
    dtype: Any,
    shape: Any,
    *,
    xp: Any = None,
    device: Any = None,
    elements: Any = None,
) -> st.SearchStrategy:
    """Strategy for fresh C-contiguous arrays of ``dtype`` and ``shape``.

    ``dtype`` and ``shape`` may be strategies (e.g. [`dtypes`][], [`shapes`][]);
    ``shape`` may be an int.  ``xp`` is the namespace of the result: ``None`` or
    ``numpy`` (default), ``cupy``, ``forge_array`` (or its module name as a string);
    ``device`` is passed to ``xp.asarray`` (for CuPy: a device id or
    ``cupy.cuda.Device``); for other namespaces it defaults to the namespace's default
    device (``xp.__array_namespace_info__().default_device()``).
    ``elements``: see [`elements_for`][].

    Examples:
        >>> import numpy as np
        >>> from forge_array.testing import arrays
        >>> a = arrays(np.int32, (2, 3)).example()
        >>> a.shape, a.dtype
        ((2, 3), dtype('int32'))
    """
    mod = _resolve_xp(xp)

    @st.composite
    def _arrays(draw):
        dt = _resolve_dtype(draw, dtype)
        shp = _resolve_shape(draw, shape)
        host = draw(hnp.arrays(_as_numpy_dtype(dt), shp, elements=elements_for(dt, elements)))
        return _to_namespace(host, mod, device)

    return _arrays()


# ---------------------------------------------------------------------------- views


class ViewLayout:
    """How [`views`][] cuts a view out of a larger base array.

    Attributes: ``shape`` (of the view), ``flat_offset`` (elements skipped at the
    start of the 1-D buffer), ``base_shape`` (the buffer reshaped), ``index`` (one
    slice per axis), ``broadcast`` (per axis of the pre-permutation array: stride 0),
    ``perm`` (final ``permute_dims``).  ``is_trivial`` is true for a plain
    C-contiguous array.  ``repr`` shows it, which makes failing examples readable.
    """

    __slots__ = ("shape", "flat_offset", "base_shape", "index", "broadcast", "perm")

    def __init__(self, shape, flat_offset, base_shape, index, broadcast, perm):
        self.shape = tuple(shape)
        self.flat_offset = int(flat_offset)
        self.base_shape = tuple(base_shape)
        self.index = tuple(index)
        self.broadcast = tuple(broadcast)
        self.perm = tuple(perm)

    @property
    def base_size(self) -> int:
        return self.flat_offset + math.prod(self.base_shape)

    @property
    def is_trivial(self) -> bool:
        return (
            self.flat_offset == 0
            and self.base_shape == self.shape
            and all(s == slice(0, n, 1) for s, n in zip(self.index, self.shape))
            and not any(self.broadcast)
            and self.perm == tuple(range(len(self.shape)))
        )

    def apply(self, base: Any, xp: Any = None) -> Any:
        """Cut the view out of a 1-D array ``base`` of ``base_size`` elements."""
        mod = xp
        v = base[self.flat_offset :]
        v = _reshape(mod, v, self.base_shape)
        if self.index:
            v = v[self.index]
        else:
            v = v[...]
        pre_shape = tuple(self.shape[self.perm.index(j)] for j in range(len(self.shape)))
        if any(self.broadcast):
            v = _broadcast_to(mod, v, pre_shape)
        if self.perm != tuple(range(len(self.perm))):
            v = _permute_dims(mod, v, self.perm)
        return v

    def __repr__(self) -> str:
        def fmt(s):
            start = "" if s.start is None else s.start
            stop = "" if s.stop is None else s.stop
            return f"{start}:{stop}:{s.step}"

        idx = "[" + ", ".join(fmt(s) for s in self.index) + "]"
        return (
            f"ViewLayout(shape={self.shape}, flat_offset={self.flat_offset}, "
            f"base_shape={self.base_shape}, index={idx}, broadcast={self.broadcast}, "
            f"perm={self.perm})"
        )


def _namespace_of(x: Any, xp: Any) -> Any:
    if xp is not None:
        return xp
    get = getattr(x, "__array_namespace__", None)
    if get is not None:
        try:
            return get()
        except Exception:
            pass
    return importlib.import_module(type(x).__module__.split(".")[0])


def _reshape(xp: Any, x: Any, shape: tuple[int, ...]) -> Any:
    if hasattr(x, "reshape"):
        return x.reshape(shape)
    return _namespace_of(x, xp).reshape(x, shape)


def _broadcast_to(xp: Any, x: Any, shape: tuple[int, ...]) -> Any:
    return _namespace_of(x, xp).broadcast_to(x, shape)


def _permute_dims(xp: Any, x: Any, perm: tuple[int, ...]) -> Any:
    mod = _namespace_of(x, xp)
    fn = getattr(mod, "permute_dims", None)
    if fn is not None:
        return fn(x, perm)
    return x.transpose(perm)


_KINDS = ("slice", "transpose", "broadcast", "reverse", "offset")


def view_layouts(
    shape: Any,
    *,
    kinds: Sequence[str] = _KINDS,
    max_step: int = 3,
    max_offset: int = 5,
    max_base_size: int = 1 << 18,
) -> st.SearchStrategy[ViewLayout]:
    """Strategy for the [`ViewLayout`][] of a view of ``shape``.

    ``kinds`` selects what may happen: ``"slice"`` (steps up to ``max_step`` and
    extra room around each axis), ``"reverse"`` (negative steps), ``"offset"``
    (the view starts ``1..max_offset`` elements into the buffer, so it is not 16-byte
    aligned; plus start offsets per axis), ``"broadcast"`` (zero strides),
    ``"transpose"`` (an axis permutation).  Shrinks to the trivial layout.
    The base buffer holds at most ``max_base_size`` elements when the view fits
    (steps and slack are dropped otherwise).
    """
    kinds = tuple(kinds)
    unknown = set(kinds) - set(_KINDS)
    if unknown:
        raise ValueError(f"unknown view kinds {sorted(unknown)}; expected a subset of {_KINDS}")
    do_slice = "slice" in kinds
    do_rev = "reverse" in kinds
    do_off = "offset" in kinds
    do_bc = "broadcast" in kinds
    do_perm = "transpose" in kinds

    @st.composite
    def _layouts(draw):
        shp = _resolve_shape(draw, shape)
        n = len(shp)
        perm = tuple(draw(st.permutations(range(n)))) if do_perm and n > 1 else tuple(range(n))
        # pre-permutation shape: result.shape[i] == pre[perm[i]]
        pre = [0] * n
        for i, p in enumerate(perm):
            pre[p] = shp[i]
        flat_offset = draw(st.integers(0, max_offset)) if do_off else 0
        axes_params = []
        for m in pre:
            # Draw the same choices on every path: Hypothesis prefers shorter choice
            # sequences, so a branch that skipped draws would look "simpler" than the
            # plain layout and shrinking would stop there.
            bc = draw(st.booleans()) if do_bc else False
            step = draw(st.integers(1, max_step)) if do_slice else 1
            neg = draw(st.booleans()) if do_rev else False
            start = draw(st.integers(0, max_offset)) if (do_off or do_slice) else 0
            slack = draw(st.integers(0, 2)) if do_slice else 0
            if bc and m != 1:
                step = 1
            else:
                bc = False
            axes_params.append([bc, -step if neg else step, start, slack])

        def sizes():
            out = []
            for (bc, step, start, slack), m in zip(axes_params, pre):
                mm = 1 if bc else m
                out.append(start + max(mm - 1, 0) * abs(step) + (1 if mm > 0 else 0) + slack)
            return out

        if flat_offset + math.prod(sizes()) > max_base_size:
            for p in axes_params:  # deterministic fallback keeps draws reproducible
                p[1] = 1 if p[1] > 0 else -1
                p[3] = 0
        if flat_offset + math.prod(sizes()) > max_base_size:
            for p in axes_params:
                p[2] = 0
        base_shape = tuple(sizes())
        index = []
        for (bc, step, start, slack), m, b in zip(axes_params, pre, base_shape):
            mm = 1 if bc else m
            if mm == 0:
                index.append(slice(start, start, 1))
            elif step > 0:
                index.append(slice(start, start + (mm - 1) * step + 1, step))
            else:
                first = b - 1 - start
                stop = first - (mm - 1) * (-step) - 1
                index.append(slice(first, stop if stop >= 0 else None, step))
        broadcast = tuple(bool(p[0]) for p in axes_params)
        return ViewLayout(shp, flat_offset, base_shape, index, broadcast, perm)

    return _layouts()


def views(
    dtype: Any,
    shape: Any,
    *,
    xp: Any = None,
    device: Any = None,
    elements: Any = None,
    kinds: Sequence[str] = _KINDS,
    max_step: int = 3,
    max_offset: int = 5,
) -> st.SearchStrategy:
    """Strategy for *views* of ``shape`` cut out of a larger array.

    Draws a 1-D base buffer with values from [`elements_for`][], moves it into
    namespace ``xp`` (``numpy`` by default, ``cupy``, ``forge_array``...), and cuts a
    view of exactly ``shape`` out of it with the namespace's own indexing,
    ``reshape``, ``broadcast_to`` and ``permute_dims``: slices with steps up to
    ``max_step`` (negative with ``"reverse"``), start offsets so that the first
    element is not 16-byte aligned (``"offset"``), zero strides (``"broadcast"``,
    read-only in NumPy) and axis permutations (``"transpose"``).  Every draw is
    reproducible, and shrinking goes to a plain C-contiguous array first.

    ``dtype`` and ``shape`` may be strategies.  Use [`view_layouts`][] to get the
    layout alone (handy in failure messages).

    Examples:
        >>> import numpy as np
        >>> from forge_array.testing import views
        >>> v = views(np.float64, (4, 5)).example()
        >>> v.shape
        (4, 5)

        With CuPy or forge_array:

        ```python
        import cupy, forge_array as xp
        @given(views(xp.float32, shapes(), xp=xp))
        def test_sum_matches(x): ...
        ```
    """
    mod = _resolve_xp(xp)

    @st.composite
    def _views(draw):
        dt = _resolve_dtype(draw, dtype)
        shp = _resolve_shape(draw, shape)
        layout = draw(
            view_layouts(shp, kinds=kinds, max_step=max_step, max_offset=max_offset)
        )
        host = draw(
            hnp.arrays(
                _as_numpy_dtype(dt), (layout.base_size,), elements=elements_for(dt, elements)
            )
        )
        base = _to_namespace(host, mod, device)
        return layout.apply(base, mod)

    return _views()
