"""Boolean masks through our scan (:mod:`forge_array.primitives.compaction`): ``nonzero`` of
backend arrays against NumPy's (exact), and on a GPU ``x[mask]`` / ``xp.nonzero`` of
forge_array arrays against NumPy's; the mask's shape checked as NumPy checks it."""

from __future__ import annotations

import numpy as np
import pytest

import forge_array as xp
from forge_array import _sets
from forge_array._array import mask_indices
from forge_array.primitives import compaction
from forge_array.runtime import config

_RNG = np.random.default_rng(7)


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = np.asarray(g.get() if hasattr(g, "get") else g)
        assert g.dtype == np.int64 and np.array_equal(g, w)


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 255, 256, 257, 1025])
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_nonzero_of_1d_masks(bk, n, density):
    m = _RNG.random(n) < density
    _same(compaction.nonzero(bk.asarray(m)), np.nonzero(m))


@pytest.mark.parametrize("shape", [(5, 7), (3, 1, 4), (1, 33)])
def test_nonzero_of_nd_masks_views_and_numbers(bk, shape):
    m = _RNG.random(shape) < 0.4
    _same(compaction.nonzero(bk.asarray(m)), np.nonzero(m))
    t = m.swapaxes(0, -1)                                # a transposed (strided) mask
    _same(compaction.nonzero(bk.asarray(m).swapaxes(0, -1)), np.nonzero(t))
    v = (_RNG.integers(-2, 3, size=(2 * shape[0],) + shape[1:]))[::2]   # numbers: non-zero
    _same(compaction.nonzero(bk.asarray(v)), np.nonzero(v))


def test_nonzero_of_a_0d_array_is_refused(bk):
    with pytest.raises(ValueError, match="0-d"):
        compaction.nonzero(bk.asarray(True))


def test_a_mask_of_another_shape_is_an_index_error():
    with pytest.raises(IndexError, match="did not match indexed array along axis 1; size of axis is 3"):
        mask_indices(np.ones(4, dtype=bool), (3,), 1)
    with pytest.raises(IndexError, match="too many indices"):
        mask_indices(np.ones((2, 2), dtype=bool), (2,), 0)


@pytest.mark.parametrize("x_shape, mask_shape", [((3, 2), (0, 2)), ((3, 2), (3, 0)), ((3, 2), (0, 0)),
                                                  ((0, 1), (0, 0)), ((3, 2, 4), (3, 0)), ((3, 2), (0,))])
def test_a_mask_dimension_of_zero_matches_any_size(x_shape, mask_shape):
    """NumPy's rule: a mask dimension of 0 selects nothing whatever the array's size there."""
    assert [a.size for a in mask_indices(np.ones(mask_shape, dtype=bool), x_shape[:len(mask_shape)], 0)] \
        == [0] * len(mask_shape)
    dev = "cpu" if config.SIMULATE else "cuda:0"
    x = xp.ones(x_shape, device=dev)
    want = np.ones(x_shape)[np.ones(mask_shape, dtype=bool)].shape
    assert x[xp.ones(mask_shape, dtype=xp.bool, device=dev)].shape == want
    with pytest.raises(IndexError, match="did not match"):   # 1 is no wildcard
        mask_indices(np.ones((1,) + mask_shape[1:], dtype=bool), (3,) + x_shape[1:len(mask_shape)], 0)


@pytest.mark.skipif(config.SIMULATE, reason="GPU arrays: the GPU run")
@pytest.mark.parametrize("shape, axis", [((1000, 6), 0), ((8, 9, 10), 1), ((300,), 0)])
def test_mask_indexing_of_gpu_arrays(shape, axis):
    a = _RNG.standard_normal(shape).astype(np.float32)
    x = xp.asarray(a, device="cuda:0")
    m = _RNG.random(shape[axis]) < 0.5
    key = (slice(None),) * axis + (xp.asarray(m, device="cuda:0"),)
    np.testing.assert_array_equal(np.asarray(xp.asarray(x[key], device="cpu")), a[(slice(None),) * axis + (m,)])
    full = a > 0
    np.testing.assert_array_equal(np.asarray(xp.asarray(x[x > 0], device="cpu")), a[full])
    got = xp.nonzero(x > 0)
    for g, w in zip(got, np.nonzero(full)):
        np.testing.assert_array_equal(np.asarray(xp.asarray(g, device="cpu")), w)
    with pytest.raises(IndexError, match="did not match"):
        x[xp.asarray(np.ones(shape[0] + 1, dtype=bool), device="cuda:0")]


@pytest.mark.parametrize("rows", [0, 1, 31, 32, 33, 257])
@pytest.mark.parametrize("row_shape", [(1,), (2,), (33,), (4, 9)])
@pytest.mark.parametrize("density", [0.0, 0.4, 1.0])
def test_compress_rows_against_numpy(bk, rows, row_shape, density):
    """``x[mask]`` of a row mask through the scan and the row gather: NumPy's rows, in order."""
    a = _RNG.standard_normal((rows,) + row_shape).astype(np.float32)
    m = _RNG.random(rows) < density
    got = compaction.compress_rows(bk.asarray(a), bk.asarray(m))
    got = np.asarray(got.get() if hasattr(got, "get") else got)
    assert got.shape == a[m].shape and got.dtype == a.dtype
    np.testing.assert_array_equal(got, a[m])


@pytest.mark.parametrize("dtype", ["bool", "int8", "int64", "float64", "complex64"])
def test_compress_rows_of_dtypes_and_views(bk, dtype):
    a = (_RNG.standard_normal((40, 35)) * 10).astype(dtype)
    m = _RNG.random(40) < 0.5
    for view in (a, a[::-1], a[:, ::2]):   # the primitive gathers from a contiguous copy of a view
        got = compaction.compress_rows(bk.asarray(view), bk.asarray(m))
        got = np.asarray(got.get() if hasattr(got, "get") else got)
        np.testing.assert_array_equal(got, view[m])
    with pytest.raises(ValueError, match="bool mask"):
        compaction.compress_rows(bk.asarray(a), bk.asarray(m[:-1]))


@pytest.mark.skipif(config.SIMULATE, reason="GPU arrays: the GPU run")
@pytest.mark.parametrize("shape", [(1000, 64), (257, 4, 9), (100, 8)])
def test_row_masks_of_gpu_arrays(shape):
    """``x[mask]`` of a 1-D mask over a GPU array's rows (our row gather from rows of 32
    elements, the backend's indexing below): NumPy's result."""
    a = _RNG.standard_normal(shape).astype(np.float32)
    m = _RNG.random(shape[0]) < 0.5
    x = xp.asarray(a, device="cuda:0")
    got = x[xp.asarray(m, device="cuda:0")]
    assert got.device == x.device
    np.testing.assert_array_equal(np.asarray(got.to_device("cpu")), a[m])
    np.testing.assert_array_equal(np.asarray(x[::2][xp.asarray(m[::2], device="cuda:0")].to_device("cpu")),
                                  a[::2][m[::2]])


def _np_unique(a):
    """NumPy's unique with every NaN a value of its own (the standard's rule)."""
    v, i, inv, c = np.unique(a.reshape(-1), return_index=True, return_inverse=True, return_counts=True,
                             equal_nan=False)
    return v, i, inv.reshape(-1), c


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 257])
@pytest.mark.parametrize("dtype", ["int64", "int8", "uint16", "float32", "float64", "bool"])
def test_unique_against_numpy(bk, n, dtype):
    if dtype == "bool":
        a = _RNG.random(n) < 0.5
    elif dtype.startswith("float"):
        a = _RNG.integers(-4, 5, size=n).astype(dtype)
        a[_RNG.random(n) < 0.2] = np.nan                 # NaNs: each one a value of its own
        a[_RNG.random(n) < 0.1] = -0.0
    else:
        a = _RNG.integers(0, 9, size=n).astype(dtype)
    want = _np_unique(a)
    got = compaction.unique(bk.asarray(a), index=True, inverse=True, counts=True)
    for g, w, what in zip(got, want, ("values", "index", "inverse", "counts")):
        g = np.asarray(g.get() if hasattr(g, "get") else g)
        assert g.dtype == (a.dtype if what == "values" else np.int64), what
        np.testing.assert_array_equal(g, w, err_msg=what)
    values_only = compaction.unique(bk.asarray(a))
    np.testing.assert_array_equal(np.asarray(values_only[0].get() if hasattr(values_only[0], "get")
                                             else values_only[0]), want[0])
    assert values_only[1:] == (None, None, None)


def _host(g):
    return np.asarray(g.get() if hasattr(g, "get") else g)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 257, 1025])
@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8", "uint64", "bool"])
@pytest.mark.parametrize("path", ["span", "sort"])
def test_unique_values_and_inverse_of_integers_by_span_and_by_sort(bk, monkeypatch, n, dtype, path):
    # integers spanning few values are marked, not sorted; a span wider than the limit sorts
    if path == "sort":
        monkeypatch.setattr(compaction, "span_limit", lambda n: 0)
    else:
        monkeypatch.setattr(bk, "sort", _no_sort, raising=False)
        monkeypatch.setattr(bk, "argsort", _no_sort, raising=False)
    if dtype == "bool":
        a = _RNG.random(n) < 0.5
    elif dtype.startswith("u"):
        a = _RNG.integers(0, 60, size=n).astype(dtype) + np.array(200 if dtype == "uint8" else 7, dtype)
    else:
        a = _RNG.integers(-40, 20, size=n).astype(dtype)
    ev, einv = np.unique(a, return_inverse=True)
    v, i, inv, c = compaction.unique(bk.asarray(a), inverse=True)
    assert i is None and c is None
    assert _host(v).dtype == a.dtype and np.array_equal(_host(v), ev)
    assert _host(inv).dtype == np.int64 and np.array_equal(_host(inv), einv.reshape(-1))
    np.testing.assert_array_equal(_host(compaction.unique(bk.asarray(a))[0]), ev)


def _no_sort(*args, **kwargs):
    raise AssertionError("integers of a narrow span were sorted")


@pytest.mark.parametrize("values", [[0, 2**40, 5], [-(2**62), 3, 2**62], [2**63 + 5, 1, 2**63]])
def test_unique_of_integers_of_a_wide_span_sorts(bk, values):
    a = np.array(values * 3, dtype=np.uint64 if max(values) >= 2**63 else np.int64)
    v, _, inv, _ = compaction.unique(bk.asarray(a), inverse=True)
    ev, einv = np.unique(a, return_inverse=True)
    np.testing.assert_array_equal(_host(v), ev)
    np.testing.assert_array_equal(_host(inv), einv.reshape(-1))
    assert compaction.span_limit(len(a)) == compaction.SPAN_MIN


@pytest.mark.parametrize("view", ["2-D", "reversed", "strided", "transposed"])
def test_unique_of_views(bk, view):
    a = _RNG.integers(0, 6, size=(6, 10))
    b = bk.asarray(a)
    src, ref = {"2-D": (b, a), "reversed": (b[::-1, ::-1], a[::-1, ::-1]),
                "strided": (b[:, ::3], a[:, ::3]), "transposed": (b.T, a.T)}[view]
    got = compaction.unique(src, index=True, inverse=True, counts=True)
    for g, w in zip(got, _np_unique(np.ascontiguousarray(ref))):
        np.testing.assert_array_equal(np.asarray(g.get() if hasattr(g, "get") else g), w)


def test_unique_functions_of_the_namespace(bk):
    """The namespace's ``unique_*`` take the compaction where our kernels run (the simulator,
    a GPU) and the backend's functions elsewhere: the same results."""
    a = np.array([[3.0, np.nan, 1.0], [3.0, 2.0, np.nan]])
    dev = "cpu" if config.SIMULATE else "cuda:0"
    x = xp.asarray(a, device=dev)
    host = lambda r: np.asarray(xp.asarray(r, device="cpu"))  # noqa: E731
    r = xp.unique_all(x)
    v, i, inv, c = _np_unique(a)
    np.testing.assert_array_equal(host(r.values), v)
    np.testing.assert_array_equal(host(r.indices), i)
    np.testing.assert_array_equal(host(r.inverse_indices), inv.reshape(a.shape))
    np.testing.assert_array_equal(host(r.counts), c)
    np.testing.assert_array_equal(host(xp.unique_counts(x).counts), c)
    np.testing.assert_array_equal(host(xp.unique_inverse(x).inverse_indices), inv.reshape(a.shape))
    np.testing.assert_array_equal(host(xp.unique_values(x)), v)


@pytest.mark.parametrize("shape", [(), (0,), (1,), (2, 3), (33,)])
@pytest.mark.parametrize("dtype", ["int64", "float64", "bool", "complex64"])
def test_unique_functions_of_cpu_arrays_without_our_kernels(numpy_routes, shape, dtype):
    """CPU arrays where our kernels do not run take NumPy's ``unique`` itself: NumPy's
    results (NaNs distinct), indices in the default index dtype, inverse of ``x``'s shape."""
    a = _RNG.integers(0, 3, shape).astype(dtype)
    if dtype == "float64" and a.size > 2:
        a.reshape(-1)[::2] = np.nan
    x = xp.asarray(a, device="cpu")
    v, i, inv, c = _np_unique(a)
    r = xp.unique_all(x)
    for got, want in zip(r, (v, i, inv.reshape(a.shape), c)):
        assert got.device == x.device
        np.testing.assert_array_equal(np.asarray(got), want)
    assert r.indices.dtype == r.counts.dtype == r.inverse_indices.dtype == xp.int64
    np.testing.assert_array_equal(np.asarray(xp.unique_values(x)), v)
    np.testing.assert_array_equal(np.asarray(xp.unique_counts(x).counts), c)
    np.testing.assert_array_equal(np.asarray(xp.unique_inverse(x).inverse_indices), inv.reshape(a.shape))


@pytest.mark.skipif(config.SIMULATE, reason="CuPy arrays: the GPU run")
@pytest.mark.parametrize("n", [0, 4, _sets.HOST_MAX, _sets.HOST_MAX + 1])
@pytest.mark.parametrize("dtype", ["int64", "float32", "bool"])
def test_unique_functions_of_small_and_larger_gpu_arrays(n, dtype):
    """Up to ``HOST_MAX`` elements a GPU array is made unique from a host copy, above it by
    our compaction: the same results (NaNs distinct and last), as GPU arrays."""
    a = _RNG.integers(0, 40, (n,)).astype(dtype)
    if dtype == "float32" and n:
        a[::5] = np.nan
    x = xp.asarray(a, device="cuda:0")
    v, i, inv, c = _np_unique(a)
    r = xp.unique_all(x)
    for got, want in zip(r, (v, i, inv, c)):
        assert got.device == x.device
        np.testing.assert_array_equal(np.asarray(got.to_device("cpu")), want)
    np.testing.assert_array_equal(np.asarray(xp.unique_values(x).to_device("cpu")), v)
    np.testing.assert_array_equal(np.asarray(xp.unique_counts(x).counts.to_device("cpu")), c)
    np.testing.assert_array_equal(np.asarray(xp.unique_inverse(x).inverse_indices.to_device("cpu")), inv)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 257])
def test_select_gathers_positions_and_picked_elements(bk, n):
    """The selection pass of the compaction kernels: the true elements' positions then the
    length, and two arrays' elements at those positions, against NumPy."""
    from forge_array.dispatch import compaction as dc

    m = _RNG.random(n) < 0.4
    src = _RNG.standard_normal(n)
    perm = _RNG.permutation(n).astype(np.int64)
    count = np.cumsum(m, dtype=np.int64)
    got = dc.select(bk.asarray(m), bk.asarray(count), int(count[-1]), (bk.asarray(src), bk.asarray(perm)))
    want = (np.append(np.flatnonzero(m), n), src[m], perm[m])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g.get() if hasattr(g, "get") else g), w)


def test_compaction_kernels_take_contiguous_1d_arrays(bk):
    from forge_array.dispatch import compaction as dc
    from forge_array.kernels import compaction as kc

    with pytest.raises(ValueError, match="contiguous 1-D"):
        dc.run_starts(bk.asarray(np.arange(8))[::2])
    with pytest.raises(ValueError, match="picks must be"):
        kc.make_select(kc.PICKS + 1)


def test_nonzero_of_a_strided_1d_mask(bk):
    m = _RNG.random(40) < 0.5
    _same(compaction.nonzero(bk.asarray(m)[::3]), np.nonzero(m[::3]))
    _same(compaction.nonzero(bk.asarray(m)[::-1]), np.nonzero(m[::-1]))


def test_unique_of_complex_values(bk):
    a = np.array([1 + 2j, 1 + 2j, 0j, np.nan + 0j, 3 - 1j, 0j], dtype=np.complex128)
    v, i, inv, c = compaction.unique(bk.asarray(a), index=True, inverse=True, counts=True)
    host = lambda r: np.asarray(r.get() if hasattr(r, "get") else r)  # noqa: E731
    wv, wi, winv, wc = _np_unique(a)
    np.testing.assert_array_equal(host(v), wv)
    np.testing.assert_array_equal(host(i), wi)
    np.testing.assert_array_equal(host(inv), winv)
    np.testing.assert_array_equal(host(c), wc)
