"""forge_array.cupy: the CuPy drop-in, tested through its backend-generic engine
(:class:`forge_array._dropin.DropIn`) over the kernels' backend (NumPy in the simulator,
CuPy on a GPU), differentially against NumPy (float64 references for floats, exact for
integers, NumPy's own dtypes). Patching is tested on dummy modules; the real
``forge_array.cupy`` module only where CuPy is importable.
"""

import importlib
import math
import types
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_array._dropin import FUNCTIONS, METHODS, DropIn
from forge_array._dropin.rules import float_dtype, sum_dtype
from forge_array.runtime import kernels_available
from forge_array.testing import axes, shapes, views

FAST = settings(max_examples=10, deadline=None)

INT_DTYPES = ["bool", "int8", "uint8", "int16", "int32", "int64", "uint32", "uint64"]
FLOAT_DTYPES = ["float32", "float64"]
DTYPES = INT_DTYPES + FLOAT_DTYPES


@pytest.fixture(scope="module")
def d(bk):
    return DropIn(bk)


def host(x):
    if hasattr(x, "get"):
        return x.get()
    return np.asarray(x)


def dev(bk, a):
    return bk.asarray(a)


def _used_kernel(d, name, before):
    return d.counts["kernel"].get(name, 0) > before


def kcount(d, name):
    return d.counts["kernel"].get(name, 0)


def fcount(d, name):
    return d.counts["fallback"].get(name, 0)


def _axes_tuple(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        return (axis % ndim,)
    return tuple(a % ndim for a in axis)


def check_float(got, ref64, dt, n, scale):
    """``got`` (dtype ``dt``) close to the float64 reference: error bound ~ n eps scale."""
    eps = np.finfo(dt).eps
    atol = 8 * eps * max(n, 1) * np.maximum(scale, 1e-30)
    assert np.all(np.abs(got.astype(np.float64) - ref64) <= atol + 8 * eps * np.abs(ref64)), \
        (got, ref64)


# --------------------------------------------------------------------------- module shape


def test_names():
    assert set(METHODS) <= set(FUNCTIONS)
    d = DropIn(np)
    for name in FUNCTIONS:
        assert callable(getattr(d, name)), name
    assert d.max is d.amax and d.min is d.amin


def test_dtype_rules_helpers():
    assert sum_dtype(np.dtype("int32")) == np.int64
    assert sum_dtype(np.dtype("bool")) == np.int64
    assert sum_dtype(np.dtype("uint16")) == np.uint64
    assert sum_dtype(np.dtype("uint64")) == np.uint64
    assert float_dtype(np.dtype("uint8")) == np.float64
    assert float_dtype(np.dtype("float32")) == np.float32


# --------------------------------------------------------------------------- reductions


_ELEMS = {"min_value": -100.0, "max_value": 100.0}


def _case(dtypes, max_size=1200):
    @st.composite
    def draw(draw):
        dt = np.dtype(draw(st.sampled_from(dtypes)))
        shp = draw(shapes(min_dims=0, max_dims=3, max_side=40, max_size=max_size))
        x = draw(views(dt, shp, elements=_ELEMS if dt.kind == "f" else None))
        ax = draw(axes(len(shp)))
        keep = draw(st.booleans())
        return x, ax, keep

    return draw()


@pytest.mark.parametrize("name", ["sum", "prod", "nansum"])
def test_sum_prod(d, bk, name):
    @FAST
    @given(_case(DTYPES, max_size=64 if name == "prod" else 1200))
    def run(case):
        h, axis, keep = case
        x = dev(bk, h)
        before = kcount(d, name)
        r = getattr(d, name)(x, axis=axis, keepdims=keep)
        want = getattr(np, name)(h, axis=axis, keepdims=keep)
        assert r.dtype == np.asarray(want).dtype
        assert r.shape == np.shape(want)
        if h.dtype.kind == "f" and name != "prod":
            ax = _axes_tuple(axis, h.ndim)
            n = math.prod(h.shape[a] for a in ax)
            ref = np.sum(h.astype(np.float64), axis=axis, keepdims=keep)
            scale = np.sum(np.abs(h.astype(np.float64)), axis=axis, keepdims=keep)
            check_float(host(r), ref, h.dtype, n, scale)
        elif h.dtype.kind == "f":
            np.testing.assert_allclose(host(r), want, rtol=1e-4 if h.dtype == np.float32 else 1e-12)
        else:
            np.testing.assert_array_equal(host(r), want)
        if axis != () or h.ndim == 0:
            assert kcount(d, name) > before

    run()


@pytest.mark.parametrize("name", ["max", "min", "nanmax", "nanmin", "any", "all"])
def test_extrema_logical(d, bk, name):
    @FAST
    @given(_case(DTYPES))
    def run(case):
        h, axis, keep = case
        x = dev(bk, h)
        fn = getattr(np, name)
        if h.size == 0:  # the original's empty result or error (CuPy's and NumPy's differ)
            orig = d.fallbacks[{"max": "amax", "min": "amin"}.get(name, name)]
            fn = lambda a, **kw: host(orig(dev(bk, a), **kw))  # noqa: E731
        try:
            want = fn(h, axis=axis, keepdims=keep)
        except ValueError:
            with pytest.raises(ValueError):
                getattr(d, name)(x, axis=axis, keepdims=keep)
            return
        r = getattr(d, name)(x, axis=axis, keepdims=keep)
        assert r.dtype == np.asarray(want).dtype and r.shape == np.shape(want)
        np.testing.assert_array_equal(host(r), want)

    run()


@pytest.mark.parametrize("name", ["mean", "var", "std"])
def test_moments(d, bk, name):
    @FAST
    @given(_case(DTYPES), st.sampled_from([0, 1, 2]))
    def run(case, ddof):
        h, axis, keep = case
        x = dev(bk, h)
        kw = {} if name == "mean" else {"ddof": ddof}
        n = math.prod(h.shape[a] for a in _axes_tuple(axis, h.ndim)) if h.ndim else 1
        declined = n - ddof <= 0 and name != "mean"  # the backend's own inf / NaN
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = getattr(np, name)(h, axis=axis, keepdims=keep, **kw)
            r = getattr(d, name)(x, axis=axis, keepdims=keep, **kw)
            ref = getattr(np, name)(h.astype(np.float64), axis=axis, keepdims=keep, **kw)
            orig = getattr(bk, name)(x, axis=axis, keepdims=keep, **kw) if declined else None
        assert r.dtype == np.asarray(want).dtype and r.shape == np.shape(want)
        got = host(r).astype(np.float64)
        if declined:  # CuPy's differ from NumPy's (std of two int8 with ddof=2: NaN, not inf)
            np.testing.assert_array_equal(got, host(orig).astype(np.float64))
            return
        ref = np.asarray(ref, dtype=np.float64)
        if name == "std":  # compared as variances: near 0 a square root magnifies rounding
            got, ref = got ** 2, ref ** 2
        # rounding of the reference ~ n eps scale (scale**2 for variances)
        scale = float(np.max(np.abs(h.astype(np.float64)))) if h.size else 1.0
        sq = 1.0 if name == "mean" else scale
        if r.dtype == np.float32:
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * scale * sq + 1e-6)
        else:
            np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12 * scale * sq + 1e-9)

    run()


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin(d, bk, name):
    @st.composite
    def case(draw):
        dt = np.dtype(draw(st.sampled_from(DTYPES)))
        shp = draw(shapes(min_dims=1, max_dims=3, min_side=1, max_side=40, max_size=1200))
        # few distinct values: ties, the first one must win
        x = draw(views(dt, shp, elements={"min_value": 0, "max_value": 3} if dt.kind != "b" else None))
        ax = draw(st.none() | st.integers(-len(shp), len(shp) - 1))
        return x, ax, draw(st.booleans())

    @FAST
    @given(case())
    def run(c):
        h, axis, keep = c
        x = dev(bk, h)
        r = getattr(d, name)(x, axis=axis, keepdims=keep)
        want = getattr(np, name)(h, axis=axis, keepdims=keep)
        assert r.dtype == np.int64 and r.shape == np.shape(want)
        np.testing.assert_array_equal(host(r), want)

    run()


def test_argmax_flat_index_and_nan(d, bk):
    h = np.array([[1.0, 7.0, 7.0], [7.0, np.nan, 2.0]])
    x = dev(bk, h)
    assert int(d.argmax(dev(bk, np.array([[1, 9], [9, 2]])))) == 1
    assert int(d.argmax(x)) == 4 == np.argmax(h)          # the first NaN wins
    assert int(d.argmin(x)) == 4 == np.argmin(h)
    np.testing.assert_array_equal(host(d.argmax(x, axis=1)), np.argmax(h, axis=1))
    assert d.argmax(x, keepdims=True).shape == (1, 1)
    assert d.argmax(x, axis=1, dtype=np.int32).dtype == np.int32


def test_nan_propagation(d, bk):
    h = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    x = dev(bk, h)
    for name in ("sum", "prod", "max", "min", "mean", "var", "std"):
        for axis in (None, 0, 1):
            r, want = host(getattr(d, name)(x, axis=axis)), getattr(np, name)(h, axis=axis)
            np.testing.assert_allclose(r, want, rtol=1e-6, err_msg=f"{name} axis={axis}")
    np.testing.assert_array_equal(host(d.nansum(x, axis=1)), np.nansum(h, axis=1))
    np.testing.assert_array_equal(host(d.nanmax(x, axis=0)), np.nanmax(h, axis=0))
    np.testing.assert_array_equal(host(d.nanmin(x)), np.nanmin(h))


def test_nanmax_all_nan_slice_warns(d, bk):
    h = np.array([[np.nan, 1.0], [np.nan, 2.0]])
    with pytest.warns(RuntimeWarning, match="All-NaN"):
        r = d.nanmax(dev(bk, h), axis=0)
    np.testing.assert_array_equal(host(r), [np.nan, 2.0])
    with pytest.warns(RuntimeWarning):
        assert math.isnan(float(d.nanmin(dev(bk, np.full(5, np.nan)))))


def test_dtype_argument(d, bk):
    h = np.arange(40, dtype=np.float32).reshape(5, 8) / 3
    x = dev(bk, h)
    r = d.sum(x, axis=0, dtype=np.float64)
    assert r.dtype == np.float64
    np.testing.assert_allclose(host(r), h.astype(np.float64).sum(0))
    r = d.mean(x, dtype=np.float64)
    assert r.dtype == np.float64 and abs(float(r) - h.astype(np.float64).mean()) < 1e-12
    xi = dev(bk, np.arange(40, dtype=np.int8))
    assert d.sum(xi, dtype=np.int16).dtype == np.int16
    assert int(d.sum(xi, dtype=np.int16)) == 780
    assert d.prod(dev(bk, np.array([2, 3], dtype=np.uint8)), dtype=np.uint32).dtype == np.uint32
    assert d.cumsum(xi, dtype=np.float32).dtype == np.float32
    assert d.nansum(x, dtype=np.float64).dtype == np.float64
    assert d.mean(xi).dtype == np.float64 and d.var(xi).dtype == np.float64


def test_out_argument(d, bk):
    h = np.arange(24, dtype=np.float64).reshape(4, 6)
    x = dev(bk, h)
    out = bk.empty(6)
    k = kcount(d, "sum")
    assert d.sum(x, axis=0, out=out) is out and kcount(d, "sum") == k + 1
    np.testing.assert_array_equal(host(out), h.sum(0))
    out = bk.empty((4, 1))
    assert d.var(x, axis=1, keepdims=True, out=out, ddof=1) is out
    np.testing.assert_allclose(host(out), h.var(1, keepdims=True, ddof=1))
    out = bk.empty((), dtype=np.int64)
    assert d.argmax(x, out=out) is out and int(out) == 23
    out = bk.empty(24)
    assert d.cumsum(x, out=out) is out
    np.testing.assert_array_equal(host(out), np.cumsum(h))
    out = bk.empty(4)
    assert d.dot(x, dev(bk, np.ones(6)), out=out) is out
    np.testing.assert_array_equal(host(out), h.sum(1))
    # an out of another dtype: the original computes (and casts) it
    f = fcount(d, "sum")
    out = bk.empty(6, dtype=np.float32)
    assert d.sum(x, axis=0, out=out) is out and fcount(d, "sum") == f + 1
    np.testing.assert_array_equal(host(out), h.sum(0).astype(np.float32))
    # wrong shape: the original's error
    with pytest.raises(ValueError):
        d.sum(x, axis=0, out=bk.empty(5))


def test_keepdims_and_axis_forms(d, bk):
    h = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    x = dev(bk, h)
    for axis in (None, 0, -1, (0, 2), (2, 0), (-3, -2, -1), [1, 2]):
        for keep in (False, True):
            np.testing.assert_array_equal(host(d.sum(x, axis=axis, keepdims=keep)),
                                          np.sum(h, axis=tuple(axis) if isinstance(axis, list) else axis,
                                                 keepdims=keep))


def test_bad_axes_raise_the_originals_errors(d, bk):
    x = dev(bk, np.ones((2, 3)))
    for name in ("sum", "max", "mean", "var", "any", "nansum", "nanmax"):
        with pytest.raises((ValueError, IndexError)):
            getattr(d, name)(x, axis=2)
        with pytest.raises(ValueError):
            getattr(d, name)(x, axis=(0, 0))
    with pytest.raises((ValueError, IndexError)):
        d.argmax(x, axis=-3)
    with pytest.raises((ValueError, IndexError)):
        d.cumsum(x, axis=5)
    with pytest.raises(TypeError):
        d.sum(x, axis=1.5)


def test_empty_reductions(d, bk):
    e = dev(bk, np.zeros((0, 3), dtype=np.float32))
    assert float(d.sum(e)) == 0.0 and float(d.prod(e)) == 1.0
    np.testing.assert_array_equal(host(d.sum(e, axis=0)), np.zeros(3))
    assert bool(d.all(e)) and not bool(d.any(e))
    for name in ("max", "min", "argmax", "nanmax"):
        with pytest.raises(ValueError):
            getattr(d, name)(e)
    np.testing.assert_array_equal(host(d.max(e, axis=1)), np.zeros(0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert math.isnan(float(d.mean(e)))
        assert np.isnan(host(d.var(e, axis=0))).all()


# --------------------------------------------------------------------------- scans


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
def test_scans(d, bk, name):
    @st.composite
    def case(draw):
        dt = np.dtype(draw(st.sampled_from(DTYPES)))
        shp = draw(shapes(min_dims=0, max_dims=3, max_side=40, max_size=64 if name == "cumprod" else 1200))
        el = {"min_value": -3.0, "max_value": 3.0} if dt.kind == "f" else None
        x = draw(views(dt, shp, elements=el))
        ax = draw(st.none() | st.integers(-len(shp), len(shp) - 1)) if shp else None
        return x, ax

    @FAST
    @given(case())
    def run(c):
        h, axis = c
        x = dev(bk, h)
        r = getattr(d, name)(x, axis=axis)
        want = getattr(np, name)(h, axis=axis)
        assert r.dtype == want.dtype and r.shape == want.shape
        if h.dtype.kind == "f":
            ref = getattr(np, name)(h.astype(np.float64), axis=axis)
            np.testing.assert_allclose(host(r), ref, rtol=1e-4 if h.dtype == np.float32 else 1e-12,
                                       atol=1e-3 if name == "cumsum" else 1e-6)
        else:
            np.testing.assert_array_equal(host(r), want)

    run()


def test_scan_dtype_rules_and_inplace(d, bk):
    assert d.cumsum(dev(bk, np.arange(5, dtype=np.uint8))).dtype == np.uint64
    assert d.cumsum(dev(bk, np.arange(5, dtype=np.int32))).dtype == np.int64
    assert d.cumprod(dev(bk, np.ones(5, dtype=bool))).dtype == np.int64
    h = np.arange(12, dtype=np.float64).reshape(3, 4)
    x = dev(bk, h.copy())
    assert d.cumsum(x, axis=1, out=x) is x                       # in place
    np.testing.assert_array_equal(host(x), np.cumsum(h, axis=1))
    x = dev(bk, np.arange(10.0))
    d.cumsum(x[:-1], out=x[1:])                                  # overlapping views
    np.testing.assert_array_equal(host(x), np.concatenate([[0.0], np.cumsum(np.arange(9.0))]))
    s = dev(bk, np.array(5.0))
    np.testing.assert_array_equal(host(d.cumsum(s)), [5.0])      # 0-d, axis None


# --------------------------------------------------------------------------- products


PRODUCT_DTYPES = ["int32", "int64", "float32", "float64", "bool", "uint8"]


def _vals(rng, shape, dt):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        return rng.integers(0, 5, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def _check_product(got, want, dt):
    assert got.dtype == np.asarray(want).dtype, (got.dtype, np.asarray(want).dtype)
    assert got.shape == np.shape(want)
    if np.dtype(dt).kind == "f":
        np.testing.assert_allclose(host(got), want, rtol=1e-4, atol=1e-4)
    else:
        np.testing.assert_array_equal(host(got), want)


@pytest.mark.parametrize("dt", PRODUCT_DTYPES)
@pytest.mark.parametrize("shapes_", [((7, 33), (33,)), ((33,), (33, 5)), ((2, 3, 31), (31,)),
                                     ((32,), (2, 32, 3)), ((1,), (1,)), ((33,), (33,)),
                                     ((0, 4), (4,)), ((3, 0), (0,))])
def test_dot_matmul_inner(d, bk, dt, shapes_):
    rng = np.random.default_rng(0)
    sa, sb = shapes_
    a, b = _vals(rng, sa, dt), _vals(rng, sb, dt)
    x, y = dev(bk, a), dev(bk, b)
    k = kcount(d, "dot")
    _check_product(d.dot(x, y), np.dot(a, b), dt)
    assert kcount(d, "dot") == k + 1
    _check_product(d.matmul(x, y), np.matmul(a, b), dt)
    if sa[-1] == sb[-1]:
        _check_product(d.inner(x, y), np.inner(a, b), dt)
    if a.size == b.size:
        _check_product(d.vdot(x, y), np.vdot(a, b), dt)


def test_matrix_times_one_column(d, bk):
    """(..., n, p) @ (p, 1), as dask.array's matmul of a vector calls it: our matrix-vector
    kernel, the launch replayed on later operands of the same layouts, values each time."""
    rng = np.random.default_rng(3)
    for _ in range(3):
        a, b = rng.standard_normal((37, 20)), rng.standard_normal((20, 1))
        x, y = dev(bk, a), dev(bk, b)
        k = kcount(d, "matmul")
        _check_product(d.matmul(x, y), a @ b, "f8")
        assert kcount(d, "matmul") == k + 1
        _check_product(d.dot(x, y), a @ b, "f8")
    a, b = rng.standard_normal((2, 5, 20)), rng.standard_normal((20, 1))
    for _ in range(2):
        _check_product(d.matmul(dev(bk, a), dev(bk, b)), a @ b, "f8")
    out = bk.empty((37, 1))
    a, b = rng.standard_normal((37, 20)), rng.standard_normal((20, 1))
    assert d.matmul(dev(bk, a), dev(bk, b), out=out) is out
    np.testing.assert_allclose(host(out), a @ b, rtol=1e-12)


def test_products_on_views(d, bk):
    rng = np.random.default_rng(1)
    A = rng.standard_normal((40, 34))
    v = rng.standard_normal(100)
    for Av, xv in [(A[::2, 1:], v[1:34]), (A.T, v[::-2][:40]), (A[:, ::-1][5:, :33], v[3:36])]:
        _check_product(d.matmul(dev(bk, Av)[...], dev(bk, xv)), Av @ xv, "f8")
    x = dev(bk, A)
    _check_product(d.dot(x.T, dev(bk, v[:40])), A.T @ v[:40], "f8")
    _check_product(d.dot(dev(bk, v[:40]), x), v[:40] @ A, "f8")


def test_product_fallbacks(d, bk):
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    f = fcount(d, "matmul")
    _check_product(d.matmul(dev(bk, A), dev(bk, B)), A @ B, "f8")          # GEMM: cuBLAS
    assert fcount(d, "matmul") == f + 1
    _check_product(d.dot(dev(bk, A), dev(bk, np.ones(5, np.float32))), A @ np.ones(5, np.float32), "f8")
    _check_product(d.dot(dev(bk, A), dev(bk, np.float64(2.0)) if bk is np else bk.asarray(2.0)), A * 2, "f8")
    with pytest.raises(ValueError):
        d.dot(dev(bk, A), dev(bk, np.ones(4)))
    with pytest.raises(ValueError):
        d.matmul(dev(bk, A), dev(bk, np.ones(4)))
    c = (rng.standard_normal(4) + 1j * rng.standard_normal(4)).astype(np.complex128)
    np.testing.assert_allclose(host(d.vdot(dev(bk, c), dev(bk, c))), np.vdot(c, c))


# --------------------------------------------------------------------------- fallbacks


def test_fallbacks_are_silent_and_correct(d, bk):
    h16 = np.arange(10, dtype=np.float16)
    before = fcount(d, "sum")
    r = d.sum(dev(bk, h16))
    assert r.dtype == np.float16 and float(r) == 45.0 and fcount(d, "sum") == before + 1
    c = dev(bk, np.array([1 + 2j, 3 - 1j, 3 + 0j]))
    assert complex(d.max(c)) == np.max(np.array([1 + 2j, 3 - 1j, 3 + 0j]))
    assert int(d.argmax(c)) == np.argmax(host(c)) == 2              # lexicographic order
    assert complex(d.sum(c)) == 7 + 1j                           # complex sums on our kernels
    np.testing.assert_allclose(host(d.var(c)), np.var(host(c)))
    np.testing.assert_array_equal(host(d.cumsum(dev(bk, h16))), np.cumsum(h16))


def test_non_arrays_go_to_the_original():
    # NumPy's functions take lists and scalars; CuPy's raise their own errors
    d = DropIn(np)
    assert d.sum([1, 2, 3]) == 6
    assert d.max((4, 9)) == 9


# --------------------------------------------------------------------------- patching


class _Sub(np.ndarray):
    """A Python subclass of numpy.ndarray: its methods can be replaced, as cupy.ndarray's
    (a Python subclass of the Cython _ndarray_base since CuPy 13)."""


def _fake_module():
    m = types.ModuleType("fake_cupy")
    for name in FUNCTIONS:
        setattr(m, name, getattr(np, name))
    m.ndarray = _Sub
    m.exp = np.exp
    return m


def test_patch_functions_and_methods_then_unpatch():
    fake = _fake_module()
    originals = {n: getattr(fake, n) for n in FUNCTIONS}
    d = DropIn(np, method_fallbacks={n: getattr(np.ndarray, n) for n in METHODS})
    rep = d.patch(fake)
    assert sorted(rep["functions"]) == sorted(FUNCTIONS) and not rep["failed"]
    assert sorted(rep["methods"]) == sorted(METHODS)
    assert d.is_patched(fake)
    for n in FUNCTIONS:
        assert getattr(fake, n) is d.functions[n]
    assert fake.exp is np.exp                                   # untouched
    x = np.arange(12.0).reshape(3, 4).view(_Sub)
    path = "kernel" if kernels_available(x) else "fallback"     # NumPy arrays on a GPU: fallback
    r = x.sum(axis=0)
    assert d.counts[path].get("ndarray.sum") == 1
    np.testing.assert_array_equal(np.asarray(r), [12.0, 15.0, 18.0, 21.0])
    assert int(x.argmax(axis=None)) == 11 and d.counts[path]["ndarray.argmax"] == 1
    np.testing.assert_array_equal(np.asarray(x.cumsum(axis=1))[:, -1], [6.0, 22.0, 38.0])
    assert float(x.dot(np.ones(4)).sum()) == 66.0
    # a patched method's fallback is the unpatched method (no recursion through np.sum)
    h = x.astype(np.float16)
    before = d.counts["fallback"].get("ndarray.sum", 0)
    assert float(h.sum()) == 66.0 and d.counts["fallback"]["ndarray.sum"] == before + 1
    assert float(fake.sum(x)) == 66.0
    # idempotent; unpatch restores exactly
    d.patch(fake)
    d.unpatch(fake)
    assert not d.is_patched(fake)
    for n in FUNCTIONS:
        assert getattr(fake, n) is originals[n], n
    for n in METHODS:
        assert n not in _Sub.__dict__, n
        assert getattr(_Sub, n) is getattr(np.ndarray, n)
    d.unpatch(fake)                                               # no-op


def test_patch_reports_immutable_types():
    fake = types.ModuleType("fake2")
    fake.sum = np.sum
    fake.ndarray = np.ndarray                                     # a C type: cannot change
    d = DropIn(np)
    rep = d.patch(fake)
    assert rep["functions"] == ["sum"] and rep["methods"] == []
    assert set(rep["failed"]) == set(METHODS)
    assert np.ndarray.sum is d.method_fallbacks["sum"].__wrapped__
    d.unpatch(fake)
    assert fake.sum is np.sum


def test_method_signatures_follow_cupy():
    fake = _fake_module()
    d = DropIn(np)
    d.patch(fake)
    try:
        x = np.arange(6.0).reshape(2, 3).view(_Sub)
        # cupy.ndarray.argmax(axis, out, dtype, keepdims): positional order differs from the function
        out = np.empty(2, dtype=np.int64)
        assert x.argmax(1, out) is out and out.tolist() == [2, 2]
        assert np.asarray(x.var(0, None, None, 1)).tolist() == [4.5, 4.5, 4.5]       # ddof=1
        assert np.asarray(x.prod(1, None, None, None)).tolist() == [0.0, 60.0]        # keepdims=None
        assert x.max(0, None, True).shape == (1, 3)
    finally:
        d.unpatch(fake)


def test_fallback_never_recurses_through_a_patched_module():
    # the function fallbacks are captured before patching
    fake = _fake_module()
    d = DropIn(fake)
    d.patch(fake)
    try:
        r = fake.sum(np.arange(4, dtype=np.float16))                 # falls back
        assert float(r) == 6.0
    finally:
        d.unpatch(fake)


# --------------------------------------------------------------------------- forge_array.cupy


def _cupy_importable():
    try:
        import cupy  # noqa: F401

        return True
    except Exception:
        return False


@pytest.mark.skipif(_cupy_importable(), reason="CuPy is installed")
def test_import_without_cupy_is_a_clear_error():
    import sys

    sys.modules.pop("forge_array.cupy", None)
    with pytest.raises(ImportError, match="needs CuPy"):
        importlib.import_module("forge_array.cupy")


@pytest.mark.skipif(not _cupy_importable(), reason="needs CuPy")
def test_real_module_on_gpu(sim):
    if sim:
        pytest.skip("needs a GPU")
    import cupy

    fcp = importlib.import_module("forge_array.cupy")
    assert fcp.ndarray is cupy.ndarray and fcp.exp is cupy.exp and fcp.random is cupy.random
    x = cupy.arange(10, dtype=cupy.int32)
    fcp.reset_stats()
    r = fcp.sum(x)
    assert isinstance(r, cupy.ndarray) and r.dtype == cupy.int64 and int(r) == 45
    assert fcp.stats()["kernel"] == {"sum": 1}
    orig_sum, orig_method = cupy.sum, cupy.ndarray.sum
    with fcp.patched() as rep:
        assert cupy.sum is fcp.sum
        assert not rep["failed"], rep["failed"]
        assert int(x.sum()) == 45 and int(cupy.cumsum(x)[-1]) == 45
        assert fcp.stats()["kernel"].get("ndarray.sum") == 1
        assert float(x.astype(cupy.float16).sum()) == 45.0            # falls back, no recursion
        assert float(cupy.mean(x.astype(cupy.float16))) == 4.5
    assert cupy.sum is orig_sum and cupy.ndarray.sum is orig_method and "sum" not in cupy.ndarray.__dict__


# --------------------------------------------------------------------------- GPU code path


def test_device_functions_compile_to_ptx(offline_ptx):
    """The map functions and operators the drop-in adds (nan_to_zero, fmax/fmin with a NaN
    identity, the dot-product map, the Welford map along axes) compile on the GPU path."""
    out = offline_ptx("""
        import numpy as np
        from forge_array import ops
        from forge_array._dropin import rules as D
        from forge_array.kernels import reduce as K
        from forge_array.kernels import rowcol as k
        from forge_array.dispatch.axis_reduce.plan import _buf_t
        from forge_array.runtime import compile_ptx_offline
        from forge_array.runtime.param_types import I64, ptr, to_numba, tuple_of, unituple
        S = K.ReduceSpec
        f4, f8 = np.dtype("f4"), np.dtype("f8")
        cases = [
            (S(op=D.fmax.fn, acc_dtypes=("<f4",), identity=(float("nan"),)), ("<f4",), "vec", 1, 4, 4),
            (S(op=D.fmin.fn, acc_dtypes=("<f8",), identity=(float("nan"),)), ("<f8",), "strided", 2, 4, 1),
            (S(op=ops.add.fn, acc_dtypes=("<f4",), identity=(0.0,), f=D._nan_to_zero(f4)),
             ("<f4",), "vec", 1, 4, 4),
            (S(op=ops.add.fn, acc_dtypes=("<i4",), identity=(0,), f=D._mul_as(np.dtype("i4")),
               struct=(0, 0)), ("<i4", "<i4"), "strided", 1, 4, 1),
        ]
        for spec, ind, mode, nd, items, vec in cases:
            ptx = compile_ptx_offline(K.make_reduce_kernel, (spec, ind, mode, nd, items, vec, 512),
                                      to_numba(K.kernel_argtypes(spec, ind, mode, nd)))
            assert ".entry" in ptx
            print("ok", K.spec_name(spec), mode)

        def argt(ins, acc, n):
            return to_numba((tuple_of(tuple(_buf_t(d) for d in ins)), _buf_t(acc), _buf_t(acc),
                             ptr(np.uint32)) + (I64,) * 4 + (unituple(I64, n),) * 4 + (I64,) * 7)

        ptx = compile_ptx_offline(k.make_col_kernel, (D._welford_map(f4), ops.welford.fn, 1, (f4,) * 3,
                                  (np.float32(0),) * 3, False, None, 256, 2, True, False, 4),
                                  argt((f4,), (f4,) * 3, 1))
        assert ".entry" in ptx
        print("ok welford col")
    """)
    assert out.count("ok") == 5, out
