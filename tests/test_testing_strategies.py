"""The strategies of forge_array.testing produce what they claim."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from forge_array.testing import (
    DEFAULT_EDGES,
    arrays,
    axes,
    dtypes,
    shapes,
    view_layouts,
    views,
)

FIND = settings(database=None, max_examples=2000)
FAST = settings(database=None, max_examples=60, deadline=None)


def _find(strategy, condition):
    return find(strategy, condition, settings=FIND)


def _is_view_of_larger_buffer(v: np.ndarray) -> bool:
    base = v
    while isinstance(base.base, np.ndarray):
        base = base.base
    return base is not v


# ------------------------------------------------------------------------------ dtypes


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("bool", {"b"}),
        ("signed integer", {"i"}),
        ("unsigned integer", {"u"}),
        ("integral", {"i", "u"}),
        ("real floating", {"f"}),
        ("complex floating", {"c"}),
        ("numeric", {"i", "u", "f", "c"}),
        (("bool", "real floating"), {"b", "f"}),
    ],
)
def test_dtypes_kinds(kind, expected):
    seen = set()

    @FAST
    @given(dtypes(kind))
    def check(dt):
        assert isinstance(dt, np.dtype)
        assert dt.kind in expected
        seen.add(dt.kind)

    check()
    assert seen == expected


def test_dtypes_rejects_unknown_kind():
    with pytest.raises(ValueError, match="unknown dtype kind"):
        dtypes("floaty")


def test_dtypes_shrink_to_first():
    assert _find(dtypes("real floating"), lambda d: True) == np.float32


# ------------------------------------------------------------------------------ shapes


@FAST
@given(shapes(min_dims=1, max_dims=4, min_side=1, max_side=50, max_size=5000))
def test_shapes_bounds(shape):
    assert 1 <= len(shape) <= 4
    assert all(1 <= n <= 50 for n in shape)
    assert math.prod(shape) <= 5000


@pytest.mark.parametrize("edge", DEFAULT_EDGES + (127, 128, 129))
def test_shapes_reach_edges(edge):
    s = shapes(min_dims=1, max_dims=2, max_side=200, edges=(127, 128, 129))
    assert edge in _find(s, lambda shp: edge in shp)


def test_shapes_edges_come_early():
    # Hypothesis does not repeat examples, so "biased" means: every edge shows up in
    # the first hundred examples, which uniform sampling of 0..1000 would not give.
    edges = {0, 1, 31, 32, 33, 500}
    seen = set()

    @settings(database=None, max_examples=100, deadline=None)
    @given(shapes(min_dims=1, max_dims=1, max_side=1000, edges=(500,)))
    def collect(shape):
        seen.add(shape[0])

    collect()
    assert edges <= seen


def test_shapes_shrink():
    assert _find(shapes(min_dims=2, min_side=1), lambda s: True) == (1, 1)


# -------------------------------------------------------------------------------- axes


@FAST
@given(st.integers(0, 4).flatmap(lambda n: st.tuples(st.just(n), axes(n))))
def test_axes_valid(args):
    ndim, axis = args
    if axis is None:
        return
    items = (axis,) if isinstance(axis, int) else axis
    assert all(-ndim <= a < ndim for a in items)
    normalized = [a % ndim for a in items] if ndim else []
    assert len(set(normalized)) == len(normalized)


def test_axes_reach_negative_and_tuples():
    assert _find(axes(3), lambda a: isinstance(a, int) and a < 0) < 0
    t = _find(axes(3), lambda a: isinstance(a, tuple) and len(a) == 3 and min(a) < 0)
    assert sorted(x % 3 for x in t) == [0, 1, 2]
    assert _find(axes(3), lambda a: True) is None


# ------------------------------------------------------------------------------ arrays


@FAST
@given(arrays(dtypes(), shapes()))
def test_arrays_are_contiguous_and_finite(a):
    assert isinstance(a, np.ndarray)
    assert a.flags.c_contiguous
    if a.dtype.kind in "fc":
        assert np.isfinite(a).all()
        assert (np.abs(a) <= 1000 * (1 + 1e-6)).all()  # complex64 rounding


@FAST
@given(arrays("int16", st.just((2, 3)), xp="numpy", elements={"min_value": 0, "max_value": 9}))
def test_arrays_dict_elements(a):
    assert a.shape == (2, 3) and a.dtype == np.int16
    assert ((a >= 0) & (a <= 9)).all()


def test_arrays_nan_on_request():
    a = _find(arrays(np.float32, 5, elements={"allow_nan": True}), lambda a: np.isnan(a).any())
    assert np.isnan(a).any()


# ------------------------------------------------------------------------------- views


@FAST
@given(st.data(), dtypes("all"), shapes(max_dims=4, max_side=12))
def test_views_shape_dtype_and_values(data, dt, shape):
    layout = data.draw(view_layouts(shape))
    v = layout.apply(np.arange(layout.base_size))
    assert v.shape == shape
    # every element of the view lies inside the buffer (arange values are indices)
    if v.size:
        assert v.min() >= layout.flat_offset and v.max() < layout.base_size
    w = data.draw(views(dt, shape))
    assert w.shape == shape and w.dtype == dt


@FAST
@given(views(np.float32, shapes(min_dims=1, max_dims=3, min_side=1, max_side=10)))
def test_views_share_a_buffer(v):
    assert _is_view_of_larger_buffer(v)


@pytest.mark.parametrize(
    "what, condition",
    [
        ("non-contiguous", lambda v: not v.flags.c_contiguous and not v.flags.f_contiguous),
        ("negative stride", lambda v: any(s < 0 for s in v.strides)),
        ("zero stride", lambda v: any(s == 0 for s in v.strides)),
        ("misaligned start", lambda v: v.ctypes.data % 16 != 0),
        ("transposed", lambda v: 0 < abs(v.strides[0]) < abs(v.strides[1])),
        ("step > 1", lambda v: abs(v.strides[-1]) >= 8),
    ],
)
def test_views_reach_layouts(what, condition):
    v = _find(views(np.float32, (3, 5)), condition)
    assert condition(v), what


def test_views_misaligned_0d_and_1d():
    v = _find(views(np.float64, ()), lambda v: v.ctypes.data % 16 != 0)
    assert v.shape == ()
    v = _find(views(np.float64, (7,)), lambda v: v.ctypes.data % 16 != 0)
    assert v.shape == (7,)


def test_views_shrink_to_contiguous():
    v = _find(views(np.float32, (3, 4, 5)), lambda v: True)
    assert v.flags.c_contiguous and v.shape == (3, 4, 5)
    assert all(s > 0 for s in v.strides)
    layout = _find(view_layouts((3, 4, 5)), lambda lay: True)
    assert layout.is_trivial


def test_views_shrink_to_simplest_failing_layout():
    # a "bug" that only needs a negative stride: shrinking keeps just that
    layout = _find(view_layouts((4, 4)), lambda lay: any(s.step < 0 for s in lay.index))
    assert layout.flat_offset == 0 and not any(layout.broadcast)
    assert layout.perm == (0, 1)
    assert sorted(s.step for s in layout.index) == [-1, 1]


@FAST
@given(views(np.int32, shapes(max_dims=3, max_side=8), kinds=()))
def test_views_without_kinds_are_plain(v):
    assert v.flags.c_contiguous


def test_views_rejects_unknown_kind():
    with pytest.raises(ValueError, match="unknown view kinds"):
        view_layouts((2,), kinds=("diagonal",)).example()


# ------------------------------------------------------------------ other namespaces


def _forge_array_or_skip():
    try:
        import forge_array as fa
    except Exception as exc:  # pragma: no cover - depends on the rest of the package
        pytest.skip(f"forge_array does not import: {exc}")
    if not hasattr(fa, "asarray") or not hasattr(fa, "float32"):
        pytest.skip("forge_array namespace not available yet")
    return fa


def test_views_in_forge_array():
    fa = _forge_array_or_skip()

    @settings(database=None, max_examples=25, deadline=None)
    @given(views(fa.float32, shapes(max_dims=3, max_side=6), xp=fa))
    def check(v):
        assert tuple(v.shape) == v.shape and len(v.shape) <= 3
        assert v.dtype == fa.float32

    try:
        check()
    except (TypeError, NotImplementedError) as exc:  # pragma: no cover
        pytest.skip(f"forge_array cannot build views yet: {exc}")


def _cupy_or_skip():
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no GPU")
    except Exception:
        pytest.skip("no GPU")
    return cupy


def test_views_in_cupy():
    cupy = _cupy_or_skip()

    @settings(database=None, max_examples=25, deadline=None)
    @given(views(np.float32, shapes(max_dims=3, max_side=6), xp=cupy))
    def check(v):
        assert isinstance(v, cupy.ndarray)

    check()
    v = _find(views(np.float32, (3, 5), xp=cupy), lambda v: v.data.ptr % 16 != 0)
    assert v.data.ptr % 16 != 0
    v = _find(views(np.float32, (3, 5), xp=cupy), lambda v: min(v.strides) < 0)
    assert min(v.strides) < 0
    v = _find(views(np.float32, (3, 5), xp=cupy), lambda v: 0 in v.strides)
    assert 0 in v.strides


@settings(database=None, max_examples=40, deadline=None)
@given(st.data(), shapes(max_dims=3, max_side=7))
def test_cupy_layout_matches_numpy(data, shape):
    cupy = _cupy_or_skip()
    layout = data.draw(view_layouts(shape))
    host = np.arange(layout.base_size, dtype=np.int64)
    expected = layout.apply(host)
    got = layout.apply(cupy.asarray(host), cupy)
    assert got.shape == expected.shape
    if expected.size:  # empty arrays' strides differ between NumPy and CuPy
        # the stride of a length-1 axis is never used to address an element, and CuPy and NumPy
        # differ there (e.g. broadcasting a (1, 1, 1) base to (1, 1, 2)): compare the others
        assert [s for s, d in zip(got.strides, got.shape) if d > 1] == \
            [s for s, d in zip(expected.strides, expected.shape) if d > 1]
    np.testing.assert_array_equal(cupy.asnumpy(got), expected)
