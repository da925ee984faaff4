"""Axis reductions on the row / column kernels (primitives.axis_reduce), differential
against NumPy: every axis combination of 3-d views, strided / negative / transposed views,
dtypes, tuple accumulators (argmax, Welford), operators without identity, errors, and the
GPU code path compiled to PTX offline."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_array import ops
from forge_array.dispatch import axis_reduce as dispatch_axis
from forge_array.primitives import axis_reduce as ar
from forge_array.testing import axes as st_axes
from forge_array.testing import shapes, views

F64 = np.dtype("float64")


def _dev(bk, a):
    return bk.asarray(a)


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _sum(bk, x, axis, keepdims=False, dtype=F64):
    return _host(ar.axis_mapreduce(None, ops.add, (x,), axis, None, keepdims, np.dtype(dtype)))


# sizes around the simulator's block (64) and warp (32) edges
SHAPES_2D = [(1, 1), (1, 33), (33, 1), (5, 31), (5, 32), (5, 33), (3, 130), (130, 3), (2, 300),
             (300, 2), (40, 65), (9, 10)]


@pytest.mark.parametrize("shape", SHAPES_2D)
@pytest.mark.parametrize("axis", [0, 1])
def test_sum_2d(bk, shape, axis):
    x = np.random.default_rng(1).standard_normal(shape)
    np.testing.assert_allclose(_sum(bk, _dev(bk, x), axis), x.sum(axis=axis), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("axes", [a for r in range(0, 4) for a in itertools.combinations(range(3), r)])
@pytest.mark.parametrize("view", ["c", "t", "neg", "slice"])
def test_every_axis_combination_3d(bk, axes, view):
    base = np.random.default_rng(2).integers(-50, 50, size=(4, 6, 10)).astype(np.int32)
    x = {"c": base, "t": base.transpose(2, 0, 1), "neg": base[::-1, :, ::-2],
         "slice": base[1:, ::2, 3:]}[view]
    r = ar.axis_mapreduce(None, ops.add, (_dev(bk, x),), axes, None, False, np.dtype("int64"))
    np.testing.assert_array_equal(_host(r), x.sum(axis=axes, dtype=np.int64))


@pytest.mark.parametrize("keepdims", [False, True])
def test_keepdims_and_negative_axis(bk, keepdims):
    x = np.arange(24.0).reshape(2, 3, 4)
    r = _sum(bk, _dev(bk, x), (-1, 0), keepdims)
    np.testing.assert_allclose(r, x.sum(axis=(0, 2), keepdims=keepdims))


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                                   "int64", "uint64", "float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("axis", [0, 1])
def test_dtypes(bk, dtype, axis):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((7, 45)) * 20).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * x[::-1]
    acc = {"b": np.int64, "i": np.int64, "u": np.uint64}.get(np.dtype(dtype).kind, dtype)
    r = ar.axis_mapreduce(None, ops.add, (_dev(bk, x),), axis, None, False, np.dtype(acc))
    ref = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64).sum(axis=axis)
    if np.dtype(acc).kind in "iu":
        np.testing.assert_array_equal(_host(r), x.sum(axis=axis, dtype=acc))
    else:
        np.testing.assert_allclose(_host(r), ref, rtol=2e-5 if np.dtype(dtype).itemsize <= 8 else 1e-12,
                                   atol=1e-3)


@pytest.mark.parametrize("op,ref", [(ops.maximum, np.max), (ops.minimum, np.min)])
@pytest.mark.parametrize("axis", [0, 1])
def test_max_min_nan(bk, op, ref, axis):
    x = np.random.default_rng(4).standard_normal((9, 37)).astype(np.float32)
    x[2, 5] = np.nan
    r = ar.axis_mapreduce(None, op, (_dev(bk, x),), axis, None, False, np.dtype("float32"))
    np.testing.assert_array_equal(_host(r), ref(x, axis=axis))


@pytest.mark.parametrize("shape,axis", [((6, 50), 1), ((50, 6), 0), ((3, 5, 7), 1), ((200, 3), 0),
                                        ((3, 200), 1)])
def test_argmax_argmin(bk, shape, axis):
    x = np.random.default_rng(5).integers(0, 7, size=shape).astype(np.float32)  # many ties
    np.testing.assert_array_equal(_host(ar.argmax(_dev(bk, x), axis)), np.argmax(x, axis=axis))
    np.testing.assert_array_equal(_host(ar.argmin(_dev(bk, x), axis)), np.argmin(x, axis=axis))
    xt = x.swapaxes(0, -1)[::-1]
    np.testing.assert_array_equal(_host(ar.argmax(_dev(bk, xt), 0)), np.argmax(xt, axis=0))


def test_argmax_keepdims_and_empty(bk):
    x = np.array([[1.0, 3.0], [4.0, 2.0]])
    np.testing.assert_array_equal(_host(ar.argmax(_dev(bk, x), 1, True)), [[1], [0]])
    with pytest.raises(ValueError):
        ar.argmax(_dev(bk, np.zeros((3, 0))), 1)


def _welford_f(v):
    return (1.0, v, 0.0)


@pytest.mark.parametrize("axis", [0, 1, (0, 1)])
def test_welford_tuple_accumulator(bk, axis):
    x = np.random.default_rng(6).standard_normal((33, 70)) + 3
    n, mean, m2 = ar.axis_mapreduce(_welford_f, ops.welford, (_dev(bk, x),), axis, None, False, (F64,) * 3)
    np.testing.assert_allclose(_host(mean), x.mean(axis=axis))
    np.testing.assert_allclose(_host(m2) / _host(n), x.var(axis=axis), rtol=1e-10)


def test_struct_of_arrays_input_and_several_arrays(bk):
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((2, 8, 40))
    r = ar.axis_mapreduce(lambda p: p[0] * p[1], ops.add, ((_dev(bk, a), _dev(bk, b)),), 1, None, False, F64)
    np.testing.assert_allclose(_host(r), (a * b).sum(axis=1))
    c = rng.standard_normal((8, 40))
    r = ar.axis_mapreduce(lambda u, v, w: u * v + w, ops.add, (_dev(bk, a), _dev(bk, b), _dev(bk, c)), 0,
                          None, False, F64)
    np.testing.assert_allclose(_host(r), (a * b + c).sum(axis=0))


def _noident(a, b):  # a plain function: no identity known, flagged accumulation
    return a if a > b else b


@pytest.mark.parametrize("axis", [0, 1])
def test_operator_without_identity_and_init(bk, axis):
    x = np.random.default_rng(8).standard_normal((10, 90))
    r = ar.axis_mapreduce(None, _noident, (_dev(bk, x),), axis, None, False, F64)
    np.testing.assert_array_equal(_host(r), x.max(axis=axis))
    r = ar.axis_mapreduce(None, _noident, (_dev(bk, x),), axis, 1.5, False, F64)
    np.testing.assert_array_equal(_host(r), np.maximum(x.max(axis=axis), 1.5))
    r = ar.axis_mapreduce(None, ops.add, (_dev(bk, x),), axis, 10.0, False, F64)
    np.testing.assert_allclose(_host(r), x.sum(axis=axis) + 10)


def test_empty(bk):
    z = _dev(bk, np.zeros((3, 0)))
    np.testing.assert_array_equal(_sum(bk, z, 1), [0, 0, 0])
    assert _sum(bk, z, 0).shape == (0,)
    with pytest.raises(ValueError, match="identity"):
        ar.axis_mapreduce(None, _noident, (z,), 1, None, False, F64)
    np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, _noident, (z,), 1, 7.0, False, F64)), [7.0] * 3)


def test_zero_stride_broadcast(bk):
    x = np.broadcast_to(np.arange(5.0), (6, 5))
    np.testing.assert_allclose(_sum(bk, _dev(bk, x), 0), x.sum(axis=0))
    np.testing.assert_allclose(_sum(bk, _dev(bk, x), 1), x.sum(axis=1))


def test_misaligned_starts(bk):
    base = np.random.default_rng(9).standard_normal((8, 101)).astype(np.float32)
    for off in range(5):
        x = base[:, off:off + 96]
        np.testing.assert_allclose(_sum(bk, _dev(bk, x), 1), x.astype(F64).sum(axis=1), rtol=1e-5)


def test_five_dims_loops(bk):
    x = np.random.default_rng(10).integers(0, 9, size=(2, 3, 2, 3, 2)).astype(np.int64)
    xt = x.transpose(4, 0, 3, 1, 2)
    for axes in [(0, 2, 4), (1, 3), (0,), (1, 2, 3, 4)]:
        r = ar.axis_mapreduce(None, ops.add, (_dev(bk, xt),), axes, None, False, np.dtype("int64"))
        np.testing.assert_array_equal(_host(r), xt.sum(axis=axes))


@settings(max_examples=15, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["int32", "int64", "uint8", "float32"]),
       shape=shapes(min_dims=1, max_dims=3, max_side=70, edges=(63, 64, 65), max_size=4000))
def test_hypothesis_views(bk, data, dtype, shape):
    # any view (offset, strided, reversed, broadcast, transposed) along any axes, against NumPy
    x = data.draw(views(dtype, shape, xp=bk, elements={"min_value": 0, "max_value": 9}), label="x")
    axis = data.draw(st_axes(len(shape)), label="axis")
    acc = np.dtype("float64" if dtype == "float32" else "int64")
    r = ar.axis_mapreduce(None, ops.add, (x,), axis, None, False, acc)
    np.testing.assert_array_equal(_host(r), _host(x).astype(acc).sum(axis=axis))


@settings(max_examples=6, deadline=None)
@given(data=st.data(), shape=shapes(min_dims=2, max_dims=2, min_side=1, max_side=40))
def test_hypothesis_views_argmax_max(bk, data, shape):
    x = data.draw(views("float32", shape, xp=bk, elements={"min_value": 0, "max_value": 4}), label="x")
    h = _host(x)
    axis = data.draw(st.sampled_from([0, 1]), label="axis")
    np.testing.assert_array_equal(_host(ar.argmax(x, axis)), np.argmax(h, axis=axis))
    r = ar.axis_mapreduce(None, ops.maximum, (x,), axis, None, False, np.dtype("float32"))
    np.testing.assert_array_equal(_host(r), h.max(axis=axis))


# ----------------------------------------------------------- fast paths (128-bit loads)


def _kinds():
    return {p["kind"] for p in dispatch_axis.PLANS.values() if isinstance(p, dict)}


def _vector_rows():
    return {p["vector_rows"] for p in dispatch_axis.PLANS.values() if isinstance(p, dict)}


@pytest.fixture
def fresh_plans():
    """Plans made from scratch, so that the test can see which kernel each call chose."""
    dispatch_axis.PLANS.clear()
    dispatch_axis.FAST.clear()
    yield
    dispatch_axis.PLANS.clear()
    dispatch_axis.FAST.clear()


# (rows, columns, first column): odd column counts, misaligned first columns, several
# column tiles (the simulator's block is 64 threads: > 64 groups of VEC columns) and tall
# columns split over several blocks (partials + ticket)
COLVEC_CASES = [(3, 5, 1), (9, 8, 0), (70, 33, 3), (130, 12, 2), (5, 300, 1), (20, 291, 0), (2, 9, 0)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("rows,cols,c0", COLVEC_CASES)
def test_column_kernel_vectorised(bk, fresh_plans, dtype, rows, cols, c0):
    # row stride a multiple of 16 bytes: columns keep their 16-byte phase from row to row
    width = -(-(cols + c0 + 1) // 8) * 8
    base = (np.random.default_rng(rows * cols).standard_normal((rows, width)) * 20).astype(dtype)
    h = base[:, c0:c0 + cols]
    x = _dev(bk, base)[:, c0:c0 + cols]
    acc = np.dtype("int64" if np.dtype(dtype).kind == "i" else "float64")
    np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (x,), 0, None, False, acc)),
                               h.astype(acc).sum(axis=0), rtol=1e-5)
    if dtype in ("float32", "int64"):   # index, operator without identity, init
        np.testing.assert_array_equal(_host(ar.argmax(x, 0)), np.argmax(h, axis=0))
        np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, _noident, (x,), 0, None, False, acc)),
                                      h.astype(acc).max(axis=0))
        np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (x,), 0, 7, False, acc)),
                                   h.astype(acc).sum(axis=0) + 7, rtol=1e-5)
    assert "make_colvec_kernel" in _kinds()


@pytest.mark.parametrize("cols", [40, 300])  # threads sharing a column group, or not
@pytest.mark.parametrize("rows", [2, 3, 6, 7, 10, 11])
def test_column_kernel_vectorised_row_tail(bk, fresh_plans, rowcol_params, rows, cols):
    """Four rows in flight, then the last 1-3 rows of a thread in one round trip (rows past
    the end re-read a valid row and are not folded): sums, argmax (row indices) and a
    reduction split over blocks."""
    rowcol_params(unroll=4, col_flat=0, min_items=1)
    h = (np.random.default_rng(rows).standard_normal((rows, cols)) * 10).astype(np.float32)
    x = _dev(bk, h)
    np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (x,), 0, None, False, F64)),
                               h.astype(F64).sum(axis=0), rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(_host(ar.argmax(x, 0)), np.argmax(h, axis=0))
    assert _kinds() == {"make_colvec_kernel"}


def _colvec_args(monkeypatch, pick):
    """``pick(fargs)`` of every vectorised column kernel the plans ask for, as they ask."""
    from forge_array.dispatch.axis_reduce import plan

    seen = []
    real = plan._compile

    def spy(factory, fargs, *rest, **kw):
        if factory.__name__ == "make_colvec_kernel":
            seen.append(pick(fargs))
        return real(factory, fargs, *rest, **kw)
    monkeypatch.setattr(plan, "_compile", spy)
    return seen


def _vout_of_plans(monkeypatch):
    """The ``VOUT`` argument of every vectorised column kernel the plans ask for."""
    return _colvec_args(monkeypatch, lambda fargs: len(fargs) > 15 and fargs[15])


@pytest.mark.parametrize("rows,cols", [(5, 64), (130, 36), (3, 301), (40, 7)])
def test_column_kernel_vector_stores(bk, fresh_plans, rowcol_params, monkeypatch, rows, cols):
    """col_vstore: a thread's float32 results of a float32 input go out in one 128-bit store
    (a partial last group of columns one by one; tall columns split over blocks); columns at
    another 16-byte phase, results of another item size and argmax keep scalar stores."""
    seen = _vout_of_plans(monkeypatch)
    rowcol_params(col_flat=0, col_vstore=True, min_items=2)
    rng = np.random.default_rng(rows + cols)
    h = rng.standard_normal((rows, -(-(cols + 4) // 4) * 4)).astype(np.float32)
    x = _dev(bk, h)
    f32 = np.dtype(np.float32)
    r = ar.axis_mapreduce(None, ops.add, (x[:, :cols],), 0, None, False, f32)
    np.testing.assert_allclose(_host(r), h[:, :cols].astype(F64).sum(axis=0), rtol=1e-4, atol=1e-4)
    assert seen == [True] * len(seen) and seen
    seen.clear()
    r = ar.axis_mapreduce(None, ops.add, (x[:, 1:cols + 1],), 0, None, False, f32)   # phase 1
    np.testing.assert_allclose(_host(r), h[:, 1:cols + 1].astype(F64).sum(axis=0), rtol=1e-4, atol=1e-4)
    r = ar.axis_mapreduce(None, ops.add, (x[:, :cols],), 0, None, False, F64)        # 8-byte results
    np.testing.assert_allclose(_host(r), h[:, :cols].astype(F64).sum(axis=0), rtol=1e-6)
    np.testing.assert_array_equal(_host(ar.argmax(x[:, :cols], 0)), np.argmax(h[:, :cols], axis=0))
    assert seen == [False] * len(seen) and seen
    assert _kinds() == {"make_colvec_kernel"}


@pytest.mark.parametrize("preload", [False, True])
@pytest.mark.parametrize("rows,cols", [(5, 64), (130, 36), (64, 20)])
def test_column_kernel_reads_a_row_constant_operand_once_with_col_preload(bk, fresh_plans, rowcol_params,
                                                                         monkeypatch, preload, rows, cols):
    """col_preload: an operand the same in every row at the data's item size and phase (the
    pivot row of var / std's shifted sums) is read once per thread (mode 2), as one of
    another item size always is; without it, by a vector load per row (mode 1).  The sums
    are the same either way."""
    seen = _colvec_args(monkeypatch, lambda fargs: fargs[13])
    rowcol_params(col_flat=0, min_items=2, col_preload=preload)
    rng = np.random.default_rng(rows * cols)
    h = (rng.standard_normal((rows, cols)) * 3 + 100).astype(np.float32)
    x = _dev(bk, h)
    pivot = bk.broadcast_to(x[0:1], x.shape)
    s1, s2 = ar.axis_mapreduce(ops.shifted_squares, ops.add_pair, (x, pivot), 0, None, False, (F64, F64))
    d = h.astype(F64) - h[0].astype(F64)
    np.testing.assert_allclose(_host(s1), d.sum(axis=0), rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(_host(s2), (d * d).sum(axis=0), rtol=1e-12, atol=1e-9)
    mu = _dev(bk, h.astype(F64).mean(axis=0))    # float64 beside float32: once per thread always
    r = ar.axis_mapreduce(lambda v, m: (v - m) * (v - m), ops.add, (x, bk.broadcast_to(mu, x.shape)), 0,
                          None, False, F64)
    np.testing.assert_allclose(_host(r), ((h.astype(F64) - h.astype(F64).mean(axis=0)) ** 2).sum(axis=0),
                               rtol=1e-9)
    assert seen and seen[0] == ((1, 2) if preload else (1, 1)) and seen[-1] == (1, 2)


def _simulator_geometry(sm_count, rowcol_params, **params):
    """The simulator's launch shapes on any device (its 2 SMs and its rowcol table), so that a
    test's assertions on grids and splits hold on a GPU too; ``params`` override the table."""
    from forge_array.runtime import tuning

    sm_count(2)
    # (the default table names every key, so a GPU's own values are all replaced)
    table = {**tuning.TABLES["default"]["rowcol"], **tuning.TABLES["simulator"]["rowcol"], **params}
    rowcol_params(**table)


@pytest.mark.parametrize("waves", [0, 4])
def test_column_kernel_wave_filling_split(bk, fresh_plans, rowcol_params, sm_count, waves):
    """col_waves: at least a wave of column tiles (6 tiles of 64 x 4 columns on the
    simulator's 2 SMs x 2 blocks) and rows split so that the last wave fills: 2 parts (12
    blocks, 3 full waves) instead of none (6 blocks, 1.5 waves); col_round: whole rounds of
    rows per thread. Sums, argmax and a reduction without identity agree with NumPy."""
    _simulator_geometry(sm_count, rowcol_params, occupancy=True, col_waves=waves, col_round=True,
                        min_items=2, col_flat=0)
    h = (np.random.default_rng(waves).standard_normal((41, 1300)) * 10).astype(np.float32)
    x = _dev(bk, h)
    np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (x,), 0, None, False, F64)),
                               h.astype(F64).sum(axis=0), rtol=1e-6, atol=1e-9)
    np.testing.assert_array_equal(_host(ar.argmax(x, 0)), np.argmax(h, axis=0))
    np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, _noident, (x,), 0, None, False, F64)),
                                  h.astype(F64).max(axis=0))
    plans = [p for p in dispatch_axis.PLANS.values() if isinstance(p, dict)]
    assert {p["kind"] for p in plans} == {"make_colvec_kernel"}
    assert {p["split"] for p in plans} == ({2} if waves else {1})


def test_column_kernel_vectorised_batches_tuples_and_fallbacks(bk, fresh_plans, rowcol_params):
    rowcol_params(col_flat=0)   # thin C-contiguous matrices would take the flat kernel
    rng = np.random.default_rng(12)
    x = rng.standard_normal((3, 50, 16))                 # batches of (50, 16), axis 1
    n, mean, m2 = ar.axis_mapreduce(_welford_f, ops.welford, (_dev(bk, x),), 1, None, False, (F64,) * 3)
    np.testing.assert_allclose(_host(mean), x.mean(axis=1))
    np.testing.assert_allclose(_host(m2) / _host(n), x.var(axis=1), rtol=1e-10)
    r = _sum(bk, _dev(bk, x), (0, 1))                    # two reduced dims (RED2)
    np.testing.assert_allclose(r, x.sum(axis=(0, 1)))
    y = rng.standard_normal((40, 24)).astype(np.float32)  # three operands, one broadcast
    w = rng.standard_normal((40, 1)).astype(np.float32)
    r = ar.axis_mapreduce(lambda a, b, c: a * b + c, ops.add,
                          (_dev(bk, y), _dev(bk, np.broadcast_to(w, y.shape)), _dev(bk, y[::-1])), 0,
                          None, False, F64)
    np.testing.assert_allclose(_host(r), (y.astype(F64) * w + y[::-1]).sum(axis=0), rtol=1e-5)
    assert _kinds() == {"make_colvec_kernel"}
    # odd row stride (phase changes from row to row) and different phases: the scalar kernel
    dispatch_axis.PLANS.clear()
    z = rng.standard_normal((30, 13)).astype(np.float32)
    np.testing.assert_allclose(_sum(bk, _dev(bk, z), 0), z.astype(F64).sum(axis=0), rtol=1e-5)
    zz = rng.standard_normal((30, 24)).astype(np.float32)
    r = ar.axis_mapreduce(lambda a, b: a * b, ops.add, (_dev(bk, zz)[:, 1:17], _dev(bk, zz)[:, 2:18]), 0,
                          None, False, F64)
    np.testing.assert_allclose(_host(r), (zz[:, 1:17].astype(F64) * zz[:, 2:18]).sum(axis=0), rtol=1e-5)
    assert _kinds() == {"make_col_kernel"}


def _modes_of_plans(monkeypatch):
    """The ``MODES`` argument of every vectorised column kernel the plans ask for."""
    return _colvec_args(monkeypatch, lambda fargs: fargs[13])


@pytest.mark.parametrize("rows,cols,c0", [(9, 40, 0), (33, 130, 1), (4, 7, 3), (70, 12, 2)])
def test_column_kernel_reads_a_row_constant_operand_of_another_item_size(
        bk, fresh_plans, rowcol_params, monkeypatch, rows, cols, c0):
    """sum((X - mu)**2, axis=0) of float32 ``X`` (any phase) around a float64 ``mu``, with
    and without a float32 ``w`` beside it: ``X`` by 128-bit loads, ``mu`` (the same in every
    row, another item size) by scalar loads (mode 2); without ``col_preload`` a float32
    row-constant operand at ``X``'s phase stays a vector operand (mode 1), at another phase
    it is read as mode 2 (with it, as mode 2 at either phase: the test above)."""
    seen = _modes_of_plans(monkeypatch)
    rowcol_params(col_flat=0, min_items=2, col_preload=False)
    rng = np.random.default_rng(rows * cols + c0)
    base = rng.standard_normal((rows, -(-(cols + c0 + 4) // 4) * 4)).astype(np.float32)
    h = base[:, c0:c0 + cols]
    mu = rng.standard_normal(cols)
    X = _dev(bk, base)[:, c0:c0 + cols]
    M = bk.broadcast_to(_dev(bk, mu), (rows, cols))
    r = ar.axis_mapreduce(lambda a, m: (a - m) * (a - m), ops.add, (X, M), 0, None, False, F64)
    np.testing.assert_allclose(_host(r), ((h.astype(F64) - mu) ** 2).sum(axis=0), rtol=1e-12)
    assert seen and set(seen) == {(1, 2)}   # (a GPU plan may build a second kernel for its split)
    wbase = rng.standard_normal(cols + 4).astype(np.float32)
    for shift, mode in ((c0, 1), ((c0 + 1) % 4, 2)):   # w at X's 16-byte phase, or not
        seen.clear()
        dispatch_axis.PLANS.clear()
        dispatch_axis.FAST.clear()
        wdev = _dev(bk, np.concatenate([np.zeros(shift, np.float32), wbase]))[shift:shift + cols]
        W = bk.broadcast_to(wdev, (rows, cols))
        r = ar.axis_mapreduce(lambda a, m, w: (a - m) * w, ops.add, (X, M, W), 0, None, False, F64)
        want = ((h.astype(F64) - mu) * wbase[:cols]).sum(axis=0)
        np.testing.assert_allclose(_host(r), want, rtol=1e-9, atol=1e-9)
        assert seen and set(seen) == {(1, 2, mode)}


# (rows, columns, offset of the first element): thin C-contiguous matrices read as one flat
# run of vectors; p up to the simulator's block (64), heads and tails, one or several blocks
FLAT_CASES = [(2, 4, 0), (50, 10, 1), (33, 5, 3), (9, 64, 2), (41, 33, 1), (7, 7, 0)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("rows,p,off", FLAT_CASES)
def test_column_kernel_flat(bk, fresh_plans, dtype, rows, p, off):
    rng = np.random.default_rng(rows * p + off)
    flat = (rng.standard_normal(rows * p + 8) * 20).astype(dtype)
    h = flat[off:off + rows * p].reshape(rows, p)
    x = _dev(bk, flat)[off:off + rows * p].reshape(rows, p)
    acc = np.dtype("int64" if np.dtype(dtype).kind == "i" else "float64")
    def exact(got, want):   # products of float32 elements are rounded before they are summed
        if acc.kind == "i":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    exact(_host(ar.axis_mapreduce(None, ops.add, (x,), 0, None, False, acc)), h.astype(acc).sum(axis=0))
    exact(_host(ar.axis_mapreduce(None, ops.maximum, (x,), 0, 7, False, acc)),
          np.maximum(h.astype(acc).max(axis=0), 7))
    # a row-indexed operand (x @ A), strided; and a second matrix of the same layout
    w = (rng.standard_normal(2 * rows) * 3).astype(dtype)
    wd = _dev(bk, w)[::2]
    exact(_host(ar.axis_mapreduce(lambda a, v: a * v, ops.add, (x, _bcast_rows(bk, wd, p)), 0, None,
                                  False, acc)),
          (h.astype(acc) * w[::2, None].astype(acc)).sum(axis=0))
    other = np.zeros(rows * p + 8, dtype)
    other[off:off + rows * p] = flat[off:off + rows * p][::-1]
    yh = other[off:off + rows * p].reshape(rows, p)
    yv = _dev(bk, other)[off:off + rows * p].reshape(rows, p)
    exact(_host(ar.axis_mapreduce(lambda a, b, v: a - b * v, ops.add, (x, yv, _bcast_rows(bk, wd, p)), 0, None,
                                  False, acc)),
          (h.astype(acc) - yh.astype(acc) * w[::2, None].astype(acc)).sum(axis=0))
    assert _kinds() == {"make_colflat_kernel"}


@pytest.mark.parametrize("items", [None, 16])
def test_column_kernel_tile_rows_and_block(bk, fresh_plans, rowcol_params, sm_count, items):
    """col_min_items: fewer threads share a column group's 40 rows (2 instead of 4 in a tile of
    128 threads, 32 side by side), where the tiles still fill half a wave (128 column vectors:
    2 tiles on the 2 SMs x 2 blocks); where they would not (64 column vectors: 1 tile)
    min_items rules (4 rows). The rows' split across blocks keeps min_items (2 rows a thread).
    col_block: the vectorised column kernel's block. Sums, x @ A and argmax agree with NumPy."""
    extra = {} if items is None else {"col_min_items": items}
    _simulator_geometry(sm_count, rowcol_params, col_flat=0, col_tile=32, min_items=2, occupancy=False,
                        col_block=128, **extra)
    rng = np.random.default_rng(31)
    for cols, rows_shared in [(512, 4 if items is None else 2), (256, 4)]:
        dispatch_axis.PLANS.clear()
        h = (rng.standard_normal((40, cols)) * 10).astype(np.float32)
        w = rng.standard_normal(40).astype(np.float32)
        np.testing.assert_allclose(_sum(bk, _dev(bk, h), 0), h.astype(F64).sum(axis=0), rtol=1e-5, atol=1e-4)
        r = ar.axis_mapreduce(lambda u, v: u * v, ops.add, (_dev(bk, h), _bcast_rows(bk, _dev(bk, w), cols)), 0,
                              None, False, F64)
        np.testing.assert_allclose(_host(r), (h.astype(F64) * w[:, None]).sum(axis=0), rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(_host(ar.argmax(_dev(bk, h), 0)), np.argmax(h, axis=0))
        plans = [pl for pl in dispatch_axis.PLANS.values() if isinstance(pl, dict)]
        assert {pl["kind"] for pl in plans} == {"make_colvec_kernel"}
        assert {pl["block"] for pl in plans} == {128}
        # aux = CQ * 16 + phase: CQ = 128 / rows_shared threads side by side, each of 4 columns
        assert {pl["scalars"][-1] // 16 for pl in plans} == {128 // rows_shared}
        # the rows split so that the tiles fill the 4 slots
        assert {pl["split"] for pl in plans} == {-(-4 // (cols // 4 // (128 // rows_shared)))}


@pytest.mark.parametrize("flight", [2, 4, 8])
def test_column_kernel_split_combine(bk, fresh_plans, rowcol_params, sm_count, flight):
    """The last block of a split column tile combines its partial rows, ``col_combine`` rows in
    flight per thread: 300 rows of 16 column vectors (one tile of 16 x 4 threads, 4 rows at a
    time) split 37 ways (9-row parts, 34 of them): rounds of eight, of four, of two and a single
    row per thread. Sums (exact int64), argmax (index pairs) and a reduction without identity."""
    _simulator_geometry(sm_count, rowcol_params, blocks_per_sm=20, occupancy=False, col_flat=0,
                        col_combine=flight, col_round=False, col_split_group=0)
    rng = np.random.default_rng(40 + flight)
    h = (rng.standard_normal((300, 64)) * 10).astype(np.float32)
    z = rng.integers(-10**6, 10**6, (300, 64)).astype(np.int64)
    np.testing.assert_allclose(_sum(bk, _dev(bk, h), 0), h.astype(F64).sum(axis=0), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(_sum(bk, _dev(bk, z), 0, dtype=np.int64), z.sum(axis=0))
    np.testing.assert_array_equal(_host(ar.argmax(_dev(bk, h), 0)), np.argmax(h, axis=0))
    np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, _noident, (_dev(bk, h),), 0, None, False, F64)),
                                  h.astype(F64).max(axis=0))
    plans = [pl for pl in dispatch_axis.PLANS.values() if isinstance(pl, dict)]
    assert {pl["kind"] for pl in plans} == {"make_colvec_kernel"}
    assert {(pl["split"], pl["scalars"][13]) for pl in plans if pl["acc_full"] == np.dtype("float32")
            or pl["acc_full"] == np.dtype("float64")} >= {(34, 9)}


def test_column_kernel_eight_rows_in_flight(bk, fresh_plans, rowcol_params, sm_count):
    """col_unroll 8: a thread of the vectorised column kernel loads eight rows before folding
    them (then rounds of four, the 1-3 row tail): 203 rows of 128 columns, two tiles of 16 x 4
    threads (51 rows per thread: 6 rounds of 8, the tail of 3), then split 3 ways (17-row
    parts). Sums (exact int64), argmax (index pairs)."""
    _simulator_geometry(sm_count, rowcol_params, occupancy=False, col_flat=0, col_round=False,
                        col_unroll=8, col_tile=16, blocks_per_sm=1)
    rng = np.random.default_rng(80)
    h = (rng.standard_normal((203, 128)) * 10).astype(np.float32)
    z = rng.integers(-10**6, 10**6, (203, 128)).astype(np.int64)
    np.testing.assert_allclose(_sum(bk, _dev(bk, h), 0), h.astype(F64).sum(axis=0), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(_sum(bk, _dev(bk, z), 0, dtype=np.int64), z.sum(axis=0))
    np.testing.assert_array_equal(_host(ar.argmax(_dev(bk, h), 0)), np.argmax(h, axis=0))
    plans = [pl for pl in dispatch_axis.PLANS.values() if isinstance(pl, dict)]
    assert {(pl["kind"], pl["split"]) for pl in plans} == {("make_colvec_kernel", 1)}
    rowcol_params(blocks_per_sm=3)   # 6 block slots: float32's 2 tiles split 3 ways (int64: 4 x 2)
    np.testing.assert_allclose(_sum(bk, _dev(bk, h), 0), h.astype(F64).sum(axis=0), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(_sum(bk, _dev(bk, z), 0, dtype=np.int64), z.sum(axis=0))
    plans = [pl for pl in dispatch_axis.PLANS.values() if isinstance(pl, dict)]
    assert {(pl["kind"], pl["split"]) for pl in plans} == {("make_colvec_kernel", 3), ("make_colvec_kernel", 2)}


def test_column_kernel_deep_variant_per_launch(bk, fresh_plans, rowcol_params, sm_count):
    """col_deep: a launch whose few column tiles split their rows across blocks in one wave
    takes the kernel with eight rows in flight per thread (and no launch bound); one of many
    tiles (short rows per thread) keeps the table's depth. Tall: 300 x 64 float32, one tile
    of 16 x 4 threads split 4 ways (19 rows per thread; int64: two tiles split 2 ways);
    wide: 20 x 1300, 21 tiles on 4 block slots. Sums (float64 reference, exact int64), argmax, x @ A through vecmat."""
    from forge_array.primitives import matvec as mv

    _simulator_geometry(sm_count, rowcol_params, occupancy=True, col_flat=0, col_round=False,
                        col_unroll=4, col_deep=8, col_tile=16, blocks_per_sm=2)
    rng = np.random.default_rng(81)
    tall = (rng.standard_normal((300, 64)) * 10).astype(np.float32)
    z = rng.integers(-10**6, 10**6, (300, 64)).astype(np.int64)
    v = rng.standard_normal(300).astype(np.float32)
    np.testing.assert_allclose(_sum(bk, _dev(bk, tall), 0), tall.astype(F64).sum(axis=0), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(_sum(bk, _dev(bk, z), 0, dtype=np.int64), z.sum(axis=0))
    np.testing.assert_array_equal(_host(ar.argmax(_dev(bk, tall), 0)), np.argmax(tall, axis=0))
    np.testing.assert_allclose(_host(mv.vecmat(_dev(bk, v), _dev(bk, tall))),
                               v.astype(F64) @ tall.astype(F64), rtol=1e-4, atol=1e-3)
    plans = [pl for pl in dispatch_axis.PLANS.values() if isinstance(pl, dict)]
    # int64: two 16 x 2 tiles split 2 ways
    assert {(pl["kind"], pl["depth"], pl["split"]) for pl in plans} == {("make_colvec_kernel", 8, 4),
                                                                        ("make_colvec_kernel", 8, 2)}
    dispatch_axis.PLANS.clear()
    dispatch_axis.FAST.clear()
    wide = (rng.standard_normal((20, 1300)) * 10).astype(np.float32)
    np.testing.assert_allclose(_sum(bk, _dev(bk, wide), 0), wide.astype(F64).sum(axis=0), rtol=1e-5, atol=1e-4)
    plans = [pl for pl in dispatch_axis.PLANS.values() if isinstance(pl, dict)]
    assert {(pl["kind"], pl["depth"], pl["split"]) for pl in plans} == {("make_colvec_kernel", 4, 1)}
    # the row kernels under the same table (col_deep is the column kernel's alone)
    u = rng.standard_normal(1300).astype(np.float32)
    np.testing.assert_allclose(_host(mv.matvec(_dev(bk, wide), _dev(bk, u))),
                               wide.astype(F64) @ u.astype(F64), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(_sum(bk, _dev(bk, tall), 1), tall.astype(F64).sum(axis=1), rtol=1e-5, atol=1e-4)


def test_column_kernel_split_two_level_combine(bk, fresh_plans, rowcol_params, sm_count):
    """col_split_group: a column tile split into many parts combines their partial rows in two
    levels. 300 rows of 64 columns (one tile of 16 x 4 threads) split 34 ways: groups of
    ceil(sqrt(34)) = 6 parts (6, 6, 6, 6, 6, 4), a group row and a ticket per group, then the
    six group rows (one level: ``test_column_kernel_split_combine``). Batches (three tiles'
    tickets), sums (exact int64), argmax (index pairs), a reduction without identity."""
    _simulator_geometry(sm_count, rowcol_params, blocks_per_sm=20, occupancy=False, col_flat=0,
                        col_round=False, col_split_group=4)
    rng = np.random.default_rng(70)
    h = (rng.standard_normal((300, 64)) * 10).astype(np.float32)
    z = rng.integers(-10**6, 10**6, (300, 64)).astype(np.int64)
    np.testing.assert_allclose(_sum(bk, _dev(bk, h), 0), h.astype(F64).sum(axis=0), rtol=1e-5, atol=1e-4)
    for _ in range(2):   # the tickets are reset for the next launch
        np.testing.assert_array_equal(_sum(bk, _dev(bk, z), 0, dtype=np.int64), z.sum(axis=0))
    np.testing.assert_array_equal(_host(ar.argmax(_dev(bk, h), 0)), np.argmax(h, axis=0))
    np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, _noident, (_dev(bk, h),), 0, None, False, F64)),
                                  h.astype(F64).max(axis=0))
    b = rng.integers(-1000, 1000, (3, 300, 64)).astype(np.int64)
    np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, ops.add, (_dev(bk, b),), 1, None, False,
                                                          np.dtype("int64"))), b.sum(axis=1))
    plans = [pl for pl in dispatch_axis.PLANS.values() if isinstance(pl, dict)]
    assert {pl["kind"] for pl in plans} == {"make_colvec_kernel"}
    assert 34 in {pl["split"] for pl in plans}
    for pl in plans:   # one tile per batch; 8-byte values: 38 parts (7 groups of 6, the last 2)
        nb, gs = pl["scalars"][0], pl["scalars"][14] // 32768
        assert gs == math.isqrt(pl["split"] - 1) + 1
        ng = -(-pl["split"] // gs)
        assert (pl["nticks"], pl["nslots"]) == (nb * (1 + ng), nb * 64 * (pl["split"] + ng))


@pytest.mark.parametrize("group", [0, 1, 3])
def test_column_kernel_flat_many_partials(bk, fresh_plans, rowcol_params, sm_count, group):
    """The fold of many per-block partials: 64 columns over 40 blocks, 4 positions per column,
    10 partials each; by the last block alone (group 0: eight loads in flight per position),
    or in two levels (col_flat_group: groups of 4 or 12 blocks, the last group partial, a
    ticket per group; 40 columns: 6 positions per column, 25 blocks, groups of 6, 6, 6, 6, 1
    or 18, 7)."""
    _simulator_geometry(sm_count, rowcol_params, blocks_per_sm=20, occupancy=False, col_flat_group=group)
    rng = np.random.default_rng(9)
    a = (rng.standard_normal((170, 64)) * 20).astype(np.float32)
    z = rng.integers(-1000, 1000, (170, 64)).astype(np.int64)
    np.testing.assert_allclose(_sum(bk, _dev(bk, a), 0), a.astype(F64).sum(axis=0), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, ops.add, (_dev(bk, z),), 0, None, False,
                                                          np.dtype("int64"))), z.sum(axis=0))
    plans = [pl for pl in dispatch_axis.PLANS.values() if isinstance(pl, dict)]
    assert {pl["kind"] for pl in plans} == {"make_colflat_kernel"}
    # groups of (rows per position) * U blocks (U = 4 positions per column for float32, 2 for
    # int64), a group row and a ticket per group
    ng = [-(-40 // (u * group)) if group else 0 for u in (4, 2)]
    assert {(pl["grid"], pl["nticks"], pl["nslots"]) for pl in plans} == (
        {(40, 1, 64 * 40)} if not group else {(40, 1 + g, 64 * (40 + g)) for g in ng})
    # x @ A through the row-indexed operand, 40 columns, 25 blocks: a last group of 1 (group 1)
    dispatch_axis.PLANS.clear()
    b = (rng.standard_normal((170, 40)) * 20).astype(np.float32)
    w = rng.standard_normal(170).astype(np.float32)
    r = ar.axis_mapreduce(lambda u, v: u * v, ops.add, (_dev(bk, b), _bcast_rows(bk, _dev(bk, w), 40)), 0,
                          None, False, F64)
    np.testing.assert_allclose(_host(r), (b.astype(F64) * w[:, None]).sum(axis=0), rtol=1e-5, atol=1e-4)
    plans = [pl for pl in dispatch_axis.PLANS.values() if isinstance(pl, dict)]
    assert [(pl["kind"], pl["grid"]) for pl in plans] == [("make_colflat_kernel", 25)]
    # the tickets are left at zero: the same plan again
    r = ar.axis_mapreduce(lambda u, v: u * v, ops.add, (_dev(bk, b), _bcast_rows(bk, _dev(bk, w), 40)), 0,
                          None, False, F64)
    np.testing.assert_allclose(_host(r), (b.astype(F64) * w[:, None]).sum(axis=0), rtol=1e-5, atol=1e-4)


def _bcast_rows(bk, v, p):
    """``v`` (rows,) as a (rows, p) view with column stride 0: indexed by the row only."""
    return bk.broadcast_to(v[:, None], (v.shape[0], p))


def test_column_kernel_flat_fallbacks(bk, fresh_plans, rowcol_params):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((20, 12)).astype(np.float32)
    x = _dev(bk, a)
    # different 16-byte phases of two matrix operands, a column-strided operand, a batch,
    # an operator without identity, a tuple accumulator: the other column kernels
    r = ar.axis_mapreduce(lambda u, v: u * v, ops.add, (x[:, 1:9], _dev(bk, a)[:, 2:10]), 0, None, False, F64)
    np.testing.assert_allclose(_host(r), (a[:, 1:9].astype(F64) * a[:, 2:10]).sum(axis=0), rtol=1e-5)
    np.testing.assert_array_equal(_host(ar.argmax(x, 0)), np.argmax(a, axis=0))
    np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, _noident, (x,), 0, None, False, F64)),
                                  a.astype(F64).max(axis=0))
    b = rng.standard_normal((3, 9, 8)).astype(np.float32)
    np.testing.assert_allclose(_sum(bk, _dev(bk, b), 1), b.astype(F64).sum(axis=1), rtol=1e-5)
    assert "make_colflat_kernel" not in _kinds()
    # more columns than the limit, or the kernel switched off
    rowcol_params(col_flat=8)
    np.testing.assert_allclose(_sum(bk, x, 0), a.astype(F64).sum(axis=0), rtol=1e-5)
    rowcol_params(col_flat=0)
    np.testing.assert_allclose(_sum(bk, x[:, :8], 0), a[:, :8].astype(F64).sum(axis=0), rtol=1e-5)
    assert "make_colflat_kernel" not in _kinds()


# (rows, row length, offset): long rows of A @ x, several rows per block sharing x (the
# simulator's row_multi is 3: groups of 3, and of 3 + a clamped one for 7 rows); 1100 and
# 1032 elements split rows over several blocks (partials + ticket)
MULTI_CASES = [(3, 300, 1), (5, 1100, 2), (7, 1032, 0), (2, 260, 3)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("rows,J,off", MULTI_CASES)
def test_row_kernel_multi_rows(bk, fresh_plans, dtype, rows, J, off):
    rng = np.random.default_rng(rows * J + off)
    flat = (rng.standard_normal(rows * J + 8) * 9).astype(dtype)
    h = flat[off:off + rows * J].reshape(rows, J)
    a = _dev(bk, flat)[off:off + rows * J].reshape(rows, J)
    xs = (rng.standard_normal(J + 8) * 3).astype(dtype)
    xh = xs[off:off + J]
    x = _dev(bk, xs)[off:off + J]                        # same 16-byte phase as A's rows
    acc = np.dtype("int64" if np.dtype(dtype).kind == "i" else "float64")
    want = (h.astype(acc) * xh.astype(acc)).sum(axis=1)
    got = _host(ar.axis_mapreduce(lambda u, v: u * v, ops.add, (a, bk.broadcast_to(x, a.shape)), 1, 4,
                                  False, acc))
    if acc.kind == "i":
        np.testing.assert_array_equal(got, want + 4)
    else:
        np.testing.assert_allclose(got, want + 4, rtol=1e-5, atol=1e-4)
    assert _kinds() == {"make_rowmulti_kernel"}


def test_row_kernel_multi_rows_batches_and_fallbacks(bk, fresh_plans, rowcol_params):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((2, 3, 600)).astype(np.float32)
    x = rng.standard_normal((2, 1, 600)).astype(np.float32)
    r = ar.axis_mapreduce(lambda u, v: u * v, ops.maximum, (_dev(bk, A), bk.broadcast_to(_dev(bk, x), A.shape)),
                          2, None, False, np.dtype("float32"))
    np.testing.assert_allclose(_host(r), (A * x).max(axis=2), rtol=1e-6)
    assert _kinds() == {"make_rowmulti_kernel"}
    # x with another 16-byte phase than A's rows, or the kernel switched off: one row per block
    rowcol_params()
    xs = _dev(bk, rng.standard_normal(601).astype(np.float32))
    a = _dev(bk, A[0])
    r = ar.axis_mapreduce(lambda u, v: u * v, ops.add, (a, bk.broadcast_to(xs[1:], a.shape)), 1, None, False, F64)
    np.testing.assert_allclose(_host(r), (A[0].astype(F64) * _host(xs)[1:]).sum(axis=1), rtol=1e-5)
    rowcol_params(row_multi=0)
    r = ar.axis_mapreduce(lambda u, v: u * v, ops.add, (a, bk.broadcast_to(xs[:600], a.shape)), 1, None, False, F64)
    np.testing.assert_allclose(_host(r), (A[0].astype(F64) * _host(xs)[:600]).sum(axis=1), rtol=1e-5)
    assert _kinds() == {"make_row_kernel"}


# (rows, row length): short rows staged through shared memory
ROWTILE_CASES = [(1, 3), (7, 10), (300, 10), (70, 33), (9, 100), (20, 128), (200, 2)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8", "int16"])
@pytest.mark.parametrize("rows,p", ROWTILE_CASES)
def test_row_kernel_staged_short_rows(bk, fresh_plans, dtype, rows, p):
    rng = np.random.default_rng(rows + p)
    flat = (rng.standard_normal(rows * p + 8) * 20).astype(dtype)
    for off in (0, 3):                                   # aligned and misaligned first element
        h = flat[off:off + rows * p].reshape(rows, p)
        x = _dev(bk, flat)[off:off + rows * p].reshape(rows, p)
        acc = np.dtype({"f": "float64", "i": "int64", "u": "uint64"}[np.dtype(dtype).kind])
        np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (x,), 1, None, False, acc)),
                                   h.astype(acc).sum(axis=1), rtol=1e-5)
        if dtype in ("float32", "int16"):   # index, operator without identity, init
            np.testing.assert_array_equal(_host(ar.argmin(x, 1)), np.argmin(h, axis=1))
            np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, _noident, (x,), 1, 5, False, acc)),
                                          np.maximum(h.astype(acc).max(axis=1), 5))
    assert _kinds() == {"make_rowtile_kernel"}


def test_row_kernel_staged_several_operands(bk, fresh_plans):
    rng = np.random.default_rng(13)
    a, b, c = rng.standard_normal((3, 2, 90, 7))
    r = ar.axis_mapreduce(lambda u, v, w: u * v - w, ops.add, (_dev(bk, a), _dev(bk, b), _dev(bk, c)), 2,
                          None, False, F64)
    np.testing.assert_allclose(_host(r), (a * b - c).sum(axis=2))
    n, mean, m2 = ar.axis_mapreduce(_welford_f, ops.welford, (_dev(bk, a),), -1, None, False, (F64,) * 3)
    np.testing.assert_allclose(_host(m2) / _host(n), a.var(axis=-1), rtol=1e-10)
    assert _kinds() == {"make_rowtile_kernel"}


# the launch variants that tuning parameters select (occupancy-sized grids and splits, one
# warp per staged tile, narrow column tiles, four vectors in flight in the long-row kernel)
NEW_VARIANTS = {"occupancy": True, "row_tile_warp": True, "row_tile_min_blocks": 0, "col_tile": 32,
                "unroll": 8}


# + staged tiles laid out from the 16-byte boundary (st.shared.v4), bank-free lane groups
V4_VARIANTS = {"row_tile_v4": True, "row_tile_banks": True}


@pytest.fixture(params=["new", "v4"])
def new_variants(rowcol_params, request):
    extra = V4_VARIANTS if request.param == "v4" else {}
    rowcol_params(**NEW_VARIANTS, **extra)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int16", "int8"])
def test_new_variants_rows(bk, new_variants, dtype):
    rng = np.random.default_rng(21)
    acc = np.dtype("int64" if np.dtype(dtype).kind == "i" else "float64")
    # staged short rows, one warp per tile: several rounds of row groups (p = 3), groups of
    # lanes (p = 40, 100), misaligned starts, batches, index, no identity, init
    for rows, p, off in [(300, 3, 1), (70, 10, 0), (33, 40, 3), (9, 100, 2), (33, 32, 1),
                         (31, 31, 2), (32, 33, 0), (52, 10, 3)]:
        flat = (rng.standard_normal(rows * p + 8) * 20).astype(dtype)
        h = flat[off:off + rows * p].reshape(rows, p)
        x = _dev(bk, flat)[off:off + rows * p].reshape(rows, p)
        np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (x,), 1, None, False, acc)),
                                   h.astype(acc).sum(axis=1), rtol=1e-5)
        np.testing.assert_array_equal(_host(ar.argmax(x, 1)), np.argmax(h, axis=1))
        np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, _noident, (x,), 1, 5, False, acc)),
                                      np.maximum(h.astype(acc).max(axis=1), 5))
    b = (rng.standard_normal((3, 20, 7)) * 9).astype(dtype)
    np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (_dev(bk, b),), 2, None, False, acc)),
                               b.astype(acc).sum(axis=2), rtol=1e-5)
    assert _kinds() == {"make_rowtile_kernel"}
    # long rows split over several blocks (grid sized by the resident blocks), 4 vectors in flight
    dispatch_axis.PLANS.clear()
    y = (rng.standard_normal((2, 2000)) * 9).astype(dtype)
    np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (_dev(bk, y)[:, 1:],), 1, None, False,
                                                       acc)), y[:, 1:].astype(acc).sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(_host(ar.argmin(_dev(bk, y), 1)), np.argmin(y, axis=1))
    assert _kinds() == {"make_row_kernel"}


@pytest.mark.parametrize("warp", [True, False])
def test_rowtile_wide_staging(bk, fresh_plans, rowcol_params, warp):
    """Tiles of 8 vectors per lane staged with 8 loads in flight (``row_tile_wide``): a warp's
    tile of 102 rows of 10 float32 takes 254 vectors, so most lanes run the 8-load loop once;
    misaligned start, several tiles, a partial last tile."""
    rowcol_params(**{**NEW_VARIANTS, **V4_VARIANTS, "row_tile_warp": warp, "row_tile_vecs": 8,
                     "row_tile_wide": True})
    rng = np.random.default_rng(23)
    flat = (rng.standard_normal(4120) * 20).astype(np.float32)
    h = flat[3:3 + 410 * 10].reshape(410, 10)
    x = _dev(bk, flat)[3:3 + 410 * 10].reshape(410, 10)
    np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (x,), 1, None, False, F64)),
                               h.astype(np.float64).sum(axis=1), rtol=1e-6)
    assert _kinds() == {"make_rowtile_kernel"}


@pytest.mark.parametrize("accs", [2, 4])
@pytest.mark.parametrize("warp", [True, False])
def test_rowtile_partial_accumulators(bk, fresh_plans, rowcol_params, warp, accs):
    """``row_tile_accs``: a lane folds its elements of a staged single-operand row of at most
    16 elements into 2 or 4 partial results (longer rows and A @ x keep one). Rows of 3 .. 100
    elements (fewer elements per lane than accumulators, and remainders of every length),
    misaligned starts; sums (float64 reference), argmax and argmin of rows with ties (the
    first index wins), a reduction without identity with init, and A @ x against NumPy."""
    from forge_array.primitives import matvec as mv

    rowcol_params(**{**NEW_VARIANTS, **V4_VARIANTS, "row_tile_warp": warp, "row_tile_accs": accs})
    rng = np.random.default_rng(24 + accs)
    for rows, p, off in [(70, 10, 1), (33, 40, 3), (9, 100, 2), (40, 3, 0), (31, 33, 1), (12, 7, 3)]:
        flat = (rng.standard_normal(rows * p + 8) * 20).astype(np.float32)
        h = flat[off:off + rows * p].reshape(rows, p)
        x = _dev(bk, flat)[off:off + rows * p].reshape(rows, p)
        np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (x,), 1, None, False, F64)),
                                   h.astype(F64).sum(axis=1), rtol=1e-6, atol=1e-9)
        np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, _noident, (x,), 1, 5, False, F64)),
                                      np.maximum(h.astype(F64).max(axis=1), 5))
        t = rng.integers(0, 3, (rows, p)).astype(np.int32)   # many ties
        np.testing.assert_array_equal(_host(ar.argmax(_dev(bk, t), 1)), np.argmax(t, axis=1))
        np.testing.assert_array_equal(_host(ar.argmin(_dev(bk, t), 1)), np.argmin(t, axis=1))
        v = rng.standard_normal(p).astype(np.float32)
        np.testing.assert_allclose(_host(mv.matvec(x, _dev(bk, v))), h.astype(F64) @ v.astype(F64),
                                   rtol=1e-4, atol=1e-3)
    assert _kinds() == {"make_rowtile_kernel"}


@pytest.mark.parametrize("lanes,accs,held,fit", [(8, 1, 8, False), (2, 2, 0, False), (4, 1, 2, True)])
@pytest.mark.parametrize("warp", [True, False])
def test_rowtile_vector_rows(bk, fresh_plans, rowcol_params, warp, lanes, accs, held, fit):
    """``row_tile_vrow``: lanes read whole 128-bit vectors of staged rows of a multiple of
    VEC elements and of the vector of ``A @ x``. Rows of 4 .. 100 float32 and 2 .. 50
    float64 (fewer vectors per row than lanes, remainders of every length), batches,
    several tiles; sums, argmax (the index of each element), a reduction without identity
    with init, ``A @ x`` and a min-plus product against NumPy, ``x`` held in registers
    (``row_tile_held``) where its vectors per lane fit, warp tiles of whole rounds of rows
    (``row_tile_vrow_fit``). A misaligned start or a row length
    that is not a multiple of VEC keeps the scalar reads, with the same results."""
    from forge_array.primitives import matvec as mv

    rowcol_params(**{**NEW_VARIANTS, **V4_VARIANTS, "row_tile_warp": warp, "row_tile_vrow": lanes,
                     "row_tile_vrow_accs": accs, "row_tile_held": held, "row_tile_vrow_fill": 0,
                     "row_tile_vrow_fit": fit})
    rng = np.random.default_rng(41 + lanes)
    for dtype, rows, p, off in [("float32", 70, 8, 0), ("float32", 33, 100, 0), ("float32", 9, 4, 0),
                                ("float32", 31, 36, 0), ("float64", 40, 2, 0), ("float64", 21, 50, 0),
                                ("float32", 20, 40, 1), ("float32", 20, 10, 0)]:
        flat = (rng.standard_normal(rows * p + 8) * 20).astype(dtype)
        h = flat[off:off + rows * p].reshape(rows, p)
        x = _dev(bk, flat)[off:off + rows * p].reshape(rows, p)
        dispatch_axis.PLANS.clear()
        np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (x,), 1, None, False, F64)),
                                   h.astype(F64).sum(axis=1), rtol=1e-6, atol=1e-9)
        vec = 16 // np.dtype(dtype).itemsize
        assert _vector_rows() == {off == 0 and p % vec == 0}
        t = rng.integers(0, 3, (rows, p)).astype(dtype)   # many ties: the first index wins
        np.testing.assert_array_equal(_host(ar.argmax(_dev(bk, t), 1)), np.argmax(t, axis=1))
        np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, _noident, (x,), 1, 5, False, F64)),
                                      np.maximum(h.astype(F64).max(axis=1), 5))
        v = rng.standard_normal(p).astype(dtype)
        dispatch_axis.PLANS.clear()
        np.testing.assert_allclose(_host(mv.matvec(x, _dev(bk, v))), h.astype(F64) @ v.astype(F64),
                                   rtol=1e-4, atol=1e-3)
        g = min(lanes, 1 << max(0, p // vec - 1).bit_length())   # lanes per row
        per_lane = 1 << max(0, -(-(p // vec) // g) - 1).bit_length()
        want = per_lane if off == 0 and p % vec == 0 and per_lane <= held else 0
        assert {pl["held_vectors"] for pl in dispatch_axis.PLANS.values() if isinstance(pl, dict)} == {want}
        d = mv.matvec(x, _dev(bk, v), f=lambda a, b: a + b, op=ops.minimum)
        np.testing.assert_array_equal(_host(d), (h + v[None, :]).min(axis=1))
    # three operands (two staged, one read from global memory), integers
    a3, b3 = (rng.integers(-50, 50, (2, 18, 8)).astype(np.int32) for _ in range(2))
    c3 = rng.integers(-50, 50, 8).astype(np.int32)
    dispatch_axis.PLANS.clear()
    c3d = bk.broadcast_to(_dev(bk, c3), a3.shape)   # the same row for every row: stride 0
    r = ar.axis_mapreduce(lambda u, v, w: u * v - w, ops.add, (_dev(bk, a3), _dev(bk, b3), c3d), 2,
                          None, False, np.dtype("int64"))
    np.testing.assert_array_equal(_host(r), (a3.astype(np.int64) * b3 - c3).sum(axis=2))
    assert _vector_rows() == {True}
    b = rng.standard_normal((3, 5, 12)).astype(np.float32)   # batches of matrices and vectors
    w = rng.standard_normal((3, 12)).astype(np.float32)
    np.testing.assert_allclose(_host(mv.matvec(_dev(bk, b), _dev(bk, w))),
                               np.einsum("bij,bj->bi", b.astype(F64), w.astype(F64)), rtol=1e-5, atol=1e-5)
    assert _kinds() == {"make_rowtile_kernel"}


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_new_variants_columns(bk, new_variants, dtype):
    rng = np.random.default_rng(22)
    acc = np.dtype("int64" if np.dtype(dtype).kind == "i" else "float64")
    # narrow column tiles (32 groups of VEC columns), split rows, misaligned first column
    for rows, cols, c0 in [(60, 150, 1), (24, 291, 0), (5, 300, 3), (200, 20, 2)]:
        width = -(-(cols + c0 + 1) // 8) * 8
        base = (rng.standard_normal((rows, width)) * 20).astype(dtype)
        h = base[:, c0:c0 + cols]
        x = _dev(bk, base)[:, c0:c0 + cols]
        np.testing.assert_allclose(_host(ar.axis_mapreduce(None, ops.add, (x,), 0, None, False, acc)),
                                   h.astype(acc).sum(axis=0), rtol=1e-5)
        np.testing.assert_array_equal(_host(ar.argmax(x, 0)), np.argmax(h, axis=0))
        np.testing.assert_array_equal(_host(ar.axis_mapreduce(None, _noident, (x,), 0, 7, False, acc)),
                                      np.maximum(h.astype(acc).max(axis=0), 7))
    n, mean, m2 = ar.axis_mapreduce(_welford_f, ops.welford, (_dev(bk, base),), 0, None, False, (F64,) * 3)
    np.testing.assert_allclose(_host(m2) / _host(n), base.astype(F64).var(axis=0), rtol=1e-9)
    assert _kinds() == {"make_colvec_kernel"}
    # scalar column kernel (odd row stride, not one flat run), split over many blocks
    dispatch_axis.PLANS.clear()
    z = (rng.standard_normal((300, 15)) * 20).astype(dtype)
    np.testing.assert_allclose(_sum(bk, _dev(bk, z)[:, :13], 0, dtype=acc), z[:, :13].astype(acc).sum(axis=0),
                               rtol=1e-5)
    assert _kinds() == {"make_col_kernel"}


def test_errors(bk):
    x = _dev(bk, np.zeros((3, 4)))
    with pytest.raises(IndexError):
        ar.axis_mapreduce(None, ops.add, (x,), 2, None, False, F64)
    with pytest.raises(ValueError):
        ar.axis_mapreduce(None, ops.add, (x,), -3, None, False, F64)
    with pytest.raises(ValueError, match="repeated"):
        ar.axis_mapreduce(None, ops.add, (x,), (1, -1), None, False, F64)
    with pytest.raises(ValueError, match="shapes"):
        ar.axis_mapreduce(lambda a, b: a * b, ops.add, (x, _dev(bk, np.zeros((3, 5)))), 1, None, False, F64)
    with pytest.raises(TypeError):
        ar.axis_mapreduce(3, ops.add, (x,), 1, None, False, F64)


def test_uncompilable_operator(bk, sim):
    x = _dev(bk, np.ones((3, 40)))

    def bad(a, b):
        return a + object()

    if sim:
        pytest.skip("the simulator runs operators as Python; typing errors are checked by primitives/PTX")
    with pytest.raises(TypeError, match="numba"):
        ar.axis_mapreduce(None, bad, (x,), 1, None, False, F64)


def test_cpu_path_generic():
    # the numba-on-CPU path (no kernels for a NumPy array outside the simulator)
    import forge_array.primitives.axis_reduce.cpu  # noqa: F401  (imported at the CPU's first use)
    from forge_array.dispatch.axis_reduce import AxisReduction

    x = np.random.default_rng(11).standard_normal((5, 7))
    r = np.empty(5)
    ar.cpu.run_cpu(AxisReduction(ar.arguments._f_identity, ops.add, (1,), F64, np.float64(0), None, False), (x,), r)
    np.testing.assert_allclose(r, x.sum(axis=1))
    r = np.empty(7)
    ar.cpu.run_cpu(AxisReduction(ar.arguments._f_identity, ops.as_operator(_noident), (0,), F64, None, np.float64(9),
                                 False), (x,), r)
    np.testing.assert_allclose(r, np.maximum(x.max(axis=0), 9))
    v, i = np.empty(5), np.empty(5, np.int64)
    pair = (F64, np.dtype("int64"))
    ar.cpu.run_cpu(AxisReduction(ar.arguments._f_pair_index, ops.argmax, (1,), pair, ops.argmax.identity(pair), None,
                                 True), (x,), (v, i))
    np.testing.assert_array_equal(i, x.argmax(axis=1))


PTX_SRC = r"""
import os, subprocess, tempfile
import numpy as np
from forge_array import ops
from forge_array.runtime import compile_ptx_offline
from forge_array.runtime.param_types import I64, ptr, to_numba, tuple_of, unituple
from forge_array.kernels import rowcol as k
from forge_array.primitives.axis_reduce.arguments import _f_identity, _f_pair_index
from forge_array.dispatch.axis_reduce.plan import _buf_t
from forge_array.primitives.matvec import _mul as _f_mul

def argt(ins, acc, K):
    return to_numba((tuple_of(tuple(_buf_t(d) for d in ins)), _buf_t(acc), _buf_t(acc), ptr(np.uint32))
                    + (I64,) * 4 + (unituple(I64, K),) * 4 + (I64,) * 7)

f32, i64d, f64 = np.dtype("float32"), np.dtype("int64"), np.dtype("float64")
cases = [
    (k.make_row_kernel, (_f_identity, ops.add.fn, 1, f32, np.float32(0), False, None, 8, 256, 1,
                         False, False, 4, 4), argt((f32,), f32, 1), True),
    (k.make_row_kernel, (_f_identity, ops.add.fn, 1, f32, np.float32(0), False, None, 256, 256, 8,
                         False, False, 4, 4), argt((f32,), f32, 1), True),
    (k.make_row_kernel, (_f_pair_index, ops.argmax.fn, 1, (f32, i64d),
                         (np.float32(-np.inf), np.int64(2**63 - 1)), False, None, 32, 256, 1,
                         True, True, 1, 4), argt((f32,), (f32, i64d), 1), False),
    (k.make_col_kernel, ((lambda v: (1.0, v, 0.0)), ops.welford.fn, 1, (f64,) * 3,
                         (np.float64(0),) * 3, False, None, 256, 2, True, False, 4),
     argt((f32,), (f64,) * 3, 1), False),
    (k.make_col_kernel, (_f_identity, (lambda a, b: a if a > b else b), 1, f32, np.float32(0), True,
                         np.float32(1), 256, 3, False, False, 4), argt((f32,), (np.dtype(bool), f32), 1),
     False),
]
# the 128-bit paths: vectorised column kernel, staged short-row kernel
cases += [
    (k.make_colvec_kernel, (_f_identity, ops.add.fn, 1, f32, np.float32(0), False, None, 256, 1, False,
                            False, 4, 4, (1,)), argt((f32,), f32, 1), "v4.f32"),
    (k.make_colvec_kernel, ((lambda v: (1.0, v, 0.0)), ops.welford.fn, 1, (f64,) * 3, (np.float64(0),) * 3,
                            False, None, 256, 4, False, False, 4, 2, (1,)), argt((f64,), (f64,) * 3, 1),
     "v2.f64"),
    # results in one 128-bit store per thread (col_vstore), split and not
    (k.make_colvec_kernel, (_f_identity, ops.add.fn, 1, f32, np.float32(0), False, None, 256, 1, False,
                            False, 4, 4, (1,), True, True), argt((f32,), f32, 1), "v4.f32"),
    (k.make_colvec_kernel, (_f_identity, ops.add.fn, 1, f32, np.float32(0), False, None, 256, 2, False,
                            False, 4, 4, (1,), True, True), argt((f32,), f32, 1), "v4.f32"),
    # x @ A split across blocks, combined in two levels (col_split_group)
    (k.make_colvec_kernel, (_f_mul, ops.add.fn, 2, f32, np.float32(0), False, None, 128, 2, False,
                            False, 4, 4, (1, 0), True, True, 2, True), argt((f32, f32), f32, 2), "v4.f32"),
    # flat column kernel (thin matrices): one level, and two (col_flat_group); x @ A's row operand
    (k.make_colflat_kernel, (_f_identity, ops.add.fn, 1, f32, np.float32(0), False, None, 256, 4, (1,), 4),
     argt((f32,), f32, 1), "v4.f32"),
    (k.make_colflat_kernel, (_f_identity, ops.add.fn, 1, f32, np.float32(0), False, None, 256, 4, (1,), 4,
                             True), argt((f32,), f32, 1), "v4.f32"),
    (k.make_colflat_kernel, (_f_mul, ops.add.fn, 2, f32, np.float32(0), False, None, 256, 4, (1, 0), 4,
                             True), argt((f32, f32), f32, 2), "v4.f32"),
    (k.make_colvec_kernel, (_f_pair_index, ops.argmax.fn, 1, (f32, i64d),
                            (np.float32(-np.inf), np.int64(2**63 - 1)), False, None, 256, 1, False, True, 4,
                            4, (1,)), argt((f32,), (f32, i64d), 1), "v4.f32"),
    (k.make_rowtile_kernel, (_f_identity, ops.add.fn, 1, f32, np.float32(0), False, None, 1, 256, False, 4,
                             (1,), (f32,), 4), argt((f32,), f32, 1), "v4.f32"),
    (k.make_rowtile_kernel, (_f_pair_index, ops.argmax.fn, 1, (f64, i64d),
                             (np.float64(-np.inf), np.int64(2**63 - 1)), False, None, 4, 256, True, 2, (1,),
                             (f64,), 4), argt((f64,), (f64, i64d), 1), "v2.f64"),
    # one warp per staged tile (row_tile_warp)
    (k.make_rowtile_kernel, (_f_identity, ops.add.fn, 1, f32, np.float32(0), False, None, 1, 256, False, 4,
                             (1,), (f32,), 4, True), argt((f32,), f32, 1), "v4.f32"),
    # ... laid out from the 16-byte boundary, st.shared.v4 (row_tile_v4); A @ x with x global
    (k.make_rowtile_kernel, (_f_identity, ops.add.fn, 1, f32, np.float32(0), False, None, 2, 256, False, 4,
                             (1,), (f32,), 4, True, True), argt((f32,), f32, 1), "v4.u32"),
    (k.make_rowtile_kernel, (_f_mul, ops.add.fn, 2, f32, np.float32(0), False, None, 4, 256, False, 4,
                             (1, 0), (f32, f32), 4, True, True), argt((f32, f32), f32, 2), "v4.u32"),
]
ptxas = os.path.join(os.environ.get("CUDA_HOME", ""), "bin", "ptxas")
for fac, fargs, at, vec in cases:
    ptx = compile_ptx_offline(fac, fargs, at)
    assert ".entry" in ptx
    if vec:
        want = "v4.f32" if vec is True else vec
        assert "ld.global." + want in ptx or "ld.global.nc." + want in ptx, "no 128-bit loads"
        if fac is k.make_rowtile_kernel and len(fargs) > 15 and fargs[15]:
            assert "st.shared.v4" in ptx, "no 128-bit shared stores"
        if fac is k.make_colvec_kernel and len(fargs) > 15 and fargs[15]:
            assert "st.global.v4." in ptx, "no 128-bit result stores"
    if os.path.exists(ptxas):   # no local-memory spills
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as fh:
            fh.write(ptx)
        r = subprocess.run([ptxas, "-arch=sm_90", "-v", fh.name, "-o", os.devnull],
                           capture_output=True, text=True)
        os.unlink(fh.name)
        assert r.returncode == 0, r.stderr[-2000:]
        assert " 0 bytes spill stores" in r.stderr and "bytes spill stores" in r.stderr, r.stderr
        assert r.stderr.count("bytes spill stores") == r.stderr.count(" 0 bytes spill stores"), r.stderr
print("ok", len(cases))
"""


def test_ptx_compiles_offline(offline_ptx):
    assert offline_ptx(PTX_SRC).strip().endswith("ok 19")
