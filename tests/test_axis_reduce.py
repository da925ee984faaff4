"""Axis reductions on the row / column kernels (primitives.axis_reduce), differential
against NumPy: every axis combination of 3-d views, strided / negative / transposed views,
dtypes, tuple accumulators (argmax, Welford), operators without identity, errors, and the
GPU code path compiled to PTX offline."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_array import ops
from forge_array.primitives import axis_reduce as ar

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
@given(n=st.integers(1, 70), p=st.integers(1, 70), axis=st.sampled_from([0, 1, (0, 1)]),
       order=st.sampled_from(["C", "F"]), step=st.sampled_from([1, -1, 2]))
def test_hypothesis_views(bk, n, p, axis, order, step):
    x = np.asarray(np.random.default_rng(n * 100 + p).integers(-9, 9, size=(n, p)), order=order)
    x = x[::step]
    r = ar.axis_mapreduce(None, ops.add, (_dev(bk, x),), axis, None, False, np.dtype("int64"))
    np.testing.assert_array_equal(_host(r), x.sum(axis=axis))


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
    x = np.random.default_rng(11).standard_normal((5, 7))
    r = np.empty(5)
    ar._run_cpu(None or ar._f_identity, ops.add, (x,), r, (1,), F64, np.float64(0), None, False)
    np.testing.assert_allclose(r, x.sum(axis=1))
    r = np.empty(7)
    ar._run_cpu(ar._f_identity, ops.as_operator(_noident), (x,), r, (0,), F64, None, np.float64(9), False)
    np.testing.assert_allclose(r, np.maximum(x.max(axis=0), 9))
    v, i = np.empty(5), np.empty(5, np.int64)
    ar._run_cpu(ar._f_pair_index, ops.argmax, (x,), (v, i), (1,), (F64, np.dtype("int64")),
                ops.argmax.identity((F64, np.dtype("int64"))), None, True)
    np.testing.assert_array_equal(i, x.argmax(axis=1))


PTX_SRC = r"""
import numpy as np
from numba import types as nt
from forge_array import ops
from forge_array.runtime import compile_ptx_offline, ptr_t, i64
from forge_array.kernels import rowcol as k
from forge_array.primitives.axis_reduce import _f_identity, _f_pair_index, _buf_t

def argt(ins, acc, K):
    return ((nt.Tuple(tuple(_buf_t(d) for d in ins)), _buf_t(acc), _buf_t(acc), ptr_t(np.uint32))
            + (i64,) * 4 + (nt.UniTuple(i64, K),) * 4 + (i64,) * 7)

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
for fac, fargs, at, vec in cases:
    ptx = compile_ptx_offline(fac, fargs, at)
    assert ".entry" in ptx
    if vec:
        assert "ld.global.v4.f32" in ptx or "ld.global.nc.v4.f32" in ptx, "no 128-bit loads"
print("ok", len(cases))
"""


def test_ptx_compiles_offline(offline_ptx):
    assert offline_ptx(PTX_SRC).strip().endswith("ok 5")
